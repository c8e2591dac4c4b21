//! `GET /cluster`: partitions and nodes as `sinfo` shows them, the GPU map
//! ([`crate::http::gpu_map`]: every slice free, used by whom, drained or absent, with a
//! legend, refreshed in place by `gpu-map.js`), and the first pending jobs with
//! their reasons (the rest are counted: a page never grows with the whole queue).
//!
//! Owns: laying the scheduler's views out for the page. Must not touch: the
//! scheduler's state (it asks the actor) or the inventory's discovery.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use scheduler::{JobState, JobView, NodeState, SliceUsage, SqueueFilter};

use super::{render, Nav};
use crate::auth::Scope;
use crate::http::authn::PageUser;
use crate::http::{ApiError, AppState};
use crate::services::gpu_map::GpuMap;

#[derive(Template)]
#[template(path = "cluster.html")]
struct ClusterPage {
    nav: Nav,
    partitions: Vec<PartitionRow>,
    nodes: Vec<NodeRow>,
    gpu_map: GpuMap,
    pending: Vec<PendingRow>,
    /// Pending jobs beyond those listed.
    pending_more: u64,
}

/// How many pending jobs the page lists.
const PENDING_SHOWN: usize = 100;

struct PartitionRow {
    name: String,
    default: bool,
    max_time: String,
    nodes_total: u32,
    /// `IDLE 2 (node[1-2])`, one per state.
    node_states: Vec<String>,
    cpus: String,
    slices: String,
    running: u64,
    pending: u64,
}

pub struct NodeRow {
    pub name: String,
    pub state: String,
    /// Why it is drained or down.
    pub reason: String,
    pub partitions: String,
    pub cpus: String,
    pub memory: String,
    pub features: String,
    pub slices: String,
}

struct PendingRow {
    id: String,
    display_id: String,
    name: String,
    user: String,
    partition: String,
    gres: String,
    reason: String,
    link: bool,
}

pub async fn show(state: web::Data<AppState>, user: PageUser) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let (nodes, partitions) = state.cluster.nodes().await?;
    // The jobs holding slices, and the first page of those waiting.
    let jobs = state
        .cluster
        .jobs(SqueueFilter {
            states: vec![JobState::Running, JobState::Completing],
            ..SqueueFilter::default()
        })
        .await?;
    let (pending, pending_total) = state
        .cluster
        .jobs_page(
            SqueueFilter {
                states: vec![JobState::Pending],
                ..SqueueFilter::default()
            },
            0,
            PENDING_SHOWN,
        )
        .await?;
    let may_open = |owner: &str| me.may_see(owner);
    let page = ClusterPage {
        nav: Nav::of(&me).at(crate::http::pages::Section::Cluster),
        partitions: partitions.into_iter().map(partition_row).collect(),
        nodes: nodes.iter().cloned().map(node_row).collect(),
        gpu_map: state.cluster.gpu_map_of(&nodes, &jobs, &may_open),
        pending_more: pending_total.saturating_sub(pending.len() as u64),
        pending: pending_rows(&pending, &may_open),
    };
    render(&page, StatusCode::OK)
}

fn slices_text(slices: &[SliceUsage]) -> String {
    slices
        .iter()
        .map(|s| format!("{} {}/{}", s.r#type, s.used, s.total))
        .collect::<Vec<_>>()
        .join(", ")
}

fn partition_row(p: scheduler::PartitionView) -> PartitionRow {
    PartitionRow {
        node_states: p
            .nodes_by_state
            .iter()
            .map(|(state, count, hosts)| format!("{state} {count} ({hosts})"))
            .collect(),
        cpus: format!("{}/{}", p.cpus_used, p.cpus_total),
        slices: slices_text(&p.slices),
        max_time: p.max_time.to_string(),
        name: p.name,
        default: p.default,
        nodes_total: p.nodes_total,
        running: p.running_jobs,
        pending: p.pending_jobs,
    }
}

pub fn node_row(n: scheduler::NodeView) -> NodeRow {
    let reason = match &n.state {
        NodeState::Drain { reason } | NodeState::Down { reason } => reason.clone(),
        _ => String::new(),
    };
    NodeRow {
        state: n.state.name().to_string(),
        reason,
        partitions: n.partitions.join(", "),
        cpus: format!(
            "{}/{}",
            n.cpus_total - n.cpus_free.min(n.cpus_total),
            n.cpus_total
        ),
        memory: format!(
            "{}/{} MB",
            n.memory_mb_total.saturating_sub(n.memory_mb_free),
            n.memory_mb_total
        ),
        features: n.features.join(", "),
        slices: slices_text(&n.slices),
        name: n.name,
    }
}

fn pending_rows(jobs: &[JobView], may_open: &dyn Fn(&str) -> bool) -> Vec<PendingRow> {
    jobs.iter()
        .filter(|j| j.state == JobState::Pending)
        .map(|j| PendingRow {
            id: j.id.to_string(),
            display_id: j.display_id.clone(),
            name: j.name.clone(),
            user: j.user.clone(),
            partition: j.partition.clone(),
            gres: j.gres.clone(),
            reason: j.reason.map(|r| r.name().to_string()).unwrap_or_default(),
            link: may_open(&j.user),
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::http::pages::tests::nav;
    use crate::services::gpu_map::tests::{cluster, jobs, slurm_nodes, status};
    use crate::services::gpu_map::{gpu_map, shares, slurm_gpu_map, type_counts};

    /// A drained node's row for render tests.
    pub fn drained_node() -> NodeRow {
        NodeRow {
            name: "node1".into(),
            state: "DRAIN".into(),
            reason: "fan <broken>".into(),
            partitions: "gpu".into(),
            cpus: "2/32".into(),
            memory: "2000/256000 MB".into(),
            features: String::new(),
            slices: "gpu 1/1".into(),
        }
    }

    fn page(map: GpuMap, jobs: &[JobView]) -> String {
        let may_open = |u: &str| u == "alice";
        ClusterPage {
            nav: nav(),
            partitions: vec![PartitionRow {
                name: "gpu".into(),
                default: true,
                max_time: "1-00:00:00".into(),
                nodes_total: 1,
                node_states: vec!["MIXED 1 (node1)".into()],
                cpus: "2/32".into(),
                slices: "gpu 1/1, 3g.40gb 1/2, shard 0/2".into(),
                running: 2,
                pending: 1,
            }],
            nodes: vec![drained_node()],
            gpu_map: map,
            pending: pending_rows(jobs, &may_open),
            pending_more: 0,
        }
        .render()
        .expect("render")
    }

    fn internal_map(discovery: bool) -> GpuMap {
        let nodes = gpu_map(
            &cluster(),
            &[status(2, false)],
            discovery,
            &[],
            &jobs(),
            &|u| u == "alice",
        );
        GpuMap {
            types: type_counts(&nodes),
            nodes,
            brings: shares(&cluster()),
        }
    }

    #[test]
    fn slurm_map_renders_drained_nodes_with_their_reason() {
        let nodes = slurm_gpu_map(&slurm_nodes());
        let html = page(
            GpuMap {
                types: type_counts(&nodes),
                nodes,
                brings: Vec::new(),
            },
            &[],
        );
        assert!(
            html.contains("node2 · <strong>DRAIN</strong> (fan &#60;broken&#62;)"),
            "{html}"
        );
        assert!(
            html.contains("1g.10gb 1<br><span class=\"slice-what\">in use"),
            "{html}"
        );
        assert!(html.contains("class=\"slice drained\""), "{html}");
    }

    #[test]
    fn cluster_page_renders_map_legend_pending_reasons_escaped() {
        let jobs = jobs();
        let html = page(internal_map(true), &jobs);
        assert!(html.contains("href=\"/jobs/5\""), "{html}");
        assert!(
            !html.contains("href=\"/jobs/6\""),
            "another user's job is not a link: {html}"
        );
        for state in ["used", "free", "absent"] {
            assert!(html.contains(&format!("class=\"slice {state}\"")), "{html}");
        }
        assert!(html.contains("class=\"gpu absent\""), "{html}");
        // The legend: each state with its letter and words.
        for words in [
            ">F</span> free",
            ">U</span> in use",
            ">D</span> drained",
            ">A</span> absent (declared, not found by nvidia-smi)",
        ] {
            assert!(html.contains(words), "{words}: {html}");
        }
        // The owner on hover and focus.
        assert!(
            html.contains("title=\"GPU 0: in use by job 5 (train) of alice\""),
            "{html}"
        );
        assert!(
            html.contains("aria-label=\"GPU 0: in use by job 5 (train) of alice\">"),
            "{html}"
        );
        assert!(html.contains("tabindex=\"0\""), "{html}");
        assert!(html.contains("0 of 1 A100-80GB free"), "{html}");
        assert!(
            html.contains("gpu: 8 CPU cores and 48 GiB of memory per GPU"),
            "{html}"
        );
        assert!(html.contains("/static/js/gpu-map.js"), "{html}");
        assert!(html.contains("Resources"), "{html}");
        assert!(
            html.contains("&#60;script&#62;x&#60;/script&#62;"),
            "{html}"
        );
        assert!(!html.contains("<script>x"), "{html}");
        assert!(html.contains("fan &#60;broken&#62;"), "{html}");
        assert!(html.contains("MIXED 1 (node1)"), "{html}");
        assert_eq!(
            html.matches("<div class=\"table-wrap\" tabindex=\"0\" role=\"region\"")
                .count(),
            3
        );
        assert!(html.contains("<th scope=\"col\">Partition</th>"), "{html}");
    }

    #[test]
    fn with_discovery_off_the_page_says_nothing_is_absent() {
        let html = page(internal_map(false), &jobs());
        assert!(!html.contains("class=\"slice absent\""), "{html}");
        assert!(!html.contains("not found by nvidia-smi)</div>"), "{html}");
        assert!(!html.contains("class=\"gpu absent\""), "{html}");
        assert!(
            !html.contains(">A</span> absent"),
            "no absent in the legend: {html}"
        );
        assert!(html.contains(">D</span> drained"), "{html}");
    }
}
