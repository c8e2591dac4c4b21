//! The one scheduler handle: [`Scheduler`] (a cheap clone of the running backend),
//! the [`SchedulerBackend`] trait both backends implement (the internal one by
//! sending to its actor, Slurm's directly), who asks ([`Requester`]) and what can go
//! wrong ([`SchedError`]). The permission rule every backend applies to a job (a
//! user sees only their own; another user's job does not exist) is
//! [`Requester::visible`].
//!
//! Owns: the operations a backend answers, the wait for a backend that is not ready
//! yet, and the permission rule.
//! Must not touch: either backend (`internal`, `slurm` depend on this, never the
//! reverse), the store, processes, HTTP types.
//!
//! After a restart the portal serves before the internal scheduler has rebuilt its
//! queue (the sessions' proxy needs only the store): until the backend says it is
//! ready, a request waits for it up to [`RESTORE_WAIT`], then fails with
//! [`SchedError::Restoring`] (503 with `Retry-After`). A request that timed out was
//! never sent, so it never takes effect later.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use scheduler::{
    JobId, JobView, LimitUsage, LimitsConfig, NodeCommand, NodeView, Owner, PartitionView,
    QueueCounts, SqueueFilter, TestOnly,
};
use tokio::sync::{oneshot, watch};

use super::submission::Submission;

/// Who asks: users see and touch only their own jobs; administrators see all.
#[derive(Debug, Clone)]
pub struct Requester {
    pub user: String,
    pub admin: bool,
}

impl Requester {
    /// Whether the requester may see and act on a job of `owner`: its own, or any
    /// for an administrator.
    pub fn may_see(&self, owner: &str) -> bool {
        self.admin || self.user == owner
    }

    /// `job` (as a backend found it, or `None`) if the requester may see it; a job the
    /// requester may not see does not exist for them: [`SchedError::NotFound`] both ways.
    pub(in crate::sched) fn visible<T>(
        &self,
        job: Option<T>,
        owner: impl FnOnce(&T) -> &str,
    ) -> Result<T, SchedError> {
        match job {
            Some(j) if self.may_see(owner(&j)) => Ok(j),
            _ => Err(SchedError::NotFound),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    #[error("no such job")]
    NotFound,
    /// The request can never be satisfied: `field` names the option it is about
    /// (`partition`, `time` …, `script` for the request as a whole), `message` says
    /// why, for the user.
    #[error("{message}")]
    Rejected {
        field: &'static str,
        message: String,
    },
    /// The job is not in a state that allows this.
    #[error("{0}")]
    Conflict(String),
    /// Not the caller's to do (a user lengthening a time limit).
    #[error("{0}")]
    Forbidden(String),
    #[error("the scheduler is not available")]
    Unavailable,
    /// The portal restarted and the scheduler is still rebuilding its queue; it
    /// did not get ready within [`RESTORE_WAIT`]: try again shortly.
    #[error("the scheduler is restoring its queue after a restart")]
    Restoring,
    /// The queue is at its limit (`MaxJobCount`): try again later.
    #[error("{0}")]
    Full(String),
    /// This backend does not answer this request (a message for the user).
    #[error("{0}")]
    NotSupported(String),
}

impl SchedError {
    /// A refusal of `field`.
    pub fn rejected(field: &'static str, message: impl Into<String>) -> SchedError {
        SchedError::Rejected {
            field,
            message: message.into(),
        }
    }
}

/// How long a request waits for a scheduler that is restoring its queue before it
/// is answered 503: longer than a restore of 100,000 jobs takes, shorter than a
/// client's patience.
pub const RESTORE_WAIT: Duration = Duration::from_secs(10);

/// What a scheduler backend answers. The handle waits for the backend to be ready
/// before it asks anything but [`Self::set_limits_first`] and [`Self::shutdown`].
#[async_trait::async_trait]
pub(in crate::sched) trait SchedulerBackend:
    Send + Sync + std::fmt::Debug
{
    /// Submit; answers once the job is durable.
    async fn submit(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<JobId, SchedError>;
    /// `sbatch --test-only`: what the submission would do; nothing is recorded.
    async fn test_only(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<TestOnly, SchedError>;
    async fn control(&self, who: Requester, job: JobId, action: Control) -> Result<(), SchedError>;
    async fn job(&self, who: Requester, job: JobId) -> Result<JobView, SchedError>;
    async fn squeue(&self, filter: SqueueFilter) -> Result<Vec<JobView>, SchedError>;
    /// One page of `squeue` and how many lines there are in all.
    async fn squeue_page(
        &self,
        filter: SqueueFilter,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<JobView>, u64), SchedError>;
    async fn nodes(&self) -> Result<(Vec<NodeView>, Vec<PartitionView>), SchedError>;
    /// The lines `squeue` lists, counted by partition, state and pending reason.
    async fn queue_counts(&self) -> Result<QueueCounts, SchedError>;
    /// The factors of the pending jobs' priorities (`sprio`).
    async fn priority(
        &self,
        filter: scheduler::PriorityFilter,
    ) -> Result<scheduler::PriorityList, SchedError>;
    /// The fair-share figures of the accounts and their users (`sshare`).
    async fn shares(&self) -> Result<scheduler::SharesView, SchedError>;
    /// What a job used, where the backend's own accounting knows it (Slurm's
    /// `sacct`); atrium's supervisors write theirs to the store, and the internal
    /// backend answers `None`.
    async fn usage(&self, job: JobId) -> Result<Option<JobUsage>, SchedError>;
    /// Replace every quota; answers once durable.
    async fn set_limits(&self, limits: LimitsConfig) -> Result<(), SchedError>;
    /// [`Self::set_limits`] ahead of every request, ready or not; the answer comes
    /// through the receiver.
    fn set_limits_first(
        &self,
        limits: LimitsConfig,
    ) -> Result<oneshot::Receiver<Result<(), SchedError>>, SchedError>;
    async fn limit_usages(&self, owners: Vec<Owner>) -> Result<Vec<Vec<LimitUsage>>, SchedError>;
    async fn set_node(&self, node: String, command: NodeCommand) -> Result<(), SchedError>;
    /// Write what must be written before the portal stops (the internal scheduler:
    /// a last snapshot) and stop answering; ahead of every request, ready or not.
    async fn shutdown(&self) -> Result<(), SchedError>;
}

/// What a user may do to a job of theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::sched) enum Control {
    Cancel,
    /// Only what waits of it: an array's pending tasks (`scancel --state=PENDING`).
    CancelWaiting,
    Hold,
    Release,
    Requeue,
    /// `scancel --signal`: a running job's processes get `signal`; it goes on.
    Signal {
        signal: i32,
        whom: crate::launch::SignalWhom,
    },
    /// `scontrol top`: first among its owner's pending jobs.
    Top,
    /// `scontrol update Nice=`: an administrator sets a pending job's nice.
    Nice(i32),
    /// `scontrol update`: a pending job asks for something else.
    Update(Box<JobUpdate>),
}

/// What `scontrol update` changes of a pending job; `None`: unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobUpdate {
    pub time_limit: Option<scheduler::TimeLimit>,
    pub partition: Option<String>,
    /// `Some(None)`: no dependency any more.
    pub dependency: Option<Option<scheduler::Dependency>>,
    pub nodes: Option<scheduler::NodeRange>,
    pub name: Option<String>,
    pub comment: Option<String>,
}

impl JobUpdate {
    /// `request` with these changes.
    pub fn applied_to(&self, request: &scheduler::JobRequest) -> scheduler::JobRequest {
        let mut r = request.clone();
        if let Some(t) = self.time_limit {
            r.time_limit = Some(t);
        }
        if let Some(p) = &self.partition {
            r.partition = Some(p.clone());
        }
        if let Some(d) = &self.dependency {
            r.dependency = d.clone();
        }
        if let Some(n) = &self.nodes {
            r.nodes = Some(*n);
        }
        if let Some(n) = &self.name {
            r.name = Some(n.clone());
        }
        if let Some(c) = &self.comment {
            r.comment = Some(c.clone());
        }
        r
    }
}

/// The handle handlers use. Cheap to clone. A backend's `start` makes it
/// (`sched::internal::start`, `sched::slurm::start`).
#[derive(Clone, Debug)]
pub struct Scheduler {
    backend: Arc<dyn SchedulerBackend>,
    judge: OptionJudge,
    /// `true` once the backend answers (the internal one: its queue rebuilt); the
    /// sender dropped without it: the backend failed to start.
    ready: watch::Receiver<bool>,
    /// How long a request waits for `ready` ([`RESTORE_WAIT`]).
    restore_wait: Duration,
}

/// Who decides whether a submission's options are valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionJudge {
    /// atrium's own parser: what it refuses is refused.
    Atrium,
    /// Slurm's `sbatch`: atrium reads what it needs and passes the rest as written.
    Slurm,
}

impl Scheduler {
    /// The handle on `backend`, which answers once `ready` is true.
    pub(in crate::sched) fn new(
        backend: Arc<dyn SchedulerBackend>,
        judge: OptionJudge,
        ready: watch::Receiver<bool>,
    ) -> Scheduler {
        Scheduler {
            backend,
            judge,
            ready,
            restore_wait: RESTORE_WAIT,
        }
    }

    /// This handle waiting `wait` (not [`RESTORE_WAIT`]) for the backend.
    #[cfg(test)]
    pub(in crate::sched) fn waiting(mut self, wait: Duration) -> Scheduler {
        self.restore_wait = wait;
        self
    }

    /// Whether the backend answers now (false while the queue is being restored).
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// Wait (up to `restore_wait`) for the backend to be ready.
    async fn until_ready(&self) -> Result<(), SchedError> {
        if self.is_ready() {
            return Ok(());
        }
        let mut ready = self.ready.clone();
        let waited = tokio::time::timeout(self.restore_wait, async {
            ready.wait_for(|r| *r).await.map(|_| ())
        })
        .await;
        match waited {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(SchedError::Unavailable),
            Err(_) => Err(SchedError::Restoring),
        }
    }

    /// Who judges the options of a submission to this backend.
    pub fn option_judge(&self) -> OptionJudge {
        self.judge
    }

    /// The backend, once it is ready.
    async fn ready(&self) -> Result<&dyn SchedulerBackend, SchedError> {
        self.until_ready().await?;
        Ok(self.backend.as_ref())
    }

    /// Ask the backend to write what it must before the portal stops (the internal
    /// scheduler: a last snapshot) and to stop; answers when done.
    pub async fn shutdown(&self) -> Result<(), SchedError> {
        self.backend.shutdown().await
    }

    /// Submit; answers once the job is durable.
    pub async fn submit(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<JobId, SchedError> {
        self.ready().await?.submit(owner, submission, workdir).await
    }

    /// What a submission would do (`sbatch --test-only`), checked as a submission is
    /// (partition, limits, quotas); nothing is recorded.
    pub async fn test_only(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<TestOnly, SchedError> {
        self.ready()
            .await?
            .test_only(owner, submission, workdir)
            .await
    }

    pub async fn cancel(&self, who: &Requester, job: JobId) -> Result<(), SchedError> {
        self.control(who, job, Control::Cancel).await
    }
    /// Cancel only what of `job` waits: an array's pending tasks; its running tasks go
    /// on (`scancel --state=PENDING`).
    pub async fn cancel_waiting(&self, who: &Requester, job: JobId) -> Result<(), SchedError> {
        self.control(who, job, Control::CancelWaiting).await
    }
    pub async fn hold(&self, who: &Requester, job: JobId) -> Result<(), SchedError> {
        self.control(who, job, Control::Hold).await
    }
    pub async fn release(&self, who: &Requester, job: JobId) -> Result<(), SchedError> {
        self.control(who, job, Control::Release).await
    }
    pub async fn requeue(&self, who: &Requester, job: JobId) -> Result<(), SchedError> {
        self.control(who, job, Control::Requeue).await
    }
    /// Put a pending job first among its owner's (`scontrol top`).
    pub async fn top(&self, who: &Requester, job: JobId) -> Result<(), SchedError> {
        self.control(who, job, Control::Top).await
    }
    /// Set a pending job's nice, an administrator's (`scontrol update Nice=`).
    pub async fn nice(&self, who: &Requester, job: JobId, nice: i32) -> Result<(), SchedError> {
        self.control(who, job, Control::Nice(nice)).await
    }
    /// Change what a pending job asks for (`scontrol update`).
    pub async fn update(
        &self,
        who: &Requester,
        job: JobId,
        changes: JobUpdate,
    ) -> Result<(), SchedError> {
        self.control(who, job, Control::Update(Box::new(changes)))
            .await
    }
    /// Send `signal` to a running job's processes (`whom`); the job goes on.
    pub async fn signal(
        &self,
        who: &Requester,
        job: JobId,
        signal: i32,
        whom: crate::launch::SignalWhom,
    ) -> Result<(), SchedError> {
        self.control(who, job, Control::Signal { signal, whom })
            .await
    }

    async fn control(
        &self,
        who: &Requester,
        job: JobId,
        action: Control,
    ) -> Result<(), SchedError> {
        self.ready().await?.control(who.clone(), job, action).await
    }

    /// A job the scheduler still knows (pending, running or ended since it started).
    pub async fn job(&self, who: &Requester, job: JobId) -> Result<JobView, SchedError> {
        self.ready().await?.job(who.clone(), job).await
    }

    /// Jobs as `squeue` lists them.
    pub async fn squeue(&self, filter: SqueueFilter) -> Result<Vec<JobView>, SchedError> {
        self.ready().await?.squeue(filter).await
    }

    /// One page of [`Self::squeue`] (`limit` lines from `offset`) and how many lines
    /// there are in all: only the page is built and sent.
    pub async fn squeue_page(
        &self,
        filter: SqueueFilter,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<JobView>, u64), SchedError> {
        self.ready().await?.squeue_page(filter, offset, limit).await
    }

    /// Nodes and partitions as `sinfo` shows them.
    pub async fn nodes(&self) -> Result<(Vec<NodeView>, Vec<PartitionView>), SchedError> {
        self.ready().await?.nodes().await
    }

    /// How many jobs are pending and running, by partition, state and reason.
    pub async fn queue_counts(&self) -> Result<QueueCounts, SchedError> {
        self.ready().await?.queue_counts().await
    }

    /// The weights and the factors of the pending jobs' priorities that match
    /// `filter` (`sprio`); the caller applies who may see which.
    pub async fn priority(
        &self,
        filter: scheduler::PriorityFilter,
    ) -> Result<scheduler::PriorityList, SchedError> {
        self.ready().await?.priority(filter).await
    }

    /// The fair-share figures of every account and its users (`sshare`); the caller
    /// applies who may see which.
    pub async fn shares(&self) -> Result<scheduler::SharesView, SchedError> {
        self.ready().await?.shares().await
    }

    /// What `job` used, as the backend's own accounting knows it (`None`: it keeps
    /// none; the caller has checked that the job is visible to whom it answers).
    pub async fn usage(&self, job: JobId) -> Result<Option<JobUsage>, SchedError> {
        self.ready().await?.usage(job).await
    }

    /// Replace every quota; they apply from the next pass. Answers once durable.
    pub async fn set_limits(&self, limits: LimitsConfig) -> Result<(), SchedError> {
        self.ready().await?.set_limits(limits).await
    }

    /// [`Self::set_limits`] at startup: queued at once, ahead of every request waiting
    /// for the backend to be ready, so that none is judged by the quotas of before;
    /// the answer (once durable) comes later through the returned receiver.
    pub fn set_limits_first(
        &self,
        limits: LimitsConfig,
    ) -> Result<oneshot::Receiver<Result<(), SchedError>>, SchedError> {
        self.backend.set_limits_first(limits)
    }

    /// The quotas that apply to `owner` and what of each is in use.
    pub async fn limit_usage(&self, owner: Owner) -> Result<Vec<LimitUsage>, SchedError> {
        let mut each = self.limit_usages(vec![owner]).await?;
        Ok(each.pop().unwrap_or_default())
    }

    /// [`Self::limit_usage`] of each of `owners`, in one request.
    pub async fn limit_usages(
        &self,
        owners: Vec<Owner>,
    ) -> Result<Vec<Vec<LimitUsage>>, SchedError> {
        self.ready().await?.limit_usages(owners).await
    }

    /// Drain, resume or down a node. Answers once durable.
    pub async fn set_node(&self, node: String, command: NodeCommand) -> Result<(), SchedError> {
        self.ready().await?.set_node(node, command).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> Requester {
        Requester {
            user: name.into(),
            admin: false,
        }
    }

    #[test]
    fn a_user_sees_their_own_job_and_an_administrator_any() {
        let own = user("ada").visible(Some(("ada", 1)), |j| j.0);
        assert_eq!(own.ok(), Some(("ada", 1)));
        let admin = Requester {
            user: "root".into(),
            admin: true,
        };
        assert!(admin.visible(Some(("ada", 1)), |j| j.0).is_ok());
    }

    #[test]
    fn another_users_job_and_a_missing_one_are_both_not_found() {
        let other = user("bob").visible(Some(("ada", 1)), |j| j.0);
        assert!(matches!(other, Err(SchedError::NotFound)));
        let missing = user("bob").visible(None::<(&str, i32)>, |j| j.0);
        assert!(matches!(missing, Err(SchedError::NotFound)));
    }
}

/// What a job used, as Slurm's accounting (`sacct`) records it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobUsage {
    /// `TotalCPU`: user and system time of all its steps.
    pub cpu_seconds: Option<f64>,
    /// The largest `MaxRSS` (or `TRESUsageInMax` `mem`) of its steps.
    pub max_rss_bytes: Option<u64>,
    /// `TRESUsageInAve` `gres/gpuutil` (where Slurm gathers GPU use), percent.
    pub gpu_utilization_percent: Option<f64>,
    /// `TRESUsageInMax` `gres/gpumem`.
    pub gpu_memory_bytes: Option<u64>,
}
