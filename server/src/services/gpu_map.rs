//! The GPU map shown on `/cluster` and `/admin/nodes`, and its JSON
//! (`GET /api/v1/cluster/gpus`) that the page polls to refresh the map in place.
//!
//! Each slice of each GPU is in one of four states: free, used (by which job of
//! which user, where the backend says), drained (free, on a node that takes no
//! work) or absent (a declared GPU that `nvidia-smi` ran and did not find; with
//! discovery off a declared GPU is simply declared). Beside the map: how many
//! slices of each type are free now, and what one GPU brings (cores, memory) in
//! each partition.
//!
//! Owns: laying the scheduler's views out as the map, atrium's own scheduler's
//! (every slice and its holder) and Slurm's (its nodes' GRES), and which holders the
//! viewer may open. `Cluster::gpu_map` builds it. Must not touch: HTTP types, the
//! scheduler's state (it asks the backend) or the inventory's discovery.

use std::collections::BTreeMap;

use scheduler::{ClusterConfig, GpuMode, JobView, NodeState, NodeView, SliceId};
use serde::Serialize;

use crate::sched::inventory::GpuStatus;

/// The map: its nodes, the free slices per type, what one GPU brings.
#[derive(Debug, Serialize)]
pub struct GpuMap {
    pub nodes: Vec<GpuNode>,
    /// Per slice type (`A100-80GB`, `1g.10gb`, `shard`), free now of the total.
    pub types: Vec<TypeCount>,
    /// Per partition, the cores and memory that come with one whole GPU.
    pub brings: Vec<GpuShare>,
}

impl GpuMap {
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The legend: every state, but "absent" only where a GPU is (with discovery
    /// off, or every GPU found, nothing on the map is absent).
    pub fn legend(&self) -> Vec<SliceState> {
        let any_absent = self.nodes.iter().flat_map(|n| &n.gpus).any(|g| g.absent);
        SliceState::ALL
            .into_iter()
            .filter(|s| *s != SliceState::Absent || any_absent)
            .collect()
    }
}

/// Free and total slices of one type.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct TypeCount {
    pub name: String,
    pub free: u32,
    pub total: u32,
}

impl TypeCount {
    /// `3 of 4 A100-80GB free`.
    pub fn text(&self) -> String {
        format!("{} of {} {} free", self.free, self.total, self.name)
    }
}

/// What one whole GPU brings in a partition.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct GpuShare {
    pub partition: String,
    pub cpus: u32,
    pub memory_mb: u64,
}

impl GpuShare {
    /// `gpu: 8 CPU cores and 48 GB of memory per GPU`.
    pub fn text(&self) -> String {
        format!(
            "{}: {} and {} of memory per GPU",
            self.partition,
            crate::domain::numbers::plural(u64::from(self.cpus), "CPU core", "CPU cores"),
            memory_text(self.memory_mb)
        )
    }
}

/// `48 GiB`, `1.5 GiB`, `512 MiB`: memory as every page writes it.
pub fn memory_text(mb: u64) -> String {
    if mb >= 1024 {
        let gb = mb as f64 / 1024.0;
        if mb.is_multiple_of(1024) {
            format!("{} GiB", mb / 1024)
        } else {
            format!("{gb:.1} GiB")
        }
    } else {
        format!("{mb} MiB")
    }
}

/// One node's GPUs on the map.
#[derive(Debug, Serialize)]
pub struct GpuNode {
    pub name: String,
    /// `DRAIN`, `DOWN`, or empty when the node takes jobs.
    pub unavailable: String,
    /// Why it is drained or down.
    pub reason: String,
    pub gpus: Vec<GpuCell>,
}

#[derive(Debug, Serialize)]
pub struct GpuCell {
    /// `GPU 0 · A100 · 80 GiB`, or `a100 ×2` for Slurm's GPUs of one type.
    pub title: String,
    /// Discovery ran and `nvidia-smi` did not find this declared GPU (it is still
    /// scheduled).
    pub absent: bool,
    pub slices: Vec<SliceCell>,
}

/// What a slice is doing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SliceState {
    Free,
    Used,
    Drained,
    Absent,
}

impl SliceState {
    pub const ALL: [SliceState; 4] = [
        SliceState::Free,
        SliceState::Used,
        SliceState::Drained,
        SliceState::Absent,
    ];

    /// The CSS class, also the JSON name.
    pub fn class(&self) -> &'static str {
        match self {
            SliceState::Free => "free",
            SliceState::Used => "used",
            SliceState::Drained => "drained",
            SliceState::Absent => "absent",
        }
    }

    /// The letter shown in the cell and the legend, so that the state does not
    /// rest on colour alone.
    pub fn letter(&self) -> &'static str {
        match self {
            SliceState::Free => "F",
            SliceState::Used => "U",
            SliceState::Drained => "D",
            SliceState::Absent => "A",
        }
    }

    /// The legend's words.
    pub fn legend(&self) -> &'static str {
        match self {
            SliceState::Free => "free",
            SliceState::Used => "in use",
            SliceState::Drained => "drained or down (takes no new work)",
            SliceState::Absent => "absent (declared, not found by nvidia-smi)",
        }
    }
}

#[derive(Debug, Serialize)]
pub struct SliceCell {
    /// Unique on the page: `node/gpu/slice`, for the refresh to find the cell.
    pub key: String,
    /// `GPU 0`, `1g.10gb`, `shard 3`.
    pub label: String,
    pub state: SliceState,
    /// The job holding it, where the backend says which.
    pub holder: Option<Holder>,
    /// The whole story in words: the cell's `title` and accessible label.
    pub describe: String,
}

/// The job holding a slice.
#[derive(Debug, Serialize)]
pub struct Holder {
    pub id: String,
    pub display_id: String,
    pub name: String,
    pub user: String,
    /// The viewer may open the job's page (their own, or an administrator).
    pub link: bool,
}

impl SliceCell {
    fn new(
        key: String,
        label: String,
        state: SliceState,
        holder: Option<Holder>,
        node: &GpuNode,
    ) -> SliceCell {
        let describe = match (&holder, state) {
            (Some(h), _) => format!(
                "{label}: in use by job {} ({}) of {}",
                h.display_id, h.name, h.user
            ),
            (None, SliceState::Used) => format!("{label}: in use"),
            (None, SliceState::Free) => format!("{label}: free"),
            (None, SliceState::Drained) if node.reason.is_empty() => {
                format!("{label}: free, but {} is {}", node.name, node.unavailable)
            }
            (None, SliceState::Drained) => format!(
                "{label}: free, but {} is {} ({})",
                node.name, node.unavailable, node.reason
            ),
            (None, SliceState::Absent) => {
                format!("{label}: absent (declared, not found by nvidia-smi)")
            }
        };
        SliceCell {
            key,
            label,
            state,
            holder,
            describe,
        }
    }
}

/// What one GPU brings in each partition of `cluster`.
pub fn shares(cluster: &ClusterConfig) -> Vec<GpuShare> {
    cluster
        .partitions
        .iter()
        .map(|p| GpuShare {
            partition: p.name.clone(),
            cpus: p.default_cpus_per_gpu,
            memory_mb: p.default_mem_per_gpu_mb,
        })
        .collect()
}

/// The slice type of a cell label: `GPU 0` → the GPU's model, `shard 3` → `shard`,
/// a MIG profile as it is.
fn slice_type(gpu: &GpuCell, label: &str) -> String {
    if label.starts_with("GPU ") {
        // `GPU 0 · A100-80GB · 80 GiB`: the model.
        gpu.title.split(" · ").nth(1).unwrap_or("GPU").to_string()
    } else if label.starts_with("shard ") {
        "shard".to_string()
    } else {
        label
            .rsplit_once(' ')
            .map_or(label, |(t, n)| {
                if n.bytes().all(|b| b.is_ascii_digit()) {
                    t
                } else {
                    label
                }
            })
            .to_string()
    }
}

/// Free and total slices per type, over the whole map.
pub fn type_counts(nodes: &[GpuNode]) -> Vec<TypeCount> {
    let mut counts: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for gpu in nodes.iter().flat_map(|n| &n.gpus) {
        for s in &gpu.slices {
            let c = counts.entry(slice_type(gpu, &s.label)).or_default();
            c.1 += 1;
            if s.state == SliceState::Free {
                c.0 += 1;
            }
        }
    }
    counts
        .into_iter()
        .map(|(name, (free, total))| TypeCount { name, free, total })
        .collect()
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

/// The state of a slice that no job is known to hold.
fn idle_state(node: &GpuNode, absent: bool) -> SliceState {
    if absent {
        SliceState::Absent
    } else if !node.unavailable.is_empty() {
        SliceState::Drained
    } else {
        SliceState::Free
    }
}

/// Slurm's nodes with GPUs: per node and GPU type, one cell per GPU, the first `used`
/// of them in use (Slurm's `GresUsed` counts per type; it does not say which job holds
/// which device). Slurm's GPUs are never absent here: Slurm says what it has.
pub fn slurm_gpu_map(nodes: &[NodeView]) -> Vec<GpuNode> {
    nodes
        .iter()
        .filter(|n| n.slices.iter().any(|s| s.total > 0))
        .map(|n| {
            let (unavailable, reason) = unavailable(&n.state);
            let mut node = GpuNode {
                name: n.name.clone(),
                unavailable,
                reason,
                gpus: Vec::new(),
            };
            node.gpus = n
                .slices
                .iter()
                .enumerate()
                .map(|(g, s)| GpuCell {
                    title: format!("{} ×{}", s.r#type, s.total),
                    absent: false,
                    slices: (0..s.total)
                        .map(|i| {
                            let state = if i < s.used {
                                SliceState::Used
                            } else {
                                idle_state(&node, false)
                            };
                            SliceCell::new(
                                format!("{}/{g}/{i}", n.name),
                                format!("{} {i}", s.r#type),
                                state,
                                None,
                                &node,
                            )
                        })
                        .collect(),
                })
                .collect();
            node
        })
        .collect()
}

/// The slices of one configured GPU: `(label, id)`.
fn slices_of(gpu: &scheduler::model::GpuConfig) -> Vec<(String, SliceId)> {
    match &gpu.mode {
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
    }
}

/// Every slice of every GPU in the scheduler's configuration, with the running
/// job (if any) whose allocation lists it, and each node's state from `nodes`.
/// `discovery`: whether `nvidia-smi` was asked (a declared GPU it did not report is
/// absent only then).
pub fn gpu_map(
    cluster: &ClusterConfig,
    status: &[GpuStatus],
    discovery: bool,
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
        .map(|config| {
            let (unavailable, reason) = nodes
                .iter()
                .find(|n| n.name == config.name)
                .map(|n| unavailable(&n.state))
                .unwrap_or_default();
            let mut node = GpuNode {
                name: config.name.clone(),
                unavailable,
                reason,
                gpus: Vec::new(),
            };
            node.gpus = config
                .gpus
                .iter()
                .map(|gpu| {
                    let absent = discovery
                        && status
                            .iter()
                            .find(|s| s.node == config.name && s.index == gpu.index)
                            .is_some_and(|s| !s.present);
                    let slices = slices_of(gpu)
                        .into_iter()
                        .enumerate()
                        .map(|(i, (label, id))| {
                            let holder = held.get(&(config.name.as_str(), &id)).map(|job| Holder {
                                id: job.id.to_string(),
                                display_id: job.display_id.clone(),
                                name: job.name.clone(),
                                user: job.user.clone(),
                                link: may_open(&job.user),
                            });
                            let state = if holder.is_some() {
                                SliceState::Used
                            } else {
                                idle_state(&node, absent)
                            };
                            SliceCell::new(
                                format!("{}/{}/{i}", config.name, gpu.index),
                                label,
                                state,
                                holder,
                                &node,
                            )
                        })
                        .collect();
                    GpuCell {
                        title: format!(
                            "GPU {} · {} · {}",
                            gpu.index,
                            gpu.model,
                            memory_text(gpu.memory_mb)
                        ),
                        absent,
                        slices,
                    }
                })
                .collect();
            node
        })
        .collect()
}

#[cfg(test)]
#[path = "gpu_map_tests.rs"]
pub(crate) mod tests;
