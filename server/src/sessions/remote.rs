//! Sessions on a Slurm cluster's compute nodes. The session's directory is on shared
//! storage (`~/.atrium/sessions/<id>/` in the user's home), and the portal writes and
//! reads it as the user: root is often squashed on NFS homes, and acting as the user
//! means a link planted there leads nowhere the user could not go anyway.
//!
//! The server reads its token from a 0600 file there (never from the job's
//! environment, which Slurm keeps) and names its port in the connection file. The
//! proxy's address is the node Slurm runs the job on (its `NodeAddr`) with that port:
//! the user chooses only a port of a node their own job runs on, and the proxy sends
//! nothing there until the server proves it knows the session's token
//! (`upstream::Proof`).
//!
//! Must not touch: HTTP types, SQL (the store), the session's lifecycle (`watch`).

use std::net::SocketAddr;
use std::path::Path;

use serde::Deserialize;

use super::script;
use crate::privilege::Identity;
use crate::sched::slurm::cli::{CliError, SlurmCli};
use crate::sched::slurm::parse;

/// Lines of the server's log kept when a session fails.
const LOG_LINES: usize = 25;

/// How the portal reaches sessions on compute nodes.
#[derive(Debug, Clone)]
pub struct Remote {
    cli: SlurmCli,
    /// The address servers listen on (`[slurm] session_listen`).
    pub listen: String,
    /// The partition sessions go to, if one is configured.
    pub partition: Option<String>,
}

/// The connection file as the session's script writes it.
#[derive(Debug, Deserialize)]
struct Connection {
    port: u16,
}

impl Remote {
    pub fn new(config: &crate::config::Config, switch_user: bool) -> Remote {
        Remote {
            cli: SlurmCli::from_config(&config.slurm, switch_user),
            listen: config.slurm.session_listen.clone(),
            partition: config
                .slurm
                .session_partition
                .clone()
                .or_else(|| config.sessions.partition.clone()),
        }
    }

    /// A fresh 0700 directory for the session with its `runtime` folder, the token
    /// file (0600) and, for TensorBoard, the launcher: all written as the user.
    pub async fn prepare(
        &self,
        user: &Identity,
        dir: &Path,
        secret: &str,
        tensorboard: bool,
    ) -> Result<(), CliError> {
        let dir_s = dir.display().to_string();
        self.cli
            .tool(
                "sh",
                &[
                    "-c".into(),
                    format!(
                        "umask 077 && rm -rf -- \"$1\" && mkdir -p -- \"$1/runtime\" && \
                         cat >\"$1/{}\"",
                        script::TOKEN_FILE
                    ),
                    "sh".into(),
                    dir_s.clone(),
                ],
                user,
                Some(&format!("{secret}\n")),
            )
            .await?;
        // The TensorBoard launcher, or Jupyter's proof extension: each answers the
        // proxy's challenge with the token.
        let (name, source) = if tensorboard {
            (
                script::TENSORBOARD_LAUNCHER,
                script::TENSORBOARD_LAUNCHER_SOURCE,
            )
        } else {
            (script::PROOF_EXTENSION, script::PROOF_EXTENSION_SOURCE)
        };
        self.cli
            .tool(
                "sh",
                &[
                    "-c".into(),
                    "umask 022 && cat >\"$1\"".into(),
                    "sh".into(),
                    dir.join(name).display().to_string(),
                ],
                user,
                Some(source),
            )
            .await?;
        Ok(())
    }

    /// The port the server named in its connection file; `None` while there is none.
    pub async fn port(&self, user: &Identity, dir: &Path) -> Result<Option<u16>, CliError> {
        let path = dir.join(script::CONNECTION_FILE);
        let text = self
            .cli
            .tool(
                "sh",
                &[
                    "-c".into(),
                    // No file yet is not an error; a file that cannot be read is.
                    "[ -e \"$1\" ] || exit 0; head -c 4096 -- \"$1\"".into(),
                    "sh".into(),
                    path.display().to_string(),
                ],
                user,
                None,
            )
            .await?;
        connection_port(&text).map_err(|m| CliError::Refused(format!("{}: {m}", path.display())))
    }

    /// The address of `node` (Slurm's `NodeAddr`, resolved) at `port`.
    pub async fn address(&self, node: &str, port: u16) -> Result<SocketAddr, CliError> {
        let out = self
            .cli
            .admin(
                "scontrol",
                &["show".into(), "node".into(), node.into(), "-o".into()],
            )
            .await?;
        let host = parse::records(&out)
            .into_iter()
            .find(|r| r.get("NodeName").is_some_and(|n| n == node))
            .and_then(|r| r.get("NodeAddr").cloned())
            .filter(|a| !a.is_empty() && a != "(null)")
            .unwrap_or_else(|| node.to_string());
        let mut found = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| CliError::Unreachable(format!("resolving node {node} ({host}): {e}")))?;
        found
            .next()
            .ok_or_else(|| CliError::Unreachable(format!("node {node} ({host}) has no address")))
    }

    /// The end of the server's log, read as the user.
    pub async fn log_tail(&self, user: &Identity, dir: &Path) -> Option<String> {
        self.cli
            .tool(
                "tail",
                &[
                    "-n".into(),
                    LOG_LINES.to_string(),
                    "--".into(),
                    dir.join("session.log").display().to_string(),
                ],
                user,
                None,
            )
            .await
            .ok()
    }

    /// Remove the session's directory, as the user.
    pub async fn remove(&self, user: &Identity, dir: &Path) {
        if let Err(e) = self
            .cli
            .tool(
                "rm",
                &["-rf".into(), "--".into(), dir.display().to_string()],
                user,
                None,
            )
            .await
        {
            tracing::warn!(dir = %dir.display(), error = %e, "removing a session's directory failed");
        }
    }
}

/// The port a connection file names (`None`: empty, not written yet). The user writes
/// the file, so only a port above the privileged range is taken.
fn connection_port(text: &str) -> Result<Option<u16>, String> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    let connection: Connection =
        serde_json::from_str(text).map_err(|e| format!("not a connection file: {e}"))?;
    if connection.port < 1024 {
        return Err(format!(
            "names port {}: a session listens on a port above 1023",
            connection.port
        ));
    }
    Ok(Some(connection.port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_file_names_an_unprivileged_port() {
        assert_eq!(connection_port(""), Ok(None));
        assert_eq!(
            connection_port("{\"host\": \"gpu07\", \"port\": 41234}\n"),
            Ok(Some(41234))
        );
        assert!(connection_port("{\"host\": \"gpu07\", \"port\": 22}").is_err());
        assert!(connection_port("{\"port\": 70000}").is_err());
        assert!(connection_port("port=8888").is_err());
    }
}
