//! The internal scheduler's actor: the IO around [`Decider`]. A loop takes every
//! queued command, lets the decider apply them to the cluster in order, runs one
//! scheduling pass, writes the batch (log entries and job rows) in a single
//! transaction, and only then answers, launches and signals. Replies to read-only
//! commands go out at once. A failed commit rebuilds the cluster from the database,
//! so memory never runs ahead of what is durable.
//!
//! Snapshots (`restore.rs`) are taken on the actor (the jobs' requests and meta are
//! shared, so it is a cheap copy) and encoded and written by a task of their own, one
//! at a time, so the queue keeps moving; a last one is written when the portal stops.
//!
//! Owns: the command queue, batching, the store writes, snapshots, the step tasks'
//! signal senders, handing the batch's notices to the notifier, the wall clock.
//! Must not touch: what a command means (`decide.rs`), the Slurm backend, HTTP types.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use scheduler::{ClusterConfig, JobId, JobState};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::command::{Command, Reply};
use super::decide::{Batch, Decider};
use super::restore::{self, Taken};
use super::steps::{StepRunner, StepSignal};
use crate::metrics::{DecisionKind, SchedulerMetrics};
use crate::notifications::Notifier;
use crate::sched::handle::SchedError;
use crate::store::Store;
use crate::util::now_secs;

/// Most commands taken into one batch (one transaction).
const MAX_BATCH: usize = 4096;
/// Write a snapshot (and drop the log it covers) when the log is this long (a
/// restore replays at most about this many entries) …
const SNAPSHOT_EVERY_ENTRIES: usize = 50_000;
/// … or this old and not empty.
const SNAPSHOT_EVERY: Duration = Duration::from_secs(300);
/// How often to look for jobs to forget.
const PURGE_EVERY: Duration = Duration::from_secs(60);

pub(super) struct Actor {
    decider: Decider,
    config: ClusterConfig,
    store: Store,
    log_since_snapshot: usize,
    last_snapshot: Instant,
    /// The snapshot being encoded and written, if any.
    snapshot_task: Option<JoinHandle<()>>,
    last_purge: Instant,
    steps: HashMap<JobId, mpsc::UnboundedSender<StepSignal>>,
    runner: StepRunner,
    notifier: Notifier,
    metrics: SchedulerMetrics,
}

impl Actor {
    /// Rebuild the cluster from the database; a snapshot is written in the background
    /// when a log was replayed (or the snapshot was of an older format).
    pub(super) async fn load(
        store: Store,
        config: ClusterConfig,
        runner: StepRunner,
        notifier: Notifier,
        metrics: SchedulerMetrics,
    ) -> anyhow::Result<Actor> {
        let restored = restore::rebuild(&store, &config).await?;
        let mut next_id = (restored.max_job_id.max(0) as u64) + 1;
        while restored.cluster.job(JobId::new(next_id), 0).is_some() {
            next_id += 1;
        }
        let mut decider = Decider::new(restored.cluster, restored.seq, next_id);
        decider.meta = restored.meta;
        let mut actor = Actor {
            decider,
            config,
            store,
            log_since_snapshot: restored.entries,
            last_snapshot: Instant::now(),
            snapshot_task: None,
            last_purge: Instant::now(),
            steps: HashMap::new(),
            runner,
            notifier,
            metrics,
        };
        if restored.entries > 0 || !restored.current_format {
            actor.start_snapshot();
        }
        Ok(actor)
    }

    /// Find every step the database says is running and watch it again; launch
    /// the ones whose supervisor never started.
    pub(super) async fn adopt_steps(&mut self) -> anyhow::Result<()> {
        for r in self.store.running_jobs().await? {
            let job = crate::store::job_id(r.id, r.task);
            let running = self
                .decider
                .cluster
                .job(job, now_secs())
                .is_some_and(|v| matches!(v.state, JobState::Running | JobState::Completing));
            if !running {
                tracing::error!(%job, "the database says running but the scheduler does not; leaving it to the step's state file");
            }
            let completing = self
                .decider
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
                    let start = self.decider.job_start(
                        job,
                        &allocation,
                        r.start_time.unwrap_or(0),
                        now_secs(),
                    );
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

    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stopping = None;
        while stopping.is_none() {
            let mut batch = Batch::default();
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => stopping = self.handle(cmd, &mut batch),
                    None => break,
                },
                _ = tick.tick() => {
                    batch.touched = self.decider.has_open_jobs();
                    if self.last_purge.elapsed() >= PURGE_EVERY {
                        self.last_purge = Instant::now();
                        self.decider.purge(&mut batch, now_secs());
                    }
                }
            }
            let mut taken = 1;
            while taken < MAX_BATCH && stopping.is_none() {
                match rx.try_recv() {
                    Ok(cmd) => stopping = self.handle(cmd, &mut batch),
                    Err(_) => break,
                }
                taken += 1;
            }
            if batch.touched {
                let wall_ms = crate::util::now_ms();
                self.decider.wall_ms = Some(wall_ms);
                let started = Instant::now();
                self.decider.pass(&mut batch, wall_ms.div_euclid(1000));
                self.metrics.pass(started.elapsed().as_secs_f64());
            }
            self.commit(batch).await;
            if self.log_since_snapshot >= SNAPSHOT_EVERY_ENTRIES
                || (self.log_since_snapshot > 0 && self.last_snapshot.elapsed() >= SNAPSHOT_EVERY)
            {
                self.start_snapshot();
            }
        }
        // The last snapshot: after the one in flight, if any.
        if let Some(task) = self.snapshot_task.take() {
            let _ = task.await;
        }
        let taken = Taken::new(&self.decider.cluster, &self.decider.meta);
        let result = write_snapshot(self.store.clone(), self.decider.seq, taken).await;
        if let Err(e) = &result {
            tracing::error!(error = %e, "writing the scheduler snapshot failed");
        }
        if let Some(reply) = stopping {
            let _ = reply.send(result.map_err(|_| SchedError::Unavailable));
        }
    }

    /// Start writing a snapshot of the state now, unless one is being written.
    fn start_snapshot(&mut self) {
        if let Some(task) = &self.snapshot_task {
            if !task.is_finished() {
                return;
            }
        }
        let taken = Taken::new(&self.decider.cluster, &self.decider.meta);
        let (store, seq) = (self.store.clone(), self.decider.seq);
        self.snapshot_task = Some(tokio::spawn(async move {
            if let Err(e) = write_snapshot(store, seq, taken).await {
                // The log it would have replaced stays: nothing is lost.
                tracing::error!(error = %e, "writing the scheduler snapshot failed");
            }
        }));
        self.log_since_snapshot = 0;
        self.last_snapshot = Instant::now();
    }

    /// Take one command into `batch`; the decider says what it does. A shutdown is
    /// the actor's own: it returns where to answer once the last snapshot is written.
    fn handle(&mut self, cmd: Command, batch: &mut Batch) -> Option<Reply<()>> {
        match cmd {
            Command::Shutdown { reply } => return Some(reply),
            Command::StepEnded(ref end) => {
                self.steps.remove(&end.job);
                batch.ended_steps.push(end.job);
            }
            _ => {}
        }
        // The wall clock when the command is taken: what it changes is stamped to
        // the millisecond (an end as well as a start).
        let wall_ms = crate::util::now_ms();
        self.decider.wall_ms = Some(wall_ms);
        self.decider.handle(cmd, batch, wall_ms.div_euclid(1000));
        None
    }

    async fn commit(&mut self, batch: Batch) {
        self.log_since_snapshot += batch.recorded;
        if batch.log.is_empty() && batch.changes.is_empty() {
            for r in batch.replies {
                r(true);
            }
            for notice in batch.notices {
                self.notifier.send(notice);
            }
            self.runner.remove(batch.ended_steps);
            // Signals that change nothing in the queue (`scancel --signal`).
            self.relay(batch.signals);
            return;
        }
        let started = Instant::now();
        let result = self
            .store
            .commit_scheduler_batch(&batch.log, &batch.changes)
            .await;
        self.metrics.committed(started.elapsed().as_secs_f64());
        let ok = result.is_ok();
        if let Err(e) = result {
            tracing::error!(error = %e, "committing a scheduler batch failed; rebuilding from the database");
            match restore::rebuild(&self.store, &self.config).await {
                Ok(restored) => {
                    self.decider.cluster = restored.cluster;
                    self.decider.seq = restored.seq;
                    self.decider.meta = restored.meta;
                    self.log_since_snapshot = restored.entries;
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
        for notice in batch.notices {
            self.notifier.send(notice);
        }
        // Their ends are durable: nothing needs their directories any more (a restart
        // adopts only the steps of running jobs).
        self.runner.remove(batch.ended_steps);
        self.metrics
            .decided(DecisionKind::Start, batch.launches.len());
        self.metrics
            .decided(DecisionKind::Signal, batch.signals.len());
        for (job, allocation, start) in batch.launches {
            if let Some(submitted) = self
                .decider
                .cluster
                .job(job, now_secs())
                .map(|v| v.submit_time)
            {
                self.metrics
                    .waited((start.start_time as f64 / 1000.0) - submitted as f64);
            }
            let user = self.decider.user_of(job);
            let tx = self.runner.launch(job, allocation, start, user);
            self.steps.insert(job, tx);
        }
        self.relay(batch.signals);
    }

    /// Hand each signal to its step's watcher.
    fn relay(&self, signals: Vec<(JobId, StepSignal)>) {
        for (job, signal) in signals {
            match self.steps.get(&job) {
                Some(tx) => {
                    let _ = tx.send(signal);
                }
                None => tracing::warn!(%job, ?signal, "no step to signal"),
            }
        }
    }
}

/// Encode a snapshot (on a blocking thread: it is the size of the queue) and write it.
async fn write_snapshot(store: Store, seq: i64, taken: Taken) -> anyhow::Result<()> {
    let started = Instant::now();
    let data = tokio::task::spawn_blocking(move || restore::encode(taken)).await??;
    let encoded = started.elapsed();
    store
        .save_scheduler_snapshot(seq, restore::FORMAT, &data)
        .await?;
    tracing::info!(
        seq,
        bytes = data.len(),
        encode_ms = encoded.as_millis() as u64,
        total_ms = started.elapsed().as_millis() as u64,
        "the scheduler snapshot is written"
    );
    Ok(())
}
