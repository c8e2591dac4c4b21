//! Running Slurm's commands: as root for reading the queue and the nodes, as the user
//! (through the privilege boundary's `UserCommand`, so that munge vouches for the
//! user's own uid and Slurm applies its own permissions) for everything a user does.
//! No shell: arguments are passed as they are. Programs are named by absolute path
//! (`[slurm] bin_dir`, else the system's directories). The environment is built from
//! nothing: the portal's own never leaks into a job, and a job's variables reach only
//! the command run as its user, after the switch.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use crate::privilege::{Identity, UserCommand};

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Slurm answered with an error (its message, for the user).
    #[error("{0}")]
    Refused(String),
    /// The command could not run or did not answer in time: Slurm is unreachable.
    #[error("{0}")]
    Unreachable(String),
}

/// How to run the commands.
#[derive(Debug, Clone)]
pub struct SlurmCli {
    pub bin_dir: Option<PathBuf>,
    pub conf: Option<PathBuf>,
    pub timeout: Duration,
    /// Switch to the user for user commands (the portal runs as root).
    pub switch_user: bool,
}

impl SlurmCli {
    /// The commands as `[slurm]` configures them.
    pub fn from_config(config: &crate::config::SlurmConfig, switch_user: bool) -> SlurmCli {
        SlurmCli {
            bin_dir: config.bin_dir.clone(),
            conf: config.conf.clone(),
            timeout: config.command_timeout.0,
            switch_user,
        }
    }
}

impl SlurmCli {
    /// `name` as root runs it: in `bin_dir` when configured, else in the system's
    /// directories; never looked up on a `PATH` a user could set.
    fn program(&self, name: &str) -> PathBuf {
        match &self.bin_dir {
            Some(dir) => dir.join(name),
            None => crate::privilege::system_program(name),
        }
    }

    /// The variables every Slurm command gets, after any of the user's.
    fn slurm_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            // Times as Unix seconds, whatever the site's locale and time zone.
            ("SLURM_TIME_FORMAT".to_string(), "%s".to_string()),
        ];
        if let Some(conf) = &self.conf {
            env.push(("SLURM_CONF".into(), conf.display().to_string()));
        }
        env
    }

    /// Run `program args` as the portal (reading the queue and nodes, admin changes).
    pub async fn admin(&self, program: &str, args: &[String]) -> Result<String, CliError> {
        self.run(program, args, None, &[], None, None).await
    }

    /// Run `program args` (as `user` when given) with `env` added, `stdin` written to
    /// it, in `cwd` (entered as the user); its standard output when it succeeds. The
    /// user's `env` reaches only the program, after the switch to the user; as root,
    /// the program gets the fixed environment alone.
    pub async fn run(
        &self,
        program: &str,
        args: &[String],
        user: Option<&Identity>,
        env: &[(String, String)],
        stdin: Option<&str>,
        cwd: Option<&Path>,
    ) -> Result<String, CliError> {
        self.execute(self.program(program), program, args, user, env, stdin, cwd)
            .await
            .map(|(stdout, _)| stdout)
    }

    /// [`Self::run`] as `user`, answering standard output and standard error (where
    /// `sbatch --test-only` answers).
    pub async fn run_answering_both(
        &self,
        program: &str,
        args: &[String],
        user: &Identity,
        env: &[(String, String)],
        stdin: Option<&str>,
        cwd: Option<&Path>,
    ) -> Result<(String, String), CliError> {
        self.execute(
            self.program(program),
            program,
            args,
            Some(user),
            env,
            stdin,
            cwd,
        )
        .await
    }

    /// Run a system tool (`sh`, `cat`: from the system's directories, not `bin_dir`)
    /// as `user`, with `stdin` written to it; its standard output when it succeeds.
    pub async fn tool(
        &self,
        program: &str,
        args: &[String],
        user: &Identity,
        stdin: Option<&str>,
    ) -> Result<String, CliError> {
        self.execute(
            crate::privilege::system_program(program),
            program,
            args,
            Some(user),
            &[],
            stdin,
            None,
        )
        .await
        .map(|(stdout, _)| stdout)
    }

    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &self,
        path: PathBuf,
        program: &str,
        args: &[String],
        user: Option<&Identity>,
        env: &[(String, String)],
        stdin: Option<&str>,
        cwd: Option<&Path>,
    ) -> Result<(String, String), CliError> {
        let cannot =
            |e: std::io::Error| CliError::Unreachable(format!("cannot run {program}: {e}"));
        let run = async {
            let (child, pipe) = match user.filter(|_| self.switch_user) {
                Some(u) => {
                    let mut command = UserCommand::new(u, path.clone())
                        .args(args.iter().cloned())
                        .envs(env)
                        .envs(&self.slurm_env());
                    if let Some(dir) = cwd {
                        command = command.current_dir(dir);
                    }
                    let (child, pipe) = command
                        .spawn(Stdio::piped(), Stdio::piped())
                        .await
                        .map_err(cannot)?;
                    (child, Some(pipe))
                }
                None => {
                    let mut cmd = Command::new(&path);
                    cmd.args(args)
                        .env_clear()
                        .envs(crate::privilege::base_env())
                        .envs(user.map(Identity::login_env).unwrap_or_default())
                        .envs(env.iter().map(|(k, v)| (k, v)))
                        .envs(self.slurm_env())
                        .stdin(if stdin.is_some() {
                            Stdio::piped()
                        } else {
                            Stdio::null()
                        })
                        .stdout(Stdio::piped())
                        .stderr(Stdio::piped())
                        .kill_on_drop(true);
                    if let Some(dir) = cwd {
                        cmd.current_dir(dir);
                    }
                    let mut child = cmd.spawn().map_err(cannot)?;
                    let pipe = child.stdin.take();
                    (child, pipe)
                }
            };
            if let Some(mut pipe) = pipe {
                if let Some(text) = stdin {
                    pipe.write_all(text.as_bytes())
                        .await
                        .map_err(|e| CliError::Unreachable(format!("{program}: {e}")))?;
                }
                drop(pipe);
            }
            child
                .wait_with_output()
                .await
                .map_err(|e| CliError::Unreachable(format!("{program}: {e}")))
        };
        let out = tokio::time::timeout(self.timeout, run)
            .await
            .map_err(|_| {
                CliError::Unreachable(format!(
                    "{program} did not answer within {} s",
                    self.timeout.as_secs()
                ))
            })??;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            return Ok((stdout, stderr.into_owned()));
        }
        let message = stderr
            .lines()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .map(|l| l.strip_prefix(&format!("{program}: ")).unwrap_or(l))
            .map(|l| l.strip_prefix("error: ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("; ");
        let message = if message.is_empty() {
            format!("{program} failed ({})", out.status)
        } else {
            message
        };
        if unreachable(&message) {
            Err(CliError::Unreachable(message))
        } else {
            Err(CliError::Refused(message))
        }
    }
}

/// Whether an error message says the controller could not be reached (rather than
/// refusing the request).
fn unreachable(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "unable to contact slurm controller",
        "connection refused",
        "socket timed out",
        "communication connection failure",
        "slurm_load_jobs error",
        "slurm_load_node error",
        "slurm_load_partitions error",
        "unable to establish controller",
        "zero bytes were transmitted",
        "munge",
    ]
    .iter()
    .any(|p| m.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_outages_are_told_from_refusals() {
        assert!(unreachable(
            "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
        ));
        assert!(!unreachable(
            "Batch job submission failed: Invalid generic resource (gres) specification"
        ));
    }
}
