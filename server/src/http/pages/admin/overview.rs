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
use crate::services::records::{bucket_bounds, UsageKey};

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
    /// What wants an administrator now: jobs the cluster failed to start, bursts of
    /// failures, nodes out of service, the longest waits.
    attention: Vec<Attention>,
}

/// One line of "Needs attention".
struct Attention {
    /// `site` (the cluster's own failure), `warn`.
    level: &'static str,
    text: String,
    link: Option<String>,
}

/// The window "Needs attention" looks back over for failures.
const FAILURE_WINDOW_SECS: i64 = 3600;
/// Failures within this many seconds of the start, this many or more of them in the
/// window: a burst worth a look.
const QUICK_FAILURE_SECS: u64 = 10;
const BURST: usize = 5;
/// A pending job waiting longer than this is listed (the three longest).
const LONG_WAIT_SECS: i64 = 3600;

/// What wants an administrator now (see [`OverviewPage::attention`]).
async fn attention(
    state: &AppState,
    admin: &crate::auth::Principal,
    nodes: &[scheduler::NodeView],
) -> Result<Vec<Attention>, ApiError> {
    use crate::services::jobs::JobQuery;
    let now = crate::util::now_secs();
    let mut out = Vec::new();
    let failed = state
        .jobs
        .list(
            admin,
            JobQuery {
                state: Some("FAILED,NODE_FAIL".into()),
                from: Some(now - FAILURE_WINDOW_SECS),
                per_page: Some(10_000),
                ..JobQuery::default()
            },
        )
        .await?
        .jobs;
    // The cluster's own failures, by what failed.
    let mut site: BTreeMap<&str, (usize, std::collections::BTreeSet<&str>, &str)> = BTreeMap::new();
    for j in &failed {
        let Some(m) = crate::http::pages::jobs::happened::site_failure(j) else {
            continue;
        };
        let e = site
            .entry(m)
            .or_insert((0, Default::default(), j.id.as_str()));
        e.0 += 1;
        e.1.insert(j.user.as_str());
    }
    for (message, (n, users, example)) in &site {
        out.push(Attention {
            level: "site",
            text: format!(
                "{n} job{} of {} could not start in the last hour: {message}.",
                if *n == 1 { "" } else { "s" },
                users.iter().copied().collect::<Vec<_>>().join(", ")
            ),
            link: Some(format!("/jobs/{example}")),
        });
    }
    let quick: Vec<_> = failed
        .iter()
        .filter(|j| j.state == "FAILED" && j.time_used <= QUICK_FAILURE_SECS)
        .filter(|j| !j.message.as_deref().is_some_and(|m| site.contains_key(m)))
        .collect();
    if quick.len() >= BURST {
        let users: std::collections::BTreeSet<&str> =
            quick.iter().map(|j| j.user.as_str()).collect();
        out.push(Attention {
            level: "warn",
            text: format!(
                "{} jobs failed within {QUICK_FAILURE_SECS} s of their start in the last hour ({}).",
                quick.len(),
                users.into_iter().collect::<Vec<_>>().join(", ")
            ),
            link: Some("/admin/jobs?state=FAILED".into()),
        });
    }
    for n in nodes {
        if let scheduler::NodeState::Drain { reason } | scheduler::NodeState::Down { reason } =
            &n.state
        {
            out.push(Attention {
                level: "warn",
                text: format!(
                    "Node {} is {}{}.",
                    n.name,
                    n.state.name(),
                    if reason.is_empty() {
                        String::new()
                    } else {
                        format!(": {reason}")
                    }
                ),
                link: Some("/admin/nodes".into()),
            });
        }
    }
    let pending = state
        .jobs
        .list(
            admin,
            JobQuery {
                state: Some("PENDING".into()),
                per_page: Some(10_000),
                ..JobQuery::default()
            },
        )
        .await?
        .jobs;
    let mut waits: Vec<(i64, &crate::services::jobs::JobInfo)> = pending
        .iter()
        .filter_map(|j| {
            let submitted = j.submit_time.parse::<jiff::Timestamp>().ok()?.as_second();
            Some((now - submitted, j))
        })
        .filter(|(wait, j)| {
            *wait >= LONG_WAIT_SECS
                && !j
                    .reason
                    .as_deref()
                    .is_some_and(|r| r.contains("Held") || r == "Dependency" || r == "BeginTime")
        })
        .collect();
    waits.sort_by_key(|(wait, _)| std::cmp::Reverse(*wait));
    for (wait, j) in waits.into_iter().take(3) {
        out.push(Attention {
            level: "warn",
            text: format!(
                "Job {} of {} has waited {} ({}).",
                j.display_id,
                j.user,
                crate::http::pages::when::span(wait.unsigned_abs()),
                j.reason.as_deref().unwrap_or("no reason given")
            ),
            link: Some(format!("/jobs/{}", j.id)),
        });
    }
    Ok(out)
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
    let gpus = if state.cluster.is_slurm() {
        let (nodes, _) = state.cluster.nodes().await?;
        nodes
            .iter()
            .flat_map(|n| &n.slices)
            .map(|s| f64::from(s.total))
            .sum()
    } else {
        state
            .cluster
            .shape()
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
    let (nodes, _) = state.cluster.nodes().await?;
    let mut node_states: BTreeMap<&str, usize> = BTreeMap::new();
    for n in &nodes {
        *node_states.entry(n.state.name()).or_default() += 1;
    }
    let used = utilisation(&state).await?;
    let attention = attention(&state, &admin.0, &nodes).await?;
    let page = OverviewPage {
        attention,
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
            attention: vec![Attention {
                level: "site",
                text: "2 jobs of ann could not start in the last hour: <mount>.".into(),
                link: Some("/jobs/9".into()),
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
        assert!(
            html.contains("<li class=\"attention-site\"><a href=\"/jobs/9\">2 jobs of ann could not start in the last hour: &#60;mount&#62;.</a></li>"),
            "{html}"
        );
    }
}
