//! The scheduler's inputs as log entries. Every change to the cluster goes through
//! [`Event::apply`], both live and when the log is replayed at startup, so a
//! replayed cluster makes exactly the decisions the live one made.
//!
//! Owns: the log's format (changing it breaks replaying older logs).
//! Must not touch: the store, the actor's batches, the Slurm backend.

use scheduler::{
    CancelEffect, Cluster, Decision, JobId, JobOutcome, JobRequest, JobState, LimitsConfig,
    NodeCommand, OpError, Owner, SubmitError, Time,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum Event {
    Submit {
        id: u64,
        request: Box<JobRequest>,
        owner: Owner,
        now: Time,
    },
    Pass {
        now: Time,
    },
    Finished {
        job: JobId,
        outcome: JobOutcome,
        now: Time,
    },
    Cancel {
        job: JobId,
        now: Time,
        /// Only what waits (an array's pending tasks); older logs have none.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        waiting_only: bool,
    },
    Hold {
        job: JobId,
        admin: bool,
        now: Time,
    },
    Release {
        job: JobId,
        admin: bool,
        now: Time,
    },
    Requeue {
        job: JobId,
        now: Time,
    },
    /// A pending job asks for something else (`scontrol update`): its whole new request.
    Update {
        job: JobId,
        request: Box<JobRequest>,
        now: Time,
    },
    /// A pending job goes first among its owner's (`scontrol top`).
    Top {
        job: JobId,
        now: Time,
    },
    /// An administrator sets a pending job's nice (`scontrol update Nice=`).
    Nice {
        job: JobId,
        nice: i32,
        now: Time,
    },
    /// Forget jobs that ended at or before this time (their rows stay in the database).
    Purge {
        ended_before: Time,
    },
    /// Every quota, as the database has them now.
    Limits {
        limits: Box<LimitsConfig>,
        now: Time,
    },
    /// Drain, resume or down a node.
    Node {
        node: String,
        command: NodeCommand,
        now: Time,
    },
}

/// What applying an event returned.
#[derive(Debug)]
pub enum Applied {
    Decisions(Vec<Decision>),
    Finished(JobState),
    Cancelled(CancelEffect),
    /// How many records a purge forgot.
    Purged(usize),
    Done,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error(transparent)]
    Submit(#[from] SubmitError),
    #[error(transparent)]
    Op(#[from] OpError),
    #[error(transparent)]
    Update(#[from] scheduler::UpdateError),
}

impl ApplyError {
    /// The field of the request a refusal is about (`job` for the job's state).
    pub fn field(&self) -> &'static str {
        match self {
            Self::Submit(e) | Self::Update(scheduler::UpdateError::Refused(e)) => e.field(),
            Self::Op(_) | Self::Update(scheduler::UpdateError::State(_)) => "job",
        }
    }
}

impl Event {
    /// Apply to `cluster`. An error leaves the cluster unchanged.
    pub fn apply(&self, cluster: &mut Cluster) -> Result<Applied, ApplyError> {
        Ok(match self {
            Event::Submit {
                id,
                request,
                owner,
                now,
            } => {
                cluster.submit_with_id(*id, request.as_ref().clone(), owner, *now)?;
                Applied::Done
            }
            Event::Pass { now } => Applied::Decisions(cluster.schedule(*now)),
            Event::Finished { job, outcome, now } => {
                Applied::Finished(cluster.job_finished(*job, *outcome, *now)?)
            }
            Event::Cancel {
                job,
                now,
                waiting_only: false,
            } => Applied::Cancelled(cluster.cancel(*job, *now)?),
            Event::Cancel {
                job,
                now,
                waiting_only: true,
            } => Applied::Cancelled(cluster.cancel_waiting(*job, *now)?),
            Event::Hold { job, admin, now } => {
                cluster.hold(*job, *admin, *now)?;
                Applied::Done
            }
            Event::Release { job, admin, now } => {
                cluster.release(*job, *admin, *now)?;
                Applied::Done
            }
            Event::Requeue { job, now } => {
                cluster.requeue(*job, *now)?;
                Applied::Done
            }
            Event::Update { job, request, now } => {
                cluster.update_pending(*job, request.as_ref().clone(), *now)?;
                Applied::Done
            }
            Event::Top { job, now } => {
                cluster.top(*job, *now)?;
                Applied::Done
            }
            Event::Nice { job, nice, now } => {
                cluster.set_nice(*job, *nice, *now)?;
                Applied::Done
            }
            Event::Purge { ended_before } => {
                Applied::Purged(cluster.purge_ended(*ended_before).len())
            }
            Event::Limits { limits, now } => {
                cluster.set_limits_config(limits.as_ref().clone(), *now);
                Applied::Done
            }
            Event::Node { node, command, now } => {
                Applied::Decisions(cluster.set_node_state(node, command.clone(), *now)?)
            }
        })
    }
}
