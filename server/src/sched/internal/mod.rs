//! The internal scheduler backend (`[scheduler] backend = "internal"`): one actor
//! task owns the `scheduler::Cluster` (the only writer), logs every input durably
//! before it answers or acts, rebuilds its state at startup from the last snapshot
//! and the log after it, starts a step supervisor for every job it places, re-adopts
//! running steps after a restart, and hands the notices of durable changes
//! (`--mail-type`) to the notifier.
//!
//! The handle is returned at once and the state is rebuilt in the background: the
//! portal serves (pages, logins, the sessions' proxy) while a large queue is read
//! back, and requests to the scheduler wait for it (`handle::RESTORE_WAIT`).
//!
//! - `decide.rs`: what each command, step end, pass and purge does (pure, tested).
//! - `actor.rs`: the loop around it: queue, batches, store, snapshots, steps.
//! - `restore.rs`: the snapshot's format and the rebuild from snapshot and log.
//! - `event.rs`: the log entries; `steps.rs`: the step tasks.
//!
//! Owns: atrium's own cluster and its job steps.
//! Must not touch: the Slurm backend (`sched::slurm`), HTTP types, SQL (the store
//! does it), process details (`launch`).

mod actor;
mod command;
mod decide;
mod event;
mod login_env;
mod restore;
mod steps;

use scheduler::ClusterConfig;
use tokio::sync::{mpsc, watch};

pub use decide::MIN_JOB_AGE_SECS;
pub use steps::{JobPortal, LaunchSettings};

use super::handle::{OptionJudge, Scheduler};
use crate::notifications::Notifier;
use crate::store::Store;

/// Start the actor: the handle is returned at once; the task rebuilds the cluster from
/// the database, re-adopts running steps, then says it is ready and serves. The task
/// ends with an error if the state cannot be rebuilt (the portal must not go on
/// without its queue).
pub fn start(
    store: Store,
    identities: crate::identities::Identities,
    config: ClusterConfig,
    settings: LaunchSettings,
    notifier: Notifier,
    metrics: crate::metrics::SchedulerMetrics,
) -> (Scheduler, tokio::task::JoinHandle<anyhow::Result<()>>) {
    let (tx, rx) = mpsc::channel(16_384);
    let (ready_tx, ready) = watch::channel(false);
    let runner = steps::StepRunner::new(
        settings,
        store.clone(),
        identities,
        tx.clone(),
        metrics.usage.clone(),
    );
    let task = tokio::spawn(async move {
        let mut actor = actor::Actor::load(store, config, runner, notifier, metrics).await?;
        actor.adopt_steps().await?;
        let _ = ready_tx.send(true);
        actor.run(rx).await;
        Ok(())
    });
    let backend = std::sync::Arc::new(command::ActorHandle { tx });
    (Scheduler::new(backend, OptionJudge::Atrium, ready), task)
}
