//! Changing a pending job (`scontrol update`) and putting it first among its owner's
//! (`scontrol top`).

use super::state::Hold;
use super::Cluster;
use crate::error::{OpError, SubmitError};
use crate::model::{JobId, JobRequest, JobState, Time};

/// Why a pending job could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error(transparent)]
    State(#[from] OpError),
    #[error(transparent)]
    Refused(#[from] SubmitError),
}

impl Cluster {
    /// Replace what pending job `id` asks for with `req` (a new time limit, partition,
    /// dependency, node count, name …), checked as a submission is: the job keeps its
    /// id, its submit and eligible times, its hold and nice. A refusal changes
    /// nothing. An array whose tasks have started, and a job that is not pending, is
    /// not changed.
    pub fn update_pending(
        &mut self,
        id: JobId,
        req: JobRequest,
        now: Time,
    ) -> Result<(), UpdateError> {
        let job = self.jobs.get(&id).ok_or(OpError::NoSuchJob(id))?;
        if job.state != JobState::Pending {
            return Err(OpError::WrongState {
                job: id,
                state: job.state,
            }
            .into());
        }
        if job
            .array
            .as_ref()
            .is_some_and(|a| a.active > 0 || a.done_ok + a.done_not_ok > 0)
        {
            return Err(OpError::Invalid(
                "an array whose tasks have started cannot be changed".into(),
            )
            .into());
        }
        if id.task.is_some() {
            return Err(OpError::Invalid("change the array, not one of its tasks".into()).into());
        }
        // Take the job out as if it had never been submitted ...
        let tasks = job.array.as_ref().map_or(1, |a| a.pending_count() as u32);
        let owner_id = job.owner;
        let owner = self.owners[owner_id as usize].owner.clone();
        let old_targets: Vec<u64> = job
            .req
            .dependency
            .iter()
            .flat_map(|d| d.items.iter())
            .flat_map(|i| i.targets.iter().map(|t| t.job.job))
            .collect();
        self.dequeue(id);
        let Some(old) = self.jobs.remove(&id) else {
            return Err(OpError::NoSuchJob(id).into());
        };
        self.uncount_submitted(owner_id, tasks);
        for t in &old_targets {
            if let Some(list) = self.dependents.get_mut(t) {
                list.retain(|j| *j != id);
            }
        }
        let mut req = req;
        req.account.get_or_insert_with(|| owner.account.clone());
        // ... and in again, as a new submission of the same id.
        match self.submit_with_id(id.job, req, &owner, old.submit_time) {
            Ok(_) => {
                if let Some(mut j) = self.jobs.get_mut(&id) {
                    j.eligible_time = old.eligible_time;
                    j.hold = if j.hold == Hold::None {
                        old.hold
                    } else {
                        j.hold
                    };
                    j.admin_nice = old.admin_nice;
                    j.restarts = old.restarts;
                }
                let mut sink = Vec::new();
                self.refresh(id, now, &mut sink);
                Ok(())
            }
            Err(e) => {
                // Back as it was.
                let req = old.req.clone();
                self.jobs.insert(id, old);
                self.count_submitted(owner_id, tasks);
                self.depends(id, &req);
                let mut sink = Vec::new();
                self.refresh(id, now, &mut sink);
                Err(e.into())
            }
        }
    }

    /// An administrator sets pending job `id`'s nice (`scontrol update Nice=`): its
    /// priority is what it asked for less `nice` (negative: higher). A job that is not
    /// pending is not changed.
    pub fn set_nice(&mut self, id: JobId, nice: i32, now: Time) -> Result<(), OpError> {
        let job = self.jobs.get(&id).ok_or(OpError::NoSuchJob(id))?;
        if job.state != JobState::Pending {
            return Err(OpError::WrongState {
                job: id,
                state: job.state,
            });
        }
        let asked = job.req.nice.unwrap_or(0);
        self.set_admin_nice(id, nice.saturating_sub(asked), now)
    }

    /// Put pending job `id` first among its owner's pending jobs in its partition
    /// (`scontrol top`): its nice is lowered until its priority is above theirs.
    pub fn top(&mut self, id: JobId, now: Time) -> Result<(), OpError> {
        let job = self.jobs.get(&id).ok_or(OpError::NoSuchJob(id))?;
        if job.state != JobState::Pending {
            return Err(OpError::WrongState {
                job: id,
                state: job.state,
            });
        }
        let (owner, partition) = (job.owner, self.shapes[job.shape as usize].key.partition);
        let best = self
            .jobs
            .values()
            .filter(|j| j.id != id && j.owner == owner && j.state == JobState::Pending)
            .filter(|j| self.shapes[j.shape as usize].key.partition == partition)
            .map(|j| j.priority)
            .max();
        let Some(best) = best else {
            return Ok(());
        };
        if job.priority > best {
            return Ok(());
        }
        let nice = job.admin_nice - i32::try_from(best - job.priority + 1).unwrap_or(i32::MAX);
        self.set_admin_nice(id, nice, now)
    }
}
