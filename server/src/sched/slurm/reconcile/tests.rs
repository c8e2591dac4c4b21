//! Unit tests of the Slurm reconciliation: atrium's rows and `squeue`/`sacct`
//! answers built by hand, `now` given by the test.

use scheduler::NodeState;

use super::*;

const T0: i64 = 1_700_000_000;

/// The row of job `id` as `sbatch` left it: pending, nothing placed yet.
fn record(id: i64) -> JobRecord {
    JobRecord {
        id,
        task: -1,
        user_name: "ada".into(),
        account: "ada".into(),
        name: "train".into(),
        state: "PENDING".into(),
        submit_time: T0 * 1000,
        ..Default::default()
    }
}

fn entry(record: JobRecord) -> Entry {
    Entry {
        slurm_id: record.id.to_string(),
        view: view_of_record(&record, T0),
        record,
    }
}

fn jobs_of(records: Vec<JobRecord>) -> Jobs {
    records
        .into_iter()
        .map(|r| (job_id(&r), entry(r)))
        .collect()
}

/// A `squeue` line of job `id` in `state`.
fn row(id: u64, state: &str) -> SqueueRow {
    SqueueRow {
        job_id: id.to_string(),
        array_job_id: id.to_string(),
        array_task: ArrayTask::None,
        state: state.into(),
        reason: "None".into(),
        user: "ada".into(),
        name: "train".into(),
        partition: "gpu".into(),
        account: "ml".into(),
        priority: 100,
        submit_time: Some(T0),
        start_time: None,
        end_time: None,
        time_limit: TimeLimit::Seconds(3600),
        time_used: 0,
        nodes: 1,
        nodelist: String::new(),
        gres: String::new(),
        tres: parse::Tres::parse("cpu=4,mem=16G"),
        exit_status: 0,
        stdout: "/home/ada/slurm-%j.out".into(),
        stderr: "/home/ada/slurm-%j.out".into(),
        comment: "atrium".into(),
    }
}

fn running(id: u64, start: i64) -> SqueueRow {
    SqueueRow {
        start_time: Some(start),
        nodelist: "n1".into(),
        time_used: 7,
        ..row(id, "RUNNING")
    }
}

/// One poll: diff, then the live view updated as after a written batch.
fn poll(jobs: &mut Jobs, rows: &[SqueueRow], now: i64) -> (Vec<JobChange>, Vec<(JobId, String)>) {
    let (changes, missing) = diff(jobs, rows, now);
    let writes = changes.iter().flat_map(|c| c.writes.clone()).collect();
    apply(jobs, changes, rows, now);
    (writes, missing)
}

/// An `sacct -X -n -P` line.
fn sacct_line(job: &str, state: &str, exit: &str, start: i64, end: &str) -> String {
    let sep = parse::SEP;
    format!("{job}{sep}{state}{sep}{exit}{sep}{start}{sep}{end}{sep}n1{sep}cpu=4")
}

#[test]
fn a_new_job_appears_pending_then_running() {
    let mut jobs = jobs_of(vec![record(10)]);
    let id = JobId::new(10);

    let pending = SqueueRow {
        reason: "Priority".into(),
        ..row(10, "PENDING")
    };
    let (writes, missing) = poll(&mut jobs, std::slice::from_ref(&pending), T0 + 1);
    assert!(missing.is_empty());
    assert_eq!(
        writes,
        vec![
            JobChange::Placed {
                id: 10,
                task: -1,
                account: "ml".into(),
                partition: "gpu".into(),
            },
            JobChange::State {
                id: 10,
                task: -1,
                state: "PENDING".into(),
                reason: Some("Priority".into()),
            },
        ]
    );
    let e = &jobs[&id];
    assert_eq!(e.view.state, JobState::Pending);
    assert_eq!(e.view.reason, Some(PendingReason::Priority));
    assert_eq!(e.view.account, "ml");
    assert_eq!(e.record.partition, "gpu");
    assert_eq!(e.record.reason.as_deref(), Some("Priority"));

    // The same line again writes nothing.
    let (writes, _) = poll(&mut jobs, &[pending], T0 + 2);
    assert!(writes.is_empty());

    let (writes, _) = poll(&mut jobs, &[running(10, T0 + 3)], T0 + 4);
    match &writes[..] {
        // The pending reason goes with the new state.
        [JobChange::Started(s), JobChange::State {
            state,
            reason: None,
            ..
        }] if state == "RUNNING" => {
            assert_eq!(s.start_time, (T0 + 3) * 1000);
            assert_eq!(s.nodelist, "n1");
            assert_eq!(s.cpus, 4);
            assert_eq!(s.memory_mb, 16 * 1024);
            assert_eq!(s.time_limit, Some(3600));
            assert_eq!(s.stdout_path, "/home/ada/slurm-10.out");
            // The same file for both: no separate error path.
            assert_eq!(s.stderr_path, None);
        }
        other => panic!("{other:?}"),
    }
    let e = &jobs[&id];
    assert_eq!(e.view.state, JobState::Running);
    assert_eq!(e.view.reason, None);
    assert_eq!(e.view.time_used, 7);
    assert_eq!(e.record.state, "RUNNING");
    assert_eq!(e.record.start_time, Some((T0 + 3) * 1000));
}

#[test]
fn a_job_squeue_lists_as_ended_gets_its_end_and_exit() {
    let mut jobs = jobs_of(vec![record(10)]);
    poll(&mut jobs, &[running(10, T0)], T0 + 1);
    let failed = SqueueRow {
        state: "FAILED".into(),
        end_time: Some(T0 + 30),
        exit_status: 3 << 8,
        ..running(10, T0)
    };
    let (writes, _) = poll(&mut jobs, &[failed], T0 + 31);
    assert_eq!(
        writes,
        vec![JobChange::Ended {
            id: 10,
            task: -1,
            state: "FAILED".into(),
            end_time: (T0 + 30) * 1000,
            exit_code: Some(3),
            exit_signal: None,
            reason: None,
            message: None,
        }]
    );
    let e = &jobs[&JobId::new(10)];
    assert_eq!(e.view.exit, Some(JobOutcome::Exited(3)));
    assert_eq!(e.record.exit_code, Some(3));
}

#[test]
fn a_running_job_missing_from_squeue_gets_its_end_from_sacct() {
    let mut jobs = jobs_of(vec![record(10), record(11)]);
    poll(&mut jobs, &[running(10, T0), running(11, T0)], T0 + 1);

    // Neither is listed any more: both are asked of sacct.
    let (writes, missing) = poll(&mut jobs, &[], T0 + 60);
    assert!(writes.is_empty());
    assert_eq!(
        missing,
        vec![(JobId::new(10), "10".into()), (JobId::new(11), "11".into())]
    );

    let out = [
        sacct_line("10", "COMPLETED", "0:0", T0, &(T0 + 50).to_string()),
        sacct_line("11", "CANCELLED by 1000", "0:15", T0, "Unknown"),
        // Not atrium's, still running, and a short line: all left alone.
        sacct_line("99", "COMPLETED", "0:0", T0, "1"),
        sacct_line("12", "RUNNING", "0:0", T0, "Unknown"),
        "10|COMPLETED".into(),
    ]
    .join("\n");
    let changes = sacct_changes(&jobs, &out, T0 + 60);
    assert_eq!(changes.len(), 2);

    let done = &changes[0];
    assert_eq!(done.view.state, JobState::Completed);
    assert_eq!(done.view.end_time, Some(T0 + 50));
    assert_eq!(done.view.time_used, 50);
    assert_eq!(done.view.exit, Some(JobOutcome::Exited(0)));
    assert_eq!(done.record.end_time, Some((T0 + 50) * 1000));
    assert!(matches!(
        &done.writes[..],
        [JobChange::Ended { id: 10, state, exit_code: Some(0), exit_signal: None, .. }] if state == "COMPLETED"
    ));

    // No end given: it ended now; killed by a signal.
    let cancelled = &changes[1];
    assert_eq!(cancelled.view.state, JobState::Cancelled);
    assert_eq!(cancelled.view.end_time, Some(T0 + 60));
    assert_eq!(cancelled.view.exit, Some(JobOutcome::Signaled(15)));
    assert_eq!(cancelled.record.exit_signal, Some(15));

    apply(&mut jobs, changes, &[], T0 + 60);
    assert!(jobs.values().all(|e| e.view.state.is_terminal()));
    // Ended and written: not asked again.
    let (_, missing) = poll(&mut jobs, &[], T0 + 61);
    assert!(missing.is_empty());
}

#[test]
fn array_tasks_appear_as_task_rows_and_the_array_follows_them() {
    let array = JobRecord {
        array_spec: Some("0-1".into()),
        ..record(20)
    };
    let mut jobs = jobs_of(vec![array]);
    let task = |t: u32, state: &str| SqueueRow {
        job_id: (21 + t).to_string(),
        array_job_id: "20".into(),
        array_task: ArrayTask::One(t),
        ..row(21 + u64::from(t), state)
    };
    let waiting = SqueueRow {
        array_task: ArrayTask::Pending("1".into()),
        ..row(20, "PENDING")
    };
    let first = SqueueRow {
        start_time: Some(T0),
        nodelist: "n1".into(),
        ..task(0, "RUNNING")
    };
    let (writes, _) = poll(&mut jobs, &[first.clone(), waiting.clone()], T0 + 1);
    // The task's row is the array's, copied: it starts as task 0.
    assert!(writes
        .iter()
        .any(|w| matches!(w, JobChange::Started(s) if s.id == 20 && s.task == 0)));
    let t0 = &jobs[&JobId::task(20, 0)];
    assert_eq!(t0.record.task, 0);
    assert_eq!(t0.record.array_spec, None);
    assert_eq!(t0.view.state, JobState::Running);
    assert_eq!(t0.slurm_id, "20");
    let parent = &jobs[&JobId::new(20)];
    assert_eq!(parent.view.state, JobState::Pending);
    assert_eq!(parent.view.display_id, "20_[1]");

    // While a task waits the array's row is listed; the running task on its own.
    let listed: Vec<JobId> = squeue(&jobs, &SqueueFilter::default())
        .iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(listed, vec![JobId::new(20), JobId::task(20, 0)]);

    let second = SqueueRow {
        start_time: Some(T0 + 2),
        nodelist: "n1".into(),
        ..task(1, "RUNNING")
    };
    // The last task starts: none waits any more, the array goes on.
    let (writes, _) = poll(&mut jobs, &[first, second.clone()], T0 + 2);
    assert!(writes
        .iter()
        .any(|w| matches!(w, JobChange::Started(s) if s.task == 1)));
    assert!(!jobs[&JobId::new(20)].view.state.is_terminal());
    let finished = SqueueRow {
        end_time: Some(T0 + 5),
        ..SqueueRow {
            start_time: Some(T0),
            nodelist: "n1".into(),
            ..task(0, "COMPLETED")
        }
    };
    poll(&mut jobs, &[finished, second], T0 + 3);
    // No task waits: the array's own row is no longer listed.
    let listed: Vec<JobId> = squeue(&jobs, &SqueueFilter::default())
        .iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(listed, vec![JobId::task(20, 1)]);

    // Task 1 fails in the same poll that finds no task waiting: the array ends
    // with the first state that is not COMPLETED.
    let failed = SqueueRow {
        start_time: Some(T0 + 2),
        end_time: Some(T0 + 9),
        nodelist: "n1".into(),
        exit_status: 1 << 8,
        ..task(1, "FAILED")
    };
    let (writes, _) = poll(&mut jobs, &[failed], T0 + 10);
    assert!(writes.contains(&JobChange::Ended {
        id: 20,
        task: -1,
        state: "FAILED".into(),
        end_time: (T0 + 10) * 1000,
        exit_code: None,
        exit_signal: None,
        reason: None,
        message: None,
    }));
    assert_eq!(jobs[&JobId::new(20)].view.state, JobState::Failed);
    assert_eq!(jobs[&JobId::new(20)].view.end_time, Some(T0 + 10));
}

#[test]
fn array_state_is_completed_only_when_every_task_completed() {
    let task = |t: u32, state: JobState| {
        let mut e = entry(JobRecord {
            task: i64::from(t),
            ..record(30)
        });
        e.view.state = state;
        e
    };
    let all_done = [task(0, JobState::Completed), task(1, JobState::Completed)];
    let refs: Vec<&Entry> = all_done.iter().collect();
    assert_eq!(array_state(&refs, &[]), JobState::Completed);
    let one_timed_out = [task(0, JobState::Completed), task(1, JobState::Timeout)];
    let refs: Vec<&Entry> = one_timed_out.iter().collect();
    assert_eq!(array_state(&refs, &[]), JobState::Timeout);
}

#[test]
fn unreachable_slurm_marks_open_jobs_unknown_and_the_next_answer_restores_them() {
    let mut jobs = jobs_of(vec![record(10)]);
    poll(&mut jobs, &[running(10, T0)], T0 + 1);
    mark_unknown(&mut jobs);
    assert_eq!(jobs[&JobId::new(10)].view.state, JobState::Unknown);
    // Nothing changed in Slurm: nothing to write, the state comes back.
    let (writes, _) = poll(&mut jobs, &[running(10, T0)], T0 + 2);
    assert!(writes.is_empty());
    assert_eq!(jobs[&JobId::new(10)].view.state, JobState::Running);
}

#[test]
fn ended_jobs_leave_the_live_view_after_a_while() {
    let mut ended = record(10);
    ended.state = "COMPLETED".into();
    ended.end_time = Some(T0 * 1000);
    let mut jobs = jobs_of(vec![ended, record(11)]);
    apply(&mut jobs, Vec::new(), &[], T0 + KEEP_ENDED_SECS - 1);
    assert_eq!(jobs.len(), 2);
    apply(&mut jobs, Vec::new(), &[], T0 + KEEP_ENDED_SECS);
    assert_eq!(
        jobs.keys().copied().collect::<Vec<_>>(),
        vec![JobId::new(11)]
    );
}

#[test]
fn a_record_follows_each_change_written() {
    let mut r = record(10);
    update_record(
        &mut r,
        &JobChange::Placed {
            id: 10,
            task: -1,
            account: "ml".into(),
            partition: "gpu".into(),
        },
    );
    assert_eq!((r.account.as_str(), r.partition.as_str()), ("ml", "gpu"));
    update_record(
        &mut r,
        &JobChange::State {
            id: 10,
            task: -1,
            state: "PENDING".into(),
            reason: Some("Resources".into()),
        },
    );
    assert_eq!(r.reason.as_deref(), Some("Resources"));
    update_record(
        &mut r,
        &JobChange::Started(Box::new(JobStart {
            id: 10,
            task: -1,
            start_time: 5000,
            time_limit: None,
            allocation: String::new(),
            nodelist: "n1".into(),
            cpus: 4,
            memory_mb: 1024,
            gpus: "gpu:1".into(),
            gpu_milli: 1000,
            stdout_path: "/o".into(),
            stderr_path: Some("/e".into()),
        })),
    );
    assert_eq!(r.state, "RUNNING");
    assert_eq!(r.reason, None);
    assert_eq!(r.start_time, Some(5000));
    assert_eq!((r.cpus, r.memory_mb, r.gpus.as_str()), (4, 1024, "gpu:1"));
    assert_eq!(r.stdout_path.as_deref(), Some("/o"));
    assert_eq!(r.stderr_path.as_deref(), Some("/e"));
    update_record(
        &mut r,
        &JobChange::Ended {
            id: 10,
            task: -1,
            state: "OUT_OF_MEMORY".into(),
            end_time: 9000,
            exit_code: None,
            exit_signal: Some(9),
            reason: None,
            message: None,
        },
    );
    assert_eq!(r.state, "OUT_OF_MEMORY");
    assert_eq!(
        (r.end_time, r.exit_code, r.exit_signal),
        (Some(9000), None, Some(9))
    );
    // The view of the stored row says the same.
    let v = view_of_record(&r, T0);
    assert_eq!(v.state, JobState::OutOfMemory);
    assert_eq!(v.exit, Some(JobOutcome::Signaled(9)));
    assert_eq!(
        (v.start_time, v.end_time, v.time_used),
        (Some(5), Some(9), 4)
    );
}

#[test]
fn nodes_and_partitions_from_scontrol() {
    let node = |name: &str, state: NodeState, alloc: u32| SlurmNode {
        name: name.into(),
        state,
        partitions: vec!["gpu".into()],
        cpus_total: 64,
        cpus_alloc: alloc,
        memory_mb_total: 1000,
        memory_mb_alloc: 250,
        features: vec!["ib".into()],
        slices: vec![SliceUsage {
            r#type: "a100".into(),
            total: 4,
            used: alloc / 16,
        }],
    };
    let nodes = vec![
        node("n1", NodeState::Idle, 0),
        node("n2", NodeState::Mixed, 32),
        node("n3", NodeState::Mixed, 16),
    ];
    let parts = vec![
        SlurmPartition {
            name: "gpu".into(),
            default: true,
            max_time: TimeLimit::Seconds(86_400),
            nodes: "n[1-3]".into(),
            up: true,
        },
        SlurmPartition {
            name: "empty".into(),
            default: false,
            max_time: TimeLimit::Unlimited,
            nodes: String::new(),
            up: true,
        },
    ];
    let mut jobs = jobs_of(vec![record(10), record(11), record(12)]);
    poll(
        &mut jobs,
        &[running(10, T0), running(11, T0), row(12, "PENDING")],
        T0,
    );
    let views = partition_views(&parts, &nodes, &jobs);
    let gpu = &views[0];
    assert_eq!(gpu.name, "gpu");
    assert!(gpu.default);
    assert_eq!(gpu.nodes_total, 3);
    assert_eq!(
        gpu.nodes_by_state,
        vec![
            ("IDLE".into(), 1, "n1".into()),
            ("MIXED".into(), 2, "n[2-3]".into()),
        ]
    );
    assert_eq!((gpu.cpus_total, gpu.cpus_used), (192, 48));
    assert_eq!(
        gpu.slices,
        vec![SliceUsage {
            r#type: "a100".into(),
            total: 12,
            used: 3,
        }]
    );
    assert_eq!((gpu.pending_jobs, gpu.running_jobs), (1, 2));
    let empty = &views[1];
    assert_eq!((empty.nodes_total, empty.pending_jobs), (0, 0));

    let v = node_view(nodes[1].clone());
    assert_eq!(v.name, "n2");
    assert_eq!((v.cpus_total, v.cpus_free), (64, 32));
    assert_eq!((v.memory_mb_total, v.memory_mb_free), (1000, 750));
}

#[test]
fn live_jobs_count_an_array_row_only_while_it_waits() {
    let mut array = record(20);
    array.array_spec = Some("0-3".into());
    array.state = "RUNNING".into();
    let mut task = record(20);
    task.task = 0;
    task.state = "RUNNING".into();
    let jobs = jobs_of(vec![array, task, record(21)]);
    // The array's running row stands for nothing of its own.
    assert_eq!(live_jobs(&jobs).len(), 2);
}

/// When the last waiting task of an array starts in the same poll in which `squeue`
/// stops listing the array's pending row, and every task known before is over, the
/// array is not over: the task that just started runs.
#[test]
fn an_array_whose_last_task_just_started_is_not_over() {
    let array = JobRecord {
        array_spec: Some("0-1%1".into()),
        ..record(20)
    };
    let mut jobs = jobs_of(vec![array]);
    let task = |t: u32, state: &str| SqueueRow {
        job_id: (21 + t).to_string(),
        array_job_id: "20".into(),
        array_task: ArrayTask::One(t),
        start_time: Some(T0),
        nodelist: "n1".into(),
        ..row(21 + u64::from(t), state)
    };
    let waiting = SqueueRow {
        array_task: ArrayTask::Pending("1%1".into()),
        ..row(20, "PENDING")
    };
    poll(&mut jobs, &[task(0, "RUNNING"), waiting.clone()], T0 + 1);
    let done = SqueueRow {
        end_time: Some(T0 + 5),
        ..task(0, "COMPLETED")
    };
    poll(&mut jobs, &[done, waiting], T0 + 6);
    poll(&mut jobs, &[task(1, "RUNNING")], T0 + 7);
    assert!(!jobs[&JobId::new(20)].view.state.is_terminal());
}

#[test]
fn jobs_submitted_while_a_submission_is_recorded_are_not_adopted_yet() {
    let known = jobs_of(vec![record(7)]);
    let mut orphan = row(8, "PENDING");
    orphan.submit_time = Some(T0 - 60);
    let mut recent = row(9, "PENDING");
    recent.submit_time = Some(T0 + 5);
    let mut foreign = row(10, "PENDING");
    foreign.comment = String::new();
    let rows = vec![row(7, "PENDING"), orphan, recent, foreign];
    let ids = |got: Vec<&SqueueRow>| got.iter().map(|r| r.job_id.clone()).collect::<Vec<_>>();
    let none = HashSet::new();
    // Nothing in flight: every orphan with the comment.
    assert_eq!(
        ids(adoption_candidates(&rows, &known, &none, None)),
        ["8", "9"]
    );
    // A submission started at T0: job 9 may be it; job 8 was there before.
    assert_eq!(
        ids(adoption_candidates(&rows, &known, &none, Some(T0))),
        ["8"]
    );
    let refused = HashSet::from(["8".to_string()]);
    assert!(adoption_candidates(&rows, &known, &refused, Some(T0)).is_empty());
}

#[test]
fn a_recorded_job_counts_every_node_of_its_list() {
    let mut r = record(7);
    r.nodelist = "node[1-2],gpu7".into();
    assert_eq!(view_of_record(&r, 0).nodes, 3);
    r.nodelist = String::new();
    assert_eq!(view_of_record(&r, 0).nodes, 0);
}

#[test]
fn the_poll_follows_the_users_of_jobs_not_over_or_whose_end_is_not_recorded() {
    let pending = record(1);
    let mut ended = record(2);
    ended.user_name = "bob".into();
    ended.state = "COMPLETED".into();
    ended.end_time = Some(T0 * 1000);
    let mut unrecorded = record(3);
    unrecorded.user_name = "cy".into();
    unrecorded.state = "COMPLETED".into();
    let jobs = jobs_of(vec![pending, ended, unrecorded]);
    assert_eq!(
        followed_users(&jobs).into_iter().collect::<Vec<_>>(),
        ["ada", "cy"]
    );
    assert!(followed_users(&Jobs::new()).is_empty());
}

/// A listing of chosen jobs (those settling) says nothing of the jobs it leaves out:
/// an array whose known tasks are all over is not ended by it, nor is a job asked of
/// `sacct`, as a full listing would.
#[test]
fn a_listing_of_chosen_jobs_leaves_the_others_as_they_are() {
    let array = JobRecord {
        array_spec: Some("0-3".into()),
        state: "RUNNING".into(),
        ..record(20)
    };
    let mut task = record(20);
    task.task = 0;
    task.state = "COMPLETED".into();
    task.end_time = Some(T0 * 1000);
    let mut jobs = jobs_of(vec![array, task, record(30)]);
    jobs.values_mut()
        .filter(|e| e.record.state == "COMPLETED")
        .for_each(|e| e.view.state = JobState::Completed);
    let settled = diff_listed(&jobs, &[running(30, T0)], T0 + 1);
    assert_eq!(settled.len(), 1, "only the job listed changes");
    assert_eq!(settled[0].view.state, JobState::Running);
    let (full, missing) = diff(&jobs, &[running(30, T0)], T0 + 1);
    assert!(
        full.len() > 1 || !missing.is_empty(),
        "a full listing that leaves the array out ends it or asks sacct"
    );
}
