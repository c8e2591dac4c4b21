//! `GET /admin`: the cluster at a glance (accounts, jobs, sessions, nodes, quotas),
//! its utilisation over the last 30 days (GPU-hours used per day against what the
//! GPUs could give, from the accounting records) and the latest audited changes.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;

use super::AdminUser;
use crate::accounting::utilisation::{self, Utilisation};
use crate::accounting::{bucket_text, Query};
use crate::http::pages::when::filters;
use crate::http::pages::{render, Nav};
use crate::http::{ApiError, AppState};
use crate::services::audit::AuditInfo;
use crate::services::quotas::fmt_num;
use crate::store::{bucket_bounds, UsageKey};

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
    /// The utilisation chart (SVG drawn by the portal from numbers and dates only)
    /// and its summary in words.
    utilisation_svg: String,
    utilisation: String,
    latest: Vec<AuditInfo>,
}

/// Days the utilisation chart covers, today included.
const DAYS: i64 = 30;

/// The utilisation of the last [`DAYS`] days.
async fn utilisation(state: &AppState) -> Result<Utilisation, ApiError> {
    const DAY: i64 = 86_400_000;
    let now = crate::util::now_ms();
    let today = now - now.rem_euclid(DAY);
    let pairs = [
        ("from", bucket_text(today - (DAYS - 1) * DAY)),
        ("to", bucket_text(today + DAY)),
        ("bucket", "day".to_string()),
    ]
    .map(|(k, v)| (k.to_string(), v));
    let query = Query::parse(&pairs, now).map_err(|e| ApiError::internal(e.to_string()))?;
    let usage = state.usage.by_bucket(&query, UsageKey::User).await?;
    let gpus = if state.config.scheduler.is_slurm() {
        let (nodes, _) = state.scheduler.nodes().await?;
        nodes
            .iter()
            .flat_map(|n| &n.slices)
            .map(|s| f64::from(s.total))
            .sum()
    } else {
        state
            .inventory
            .cluster
            .nodes
            .iter()
            .map(|n| n.gpus.len() as f64)
            .sum()
    };
    let f = &query.filter;
    Ok(Utilisation::of(
        &bucket_bounds(f.from, f.to, query.bucket),
        &usage,
        gpus,
    ))
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    let accounts = state.accounts.summary().await?;
    let (nodes, _) = state.scheduler.nodes().await?;
    let mut node_states: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &nodes {
        *node_states.entry(n.state.name()).or_default() += 1;
    }
    let used = utilisation(&state).await?;
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
        utilisation_svg: utilisation::render(&used).map_err(ApiError::internal)?,
        utilisation: used.summary(),
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
            utilisation_svg: "<svg id=\"chart\"></svg>".into(),
            utilisation: "2.04 of 144.00 GPU-hours (1.4 %)".into(),
            latest: vec![AuditInfo {
                id: 1,
                at: "2026-01-02T03:04:05Z".into(),
                actor: "root (command line)".into(),
                action: "user.add".into(),
                target: "ann".into(),
                detail: serde_json::Value::Null,
                client_addr: "local".into(),
            }],
        }
        .render()
        .expect("render");
        assert!(html.contains("<svg id=\"chart\"></svg>"), "{html}");
        assert!(html.contains("2.04 of 144.00 GPU-hours (1.4 %)"), "{html}");
        assert!(
            html.contains("<time datetime=\"2026-01-02T03:04:05Z\""),
            "{html}"
        );
        assert!(
            html.contains("<div class=\"table-wrap\" tabindex=\"0\" role=\"region\""),
            "{html}"
        );
        for section in [
            "users", "groups", "quotas", "jobs", "sessions", "nodes", "audit",
        ] {
            assert!(
                html.contains(&format!("href=\"/admin/{section}\"")),
                "{section}: {html}"
            );
        }
        assert!(html.contains("3 (1 administrator, 1 disabled)"), "{html}");
        assert!(html.contains("4 running, 5 pending"), "{html}");
        assert!(html.contains("DRAIN 1, IDLE 2"), "{html}");
    }
}
