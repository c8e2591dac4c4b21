//! Sessions on a Slurm cluster's compute nodes ([`ComputeNodes`] for the Slurm
//! backend). The session's directory is on shared storage (in the user's home), and
//! the portal writes and reads it as the user: root is often squashed on NFS homes,
//! and acting as the user means a link planted there leads nowhere the user could not
//! go anyway. A node's address is Slurm's `NodeAddr` for it, resolved: the user
//! chooses only a port of a node their own job runs on.
//!
//! Must not touch: sessions' types (what the files are is the caller's), HTTP, SQL.

use std::net::SocketAddr;
use std::path::Path;

use super::cli::{CliError, SlurmCli};
use super::parse;
use crate::privilege::Identity;
use crate::sched::host::{ComputeNodes, HostError, HostFile, HostFuture};

/// Slurm's compute nodes, reached with its commands.
#[derive(Debug, Clone)]
pub struct SlurmNodes {
    cli: SlurmCli,
}

impl SlurmNodes {
    pub fn new(config: &crate::config::SlurmConfig, switch_user: bool) -> SlurmNodes {
        SlurmNodes {
            cli: SlurmCli::from_config(config, switch_user),
        }
    }

    async fn sh(
        &self,
        user: &Identity,
        script: &str,
        arg: &Path,
        stdin: Option<&str>,
    ) -> Result<String, CliError> {
        self.cli
            .tool(
                "sh",
                &[
                    "-c".into(),
                    script.into(),
                    "sh".into(),
                    arg.display().to_string(),
                ],
                user,
                stdin,
            )
            .await
    }

    async fn prepare_dir(
        &self,
        user: &Identity,
        dir: &Path,
        files: &[HostFile<'_>],
    ) -> Result<(), CliError> {
        self.sh(
            user,
            "umask 077 && rm -rf -- \"$1\" && mkdir -p -- \"$1/runtime\"",
            dir,
            None,
        )
        .await?;
        for file in files {
            let umask = if file.private { "077" } else { "022" };
            self.sh(
                user,
                &format!("umask {umask} && cat >\"$1\""),
                &dir.join(file.name),
                Some(file.contents),
            )
            .await?;
        }
        Ok(())
    }

    async fn node_address(&self, node: &str, port: u16) -> Result<SocketAddr, CliError> {
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
}

fn host_error(e: CliError) -> HostError {
    HostError(e.to_string())
}

impl ComputeNodes for SlurmNodes {
    fn prepare<'a>(
        &'a self,
        user: &'a Identity,
        dir: &'a Path,
        files: &'a [HostFile<'a>],
    ) -> HostFuture<'a, Result<(), HostError>> {
        Box::pin(async move { self.prepare_dir(user, dir, files).await.map_err(host_error) })
    }

    fn read<'a>(
        &'a self,
        user: &'a Identity,
        path: &'a Path,
        max: usize,
    ) -> HostFuture<'a, Result<String, HostError>> {
        Box::pin(async move {
            // No file yet is not an error; a file that cannot be read is.
            self.sh(
                user,
                &format!("[ -e \"$1\" ] || exit 0; head -c {max} -- \"$1\""),
                path,
                None,
            )
            .await
            .map_err(host_error)
        })
    }

    fn tail<'a>(
        &'a self,
        user: &'a Identity,
        path: &'a Path,
        lines: usize,
    ) -> HostFuture<'a, Option<String>> {
        Box::pin(async move {
            self.cli
                .tool(
                    "tail",
                    &[
                        "-n".into(),
                        lines.to_string(),
                        "--".into(),
                        path.display().to_string(),
                    ],
                    user,
                    None,
                )
                .await
                .ok()
        })
    }

    fn remove<'a>(
        &'a self,
        user: &'a Identity,
        dir: &'a Path,
    ) -> HostFuture<'a, Result<(), HostError>> {
        Box::pin(async move {
            self.cli
                .tool(
                    "rm",
                    &["-rf".into(), "--".into(), dir.display().to_string()],
                    user,
                    None,
                )
                .await
                .map(drop)
                .map_err(host_error)
        })
    }

    fn address<'a>(
        &'a self,
        node: &'a str,
        port: u16,
    ) -> HostFuture<'a, Result<SocketAddr, HostError>> {
        Box::pin(async move { self.node_address(node, port).await.map_err(host_error) })
    }
}
