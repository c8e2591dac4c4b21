//! atrium: a portal for data scientists on GPU clusters.
//!
//! The binary's modules: configuration, the store, authentication, HTTP (API and
//! pages), usage accounting, metrics, startup and the command line. The Slurm-style
//! client is the `atrium-client` crate, which the command line calls.

pub mod accounting;
pub mod auth;
pub mod benchmarks;
pub mod cli;
pub mod config;
pub mod csv;
pub mod doctor;
pub mod domain;
pub mod homes;
pub mod http;
pub mod identities;
pub mod launch;
pub mod metrics;
pub mod notifications;
pub mod portal;
pub mod privilege;
pub mod sched;
pub mod services;
pub mod sessions;
pub mod startup;

pub mod store;
pub mod telemetry;
pub mod user_files;
pub mod util;
