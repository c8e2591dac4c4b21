//! `sbatch --test-only`: what a submission would do, answered on a copy of the
//! cluster so that nothing is recorded.

use serde::Serialize;

use super::{Cluster, Decision};
use crate::error::SubmitError;
use crate::model::{JobId, JobRequest, Owner, PendingReason, Time};

/// When and where a job would start if it were submitted now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TestOnly {
    /// Now, the backfill plan's start for it, or, when the plan does not reach it,
    /// the earliest its resources free up ahead of the queue (as Slurm's
    /// `--test-only` answers). `None`: no start can be planned (held, waiting for a
    /// dependency or a limit, or never fits while the running jobs have no limit).
    pub start: Option<Time>,
    /// The plan reached the job at its own priority (`false`: the start assumes it
    /// were first in the queue).
    pub in_plan: bool,
    pub nodes: Vec<String>,
    pub cpus: u32,
    pub partition: String,
    /// Why it would wait, when it would not start at once.
    pub reason: Option<PendingReason>,
}

impl Cluster {
    /// Submits `req` on a copy of the cluster and runs a pass: every check a real
    /// submission makes (partition, limits, quotas), without recording anything.
    pub fn test_only(
        &self,
        req: JobRequest,
        owner: &Owner,
        now: Time,
    ) -> Result<TestOnly, SubmitError> {
        let mut trial = self.clone();
        let id = trial.submit(req, owner, now)?;
        let answer = trial.plan_for(id, now, true);
        if answer.start.is_some() || answer.reason.is_some_and(blocks_any_start) {
            return Ok(answer);
        }
        // Not in the plan: the earliest start were it first in the queue.
        let _ = trial.set_admin_nice(id, -1_000_000_000, now);
        let mut ahead = trial.plan_for(id, now, false);
        ahead.reason = answer.reason;
        Ok(ahead)
    }

    fn plan_for(&mut self, id: JobId, now: Time, in_plan: bool) -> TestOnly {
        let decisions = self.schedule(now);
        let view = self.job(id, now);
        let partition = view
            .as_ref()
            .map(|v| v.partition.clone())
            .unwrap_or_default();
        let reason = view.as_ref().and_then(|v| v.reason);
        for d in &decisions {
            if let Decision::Start { job, allocation } = d {
                if job.job == id.job {
                    return TestOnly {
                        start: Some(now),
                        in_plan,
                        nodes: allocation.nodes.iter().map(|n| n.node.clone()).collect(),
                        cpus: allocation.nodes.iter().map(|n| n.cpus).sum(),
                        partition,
                        reason: None,
                    };
                }
            }
        }
        let planned = self.reservations.iter().find(|r| r.job.job == id.job);
        let cpus = self
            .jobs
            .get(&id)
            .map(|j| {
                let shape = &self.shapes[j.shape as usize];
                shape.key.need.cpus.saturating_mul(shape.key.nodes)
            })
            .unwrap_or(0);
        TestOnly {
            start: planned.map(|r| r.start),
            in_plan,
            nodes: planned.map(|r| r.nodes.clone()).unwrap_or_default(),
            cpus,
            partition,
            reason,
        }
    }
}

/// Reasons no amount of waiting for resources ends.
fn blocks_any_start(reason: PendingReason) -> bool {
    !matches!(
        reason,
        PendingReason::None | PendingReason::Resources | PendingReason::Priority
    )
}
