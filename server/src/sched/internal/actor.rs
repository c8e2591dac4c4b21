//! The internal scheduler's actor: the IO around [`Decider`]. A loop takes every
//! queued command, lets the decider apply them to the cluster in order, runs one
//! scheduling pass, writes the batch (log entries and job rows) in a single
//! transaction, and only then answers, launches and signals. Replies to read-only
//! commands go out at once. A failed commit rebuilds the cluster from the database,
//! so memory never runs ahead of what is durable.
//!
//! Owns: the command queue, batching, the store writes, snapshots, the step tasks'
//! signal senders, handing the batch's notices to the notifier, the wall clock.
//! Must not touch: what a command means (`decide.rs`), the Slurm backend, HTTP types.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use scheduler::{Cluster, ClusterConfig, JobId, JobState, SqueueFilter};
use tokio::sync::mpsc;

use super::decide::{Batch, Decider, JobMeta};
use super::event::Event;
use super::steps::{StepRunner, StepSignal};
use crate::notifications::Notifier;
use crate::sched::handle::Command;
use crate::store::Store;
use crate::util::now_secs;

/// Most commands taken into one batch (one transaction).
const MAX_BATCH: usize = 4096;
/// Write a snapshot (and drop the log it covers) when the log is this long …
const SNAPSHOT_EVERY_ENTRIES: usize = 100_000;
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
    last_purge: Instant,
    steps: HashMap<JobId, mpsc::UnboundedSender<StepSignal>>,
    runner: StepRunner,
    notifier: Notifier,
}

impl Actor {
    /// Rebuild the cluster from the database and write a fresh snapshot.
    pub(super) async fn load(
        store: Store,
        config: ClusterConfig,
        runner: StepRunner,
        notifier: Notifier,
    ) -> anyhow::Result<Actor> {
        let (cluster, seq, entries) = rebuild(&store, &config).await?;
        let log = store.load_scheduler_log().await?;
        let mut next_id = (log.max_job_id.max(0) as u64) + 1;
        while cluster.job(JobId::new(next_id), 0).is_some() {
            next_id += 1;
        }
        let mut actor = Actor {
            decider: Decider::new(cluster, seq, next_id),
            config,
            store,
            log_since_snapshot: entries,
            last_snapshot: Instant::now(),
            last_purge: Instant::now(),
            steps: HashMap::new(),
            runner,
            notifier,
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
        let meta = &mut self.decider.meta;
        for r in rows.iter().chain(arrays.iter()).filter(|r| r.task == -1) {
            meta.insert(r.id as u64, JobMeta::from_record(r));
        }
        for r in rows.iter().filter(|r| r.task >= 0) {
            if let Entry::Vacant(slot) = meta.entry(r.id as u64) {
                if let Ok(parent) = self.store.job(r.id, -1).await {
                    slot.insert(JobMeta::from_record(&parent));
                }
            }
        }
        Ok(())
    }

    /// Find every step the database says is running and watch it again; launch
    /// the ones whose supervisor never started.
    pub(super) async fn adopt_steps(&mut self) -> anyhow::Result<()> {
        for r in self.store.running_jobs().await? {
            let job = if r.task >= 0 {
                JobId::task(r.id as u64, r.task as u32)
            } else {
                JobId::new(r.id as u64)
            };
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
        loop {
            let mut batch = Batch::default();
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => self.handle(cmd, &mut batch),
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
            while taken < MAX_BATCH {
                match rx.try_recv() {
                    Ok(cmd) => self.handle(cmd, &mut batch),
                    Err(_) => break,
                }
                taken += 1;
            }
            if batch.touched {
                self.decider.pass(&mut batch, now_secs());
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

    /// Take one command into `batch`; the decider says what it does.
    fn handle(&mut self, cmd: Command, batch: &mut Batch) {
        if let Command::StepEnded(end) = &cmd {
            self.steps.remove(&end.job);
        }
        self.decider.handle(cmd, batch, now_secs());
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
                    self.decider.cluster = cluster;
                    self.decider.seq = seq;
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
        for notice in batch.notices {
            self.notifier.send(notice);
        }
        for (job, allocation, start) in batch.launches {
            let user = self.decider.user_of(job);
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
        let data = serde_json::to_string(&self.decider.cluster.snapshot())?;
        self.store
            .save_scheduler_snapshot(self.decider.seq, &data)
            .await?;
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
