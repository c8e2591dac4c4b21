//! Black-box tests of the atrium binary: each test starts its own portal on port 0
//! with its own data directory and database.

mod accounting;
mod admin;
mod admission;
mod backup;
mod benchmarks;
mod browser;
mod cli;
mod compat;
mod deploy;
mod differential;
mod helpers;
mod homes;
mod hostile;
mod http_basics;
mod job_signals;
mod jobs;
mod jobs_crash;
mod ldap;
mod login;
mod many_users;
mod metrics;
mod notify;
mod postgres;
mod privilege;
mod package;
mod proxy_security;
mod quotas;
mod scheduler_restore;
mod sessions;
mod slurm;
mod slurm_cli;
mod slurm_nodes;
mod srun;
mod tls;
mod tokens;
