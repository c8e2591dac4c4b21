//! Test infrastructure shared by the end-to-end tests: throwaway PostgreSQL databases, LDAP
//! directories and Slurm clusters, a headless browser, Jupyter Server clients, child processes
//! that cannot outlive the test, and deadline-based waiting.
//!
//! System dependencies: run `tests/install-deps.sh` once.

pub mod browser;
pub mod jupyter;
pub mod ldap;
pub mod many_users;
pub mod pg;
pub mod process;
pub mod slurm;
pub mod wait;

pub use browser::{browser, Browser};
pub use jupyter::{JupyterServer, WsProtocol};
pub use ldap::{Slapd, SlapdOptions};
pub use pg::{fresh_database, PgDatabase};
pub use process::{find_binary, ChildGuard, Supervised, SupervisedCommand};
pub use slurm::{Slurm, SlurmOptions};
pub use wait::until;

/// A port on 127.0.0.1 that was free a moment ago, for servers that cannot listen on port 0
/// or whose port goes into a configuration file first (slapd, Slurm).
pub fn free_port() -> anyhow::Result<u16> {
    use anyhow::Context as _;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .context("binding 127.0.0.1:0 to find a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Whether this is a CI run (`CI` set, other than to `false` or `0`): there a missing test
/// dependency fails the test that needs it instead of skipping it.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Whether fixtures print their timings (`ATRIUM_TEST_VERBOSE` set).
pub fn verbose() -> bool {
    std::env::var_os("ATRIUM_TEST_VERBOSE").is_some()
}

/// A fresh directory `$TMPDIR/<prefix>XXXX` handed to its keeper, the process `spawn_keeper`
/// starts, which removes it when it ends (however the test ends). Where the keeper cannot
/// start, the directory is removed here.
pub fn kept_dir(
    prefix: &str,
    spawn_keeper: impl FnOnce(&std::path::Path) -> anyhow::Result<Supervised>,
) -> anyhow::Result<(std::path::PathBuf, Supervised)> {
    use anyhow::Context as _;
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .with_context(|| format!("creating temp dir {prefix}*"))?
        .keep();
    match spawn_keeper(&dir) {
        Ok(keeper) => Ok((dir, keeper)),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            Err(e)
        }
    }
}
