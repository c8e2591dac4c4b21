//! Where an interactive session's server lives, as the sessions service sees it: on
//! this machine (internal backend) or on a compute node of the cluster (Slurm), and
//! how the portal prepares, reads and removes the session's directory there.
//!
//! - [`SessionHost::Local`]: a 0700 directory per session under the spool
//!   (`<spool>/sessions/<id>`), written by the portal and handed to the user; the
//!   server runs in the environment's container and listens on a unix socket there.
//! - [`SessionHost::Node`]: the directory is in the user's home on shared storage
//!   (`~/.atrium/sessions/<id>`), written and read *as the user* through
//!   [`ComputeNodes`]; the server listens on a TCP port of the node its job runs on,
//!   and proves it knows the session's token before the proxy sends it anything.
//!
//! Owns: the choice of host for a configuration, and the local directory's files.
//! Must not touch: sessions' own types (this module is below `sessions`), HTTP, SQL.
//! The backend-specific part of a remote host lives with its backend
//! (`slurm::nodes`), behind [`ComputeNodes`].

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use crate::privilege::Identity;

/// A boxed future of a [`ComputeNodes`] call.
pub type HostFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Why the host could not do what was asked (for the log; never for the client).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HostError(pub String);

impl From<std::io::Error> for HostError {
    fn from(e: std::io::Error) -> Self {
        HostError(e.to_string())
    }
}

/// A file written into a session's directory when it is prepared.
#[derive(Debug, Clone, Copy)]
pub struct HostFile<'a> {
    /// Its name inside the directory.
    pub name: &'a str,
    pub contents: &'a str,
    /// 0600 (a secret: the token); else 0644 (code the server runs).
    pub private: bool,
}

/// What a cluster backend does for sessions on its compute nodes; every file
/// operation runs as the session's user.
pub trait ComputeNodes: Send + Sync + fmt::Debug {
    /// Make `dir` afresh (0700, with a 0700 `runtime` folder) and write `files`.
    fn prepare<'a>(
        &'a self,
        user: &'a Identity,
        dir: &'a Path,
        files: &'a [HostFile<'a>],
    ) -> HostFuture<'a, Result<(), HostError>>;

    /// The first `max` bytes of `path`; empty when there is no such file yet.
    fn read<'a>(
        &'a self,
        user: &'a Identity,
        path: &'a Path,
        max: usize,
    ) -> HostFuture<'a, Result<String, HostError>>;

    /// The last `lines` lines of `path`, if it can be read.
    fn tail<'a>(
        &'a self,
        user: &'a Identity,
        path: &'a Path,
        lines: usize,
    ) -> HostFuture<'a, Option<String>>;

    /// Remove `dir` and everything in it.
    fn remove<'a>(
        &'a self,
        user: &'a Identity,
        dir: &'a Path,
    ) -> HostFuture<'a, Result<(), HostError>>;

    /// The address of `node` (as the backend names nodes) at `port`.
    fn address<'a>(
        &'a self,
        node: &'a str,
        port: u16,
    ) -> HostFuture<'a, Result<SocketAddr, HostError>>;
}

/// Sessions on this machine.
#[derive(Debug, Clone)]
pub struct LocalHost {
    /// `<spool>/sessions`: one directory per session.
    pub root: PathBuf,
    /// Hand the session's files to its user (the portal runs as root).
    pub chown: bool,
    /// The partition sessions go to (`[sessions] partition`).
    pub partition: Option<String>,
}

/// Sessions on a cluster's compute nodes.
#[derive(Debug, Clone)]
pub struct NodeHost {
    pub nodes: Arc<dyn ComputeNodes>,
    /// The address servers listen on (`[slurm] session_listen`).
    pub listen: String,
    /// The partition sessions go to, if one is configured.
    pub partition: Option<String>,
}

/// Where sessions' servers run.
#[derive(Debug, Clone)]
pub enum SessionHost {
    Local(LocalHost),
    Node(NodeHost),
}

impl SessionHost {
    /// Sessions on compute nodes reached through `nodes` (the Slurm backend's).
    pub fn on_nodes(nodes: Arc<dyn ComputeNodes>, config: &crate::config::Config) -> SessionHost {
        SessionHost::Node(NodeHost {
            nodes,
            listen: config.slurm.session_listen.clone(),
            partition: config
                .slurm
                .session_partition
                .clone()
                .or_else(|| config.sessions.partition.clone()),
        })
    }

    /// Sessions on this machine, in `<spool>/sessions` (made, mode 0711).
    pub fn local(
        config: &crate::config::Config,
        spool_dir: &Path,
        drop_privileges: bool,
    ) -> std::io::Result<SessionHost> {
        let root = spool_dir.join("sessions");
        std::fs::create_dir_all(&root)?;
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o711))?;
        Ok(SessionHost::Local(LocalHost {
            root,
            chown: drop_privileges,
            partition: config.sessions.partition.clone(),
        }))
    }

    /// Whether sessions run on this machine (in their environment's container).
    pub fn is_local(&self) -> bool {
        matches!(self, SessionHost::Local(_))
    }

    /// The folder the sessions' directories of a user with home `home` go in.
    pub fn root(&self, home: &Path) -> PathBuf {
        match self {
            SessionHost::Local(l) => l.root.clone(),
            SessionHost::Node(_) => home.join(".atrium").join("sessions"),
        }
    }

    /// The partition sessions are submitted to, if one is configured.
    pub fn partition(&self) -> Option<&str> {
        match self {
            SessionHost::Local(l) => l.partition.as_deref(),
            SessionHost::Node(n) => n.partition.as_deref(),
        }
    }

    /// Make the session's directory afresh, the user's, with `files` in it.
    pub async fn prepare(
        &self,
        user: &Identity,
        dir: &Path,
        files: &[HostFile<'_>],
    ) -> Result<(), HostError> {
        match self {
            SessionHost::Local(l) => Ok(l.prepare(user, dir, files)?),
            SessionHost::Node(n) => n.nodes.prepare(user, dir, files).await,
        }
    }

    /// The last `lines` lines of the session's log `path`, read as `user` on a node
    /// (nothing without one), on this machine only from a plain file of theirs (the
    /// portal's own when `user` is `None`).
    pub async fn tail(&self, user: Option<&Identity>, path: &Path, lines: usize) -> Option<String> {
        match self {
            SessionHost::Local(_) => {
                let owner = user.map_or_else(|| crate::launch::current_ids().0, |u| u.uid);
                local_tail(path, owner, lines)
            }
            SessionHost::Node(n) => n.nodes.tail(user?, path, lines).await,
        }
    }

    /// Remove the session's directory (as `user` on a node; on this machine only a
    /// directory under the sessions' root).
    pub async fn remove(&self, user: Option<&Identity>, dir: &Path) {
        let result = match (self, user) {
            (SessionHost::Local(l), _) => {
                if !dir.starts_with(&l.root) || dir == l.root {
                    return;
                }
                std::fs::remove_dir_all(dir).map_err(HostError::from)
            }
            (SessionHost::Node(n), Some(user)) => n.nodes.remove(user, dir).await,
            (SessionHost::Node(_), None) => return,
        };
        if let Err(e) = result {
            tracing::warn!(dir = %dir.display(), error = %e, "removing a session's directory failed");
        }
    }
}

impl LocalHost {
    /// The directory (0700) with its `runtime` folder (0700) and `files`, handed to
    /// `user` when the portal runs as root.
    fn prepare(&self, user: &Identity, dir: &Path, files: &[HostFile<'_>]) -> std::io::Result<()> {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        std::fs::create_dir(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        let runtime = dir.join("runtime");
        std::fs::create_dir(&runtime)?;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))?;
        let mut owned = vec![dir.to_path_buf(), runtime];
        for file in files {
            let path = dir.join(file.name);
            let mode = if file.private { 0o600 } else { 0o644 };
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&path)
                .and_then(|mut f| std::io::Write::write_all(&mut f, file.contents.as_bytes()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
            owned.push(path);
        }
        if self.chown {
            for p in owned {
                std::os::unix::fs::chown(&p, Some(user.uid), Some(user.gid))?;
            }
        }
        Ok(())
    }
}

/// The end of a log on this machine, read without following links and only from a
/// plain file of `owner`'s (the directory is theirs to change).
fn local_tail(path: &Path, owner: u32, lines: usize) -> Option<String> {
    let text = crate::launch::read_tail_owned(path, owner, 8192).ok()??;
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(lines);
    Some(all[from..].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Identity {
        let (uid, gid) = crate::launch::current_ids();
        Identity {
            user: "me".into(),
            uid,
            gid,
            groups: Vec::new(),
            home: PathBuf::from("/"),
        }
    }

    #[test]
    fn the_local_tail_refuses_links() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("session.log");
        let lines: Vec<String> = (0..40).map(|i| format!("line {i}")).collect();
        std::fs::write(&log, lines.join("\n")).expect("write");
        let me = crate::launch::current_ids().0;
        let tail = local_tail(&log, me, 25).expect("tail");
        assert!(
            tail.starts_with("line 15\n") && tail.ends_with("line 39"),
            "{tail}"
        );
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&log, &link).expect("symlink");
        assert_eq!(local_tail(&link, me, 25), None);
        assert_eq!(local_tail(&log, u32::MAX - 7, 25), None);
    }

    #[tokio::test]
    async fn a_local_directory_is_private_with_its_files_and_removed_only_under_the_root() {
        let spool = tempfile::tempdir().expect("tempdir");
        let host = SessionHost::Local(LocalHost {
            root: spool.path().to_path_buf(),
            chown: false,
            partition: None,
        });
        let dir = spool.path().join("7");
        let files = [
            HostFile {
                name: "token",
                contents: "secret\n",
                private: true,
            },
            HostFile {
                name: "launcher.py",
                contents: "print()\n",
                private: false,
            },
        ];
        host.prepare(&me(), &dir, &files).await.expect("prepare");
        // Again: the directory is made afresh.
        host.prepare(&me(), &dir, &files).await.expect("again");
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o777)
                .ok()
        };
        assert_eq!(mode(&dir), Some(0o700));
        assert_eq!(mode(&dir.join("runtime")), Some(0o700));
        assert_eq!(mode(&dir.join("token")), Some(0o600));
        assert_eq!(mode(&dir.join("launcher.py")), Some(0o644));
        assert_eq!(
            std::fs::read_to_string(dir.join("token")).ok().as_deref(),
            Some("secret\n")
        );
        host.remove(None, spool.path()).await;
        assert!(spool.path().exists(), "the root itself stays");
        host.remove(None, &dir).await;
        assert!(!dir.exists());
    }
}
