//! The internal backend's side of the handle: the messages its actor serves
//! ([`Command`], with the step ends its supervisors send into the same queue, so
//! that they are ordered with the requests), and [`ActorHandle`], the
//! [`SchedulerBackend`] that sends them. The actor stays the single writer of the
//! cluster: every operation is one message answered in its order.
//!
//! Owns: the message protocol of `sched/internal` (private to it).
//! Must not touch: the actor's state, the store, processes.

use std::path::PathBuf;

use scheduler::{
    JobId, JobOutcome, JobView, LimitUsage, LimitsConfig, NodeCommand, NodeView, Owner,
    PartitionView, QueueCounts, SqueueFilter, TestOnly,
};
use tokio::sync::{mpsc, oneshot};

use crate::sched::handle::{Control, JobUsage, Requester, SchedError, SchedulerBackend};
use crate::sched::submission::Submission;

pub(super) type Reply<T> = oneshot::Sender<Result<T, SchedError>>;

/// What the actor is asked; each carries where the answer goes.
pub(super) enum Command {
    Submit {
        owner: Owner,
        submission: Box<Submission>,
        workdir: PathBuf,
        reply: Reply<JobId>,
    },
    /// `sbatch --test-only`: what the submission would do; nothing is recorded.
    TestOnly {
        owner: Owner,
        submission: Box<Submission>,
        reply: Reply<TestOnly>,
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
    /// One page of `Squeue` and how many lines there are in all.
    SqueuePage {
        filter: SqueueFilter,
        offset: usize,
        limit: usize,
        reply: Reply<(Vec<JobView>, u64)>,
    },
    Nodes {
        reply: Reply<(Vec<NodeView>, Vec<PartitionView>)>,
    },
    QueueCounts {
        reply: Reply<QueueCounts>,
    },
    Priority {
        filter: scheduler::PriorityFilter,
        reply: Reply<scheduler::PriorityList>,
    },
    Shares {
        reply: Reply<scheduler::SharesView>,
    },
    /// Write a last snapshot and stop answering.
    Shutdown {
        reply: Reply<()>,
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
    /// A job step the portal supervises ended.
    StepEnded(StepEnd),
}

/// How a step ended, as the internal backend records it.
#[derive(Debug, Clone)]
pub(super) struct StepEnd {
    pub job: JobId,
    pub outcome: JobOutcome,
    /// The supervisor stopped it at its time limit.
    pub time_limit: bool,
    pub message: Option<String>,
}

/// The internal backend as the handle sees it: the actor's queue.
#[derive(Debug)]
pub(super) struct ActorHandle {
    pub tx: mpsc::Sender<Command>,
}

impl ActorHandle {
    async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Command) -> Result<T, SchedError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| SchedError::Unavailable)?;
        rx.await.map_err(|_| SchedError::Unavailable)?
    }

    /// Queue a command now, without waiting for room (ahead of every request that
    /// waits for the actor to be ready); the answer comes through the receiver.
    fn queue_first<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<oneshot::Receiver<Result<T, SchedError>>, SchedError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .try_send(make(reply))
            .map_err(|_| SchedError::Unavailable)?;
        Ok(rx)
    }
}

#[async_trait::async_trait]
impl SchedulerBackend for ActorHandle {
    async fn submit(
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

    async fn test_only(
        &self,
        owner: Owner,
        submission: Submission,
        _workdir: PathBuf,
    ) -> Result<TestOnly, SchedError> {
        self.ask(|reply| Command::TestOnly {
            owner,
            submission: Box::new(submission),
            reply,
        })
        .await
    }

    async fn control(&self, who: Requester, job: JobId, action: Control) -> Result<(), SchedError> {
        self.ask(|reply| Command::Control {
            who,
            job,
            action,
            reply,
        })
        .await
    }

    async fn job(&self, who: Requester, job: JobId) -> Result<JobView, SchedError> {
        self.ask(|reply| Command::Job { who, job, reply }).await
    }

    async fn squeue(&self, filter: SqueueFilter) -> Result<Vec<JobView>, SchedError> {
        self.ask(|reply| Command::Squeue { filter, reply }).await
    }

    async fn squeue_page(
        &self,
        filter: SqueueFilter,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<JobView>, u64), SchedError> {
        self.ask(|reply| Command::SqueuePage {
            filter,
            offset,
            limit,
            reply,
        })
        .await
    }

    async fn nodes(&self) -> Result<(Vec<NodeView>, Vec<PartitionView>), SchedError> {
        self.ask(|reply| Command::Nodes { reply }).await
    }

    async fn queue_counts(&self) -> Result<QueueCounts, SchedError> {
        self.ask(|reply| Command::QueueCounts { reply }).await
    }

    async fn priority(
        &self,
        filter: scheduler::PriorityFilter,
    ) -> Result<scheduler::PriorityList, SchedError> {
        self.ask(|reply| Command::Priority { filter, reply }).await
    }

    async fn shares(&self) -> Result<scheduler::SharesView, SchedError> {
        self.ask(|reply| Command::Shares { reply }).await
    }

    /// Its supervisors' samples are in the store.
    async fn usage(&self, _job: JobId) -> Result<Option<JobUsage>, SchedError> {
        Ok(None)
    }

    async fn set_limits(&self, limits: LimitsConfig) -> Result<(), SchedError> {
        self.ask(|reply| Command::Limits {
            limits: Box::new(limits),
            reply,
        })
        .await
    }

    fn set_limits_first(
        &self,
        limits: LimitsConfig,
    ) -> Result<oneshot::Receiver<Result<(), SchedError>>, SchedError> {
        self.queue_first(|reply| Command::Limits {
            limits: Box::new(limits),
            reply,
        })
    }

    async fn limit_usages(&self, owners: Vec<Owner>) -> Result<Vec<Vec<LimitUsage>>, SchedError> {
        self.ask(|reply| Command::LimitUsage { owners, reply })
            .await
    }

    async fn set_node(&self, node: String, command: NodeCommand) -> Result<(), SchedError> {
        self.ask(|reply| Command::Node {
            node,
            command,
            reply,
        })
        .await
    }

    async fn shutdown(&self) -> Result<(), SchedError> {
        let rx = self.queue_first(|reply| Command::Shutdown { reply })?;
        rx.await.map_err(|_| SchedError::Unavailable)?
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::watch;

    use super::*;
    use crate::sched::handle::{OptionJudge, Scheduler, RESTORE_WAIT};

    /// A handle on an actor's queue that nobody serves yet, waiting `wait` for
    /// readiness.
    fn restoring(wait: Duration) -> (Scheduler, mpsc::Receiver<Command>, watch::Sender<bool>) {
        let (tx, rx) = mpsc::channel(4);
        let (ready_tx, ready) = watch::channel(false);
        let handle =
            Scheduler::new(Arc::new(ActorHandle { tx }), OptionJudge::Atrium, ready).waiting(wait);
        (handle, rx, ready_tx)
    }

    #[tokio::test]
    async fn a_request_to_a_scheduler_still_restoring_is_refused_unsent_after_the_wait() {
        let (handle, mut rx, _ready) = restoring(Duration::from_millis(20));
        assert!(!handle.is_ready());
        let answer = handle.nodes().await;
        assert!(matches!(answer, Err(SchedError::Restoring)), "{answer:?}");
        assert!(rx.try_recv().is_err(), "a refused request is never sent");
    }

    #[tokio::test]
    async fn a_request_waits_for_the_restore_and_startup_commands_go_first() {
        let (handle, mut rx, ready) = restoring(RESTORE_WAIT);
        let limits = handle
            .set_limits_first(LimitsConfig::default())
            .expect("queued");
        let asking = tokio::spawn({
            let handle = handle.clone();
            async move { handle.nodes().await }
        });
        // Nothing but the startup command is queued until the scheduler is ready.
        assert!(matches!(rx.recv().await, Some(Command::Limits { .. })));
        assert!(rx.try_recv().is_err());
        ready.send(true).expect("ready");
        match rx.recv().await {
            Some(Command::Nodes { reply }) => {
                let _ = reply.send(Ok((Vec::new(), Vec::new())));
            }
            _ => panic!("expected the waiting request"),
        }
        assert!(asking.await.expect("task").is_ok());
        drop(limits);
    }

    #[tokio::test]
    async fn a_scheduler_that_failed_to_restore_is_unavailable() {
        let (handle, _rx, ready) = restoring(RESTORE_WAIT);
        drop(ready);
        assert!(matches!(handle.nodes().await, Err(SchedError::Unavailable)));
    }
}
