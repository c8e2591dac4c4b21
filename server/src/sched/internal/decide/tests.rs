//! Unit tests of the internal scheduler's decisions: a [`Decider`] on a small cluster,
//! commands with in-memory reply channels, `now` given by the test. No store, no
//! runtime, no clock.

use std::collections::BTreeMap;

use scheduler::{ClusterConfig, NodeConfig, PartitionConfig, SqueueFilter};
use tokio::sync::oneshot;

use super::*;

const T0: Time = 1_700_000_000;

/// One node with 8 CPUs, in one default partition with a one-hour default limit.
fn decider() -> Decider {
    let mut partition = PartitionConfig::new("cpu", vec!["n01".into()]);
    partition.default = true;
    partition.default_time_secs = Some(3600);
    let config = ClusterConfig {
        nodes: vec![NodeConfig {
            name: "n01".into(),
            cpus: 8,
            memory_mb: 32 * 1024,
            features: Vec::new(),
            gpus: Vec::new(),
        }],
        partitions: vec![partition],
        ..Default::default()
    };
    let cluster = Cluster::new(config).expect("a valid cluster");
    Decider::new(cluster, 0, 1)
}

fn submission(script: &str) -> Submission {
    Submission {
        script: script.into(),
        request: scheduler::parse_script(script).expect("a valid script"),
        options: Vec::new(),
        typed: false,
        environment: BTreeMap::new(),
        submit_dir: None,
        container: None,
        benchmark: None,
    }
}

fn user(name: &str) -> Requester {
    Requester {
        user: name.into(),
        admin: false,
    }
}

fn admin() -> Requester {
    Requester {
        user: "root".into(),
        admin: true,
    }
}

/// Run the replies of `batch` as if it was written (`ok`) or not.
fn written(batch: Batch, ok: bool) {
    for r in batch.replies {
        r(ok);
    }
}

/// What a reply channel got, if anything yet.
fn answer<T>(rx: &mut oneshot::Receiver<Result<T, SchedError>>) -> Option<Result<T, SchedError>> {
    rx.try_recv().ok()
}

/// Submit `script` as `owner` at `now` into `batch`; the receiver of its reply.
fn submit_into(
    d: &mut Decider,
    batch: &mut Batch,
    owner: &str,
    script: &str,
    now: Time,
) -> oneshot::Receiver<Result<JobId, SchedError>> {
    let (reply, rx) = oneshot::channel();
    d.handle(
        Command::Submit {
            owner: Owner::user(owner),
            submission: Box::new(submission(script)),
            workdir: PathBuf::from(format!("/home/{owner}")),
            reply,
        },
        batch,
        now,
    );
    rx
}

/// Submit and write the batch; the job's id.
fn submit(d: &mut Decider, owner: &str, script: &str, now: Time) -> JobId {
    let mut batch = Batch::default();
    let mut rx = submit_into(d, &mut batch, owner, script, now);
    written(batch, true);
    match answer(&mut rx) {
        Some(Ok(job)) => job,
        other => panic!("submission not accepted: {other:?}"),
    }
}

/// A scheduling pass at `now`, written; its batch minus the replies.
fn pass(d: &mut Decider, now: Time) -> Batch {
    let mut batch = Batch::default();
    d.pass(&mut batch, now);
    batch
}

/// Control `job` as `who` at `now`: the batch and the answer once written.
fn control(
    d: &mut Decider,
    who: Requester,
    job: JobId,
    action: Control,
    now: Time,
) -> (Batch, Option<Result<(), SchedError>>) {
    let (reply, mut rx) = oneshot::channel();
    let mut batch = Batch::default();
    d.handle(
        Command::Control {
            who,
            job,
            action,
            reply,
        },
        &mut batch,
        now,
    );
    let replies = std::mem::take(&mut batch.replies);
    for r in replies {
        r(true);
    }
    (batch, answer(&mut rx))
}

fn step_end(
    d: &mut Decider,
    job: JobId,
    outcome: JobOutcome,
    time_limit: bool,
    now: Time,
) -> Batch {
    let mut batch = Batch::default();
    d.handle(
        Command::StepEnded(StepEnd {
            job,
            outcome,
            time_limit,
            message: None,
        }),
        &mut batch,
        now,
    );
    batch
}

fn state_of(d: &Decider, job: JobId, now: Time) -> Option<JobState> {
    d.cluster.job(job, now).map(|v| v.state)
}

const SLEEP: &str = "#!/bin/bash\n#SBATCH -J sleepy\nsleep 60\n";

#[test]
fn a_submission_gets_the_next_id_is_logged_and_answered_once_durable() {
    let mut d = decider();
    let mut batch = Batch::default();
    let mut first = submit_into(&mut d, &mut batch, "ada", SLEEP, T0);
    let mut second = submit_into(&mut d, &mut batch, "ada", SLEEP, T0);
    // Nothing is answered before the batch is written.
    assert!(answer(&mut first).is_none());
    assert_eq!(batch.log.len(), 2);
    assert_eq!(batch.recorded, 2);
    assert_eq!(batch.log[0].0, 1);
    assert_eq!(batch.log[1].0, 2);
    assert!(batch.log[0].1.contains("\"event\":\"submit\""));
    assert!(batch.touched);
    let ids: Vec<i64> = batch
        .changes
        .iter()
        .map(|c| match c {
            JobChange::Submitted(r) => r.id,
            other => panic!("not a submission: {other:?}"),
        })
        .collect();
    assert_eq!(ids, vec![1, 2]);
    if let JobChange::Submitted(r) = &batch.changes[0] {
        // What the cluster resolved is in the row.
        assert_eq!(r.partition, "cpu");
        assert_eq!(r.name, "sleepy");
        assert_eq!(r.time_limit, Some(3600));
        assert_eq!(r.state, "PENDING");
    }
    written(batch, true);
    assert_eq!(answer(&mut first).and_then(|r| r.ok()), Some(JobId::new(1)));
    assert_eq!(
        answer(&mut second).and_then(|r| r.ok()),
        Some(JobId::new(2))
    );
    assert_eq!(d.next_id, 3);
    assert_eq!(d.seq, 2);
    assert!(d.has_open_jobs());
    assert_eq!(d.user_of(JobId::new(1)), "ada");
}

#[test]
fn a_submission_not_written_is_unavailable() {
    let mut d = decider();
    let mut batch = Batch::default();
    let mut rx = submit_into(&mut d, &mut batch, "ada", SLEEP, T0);
    written(batch, false);
    assert!(matches!(
        answer(&mut rx),
        Some(Err(SchedError::Unavailable))
    ));
}

#[test]
fn a_submission_the_cluster_refuses_is_rejected_at_once_and_not_logged() {
    let mut d = decider();
    let mut batch = Batch::default();
    let mut rx = submit_into(
        &mut d,
        &mut batch,
        "ada",
        "#!/bin/bash\n#SBATCH -p nowhere\ntrue\n",
        T0,
    );
    assert!(matches!(
        answer(&mut rx),
        Some(Err(SchedError::Rejected {
            field: "partition",
            ..
        }))
    ));
    assert!(batch.log.is_empty());
    assert!(batch.changes.is_empty());
    assert_eq!(d.next_id, 1);
}

#[test]
fn a_pass_starts_a_pending_job_and_launches_its_step() {
    let mut d = decider();
    let job = submit(&mut d, "ada", SLEEP, T0);
    let batch = pass(&mut d, T0 + 1);
    assert!(batch.log[0].1.contains("\"event\":\"pass\""));
    assert_eq!(batch.launches.len(), 1);
    let (launched, allocation, start) = &batch.launches[0];
    assert_eq!(*launched, job);
    assert_eq!(allocation.nodes[0].node, "n01");
    assert_eq!(start.start_time, (T0 + 1) * 1000);
    assert_eq!(start.nodelist, "n01");
    assert_eq!(start.time_limit, Some(3600));
    assert_eq!(start.stdout_path, "/home/ada/slurm-1.out");
    assert!(matches!(&batch.changes[..], [JobChange::Started(s)] if **s == *start));
    assert_eq!(state_of(&d, job, T0 + 1), Some(JobState::Running));
}

#[test]
fn cancelling_a_pending_job_ends_it_at_once_without_a_signal() {
    let mut d = decider();
    let job = submit(&mut d, "ada", "#!/bin/bash\n#SBATCH -H\ntrue\n", T0);
    let (batch, answer) = control(&mut d, user("ada"), job, Control::Cancel, T0 + 5);
    assert!(matches!(answer, Some(Ok(()))));
    assert!(batch.signals.is_empty());
    assert_eq!(
        batch.changes,
        vec![JobChange::Ended {
            id: 1,
            task: -1,
            state: "CANCELLED".into(),
            end_time: (T0 + 5) * 1000,
            exit_code: None,
            exit_signal: None,
            reason: None,
            message: None,
        }]
    );
    assert_eq!(state_of(&d, job, T0 + 5), Some(JobState::Cancelled));
}

#[test]
fn cancelling_a_running_job_signals_its_step_and_ends_it_when_the_step_ends() {
    let mut d = decider();
    let job = submit(&mut d, "ada", SLEEP, T0);
    pass(&mut d, T0 + 1);
    let (batch, answer) = control(&mut d, user("ada"), job, Control::Cancel, T0 + 2);
    assert!(matches!(answer, Some(Ok(()))));
    assert_eq!(batch.signals, vec![(job, StepSignal::Cancel)]);
    assert!(batch.changes.is_empty());
    assert_eq!(state_of(&d, job, T0 + 2), Some(JobState::Completing));

    let batch = step_end(&mut d, job, JobOutcome::Signaled(15), false, T0 + 3);
    assert!(matches!(
        &batch.changes[..],
        [JobChange::Ended { state, exit_signal: Some(15), exit_code: None, .. }] if state == "CANCELLED"
    ));
    assert!(!d.has_open_jobs());
}

#[test]
fn hold_and_release_write_the_pending_state_with_its_reason() {
    let mut d = decider();
    // Without a pass, the job stays pending.
    let job = submit(&mut d, "ada", SLEEP, T0);
    let (batch, answer) = control(&mut d, user("ada"), job, Control::Hold, T0 + 1);
    assert!(matches!(answer, Some(Ok(()))));
    assert!(batch.log[0].1.contains("\"event\":\"hold\""));
    assert_eq!(
        batch.changes,
        vec![JobChange::State {
            id: 1,
            task: -1,
            state: "PENDING".into(),
            reason: Some("JobHeldUser".into()),
        }]
    );
    // Held, a pass leaves it alone.
    assert!(pass(&mut d, T0 + 2).launches.is_empty());
    let (batch, answer) = control(&mut d, user("ada"), job, Control::Release, T0 + 3);
    assert!(matches!(answer, Some(Ok(()))));
    assert!(matches!(
        &batch.changes[..],
        [JobChange::State { id: 1, task: -1, state, .. }] if state == "PENDING"
    ));
    // Released, the next pass starts it.
    assert_eq!(pass(&mut d, T0 + 4).launches.len(), 1);
}

#[test]
fn a_user_cannot_release_an_administrators_hold() {
    let mut d = decider();
    let job = submit(&mut d, "ada", SLEEP, T0);
    let (_, answer) = control(&mut d, admin(), job, Control::Hold, T0 + 1);
    assert!(matches!(answer, Some(Ok(()))));
    let (batch, answer) = control(&mut d, user("ada"), job, Control::Release, T0 + 2);
    assert!(matches!(answer, Some(Err(SchedError::Conflict(_)))));
    assert!(batch.log.is_empty() && batch.changes.is_empty());
    let (_, answer) = control(&mut d, admin(), job, Control::Release, T0 + 3);
    assert!(matches!(answer, Some(Ok(()))));
}

#[test]
fn holding_a_running_job_or_requeueing_a_pending_one_is_a_conflict() {
    let mut d = decider();
    let running = submit(&mut d, "ada", SLEEP, T0);
    pass(&mut d, T0 + 1);
    let pending = submit(&mut d, "ada", SLEEP, T0 + 1);
    for (job, action) in [(running, Control::Hold), (pending, Control::Requeue)] {
        let (batch, answer) = control(&mut d, user("ada"), job, action.clone(), T0 + 2);
        assert!(
            matches!(answer, Some(Err(SchedError::Conflict(_)))),
            "{action:?} of {job}"
        );
        assert!(batch.log.is_empty() && batch.changes.is_empty() && batch.signals.is_empty());
    }
}

#[test]
fn requeueing_a_running_job_signals_its_step_and_the_end_puts_it_back_to_pending() {
    let mut d = decider();
    let job = submit(&mut d, "ada", SLEEP, T0);
    pass(&mut d, T0 + 1);
    let (batch, answer) = control(&mut d, user("ada"), job, Control::Requeue, T0 + 2);
    assert!(matches!(answer, Some(Ok(()))));
    assert_eq!(batch.signals, vec![(job, StepSignal::Cancel)]);
    let batch = step_end(&mut d, job, JobOutcome::Signaled(15), false, T0 + 3);
    assert_eq!(
        batch.changes,
        vec![JobChange::State {
            id: 1,
            task: -1,
            state: "PENDING".into(),
            reason: None,
        }]
    );
    assert!(d.has_open_jobs());
}

#[test]
fn another_users_job_is_not_found_and_an_administrator_sees_it() {
    let mut d = decider();
    let job = submit(&mut d, "ada", SLEEP, T0);
    for action in [
        Control::Cancel,
        Control::Hold,
        Control::Release,
        Control::Requeue,
    ] {
        let (batch, got) = control(&mut d, user("bob"), job, action.clone(), T0 + 1);
        assert!(matches!(got, Some(Err(SchedError::NotFound))), "{action:?}");
        assert!(batch.log.is_empty() && batch.changes.is_empty());
    }
    let missing = JobId::new(99);
    let (_, got) = control(&mut d, admin(), missing, Control::Cancel, T0 + 1);
    assert!(matches!(got, Some(Err(SchedError::NotFound))));

    let view = |d: &mut Decider, who: Requester| {
        let (reply, mut rx) = oneshot::channel();
        let mut batch = Batch::default();
        d.handle(Command::Job { who, job, reply }, &mut batch, T0 + 1);
        // Read-only: answered at once, nothing to write.
        assert!(batch.log.is_empty() && batch.replies.is_empty());
        answer(&mut rx)
    };
    assert!(matches!(
        view(&mut d, user("bob")),
        Some(Err(SchedError::NotFound))
    ));
    assert!(matches!(view(&mut d, admin()), Some(Ok(v)) if v.user == "ada"));
    assert!(matches!(view(&mut d, user("ada")), Some(Ok(v)) if v.id == job));
}

#[test]
fn a_step_end_records_the_outcome() {
    let cases = [
        (JobOutcome::Exited(0), "COMPLETED", Some(0), None),
        (JobOutcome::Exited(3), "FAILED", Some(3), None),
        (JobOutcome::OutOfMemory, "OUT_OF_MEMORY", None, Some(9)),
    ];
    for (outcome, want_state, want_code, want_signal) in cases {
        let mut d = decider();
        let job = submit(&mut d, "ada", SLEEP, T0);
        pass(&mut d, T0 + 1);
        let batch = step_end(&mut d, job, outcome, false, T0 + 10);
        assert!(batch.log[0].1.contains("\"event\":\"finished\""));
        match &batch.changes[..] {
            [JobChange::Ended {
                id: 1,
                task: -1,
                state,
                end_time,
                exit_code,
                exit_signal,
                ..
            }] => {
                assert_eq!(state, want_state, "{outcome:?}");
                assert_eq!(*end_time, (T0 + 10) * 1000);
                assert_eq!(*exit_code, want_code, "{outcome:?}");
                assert_eq!(*exit_signal, want_signal, "{outcome:?}");
            }
            other => panic!("{outcome:?}: {other:?}"),
        }
        // The job is over: nothing of it is kept for steps.
        assert!(!d.has_open_jobs());
    }
}

#[test]
fn a_step_end_at_the_time_limit_is_a_timeout() {
    let mut d = decider();
    let job = submit(&mut d, "ada", "#!/bin/bash\n#SBATCH -t 1\nsleep 600\n", T0);
    pass(&mut d, T0);
    let batch = step_end(&mut d, job, JobOutcome::Signaled(15), true, T0 + 61);
    assert!(batch
        .changes
        .iter()
        .any(|c| matches!(c, JobChange::Ended { state, .. } if state == "TIMEOUT")));
}

#[test]
fn a_step_end_for_a_job_that_is_not_running_changes_nothing() {
    let mut d = decider();
    let job = submit(&mut d, "ada", SLEEP, T0);
    let batch = step_end(&mut d, job, JobOutcome::Exited(0), false, T0 + 1);
    assert!(batch.log.is_empty() && batch.changes.is_empty());
    assert_eq!(state_of(&d, job, T0 + 1), Some(JobState::Pending));
}

#[test]
fn the_last_task_of_an_array_ends_the_arrays_own_row() {
    let mut d = decider();
    let array = submit(&mut d, "ada", "#!/bin/bash\n#SBATCH -a 0-1\ntrue\n", T0);
    let batch = pass(&mut d, T0 + 1);
    let tasks: Vec<JobId> = batch.launches.iter().map(|l| l.0).collect();
    assert_eq!(tasks, vec![JobId::task(1, 0), JobId::task(1, 1)]);
    let batch = step_end(&mut d, tasks[0], JobOutcome::Exited(0), false, T0 + 2);
    assert_eq!(batch.changes.len(), 1, "{:?}", batch.changes);
    assert!(d.has_open_jobs());
    let batch = step_end(&mut d, tasks[1], JobOutcome::Exited(0), false, T0 + 3);
    assert!(batch.changes.iter().any(|c| matches!(
        c,
        JobChange::Ended { id: 1, task: -1, state, .. } if state == "COMPLETED"
    )));
    assert!(!d.has_open_jobs());
    assert_eq!(state_of(&d, array, T0 + 3), Some(JobState::Completed));
}

#[test]
fn a_purge_forgets_ended_jobs_only_after_min_job_age() {
    let mut d = decider();
    let job = submit(&mut d, "ada", SLEEP, T0);
    pass(&mut d, T0 + 1);
    step_end(&mut d, job, JobOutcome::Exited(0), false, T0 + 2);

    let mut batch = Batch::default();
    d.purge(&mut batch, T0 + 2 + MIN_JOB_AGE_SECS - 1);
    assert!(batch.log.is_empty() && !batch.touched);
    assert!(d.cluster.job(job, T0 + 2).is_some());

    let mut batch = Batch::default();
    d.purge(&mut batch, T0 + 2 + MIN_JOB_AGE_SECS);
    assert_eq!(batch.log.len(), 1);
    assert!(batch.log[0].1.contains("\"event\":\"purge\""));
    assert!(batch.changes.is_empty());
    assert!(d.cluster.job(job, T0 + 2 + MIN_JOB_AGE_SECS).is_none());
}

#[test]
fn a_pending_job_is_not_purged() {
    let mut d = decider();
    let job = submit(&mut d, "ada", SLEEP, T0);
    let mut batch = Batch::default();
    d.purge(&mut batch, T0 + 10 * MIN_JOB_AGE_SECS);
    assert!(batch.log.is_empty());
    assert!(d.cluster.job(job, T0).is_some());
}

#[test]
fn the_same_limits_are_answered_at_once_and_not_logged() {
    let mut d = decider();
    let (reply, mut rx) = oneshot::channel();
    let mut batch = Batch::default();
    let limits = d.cluster.config().limits.clone();
    d.handle(
        Command::Limits {
            limits: Box::new(limits),
            reply,
        },
        &mut batch,
        T0,
    );
    assert!(matches!(answer(&mut rx), Some(Ok(()))));
    assert!(batch.log.is_empty() && batch.replies.is_empty());
}

#[test]
fn squeue_and_nodes_are_answered_at_once() {
    let mut d = decider();
    submit(&mut d, "ada", SLEEP, T0);
    let mut batch = Batch::default();
    let (reply, mut jobs) = oneshot::channel();
    d.handle(
        Command::Squeue {
            filter: SqueueFilter::default(),
            reply,
        },
        &mut batch,
        T0,
    );
    let (reply, mut nodes) = oneshot::channel();
    d.handle(Command::Nodes { reply }, &mut batch, T0);
    assert!(batch.log.is_empty() && batch.replies.is_empty() && !batch.touched);
    assert!(matches!(answer(&mut jobs), Some(Ok(v)) if v.len() == 1));
    assert!(matches!(answer(&mut nodes), Some(Ok((n, p))) if n.len() == 1 && p[0].name == "cpu"));
}

#[test]
fn priority_factors_and_shares_are_answered_at_once() {
    let mut d = decider();
    let whole = "#!/bin/bash\n#SBATCH -c 8\nsleep 60\n";
    let first = submit(&mut d, "ada", whole, T0);
    let second = submit(&mut d, "ada", whole, T0);
    let mut batch = Batch::default();
    let (reply, mut factors) = oneshot::channel();
    d.handle(
        Command::Priority {
            filter: scheduler::PriorityFilter::default(),
            reply,
        },
        &mut batch,
        T0 + 10,
    );
    let (reply, mut shares) = oneshot::channel();
    d.handle(Command::Shares { reply }, &mut batch, T0 + 10);
    assert!(batch.log.is_empty() && batch.replies.is_empty() && !batch.touched);
    let Some(Ok(list)) = answer(&mut factors) else {
        panic!("no factors")
    };
    let ids: Vec<JobId> = list.jobs.iter().map(|v| v.id).collect();
    assert!(
        ids == [first, second] || ids == [second],
        "the pending ones: {ids:?}"
    );
    assert_eq!(list.weights.fairshare, 10_000);
    let Some(Ok(tree)) = answer(&mut shares) else {
        panic!("no shares")
    };
    assert_eq!(tree.accounts.len(), 1);
    assert_eq!(tree.accounts[0].users[0].name, "ada");
}

#[test]
fn draining_a_node_is_logged_and_answered_once_durable() {
    let mut d = decider();
    let (reply, mut rx) = oneshot::channel();
    let mut batch = Batch::default();
    d.handle(
        Command::Node {
            node: "n01".into(),
            command: scheduler::NodeCommand::Drain {
                reason: "maintenance".into(),
            },
            reply,
        },
        &mut batch,
        T0,
    );
    assert!(answer(&mut rx).is_none());
    assert_eq!(batch.log.len(), 1);
    written(batch, true);
    assert!(matches!(answer(&mut rx), Some(Ok(()))));

    let (reply, mut rx) = oneshot::channel();
    let mut batch = Batch::default();
    d.handle(
        Command::Node {
            node: "nowhere".into(),
            command: scheduler::NodeCommand::Resume,
            reply,
        },
        &mut batch,
        T0,
    );
    assert!(matches!(
        answer(&mut rx),
        Some(Err(SchedError::Conflict(_)))
    ));
}

#[test]
fn a_job_that_asks_for_mail_gets_one_notice_per_event_it_names() {
    let mut d = decider();
    let script = "#!/bin/bash\n#SBATCH -J train -t 10\n#SBATCH --mail-type=BEGIN,FAIL,TIME_LIMIT_50\n#SBATCH --mail-user=bob\nsleep 600\n";
    let job = submit(&mut d, "ada", script, T0);
    let began = pass(&mut d, T0 + 2);
    match &began.notices[..] {
        [n] => {
            assert_eq!(
                (n.event, n.job.as_str(), n.name.as_str()),
                (NoticeEvent::Began, "1", "train")
            );
            assert_eq!(
                (n.user.as_str(), n.mail_user.as_deref()),
                ("ada", Some("bob"))
            );
            assert_eq!(n.seconds, Some(2));
        }
        other => panic!("{other:?}"),
    }
    // Half the ten-minute limit: one notice, once.
    assert!(pass(&mut d, T0 + 200).notices.is_empty());
    let half = pass(&mut d, T0 + 302);
    assert_eq!(half.notices.len(), 1);
    assert_eq!(half.notices[0].event, NoticeEvent::TimeLimit(50));
    assert!(pass(&mut d, T0 + 303).notices.is_empty());
    let end = step_end(&mut d, job, JobOutcome::Exited(3), false, T0 + 400);
    match &end.notices[..] {
        [n] => {
            assert_eq!(n.event, NoticeEvent::Failed);
            assert_eq!((n.state.as_str(), n.exit_code), ("FAILED", Some(3)));
            assert_eq!(n.seconds, Some(398));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_mail_type_or_for_an_event_not_named_there_is_no_notice() {
    let mut d = decider();
    let job = submit(&mut d, "ada", SLEEP, T0);
    assert!(pass(&mut d, T0 + 1).notices.is_empty());
    assert!(step_end(&mut d, job, JobOutcome::Exited(0), false, T0 + 5)
        .notices
        .is_empty());
    let job = submit(
        &mut d,
        "ada",
        "#!/bin/bash\n#SBATCH --mail-type=FAIL\ntrue\n",
        T0,
    );
    assert!(pass(&mut d, T0 + 6).notices.is_empty());
    assert!(step_end(&mut d, job, JobOutcome::Exited(0), false, T0 + 9)
        .notices
        .is_empty());
}
