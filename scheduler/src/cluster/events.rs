//! Job and node events: eligibility changes, completion, cancel, hold and release,
//! requeue, node drain/resume/down, admin nice.

use super::inventory::Admin;
use super::jobs::JobMut;
use super::state::Hold;
use super::{Cluster, Decision};
use crate::error::OpError;
use crate::model::{JobId, JobOutcome, JobState, NodeCommand, PendingReason, Time};
use crate::policy::dependency::DepStatus;
use serde::{Deserialize, Serialize};

/// What `cancel` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelEffect {
    /// Pending jobs or array tasks that are now CANCELLED (a pending array's
    /// remaining tasks count once, under the array's id).
    pub cancelled: Vec<JobId>,
    /// Running jobs now COMPLETING: kill them, then call `job_finished`.
    pub signal: Vec<JobId>,
    /// Of `cancelled`, the array tasks taken out of their array's record of waiting
    /// tasks: they had no record of their own (their row is made from the array's).
    pub taken_out: Vec<JobId>,
}

impl Cluster {
    fn job_mut(&mut self, id: JobId) -> Result<JobMut<'_>, OpError> {
        self.jobs.get_mut(&id).ok_or(OpError::NoSuchJob(id))
    }

    /// Re-examines whether a pending job may be queued (hold, begin time,
    /// dependencies); queues or unqueues it and sets its reason.
    pub(crate) fn refresh(&mut self, id: JobId, now: Time, out: &mut Vec<Decision>) {
        let Some(j) = self.jobs.get(&id) else { return };
        if j.state != JobState::Pending {
            return;
        }
        let (queued, owner) = (j.queued, j.owner);
        if let Some(latest_start) = self.latest_start(id) {
            if now > latest_start {
                self.cancel_pending(id, now);
                if let Some(mut j) = self.jobs.get_mut(&id) {
                    j.reason = PendingReason::DeadLine;
                    if j.state == JobState::Cancelled {
                        j.state = JobState::Deadline;
                    } else {
                        j.final_state = Some(JobState::Deadline);
                    }
                }
                out.push(Decision::Cancel {
                    job: id,
                    reason: PendingReason::DeadLine,
                });
                return;
            }
            self.wakeups.insert((latest_start.saturating_add(1), id));
        }
        let Some(j) = self.jobs.get(&id) else { return };
        let reason = if j.hold == Hold::User {
            Some(PendingReason::JobHeldUser)
        } else if j.hold == Hold::Admin {
            Some(PendingReason::JobHeldAdmin)
        } else if let Some(b) = j.begin.filter(|&b| b > now) {
            self.wakeups.insert((b, id));
            Some(PendingReason::BeginTime)
        } else if let Some(dep) = j.req.dependency.clone() {
            match self.evaluate_dependency(&dep, now) {
                DepStatus::Satisfied => None,
                DepStatus::Waiting(at) => {
                    if let Some(at) = at {
                        self.wakeups.insert((at, id));
                    }
                    Some(PendingReason::Dependency)
                }
                DepStatus::Never => {
                    if self.cfg.kill_invalid_dependencies {
                        self.dequeue(id);
                        self.cancel_pending(id, now);
                        if let Some(mut j) = self.jobs.get_mut(&id) {
                            j.reason = PendingReason::DependencyNeverSatisfied;
                        }
                        out.push(Decision::Cancel {
                            job: id,
                            reason: PendingReason::DependencyNeverSatisfied,
                        });
                        return;
                    }
                    Some(PendingReason::DependencyNeverSatisfied)
                }
            }
        } else {
            None
        };
        match reason {
            Some(r) => {
                self.dequeue(id);
                if let Some(mut j) = self.jobs.get_mut(&id) {
                    j.reason = r;
                }
            }
            None if !queued => {
                let acct = self.account_entity(owner);
                let fs = self.fairshare_factor(acct, now);
                let Some(mut j) = self.jobs.get_mut(&id) else {
                    return;
                };
                j.eligible_time = now;
                j.reason = PendingReason::Priority;
                drop(j);
                let Some(j) = self.jobs.get(&id) else { return };
                let p = self.compute_priority(j, now, fs);
                let key = Self::queue_key(j);
                if let Some(mut j) = self.jobs.get_mut(&id) {
                    j.priority = p;
                    j.queued = true;
                }
                self.queue_insert(key, p, id);
            }
            None => {}
        }
    }

    /// Forgets jobs that ended at or before `ended_before` (Slurm's `MinJobAge`): every
    /// record of a job number (an array's remainder and all its tasks) must be over by
    /// then, and no pending job may still name it in a dependency. Their accounting
    /// lives on outside the scheduler; without this, a long-lived cluster's state (and
    /// each snapshot of it) would grow with every job ever run. Returns the records
    /// forgotten, in job order.
    pub fn purge_ended(&mut self, ended_before: Time) -> Vec<JobId> {
        let verdicts: Vec<(JobId, bool)> = self
            .jobs
            .iter()
            .map(|(id, j)| {
                let over = j.state.is_terminal()
                    && j.end_time.is_some_and(|e| e <= ended_before)
                    && j.array
                        .as_ref()
                        .is_none_or(|a| a.pending.is_empty() && a.active == 0);
                (*id, over)
            })
            .collect();
        let mut purge = Vec::new();
        // Records of one job number are adjacent: ids order by number, then task.
        for group in verdicts.chunk_by(|a, b| a.0.job == b.0.job) {
            if group.iter().all(|(_, over)| *over) && !self.has_pending_dependents(group[0].0.job) {
                purge.extend(group.iter().map(|(id, _)| *id));
            }
        }
        for id in &purge {
            self.jobs.remove(id);
            self.dirty.remove(id);
            self.dependents.remove(&id.job);
        }
        purge
    }

    /// Whether some job ended at or before `t`: a cheap test before [`Self::purge_ended`].
    pub fn any_ended_by(&self, t: Time) -> bool {
        self.jobs
            .values()
            .any(|j| j.state.is_terminal() && j.end_time.is_some_and(|e| e <= t))
    }

    fn has_pending_dependents(&self, job: u64) -> bool {
        self.dependents.get(&job).is_some_and(|ds| {
            ds.iter().any(|d| {
                self.jobs
                    .get(d)
                    .is_some_and(|j| j.state == JobState::Pending)
            })
        })
    }

    /// Marks the pending dependents of job number `job` for re-examination.
    pub(crate) fn touch_dependents(&mut self, job: u64) {
        if let Some(ds) = self.dependents.get(&job) {
            self.dirty.extend(ds.iter().copied());
        }
    }

    /// Cancels a pending job (all remaining tasks of an array).
    /// The latest a pending job with a `--deadline` may start and still end by it
    /// (its `--time-min`, else its time limit, before the deadline).
    fn latest_start(&self, id: JobId) -> Option<Time> {
        let j = self.jobs.get(&id)?;
        let deadline = j.req.deadline.as_ref()?.resolve(j.submit_time).ok()?;
        let shape = self.shapes.get(j.shape as usize)?;
        let run = match j.req.time_min {
            Some(crate::model::TimeLimit::Seconds(s)) => Some(s),
            _ => shape.key.time,
        };
        Some(deadline.saturating_sub(run.unwrap_or(0) as Time))
    }

    fn cancel_pending(&mut self, id: JobId, now: Time) {
        self.dequeue(id);
        let Some(mut j) = self.jobs.get_mut(&id) else {
            return;
        };
        let tasks = match &mut j.array {
            Some(a) => {
                let n = a.pending_count() as u32;
                a.pending.clear();
                n
            }
            None => 1,
        };
        let over = j.array.as_ref().is_none_or(|a| a.active == 0);
        if over {
            j.state = JobState::Cancelled;
            j.end_time = Some(now);
        } else {
            j.state = JobState::Running;
            j.final_state = Some(JobState::Cancelled);
        }
        j.reason = PendingReason::None;
        let owner = j.owner;
        drop(j);
        self.uncount_submitted(owner, tasks);
        self.touch_dependents(id.job);
    }

    /// `n` more submitted jobs for `owner`'s entities (user, groups, account).
    pub(super) fn count_submitted(&mut self, owner: u32, n: u32) {
        for &e in &self.owners[owner as usize].entities {
            self.entities[e as usize].usage.submitted += n;
        }
    }

    pub(super) fn uncount_submitted(&mut self, owner: u32, n: u32) {
        for &e in &self.owners[owner as usize].entities {
            let u = &mut self.entities[e as usize].usage;
            u.submitted = u.submitted.saturating_sub(n);
        }
    }

    /// Frees a running job's resources and stops charging it.
    fn release_job(&mut self, id: JobId, now: Time) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let end_key = job.end_time.unwrap_or(Time::MAX);
        self.running_by_end.remove(&(end_key, id));
        let job = job.clone();
        self.charge_end(&job, now);
        for a in &job.alloc {
            self.inv.release(a.node, &a.res, &a.slices);
        }
        if !job.alloc.is_empty() {
            self.return_licenses(job.shape);
        }
        if let Some(mut j) = self.jobs.get_mut(&id) {
            j.alloc.clear();
        }
    }

    /// Updates an array's counters when one of its tasks is over.
    fn task_over(&mut self, id: JobId, ok: bool, now: Time) {
        if id.task.is_none() {
            return;
        }
        let Some(mut parent) = self.jobs.get_mut(&JobId::new(id.job)) else {
            return;
        };
        let Some(a) = parent.array.as_mut() else {
            return;
        };
        a.active = a.active.saturating_sub(1);
        if ok {
            a.done_ok += 1;
        } else {
            a.done_not_ok += 1;
        }
        if a.pending.is_empty() && a.active == 0 {
            let failed = a.done_not_ok > 0;
            parent.state = parent.final_state.take().unwrap_or(if failed {
                JobState::Failed
            } else {
                JobState::Completed
            });
            parent.end_time = Some(now);
        }
    }

    /// The step supervisor reports that a running (or completing) job ended.
    pub fn job_finished(
        &mut self,
        id: JobId,
        outcome: JobOutcome,
        now: Time,
    ) -> Result<JobState, OpError> {
        let j = self.jobs.get(&id).ok_or(OpError::NoSuchJob(id))?;
        if !matches!(j.state, JobState::Running | JobState::Completing) || j.is_array_parent() {
            return Err(OpError::WrongState {
                job: id,
                state: j.state,
            });
        }
        self.release_job(id, now);
        let mut j = self.job_mut(id)?;
        j.outcome = Some(outcome);
        if j.requeue_on_finish {
            drop(j);
            self.back_to_pending(id, now);
            return Ok(JobState::Pending);
        }
        let state = j.final_state.take().unwrap_or(match outcome {
            JobOutcome::Exited(0) => JobState::Completed,
            JobOutcome::OutOfMemory => JobState::OutOfMemory,
            JobOutcome::Exited(_) | JobOutcome::Signaled(_) => JobState::Failed,
        });
        j.state = state;
        j.end_time = Some(now);
        let owner = j.owner;
        drop(j);
        self.uncount_submitted(owner, 1);
        self.task_over(id, state == JobState::Completed, now);
        self.touch_dependents(id.job);
        Ok(state)
    }

    fn back_to_pending(&mut self, id: JobId, now: Time) {
        if let Some(mut j) = self.jobs.get_mut(&id) {
            j.state = JobState::Pending;
            j.start_time = None;
            j.end_time = None;
            j.final_state = None;
            j.requeue_on_finish = false;
            j.restarts += 1;
            j.reason = PendingReason::None;
        }
        let mut sink = Vec::new();
        self.refresh(id, now, &mut sink);
        self.touch_dependents(id.job);
    }

    /// The tasks of array `job` with records of their own in `state`.
    fn tasks_in(&self, job: u64, state: JobState) -> Vec<JobId> {
        self.jobs
            .range(JobId::task(job, 0)..=JobId::task(job, u32::MAX))
            .filter(|(_, t)| t.state == state)
            .map(|(k, _)| *k)
            .collect()
    }

    /// Cancels what of array `id` waits: its record's pending tasks and its tasks
    /// that wait again (requeued).
    fn cancel_array_waiting(&mut self, id: JobId, now: Time, eff: &mut CancelEffect) {
        let had_pending = self
            .jobs
            .get(&id)
            .and_then(|j| j.array.as_ref())
            .is_some_and(|a| !a.pending.is_empty());
        let pending_tasks = self.tasks_in(id.job, JobState::Pending);
        if had_pending {
            self.cancel_pending(id, now);
            eff.cancelled.push(id);
        }
        for t in pending_tasks {
            self.cancel_pending(t, now);
            self.task_over(t, false, now);
            eff.cancelled.push(t);
        }
    }

    /// Cancels only what of an array still waits (`scancel --state=PENDING ID`): its
    /// pending remainder and its requeued tasks that wait; running tasks go on. A job
    /// that is not an array: as [`Cluster::cancel`] while it waits, else nothing.
    pub fn cancel_waiting(&mut self, id: JobId, now: Time) -> Result<CancelEffect, OpError> {
        let j = self.jobs.get(&id).ok_or(OpError::NoSuchJob(id))?;
        let mut eff = CancelEffect::default();
        if !j.is_array_parent() {
            if j.state == JobState::Pending {
                return self.cancel(id, now);
            }
            return Ok(eff);
        }
        self.cancel_array_waiting(id, now, &mut eff);
        Ok(eff)
    }

    /// Takes task `id` out of its array's record of waiting tasks, cancelled (as
    /// Slurm splits it off): the array goes on without it.
    fn cancel_waiting_task(&mut self, id: JobId, now: Time) -> CancelEffect {
        let parent_id = JobId::new(id.job);
        let mut eff = CancelEffect::default();
        let (Some(t), Some(mut parent)) = (id.task, self.jobs.get_mut(&parent_id)) else {
            return eff;
        };
        let Some(a) = parent.array.as_mut() else {
            return eff;
        };
        let rest = crate::model::ArraySpec {
            ranges: a.pending.clone(),
            max_running: None,
        }
        .without([t]);
        a.pending = rest.map(|r| r.ranges).unwrap_or_default();
        a.done_not_ok += 1;
        let (emptied, over) = (a.pending.is_empty(), a.pending.is_empty() && a.active == 0);
        if over {
            parent.state = parent.final_state.take().unwrap_or(JobState::Cancelled);
            parent.end_time = Some(now);
            parent.reason = PendingReason::None;
        } else if emptied {
            // Its started tasks go on: the array runs, with nothing left to start.
            parent.state = JobState::Running;
            parent.reason = PendingReason::None;
        }
        let owner = parent.owner;
        drop(parent);
        if emptied {
            self.dequeue(parent_id);
        }
        self.uncount_submitted(owner, 1);
        eff.cancelled.push(id);
        eff.taken_out.push(id);
        eff
    }

    /// Cancels a job: a pending one (or an array's pending tasks) at once, a running
    /// one becomes COMPLETING until `job_finished`; a task still in its array's
    /// record of waiting tasks is taken out of it.
    pub fn cancel(&mut self, id: JobId, now: Time) -> Result<CancelEffect, OpError> {
        if self.waits_in_array(id) {
            return Ok(self.cancel_waiting_task(id, now));
        }
        let j = self.jobs.get(&id).ok_or(OpError::NoSuchJob(id))?;
        let mut eff = CancelEffect::default();
        if j.is_array_parent() {
            let running = self.tasks_in(id.job, JobState::Running);
            self.cancel_array_waiting(id, now, &mut eff);
            for t in running {
                self.stop_running(t, JobState::Cancelled);
                eff.signal.push(t);
            }
            return Ok(eff);
        }
        match j.state {
            JobState::Pending => {
                self.cancel_pending(id, now);
                self.task_over(id, false, now);
                eff.cancelled.push(id);
            }
            JobState::Running => {
                self.stop_running(id, JobState::Cancelled);
                eff.signal.push(id);
            }
            s => return Err(OpError::WrongState { job: id, state: s }),
        }
        Ok(eff)
    }

    fn stop_running(&mut self, id: JobId, final_state: JobState) {
        if let Some(mut j) = self.jobs.get_mut(&id) {
            j.state = JobState::Completing;
            j.final_state = Some(final_state);
        }
    }

    /// Holds a pending job (`admin`: only an administrator may release it).
    pub fn hold(&mut self, id: JobId, admin: bool, now: Time) -> Result<(), OpError> {
        let mut j = self.job_mut(id)?;
        if j.state != JobState::Pending {
            return Err(OpError::WrongState {
                job: id,
                state: j.state,
            });
        }
        if j.hold == Hold::Admin && !admin {
            return Err(OpError::AdminHold(id));
        }
        j.hold = if admin { Hold::Admin } else { Hold::User };
        drop(j);
        let mut sink = Vec::new();
        self.refresh(id, now, &mut sink);
        Ok(())
    }

    /// Releases a held job; a user cannot release an administrator's hold.
    pub fn release(&mut self, id: JobId, admin: bool, _now: Time) -> Result<(), OpError> {
        let mut j = self.job_mut(id)?;
        if j.state != JobState::Pending {
            return Err(OpError::WrongState {
                job: id,
                state: j.state,
            });
        }
        if j.hold == Hold::Admin && !admin {
            return Err(OpError::AdminHold(id));
        }
        j.hold = Hold::None;
        drop(j);
        self.dirty.insert(id);
        Ok(())
    }

    /// Requeues a job: a running one is COMPLETING and goes back to PENDING when
    /// `job_finished` reports it; an ended one is PENDING again at once.
    pub fn requeue(&mut self, id: JobId, now: Time) -> Result<(), OpError> {
        let mut j = self.job_mut(id)?;
        if j.is_array_parent() {
            return Err(OpError::Invalid("requeue array tasks one by one".into()));
        }
        match j.state {
            JobState::Running | JobState::Completing => {
                j.state = JobState::Completing;
                j.requeue_on_finish = true;
                Ok(())
            }
            s if s.is_terminal() => {
                let owner = j.owner;
                drop(j);
                self.count_submitted(owner, 1);
                if id.task.is_some() {
                    if let Some(mut p) = self.jobs.get_mut(&JobId::new(id.job)) {
                        if let Some(a) = p.array.as_mut() {
                            if s == JobState::Completed {
                                a.done_ok = a.done_ok.saturating_sub(1);
                            } else {
                                a.done_not_ok = a.done_not_ok.saturating_sub(1);
                            }
                            a.active += 1;
                        }
                        if p.state.is_terminal() {
                            p.state = JobState::Running;
                        }
                    }
                }
                self.back_to_pending(id, now);
                Ok(())
            }
            s => Err(OpError::WrongState { job: id, state: s }),
        }
    }

    /// Sets an administrator's nice value (may be negative) on a pending job.
    pub fn set_admin_nice(&mut self, id: JobId, nice: i32, now: Time) -> Result<(), OpError> {
        let queued = self.in_queue(id);
        self.dequeue(id);
        self.job_mut(id)?.admin_nice = nice;
        if queued {
            let acct = self.account_entity(self.jobs[&id].owner);
            let fs = self.fairshare_factor(acct, now);
            let p = self.compute_priority(&self.jobs[&id], now, fs);
            if let Some(mut j) = self.jobs.get_mut(&id) {
                j.priority = p;
            }
            self.enqueue(id);
        }
        Ok(())
    }

    /// Drains, resumes or downs a node. Jobs on a node that goes DOWN are failed
    /// (NODE_FAIL) and requeued unless they asked `--no-requeue`.
    pub fn set_node_state(
        &mut self,
        name: &str,
        cmd: NodeCommand,
        now: Time,
    ) -> Result<Vec<Decision>, OpError> {
        let ni = *self
            .inv
            .by_name
            .get(name)
            .ok_or_else(|| OpError::NoSuchNode(name.to_string()))?;
        let mut out = Vec::new();
        match cmd {
            NodeCommand::Drain { reason } => self.inv.set_admin(ni, Admin::Drain(reason)),
            NodeCommand::Resume => self.inv.set_admin(ni, Admin::Up),
            NodeCommand::Down { reason } => {
                self.inv.set_admin(ni, Admin::Down(reason));
                let victims: Vec<JobId> = self
                    .running_by_end
                    .iter()
                    .map(|(_, id)| *id)
                    .filter(|id| {
                        self.jobs
                            .get(id)
                            .is_some_and(|j| j.alloc.iter().any(|a| a.node == ni))
                    })
                    .collect();
                for id in victims {
                    self.release_job(id, now);
                    let Some(mut j) = self.jobs.get_mut(&id) else {
                        continue;
                    };
                    let requeue = j.req.requeue.unwrap_or(self.cfg.requeue_on_node_failure)
                        && j.final_state != Some(JobState::Cancelled);
                    j.outcome = None;
                    if requeue {
                        drop(j);
                        self.back_to_pending(id, now);
                    } else {
                        j.state = JobState::NodeFail;
                        j.final_state = None;
                        j.end_time = Some(now);
                        let owner = j.owner;
                        drop(j);
                        self.uncount_submitted(owner, 1);
                        self.task_over(id, false, now);
                        self.touch_dependents(id.job);
                    }
                    out.push(Decision::NodeFail {
                        job: id,
                        requeued: requeue,
                    });
                }
            }
        }
        Ok(out)
    }
}
