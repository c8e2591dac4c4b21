//! Black-box tests of the atrium binary: each test starts its own portal on port 0
//! with its own data directory and database.
//!
//! `fixtures` holds what the tests start and share; every other module is a scenario
//! module that imports only the fixtures (never another scenario). `tests/README.md`
//! maps the modules.

mod fixtures;

// The scenarios, by module.
mod accounting;
mod admin;
mod admin_access;
mod admin_views;
mod admission;
mod apps;
mod backup;
mod benchmarks;
mod browser;
mod campaigns;
mod cli;
mod compat;
mod deploy;
mod differential;
mod doctor;
mod efficiency;
mod files;
mod files_transfers;
mod first_hour;
mod first_hour_jobs;
mod homes;
mod hostile;
mod http_basics;
mod job_pages;
mod job_signals;
mod jobs;
mod jobs_crash;
mod ldap;
mod login;
mod many_users;
mod metrics;
mod notify;
mod package;
mod pages;
mod postgres;
mod privilege;
mod proxy_security;
mod quotas;
mod salloc;
mod scheduler_restore;
mod sessions;
mod slurm;
mod slurm_cli;
mod slurm_nodes;
mod slurm_query;
mod slurm_stats;
mod slurm_tools;
mod srun;
mod tls;
mod tokens;
mod upgrade;
