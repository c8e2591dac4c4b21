//! The internal scheduler backend (`[scheduler] backend = "internal"`): one actor
//! task owns the `scheduler::Cluster` (the only writer), logs every input durably
//! before it answers or acts, replays the log at startup, starts a step supervisor
//! for every job it places, re-adopts running steps after a restart, and hands the
//! notices of durable changes (`--mail-type`) to the notifier.
//!
//! - `decide.rs`: what each command, step end, pass and purge does (pure, tested).
//! - `actor.rs`: the loop around it: queue, batches, store, snapshots, steps.
//! - `event.rs`: the log entries; `steps.rs`: the step tasks.
//!
//! Owns: atrium's own cluster and its job steps.
//! Must not touch: the Slurm backend (`sched::slurm`), HTTP types, SQL (the store
//! does it), process details (`launch`).

mod actor;
mod decide;
mod event;
mod login_env;
mod steps;

use scheduler::ClusterConfig;
use tokio::sync::mpsc;

pub use steps::{JobPortal, LaunchSettings};

use super::handle::{OptionJudge, Scheduler};
use crate::notifications::Notifier;
use crate::store::Store;

/// Rebuild the cluster from the database, re-adopt running steps and start the
/// actor; the handle answers through it.
pub async fn start(
    store: Store,
    config: ClusterConfig,
    settings: LaunchSettings,
    notifier: Notifier,
) -> anyhow::Result<(Scheduler, tokio::task::JoinHandle<()>)> {
    let (tx, rx) = mpsc::channel(16_384);
    let runner = steps::StepRunner::new(settings, store.clone(), tx.clone());
    let mut actor = actor::Actor::load(store, config, runner, notifier).await?;
    actor.adopt_steps().await?;
    let handle = tokio::spawn(actor.run(rx));
    Ok((Scheduler::new(tx, OptionJudge::Atrium), handle))
}
