//! The persistent part of the cluster's state (what a snapshot holds): jobs,
//! owners, limit entities with their usage, and interned job shapes.

use super::resources::{Need, MAX_CLASSES};
use crate::config::Limits;
use crate::model::{
    Constraint, JobId, JobOutcome, JobRequest, JobState, Owner, PendingReason, Time,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Who holds a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Hold {
    None,
    User,
    Admin,
}

/// Resources of a running job on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NodeAlloc {
    pub node: u32,
    pub res: super::resources::Res,
    pub slices: Vec<u16>,
}

/// Pending tasks of an array job, kept as ranges (no record per task).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ArrayRt {
    /// Remaining `(first, last, step)` ranges, first task first.
    pub pending: Vec<(u32, u32, u32)>,
    pub max_running: Option<u32>,
    pub total: u32,
    /// Tasks split off and not yet over.
    pub active: u32,
    pub done_ok: u32,
    pub done_not_ok: u32,
    pub first_start: Option<Time>,
}

impl ArrayRt {
    pub fn pending_count(&self) -> u64 {
        self.pending
            .iter()
            .map(|&(a, b, s)| u64::from((b - a) / s + 1))
            .sum()
    }
    pub fn pop(&mut self) -> Option<u32> {
        let first = self.pending.first_mut()?;
        let t = first.0;
        if first.0 >= first.1 {
            self.pending.remove(0);
        } else {
            first.0 += first.2;
        }
        Some(t)
    }
}

/// One job record: a plain job, an array job's pending remainder, or a task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Job {
    pub id: JobId,
    pub owner: u32,
    pub qos: u8,
    pub shape: u32,
    /// Not written with the job: a snapshot keeps each distinct request once
    /// (`crate::snapshot`); read from older snapshots, which have it here.
    #[serde(skip_serializing, default = "no_request")]
    pub req: Arc<JobRequest>,
    pub state: JobState,
    pub reason: PendingReason,
    pub submit_time: Time,
    pub eligible_time: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub begin: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    pub priority: i64,
    pub hold: Hold,
    pub admin_nice: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<Box<ArrayRt>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alloc: Vec<NodeAlloc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<JobOutcome>,
    /// State to take when a COMPLETING job is reported finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_state: Option<JobState>,
    pub requeue_on_finish: bool,
    pub restarts: u32,
    /// GPU-milli-seconds charged against period limits, and the period.
    pub charged: u64,
    pub charge_period: i64,
    /// Whether the job sits in a ready queue.
    pub queued: bool,
    /// The state of its line in `squeue`'s index, if listed ([`super::jobs::Jobs`]
    /// keeps this).
    #[serde(skip)]
    pub line: Option<JobState>,
}

/// The request of a job read without one (a snapshot's job, before its own is set):
/// one shared empty request, not one allocation per job.
fn no_request() -> Arc<JobRequest> {
    static EMPTY: std::sync::OnceLock<Arc<JobRequest>> = std::sync::OnceLock::new();
    EMPTY
        .get_or_init(|| Arc::new(JobRequest::default()))
        .clone()
}

impl Job {
    pub fn is_array_parent(&self) -> bool {
        self.array.is_some()
    }
}

/// Interned owner (user, groups, charged account) with its limit entities.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct OwnerRt {
    pub owner: Owner,
    /// Entities: user first, then groups, then account.
    pub entities: Vec<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) enum EntityKind {
    User,
    Group,
    Account,
}

/// Usage counters of a user, group or account.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Usage {
    pub gpus_milli: u64,
    pub by_type: [u32; MAX_CLASSES],
    pub running: u32,
    pub submitted: u32,
    pub period: i64,
    /// Milli-GPU-seconds charged in `period` (a rolling period: the running jobs'
    /// reservations, `GPUs × time limit`).
    pub period_charged: u64,
    /// A rolling period's jobs that ended within it: `(start, end, milli-GPUs)`.
    #[serde(default)]
    pub window: Vec<(Time, Time, u64)>,
    /// Decayed fair-share usage (billing units × seconds), its rate, last update.
    #[serde(with = "f64_bits")]
    pub fs_usage: f64,
    #[serde(with = "f64_bits")]
    pub fs_rate: f64,
    pub fs_last: Time,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Entity {
    pub kind: EntityKind,
    pub name: String,
    pub limits: Limits,
    pub usage: Usage,
}

/// What makes jobs interchangeable for placement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct ShapeKey {
    pub partition: u16,
    pub nodes: u32,
    pub need: Need,
    pub exclusive: bool,
    /// Time limit in seconds (`None`: unlimited).
    pub time: Option<u64>,
    pub required: Vec<u32>,
    pub excluded: Vec<u32>,
    pub constraint: Option<Constraint>,
    /// Licenses (`-L`) by name, sorted.
    #[serde(default)]
    pub licenses: Vec<(String, u32)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Shape {
    pub key: ShapeKey,
    /// Nodes the job may use (partition ∩ constraint − excluded), sorted.
    pub eligible: Vec<u32>,
    /// Job size in milli-GPUs (largest slice weight of the mask × count × nodes).
    pub gpu_milli: u64,
    /// Slice types (by type id) the job may use, as a bit mask.
    pub type_mask: u16,
}

/// Floats as their bit patterns, so that a snapshot restores them exactly.
mod f64_bits {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.to_bits())
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(f64::from_bits(u64::deserialize(d)?))
    }
}
