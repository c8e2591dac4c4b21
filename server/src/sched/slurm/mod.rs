//! The Slurm backend (`[scheduler] backend = "slurm"`): the same [`Scheduler`] handle,
//! answered by the site's Slurm instead of atrium's own cluster.
//!
//! - Submissions go to `sbatch` run as the user (munge vouches for the uid), with the
//!   script and its directives unchanged, the options given beside it, and
//!   `--comment=atrium`. The row is written with Slurm's id before the caller hears
//!   back; a row that cannot be written cancels the job, so nothing is acknowledged
//!   that atrium could lose.
//! - State is read, never guessed: each interval `squeue` lists the jobs of each user
//!   atrium follows a job of (slurmctld packs only those), jobs just submitted or
//!   acted on are asked about alone while they settle, and the whole queue is swept
//!   at start and every 5 minutes for jobs to adopt; a job `squeue` no longer lists is
//!   asked of `sacct`. When Slurm does not answer, the
//!   jobs show UNKNOWN and the rows keep the last state Slurm reported; nothing is
//!   ended or cancelled on atrium's own account.
//! - Nodes and partitions come from `scontrol show node|partition`.
//! - Quotas are Slurm's (associations, `atrium slurm apply-quotas`): atrium shows
//!   them with their use (`usage`) but does not enforce them here.
//!
//!
//! Here: the settings, the shared live view and the command loop (`serve`);
//! `backend.rs` runs Slurm's commands and the poll; `reconcile.rs` is what Slurm's
//! answers mean for atrium's rows (pure, tested); `cli`, `parse`, `quotas`, `usage`
//! as named.
//!
//! Owns: atrium's jobs under Slurm.
//! Must not touch: the internal backend (`sched::internal`), HTTP types, SQL (the
//! store).

mod backend;
pub mod cli;
pub mod nodes;
pub mod parse;
pub mod quotas;
mod reconcile;
pub mod sbatch;
mod usage;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::path::PathBuf;

use scheduler::{
    JobId, JobView, LimitUsage, LimitsConfig, NodeCommand, NodeView, Owner, PartitionView,
    QueueCounts, SqueueFilter, TestOnly,
};
use tokio::sync::{oneshot, Notify};

use self::backend::Backend;
use self::cli::SlurmCli;
use self::reconcile::{job_id, live_jobs, view_of_record, Entry, Jobs};
use super::handle::{
    Control, JobUsage, OptionJudge, Requester, SchedError, Scheduler, SchedulerBackend,
};
use super::submission::Submission;
use crate::store::Store;
use crate::util::now_secs;

/// How the backend reaches Slurm.
#[derive(Debug, Clone)]
pub struct SlurmSettings {
    pub cli: SlurmCli,
    pub poll_interval: Duration,
    pub nodes_interval: Duration,
}

impl SlurmSettings {
    pub fn from_config(config: &crate::config::SlurmConfig, switch_user: bool) -> SlurmSettings {
        SlurmSettings {
            cli: SlurmCli::from_config(config, switch_user),
            poll_interval: config.poll_interval.0,
            nodes_interval: config.nodes_interval.0,
        }
    }
}

#[derive(Default)]
struct State {
    jobs: Jobs,
    nodes: Vec<NodeView>,
    partitions: Vec<PartitionView>,
    /// Why Slurm did not answer the last poll.
    unreachable: Option<String>,
    /// atrium's quotas, shown with their use (Slurm enforces them).
    limits: LimitsConfig,
    /// Slurm ids carrying atrium's comment that are not to be adopted (their row exists,
    /// or their user is not atrium's): asked about once.
    not_adopted: HashSet<String>,
    /// When each `sbatch` still being recorded started (Unix seconds), by a number
    /// of its own: a job Slurm lists from then on may be one of them, and is not
    /// adopted until they are recorded.
    submitting: std::collections::BTreeMap<u64, i64>,
    next_submission: u64,
    /// Slurm ids of jobs just submitted or acted on, until when they are watched
    /// closely: their next state (started, ended) shows within [`backend`]'s settle poll.
    settling: std::collections::HashMap<String, std::time::Instant>,
}

/// A submission in flight between `sbatch` and its row: while it lives, jobs Slurm
/// lists from its start on are not adopted (one of them may be this one).
struct InFlight {
    state: Shared,
    number: u64,
}

impl InFlight {
    fn start(state: &Shared) -> InFlight {
        let mut s = lock(state);
        let number = s.next_submission;
        s.next_submission += 1;
        s.submitting.insert(number, now_secs());
        InFlight {
            state: state.clone(),
            number,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.state).submitting.remove(&self.number);
    }
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// Load atrium's open Slurm jobs and start answering; the handle answers through it.
pub async fn start(
    store: Store,
    identities: crate::identities::Identities,
    settings: SlurmSettings,
    metrics: crate::metrics::SlurmMetrics,
) -> anyhow::Result<(Scheduler, tokio::task::JoinHandle<anyhow::Result<()>>)> {
    let mut state = State::default();
    let now = now_secs();
    for (record, slurm_id) in store.open_slurm_jobs().await? {
        let id = job_id(&record);
        let view = view_of_record(&record, now);
        state.jobs.insert(
            id,
            Entry {
                slurm_id,
                record,
                view,
            },
        );
    }
    tracing::info!(
        jobs = state.jobs.len(),
        "the Slurm backend follows the jobs it had"
    );
    // Off the start-up path: with Slurm down, scontrol waits out its timeout.
    tokio::spawn(backend::check_first_job_id(
        store.clone(),
        settings.cli.clone(),
    ));
    let backend = Arc::new(Backend {
        identities,
        store,
        settings,
        state: Arc::new(Mutex::new(state)),
        wake: Notify::new(),
        metrics,
    });
    let poll = tokio::spawn({
        let backend = backend.clone();
        async move {
            backend::poll_loop(backend).await;
            Ok(())
        }
    });
    // Ready at once: Slurm holds the queue.
    let (_ready_tx, ready) = tokio::sync::watch::channel(true);
    Ok((Scheduler::new(backend, OptionJudge::Slurm, ready), poll))
}

/// Slurm answers each operation itself, in the caller's task: its controller keeps
/// the queue, the poll keeps the mirror.
#[async_trait::async_trait]
impl SchedulerBackend for Backend {
    async fn submit(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<JobId, SchedError> {
        Backend::submit(self, owner, submission, workdir).await
    }

    async fn test_only(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<TestOnly, SchedError> {
        Backend::test_only(self, owner, submission, workdir).await
    }

    async fn control(&self, who: Requester, job: JobId, action: Control) -> Result<(), SchedError> {
        Backend::control(self, &who, job, action).await
    }

    async fn job(&self, who: Requester, job: JobId) -> Result<JobView, SchedError> {
        Backend::job(self, &who, job)
    }

    async fn squeue(&self, filter: SqueueFilter) -> Result<Vec<JobView>, SchedError> {
        Ok(Backend::squeue(self, &filter))
    }

    async fn squeue_page(
        &self,
        filter: SqueueFilter,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<JobView>, u64), SchedError> {
        let all = Backend::squeue(self, &filter);
        let total = all.len() as u64;
        Ok((all.into_iter().skip(offset).take(limit).collect(), total))
    }

    async fn nodes(&self) -> Result<(Vec<NodeView>, Vec<PartitionView>), SchedError> {
        let s = lock(&self.state);
        Ok((s.nodes.clone(), s.partitions.clone()))
    }

    async fn queue_counts(&self) -> Result<QueueCounts, SchedError> {
        let mut counts = QueueCounts::default();
        for view in Backend::squeue(self, &SqueueFilter::default()) {
            counts.add(&view);
        }
        Ok(counts)
    }

    /// Slurm's controller computes these; atrium does not mirror them.
    async fn priority(
        &self,
        _filter: scheduler::PriorityFilter,
    ) -> Result<scheduler::PriorityList, SchedError> {
        Err(SchedError::NotSupported(
            "priority factors are not available with the Slurm backend: use Slurm's own sprio"
                .into(),
        ))
    }

    async fn shares(&self) -> Result<scheduler::SharesView, SchedError> {
        Err(SchedError::NotSupported(
            "fair-share figures are not available with the Slurm backend: use Slurm's own sshare"
                .into(),
        ))
    }

    async fn usage(&self, job: JobId) -> Result<Option<JobUsage>, SchedError> {
        Backend::usage(self, job).await
    }

    /// Slurm's associations enforce quotas; atrium keeps them to show.
    async fn set_limits(&self, limits: LimitsConfig) -> Result<(), SchedError> {
        lock(&self.state).limits = limits;
        Ok(())
    }

    fn set_limits_first(
        &self,
        limits: LimitsConfig,
    ) -> Result<oneshot::Receiver<Result<(), SchedError>>, SchedError> {
        lock(&self.state).limits = limits;
        let (reply, rx) = oneshot::channel();
        let _ = reply.send(Ok(()));
        Ok(rx)
    }

    async fn limit_usages(&self, owners: Vec<Owner>) -> Result<Vec<Vec<LimitUsage>>, SchedError> {
        let (limits, live) = {
            let s = lock(&self.state);
            (s.limits.clone(), live_jobs(&s.jobs))
        };
        Ok(usage::limit_usages(&self.store, &limits, &live, &owners, now_secs()).await)
    }

    async fn set_node(&self, node: String, command: NodeCommand) -> Result<(), SchedError> {
        Backend::set_node(self, &node, command).await
    }

    /// Nothing of Slurm's to write: its controller keeps the queue.
    async fn shutdown(&self) -> Result<(), SchedError> {
        Ok(())
    }
}
