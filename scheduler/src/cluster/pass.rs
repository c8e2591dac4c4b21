//! The scheduling pass: time limits, wake-ups, dependency changes, priority
//! recalculation, then one walk over the ready queues in priority order that
//! starts what fits, reserves for the top jobs that do not, and backfills.

use super::state::{Job, NodeAlloc};
use super::{Cluster, Decision, QueueKey, Reservation};
use crate::model::{JobId, JobState, PendingReason, Time};
use crate::placement::{place, ReservedTable};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

impl Cluster {
    /// Runs one scheduling pass at `now` and returns what the server must do, in
    /// order: time limits first, then cancels, then starts.
    pub fn schedule(&mut self, now: Time) -> Vec<Decision> {
        let mut out = Vec::new();
        self.last_time = self.last_time.max(now);
        // Time limits.
        let expired: Vec<JobId> = self
            .running_by_end
            .range(..=(now, JobId::task(u64::MAX, u32::MAX)))
            .map(|(_, id)| *id)
            .filter(|id| {
                self.jobs
                    .get(id)
                    .is_some_and(|j| j.state == JobState::Running)
            })
            .collect();
        for id in expired {
            if let Some(j) = self.jobs.get_mut(&id) {
                j.state = JobState::Completing;
                j.final_state = Some(JobState::Timeout);
            }
            out.push(Decision::TimeLimit { job: id });
        }
        // Wake-ups and dependency changes.
        while let Some(&(t, id)) = self.wakeups.first() {
            if t > now {
                break;
            }
            self.wakeups.pop_first();
            self.dirty.insert(id);
        }
        while let Some(id) = self.dirty.pop_first() {
            self.refresh(id, now, &mut out);
        }
        if now.saturating_sub(self.last_priority_calc) >= self.cfg.priority.calc_period_secs as i64
        {
            self.recalc_priorities(now);
        }
        self.main_pass(now, &mut out);
        out
    }

    fn main_pass(&mut self, now: Time, out: &mut Vec<Decision>) {
        let mut heap: BinaryHeap<(i64, Reverse<JobId>, QueueKey)> =
            BinaryHeap::with_capacity(self.queues.len());
        for (k, q) in &self.queues {
            if let Some(&(Reverse(p), id)) = q.jobs.first() {
                heap.push((p, Reverse(id), *k));
            }
        }
        let mut resv = ReservedTable::default();
        let mut reservations: Vec<Reservation> = Vec::new();
        let max_resv = self.cfg.backfill.max_reservations;
        let mut failed_shapes: BTreeSet<u32> = BTreeSet::new();
        let mut touched: Vec<QueueKey> = Vec::new();
        while let Some((prio, Reverse(id), key)) = heap.pop() {
            let next_in_queue = |cl: &Cluster| -> Option<(i64, Reverse<JobId>, QueueKey)> {
                let q = cl.queues.get(&key)?;
                let (Reverse(p), nid) = *q.jobs.range((Reverse(prio), id)..).nth(1)?;
                Some((p, Reverse(nid), key))
            };
            let Some(job) = self.jobs.get(&id) else {
                continue;
            };
            // Per-job reasons to skip: array task limit, singleton.
            if let Some(a) = &job.array {
                if a.max_running.is_some_and(|m| a.active >= m) {
                    self.set_reason(id, PendingReason::JobArrayTaskLimit);
                    if let Some(n) = next_in_queue(self) {
                        heap.push(n);
                    }
                    continue;
                }
            }
            if self.singleton_blocked(id) {
                self.set_reason(id, PendingReason::Dependency);
                if let Some(n) = next_in_queue(self) {
                    heap.push(n);
                }
                continue;
            }
            let (shape_id, owner) = (job.shape, job.owner);
            touched.push(key);
            let shape = &self.shapes[shape_id as usize];
            if let Some(r) = self.limit_block(shape, owner, now) {
                self.block_queue(key, id, r);
                continue;
            }
            let placed = if failed_shapes.contains(&shape_id) {
                None
            } else {
                place(&self.inv, &resv, shape, now)
            };
            match placed {
                Some(nodes) => {
                    let d = self.start(id, &nodes, now);
                    out.push(d);
                    if let Some(q) = self.queues.get(&key) {
                        if let Some(&(Reverse(p), nid)) = q.jobs.first() {
                            heap.push((p, Reverse(nid), key));
                        }
                    }
                }
                None => {
                    failed_shapes.insert(shape_id);
                    let mut reason = PendingReason::Priority;
                    if reservations.len() < max_resv {
                        let shape = &self.shapes[shape_id as usize];
                        match self.plan_reservation(shape, now, &resv) {
                            Some(plan) => {
                                reason = PendingReason::Resources;
                                for (n, r) in &plan.nodes {
                                    resv.per_node
                                        .entry(*n)
                                        .or_default()
                                        .push((plan.start, plan.end, *r));
                                }
                                reservations.push(Reservation {
                                    job: id,
                                    start: plan.start,
                                    end: (plan.end != Time::MAX).then_some(plan.end),
                                    nodes: plan
                                        .nodes
                                        .iter()
                                        .map(|(n, _)| self.inv.nodes[*n as usize].cfg.name.clone())
                                        .collect(),
                                });
                            }
                            None => {
                                let down = shape
                                    .key
                                    .required
                                    .iter()
                                    .any(|r| !self.inv.nodes[*r as usize].usable())
                                    || shape
                                        .eligible
                                        .iter()
                                        .filter(|n| self.inv.nodes[**n as usize].usable())
                                        .count()
                                        < shape.key.nodes as usize;
                                reason = if down {
                                    PendingReason::ReqNodeNotAvail
                                } else {
                                    PendingReason::Resources
                                };
                            }
                        }
                    }
                    self.block_queue(key, id, reason);
                }
            }
        }
        // Queues not reached this pass keep their last reason; reached ones that
        // started everything have none.
        for k in touched {
            if let Some(q) = self.queues.get_mut(&k) {
                if q.reason.is_none() {
                    q.reason = Some(PendingReason::Priority);
                }
            }
        }
        self.reservations = reservations;
    }

    fn set_reason(&mut self, id: JobId, r: PendingReason) {
        if let Some(j) = self.jobs.get_mut(&id) {
            j.reason = r;
        }
    }

    fn block_queue(&mut self, key: QueueKey, head: JobId, r: PendingReason) {
        self.set_reason(head, r);
        if let Some(q) = self.queues.get_mut(&key) {
            // Jobs behind the head wait for the head's limit, or for priority.
            q.reason = Some(match r {
                PendingReason::Resources => PendingReason::Priority,
                r => r,
            });
        }
    }

    /// Starts a job (or the next task of an array) on `nodes`.
    fn start(&mut self, id: JobId, nodes: &[u32], now: Time) -> Decision {
        let is_parent = self.jobs.get(&id).is_some_and(Job::is_array_parent);
        let run_id = if is_parent {
            let Some(parent) = self.jobs.get_mut(&id) else {
                return Decision::Cancel {
                    job: id,
                    reason: PendingReason::None,
                };
            };
            let mut task_rec = parent.clone();
            let a = parent.array.expect_or_default();
            let task = a.pop().unwrap_or(0);
            a.active += 1;
            a.first_start.get_or_insert(now);
            let empty = a.pending.is_empty();
            task_rec.id = JobId::task(id.job, task);
            task_rec.array = None;
            task_rec.queued = false;
            if empty {
                self.dequeue(id);
                if let Some(p) = self.jobs.get_mut(&id) {
                    p.state = JobState::Running;
                    p.reason = PendingReason::None;
                }
            }
            self.jobs.insert(task_rec.id, task_rec);
            JobId::task(id.job, task)
        } else {
            self.dequeue(id);
            id
        };
        let Some(shape) = self
            .jobs
            .get(&run_id)
            .map(|j| self.shapes[j.shape as usize].key.clone())
        else {
            return Decision::Cancel {
                job: run_id,
                reason: PendingReason::None,
            };
        };
        let mut allocs = Vec::with_capacity(nodes.len());
        for &n in nodes {
            let (res, slices) = self.inv.allocate(n, &shape.need, shape.exclusive);
            allocs.push(NodeAlloc {
                node: n,
                res,
                slices,
            });
        }
        let end = shape.time.map(|t| now.saturating_add(t as i64));
        let Some(mut job) = self.jobs.remove(&run_id) else {
            return Decision::Cancel {
                job: run_id,
                reason: PendingReason::None,
            };
        };
        job.state = JobState::Running;
        job.reason = PendingReason::None;
        job.start_time = Some(now);
        job.end_time = end;
        job.alloc = allocs;
        self.charge_start(&mut job, now);
        self.running_by_end
            .insert((end.unwrap_or(Time::MAX), run_id));
        let allocation = self.allocation_of(&job);
        self.jobs.insert(run_id, job);
        self.touch_dependents(run_id.job);
        Decision::Start {
            job: run_id,
            allocation,
        }
    }
}

/// `Option::expect` without panicking paths in library code: an array parent
/// always has its array state; a default one is harmless if not.
trait ExpectOrDefault<T> {
    fn expect_or_default(&mut self) -> &mut T;
}

impl<T: Default> ExpectOrDefault<T> for Option<Box<T>> {
    fn expect_or_default(&mut self) -> &mut T {
        self.get_or_insert_with(Default::default)
    }
}
