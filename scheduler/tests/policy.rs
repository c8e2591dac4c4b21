//! Scheduling policy through the public API: placement, limits, backfill, arrays,
//! dependencies, holds, time limits, node failures, views and snapshots.
#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use scheduler::*;

fn alice() -> Owner {
    Owner::user("alice")
}

#[test]
fn published_example_runs_on_two_nodes() {
    let mut c = cluster(3, 8);
    c.partitions[0].name = "sxm2".into();
    let mut cl = Cluster::new(c).unwrap();
    let id = cl
        .submit(
            req(
                "#!/bin/bash\n#SBATCH -N 2 -n 8 --ntasks-per-node 4 -p sxm2 --gres=gpu:4\nsrun x\n",
            ),
            &alice(),
            0,
        )
        .unwrap();
    let d = cl.schedule(0);
    let Some(Decision::Start { job, allocation }) = d.first() else {
        panic!("{d:?}")
    };
    assert_eq!(*job, id);
    assert_eq!(allocation.nodes.len(), 2);
    for n in &allocation.nodes {
        assert_eq!(n.slices.len(), 4);
        assert_eq!(n.cpus, 32, "4 GPUs bring 8 cores each");
        assert_eq!(n.memory_mb, 4 * 48 * 1024);
        assert_eq!(n.cuda_visible_devices(), "0,1,2,3");
    }
}

#[test]
fn best_fit_fills_used_nodes_first() {
    let mut cl = Cluster::new(cluster(2, 8)).unwrap();
    cl.submit(req("#SBATCH --gres=gpu:3"), &alice(), 0).unwrap();
    cl.schedule(0);
    cl.submit(req("#SBATCH --gres=gpu:2"), &alice(), 0).unwrap();
    let d = cl.schedule(0);
    let Some(Decision::Start { allocation, .. }) = d.first() else {
        panic!()
    };
    assert_eq!(
        allocation.nodes[0].node, "n00",
        "the partly used node is filled first"
    );
    cl.submit(req("#SBATCH --gres=gpu:8"), &alice(), 0).unwrap();
    assert_eq!(starts(&cl.schedule(0)).len(), 1, "a whole node stayed free");
}

#[test]
fn mig_and_shards_are_packed() {
    let mut c = cluster(0, 0);
    c.nodes = vec![mig_node("m0"), mig_node("m1")];
    c.partitions[0].nodes = vec!["m0".into(), "m1".into()];
    let mut cl = Cluster::new(c).unwrap();
    let m1 = cl
        .submit(req("#SBATCH --gres=gpu:1g.10gb:1"), &alice(), 0)
        .unwrap();
    cl.submit(req("#SBATCH --gres=gpu:1g.10gb:1"), &alice(), 0)
        .unwrap();
    cl.submit(req("#SBATCH --gres=shard:2"), &alice(), 0)
        .unwrap();
    let d = cl.schedule(0);
    let nodes: Vec<String> = d
        .iter()
        .filter_map(|d| {
            if let Decision::Start { allocation, .. } = d {
                Some(allocation.nodes[0].node.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(nodes, vec!["m0", "m0", "m0"]);
    let allocation = d
        .iter()
        .find_map(|x| match x {
            Decision::Start { job, allocation } if *job == m1 => Some(allocation),
            _ => None,
        })
        .unwrap();
    assert!(
        matches!(&allocation.nodes[0].slices[0], SliceId::Mig { uuid, .. } if uuid.starts_with("MIG-m0"))
    );
    assert!(
        allocation.nodes[0].cpus >= 2,
        "a 1g slice brings a seventh of 8 cores, rounded up"
    );
    let info = cl.sinfo();
    let mig = info[0]
        .slices
        .iter()
        .find(|s| s.r#type == "1g.10gb")
        .unwrap();
    assert_eq!((mig.total, mig.used), (4, 2));
    assert!(Cluster::new({
        let mut c = cluster(0, 0);
        let mut n = mig_node("x");
        n.gpus[0].mode = GpuMode::Mig(vec![
            MigInstanceConfig {
                profile: "7g.80gb".into(),
                uuid: "u".into()
            };
            2
        ]);
        c.nodes = vec![n];
        c.partitions[0].nodes = vec!["x".into()];
        c
    })
    .is_err());
}

#[test]
fn impossible_jobs_are_rejected_at_submit() {
    let mut c = cluster(2, 8);
    c.limits.default_user.max_gpus = Some(8);
    let mut cl = Cluster::new(c).unwrap();
    let e = |cl: &mut Cluster, s: &str| cl.submit(req(s), &alice(), 0).unwrap_err().to_string();
    assert!(e(&mut cl, "#SBATCH --gres=gpu:9").contains("can never run"));
    assert!(e(&mut cl, "#SBATCH -N 3 --gres=gpu:1").contains("can never run"));
    assert!(e(&mut cl, "#SBATCH -N 2 --gres=gpu:8").contains("may use 8 GPUs"));
    assert!(e(&mut cl, "#SBATCH -t 2-00:00:00").contains("time limit"));
    assert!(e(&mut cl, "#SBATCH -p nope").contains("no such partition"));
    assert!(e(&mut cl, "#SBATCH --gres=gpu:a100:1").contains("no GPU of type"));
    assert!(e(&mut cl, "#SBATCH -q gold").contains("QOS"));
    assert!(e(&mut cl, "#SBATCH -A other").contains("account"));
    assert!(e(&mut cl, "#SBATCH -d afterok:99").contains("does not exist"));
    assert!(e(&mut cl, "#SBATCH --mem=10T").contains("can never run"));
}

#[test]
fn limits_make_jobs_pend_with_the_right_reason() {
    let mut c = cluster(2, 8);
    c.limits.default_user.max_gpus = Some(4);
    c.limits.default_user.max_running_jobs = Some(3);
    let mut cl = Cluster::new(c).unwrap();
    let a = cl.submit(req("#SBATCH --gres=gpu:4"), &alice(), 0).unwrap();
    let b = cl.submit(req("#SBATCH --gres=gpu:1"), &alice(), 0).unwrap();
    assert_eq!(starts(&cl.schedule(0)), vec![a]);
    let v = cl.job(b, 0).unwrap();
    assert_eq!(v.reason, Some(PendingReason::QosMaxGresPerUser));
    cl.job_finished(a, JobOutcome::Exited(0), 10).unwrap();
    assert_eq!(starts(&cl.schedule(10)), vec![b]);
    for _ in 0..3 {
        cl.submit(req("#SBATCH -c 1"), &alice(), 10).unwrap();
    }
    assert_eq!(starts(&cl.schedule(10)).len(), 2);
    let pend = cl.squeue(
        &SqueueFilter {
            states: vec![JobState::Pending],
            ..Default::default()
        },
        10,
    );
    assert_eq!(pend[0].reason, Some(PendingReason::AssocMaxJobsLimit));
    cl.set_limits(LimitScope::DefaultUser, Limits::default());
    assert_eq!(starts(&cl.schedule(11)).len(), 1);
}

#[test]
fn gpu_minutes_per_period() {
    let mut c = cluster(1, 8);
    c.limits.accounts.insert(
        "lab".into(),
        Limits {
            max_gpu_minutes: Some(120),
            ..Default::default()
        },
    );
    let mut cl = Cluster::new(c).unwrap();
    let o = Owner {
        account: "lab".into(),
        ..Owner::user("bob")
    };
    let a = cl.submit(req("#SBATCH --gres=gpu:1 -t 60"), &o, 0).unwrap();
    let b = cl.submit(req("#SBATCH --gres=gpu:1 -t 60"), &o, 0).unwrap();
    let x = cl.submit(req("#SBATCH --gres=gpu:1 -t 60"), &o, 0).unwrap();
    assert_eq!(starts(&cl.schedule(0)), vec![a, b]);
    assert_eq!(
        cl.job(x, 0).unwrap().reason,
        Some(PendingReason::AssocGrpGresMinutes)
    );
    // a ends after 30 minutes: 30 GPU-minutes are refunded, still not enough.
    cl.job_finished(a, JobOutcome::Exited(0), 1800).unwrap();
    assert!(starts(&cl.schedule(1800)).is_empty());
    cl.job_finished(b, JobOutcome::Exited(0), 1800).unwrap();
    assert_eq!(starts(&cl.schedule(1800)), vec![x]);
    assert!(cl
        .submit(req("#SBATCH --gres=gpu:2 -t 90"), &o, 0)
        .unwrap_err()
        .to_string()
        .contains("GPU-minutes"));
}

#[test]
fn calendar_months_bound_the_gpu_minute_period() {
    // 2026-02-15T12:00:00Z; February 2026 has 28 days.
    let now = 1_771_156_800;
    let (start, end) = UsagePeriod::Month.bounds(now);
    assert_eq!(start, 1_769_904_000); // 2026-02-01
    assert_eq!(end, 1_772_323_200); // 2026-03-01
    assert_eq!(
        UsagePeriod::Month.index(start),
        UsagePeriod::Month.index(end - 1)
    );
    assert_eq!(
        UsagePeriod::Month.index(end),
        UsagePeriod::Month.index(start) + 1
    );
    // A leap year's February, and a December rolling into January.
    assert_eq!(UsagePeriod::Month.bounds(951_782_400).1, 951_868_800); // 2000-02-29 → 03-01
    assert_eq!(UsagePeriod::Month.bounds(1_798_675_200).0, 1_796_083_200); // 2026-12-31 → 12-01
    assert_eq!(UsagePeriod::Month.bounds(1_798_675_200).1, 1_798_761_600); // → 2027-01-01

    // Usage charged in one month does not count in the next.
    let mut c = cluster(1, 8);
    c.limits.default_user.max_gpu_minutes = Some(60);
    let mut cl = Cluster::new(c).unwrap();
    let a = cl
        .submit(req("#SBATCH --gres=gpu:1 -t 60"), &alice(), start)
        .unwrap();
    let b = cl
        .submit(req("#SBATCH --gres=gpu:1 -t 60"), &alice(), start)
        .unwrap();
    assert_eq!(starts(&cl.schedule(start)), vec![a]);
    cl.job_finished(a, JobOutcome::Exited(0), start + 3600)
        .unwrap();
    assert!(starts(&cl.schedule(start + 3600)).is_empty());
    assert_eq!(
        cl.job(b, start + 3600).unwrap().reason,
        Some(PendingReason::AssocGrpGresMinutes)
    );
    assert_eq!(starts(&cl.schedule(end)), vec![b]);
}

#[test]
fn a_rolling_window_counts_what_ended_jobs_used_within_it() {
    let mut c = cluster(1, 8);
    c.limits.period = UsagePeriod::Rolling { secs: 7200 };
    c.limits.default_user.max_gpu_minutes = Some(120);
    let mut cl = Cluster::new(c).unwrap();
    let a = cl
        .submit(req("#SBATCH --gres=gpu:2 -t 60"), &alice(), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)), vec![a]);
    // 2 GPUs × 60 minutes reserved: nothing more fits.
    let b = cl
        .submit(req("#SBATCH --gres=gpu:1 -t 30"), &alice(), 0)
        .unwrap();
    assert!(starts(&cl.schedule(0)).is_empty());
    // a used 2 × 30 minutes: 60 GPU-minutes count in the window, 60 are left.
    cl.job_finished(a, JobOutcome::Exited(0), 1800).unwrap();
    assert_eq!(starts(&cl.schedule(1800)), vec![b]);
    let usage = cl.limit_usage(&alice(), 1800);
    assert_eq!(usage[0].scope, LimitScope::DefaultUser);
    assert_eq!(usage[0].gpu_milli_seconds, 2000 * 1800 + 1000 * 1800);
    cl.job_finished(b, JobOutcome::Exited(0), 3600).unwrap();
    // The window is the last two hours: at 7200 s both jobs count in full; at
    // 9000 s a (0–1800) has left it; at 10 800 s b (1800–3600) has too.
    assert_eq!(
        cl.limit_usage(&alice(), 7200)[0].gpu_milli_seconds,
        2000 * 1800 + 1000 * 1800
    );
    assert_eq!(
        cl.limit_usage(&alice(), 9000)[0].gpu_milli_seconds,
        1000 * 1800
    );
    assert_eq!(cl.limit_usage(&alice(), 10_800)[0].gpu_milli_seconds, 0);
}

#[test]
fn a_group_limit_set_later_caps_the_members_already_running() {
    let mut cl = Cluster::new(cluster(1, 8)).unwrap();
    let owner = |user: &str| Owner {
        groups: vec!["vision".into()],
        ..Owner::user(user)
    };
    let a = cl
        .submit(req("#SBATCH --gres=gpu:2"), &owner("ann"), 0)
        .unwrap();
    let b = cl
        .submit(req("#SBATCH --gres=gpu:2"), &owner("ben"), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)).len(), 2);
    let mut limits = cl.config().limits.clone();
    limits.groups.insert(
        "vision".into(),
        Limits {
            max_gpus: Some(4),
            ..Default::default()
        },
    );
    cl.set_limits_config(limits, 1);
    let c = cl
        .submit(req("#SBATCH --gres=gpu:1"), &owner("ann"), 1)
        .unwrap();
    assert!(starts(&cl.schedule(1)).is_empty());
    assert_eq!(
        cl.job(c, 1).unwrap().reason,
        Some(PendingReason::AssocGrpGres)
    );
    let usage = cl.limit_usage(&owner("ann"), 1);
    assert_eq!(usage[1].scope, LimitScope::Group("vision".into()));
    assert_eq!(usage[1].gpus_milli, 4000);
    assert_eq!(usage[1].running_jobs, 2);
    cl.job_finished(a, JobOutcome::Exited(0), 2).unwrap();
    assert_eq!(starts(&cl.schedule(2)), vec![c]);
    let _ = b;
}

#[test]
fn a_new_configuration_keeps_the_gpu_time_used_this_period() {
    let mut c = cluster(1, 8);
    c.limits.default_user.max_gpu_minutes = Some(60);
    let mut old = Cluster::new(c.clone()).unwrap();
    let a = old
        .submit(req("#SBATCH --gres=gpu:1 -t 60"), &alice(), 0)
        .unwrap();
    assert_eq!(starts(&old.schedule(0)), vec![a]);
    old.job_finished(a, JobOutcome::Exited(0), 1800).unwrap();
    let used = old.limit_usage(&alice(), 1800)[0].gpu_milli_seconds;
    assert_eq!(used, 1000 * 1800);
    // Two nodes now: the usage of the period carries over, not the old node's jobs.
    let mut bigger = cluster(2, 8);
    bigger.limits = c.limits.clone();
    let mut new = Cluster::new(bigger).unwrap();
    new.keep_usage_of(&old);
    let usage = new.limit_usage(&alice(), 1800);
    assert_eq!(usage[0].gpu_milli_seconds, used);
    assert_eq!((usage[0].gpus_milli, usage[0].running_jobs), (0, 0));
    let b = new
        .submit(req("#SBATCH --gres=gpu:1 -t 31"), &alice(), 1800)
        .unwrap();
    assert!(starts(&new.schedule(1800)).is_empty());
    assert_eq!(
        new.job(b, 1800).unwrap().reason,
        Some(PendingReason::AssocGrpGresMinutes)
    );
}

#[test]
fn easy_backfill_uses_holes_without_delaying_the_top_job() {
    let mut c = cluster(2, 8);
    c.backfill.max_reservations = 1;
    let mut cl = Cluster::new(c).unwrap();
    let long = cl
        .submit(req("#SBATCH --gres=gpu:8 -t 100"), &alice(), 0)
        .unwrap();
    let short = cl
        .submit(req("#SBATCH --gres=gpu:4 -t 50"), &alice(), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)).len(), 2);
    let _ = (long, short);
    // Top job needs both nodes; it can start at 100 when `long` ends.
    let big = cl
        .submit(req("#SBATCH -N 2 --gres=gpu:8 -t 100"), &alice(), 1)
        .unwrap();
    let fits_hole = cl
        .submit(req("#SBATCH --gres=gpu:4 -t 90"), &alice(), 2)
        .unwrap();
    let too_long = cl
        .submit(req("#SBATCH --gres=gpu:4 -t 200"), &alice(), 3)
        .unwrap();
    cl.set_admin_nice(fits_hole, 100, 3).unwrap();
    cl.set_admin_nice(too_long, 100, 3).unwrap();
    let d = cl.schedule(3);
    assert_eq!(starts(&d), vec![fits_hole]);
    assert_eq!(cl.reservations()[0].job, big);
    assert_eq!(
        cl.reservations()[0].start,
        6000,
        "when `long` ends (-t is in minutes)"
    );
    assert_eq!(
        cl.job(big, 3).unwrap().reason,
        Some(PendingReason::Resources)
    );
    assert_eq!(
        cl.job(too_long, 3).unwrap().reason,
        Some(PendingReason::Priority)
    );
}

#[test]
fn arrays_split_tasks_and_honour_the_limit() {
    let mut cl = Cluster::new(cluster(1, 8)).unwrap();
    let a = cl
        .submit(req("#SBATCH --array=0-9%3 --gres=gpu:1"), &alice(), 0)
        .unwrap();
    let s = starts(&cl.schedule(0));
    assert_eq!(
        s,
        vec![
            JobId::task(a.job, 0),
            JobId::task(a.job, 1),
            JobId::task(a.job, 2)
        ]
    );
    let q = cl.squeue(&SqueueFilter::default(), 0);
    assert_eq!(q[0].display_id, format!("{}_[3-9%3]", a.job));
    assert_eq!(q[0].reason, Some(PendingReason::JobArrayTaskLimit));
    cl.job_finished(JobId::task(a.job, 1), JobOutcome::Exited(0), 5)
        .unwrap();
    assert_eq!(starts(&cl.schedule(5)), vec![JobId::task(a.job, 3)]);
    // Cancel the array: pending tasks go, running ones are signalled.
    let eff = cl.cancel(a, 6).unwrap();
    assert_eq!(eff.cancelled, vec![a]);
    assert_eq!(eff.signal.len(), 3);
}

#[test]
fn dependencies_hold_begin_and_cancel() {
    let mut cl = Cluster::new(cluster(1, 8)).unwrap();
    let a = cl
        .submit(req("#SBATCH -J a --gres=gpu:1"), &alice(), 0)
        .unwrap();
    let ok = cl
        .submit(req(&format!("#SBATCH -d afterok:{}", a.job)), &alice(), 0)
        .unwrap();
    let notok = cl
        .submit(
            req(&format!("#SBATCH -d afternotok:{}", a.job)),
            &alice(),
            0,
        )
        .unwrap();
    let after = cl
        .submit(req(&format!("#SBATCH -d after:{}+1", a.job)), &alice(), 0)
        .unwrap();
    let held = cl.submit(req("#SBATCH -H"), &alice(), 0).unwrap();
    let later = cl
        .submit(req("#SBATCH --begin=now+100"), &alice(), 0)
        .unwrap();
    let single = cl
        .submit(req("#SBATCH -J a -d singleton"), &alice(), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)), vec![a]);
    assert_eq!(
        cl.job(ok, 0).unwrap().reason,
        Some(PendingReason::Dependency)
    );
    assert_eq!(
        cl.job(held, 0).unwrap().reason,
        Some(PendingReason::JobHeldUser)
    );
    assert_eq!(
        cl.job(later, 0).unwrap().reason,
        Some(PendingReason::BeginTime)
    );
    assert_eq!(
        cl.job(single, 0).unwrap().reason,
        Some(PendingReason::Dependency)
    );
    assert!(starts(&cl.schedule(30)).is_empty());
    assert_eq!(starts(&cl.schedule(60)), vec![after]);
    cl.job_finished(a, JobOutcome::Exited(0), 70).unwrap();
    let d = cl.schedule(70);
    assert!(d.contains(&Decision::Cancel {
        job: notok,
        reason: PendingReason::DependencyNeverSatisfied
    }));
    let mut s = starts(&d);
    s.sort();
    assert_eq!(s, vec![ok, single]);
    cl.hold(held, true, 70).unwrap();
    assert_eq!(cl.release(held, false, 70), Err(OpError::AdminHold(held)));
    cl.release(held, true, 70).unwrap();
    assert_eq!(starts(&cl.schedule(100)), vec![held, later]);
}

#[test]
fn time_limits_cancel_and_requeue() {
    let mut cl = Cluster::new(cluster(1, 8)).unwrap();
    let a = cl
        .submit(req("#SBATCH -t 10 --gres=gpu:8"), &alice(), 0)
        .unwrap();
    let b = cl
        .submit(req("#SBATCH -t 10 --gres=gpu:8"), &alice(), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)), vec![a]);
    let d = cl.schedule(600);
    assert_eq!(d, vec![Decision::TimeLimit { job: a }]);
    assert_eq!(cl.job(a, 600).unwrap().state, JobState::Completing);
    assert_eq!(
        cl.job_finished(a, JobOutcome::Signaled(9), 601).unwrap(),
        JobState::Timeout
    );
    assert_eq!(starts(&cl.schedule(601)), vec![b]);
    cl.requeue(b, 602).unwrap();
    assert_eq!(
        cl.job_finished(b, JobOutcome::Signaled(15), 603).unwrap(),
        JobState::Pending
    );
    assert_eq!(starts(&cl.schedule(603)), vec![b]);
    let eff = cl.cancel(b, 604).unwrap();
    assert_eq!(eff.signal, vec![b]);
    assert_eq!(
        cl.job_finished(b, JobOutcome::Signaled(15), 605).unwrap(),
        JobState::Cancelled
    );
    assert!(cl.cancel(b, 606).is_err());
}

#[test]
fn node_down_fails_and_requeues() {
    let mut cl = Cluster::new(cluster(2, 8)).unwrap();
    let a = cl.submit(req("#SBATCH --gres=gpu:8"), &alice(), 0).unwrap();
    let b = cl
        .submit(req("#SBATCH --gres=gpu:8 --no-requeue"), &alice(), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)).len(), 2);
    cl.set_node_state(
        "n01",
        NodeCommand::Drain {
            reason: "maint".into(),
        },
        1,
    )
    .unwrap();
    let d0 = cl
        .set_node_state(
            "n00",
            NodeCommand::Down {
                reason: "dead".into(),
            },
            1,
        )
        .unwrap();
    let d1 = cl
        .set_node_state(
            "n01",
            NodeCommand::Down {
                reason: "dead".into(),
            },
            1,
        )
        .unwrap();
    let all: Vec<Decision> = d0.into_iter().chain(d1).collect();
    assert!(all.contains(&Decision::NodeFail {
        job: a,
        requeued: true
    }));
    assert!(all.contains(&Decision::NodeFail {
        job: b,
        requeued: false
    }));
    assert_eq!(cl.job(b, 1).unwrap().state, JobState::NodeFail);
    assert!(starts(&cl.schedule(2)).is_empty());
    assert_eq!(
        cl.job(a, 2).unwrap().reason,
        Some(PendingReason::ReqNodeNotAvail)
    );
    assert_eq!(cl.nodes()[0].state.name(), "DOWN");
    cl.set_node_state("n00", NodeCommand::Resume, 3).unwrap();
    assert_eq!(starts(&cl.schedule(3)), vec![a]);
    assert_eq!(cl.job(a, 3).unwrap().restarts, 1);
}

#[test]
fn fairshare_favours_light_users() {
    let mut c = cluster(1, 8);
    c.priority.age = 0;
    c.priority.job_size = 0;
    let mut cl = Cluster::new(c).unwrap();
    let heavy = Owner::user("heavy");
    let light = Owner::user("light");
    let h = cl
        .submit(req("#SBATCH --gres=gpu:8 -t 60"), &heavy, 0)
        .unwrap();
    cl.schedule(0);
    cl.job_finished(h, JobOutcome::Exited(0), 3600).unwrap();
    let h2 = cl
        .submit(req("#SBATCH --gres=gpu:8"), &heavy, 3600)
        .unwrap();
    let l2 = cl
        .submit(req("#SBATCH --gres=gpu:8"), &light, 3601)
        .unwrap();
    assert!(cl.job(l2, 3601).unwrap().priority > cl.job(h2, 3601).unwrap().priority);
    assert_eq!(starts(&cl.schedule(3601)), vec![l2]);
}

#[test]
fn snapshot_restores_the_same_future() {
    let mut cl = Cluster::new(cluster(2, 8)).unwrap();
    for i in 0..6 {
        cl.submit(
            req(&format!("#SBATCH --gres=gpu:{} -t {}", i % 4 + 1, 10 + i)),
            &alice(),
            0,
        )
        .unwrap();
    }
    cl.submit(req("#SBATCH --array=0-5%2 --gres=gpu:2"), &alice(), 0)
        .unwrap();
    cl.schedule(0);
    let json = serde_json::to_string(&cl.snapshot()).unwrap();
    let mut back = Cluster::restore(serde_json::from_str(&json).unwrap()).unwrap();
    for t in [300, 700, 1200] {
        assert_eq!(cl.schedule(t), back.schedule(t));
        for j in cl.squeue(&SqueueFilter::default(), t) {
            if j.state == JobState::Running && j.end_time.is_some_and(|e| e <= t + 400) {
                cl.job_finished(j.id, JobOutcome::Exited(0), t).unwrap();
                back.job_finished(j.id, JobOutcome::Exited(0), t).unwrap();
            }
        }
    }
    assert_eq!(
        cl.squeue(&SqueueFilter::default(), 2000),
        back.squeue(&SqueueFilter::default(), 2000)
    );
}

#[test]
fn submit_with_id_and_views() {
    let mut cl = Cluster::new(cluster(1, 8)).unwrap();
    let id = cl
        .submit_with_id(500, req("#SBATCH -J nb --gres=gpu:2"), &alice(), 0)
        .unwrap();
    assert_eq!(id, JobId::new(500));
    assert!(matches!(
        cl.submit_with_id(500, JobRequest::default(), &alice(), 0),
        Err(SubmitError::DuplicateId(_))
    ));
    assert_eq!(
        cl.submit(JobRequest::default(), &alice(), 0).unwrap(),
        JobId::new(501)
    );
    cl.schedule(0);
    let q = cl.squeue(
        &SqueueFilter {
            user: Some("alice".into()),
            ..Default::default()
        },
        30,
    );
    assert_eq!(q[0].nodelist, "n00");
    assert_eq!(q[0].gres, "gpu:2");
    assert_eq!(q[0].time_used, 30);
    let s = cl.sinfo();
    assert_eq!(
        s[0].nodes_by_state,
        vec![("MIXED".to_string(), 1, "n00".to_string())]
    );
    assert_eq!(s[0].running_jobs, 2);
}

#[test]
fn capped_pass_still_reaches_jobs_beyond_the_cap() {
    let mut c = cluster(1, 4);
    c.backfill.max_job_test = 2;
    c.backfill.rotating_job_test = 1;
    let mut cl = Cluster::new(c).unwrap();
    cl.submit(req("#SBATCH --gres=gpu:4 -t 60"), &Owner::user("a"), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)).len(), 1);
    // Six heads (one queue per user) that cannot start, then a small CPU job of
    // the lowest priority that could backfill at once.
    for u in 0..6 {
        cl.submit(
            req("#SBATCH --gres=gpu:1 -t 60"),
            &Owner::user(&format!("b{u}")),
            1,
        )
        .unwrap();
    }
    let small = cl
        .submit(req("#SBATCH -t 1 --nice=1000"), &Owner::user("z"), 1)
        .unwrap();
    let first = starts(&cl.schedule(1));
    assert!(first.is_empty(), "the cap stops the first pass: {first:?}");
    let mut passes = 1;
    loop {
        passes += 1;
        if starts(&cl.schedule(1 + passes)).contains(&small) {
            break;
        }
        assert!(passes < 10, "the job beyond the cap is never examined");
    }
    // Nothing was over-allocated and the reserved job is still first.
    assert_eq!(cl.reservations().first().map(|r| r.job.job), Some(2));
}

#[test]
fn ended_jobs_are_forgotten_after_their_age_unless_a_pending_job_depends_on_them() {
    let mut cl = Cluster::new(cluster(1, 8)).unwrap();
    let done = cl.submit(req("#SBATCH --gres=gpu:1"), &alice(), 0).unwrap();
    let watched = cl.submit(req("#SBATCH --gres=gpu:1"), &alice(), 0).unwrap();
    let array = cl
        .submit(req("#SBATCH --gres=gpu:1 --array=0-1"), &alice(), 0)
        .unwrap();
    let mut s = starts(&cl.schedule(0));
    s.sort();
    assert_eq!(s.len(), 4, "{s:?}");
    cl.job_finished(done, JobOutcome::Exited(0), 10).unwrap();
    cl.job_finished(watched, JobOutcome::Exited(0), 10).unwrap();
    cl.job_finished(JobId::task(array.job, 0), JobOutcome::Exited(0), 10)
        .unwrap();
    let waiting = cl
        .submit(
            req(&format!("#SBATCH -d afterok:{} -H", watched.job)),
            &alice(),
            11,
        )
        .unwrap();
    // Not old enough yet.
    assert!(cl.purge_ended(9).is_empty());
    // Old enough: the plain job goes; the watched one stays for its dependant; the
    // array stays while a task runs.
    assert_eq!(cl.purge_ended(10), vec![done]);
    assert!(cl.job(done, 20).is_none());
    assert!(cl.job(watched, 20).is_some());
    assert!(cl.job(JobId::task(array.job, 0), 20).is_some());
    cl.job_finished(JobId::task(array.job, 1), JobOutcome::Exited(0), 30)
        .unwrap();
    let gone = cl.purge_ended(30);
    assert!(
        gone.contains(&array) || gone.contains(&JobId::task(array.job, 1)),
        "{gone:?}"
    );
    assert!(cl.job(JobId::task(array.job, 0), 40).is_none());
    assert!(cl.job(JobId::task(array.job, 1), 40).is_none());
    // The dependant still sees its target, and starts once released.
    cl.release(waiting, false, 40).unwrap();
    assert_eq!(starts(&cl.schedule(40)), vec![waiting]);
    assert!(cl.purge_ended(40).contains(&watched));
    // A forgotten job survives neither a snapshot nor a restore.
    let restored = Cluster::restore(cl.snapshot()).unwrap();
    assert!(restored.job(done, 50).is_none());
    assert!(restored.job(waiting, 50).is_some());
}

#[test]
fn test_only_answers_when_and_where_without_recording() {
    let mut cl = Cluster::new(cluster(1, 2)).unwrap();
    let running = cl
        .submit(req("#SBATCH --gres=gpu:2 -t 30\n"), &alice(), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)), [running]);
    let queued = cl
        .submit(req("#SBATCH --gres=gpu:1 -t 10\n"), &alice(), 0)
        .unwrap();
    cl.schedule(0);
    let before = cl.squeue(&SqueueFilter::default(), 10).len();

    // Free now: starts now, on the node.
    let cpu_only = cl
        .test_only(req("#SBATCH -n 1 -t 5\n"), &alice(), 10)
        .unwrap();
    assert_eq!(
        (cpu_only.start, cpu_only.nodes.as_slice()),
        (Some(10), &["n00".to_string()][..])
    );
    // Both GPUs busy until the first job's limit (30 min): behind the queued job.
    let gpu = cl
        .test_only(req("#SBATCH --gres=gpu:2 -t 10\n"), &alice(), 10)
        .unwrap();
    assert_eq!(gpu.start, Some(30 * 60), "{gpu:?}");
    assert_eq!(gpu.reason, Some(PendingReason::Resources));
    // Held: no start.
    let held = cl.test_only(req("#SBATCH -H\n"), &alice(), 10).unwrap();
    assert_eq!(
        (held.start, held.reason),
        (None, Some(PendingReason::JobHeldUser))
    );
    // Refused like a submission, and nothing was recorded.
    assert!(cl
        .test_only(req("#SBATCH -p nope\n"), &alice(), 10)
        .is_err());
    assert_eq!(cl.squeue(&SqueueFilter::default(), 10).len(), before);
    assert!(cl.job(queued, 10).is_some());
}

#[test]
fn licenses_are_counted_site_resources() {
    let mut cfg = cluster(1, 0);
    cfg.licenses.insert("scratch".into(), 2);
    let mut cl = Cluster::new(cfg).unwrap();
    let a = cl
        .submit(req("#SBATCH -L scratch:2 -t 5\n"), &alice(), 0)
        .unwrap();
    let b = cl
        .submit(req("#SBATCH -L scratch -t 5\n"), &alice(), 0)
        .unwrap();
    let free = cl.submit(req("#SBATCH -t 5\n"), &alice(), 0).unwrap();
    let started = starts(&cl.schedule(0));
    assert!(
        started.contains(&a) && started.contains(&free),
        "{started:?}"
    );
    assert!(!started.contains(&b));
    assert_eq!(cl.job(b, 0).unwrap().reason, Some(PendingReason::Licenses));
    // A restored cluster counts the licenses its running jobs hold.
    let mut restored = Cluster::restore(cl.snapshot()).unwrap();
    assert!(starts(&restored.schedule(1)).is_empty());
    cl.job_finished(a, JobOutcome::Exited(0), 60).unwrap();
    assert_eq!(starts(&cl.schedule(60)), [b]);
    let e = cl
        .submit(req("#SBATCH -L matlab\n"), &alice(), 60)
        .unwrap_err();
    assert!(e.to_string().contains("no such license \"matlab\""), "{e}");
    let e = cl
        .submit(req("#SBATCH -L scratch:3\n"), &alice(), 60)
        .unwrap_err();
    assert!(e.to_string().contains("the cluster has 2"), "{e}");
}

#[test]
fn a_job_that_cannot_end_by_its_deadline_is_removed() {
    let mut cl = Cluster::new(cluster(1, 1)).unwrap();
    // Cannot end by then even if it started now.
    let late = cl
        .submit(req("#SBATCH -t 30 --deadline=now+10minutes\n"), &alice(), 0)
        .unwrap();
    cl.schedule(0);
    let v = cl.job(late, 0).unwrap();
    assert_eq!(v.state, JobState::Deadline);
    // Fits now, but waits behind a job holding the GPU until its limit passes the deadline.
    let busy = cl
        .submit(req("#SBATCH --gres=gpu:1 -t 60\n"), &alice(), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)), [busy]);
    let waits = cl
        .submit(
            req("#SBATCH --gres=gpu:1 -t 30 --deadline=now+45minutes\n"),
            &alice(),
            0,
        )
        .unwrap();
    cl.schedule(0);
    assert_eq!(cl.job(waits, 0).unwrap().state, JobState::Pending);
    cl.schedule(15 * 60 + 1);
    assert_eq!(
        cl.job(waits, 15 * 60 + 1).unwrap().state,
        JobState::Deadline
    );
}

#[test]
fn time_min_lets_backfill_start_a_job_with_a_shorter_limit() {
    let mut cl = Cluster::new(cluster(1, 1)).unwrap();
    let busy = cl
        .submit(req("#SBATCH --gres=gpu:1 -t 60\n"), &alice(), 0)
        .unwrap();
    assert_eq!(starts(&cl.schedule(0)), [busy]);
    // Waits for the GPU: reserved from minute 60 with 40 CPUs.
    let top = cl
        .submit(req("#SBATCH --gres=gpu:1 -c 40 -t 30\n"), &alice(), 0)
        .unwrap();
    // 32 CPUs for 2 hours would delay it; at least 30 minutes fit before minute 60.
    let flexible = cl
        .submit(req("#SBATCH -c 32 -t 120 --time-min=30\n"), &alice(), 0)
        .unwrap();
    let rigid = cl
        .submit(req("#SBATCH -c 32 -t 120\n"), &alice(), 0)
        .unwrap();
    let started = starts(&cl.schedule(0));
    assert_eq!(started, [flexible], "{top:?} {rigid:?}");
    let v = cl.job(flexible, 0).unwrap();
    let TimeLimit::Seconds(limit) = v.time_limit else {
        panic!("{v:?}")
    };
    assert!((30 * 60..=60 * 60).contains(&limit), "{limit}");
    assert!(limit >= 59 * 60, "the longest limit that fits: {limit}");
}

#[test]
fn a_list_of_partitions_runs_in_the_first_that_can_hold_the_job() {
    let mut cfg = cluster(1, 1);
    let mut short = cfg.partitions[0].clone();
    short.name = "debug".into();
    short.default = false;
    short.max_time_secs = Some(3600);
    cfg.partitions.insert(0, short);
    let mut cl = Cluster::new(cfg).unwrap();
    let fits = cl
        .submit(req("#SBATCH -p debug,gpu -t 30\n"), &alice(), 0)
        .unwrap();
    let long = cl
        .submit(req("#SBATCH -p debug,gpu -t 600\n"), &alice(), 0)
        .unwrap();
    assert_eq!(cl.job(fits, 0).unwrap().partition, "debug");
    assert_eq!(
        cl.job(long, 0).unwrap().partition,
        "gpu",
        "over debug's limit"
    );
    let e = cl
        .submit(req("#SBATCH -p nowhere,debug -t 600\n"), &alice(), 0)
        .unwrap_err();
    assert!(
        matches!(e, SubmitError::UnknownPartition(ref p) if p == "nowhere"),
        "{e}"
    );
}

#[test]
fn max_job_count_and_a_default_per_user_limit_refuse_submissions() {
    let mut cfg = cluster(1, 0);
    cfg.max_job_count = Some(5);
    cfg.default_max_submitted_jobs = Some(3);
    let mut cl = Cluster::new(cfg).unwrap();
    let bob = Owner::user("bob");
    for _ in 0..3 {
        cl.submit(req("#SBATCH -H\n"), &alice(), 0).unwrap();
    }
    let e = cl.submit(req("#SBATCH -H\n"), &alice(), 0).unwrap_err();
    assert!(
        matches!(
            e,
            SubmitError::LimitExceeded {
                reason: "AssocMaxSubmitJobLimit",
                ..
            }
        ),
        "{e}"
    );
    cl.submit(req("#SBATCH -H\n"), &bob, 0).unwrap();
    // An array counts its tasks.
    let e = cl.submit(req("#SBATCH -H -a 0-1\n"), &bob, 0).unwrap_err();
    assert_eq!(e, SubmitError::TooManyJobs { limit: 5 });
    assert!(e.to_string().contains("MaxJobCount"), "{e}");
    cl.submit(req("#SBATCH -H\n"), &bob, 0).unwrap();
}

#[test]
fn a_page_of_squeue_builds_only_its_lines_and_counts_all() {
    let mut cl = Cluster::new(cluster(1, 0)).unwrap();
    let ids: Vec<JobId> = (0..25)
        .map(|_| cl.submit(req("#SBATCH -H\n"), &alice(), 0).unwrap())
        .collect();
    let all = cl.squeue(&SqueueFilter::default(), 0);
    let (page, total) = cl.squeue_page(&SqueueFilter::default(), 10, 10, 0);
    assert_eq!(total, 25);
    assert_eq!(page, all[10..20].to_vec());
    assert_eq!(page[0].id, ids[10]);
    let (last, _) = cl.squeue_page(&SqueueFilter::default(), 20, 10, 0);
    assert_eq!(last.len(), 5);
    let (none, total) = cl.squeue_page(&SqueueFilter::default(), 100, 10, 0);
    assert!(none.is_empty());
    assert_eq!(total, 25);
}

#[test]
fn a_pending_jobs_request_changes_and_it_keeps_its_id_and_place_in_time() {
    let mut cl = Cluster::new(cluster(1, 1)).unwrap();
    cl.submit(req("#SBATCH --gres=gpu:1"), &alice(), 0).unwrap();
    cl.schedule(0);
    let id = cl
        .submit(req("#SBATCH --gres=gpu:1 -t 10"), &alice(), 10)
        .unwrap();
    cl.schedule(10);
    let before = cl.job(id, 20).unwrap();
    assert_eq!(before.state, JobState::Pending);
    cl.update_pending(id, req("#SBATCH --gres=gpu:1 -t 2:00:00"), 30)
        .unwrap();
    let after = cl.job(id, 30).unwrap();
    assert_eq!(after.time_limit, TimeLimit::Seconds(7200));
    assert_eq!(after.submit_time, before.submit_time);
    assert_eq!(after.state, JobState::Pending);
    // A refusal changes nothing.
    assert!(cl
        .update_pending(id, req("#SBATCH --gres=gpu:1 -p nowhere"), 40)
        .is_err());
    assert_eq!(cl.job(id, 40).unwrap().time_limit, TimeLimit::Seconds(7200));
    // It still runs when the GPU is free, with its new limit.
    assert!(
        cl.update_pending(JobId::new(1), req("-t 5"), 50).is_err(),
        "running"
    );
}

/// One GPU, taken by alice's job 1; her two next (`first`, then `second` with
/// `second_options`) wait, scheduled at 1000.
fn two_waiting(second_options: &str) -> (Cluster, JobId, JobId) {
    let mut cl = Cluster::new(cluster(1, 1)).unwrap();
    cl.submit(req("#SBATCH --gres=gpu:1"), &alice(), 0).unwrap();
    cl.schedule(0);
    let first = cl
        .submit(req("#SBATCH --gres=gpu:1"), &alice(), 10)
        .unwrap();
    let second = cl
        .submit(
            req(&format!("#SBATCH --gres=gpu:1 {second_options}")),
            &alice(),
            20,
        )
        .unwrap();
    cl.schedule(1000);
    (cl, first, second)
}

#[test]
fn top_puts_a_job_before_its_owners_others() {
    let (mut cl, first, second) = two_waiting("");
    cl.top(second, 1000).unwrap();
    let p = |c: &Cluster, id| c.job(id, 1000).unwrap().priority;
    assert!(
        p(&cl, second) > p(&cl, first),
        "{} {}",
        p(&cl, second),
        p(&cl, first)
    );
}

#[test]
fn an_administrators_nice_replaces_the_jobs_own_and_moves_it_in_the_queue() {
    let (mut cl, first, polite) = two_waiting("--nice=100");
    let p = |c: &Cluster, id| c.job(id, 1000).unwrap().priority;
    assert!(p(&cl, polite) < p(&cl, first));
    // Nice=-50: 150 above where --nice=100 had put it, and before the other.
    let before = p(&cl, polite);
    cl.set_nice(polite, -50, 1000).unwrap();
    assert_eq!(p(&cl, polite), before + 150);
    assert_eq!(cl.job(polite, 1000).unwrap().admin_nice, -150);
    assert!(p(&cl, polite) > p(&cl, first));
    // Nice=0 again: as if it had asked for none.
    cl.set_nice(polite, 0, 1000).unwrap();
    assert_eq!(p(&cl, polite), before + 100);
    // A running job keeps its priority.
    assert!(cl.set_nice(JobId::new(1), -10, 1000).is_err());
}
