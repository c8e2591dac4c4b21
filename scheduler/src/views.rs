//! Read-only views for `squeue` (jobs with state, reason, times, node list) and
//! `sinfo` (partitions, node states, slices free and used). Must not change state.

use crate::cluster::jobs::LineKey;
use crate::cluster::state::Job;
use crate::cluster::{Allocation, Cluster, QueueKey};
use crate::model::{JobId, JobState, NodeState, PendingReason, Time, TimeLimit};
use crate::parse::compress_hostlist;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which jobs `squeue` lists; empty fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SqueueFilter {
    pub user: Option<String>,
    pub partition: Option<String>,
    pub states: Vec<JobState>,
    /// Also list jobs that are over (COMPLETED, FAILED …).
    pub include_finished: bool,
}

/// How many lines `squeue` lists (jobs not over; an array's pending tasks one line),
/// by partition and state, and the pending ones by reason: what a metrics scrape
/// reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub by_state: BTreeMap<(String, JobState), u64>,
    pub pending_by_reason: BTreeMap<PendingReason, u64>,
}

impl QueueCounts {
    /// Counts one line.
    pub fn add(&mut self, view: &JobView) {
        *self
            .by_state
            .entry((view.partition.clone(), view.state))
            .or_default() += 1;
        if view.state == JobState::Pending {
            *self
                .pending_by_reason
                .entry(view.reason.unwrap_or(PendingReason::None))
                .or_default() += 1;
        }
    }
}

/// One `squeue` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobView {
    pub id: JobId,
    /// `123`, `123_4`, or `123_[5-9%2]` for an array's pending tasks.
    pub display_id: String,
    pub name: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub state: JobState,
    pub reason: Option<PendingReason>,
    pub priority: i64,
    /// An administrator's change to its nice (`scontrol update Nice=`, `scontrol top`),
    /// added to what the job asked for (`--nice`).
    #[serde(default)]
    pub admin_nice: i32,
    pub submit_time: Time,
    pub start_time: Option<Time>,
    /// A pending job's planned start: where the last pass's backfill reserved
    /// resources for it (`squeue --start`'s StartTime); `None` when unknown (no
    /// reservation was made for it, or it is not pending).
    #[serde(default)]
    pub expected_start: Option<Time>,
    /// When it became eligible to start (Slurm's `EligibleTime`): `None` while it waits
    /// on a hold or a dependency; a `--begin` time yet to come for one that waits on it.
    #[serde(default)]
    pub eligible_time: Option<Time>,
    pub end_time: Option<Time>,
    pub time_limit: TimeLimit,
    /// Seconds run so far.
    pub time_used: u64,
    pub nodes: u32,
    pub nodelist: String,
    /// `gpu:4`, `gpu:1g.10gb:2`, `shard:2` per node, or empty.
    pub gres: String,
    /// GPUs in thousandths of a whole GPU over all nodes, a MIG instance or a shard
    /// counting its fraction: of the slices given once the job has started, else of
    /// the largest it may be given. What accounting charges.
    pub gpu_milli: u64,
    pub allocation: Option<Allocation>,
    pub exit: Option<crate::model::JobOutcome>,
    pub restarts: u32,
    /// What was asked for (QOS, dependency, comment, constraint, nodes, memory …),
    /// where the scheduler holds it; shared, not copied.
    #[serde(skip)]
    pub request: Option<std::sync::Arc<crate::model::JobRequest>>,
}

/// One node in `sinfo -N`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeView {
    pub name: String,
    pub state: NodeState,
    pub partitions: Vec<String>,
    pub cpus_total: u32,
    pub cpus_free: u32,
    pub memory_mb_total: u64,
    pub memory_mb_free: u64,
    pub features: Vec<String>,
    pub slices: Vec<SliceUsage>,
}

/// Slices of one type: how many exist and how many are in use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceUsage {
    pub r#type: String,
    pub total: u32,
    pub used: u32,
}

/// One partition in `sinfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionView {
    pub name: String,
    pub default: bool,
    pub max_time: TimeLimit,
    pub nodes_total: u32,
    /// Node count per state name (`IDLE`, `MIXED`, `ALLOCATED`, `DRAIN`, `DOWN`).
    pub nodes_by_state: Vec<(String, u32, String)>,
    pub cpus_total: u64,
    pub cpus_used: u64,
    pub slices: Vec<SliceUsage>,
    pub pending_jobs: u64,
    pub running_jobs: u64,
}

impl Cluster {
    fn view(&self, j: &Job, now: Time) -> JobView {
        let shape = &self.shapes[j.shape as usize];
        let owner = &self.owners[j.owner as usize].owner;
        let display_id = match &j.array {
            // An array all of whose tasks have left its record: its number alone.
            Some(a) if a.pending.is_empty() => j.id.to_string(),
            Some(a) => {
                let spec = crate::model::ArraySpec {
                    ranges: a.pending.clone(),
                    max_running: a.max_running,
                };
                format!("{}_[{}]", j.id.job, spec)
            }
            None => j.id.to_string(),
        };
        let names: Vec<&str> = j
            .alloc
            .iter()
            .map(|a| self.inv.nodes[a.node as usize].cfg.name.as_str())
            .collect();
        let gres = match &j.req.gpus {
            None => String::new(),
            Some(_) => {
                let k = &shape.key.need;
                let types: Vec<&str> = (0..self.inv.classes.len())
                    .filter(|c| k.mask & (1 << c) != 0)
                    .map(|c| self.inv.classes[c].type_name.as_str())
                    .collect();
                if k.mask == self.inv.whole_mask {
                    format!("gpu:{}", k.count)
                } else if k.mask == self.inv.shard_mask {
                    format!("shard:{}", k.count)
                } else {
                    format!("gpu:{}:{}", types.join("|"), k.count)
                }
            }
        };
        let reason = self.reason_of(j);
        let used = match (j.start_time, j.state) {
            (Some(s), JobState::Running | JobState::Completing) => (now - s).max(0) as u64,
            (Some(s), _) => (j.end_time.unwrap_or(s) - s).max(0) as u64,
            _ => 0,
        };
        JobView {
            id: j.id,
            display_id,
            name: j.req.name.clone().unwrap_or_else(|| "batch".into()),
            user: owner.user.clone(),
            account: owner.account.clone(),
            partition: self.cfg.partitions[shape.key.partition as usize]
                .name
                .clone(),
            state: j.state,
            reason,
            priority: j.priority,
            admin_nice: j.admin_nice,
            submit_time: j.submit_time,
            start_time: j.start_time,
            expected_start: self.expected_start_of(j),
            eligible_time: match (j.state, j.queued) {
                (JobState::Pending, false) => match reason {
                    Some(PendingReason::BeginTime) => j.begin,
                    _ => None,
                },
                _ => Some(j.eligible_time),
            },
            end_time: j.end_time,
            // A running job's own limit (`--time-min` may have shortened it).
            time_limit: match (j.state, j.start_time, j.end_time) {
                (JobState::Running, Some(s), Some(e)) if e > s => {
                    TimeLimit::Seconds((e - s) as u64)
                }
                _ => shape
                    .key
                    .time
                    .map_or(TimeLimit::Unlimited, TimeLimit::Seconds),
            },
            time_used: used,
            nodes: shape.key.nodes,
            gpu_milli: if j.alloc.is_empty() {
                shape.gpu_milli
            } else {
                self.allocated_gpu_milli(j)
            },
            nodelist: compress_hostlist(&names),
            gres,
            allocation: (!j.alloc.is_empty()).then(|| self.allocation_of(j)),
            exit: j.outcome,
            restarts: j.restarts,
            request: Some(j.req.clone()),
        }
    }

    /// The start the last pass planned for a pending job: its reservation's start
    /// (at most `max_reservations` of them, so the search is short).
    fn expected_start_of(&self, j: &Job) -> Option<Time> {
        if j.state != JobState::Pending {
            return None;
        }
        self.reservations
            .iter()
            .find(|r| r.job == j.id)
            .map(|r| r.start)
    }

    /// One job (or task, or array) by id.
    pub fn job(&self, id: JobId, now: Time) -> Option<JobView> {
        self.jobs.get(&id).map(|j| self.view(j, now))
    }

    /// Whether array task `id` still waits inside its array's own record (it has no
    /// record of its own yet).
    pub fn waits_in_array(&self, id: JobId) -> bool {
        let Some(t) = id.task else {
            return false;
        };
        self.jobs.get(&id).is_none()
            && self
                .jobs
                .get(&JobId::new(id.job))
                .and_then(|p| p.array.as_ref())
                .is_some_and(|a| {
                    crate::model::ArraySpec {
                        ranges: a.pending.clone(),
                        max_running: None,
                    }
                    .contains(t)
                })
    }

    /// The request of job number `job` (the job, its array, or a task of it) as
    /// submitted, while the cluster knows it.
    pub fn request_of(&self, job: u64) -> Option<&crate::model::JobRequest> {
        self.jobs
            .range(JobId::new(job)..)
            .next()
            .filter(|(id, _)| id.job == job)
            .map(|(_, j)| j.req.as_ref())
    }

    /// `squeue`: jobs in id order. An array's pending tasks are one line; started
    /// tasks have their own lines. By default only pending and running jobs.
    pub fn squeue(&self, filter: &SqueueFilter, now: Time) -> Vec<JobView> {
        self.squeue_page(filter, 0, usize::MAX, now).0
    }

    /// Whether `squeue` lists nothing (no job pending, running or completing).
    pub fn is_empty(&self) -> bool {
        self.jobs.lines_where(|_| true).1 == 0
    }

    /// One page of [`Cluster::squeue`]: `limit` lines from `offset`, and how many
    /// lines there are in all. Only the page's lines are built, and jobs that are
    /// not over are read from the index of lines (`cluster::jobs`): what a page
    /// costs grows with its offset, not with the queue.
    pub fn squeue_page(
        &self,
        filter: &SqueueFilter,
        offset: usize,
        limit: usize,
        now: Time,
    ) -> (Vec<JobView>, u64) {
        let mut page = Vec::with_capacity(limit.min(10_000));
        if filter.include_finished {
            let mut total = 0u64;
            for j in self.walk(filter) {
                if total >= offset as u64 && page.len() < limit {
                    page.push(self.view(j, now));
                }
                total += 1;
            }
            return (page, total);
        }
        let (ids, total) = self.jobs.lines_where(|key| self.line_matches(key, filter));
        for id in ids.skip(offset).take(limit) {
            if let Some(j) = self.jobs.get(&id) {
                page.push(self.view(j, now));
            }
        }
        (page, total)
    }

    /// Why a pending job waits, as `squeue` shows it: a queued job's own reason, or
    /// its queue's (what stopped the queue's head) when it has none of its own.
    fn reason_of(&self, j: &Job) -> Option<PendingReason> {
        if j.state != JobState::Pending {
            None
        } else if j.queued {
            let q = self
                .queues
                .get(&Cluster::queue_key(j))
                .and_then(|q| q.reason);
            Some(shown_reason(j.reason, q))
        } else {
            Some(j.reason)
        }
    }

    /// [`QueueCounts`] of every line: the states from the index of lines, the reasons
    /// from one walk of the jobs (a pending job's reason is not indexed).
    pub fn queue_counts(&self) -> QueueCounts {
        let mut counts = QueueCounts::default();
        for (key, ids) in self.jobs.lines_by_key() {
            let partition = &self.cfg.partitions[self.partition_of(key)];
            *counts
                .by_state
                .entry((partition.name.clone(), key.state))
                .or_default() += ids.len() as u64;
        }
        // Jobs of one queue are mostly submitted together: their queue's reason is
        // looked up once for a run of them ([`Cluster::reason_of`] otherwise).
        let mut last: Option<(QueueKey, Option<PendingReason>)> = None;
        for j in self.jobs.values() {
            if j.state != JobState::Pending || LineKey::of(j).is_none() {
                continue;
            }
            let reason = if j.queued {
                let key = Cluster::queue_key(j);
                let queue_reason = match last {
                    Some((k, r)) if k == key => r,
                    _ => {
                        let r = self.queues.get(&key).and_then(|q| q.reason);
                        last = Some((key, r));
                        r
                    }
                };
                shown_reason(j.reason, queue_reason)
            } else {
                j.reason
            };
            *counts.pending_by_reason.entry(reason).or_default() += 1;
        }
        counts
    }

    fn partition_of(&self, key: &LineKey) -> usize {
        self.shapes[key.shape as usize].key.partition as usize
    }

    /// Whether lines with `key` pass `filter` (its ended jobs aside).
    fn line_matches(&self, key: &LineKey, filter: &SqueueFilter) -> bool {
        (filter.states.is_empty() || filter.states.contains(&key.state))
            && filter
                .user
                .as_ref()
                .is_none_or(|u| self.owners[key.owner as usize].owner.user == *u)
            && filter.partition.as_ref().is_none_or(|p| {
                self.cfg.partitions[self.shapes[key.shape as usize].key.partition as usize].name
                    == *p
            })
    }

    /// Every job `squeue` lists for `filter`, ended ones included when it asks, in id
    /// order: a walk of the whole table.
    fn walk<'a>(&'a self, filter: &'a SqueueFilter) -> impl Iterator<Item = &'a Job> + 'a {
        self.jobs.values().filter(move |j| {
            let visible = if j.is_array_parent() {
                j.array.as_ref().is_some_and(|a| !a.pending.is_empty())
                    && j.state == JobState::Pending
                    || (filter.include_finished && j.state.is_terminal())
            } else {
                filter.include_finished || !j.state.is_terminal()
            };
            let state = if j.is_array_parent() {
                JobState::Pending
            } else {
                j.state
            };
            visible
                && self.line_matches(
                    &LineKey {
                        owner: j.owner,
                        shape: j.shape,
                        state,
                        array: j.is_array_parent(),
                    },
                    filter,
                )
        })
    }

    /// Whether the index of `squeue`'s lines holds exactly what a walk of every job
    /// finds (for tests and checks; walks the whole table).
    #[doc(hidden)]
    pub fn lines_consistent(&self) -> bool {
        self.jobs.lines_consistent()
    }

    fn slice_usage(&self, nodes: &[u32]) -> Vec<SliceUsage> {
        let mut out: Vec<SliceUsage> = self
            .types
            .iter()
            .map(|t| SliceUsage {
                r#type: t.clone(),
                total: 0,
                used: 0,
            })
            .collect();
        for &n in nodes {
            let node = &self.inv.nodes[n as usize];
            for (c, _) in self.inv.classes.iter().enumerate() {
                let t = self.class_type[c] as usize;
                out[t].total += u32::from(node.total.slices[c]);
                out[t].used += u32::from(node.total.slices[c] - node.free.slices[c]);
            }
        }
        out.retain(|s| s.total > 0);
        out
    }

    /// `sinfo -N`: every node.
    pub fn nodes(&self) -> Vec<NodeView> {
        (0..self.inv.nodes.len() as u32)
            .map(|n| {
                let node = &self.inv.nodes[n as usize];
                NodeView {
                    name: node.cfg.name.clone(),
                    state: node.state(),
                    partitions: node
                        .partitions
                        .iter()
                        .map(|&p| self.cfg.partitions[p as usize].name.clone())
                        .collect(),
                    cpus_total: node.total.cpus,
                    cpus_free: node.free.cpus,
                    memory_mb_total: node.total.mem,
                    memory_mb_free: node.free.mem,
                    features: node.cfg.features.clone(),
                    slices: self.slice_usage(&[n]),
                }
            })
            .collect()
    }

    /// `sinfo`: every partition with node states and slice usage.
    pub fn sinfo(&self) -> Vec<PartitionView> {
        self.cfg
            .partitions
            .iter()
            .enumerate()
            .map(|(pi, p)| {
                let nodes: Vec<u32> = p
                    .nodes
                    .iter()
                    .filter_map(|n| self.inv.by_name.get(n).copied())
                    .collect();
                let mut by_state: Vec<(String, Vec<&str>)> = Vec::new();
                for &n in &nodes {
                    let node = &self.inv.nodes[n as usize];
                    let s = node.state().name().to_string();
                    match by_state.iter_mut().find(|(k, _)| *k == s) {
                        Some((_, v)) => v.push(&node.cfg.name),
                        None => by_state.push((s, vec![&node.cfg.name])),
                    }
                }
                by_state.sort();
                // From the index of lines: only arrays' lines are looked up (for how
                // many tasks each still has pending).
                let (mut pending, mut running) = (0u64, 0u64);
                for (key, ids) in self.jobs.lines_by_key() {
                    if self.partition_of(key) != pi {
                        continue;
                    }
                    match (key.array, key.state) {
                        (true, _) => {
                            pending += ids
                                .iter()
                                .filter_map(|id| self.jobs.get(id)?.array.as_ref())
                                .map(|a| a.pending_count())
                                .sum::<u64>()
                        }
                        (false, JobState::Pending) => pending += ids.len() as u64,
                        (false, JobState::Running | JobState::Completing) => {
                            running += ids.len() as u64
                        }
                        _ => {}
                    }
                }
                PartitionView {
                    name: p.name.clone(),
                    default: p.default,
                    max_time: p
                        .max_time_secs
                        .map_or(TimeLimit::Unlimited, TimeLimit::Seconds),
                    nodes_total: nodes.len() as u32,
                    nodes_by_state: by_state
                        .into_iter()
                        .map(|(s, v)| (s, v.len() as u32, compress_hostlist(&v)))
                        .collect(),
                    cpus_total: nodes
                        .iter()
                        .map(|&n| u64::from(self.inv.nodes[n as usize].total.cpus))
                        .sum(),
                    cpus_used: nodes
                        .iter()
                        .map(|&n| {
                            let node = &self.inv.nodes[n as usize];
                            u64::from(node.total.cpus - node.free.cpus)
                        })
                        .sum(),
                    slices: self.slice_usage(&nodes),
                    pending_jobs: pending,
                    running_jobs: running,
                }
            })
            .collect()
    }
}

/// What `squeue` shows for a queued job: its own reason, unless it has none beyond
/// waiting its turn, then its queue's (what stopped the queue's head).
fn shown_reason(own: PendingReason, queue: Option<PendingReason>) -> PendingReason {
    match (own, queue) {
        (PendingReason::Priority | PendingReason::None, Some(r)) => r,
        (r, _) => r,
    }
}
