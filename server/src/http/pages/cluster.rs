//! `GET /cluster`: partitions and nodes as `sinfo` shows them, a map of every GPU
//! slice (free, or which job and user hold it; GPUs `nvidia-smi` did not find are
//! marked absent; a drained or down node with its reason), and the first pending
//! jobs with their reasons (the rest are counted: a page never grows with the whole
//! queue). Under Slurm the map is drawn from Slurm's nodes: their typed GPUs, how
//! many are in use, and their state.
//!
//! Owns: laying the scheduler's views out for the page. Must not touch: the
//! scheduler's state (it asks the actor) or the inventory's discovery.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;
use scheduler::{
    ClusterConfig, GpuMode, JobState, JobView, NodeState, NodeView, SliceId, SliceUsage,
    SqueueFilter,
};

use super::{render, Nav};
use crate::auth::Scope;
use crate::http::authn::PageUser;
use crate::http::{ApiError, AppState};
use crate::sched::inventory::GpuStatus;

#[derive(Template)]
#[template(path = "cluster.html")]
struct ClusterPage {
    nav: Nav,
    partitions: Vec<PartitionRow>,
    nodes: Vec<NodeRow>,
    gpu_map: Vec<GpuNode>,
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

/// One node's GPUs on the map.
pub struct GpuNode {
    pub name: String,
    /// `DRAIN`, `DOWN`, or empty when the node takes jobs.
    pub unavailable: String,
    /// Why it is drained or down.
    pub reason: String,
    pub gpus: Vec<GpuCell>,
}

pub struct GpuCell {
    /// `GPU 0 · A100 · 80 GB`, or `a100 ×2` for Slurm's GPUs of one type.
    pub title: String,
    /// `nvidia-smi` found it (a declared GPU it did not find is still scheduled).
    pub present: bool,
    pub slices: Vec<SliceCell>,
}

pub struct SliceCell {
    /// `GPU 0`, `1g.10gb`, `shard 3`.
    pub label: String,
    pub holder: Option<Holder>,
    /// In use by a job the map cannot name (Slurm counts, it does not say which).
    pub used: bool,
}

/// The job holding a slice.
pub struct Holder {
    pub id: String,
    pub display_id: String,
    pub user: String,
    /// The viewer may open the job's page (their own, or an administrator).
    pub link: bool,
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
    let (nodes, partitions) = state.scheduler.nodes().await?;
    // The jobs holding slices, and the first page of those waiting.
    let jobs = state
        .scheduler
        .squeue(SqueueFilter {
            states: vec![JobState::Running, JobState::Completing],
            ..SqueueFilter::default()
        })
        .await?;
    let (pending, pending_total) = state
        .scheduler
        .squeue_page(
            SqueueFilter {
                states: vec![JobState::Pending],
                ..SqueueFilter::default()
            },
            0,
            PENDING_SHOWN,
        )
        .await?;
    let may_open = |owner: &str| me.is_admin || owner == me.username;
    let page = ClusterPage {
        nav: Nav::of(&me),
        partitions: partitions.into_iter().map(partition_row).collect(),
        nodes: nodes.iter().cloned().map(node_row).collect(),
        gpu_map: gpu_map_for(&state, &nodes, &jobs, &may_open),
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

/// The GPU map of this portal's backend: atrium's own scheduler knows every slice
/// and its holder ([`gpu_map`]); under Slurm the map shows Slurm's nodes
/// ([`slurm_gpu_map`]).
pub fn gpu_map_for(
    state: &AppState,
    nodes: &[NodeView],
    jobs: &[JobView],
    may_open: &dyn Fn(&str) -> bool,
) -> Vec<GpuNode> {
    if state.config.scheduler.backend == "slurm" {
        slurm_gpu_map(nodes)
    } else {
        gpu_map(
            &state.inventory.cluster,
            &state.inventory.gpus,
            nodes,
            jobs,
            may_open,
        )
    }
}

/// A drained or down node's state name and reason; empty strings for one that takes jobs.
fn unavailable(state: &NodeState) -> (String, String) {
    match state {
        NodeState::Drain { reason } | NodeState::Down { reason } => {
            (state.name().to_string(), reason.clone())
        }
        _ => (String::new(), String::new()),
    }
}

/// Slurm's nodes with GPUs: per node and GPU type, one cell per GPU, the first `used`
/// of them in use (Slurm's `GresUsed` counts per type; it does not say which job holds
/// which device).
pub fn slurm_gpu_map(nodes: &[NodeView]) -> Vec<GpuNode> {
    nodes
        .iter()
        .filter(|n| n.slices.iter().any(|s| s.total > 0))
        .map(|n| {
            let (unavailable, reason) = unavailable(&n.state);
            GpuNode {
                name: n.name.clone(),
                unavailable,
                reason,
                gpus: n
                    .slices
                    .iter()
                    .map(|s| GpuCell {
                        title: format!("{} ×{}", s.r#type, s.total),
                        present: true,
                        slices: (0..s.total)
                            .map(|i| SliceCell {
                                label: format!("{} {i}", s.r#type),
                                holder: None,
                                used: i < s.used,
                            })
                            .collect(),
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Every slice of every GPU in the scheduler's configuration, with the running
/// job (if any) whose allocation lists it, and each node's state from `nodes`.
pub fn gpu_map(
    cluster: &ClusterConfig,
    status: &[GpuStatus],
    nodes: &[NodeView],
    jobs: &[JobView],
    may_open: &dyn Fn(&str) -> bool,
) -> Vec<GpuNode> {
    let mut held: BTreeMap<(&str, &SliceId), &JobView> = BTreeMap::new();
    for job in jobs {
        for node in job.allocation.iter().flat_map(|a| &a.nodes) {
            for slice in &node.slices {
                held.insert((node.node.as_str(), slice), job);
            }
        }
    }
    cluster
        .nodes
        .iter()
        .filter(|n| !n.gpus.is_empty())
        .map(|node| {
            let (unavailable, reason) = nodes
                .iter()
                .find(|n| n.name == node.name)
                .map(|n| unavailable(&n.state))
                .unwrap_or_default();
            GpuNode {
                name: node.name.clone(),
                unavailable,
                reason,
                gpus: node
                    .gpus
                    .iter()
                    .map(|gpu| {
                        let slices: Vec<(String, SliceId)> = match &gpu.mode {
                            GpuMode::Whole => vec![(
                                format!("GPU {}", gpu.index),
                                SliceId::Gpu { index: gpu.index },
                            )],
                            GpuMode::Mig(instances) => instances
                                .iter()
                                .map(|m| {
                                    let id = SliceId::Mig {
                                        gpu: gpu.index,
                                        profile: m.profile.clone(),
                                        uuid: m.uuid.clone(),
                                    };
                                    (m.profile.clone(), id)
                                })
                                .collect(),
                            GpuMode::Shards(n) => (0..*n)
                                .map(|shard| {
                                    (
                                        format!("shard {shard}"),
                                        SliceId::Shard {
                                            gpu: gpu.index,
                                            shard,
                                        },
                                    )
                                })
                                .collect(),
                        };
                        GpuCell {
                            title: format!(
                                "GPU {} · {} · {} GB",
                                gpu.index,
                                gpu.model,
                                gpu.memory_mb / 1024
                            ),
                            present: status
                                .iter()
                                .find(|s| s.node == node.name && s.index == gpu.index)
                                .is_none_or(|s| s.present),
                            slices: slices
                                .into_iter()
                                .map(|(label, id)| SliceCell {
                                    label,
                                    holder: held.get(&(node.name.as_str(), &id)).map(|job| {
                                        Holder {
                                            id: job.id.to_string(),
                                            display_id: job.display_id.clone(),
                                            user: job.user.clone(),
                                            link: may_open(&job.user),
                                        }
                                    }),
                                    used: false,
                                })
                                .collect(),
                        }
                    })
                    .collect(),
            }
        })
        .collect()
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
    use crate::sched::inventory::GpuSource;
    use scheduler::model::{GpuConfig, MigInstanceConfig, NodeConfig};
    use scheduler::{Allocation, JobId, NodeAllocation, PendingReason, TimeLimit};

    fn gpu(index: u32, mode: GpuMode) -> GpuConfig {
        GpuConfig {
            index,
            uuid: format!("GPU-{index}"),
            model: "A100-80GB".into(),
            memory_mb: 81920,
            mode,
        }
    }

    fn cluster() -> ClusterConfig {
        ClusterConfig {
            nodes: vec![
                NodeConfig {
                    name: "node1".into(),
                    cpus: 32,
                    memory_mb: 256_000,
                    features: vec![],
                    gpus: vec![
                        gpu(0, GpuMode::Whole),
                        gpu(
                            1,
                            GpuMode::Mig(vec![
                                MigInstanceConfig {
                                    profile: "3g.40gb".into(),
                                    uuid: "MIG-a".into(),
                                },
                                MigInstanceConfig {
                                    profile: "3g.40gb".into(),
                                    uuid: "MIG-b".into(),
                                },
                            ]),
                        ),
                        gpu(2, GpuMode::Shards(2)),
                    ],
                },
                NodeConfig {
                    name: "cpu1".into(),
                    cpus: 8,
                    memory_mb: 16_000,
                    features: vec![],
                    gpus: vec![],
                },
            ],
            ..ClusterConfig::default()
        }
    }

    fn status(index: u32, present: bool) -> GpuStatus {
        GpuStatus {
            node: "node1".into(),
            index,
            uuid: format!("GPU-{index}"),
            model: "A100-80GB".into(),
            memory_mb: 81920,
            source: GpuSource::Declared,
            present,
            mig: vec![],
        }
    }

    fn job(id: u64, user: &str, name: &str, slices: Vec<SliceId>) -> JobView {
        JobView {
            id: JobId::new(id),
            display_id: id.to_string(),
            name: name.into(),
            user: user.into(),
            account: user.into(),
            partition: "gpu".into(),
            state: if slices.is_empty() {
                JobState::Pending
            } else {
                JobState::Running
            },
            reason: slices.is_empty().then_some(PendingReason::Resources),
            priority: 1,
            submit_time: 0,
            start_time: None,
            end_time: None,
            time_limit: TimeLimit::Unlimited,
            time_used: 0,
            nodes: 1,
            nodelist: String::new(),
            gres: "gpu:1".into(),
            gpu_milli: 1000,
            allocation: (!slices.is_empty()).then(|| Allocation {
                nodes: vec![NodeAllocation {
                    node: "node1".into(),
                    cpus: 1,
                    memory_mb: 1000,
                    slices,
                }],
            }),
            exit: None,
            restarts: 0,
        }
    }

    fn jobs() -> Vec<JobView> {
        vec![
            job(5, "alice", "train", vec![SliceId::Gpu { index: 0 }]),
            job(
                6,
                "bob",
                "mig",
                vec![SliceId::Mig {
                    gpu: 1,
                    profile: "3g.40gb".into(),
                    uuid: "MIG-b".into(),
                }],
            ),
            job(7, "bob", "<script>x</script>", vec![]),
        ]
    }

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

    #[test]
    fn map_has_a_cell_per_slice_with_holders_and_absent_gpus() {
        let map = gpu_map(
            &cluster(),
            &[status(0, true), status(1, true), status(2, false)],
            &[],
            &jobs(),
            &|u| u == "alice",
        );
        assert_eq!(map.len(), 1, "nodes without GPUs are left out");
        let gpus = &map[0].gpus;
        assert_eq!(
            gpus.iter().map(|g| g.slices.len()).collect::<Vec<_>>(),
            [1, 2, 2]
        );
        let whole = gpus[0].slices[0].holder.as_ref().expect("held");
        assert_eq!(
            (whole.id.as_str(), whole.user.as_str(), whole.link),
            ("5", "alice", true)
        );
        assert!(gpus[1].slices[0].holder.is_none());
        let mig = gpus[1].slices[1].holder.as_ref().expect("held");
        assert_eq!(
            (mig.id.as_str(), mig.user.as_str(), mig.link),
            ("6", "bob", false)
        );
        assert_eq!(gpus[2].slices[1].label, "shard 1");
        assert!(gpus[0].present && !gpus[2].present);
    }

    fn slurm_node(name: &str, state: NodeState, slices: &[(&str, u32, u32)]) -> NodeView {
        NodeView {
            name: name.into(),
            state,
            partitions: vec!["gpu".into()],
            cpus_total: 4,
            cpus_free: 4,
            memory_mb_total: 1000,
            memory_mb_free: 1000,
            features: Vec::new(),
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
    fn slurm_map_has_a_cell_per_gpu_of_each_type_and_says_which_nodes_take_no_jobs() {
        let nodes = [
            slurm_node("node1", NodeState::Mixed, &[("a100", 2, 1)]),
            slurm_node(
                "node2",
                NodeState::Drain {
                    reason: "fan <broken>".into(),
                },
                &[("a100", 2, 0), ("1g.10gb", 2, 2)],
            ),
            slurm_node("node3", NodeState::Idle, &[]),
        ];
        let map = slurm_gpu_map(&nodes);
        assert_eq!(
            map.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
            ["node1", "node2"],
            "a node without GPUs is left out"
        );
        let used = |n: &GpuNode| -> Vec<Vec<bool>> {
            n.gpus
                .iter()
                .map(|g| g.slices.iter().map(|s| s.used).collect())
                .collect()
        };
        assert_eq!(used(&map[0]), [vec![true, false]]);
        assert_eq!(used(&map[1]), [vec![false, false], vec![true, true]]);
        assert_eq!(map[1].gpus[1].title, "1g.10gb ×2");
        assert_eq!(
            (map[0].unavailable.as_str(), map[1].unavailable.as_str()),
            ("", "DRAIN")
        );
        let html = ClusterPage {
            nav: nav(),
            partitions: Vec::new(),
            nodes: Vec::new(),
            gpu_map: map,
            pending: Vec::new(),
            pending_more: 0,
        }
        .render()
        .expect("render");
        assert!(
            html.contains("node2 · <strong>DRAIN</strong> (fan &#60;broken&#62;)"),
            "{html}"
        );
        assert!(html.contains("1g.10gb 1<br>in use"), "{html}");
    }

    #[test]
    fn cluster_page_renders_map_pending_reasons_escaped() {
        let jobs = jobs();
        let may_open = |u: &str| u == "alice";
        let html = ClusterPage {
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
            gpu_map: gpu_map(&cluster(), &[status(2, false)], &[], &jobs, &may_open),
            pending: pending_rows(&jobs, &may_open),
            pending_more: 0,
        }
        .render()
        .expect("render");
        assert!(html.contains("href=\"/jobs/5\""), "{html}");
        assert!(
            !html.contains("href=\"/jobs/6\""),
            "another user's job is not a link: {html}"
        );
        assert!(html.contains("class=\"slice used\""), "{html}");
        assert!(html.contains("class=\"slice free\""), "{html}");
        assert!(html.contains("class=\"gpu absent\""), "{html}");
        assert!(html.contains("Resources"), "{html}");
        assert!(
            html.contains("&#60;script&#62;x&#60;/script&#62;"),
            "{html}"
        );
        assert!(!html.contains("<script>x"), "{html}");
        assert!(html.contains("fan &#60;broken&#62;"), "{html}");
        assert!(html.contains("MIXED 1 (node1)"), "{html}");
    }
}
