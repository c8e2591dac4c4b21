//! `GET /admin`: the cluster at a glance (accounts, jobs, sessions, nodes, quotas)
//! and the latest audited changes.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;

use super::AdminUser;
use crate::http::pages::{render, Nav};
use crate::http::{ApiError, AppState};
use crate::services::audit::AuditInfo;
use crate::services::quotas::fmt_num;

/// How many audit entries the overview shows.
const LATEST: i64 = 10;

#[derive(Template)]
#[template(path = "admin/overview.html")]
struct OverviewPage {
    nav: Nav,
    users: u64,
    admins: usize,
    disabled: u64,
    groups: usize,
    running_jobs: u32,
    pending_jobs: u32,
    running_sessions: u32,
    gpus_in_use: String,
    /// `IDLE 2`, one per state.
    node_states: Vec<String>,
    quotas: usize,
    period: String,
    latest: Vec<AuditInfo>,
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    let accounts = state.accounts.summary().await?;
    let (nodes, _) = state.scheduler.nodes().await?;
    let mut node_states: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &nodes {
        *node_states.entry(n.state.name()).or_default() += 1;
    }
    let page = OverviewPage {
        nav: Nav::of(&admin.0).at(crate::http::pages::Section::Admin),
        users: accounts.users,
        admins: accounts.admins,
        disabled: accounts.disabled,
        groups: accounts.groups,
        running_jobs: accounts.running_jobs,
        pending_jobs: accounts.pending_jobs,
        running_sessions: accounts.running_sessions,
        gpus_in_use: fmt_num(accounts.gpus_in_use),
        node_states: node_states
            .into_iter()
            .map(|(s, n)| format!("{s} {n}"))
            .collect(),
        quotas: state.quotas.all().len(),
        period: state.quotas.period_name(),
        latest: state.audit.recent(LATEST).await?,
    };
    render(&page, StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    #[test]
    fn overview_counts_and_links_every_section() {
        let html = OverviewPage {
            nav: nav(),
            users: 3,
            admins: 1,
            disabled: 1,
            groups: 2,
            running_jobs: 4,
            pending_jobs: 5,
            running_sessions: 6,
            gpus_in_use: "1.5".into(),
            node_states: vec!["DRAIN 1".into(), "IDLE 2".into()],
            quotas: 7,
            period: "month".into(),
            latest: Vec::new(),
        }
        .render()
        .expect("render");
        for section in [
            "users", "groups", "quotas", "jobs", "sessions", "nodes", "audit",
        ] {
            assert!(
                html.contains(&format!("href=\"/admin/{section}\"")),
                "{section}: {html}"
            );
        }
        assert!(html.contains("3 (1 administrators, 1 disabled)"), "{html}");
        assert!(html.contains("4 running, 5 pending"), "{html}");
        assert!(html.contains("DRAIN 1, IDLE 2"), "{html}");
    }
}
