//! `GET /`: the dashboard. The GPUs and slices free now (from the scheduler's state
//! in memory), my running and recent jobs (the scheduler's queue for mine, the
//! store's latest ended rows by an indexed query with a limit), my sessions as cards
//! (open, time left, stop after a confirmation) and one tile per interactive app
//! (`Sessions::apps`).
//! The account and API tokens are on the profile page (`profile.rs`).
//!
//! Owns: laying those out. Must not touch: the rules (who sees which job or session:
//! the jobs and sessions services) and anything that grows with the number of jobs
//! (the page asks for a bounded few, never for a count over the table).

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use scheduler::{NodeState, NodeView};

use super::sessions::SessionRow;
use super::when::{filters, span};
use super::{render, Nav, Section};
use crate::auth::Scope;
use crate::http::authn::PageUser;
use crate::http::{ApiError, AppState};
use crate::services::jobs::{JobInfo, QueuePage};
use crate::services::reasons::{self, ClusterSlices};
use crate::sessions::apps::AppSummary;

/// How many of my queued or running jobs, and of my ended ones, the page lists.
const JOBS_SHOWN: usize = 6;
const ENDED_SHOWN: i64 = 5;

#[derive(Template)]
#[template(path = "home.html")]
struct HomePage {
    nav: Nav,
    display_name: String,
    free: Vec<FreeRow>,
    /// Nodes that take no jobs now (drained or down).
    nodes_unavailable: usize,
    jobs: Vec<JobCard>,
    /// My queued and running jobs beyond those listed.
    jobs_more: u64,
    ended: Vec<JobCard>,
    sessions: Vec<SessionRow>,
    /// Log folders of the user's TensorBoard sessions, to open again.
    logdirs: Vec<String>,
    apps: Vec<AppTile>,
    /// Administrators' announcements shown now.
    announcements: Vec<crate::services::announcements::Announcement>,
}

/// One kind of GPU slice: how many are free now of how many.
#[derive(Debug, PartialEq, Eq)]
struct FreeRow {
    /// As `--gres` names it (`gpu`, `a100`, `1g.10gb`, `shard`).
    kind: String,
    /// What it is, in words.
    what: &'static str,
    /// A MIG slice as a part of its GPU (`1/7 of an A100-80GB`); empty otherwise.
    part: String,
    free: u32,
    total: u32,
}

/// The free slices of each type over the nodes that take jobs; a drained or down
/// node's slices count in the total, never as free.
fn free_rows(nodes: &[NodeView]) -> (Vec<FreeRow>, usize) {
    let mut by_type: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    let mut unavailable = 0;
    for n in nodes {
        let takes_jobs = !matches!(n.state, NodeState::Drain { .. } | NodeState::Down { .. });
        if !takes_jobs {
            unavailable += 1;
        }
        for s in &n.slices {
            let e = by_type.entry(s.r#type.as_str()).or_default();
            if takes_jobs {
                e.0 += s.total.saturating_sub(s.used);
            }
            e.1 += s.total;
        }
    }
    let mut rows: Vec<FreeRow> = by_type
        .into_iter()
        .map(|(kind, (free, total))| FreeRow {
            what: slice_words(kind),
            part: String::new(),
            kind: kind.to_string(),
            free,
            total,
        })
        .collect();
    // Whole GPUs first, then MIG slices, then shares; by name within each.
    rows.sort_by_key(|r| (slice_rank(r.what), r.kind.clone()));
    (rows, unavailable)
}

/// Where the words of [`slice_words`] come in the list.
fn slice_rank(what: &str) -> u8 {
    match what {
        "whole GPUs" => 0,
        "MIG slices" => 1,
        _ => 2,
    }
}

/// `whole GPUs`, `MIG slices`, `GPU shares`.
fn slice_words(kind: &str) -> &'static str {
    if kind == "shard" {
        "time-sliced GPU shares"
    } else if crate::services::reasons::is_mig(kind) {
        "MIG slices"
    } else {
        "whole GPUs"
    }
}

/// A job as a line of the dashboard's card.
struct JobCard {
    id: String,
    display_id: String,
    name: String,
    state: String,
    /// `gpu:2`, empty for none.
    gres: String,
    /// Running: until its time limit (`1 h 40 min`, as `when::span` words it);
    /// empty otherwise.
    time_left: String,
    /// Pending: why, in words (`Waiting for a whole A100: both are in use`).
    reason: String,
    /// Pending: the scheduler's code for it (`Resources`).
    reason_code: String,
    /// Ended: when, RFC 3339.
    ended_at: String,
}

impl JobCard {
    fn of(j: JobInfo, slices: &ClusterSlices) -> Self {
        let time_left = match (j.state.as_str(), j.time_limit) {
            ("RUNNING", Some(limit)) => span(limit.saturating_sub(j.time_used)),
            ("RUNNING", None) => "no limit".into(),
            _ => String::new(),
        };
        let explained = (j.state == "PENDING")
            .then(|| reasons::explain(j.reason.as_deref().unwrap_or(""), &j.gres, slices));
        JobCard {
            id: j.id,
            display_id: j.display_id,
            name: j.name,
            state: j.state,
            gres: j.gres,
            time_left,
            reason: explained
                .as_ref()
                .map(|e| e.what.clone())
                .unwrap_or_default(),
            reason_code: explained.map(|e| e.code).unwrap_or_default(),
            ended_at: j.end_time.unwrap_or_default(),
        }
    }
}

/// A tile that starts an interactive app.
struct AppTile {
    id: String,
    title: String,
    description: String,
    /// The icon's address.
    icon: String,
    /// The start form, with the app chosen.
    href: String,
}

impl AppTile {
    fn of(app: AppSummary) -> Self {
        AppTile {
            href: format!("/sessions/new?kind={}", app.id),
            id: app.id,
            title: app.title,
            description: app.description,
            icon: app.icon,
        }
    }
}

/// `GET /`.
pub async fn show(state: web::Data<AppState>, user: PageUser) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let (account, _) = state
        .accounts
        .profile(me.user_id)
        .await?
        .ok_or(ApiError::Unauthorized)?;
    let (nodes, _) = state.cluster.nodes().await?;
    let (mut free, nodes_unavailable) = free_rows(&nodes);
    for row in free.iter_mut() {
        let parent = state
            .cluster
            .gpus()
            .iter()
            .find(|g| g.mig.iter().any(|(p, _)| *p == row.kind));
        if let Some(part) = parent.and_then(|g| super::mig_part(&row.kind, &g.model)) {
            row.part = part;
        }
    }
    let slices = super::jobs::cluster_slices(&nodes);
    let (queue, queued, ended) = state
        .jobs
        .board(
            &me,
            false,
            ENDED_SHOWN,
            QueuePage {
                number: 1,
                per_page: JOBS_SHOWN,
            },
        )
        .await?;
    let announcements = state.announcements.current().await?;
    let sessions = super::sessions::rows(&state, &me).await?;
    let mut logdirs: Vec<String> = sessions
        .iter()
        .filter_map(|s| s.info.logdir.clone())
        .collect();
    logdirs.sort();
    logdirs.dedup();
    let display_name = if account.display_name.is_empty() {
        account.username
    } else {
        account.display_name
    };
    render(
        &HomePage {
            nav: Nav::of(&me).at(Section::Dashboard),
            display_name,
            free,
            nodes_unavailable,
            jobs_more: queued.saturating_sub(queue.len() as u64),
            jobs: queue.into_iter().map(|j| JobCard::of(j, &slices)).collect(),
            ended: ended.into_iter().map(|j| JobCard::of(j, &slices)).collect(),
            sessions,
            logdirs,
            apps: state.sessions.apps().into_iter().map(AppTile::of).collect(),
            announcements,
        },
        StatusCode::OK,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;
    use scheduler::SliceUsage;

    fn node(name: &str, state: NodeState, slices: &[(&str, u32, u32)]) -> NodeView {
        NodeView {
            name: name.into(),
            state,
            partitions: vec!["gpu".into()],
            cpus_total: 64,
            cpus_free: 64,
            memory_mb_total: 512_000,
            memory_mb_free: 512_000,
            features: vec![],
            slices: slices
                .iter()
                .map(|(t, total, used)| SliceUsage {
                    r#type: (*t).into(),
                    total: *total,
                    used: *used,
                })
                .collect(),
        }
    }

    #[test]
    fn free_slices_add_up_per_type_and_a_drained_node_has_none_free() {
        let nodes = [
            node("n1", NodeState::Mixed, &[("a100", 4, 1), ("1g.10gb", 7, 2)]),
            node("n2", NodeState::Idle, &[("a100", 4, 0)]),
            node(
                "n3",
                NodeState::Drain {
                    reason: "fan".into(),
                },
                &[("a100", 4, 0), ("shard", 8, 0)],
            ),
        ];
        let (rows, unavailable) = free_rows(&nodes);
        assert_eq!(unavailable, 1);
        let got: Vec<(&str, u32, u32, &str)> = rows
            .iter()
            .map(|r| (r.kind.as_str(), r.free, r.total, r.what))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a100", 7, 12, "whole GPUs"),
                ("1g.10gb", 5, 7, "MIG slices"),
                ("shard", 0, 8, "time-sliced GPU shares"),
            ]
        );
    }

    fn job(id: &str, state: &str) -> JobCard {
        JobCard {
            id: id.into(),
            display_id: id.into(),
            name: format!("<b>{id}</b>"),
            state: state.into(),
            gres: "gpu:1".into(),
            time_left: if state == "RUNNING" {
                "1 h 5 min".into()
            } else {
                String::new()
            },
            reason: if state == "PENDING" {
                "Waiting for a whole GPU: both are in use".into()
            } else {
                String::new()
            },
            reason_code: if state == "PENDING" {
                "Resources".into()
            } else {
                String::new()
            },
            ended_at: String::new(),
        }
    }

    fn page() -> HomePage {
        HomePage {
            nav: nav().at(Section::Dashboard),
            display_name: "Alice".into(),
            free: free_rows(&[node("n1", NodeState::Mixed, &[("a100", 2, 1)])]).0,
            nodes_unavailable: 0,
            jobs: vec![job("7", "RUNNING"), job("8", "PENDING")],
            jobs_more: 3,
            ended: vec![job("3", "COMPLETED")],
            sessions: vec![],
            logdirs: vec![],
            apps: vec![AppTile::of(AppSummary {
                id: "notebook".into(),
                title: "JupyterLab".into(),
                description: "Notebooks".into(),
                icon: "/static/icons/apps/jupyter.svg".into(),
            })],
            announcements: vec![],
        }
    }

    #[test]
    fn dashboard_shows_free_gpus_my_jobs_and_app_tiles() {
        let html = page().render().expect("render");
        assert!(html.contains("id=\"free-a100\""), "{html}");
        assert!(html.contains(">1</strong> of 2"), "{html}");
        assert!(html.contains("href=\"/jobs/7\""), "{html}");
        assert!(html.contains("1 h 5 min left"), "{html}");
        assert!(
            html.contains("Waiting for a whole GPU: both are in use <code>Resources</code>"),
            "{html}"
        );
        assert!(html.contains("href=\"/jobs/3\""), "{html}");
        assert!(html.contains("and 3 more"), "{html}");
        assert!(html.contains("&#60;b&#62;7&#60;/b&#62;"), "escaped: {html}");
        assert!(
            html.contains("href=\"/sessions/new?kind=notebook\""),
            "{html}"
        );
        assert!(html.contains("Nothing is running yet."), "{html}");
        assert!(
            html.contains("id=\"nav-dashboard\" aria-current=\"page\""),
            "{html}"
        );
        assert_eq!(html.matches("aria-current").count(), 1, "{html}");
        assert!(!html.contains("token-form"), "tokens are on the profile");
    }
}
