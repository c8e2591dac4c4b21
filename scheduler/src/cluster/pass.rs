//! The scheduling pass: time limits, wake-ups, dependency changes, priority
//! recalculation, then one walk over the ready queues in priority order that
//! starts what fits, reserves for the top jobs that do not, and backfills.

use super::state::{Job, NodeAlloc};
use super::{Cluster, Decision, HeadKey, QueueKey, Reservation};
use crate::model::{JobId, JobState, PendingReason, Time};
use crate::placement::{place, ReservedTable};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Bound;

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
            if let Some(mut j) = self.jobs.get_mut(&id) {
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

    /// Walks the queue heads in priority order (`heads`), starting what fits and
    /// reserving for the first jobs that do not.
    ///
    /// Work per pass is bounded: after `max_job_test` heads have failed to start
    /// (limits, resources, array task limit, singleton), the walk jumps to where
    /// the previous pass's rotating window stopped and examines up to
    /// `rotating_job_test` more failing heads; the next pass continues below that
    /// point, wrapping round to just below the top window at the end of the queue.
    /// So a job beyond the cap is still examined within about
    /// `heads / rotating_job_test` passes, and its age factor keeps raising its
    /// priority until it enters the top window; none starves. Jobs started from
    /// the rotating window go through the same placement as all others, so they
    /// never touch resources reserved for higher-priority jobs.
    fn main_pass(&mut self, now: Time, out: &mut Vec<Decision>) {
        // Entries to examine besides the queue heads: the next job of a queue whose
        // head is skipped for a reason of its own, or an array that keeps its place.
        let mut extra: BinaryHeap<Reverse<HeadKey>> = BinaryHeap::new();
        let mut cursor: Option<HeadKey> = None;
        let mut resv = ReservedTable::default();
        let mut reservations: Vec<Reservation> = Vec::new();
        let max_resv = self.cfg.backfill.max_reservations;
        let mut budget = self.cfg.backfill.max_job_test;
        let mut rotating = false;
        let mut failed_shapes: Vec<bool> = vec![false; self.shapes.len()];
        loop {
            if budget == 0 {
                let window = self.cfg.backfill.rotating_job_test;
                if rotating || window == 0 {
                    // Stopped early: the next pass's window goes on from here.
                    self.resume_after = if rotating { cursor } else { None };
                    break;
                }
                rotating = true;
                budget = window;
                if let Some(r) = self.resume_after {
                    if cursor.is_none_or(|c| r > c) {
                        cursor = Some(r);
                        extra.retain(|e| e.0 > r);
                    }
                }
            }
            let from_heads = match cursor {
                None => self.heads.first().copied(),
                Some(c) => self
                    .heads
                    .range((Bound::Excluded(c), Bound::Unbounded))
                    .next()
                    .copied(),
            };
            let (prio, id, key) = match (from_heads, extra.peek().map(|e| e.0)) {
                (Some(h), Some(x)) if x < h => {
                    extra.pop();
                    x
                }
                (Some(h), _) => {
                    cursor = Some(h);
                    h
                }
                (None, Some(x)) => {
                    extra.pop();
                    x
                }
                (None, None) => {
                    // The whole queue was walked: the next window wraps round.
                    if rotating {
                        self.resume_after = None;
                    }
                    break;
                }
            };
            let next_in_queue = |cl: &Cluster| -> Option<Reverse<HeadKey>> {
                let q = cl.queues.get(&key)?;
                let &(p, nid) = q.jobs.range((prio, id)..).nth(1)?;
                Some(Reverse((p, nid, key)))
            };
            let Some(job) = self.jobs.get(&id) else {
                continue;
            };
            // Per-job reasons to skip: array task limit, singleton.
            if let Some(a) = &job.array {
                if a.max_running.is_some_and(|m| a.active >= m) {
                    self.set_reason(id, PendingReason::JobArrayTaskLimit);
                    budget -= 1;
                    if let Some(n) = next_in_queue(self) {
                        extra.push(n);
                    }
                    continue;
                }
            }
            if self.singleton_blocked(id) {
                self.set_reason(id, PendingReason::Dependency);
                budget -= 1;
                if let Some(n) = next_in_queue(self) {
                    extra.push(n);
                }
                continue;
            }
            let (shape_id, owner) = (job.shape, job.owner);
            // Reached this pass: jobs behind the head wait for priority at least.
            if let Some(q) = self.queues.get_mut(&key) {
                q.reason.get_or_insert(PendingReason::Priority);
            }
            let shape = &self.shapes[shape_id as usize];
            if let Some(r) = self.limit_block(shape, owner, now) {
                self.block_queue(key, id, r);
                budget -= 1;
                continue;
            }
            if !self.licenses_free_for(shape) {
                self.block_queue(key, id, PendingReason::Licenses);
                budget -= 1;
                continue;
            }
            let failed = failed_shapes
                .get(shape_id as usize)
                .copied()
                .unwrap_or(true);
            let placed = if failed {
                None
            } else {
                place(&self.inv, &resv, shape, now).map(|nodes| (nodes, shape.key.time))
            };
            let placed = placed.or_else(|| self.place_shortened(id, shape, &resv, now));
            match placed {
                Some((nodes, time)) => {
                    let d = self.start(id, &nodes, time, now);
                    out.push(d);
                    // An array with tasks left keeps its place: examine it again.
                    if let Some(q) = self.queues.get(&key) {
                        if let Some(&(p, nid)) = q.jobs.first() {
                            if (p, nid) == (prio, id) {
                                extra.push(Reverse((p, nid, key)));
                            }
                        }
                    }
                }
                None => {
                    budget -= 1;
                    if let Some(f) = failed_shapes.get_mut(shape_id as usize) {
                        *f = true;
                    }
                    let mut reason = PendingReason::Priority;
                    if reservations.len() < max_resv {
                        let shape = &self.shapes[shape_id as usize];
                        match self.plan_reservation(shape, now, &resv) {
                            Some(plan) => {
                                reason = PendingReason::Resources;
                                for (n, r) in &plan.nodes {
                                    resv.add(*n, plan.start, plan.end, *r);
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
        // Queues not reached this pass keep their last reason.
        self.reservations = reservations;
    }

    fn set_reason(&mut self, id: JobId, r: PendingReason) {
        if let Some(mut j) = self.jobs.get_mut(&id) {
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

    /// With `--time-min`: the nodes and the longest limit from the job's
    /// `--time-min` up to its time limit with which it fits now (before the
    /// reservations of higher-priority jobs), as Slurm's backfill shortens such jobs.
    fn place_shortened(
        &self,
        id: JobId,
        shape: &super::state::Shape,
        resv: &ReservedTable,
        now: Time,
    ) -> Option<(Vec<u32>, Option<u64>)> {
        let job = self.jobs.get(&id)?;
        let crate::model::TimeLimit::Seconds(min) = job.req.time_min? else {
            return None;
        };
        let max = shape.key.time.unwrap_or(u64::MAX / 4);
        if min >= max {
            return None;
        }
        let mut trial = shape.clone();
        let mut fits = |t: u64| {
            trial.key.time = Some(t);
            place(&self.inv, resv, &trial, now)
        };
        let mut best = fits(min).map(|n| (n, min))?;
        // The longest limit that still fits: binary search in seconds, to the minute.
        let (mut lo, mut hi) = (min, max);
        while hi - lo > 60 {
            let mid = lo + (hi - lo) / 2;
            match fits(mid) {
                Some(n) => {
                    best = (n, mid);
                    lo = mid;
                }
                None => hi = mid,
            }
        }
        Some((best.0, Some(best.1)))
    }

    /// Starts a job (or the next task of an array) on `nodes` with limit `time`
    /// (seconds; `None`: unlimited).
    fn start(&mut self, id: JobId, nodes: &[u32], time: Option<u64>, now: Time) -> Decision {
        let is_parent = self.jobs.get(&id).is_some_and(Job::is_array_parent);
        let run_id = if is_parent {
            let Some(mut parent) = self.jobs.get_mut(&id) else {
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
            drop(parent);
            task_rec.id = JobId::task(id.job, task);
            task_rec.array = None;
            task_rec.queued = false;
            if empty {
                self.dequeue(id);
                if let Some(mut p) = self.jobs.get_mut(&id) {
                    p.state = JobState::Running;
                    p.reason = PendingReason::None;
                }
            }
            let (task_id, req) = (task_rec.id, task_rec.req.clone());
            self.jobs.insert(task_id, task_rec);
            self.depends(task_id, &req);
            task_id
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
        let end = time.map(|t| now.saturating_add(t as i64));
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
        self.take_licenses(job.shape);
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
