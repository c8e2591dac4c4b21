//! Test infrastructure shared by the end-to-end tests: throwaway PostgreSQL databases, LDAP
//! directories and Slurm clusters, a headless browser, Jupyter Server clients, child processes
//! that cannot outlive the test, and deadline-based waiting.
//!
//! System dependencies: run `tests/install-deps.sh` once.

pub mod browser;
pub mod jupyter;
pub mod ldap;
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
