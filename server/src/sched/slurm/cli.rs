//! Running Slurm's commands: as root for reading the queue and the nodes, as the user
//! (through `setpriv`, so that munge vouches for the user's own uid and Slurm applies
//! its own permissions) for everything a user does. No shell: arguments are passed
//! as they are. The environment is built from nothing: the portal's own never leaks
//! into a job.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// Whom a command runs as.
#[derive(Debug, Clone)]
pub struct AsUser {
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    pub home: PathBuf,
}

impl AsUser {
    /// `user` as the store knows them.
    pub fn from_posix(user: &str, id: crate::store::PosixIdentity) -> AsUser {
        AsUser {
            user: user.to_string(),
            uid: id.uid,
            gid: id.gid,
            groups: id.supplementary_gids(),
            home: id.home,
        }
    }
}

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

const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl SlurmCli {
    fn program(&self, name: &str) -> PathBuf {
        match &self.bin_dir {
            Some(dir) => dir.join(name),
            None => PathBuf::from(name),
        }
    }

    fn base(&self, program: PathBuf, args: &[String], user: Option<&AsUser>) -> Command {
        let mut cmd = match user.filter(|_| self.switch_user) {
            Some(u) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={}", u.uid))
                    .arg(format!("--regid={}", u.gid));
                if u.groups.is_empty() {
                    c.arg("--clear-groups");
                } else {
                    let list: Vec<String> = u.groups.iter().map(u32::to_string).collect();
                    c.arg(format!("--groups={}", list.join(",")));
                }
                c.arg("--").arg(program);
                c
            }
            None => Command::new(program),
        };
        cmd.args(args)
            .env_clear()
            .env("PATH", PATH)
            .env("LANG", "C.UTF-8")
            // Times as Unix seconds, whatever the site's locale and time zone.
            .env("SLURM_TIME_FORMAT", "%s")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(conf) = &self.conf {
            cmd.env("SLURM_CONF", conf);
        }
        if let Some(u) = user {
            cmd.env("HOME", &u.home)
                .env("USER", &u.user)
                .env("LOGNAME", &u.user)
                .env("SHELL", "/bin/bash");
        }
        cmd
    }

    /// Run `program args` as the portal (reading the queue and nodes, admin changes).
    pub async fn admin(&self, program: &str, args: &[String]) -> Result<String, CliError> {
        self.run(program, args, None, &[], None, None).await
    }

    /// Run `program args` (as `user` when given) with `env` added, `stdin` written to
    /// it, in `cwd`; its standard output when it succeeds.
    pub async fn run(
        &self,
        program: &str,
        args: &[String],
        user: Option<&AsUser>,
        env: &[(String, String)],
        stdin: Option<&str>,
        cwd: Option<&Path>,
    ) -> Result<String, CliError> {
        self.execute(self.program(program), program, args, user, env, stdin, cwd)
            .await
    }

    /// Run a system tool (`sh`, `cat`: found on `PATH`, not in `bin_dir`) as `user`,
    /// with `stdin` written to it; its standard output when it succeeds.
    pub async fn tool(
        &self,
        program: &str,
        args: &[String],
        user: &AsUser,
        stdin: Option<&str>,
    ) -> Result<String, CliError> {
        self.execute(
            PathBuf::from(program),
            program,
            args,
            Some(user),
            &[],
            stdin,
            None,
        )
        .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn execute(
        &self,
        path: PathBuf,
        program: &str,
        args: &[String],
        user: Option<&AsUser>,
        env: &[(String, String)],
        stdin: Option<&str>,
        cwd: Option<&Path>,
    ) -> Result<String, CliError> {
        let mut cmd = self.base(path, args, user);
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let run = async {
            let mut child = cmd
                .spawn()
                .map_err(|e| CliError::Unreachable(format!("cannot run {program}: {e}")))?;
            if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
                pipe.write_all(text.as_bytes())
                    .await
                    .map_err(|e| CliError::Unreachable(format!("{program}: {e}")))?;
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
        if out.status.success() {
            return Ok(stdout);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
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
