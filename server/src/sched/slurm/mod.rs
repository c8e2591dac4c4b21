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

use scheduler::{LimitsConfig, NodeView, PartitionView};
use tokio::sync::{mpsc, Notify};

use self::backend::Backend;
use self::cli::SlurmCli;
use self::reconcile::{job_id, live_jobs, view_of_record, Entry, Jobs};
use super::handle::{Command, OptionJudge, SchedError, Scheduler};
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
    settings: SlurmSettings,
    metrics: crate::metrics::SlurmMetrics,
) -> anyhow::Result<(Scheduler, tokio::task::JoinHandle<anyhow::Result<()>>)> {
    let (tx, rx) = mpsc::channel(16_384);
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
        identities: crate::identities::Identities::new(store.clone(), true),
        store,
        settings,
        state: Arc::new(Mutex::new(state)),
        wake: Notify::new(),
        metrics,
    });
    tokio::spawn(backend::poll_loop(backend.clone()));
    // Ready at once: Slurm holds the queue.
    let (_ready_tx, ready) = tokio::sync::watch::channel(true);
    Ok((
        Scheduler::new(tx, OptionJudge::Slurm, ready),
        tokio::spawn(async move {
            serve(backend, rx).await;
            Ok(())
        }),
    ))
}

async fn serve(backend: Arc<Backend>, mut rx: mpsc::Receiver<Command>) {
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Command::Submit {
                owner,
                submission,
                workdir,
                reply,
            } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let _ = reply.send(b.submit(owner, *submission, workdir).await);
                });
            }
            Command::TestOnly {
                owner,
                submission,
                workdir,
                reply,
            } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let _ = reply.send(b.test_only(owner, *submission, workdir).await);
                });
            }
            Command::Control {
                who,
                job,
                action,
                reply,
            } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let _ = reply.send(b.control(&who, job, action).await);
                });
            }
            Command::Job { who, job, reply } => {
                let _ = reply.send(backend.job(&who, job));
            }
            Command::Usage { job, reply } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let _ = reply.send(b.usage(job).await);
                });
            }
            Command::Squeue { filter, reply } => {
                let _ = reply.send(Ok(backend.squeue(&filter)));
            }
            Command::SqueuePage {
                filter,
                offset,
                limit,
                reply,
            } => {
                let all = backend.squeue(&filter);
                let total = all.len() as u64;
                let page = all.into_iter().skip(offset).take(limit).collect();
                let _ = reply.send(Ok((page, total)));
            }
            // Nothing of Slurm's to write: its controller keeps the queue.
            Command::Shutdown { reply } => {
                let _ = reply.send(Ok(()));
            }
            Command::QueueCounts { reply } => {
                let mut counts = scheduler::QueueCounts::default();
                for view in backend.squeue(&scheduler::SqueueFilter::default()) {
                    counts.add(&view);
                }
                let _ = reply.send(Ok(counts));
            }
            // Slurm's controller computes these; atrium does not mirror them.
            Command::Priority { reply, .. } => {
                let _ = reply.send(Err(SchedError::NotSupported(
                    "priority factors are not available with the Slurm backend: use Slurm's own sprio"
                        .into(),
                )));
            }
            Command::Shares { reply } => {
                let _ = reply.send(Err(SchedError::NotSupported(
                    "fair-share figures are not available with the Slurm backend: use Slurm's own sshare"
                        .into(),
                )));
            }
            Command::Nodes { reply } => {
                let s = lock(&backend.state);
                let _ = reply.send(Ok((s.nodes.clone(), s.partitions.clone())));
            }
            // Slurm's associations enforce quotas; atrium keeps them to show.
            Command::Limits { limits, reply } => {
                lock(&backend.state).limits = *limits;
                let _ = reply.send(Ok(()));
            }
            Command::LimitUsage { owners, reply } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let (limits, live) = {
                        let s = lock(&b.state);
                        (s.limits.clone(), live_jobs(&s.jobs))
                    };
                    let each =
                        usage::limit_usages(&b.store, &limits, &live, &owners, now_secs()).await;
                    let _ = reply.send(Ok(each));
                });
            }
            Command::Node {
                node,
                command,
                reply,
            } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let _ = reply.send(b.set_node(&node, command).await);
                });
            }
            Command::StepEnded(_) => {}
        }
    }
}
