//! The actor: a loop that takes every queued command, applies them to the cluster in
//! order, runs one scheduling pass, writes the batch (log entries and job rows) in a
//! single transaction, and only then answers, launches and signals. Replies to
//! read-only commands go out at once. A failed commit rebuilds the cluster from the
//! database, so memory never runs ahead of what is durable.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use scheduler::{
    Cluster, ClusterConfig, Decision, JobId, JobOutcome, JobState, JobView, LimitUsage,
    LimitsConfig, NodeCommand, NodeView, Owner, PartitionView, SqueueFilter, Time,
};
use tokio::sync::{mpsc, oneshot};

use super::event::{Applied, ApplyError, Event};
use super::step_env::{self, PatternValues};
use super::steps::{StepEnd, StepRunner, StepSignal};
use super::submission::Submission;
use crate::store::{JobChange, JobRecord, JobStart, Store};
use crate::util::now_secs;

/// Most commands taken into one batch (one transaction).
const MAX_BATCH: usize = 4096;
/// Write a snapshot (and drop the log it covers) when the log is this long …
const SNAPSHOT_EVERY_ENTRIES: usize = 100_000;
/// … or this old and not empty.
const SNAPSHOT_EVERY: Duration = Duration::from_secs(300);
/// Ended jobs stay in the scheduler's memory this long (Slurm's default `MinJobAge`);
/// the database keeps them for good, and the API reads ended jobs from there.
const MIN_JOB_AGE_SECS: i64 = 300;
/// How often to look for jobs to forget.
const PURGE_EVERY: Duration = Duration::from_secs(60);

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
}

#[derive(Debug, thiserror::Error)]
pub enum SchedError {
    #[error("no such job")]
    NotFound,
    /// The request can never be satisfied (a message for the user).
    #[error("{0}")]
    Rejected(String),
    /// The job is not in a state that allows this.
    #[error("{0}")]
    Conflict(String),
    #[error("the scheduler is not available")]
    Unavailable,
}

pub(super) type Reply<T> = oneshot::Sender<Result<T, SchedError>>;

pub(super) enum Command {
    Submit {
        owner: Owner,
        submission: Box<Submission>,
        workdir: PathBuf,
        reply: Reply<JobId>,
    },
    Control {
        who: Requester,
        job: JobId,
        action: Control,
        reply: Reply<()>,
    },
    Job {
        who: Requester,
        job: JobId,
        reply: Reply<JobView>,
    },
    Squeue {
        filter: SqueueFilter,
        reply: Reply<Vec<JobView>>,
    },
    Nodes {
        reply: Reply<(Vec<NodeView>, Vec<PartitionView>)>,
    },
    Limits {
        limits: Box<LimitsConfig>,
        reply: Reply<()>,
    },
    LimitUsage {
        owners: Vec<Owner>,
        reply: Reply<Vec<Vec<LimitUsage>>>,
    },
    Node {
        node: String,
        command: NodeCommand,
        reply: Reply<()>,
    },
    StepEnded(StepEnd),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Control {
    Cancel,
    Hold,
    Release,
    Requeue,
}

/// The handle handlers use. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Scheduler {
    tx: mpsc::Sender<Command>,
}

impl Scheduler {
    /// Rebuild the cluster from the database, re-adopt running steps and start the
    /// actor.
    pub async fn start(
        store: Store,
        config: ClusterConfig,
        settings: super::LaunchSettings,
    ) -> anyhow::Result<(Scheduler, tokio::task::JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel(16_384);
        let runner = StepRunner::new(settings, store.clone(), tx.clone());
        let mut actor = Actor::load(store, config, runner).await?;
        actor.adopt_steps().await?;
        let handle = tokio::spawn(actor.run(rx));
        Ok((Scheduler { tx }, handle))
    }

    /// Answer through the site's Slurm instead (`[scheduler] backend = "slurm"`).
    pub async fn start_slurm(
        store: Store,
        settings: super::slurm::SlurmSettings,
    ) -> anyhow::Result<(Scheduler, tokio::task::JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel(16_384);
        let handle = super::slurm::start(store, settings, rx).await?;
        Ok((Scheduler { tx }, handle))
    }

    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, SchedError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| SchedError::Unavailable)?;
        rx.await.map_err(|_| SchedError::Unavailable)?
    }

    /// Submit; answers once the job is durable.
    pub async fn submit(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<JobId, SchedError> {
        self.ask(|reply| Command::Submit {
            owner,
            submission: Box::new(submission),
            workdir,
            reply,
        })
        .await
    }

    pub async fn cancel(&self, who: &Requester, job: JobId) -> Result<(), SchedError> {
        self.control(who, job, Control::Cancel).await
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

    async fn control(
        &self,
        who: &Requester,
        job: JobId,
        action: Control,
    ) -> Result<(), SchedError> {
        self.ask(|reply| Command::Control {
            who: who.clone(),
            job,
            action,
            reply,
        })
        .await
    }

    /// A job the scheduler still knows (pending, running or ended since it started).
    pub async fn job(&self, who: &Requester, job: JobId) -> Result<JobView, SchedError> {
        self.ask(|reply| Command::Job {
            who: who.clone(),
            job,
            reply,
        })
        .await
    }

    /// Jobs as `squeue` lists them.
    pub async fn squeue(&self, filter: SqueueFilter) -> Result<Vec<JobView>, SchedError> {
        self.ask(|reply| Command::Squeue { filter, reply }).await
    }

    /// Nodes and partitions as `sinfo` shows them.
    pub async fn nodes(&self) -> Result<(Vec<NodeView>, Vec<PartitionView>), SchedError> {
        self.ask(|reply| Command::Nodes { reply }).await
    }

    /// Replace every quota; they apply from the next pass. Answers once durable.
    pub async fn set_limits(&self, limits: LimitsConfig) -> Result<(), SchedError> {
        self.ask(|reply| Command::Limits {
            limits: Box::new(limits),
            reply,
        })
        .await
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
        self.ask(|reply| Command::LimitUsage { owners, reply })
            .await
    }

    /// Drain, resume or down a node. Answers once durable.
    pub async fn set_node(&self, node: String, command: NodeCommand) -> Result<(), SchedError> {
        self.ask(|reply| Command::Node {
            node,
            command,
            reply,
        })
        .await
    }
}

/// What the actor keeps of a job that is not over: what its steps need.
#[derive(Debug, Clone)]
struct JobMeta {
    user: String,
    name: String,
    workdir: PathBuf,
    output: Option<String>,
    error: Option<String>,
}

impl JobMeta {
    fn from_record(r: &JobRecord) -> Self {
        let request: scheduler::JobRequest = serde_json::from_str(&r.request).unwrap_or_default();
        JobMeta {
            user: r.user_name.clone(),
            name: r.name.clone(),
            workdir: PathBuf::from(&r.workdir),
            output: request.output,
            error: request.error,
        }
    }
}

/// One batch: what to write, and what to do once it is written.
#[derive(Default)]
struct Batch {
    log: Vec<(i64, String)>,
    changes: Vec<JobChange>,
    replies: Vec<Box<dyn FnOnce(bool) + Send>>,
    launches: Vec<(JobId, scheduler::Allocation, JobStart)>,
    signals: Vec<(JobId, StepSignal)>,
    touched: bool,
}

struct Actor {
    cluster: Cluster,
    config: ClusterConfig,
    store: Store,
    seq: i64,
    log_since_snapshot: usize,
    last_snapshot: Instant,
    last_purge: Instant,
    next_id: u64,
    meta: HashMap<u64, JobMeta>,
    steps: HashMap<JobId, mpsc::UnboundedSender<StepSignal>>,
    runner: StepRunner,
}

impl Actor {
    async fn load(
        store: Store,
        config: ClusterConfig,
        runner: StepRunner,
    ) -> anyhow::Result<Actor> {
        let (cluster, seq, entries) = rebuild(&store, &config).await?;
        let log = store.load_scheduler_log().await?;
        let mut next_id = (log.max_job_id.max(0) as u64) + 1;
        while cluster.job(JobId::new(next_id), 0).is_some() {
            next_id += 1;
        }
        let mut actor = Actor {
            cluster,
            config,
            store,
            seq,
            log_since_snapshot: entries,
            last_snapshot: Instant::now(),
            last_purge: Instant::now(),
            next_id,
            meta: HashMap::new(),
            steps: HashMap::new(),
            runner,
        };
        actor.load_meta().await?;
        actor.snapshot().await?;
        Ok(actor)
    }

    async fn load_meta(&mut self) -> anyhow::Result<()> {
        let filter = crate::store::JobFilter {
            states: vec!["PENDING".into(), "RUNNING".into(), "COMPLETING".into()],
            limit: i64::MAX,
            ..Default::default()
        };
        let (rows, _) = self.store.list_jobs(&filter).await?;
        let arrays = self.store.active_array_rows().await?;
        for r in rows.iter().chain(arrays.iter()).filter(|r| r.task == -1) {
            self.meta.insert(r.id as u64, JobMeta::from_record(r));
        }
        for r in rows.iter().filter(|r| r.task >= 0) {
            if !self.meta.contains_key(&(r.id as u64)) {
                if let Ok(parent) = self.store.job(r.id, -1).await {
                    self.meta.insert(r.id as u64, JobMeta::from_record(&parent));
                }
            }
        }
        Ok(())
    }

    /// Find every step the database says is running and watch it again; launch
    /// the ones whose supervisor never started.
    async fn adopt_steps(&mut self) -> anyhow::Result<()> {
        for r in self.store.running_jobs().await? {
            let job = if r.task >= 0 {
                JobId::task(r.id as u64, r.task as u32)
            } else {
                JobId::new(r.id as u64)
            };
            let running = self
                .cluster
                .job(job, now_secs())
                .is_some_and(|v| matches!(v.state, JobState::Running | JobState::Completing));
            if !running {
                tracing::error!(%job, "the database says running but the scheduler does not; leaving it to the step's state file");
            }
            let completing = self
                .cluster
                .job(job, now_secs())
                .is_some_and(|v| v.state == JobState::Completing);
            let signals = match self.runner.adopt(job).await {
                Some(tx) => tx,
                None => {
                    let Some(allocation) = r
                        .allocation
                        .as_deref()
                        .and_then(|a| serde_json::from_str::<scheduler::Allocation>(a).ok())
                    else {
                        tracing::error!(%job, "running job without an allocation");
                        continue;
                    };
                    let start = self.job_start(job, &allocation, r.start_time.unwrap_or(0));
                    tracing::info!(%job, "its step never started: starting it now");
                    self.runner
                        .launch(job, allocation, start, r.user_name.clone())
                }
            };
            if completing {
                let _ = signals.send(StepSignal::Cancel);
            }
            self.steps.insert(job, signals);
        }
        Ok(())
    }

    async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let mut batch = Batch::default();
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => self.handle(cmd, &mut batch),
                    None => break,
                },
                _ = tick.tick() => {
                    batch.touched = !self.meta.is_empty();
                    if self.last_purge.elapsed() >= PURGE_EVERY {
                        self.last_purge = Instant::now();
                        self.purge(&mut batch);
                    }
                }
            }
            let mut taken = 1;
            while taken < MAX_BATCH {
                match rx.try_recv() {
                    Ok(cmd) => self.handle(cmd, &mut batch),
                    Err(_) => break,
                }
                taken += 1;
            }
            if batch.touched {
                self.pass(&mut batch);
            }
            self.commit(batch).await;
            if self.log_since_snapshot >= SNAPSHOT_EVERY_ENTRIES
                || (self.log_since_snapshot > 0 && self.last_snapshot.elapsed() >= SNAPSHOT_EVERY)
            {
                if let Err(e) = self.snapshot().await {
                    tracing::error!(error = %e, "writing the scheduler snapshot failed");
                }
            }
        }
        if let Err(e) = self.snapshot().await {
            tracing::error!(error = %e, "writing the scheduler snapshot failed");
        }
    }

    fn record(&mut self, batch: &mut Batch, event: &Event) -> Result<Applied, ApplyError> {
        let applied = event.apply(&mut self.cluster)?;
        self.seq += 1;
        self.log_since_snapshot += 1;
        match serde_json::to_string(event) {
            Ok(json) => batch.log.push((self.seq, json)),
            Err(e) => tracing::error!(error = %e, "cannot serialize a scheduler event"),
        }
        batch.touched = true;
        Ok(applied)
    }

    fn handle(&mut self, cmd: Command, batch: &mut Batch) {
        let now = now_secs();
        match cmd {
            Command::Submit {
                owner,
                submission,
                workdir,
                reply,
            } => {
                let id = self.next_id;
                let event = Event::Submit {
                    id,
                    request: Box::new(submission.request.clone()),
                    owner: owner.clone(),
                    now,
                };
                match self.record(batch, &event) {
                    Ok(_) => {
                        self.next_id += 1;
                        let record = self.submitted_record(id, &owner, &submission, &workdir, now);
                        self.meta.insert(id, JobMeta::from_record(&record));
                        batch.changes.push(JobChange::Submitted(Box::new(record)));
                        let job = JobId::new(id);
                        batch.replies.push(Box::new(move |ok| {
                            let _ = reply.send(if ok {
                                Ok(job)
                            } else {
                                Err(SchedError::Unavailable)
                            });
                        }));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(SchedError::Rejected(e.to_string())));
                    }
                }
            }
            Command::Control {
                who,
                job,
                action,
                reply,
            } => match self.visible(&who, job, now) {
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
                Ok(_) => {
                    let event = match action {
                        Control::Cancel => Event::Cancel { job, now },
                        Control::Hold => Event::Hold {
                            job,
                            admin: who.admin,
                            now,
                        },
                        Control::Release => Event::Release {
                            job,
                            admin: who.admin,
                            now,
                        },
                        Control::Requeue => Event::Requeue { job, now },
                    };
                    match self.record(batch, &event) {
                        Ok(applied) => {
                            self.after_control(batch, job, action, applied, now);
                            batch.replies.push(Box::new(move |ok| {
                                let _ = reply.send(if ok {
                                    Ok(())
                                } else {
                                    Err(SchedError::Unavailable)
                                });
                            }));
                        }
                        Err(e) => {
                            let _ = reply.send(Err(SchedError::Conflict(e.to_string())));
                        }
                    }
                }
            },
            Command::Job { who, job, reply } => {
                let _ = reply.send(self.visible(&who, job, now));
            }
            Command::Squeue { filter, reply } => {
                let _ = reply.send(Ok(self.cluster.squeue(&filter, now)));
            }
            Command::Nodes { reply } => {
                let _ = reply.send(Ok((self.cluster.nodes(), self.cluster.sinfo())));
            }
            Command::Limits { limits, reply } => {
                if self.cluster.config().limits == *limits {
                    let _ = reply.send(Ok(()));
                    return;
                }
                let result = self.record(batch, &Event::Limits { limits, now });
                self.reply_when_durable(batch, reply, result.map(|_| ()));
            }
            Command::LimitUsage { owners, reply } => {
                let each = owners
                    .iter()
                    .map(|owner| self.cluster.limit_usage(owner, now))
                    .collect();
                let _ = reply.send(Ok(each));
            }
            Command::Node {
                node,
                command,
                reply,
            } => {
                let result = self.record(batch, &Event::Node { node, command, now });
                let result = match result {
                    Ok(Applied::Decisions(decisions)) => {
                        self.decided(batch, decisions, now);
                        Ok(())
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                };
                self.reply_when_durable(batch, reply, result);
            }
            Command::StepEnded(end) => self.step_ended(batch, end, now),
        }
    }

    /// Answer once the batch is written; a change the cluster refused is a conflict.
    fn reply_when_durable(
        &self,
        batch: &mut Batch,
        reply: Reply<()>,
        result: Result<(), ApplyError>,
    ) {
        match result {
            Ok(()) => batch.replies.push(Box::new(move |ok| {
                let _ = reply.send(if ok {
                    Ok(())
                } else {
                    Err(SchedError::Unavailable)
                });
            })),
            Err(e) => {
                let _ = reply.send(Err(SchedError::Conflict(e.to_string())));
            }
        }
    }

    /// The job's view if `who` may see it; another user's job does not exist.
    fn visible(&self, who: &Requester, job: JobId, now: Time) -> Result<JobView, SchedError> {
        let view = self.cluster.job(job, now).ok_or(SchedError::NotFound)?;
        if !who.may_see(&view.user) {
            return Err(SchedError::NotFound);
        }
        Ok(view)
    }

    fn after_control(
        &mut self,
        batch: &mut Batch,
        job: JobId,
        action: Control,
        applied: Applied,
        now: Time,
    ) {
        match (action, applied) {
            (Control::Cancel, Applied::Cancelled(effect)) => {
                for j in effect.cancelled {
                    batch.changes.push(ended(j, "CANCELLED", now, None, None));
                }
                for j in effect.signal {
                    batch.signals.push((j, StepSignal::Cancel));
                }
                self.array_row(batch, job, now);
            }
            (Control::Requeue, _) => match self.cluster.job(job, now).map(|v| v.state) {
                Some(JobState::Completing) => batch.signals.push((job, StepSignal::Cancel)),
                Some(state) => batch.changes.push(state_change(job, state, None)),
                None => {}
            },
            (Control::Hold, _) | (Control::Release, _) => {
                let reason = self
                    .cluster
                    .job(job, now)
                    .and_then(|v| v.reason)
                    .map(|r| r.name().to_string());
                batch.changes.push(JobChange::State {
                    id: job.job as i64,
                    task: job.task.map_or(-1, i64::from),
                    state: "PENDING".into(),
                    reason,
                });
            }
            _ => {}
        }
    }

    fn step_ended(&mut self, batch: &mut Batch, end: StepEnd, now: Time) {
        self.steps.remove(&end.job);
        let before = self.cluster.job(end.job, now).map(|v| v.state);
        if !matches!(before, Some(JobState::Running | JobState::Completing)) {
            tracing::warn!(job = %end.job, ?before, "a step ended for a job that is not running");
            return;
        }
        if end.time_limit && before == Some(JobState::Running) {
            // Let the scheduler see the time limit first so that the job is TIMEOUT.
            self.pass(batch);
        }
        let event = Event::Finished {
            job: end.job,
            outcome: end.outcome,
            now,
        };
        match self.record(batch, &event) {
            Ok(Applied::Finished(JobState::Pending)) => {
                batch
                    .changes
                    .push(state_change(end.job, JobState::Pending, None));
            }
            Ok(Applied::Finished(state)) => {
                let (code, signal) = match end.outcome {
                    JobOutcome::Exited(c) => (Some(i64::from(c)), None),
                    JobOutcome::Signaled(s) => (None, Some(i64::from(s))),
                    JobOutcome::OutOfMemory => (None, Some(9)),
                };
                let mut change = ended(end.job, state.name(), now, code, end.message);
                if let JobChange::Ended { exit_signal, .. } = &mut change {
                    *exit_signal = signal;
                }
                batch.changes.push(change);
                self.array_row(batch, end.job, now);
                self.forget_if_over(end.job, now);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!(job = %end.job, error = %e, "recording the end of a step failed")
            }
        }
    }

    /// When the last task of an array is over, its own row is over too.
    fn array_row(&mut self, batch: &mut Batch, job: JobId, now: Time) {
        let parent = JobId::new(job.job);
        if job.task.is_none() && !self.meta.contains_key(&job.job) {
            return;
        }
        if let Some(v) = self.cluster.job(parent, now) {
            if v.state.is_terminal() && job.task.is_some() {
                batch
                    .changes
                    .push(ended(parent, v.state.name(), now, None, None));
                self.meta.remove(&job.job);
            }
        }
    }

    fn forget_if_over(&mut self, job: JobId, now: Time) {
        let parent = JobId::new(job.job);
        if self
            .cluster
            .job(parent, now)
            .is_none_or(|v| v.state.is_terminal())
        {
            self.meta.remove(&job.job);
        }
    }

    /// Forget jobs ended more than [`MIN_JOB_AGE_SECS`] ago, through the log like every
    /// other change, so that a replay forgets exactly the same ones.
    fn purge(&mut self, batch: &mut Batch) {
        let ended_before = now_secs() - MIN_JOB_AGE_SECS;
        if !self.cluster.any_ended_by(ended_before) {
            return;
        }
        match self.record(batch, &Event::Purge { ended_before }) {
            Ok(Applied::Purged(n)) => tracing::debug!(n, "forgot ended jobs"),
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "forgetting ended jobs failed"),
        }
    }

    fn pass(&mut self, batch: &mut Batch) {
        let now = now_secs();
        let decisions = match self.record(batch, &Event::Pass { now }) {
            Ok(Applied::Decisions(d)) => d,
            _ => return,
        };
        self.decided(batch, decisions, now);
    }

    /// Carry out what the cluster decided: starts, cancels, kills.
    fn decided(&mut self, batch: &mut Batch, decisions: Vec<Decision>, now: Time) {
        for d in decisions {
            match d {
                Decision::Start { job, allocation } => {
                    let start = self.job_start(job, &allocation, now * 1000);
                    batch
                        .changes
                        .push(JobChange::Started(Box::new(start.clone())));
                    batch.launches.push((job, allocation, start));
                }
                Decision::Cancel { job, reason } => {
                    let mut change = ended(
                        job,
                        "CANCELLED",
                        now,
                        None,
                        Some(format!("cancelled by the scheduler: {}", reason.name())),
                    );
                    if let JobChange::Ended { reason: r, .. } = &mut change {
                        *r = Some(reason.name().to_string());
                    }
                    batch.changes.push(change);
                    self.forget_if_over(job, now);
                }
                Decision::TimeLimit { job } => batch.signals.push((job, StepSignal::TimeLimit)),
                Decision::NodeFail { job, requeued } => {
                    batch.signals.push((job, StepSignal::Cancel));
                    let state = if requeued {
                        JobState::Pending
                    } else {
                        JobState::NodeFail
                    };
                    batch.changes.push(state_change(job, state, None));
                }
            }
        }
    }

    /// The row change and step details of a job that starts now.
    fn job_start(&self, job: JobId, allocation: &scheduler::Allocation, start_ms: i64) -> JobStart {
        let view = self.cluster.job(job, now_secs());
        let node = allocation.nodes.first();
        let meta = self.meta.get(&job.job);
        let values = PatternValues {
            job,
            user: meta.map_or("", |m| m.user.as_str()),
            name: meta.map_or("", |m| m.name.as_str()),
            node: node.map_or("", |n| n.node.as_str()),
        };
        let workdir = meta.map_or_else(PathBuf::new, |m| m.workdir.clone());
        // Paths were checked against PATH_MAX at submission; one that still does not
        // fit (a node name longer than a host name may be) goes to the default file.
        let path = |pattern: Option<&str>| {
            step_env::output_path(pattern, &values, &workdir).unwrap_or_else(|e| {
                tracing::warn!(job = %job, error = %e, "output pattern refused; using the default");
                workdir.join(format!("slurm-{job}.out"))
            })
        };
        let stdout = path(meta.and_then(|m| m.output.as_deref()));
        let stderr = meta.and_then(|m| m.error.as_deref()).map(|e| path(Some(e)));
        JobStart {
            id: job.job as i64,
            task: job.task.map_or(-1, i64::from),
            start_time: start_ms,
            time_limit: view.as_ref().and_then(|v| match v.time_limit {
                scheduler::TimeLimit::Seconds(s) => Some(s as i64),
                scheduler::TimeLimit::Unlimited => None,
            }),
            allocation: serde_json::to_string(allocation).unwrap_or_default(),
            nodelist: view
                .as_ref()
                .map_or_else(String::new, |v| v.nodelist.clone()),
            cpus: allocation.nodes.iter().map(|n| i64::from(n.cpus)).sum(),
            memory_mb: allocation.nodes.iter().map(|n| n.memory_mb as i64).sum(),
            gpus: view.as_ref().map_or_else(String::new, |v| v.gres.clone()),
            gpu_milli: view.as_ref().map_or(0, |v| v.gpu_milli as i64),
            stdout_path: stdout.display().to_string(),
            stderr_path: stderr.map(|p| p.display().to_string()),
        }
    }

    /// The submission's row, with what the cluster resolved at submission (account,
    /// partition, name, reason, time limit, GPUs).
    fn submitted_record(
        &self,
        id: u64,
        owner: &Owner,
        s: &Submission,
        workdir: &std::path::Path,
        now: Time,
    ) -> JobRecord {
        let mut record = s.record(id, owner, workdir);
        if let Some(v) = self.cluster.job(JobId::new(id), now) {
            record.account = v.account;
            record.partition = v.partition;
            record.name = v.name;
            record.reason = v.reason.map(|r| r.name().to_string());
            record.time_limit = match v.time_limit {
                scheduler::TimeLimit::Seconds(s) => Some(s as i64),
                scheduler::TimeLimit::Unlimited => None,
            };
            record.gpus = v.gres;
        }
        record
    }

    async fn commit(&mut self, batch: Batch) {
        if batch.log.is_empty() && batch.changes.is_empty() {
            for r in batch.replies {
                r(true);
            }
            return;
        }
        let result = self
            .store
            .commit_scheduler_batch(&batch.log, &batch.changes)
            .await;
        let ok = result.is_ok();
        if let Err(e) = result {
            tracing::error!(error = %e, "committing a scheduler batch failed; rebuilding from the database");
            match rebuild(&self.store, &self.config).await {
                Ok((cluster, seq, entries)) => {
                    self.cluster = cluster;
                    self.seq = seq;
                    self.log_since_snapshot = entries;
                }
                Err(e) => tracing::error!(error = %e, "rebuilding the scheduler failed"),
            }
        }
        for r in batch.replies {
            r(ok);
        }
        if !ok {
            return;
        }
        for (job, allocation, start) in batch.launches {
            let user = self
                .meta
                .get(&job.job)
                .map(|m| m.user.clone())
                .unwrap_or_default();
            let tx = self.runner.launch(job, allocation, start, user);
            self.steps.insert(job, tx);
        }
        for (job, signal) in batch.signals {
            match self.steps.get(&job) {
                Some(tx) => {
                    let _ = tx.send(signal);
                }
                None => tracing::warn!(%job, ?signal, "no step to signal"),
            }
        }
    }

    async fn snapshot(&mut self) -> anyhow::Result<()> {
        let data = serde_json::to_string(&self.cluster.snapshot())?;
        self.store.save_scheduler_snapshot(self.seq, &data).await?;
        self.log_since_snapshot = 0;
        self.last_snapshot = Instant::now();
        Ok(())
    }
}

/// The cluster as the database has it: the snapshot, then every logged event.
/// Returns the cluster, the last sequence number and how many entries were replayed.
async fn rebuild(store: &Store, config: &ClusterConfig) -> anyhow::Result<(Cluster, i64, usize)> {
    let log = store.load_scheduler_log().await?;
    let (mut cluster, mut seq) = match &log.snapshot {
        Some((seq, data)) => {
            let snapshot: scheduler::Snapshot = serde_json::from_str(data)?;
            (Cluster::restore(snapshot)?, *seq)
        }
        None => (Cluster::new(config.clone())?, 0),
    };
    for (s, json) in &log.entries {
        let event: Event = serde_json::from_str(json)?;
        if let Err(e) = event.apply(&mut cluster) {
            tracing::warn!(seq = s, error = %e, "a logged scheduler event no longer applies");
        }
        seq = *s;
    }
    // Quotas come from the database (through logged events), not from the file.
    let config = ClusterConfig {
        limits: cluster.config().limits.clone(),
        ..config.clone()
    };
    if *cluster.config() != config {
        let active = cluster.squeue(&SqueueFilter::default(), now_secs()).len();
        if active == 0 {
            tracing::info!(
                "the cluster configuration changed; the queue is empty, so it applies now"
            );
            let old = std::mem::replace(&mut cluster, Cluster::new(config)?);
            cluster.keep_usage_of(&old);
        } else {
            tracing::warn!(
                active,
                "the cluster configuration changed while jobs are queued or running; the previous nodes and partitions stay in use until the queue is empty and the portal restarts"
            );
        }
    }
    Ok((cluster, seq, log.entries.len()))
}

fn ended(
    job: JobId,
    state: &str,
    now: Time,
    exit_code: Option<i64>,
    message: Option<String>,
) -> JobChange {
    JobChange::Ended {
        id: job.job as i64,
        task: job.task.map_or(-1, i64::from),
        state: state.to_string(),
        end_time: now * 1000,
        exit_code,
        exit_signal: None,
        reason: None,
        message,
    }
}

fn state_change(job: JobId, state: JobState, reason: Option<String>) -> JobChange {
    JobChange::State {
        id: job.job as i64,
        task: job.task.map_or(-1, i64::from),
        state: state.name().to_string(),
        reason,
    }
}
