//! The cluster: configuration, inventory, jobs and the operations the server calls.
//! Owns all mutable scheduler state; one writer (the server's actor) drives it.
//! Submodules: `submit` (admission), `pass` (scheduling pass), `events` (job and
//! node events), `jobs` (the job table and `squeue`'s index of lines: every change
//! to a job goes through it). Policy lives in `crate::policy`, placement in `crate::placement`,
//! reservations in `crate::backfill`.

mod events;
pub(crate) mod inventory;
pub(crate) mod jobs;
mod licenses;
mod pass;
pub(crate) mod resources;
pub(crate) mod state;
mod submit;
mod test_only;
mod update;

pub use update::UpdateError;

use crate::config::ClusterConfig;
use crate::error::ConfigError;
use crate::model::{JobId, JobRequest, PendingReason, SliceId, Time};
use inventory::Inventory;
use serde::{Deserialize, Serialize};
use state::{Entity, EntityKind, Job, OwnerRt, Shape, ShapeKey};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use events::CancelEffect;
pub use test_only::TestOnly;

/// What the server must do after a pass or an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "decision")]
pub enum Decision {
    /// Launch the job (or array task) on this allocation.
    Start { job: JobId, allocation: Allocation },
    /// The job was cancelled by the scheduler (e.g. `DependencyNeverSatisfied`).
    Cancel { job: JobId, reason: PendingReason },
    /// The job reached its time limit: kill it, then call `job_finished`. It is
    /// COMPLETING until then and keeps its resources.
    TimeLimit { job: JobId },
    /// The job's node went DOWN; it is NODE_FAIL or, if `requeued`, PENDING again.
    /// Its resources are already free: kill what is left of it on other nodes.
    NodeFail { job: JobId, requeued: bool },
}

/// Where a job runs: per node, CPUs, memory and the exact slices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub nodes: Vec<NodeAllocation>,
}

/// A job's resources on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAllocation {
    pub node: String,
    pub cpus: u32,
    pub memory_mb: u64,
    pub slices: Vec<SliceId>,
}

impl NodeAllocation {
    /// `CUDA_VISIBLE_DEVICES` for this node: GPU indices or MIG UUIDs, each once.
    pub fn cuda_visible_devices(&self) -> String {
        let mut seen: Vec<String> = Vec::new();
        for s in &self.slices {
            let d = s.cuda_device();
            if !seen.contains(&d) {
                seen.push(d);
            }
        }
        seen.join(",")
    }
}

/// A reservation made by the last pass for a job that could not start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    pub job: JobId,
    pub start: Time,
    pub end: Option<Time>,
    pub nodes: Vec<String>,
}

/// Ready jobs of one shape, owner and QOS, in priority order: they are
/// interchangeable for placement and limits, so one failure blocks them all.
#[derive(Debug, Clone, Default)]
pub(crate) struct Queue {
    pub jobs: BTreeSet<(std::cmp::Reverse<i64>, JobId)>,
    pub reason: Option<PendingReason>,
}

pub(crate) type QueueKey = (u32, u32, u8);

/// A queue head's place in the pass order: highest priority, then lowest job id.
pub(crate) type HeadKey = (std::cmp::Reverse<i64>, JobId, QueueKey);

/// The scheduler state of a whole cluster.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub(crate) cfg: ClusterConfig,
    pub(crate) inv: Inventory,
    /// Slice type names (deduplicated class type names) and class → type.
    pub(crate) types: Vec<String>,
    pub(crate) class_type: Vec<u8>,
    pub(crate) jobs: jobs::Jobs,
    pub(crate) next_id: u64,
    pub(crate) owners: Vec<OwnerRt>,
    pub(crate) owner_ids: BTreeMap<crate::model::Owner, u32>,
    pub(crate) entities: Vec<Entity>,
    pub(crate) entity_ids: BTreeMap<(EntityKind, String), u32>,
    pub(crate) shapes: Vec<Shape>,
    pub(crate) shape_ids: HashMap<ShapeKey, u32>,
    pub(crate) queues: BTreeMap<QueueKey, Queue>,
    /// The first job of every queue, in pass order; kept in step with `queues`
    /// by `enqueue` and `dequeue`, so a pass never walks all queues to find them.
    pub(crate) heads: BTreeSet<HeadKey>,
    /// Where the rotating window of the last capped pass stopped (see
    /// `BackfillConfig::rotating_job_test`); `None`: start below the top window.
    pub(crate) resume_after: Option<HeadKey>,
    /// Running and completing jobs by planned end (`Time::MAX`: no limit).
    pub(crate) running_by_end: BTreeSet<(Time, JobId)>,
    /// Pending jobs to re-examine at a time (begin time, `after:+delay`).
    pub(crate) wakeups: BTreeSet<(Time, JobId)>,
    /// Job number → pending jobs whose dependencies name it.
    pub(crate) dependents: BTreeMap<u64, Vec<JobId>>,
    /// Pending jobs whose eligibility must be re-examined at the next pass.
    pub(crate) dirty: BTreeSet<JobId>,
    pub(crate) last_priority_calc: Time,
    pub(crate) last_time: Time,
    pub(crate) reservations: Vec<Reservation>,
    /// Licenses held by running jobs, by name.
    pub(crate) licenses_used: BTreeMap<String, u32>,
    /// Fair-share totals over all accounts (usage, shares) at a time, so that
    /// submissions at one instant do not walk every account. A pure cache:
    /// cleared whenever usage or the set of accounts changes, so it always holds
    /// exactly what a fresh walk would compute.
    pub(crate) fs_totals: std::cell::Cell<Option<(Time, f64, f64)>>,
    pub(crate) total_gpu_milli: u64,
    pub(crate) total_cpus: u64,
    /// The last few distinct requests submitted: a job that asks exactly what one of
    /// them asked shares it (a queue is mostly a few shapes of request, submitted in
    /// bursts). Memory only; not part of the state.
    pub(crate) recent_requests: Vec<Arc<JobRequest>>,
}

impl Cluster {
    /// Builds a cluster; checks node, GPU, MIG and partition configuration.
    pub fn new(cfg: ClusterConfig) -> Result<Cluster, ConfigError> {
        let inv = Inventory::build(&cfg)?;
        let mut names = BTreeSet::new();
        for p in &cfg.partitions {
            if !names.insert(p.name.clone()) {
                return Err(ConfigError(format!("partition {} repeated", p.name)));
            }
        }
        if cfg.partitions.iter().filter(|p| p.default).count() > 1 {
            return Err(ConfigError("more than one default partition".into()));
        }
        if cfg.qos.len() > 250 {
            return Err(ConfigError("more than 250 QOS levels".into()));
        }
        let mut types: Vec<String> = Vec::new();
        let mut class_type = Vec::new();
        for c in &inv.classes {
            let t = match types.iter().position(|t| *t == c.type_name) {
                Some(t) => t,
                None => {
                    types.push(c.type_name.clone());
                    types.len() - 1
                }
            };
            class_type.push(t as u8);
        }
        let mut cl = Cluster {
            cfg,
            inv,
            types,
            class_type,
            jobs: jobs::Jobs::default(),
            next_id: 1,
            owners: Vec::new(),
            owner_ids: BTreeMap::new(),
            entities: Vec::new(),
            entity_ids: BTreeMap::new(),
            shapes: Vec::new(),
            shape_ids: HashMap::new(),
            queues: BTreeMap::new(),
            heads: BTreeSet::new(),
            resume_after: None,
            running_by_end: BTreeSet::new(),
            wakeups: BTreeSet::new(),
            dependents: BTreeMap::new(),
            dirty: BTreeSet::new(),
            last_priority_calc: Time::MIN,
            last_time: Time::MIN,
            reservations: Vec::new(),
            licenses_used: BTreeMap::new(),
            fs_totals: std::cell::Cell::new(None),
            total_gpu_milli: 0,
            total_cpus: 0,
            recent_requests: Vec::new(),
        };
        for n in &cl.inv.nodes {
            cl.total_cpus += u64::from(n.cfg.cpus);
            for (c, class) in cl.inv.classes.iter().enumerate() {
                cl.total_gpu_milli += u64::from(n.total.slices[c]) * u64::from(class.weight_milli);
            }
        }
        if !cl.cfg.qos.iter().any(|q| q.name == "normal") {
            cl.cfg.qos.insert(
                0,
                crate::config::QosConfig {
                    name: "normal".into(),
                    priority: 0,
                },
            );
        }
        Ok(cl)
    }

    /// The configuration in force (with runtime limit changes applied).
    pub fn config(&self) -> &ClusterConfig {
        &self.cfg
    }

    /// Takes over what `old`, a cluster with no job pending or running, counted for
    /// its users, groups and accounts (GPU time this period, fair-share usage), so
    /// that a new configuration does not forget it.
    pub fn keep_usage_of(&mut self, old: &Cluster) {
        self.owners = old.owners.clone();
        self.owner_ids = old.owner_ids.clone();
        self.entities = old.entities.clone();
        self.entity_ids = old.entity_ids.clone();
        for e in &mut self.entities {
            let u = &mut e.usage;
            (u.gpus_milli, u.running, u.submitted) = (0, 0, 0);
            u.by_type = [0; resources::MAX_CLASSES];
            e.limits = Default::default();
        }
        for i in 0..self.entities.len() {
            let lim = self.limits_for(self.entities[i].kind, &self.entities[i].name.clone());
            self.entities[i].limits = lim;
        }
        self.fs_totals.set(None);
    }

    /// Reservations made by the last pass, highest priority first.
    pub fn reservations(&self) -> &[Reservation] {
        &self.reservations
    }

    pub(crate) fn allocation_of(&self, job: &Job) -> Allocation {
        Allocation {
            nodes: job
                .alloc
                .iter()
                .map(|a| {
                    let n = &self.inv.nodes[a.node as usize];
                    NodeAllocation {
                        node: n.cfg.name.clone(),
                        cpus: a.res.cpus,
                        memory_mb: a.res.mem,
                        slices: a
                            .slices
                            .iter()
                            .map(|&i| n.slices[i as usize].id.clone())
                            .collect(),
                    }
                })
                .collect(),
        }
    }

    pub(crate) fn queue_key(job: &Job) -> QueueKey {
        (job.shape, job.owner, job.qos)
    }

    pub(crate) fn enqueue(&mut self, id: JobId) {
        if let Some(j) = self.jobs.get(&id) {
            let (key, p) = (Self::queue_key(j), j.priority);
            self.queue_insert(key, p, id);
        }
        if let Some(mut j) = self.jobs.get_mut(&id) {
            j.queued = true;
        }
    }

    /// Puts a job into queue `key` at priority `p` (the caller marks it queued).
    pub(crate) fn queue_insert(&mut self, key: QueueKey, p: i64, id: JobId) {
        let entry = (std::cmp::Reverse(p), id);
        let q = self.queues.entry(key).or_default();
        let old = q.jobs.first().copied();
        if q.jobs.insert(entry) && old.is_none_or(|o| entry < o) {
            if let Some((p, oid)) = old {
                self.heads.remove(&(p, oid, key));
            }
            self.heads.insert((entry.0, entry.1, key));
        }
    }

    pub(crate) fn dequeue(&mut self, id: JobId) {
        if let Some(j) = self.jobs.get(&id) {
            let key = Self::queue_key(j);
            if let Some(q) = self.queues.get_mut(&key) {
                let entry = (std::cmp::Reverse(j.priority), id);
                let was_head = q.jobs.first() == Some(&entry);
                if q.jobs.remove(&entry) && was_head {
                    self.heads.remove(&(entry.0, entry.1, key));
                    if let Some(&(p, nid)) = q.jobs.first() {
                        self.heads.insert((p, nid, key));
                    }
                }
                if q.jobs.is_empty() {
                    self.queues.remove(&key);
                }
            }
        }
        if let Some(mut j) = self.jobs.get_mut(&id) {
            j.queued = false;
        }
    }

    pub(crate) fn in_queue(&self, id: JobId) -> bool {
        self.jobs.get(&id).is_some_and(|j| j.queued)
    }
}
