//! Property tests over random clusters and random operation sequences: no node is
//! over-allocated, no limit is exceeded, no job starts before its dependencies or
//! begin time, backfill never delays a reserved job, and snapshot → restore gives
//! the same future decisions.
#![allow(clippy::unwrap_used)]

mod common;
use common::*;
use proptest::prelude::*;
use scheduler::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
enum Op {
    Submit {
        user: u8,
        gpus: u8,
        mig: bool,
        nodes: u8,
        minutes: u8,
        array: u8,
        dep: bool,
        begin: u8,
    },
    Finish {
        pick: u16,
        code: i8,
    },
    Cancel {
        pick: u16,
    },
    Tick {
        secs: u16,
    },
    Drain {
        node: u8,
    },
    Down {
        node: u8,
    },
    Resume {
        node: u8,
    },
    Hold {
        pick: u16,
        admin: bool,
    },
    Release {
        pick: u16,
    },
    Requeue {
        pick: u16,
    },
    /// Forget what ended (`MinJobAge`).
    Purge,
    /// Snapshot and restore the whole cluster.
    Restore,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u8..4, 0u8..9, any::<bool>(), 1u8..3, 1u8..60, 0u8..4, any::<bool>(), 0u8..3).prop_map(
            |(user, gpus, mig, nodes, minutes, array, dep, begin)| Op::Submit { user, gpus, mig, nodes, minutes, array, dep, begin }
        ),
        3 => (any::<u16>(), -1i8..2).prop_map(|(pick, code)| Op::Finish { pick, code }),
        1 => any::<u16>().prop_map(|pick| Op::Cancel { pick }),
        3 => (1u16..4000).prop_map(|secs| Op::Tick { secs }),
        1 => (0u8..4).prop_map(|node| Op::Drain { node }),
        1 => (0u8..4).prop_map(|node| Op::Down { node }),
        1 => (0u8..4).prop_map(|node| Op::Resume { node }),
        1 => (any::<u16>(), any::<bool>()).prop_map(|(pick, admin)| Op::Hold { pick, admin }),
        1 => any::<u16>().prop_map(|pick| Op::Release { pick }),
        1 => any::<u16>().prop_map(|pick| Op::Requeue { pick }),
        1 => Just(Op::Purge),
        1 => Just(Op::Restore),
    ]
}

fn config(nodes: usize, with_mig: bool, resv: usize) -> ClusterConfig {
    let mut c = cluster(nodes, 4);
    if with_mig {
        c.nodes[0] = mig_node("n00");
    }
    c.limits.default_user.max_gpus = Some(6);
    c.limits.default_user.max_running_jobs = Some(5);
    c.limits.groups.insert(
        "team".into(),
        Limits {
            max_gpus: Some(9),
            ..Default::default()
        },
    );
    c.limits.default_user.max_gpu_minutes = Some(2000);
    c.backfill.max_reservations = resv;
    c.priority.calc_period_secs = 1_000_000;
    c
}

fn owner(u: u8) -> Owner {
    Owner {
        groups: vec!["team".into()],
        ..Owner::user(&format!("u{u}"))
    }
}

struct Run {
    cl: Cluster,
    now: Time,
    submitted: Vec<JobId>,
    started_at: BTreeMap<JobId, Time>,
    /// Job number → (afterany target, begin time) as submitted.
    rules: BTreeMap<u64, (Option<u64>, Time)>,
}

impl Run {
    fn apply(&mut self, op: &Op) -> Vec<Decision> {
        let mut out = Vec::new();
        match *op {
            Op::Submit {
                user,
                gpus,
                mig,
                nodes,
                minutes,
                array,
                dep,
                begin,
            } => {
                let mut s = format!("#SBATCH -N {nodes} -t {minutes}");
                if gpus > 0 {
                    if mig {
                        s.push_str(" --gres=gpu:1g.10gb:1");
                    } else {
                        s.push_str(&format!(" --gres=gpu:{}", gpus.min(4)));
                    }
                }
                if array > 0 {
                    s.push_str(&format!(" --array=0-{}%2", array));
                }
                let mut target = None;
                if dep {
                    if let Some(last) = self.submitted.last() {
                        s.push_str(&format!(" -d afterany:{}", last.job));
                        target = Some(last.job);
                    }
                }
                if begin > 0 {
                    s.push_str(&format!(" --begin=now+{}", u32::from(begin) * 500));
                }
                if let Ok(id) = self.cl.submit(req(&s), &owner(user), self.now) {
                    self.submitted.push(id);
                    self.rules
                        .insert(id.job, (target, self.now + i64::from(begin) * 500));
                }
            }
            Op::Finish { pick, code } => {
                let running: Vec<JobId> = self
                    .cl
                    .squeue(
                        &SqueueFilter {
                            states: vec![JobState::Running, JobState::Completing],
                            ..Default::default()
                        },
                        self.now,
                    )
                    .iter()
                    .map(|j| j.id)
                    .collect();
                if !running.is_empty() {
                    let id = running[pick as usize % running.len()];
                    self.cl
                        .job_finished(id, JobOutcome::Exited(i32::from(code)), self.now)
                        .unwrap();
                }
            }
            Op::Cancel { pick } => {
                if !self.submitted.is_empty() {
                    let id = self.submitted[pick as usize % self.submitted.len()];
                    let _ = self.cl.cancel(id, self.now);
                }
            }
            Op::Tick { secs } => self.now += i64::from(secs),
            Op::Drain { node } => {
                let _ = self.cl.set_node_state(
                    &format!("n{node:02}"),
                    NodeCommand::Drain { reason: "t".into() },
                    self.now,
                );
            }
            Op::Down { node } => {
                out.extend(
                    self.cl
                        .set_node_state(
                            &format!("n{node:02}"),
                            NodeCommand::Down { reason: "t".into() },
                            self.now,
                        )
                        .unwrap_or_default(),
                );
            }
            Op::Resume { node } => {
                let _ =
                    self.cl
                        .set_node_state(&format!("n{node:02}"), NodeCommand::Resume, self.now);
            }
            Op::Hold { pick, admin } => {
                if let Some(id) = self.pick(pick) {
                    let _ = self.cl.hold(id, admin, self.now);
                }
            }
            Op::Release { pick } => {
                if let Some(id) = self.pick(pick) {
                    let _ = self.cl.release(id, true, self.now);
                }
            }
            Op::Requeue { pick } => {
                if let Some(id) = self.pick(pick) {
                    let _ = self.cl.requeue(id, self.now);
                }
            }
            Op::Purge => {
                self.cl.purge_ended(self.now);
            }
            Op::Restore => {
                self.cl = Cluster::restore(self.cl.snapshot()).unwrap();
            }
        }
        let d = self.cl.schedule(self.now);
        // The server kills jobs at their time limit at once.
        for x in &d {
            if let Decision::TimeLimit { job } = x {
                self.cl
                    .job_finished(*job, JobOutcome::Signaled(9), self.now)
                    .unwrap();
            }
            if let Decision::Start { job, .. } = x {
                self.started_at.insert(*job, self.now);
            }
        }
        out.extend(d);
        out
    }

    /// One of the jobs the cluster knows (array tasks included).
    fn pick(&self, pick: u16) -> Option<JobId> {
        let known = self.cl.squeue(
            &SqueueFilter {
                include_finished: true,
                ..Default::default()
            },
            self.now,
        );
        (!known.is_empty()).then(|| known[pick as usize % known.len()].id)
    }

    fn check_invariants(&self) {
        let cfg = self.cl.config();
        // squeue's index of lines: what a walk of every job finds, and a page of it
        // what the whole listing has there.
        assert!(
            self.cl.lines_consistent(),
            "squeue's lines differ from the jobs"
        );
        let mut counted = QueueCounts::default();
        for view in self.cl.squeue(&SqueueFilter::default(), self.now) {
            counted.add(&view);
        }
        assert_eq!(self.cl.queue_counts(), counted);
        let everything = self.cl.squeue(
            &SqueueFilter {
                include_finished: true,
                ..Default::default()
            },
            self.now,
        );
        for filter in [
            SqueueFilter::default(),
            SqueueFilter {
                user: Some("u1".into()),
                ..Default::default()
            },
            SqueueFilter {
                states: vec![JobState::Pending, JobState::Completing],
                ..Default::default()
            },
        ] {
            let listed = self.cl.squeue(&filter, self.now);
            let walked: Vec<&JobView> = everything
                .iter()
                .filter(|j| {
                    !j.state.is_terminal()
                        && filter.user.as_ref().is_none_or(|u| j.user == *u)
                        && (filter.states.is_empty() || filter.states.contains(&j.state))
                })
                .collect();
            assert_eq!(listed.iter().collect::<Vec<_>>(), walked, "{filter:?}");
            let (page, total) = self.cl.squeue_page(&filter, 2, 3, self.now);
            assert_eq!(total, listed.len() as u64);
            assert_eq!(
                page,
                listed.iter().skip(2).take(3).cloned().collect::<Vec<_>>()
            );
        }
        // Nodes: never over-allocated, slices used at most once.
        let running = self.cl.squeue(
            &SqueueFilter {
                states: vec![JobState::Running, JobState::Completing],
                ..Default::default()
            },
            self.now,
        );
        let mut cpus: BTreeMap<String, u64> = BTreeMap::new();
        let mut mem: BTreeMap<String, u64> = BTreeMap::new();
        let mut slices: BTreeMap<(String, SliceId), JobId> = BTreeMap::new();
        let mut gpus_by_user: BTreeMap<String, f64> = BTreeMap::new();
        let mut jobs_by_user: BTreeMap<String, u32> = BTreeMap::new();
        for j in &running {
            *jobs_by_user.entry(j.user.clone()).or_default() += 1;
            for n in &j.allocation.as_ref().unwrap().nodes {
                *cpus.entry(n.node.clone()).or_default() += u64::from(n.cpus);
                *mem.entry(n.node.clone()).or_default() += n.memory_mb;
                for s in &n.slices {
                    if let Some(other) = slices.insert((n.node.clone(), s.clone()), j.id) {
                        panic!("slice {s:?} of {} given to {} and {}", n.node, other, j.id);
                    }
                    *gpus_by_user.entry(j.user.clone()).or_default() += match s {
                        SliceId::Gpu { .. } => 1.0,
                        SliceId::Mig { .. } => 1.0 / 7.0,
                        SliceId::Shard { .. } => 0.25,
                    };
                }
            }
        }
        for n in &cfg.nodes {
            assert!(
                cpus.get(&n.name).copied().unwrap_or(0) <= u64::from(n.cpus),
                "CPUs of {} over-allocated",
                n.name
            );
            assert!(
                mem.get(&n.name).copied().unwrap_or(0) <= n.memory_mb,
                "memory of {} over-allocated",
                n.name
            );
        }
        for v in self.cl.nodes() {
            for s in &v.slices {
                assert!(s.used <= s.total);
            }
        }
        // Limits.
        let lim = &cfg.limits.default_user;
        let mut team = 0.0;
        for (u, g) in &gpus_by_user {
            assert!(
                *g <= f64::from(lim.max_gpus.unwrap()) + 1e-9,
                "{u} uses {g} GPUs"
            );
            team += g;
        }
        assert!(team <= 9.0 + 1e-9, "team uses {team} GPUs");
        for (u, n) in &jobs_by_user {
            assert!(*n <= lim.max_running_jobs.unwrap(), "{u} runs {n} jobs");
        }
    }
}

fn new_run(nodes: usize, mig: bool, resv: usize) -> Run {
    Run {
        cl: Cluster::new(config(nodes, mig, resv)).unwrap(),
        now: 0,
        submitted: Vec::new(),
        started_at: BTreeMap::new(),
        rules: BTreeMap::new(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_for_random_operations(
        nodes in 1usize..5, mig in any::<bool>(), resv in 1usize..4,
        ops in prop::collection::vec(op(), 1..80),
    ) {
        let mut run = new_run(nodes, mig, resv);
        for o in &ops {
            run.apply(o);
            run.check_invariants();
        }
        for (id, t) in &run.started_at {
            // (Unless it ended and was forgotten since.)
            if let Some(v) = run.cl.job(*id, run.now) {
                prop_assert!(v.submit_time <= *t);
            }
        }
    }

    #[test]
    fn dependencies_and_begin_times_are_respected(ops in prop::collection::vec(op(), 1..60)) {
        let mut run = new_run(3, false, 2);
        for o in &ops {
            let d = run.apply(o);
            for x in &d {
                if let Decision::Start { job, .. } = x {
                    let (dep, begin) = run.rules.get(&job.job).cloned().unwrap_or((None, 0));
                    prop_assert!(run.now >= begin, "{} started at {} before its begin time {}", job, run.now, begin);
                    if let Some(t) = dep {
                        // Forgotten (`Purge`) only once over.
                        if let Some(v) = run.cl.job(JobId::new(t), run.now) {
                            prop_assert!(v.state.is_terminal(), "{} started while {} is {}", job, t, v.state);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn backfill_never_delays_the_reserved_job(
        sizes in prop::collection::vec((1u8..5, 1u8..120), 2..14),
        top in (1u8..5, 1u8..120),
    ) {
        let mut c = cluster(2, 4);
        c.backfill.max_reservations = 1;
        c.priority.calc_period_secs = 1_000_000;
        c.priority.age = 0;
        let mut cl = Cluster::new(c).unwrap();
        let o = Owner::user("a");
        // Fill the cluster, then queue a top job and many candidates.
        for (g, m) in &sizes[..2] {
            cl.submit(req(&format!("#SBATCH --gres=gpu:{g} -t {m}")), &o, 0).unwrap();
        }
        cl.schedule(0);
        let top_id = cl.submit(req(&format!("#SBATCH -N 2 --gres=gpu:{} -t {}", top.0.min(4), top.1)), &o, 1).unwrap();
        cl.set_admin_nice(top_id, -100_000, 1).unwrap();
        for (g, m) in &sizes[2..] {
            cl.submit(req(&format!("#SBATCH --gres=gpu:{g} -t {m}")), &o, 1).unwrap();
        }
        let mut now = 1;
        let first = cl.schedule(now);
        if first.contains(&Decision::Start { job: top_id, allocation: match first.iter().find_map(|d| match d {
            Decision::Start { job, allocation } if *job == top_id => Some(allocation.clone()),
            _ => None,
        }) { Some(a) => a, None => Allocation { nodes: vec![] } } }) {
            return Ok(());
        }
        let Some(r) = cl.reservations().first().cloned() else { return Ok(()) };
        prop_assert_eq!(r.job, top_id);
        // Run forward: jobs end exactly at their limits, no new work arrives.
        let mut started = None;
        for _ in 0..200 {
            let next_end = cl
                .squeue(&SqueueFilter { states: vec![JobState::Running], ..Default::default() }, now)
                .iter()
                .filter_map(|j| j.end_time)
                .min();
            let Some(t) = next_end else { break };
            now = t.max(now);
            for x in cl.schedule(now) {
                match x {
                    Decision::TimeLimit { job } => { cl.job_finished(job, JobOutcome::Signaled(9), now).unwrap(); }
                    Decision::Start { job, .. } if job == top_id => started = Some(now),
                    _ => {}
                }
            }
            for x in cl.schedule(now) {
                if let Decision::Start { job, .. } = x {
                    if job == top_id { started = Some(now); }
                }
            }
            if started.is_some() { break; }
        }
        let s = started.expect("the reserved job starts");
        prop_assert!(s <= r.start, "reserved for {} but started at {}", r.start, s);
    }

    #[test]
    fn snapshot_restore_gives_the_same_decisions(
        ops in prop::collection::vec(op(), 1..50),
        more in prop::collection::vec(op(), 1..30),
    ) {
        let mut a = new_run(3, true, 2);
        for o in &ops {
            a.apply(o);
        }
        let json = serde_json::to_string(&a.cl.snapshot()).unwrap();
        let restored = Cluster::restore(serde_json::from_str(&json).unwrap()).unwrap();
        let mut b = Run { cl: restored, now: a.now, submitted: a.submitted.clone(), started_at: BTreeMap::new(), rules: a.rules.clone() };
        for o in &more {
            let da = a.apply(o);
            let db = b.apply(o);
            prop_assert_eq!(da, db);
        }
        prop_assert_eq!(
            a.cl.squeue(&SqueueFilter { include_finished: true, ..Default::default() }, a.now),
            b.cl.squeue(&SqueueFilter { include_finished: true, ..Default::default() }, b.now)
        );
    }
}
