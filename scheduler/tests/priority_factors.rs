//! The factors of a pending job's priority (`sprio`) and the fair-share tree
//! (`sshare`), through the public API: the factors add up to the priority the
//! scheduler gives, and each is what its weight and its definition make it.
#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use scheduler::*;

fn owner(user: &str, account: &str) -> Owner {
    Owner {
        account: account.into(),
        ..Owner::user(user)
    }
}

/// A full node and jobs of three owners waiting behind it, one with a nice value.
fn busy_cluster() -> (Cluster, Vec<JobId>) {
    let mut c = cluster(1, 8);
    c.priority.calc_period_secs = 60;
    let mut cl = Cluster::new(c).unwrap();
    let big = cl
        .submit(req("#SBATCH --gres=gpu:8 -t 600"), &owner("ann", "phys"), 0)
        .unwrap();
    cl.schedule(0);
    let mut waiting = vec![big];
    waiting.push(
        cl.submit(req("#SBATCH --gres=gpu:2"), &owner("ann", "phys"), 10)
            .unwrap(),
    );
    waiting.push(
        cl.submit(req("#SBATCH --gres=gpu:4"), &owner("bob", "chem"), 20)
            .unwrap(),
    );
    waiting.push(
        cl.submit(
            req("#SBATCH --gres=gpu:1 --nice=100"),
            &owner("cid", "chem"),
            30,
        )
        .unwrap(),
    );
    (cl, waiting)
}

#[test]
fn the_factors_add_up_to_the_priority_the_scheduler_gives() {
    let (mut cl, jobs) = busy_cluster();
    // A recomputation at 5000 s (the running job charges its account meanwhile).
    cl.schedule(5000);
    let list = cl.priority_factors_list(&PriorityFilter::default(), 5000);
    let ids: Vec<JobId> = list.jobs.iter().map(|v| v.id).collect();
    assert_eq!(ids, jobs[1..], "the pending jobs, in id order");
    for v in &list.jobs {
        let stored = cl.job(v.id, 5000).unwrap().priority;
        assert_eq!(v.priority, stored, "{v:?}");
        assert_eq!(v.factors.priority(), stored);
        let w = &list.weights;
        let (n, wt) = (&v.factors.normalized, &v.factors.weighted);
        assert_eq!(wt.age, f64::from(w.age) * n.age);
        assert_eq!(wt.fairshare, f64::from(w.fairshare) * n.fairshare);
        assert_eq!(wt.job_size, f64::from(w.job_size) * n.job_size);
        assert_eq!(wt.partition, f64::from(w.partition) * n.partition);
        assert_eq!(wt.qos, f64::from(w.qos) * n.qos);
        for f in [n.age, n.fairshare, n.job_size, n.partition, n.qos] {
            assert!((0.0..=1.0).contains(&f), "{v:?}");
        }
        assert_eq!(
            stored,
            (wt.age + wt.fairshare + wt.job_size + wt.partition + wt.qos).round() as i64
                - v.factors.nice
        );
    }
    let nice = list.jobs.iter().find(|v| v.id == jobs[3]).unwrap();
    assert_eq!(nice.factors.nice, 100);
}

#[test]
fn each_factor_is_what_its_definition_makes_it() {
    let (mut cl, jobs) = busy_cluster();
    let week = 7 * 86_400;
    cl.schedule(10 + week / 2);
    let list = cl.priority_factors_list(&PriorityFilter::default(), 10 + week / 2);
    let v = list.jobs.iter().find(|v| v.id == jobs[1]).unwrap();
    let n = v.factors.normalized;
    // Eligible at 10 s: half of the 7-day maximum age.
    assert_eq!(n.age, 0.5);
    assert_eq!(v.factors.weighted.age, 500.0);
    // 2 GPUs of 8.
    assert_eq!(n.job_size, 0.25);
    // No partition tiers, no QOS priorities configured.
    assert_eq!((n.partition, n.qos), (0.0, 0.0));
    // The only account with usage so far is `phys`: all the usage, half the shares.
    assert_eq!(n.fairshare, 0.25, "2^(-1/0.5)");
    // 1000 × 0.5 + 10000 × 0.25 + 1000 × 0.25, the default weights.
    assert_eq!(v.priority, 3250);
    assert_eq!(cl.job(v.id, 10 + week / 2).unwrap().priority, 3250);
    let chem = list.jobs.iter().find(|v| v.id == jobs[2]).unwrap();
    assert_eq!(chem.factors.normalized.fairshare, 1.0);
    assert_eq!(v.user, "ann");
    assert_eq!(v.account, "phys");
    assert_eq!(v.partition, "gpu");
}

#[test]
fn held_and_running_jobs_have_no_factors_and_filters_narrow_the_list() {
    let (mut cl, jobs) = busy_cluster();
    cl.hold(jobs[2], false, 40).unwrap();
    let all = cl.priority_factors_list(&PriorityFilter::default(), 50);
    let ids: Vec<JobId> = all.jobs.iter().map(|v| v.id).collect();
    assert_eq!(
        ids,
        [jobs[1], jobs[3]],
        "neither the running nor the held job"
    );
    let by_user = PriorityFilter {
        users: vec!["cid".into()],
        ..PriorityFilter::default()
    };
    let only: Vec<JobId> = cl
        .priority_factors_list(&by_user, 50)
        .jobs
        .iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(only, [jobs[3]]);
    let by_id = PriorityFilter {
        ids: vec![jobs[1].job],
        partitions: vec!["gpu".into()],
        ..PriorityFilter::default()
    };
    assert_eq!(cl.priority_factors_list(&by_id, 50).jobs.len(), 1);
    let elsewhere = PriorityFilter {
        partitions: vec!["other".into()],
        ..PriorityFilter::default()
    };
    assert!(cl.priority_factors_list(&elsewhere, 50).jobs.is_empty());
}

#[test]
fn shares_are_the_figures_of_the_fairshare_factor() {
    let (mut cl, jobs) = busy_cluster();
    cl.job_finished(jobs[0], JobOutcome::Exited(0), 100)
        .unwrap();
    cl.schedule(100);
    let view = cl.shares(100);
    let names: Vec<&str> = view.accounts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["chem", "phys"]);
    let phys = &view.accounts[1];
    let chem = &view.accounts[0];
    assert_eq!((phys.raw_shares, phys.norm_shares), (1, 0.5));
    assert!(phys.raw_usage > 0.0);
    assert_eq!(view.total_usage, phys.raw_usage + chem.raw_usage);
    assert_eq!(chem.raw_usage, 0.0);
    assert_eq!(phys.effective_usage, 1.0);
    assert_eq!(phys.fairshare, 0.25);
    assert_eq!(chem.fairshare, 1.0);
    let users: Vec<&str> = chem.users.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(users, ["bob", "cid"]);
    assert_eq!(phys.users[0].name, "ann");
    assert_eq!(phys.users[0].raw_usage, phys.raw_usage);
    // What the factors of a pending job of `phys` are computed from.
    cl.submit(req("#SBATCH --gres=gpu:8"), &owner("ann", "phys"), 100)
        .unwrap();
    let list = cl.priority_factors_list(&PriorityFilter::default(), 100);
    let ann = list.jobs.iter().find(|v| v.user == "ann").unwrap();
    assert_eq!(ann.factors.normalized.fairshare, phys.fairshare);
}
