//! The portal: every service, built once by `startup`, behind every face (the JSON
//! API, the pages, the proxy).
//!
//! Owns: the set of services and the database's readiness. Handlers reach the
//! portal's work only through it; what only HTTP needs (the login limiter, cookies'
//! `Secure`, trusted proxies, the metrics registry) stays in `http::AppState`.
//! Must not touch: HTTP, SQL (the services and the store do it), rules (each
//! service holds its own).

use std::sync::Arc;

use crate::auth::Authenticator;
use crate::config::Config;
use crate::homes::Homes;
use crate::services::{
    Accounts, Announcements, Audit, Benchmarks, Campaigns, Cluster, Files, Jobs, Nodes, Quotas,
    Usage,
};
use crate::sessions::Sessions;
use crate::store::{Store, StoreError};

/// Every service of the portal, each built once.
#[derive(Debug)]
pub struct Portal {
    pub config: Arc<Config>,
    /// Logins, sessions' cookies and API tokens.
    pub auth: Arc<Authenticator>,
    /// Users' homes and templates, prepared at login.
    pub homes: Arc<Homes>,
    pub accounts: Accounts,
    pub audit: Audit,
    pub jobs: Jobs,
    pub sessions: Sessions,
    pub quotas: Quotas,
    pub benchmarks: Benchmarks,
    /// Benchmark campaigns.
    pub campaigns: Campaigns,
    pub nodes: Nodes,
    /// The cluster's nodes, partitions, queue counts and GPUs.
    pub cluster: Cluster,
    pub usage: Usage,
    /// The Files app.
    pub files: Files,
    /// Administrators' messages to everyone.
    pub announcements: Announcements,
    /// Only for readiness: every other use of the database is a service's.
    pub(crate) store: Store,
}

impl Portal {
    /// The portal can serve: its database answers.
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }
}
