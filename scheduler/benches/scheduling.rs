//! Criterion benchmarks: (a) a full pass with 100,000 pending jobs of mixed shapes
//! on 1,000 nodes × 8 GPUs, (b) the decision after one running job completes with
//! that queue, (c) 100,000 submissions. A counting allocator measures the memory
//! held per pending job.
#![allow(clippy::unwrap_used)]
// The counting allocator wraps the system allocator; nothing else is unsafe.
#![allow(unsafe_code)]

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use scheduler::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn config() -> ClusterConfig {
    let nodes: Vec<NodeConfig> = (0..1000)
        .map(|i| {
            let name = format!("n{i:04}");
            let gpus = (0..8)
                .map(|g| GpuConfig {
                    index: g,
                    uuid: format!("GPU-{i}-{g}"),
                    model: "H100-80GB".into(),
                    memory_mb: 81_920,
                    // Every tenth node has two GPUs split into MIG instances.
                    mode: if i % 10 == 0 && g < 2 {
                        GpuMode::Mig(
                            ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
                                .iter()
                                .enumerate()
                                .map(|(k, p)| MigInstanceConfig {
                                    profile: (*p).into(),
                                    uuid: format!("MIG-{i}-{g}-{k}"),
                                })
                                .collect(),
                        )
                    } else {
                        GpuMode::Whole
                    },
                })
                .collect();
            NodeConfig {
                name,
                cpus: 128,
                memory_mb: 1024 * 1024,
                features: vec![],
                gpus,
            }
        })
        .collect();
    let mut p = PartitionConfig::new("gpu", nodes.iter().map(|n| n.name.clone()).collect());
    p.default = true;
    p.default_time_secs = Some(4 * 3600);
    p.max_time_secs = Some(7 * 86_400);
    ClusterConfig {
        nodes,
        partitions: vec![p],
        ..Default::default()
    }
}

/// Mixed shapes: 1–8 GPUs, MIG slices, multi-node, arrays (1 in 50 is a
/// 20-task array, so 100,000 submissions hold ~138,000 pending tasks). With
/// `varied`, time limits are spread over 590 distinct values (10 min – 10 h), so
/// there are about 30,000 queues (shape × limit × user) instead of 2,000.
fn requests(n: usize, varied: bool) -> Vec<(JobRequest, Owner)> {
    (0..n)
        .map(|i| {
            let shape = match i % 10 {
                0..=3 => format!("--gres=gpu:{}", 1 + i % 4),
                4 | 5 => "--gres=gpu:8".to_string(),
                6 => "--gres=gpu:1g.10gb:1".to_string(),
                7 => "--gres=gpu:3g.40gb:1".to_string(),
                8 => "-N 2 --gres=gpu:8".to_string(),
                _ => "-N 4 --ntasks-per-node 8 --gres=gpu:8".to_string(),
            };
            let array = if i % 50 == 0 { " --array=0-19%4" } else { "" };
            // Users pick round time limits: 30 min to 8 h.
            let time = if varied {
                10 + (i * 7919) % 590
            } else {
                [30, 60, 120, 240, 480][(i / 10) % 5]
            };
            let r = parse_script(&format!(
                "#SBATCH {shape} -t {time}{array} -J job{}\n",
                i % 100
            ))
            .unwrap();
            (r, Owner::user(&format!("user{}", i % 50)))
        })
        .collect()
}

fn loaded(varied: bool) -> Cluster {
    let mut cl = Cluster::new(config()).unwrap();
    for (r, o) in requests(100_000, varied) {
        cl.submit(r, &o, 0).unwrap();
    }
    cl
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("scheduler");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(12))
        .warm_up_time(Duration::from_secs(1));

    // Memory per pending job.
    let reqs = requests(100_000, false);
    let before = LIVE.load(Ordering::Relaxed);
    let mut cl = Cluster::new(config()).unwrap();
    let base = LIVE.load(Ordering::Relaxed) - before;
    for (r, o) in reqs.iter().cloned() {
        cl.submit(r, &o, 0).unwrap();
    }
    let used = LIVE.load(Ordering::Relaxed) - before - base;
    let tasks: u64 = cl.sinfo().iter().map(|p| p.pending_jobs).sum();
    println!(
        "memory: {used} bytes for 100000 pending submissions ({tasks} pending tasks): {} bytes per submission, {} per task",
        used / 100_000,
        used as u64 / tasks
    );
    drop(cl);

    for varied in [false, true] {
        let tag = if varied { "_varied_limits" } else { "" };
        // (c) 100,000 submissions.
        g.bench_function(format!("submit_100k{tag}"), |b| {
            b.iter_batched(
                || (Cluster::new(config()).unwrap(), requests(100_000, varied)),
                |(mut cl, reqs)| {
                    for (r, o) in reqs {
                        cl.submit(r, &o, 0).unwrap();
                    }
                    cl
                },
                BatchSize::PerIteration,
            )
        });

        // (a) a full pass (priority recalculation included) over 100,000 pending jobs.
        let base = loaded(varied);
        let mut probe = base.clone();
        let started = probe.schedule(0).len();
        let mut passes = 1;
        let mut total = started;
        while total < 1065 && passes < 50 {
            total += probe.schedule(0).len();
            passes += 1;
        }
        println!("{tag}: first pass starts {started} jobs; {total} after {passes} passes");
        g.bench_function(format!("full_pass_100k_pending{tag}"), |b| {
            b.iter_batched(
                || base.clone(),
                |mut cl| {
                    let d = cl.schedule(0);
                    (cl, d) // dropped outside the measurement
                },
                BatchSize::PerIteration,
            )
        });

        // A page of squeue over the 100,000 and what it counts: everyone's first
        // page, one user's (2 % of the queue), and a page 1,000 pages deep.
        if !varied {
            let everyone = SqueueFilter::default();
            let one_user = SqueueFilter {
                user: Some("user7".into()),
                ..Default::default()
            };
            for (name, filter, offset) in [
                ("squeue_page_100k", &everyone, 0),
                ("squeue_page_100k_one_user", &one_user, 0),
                ("squeue_page_100k_offset_50k", &everyone, 50_000),
            ] {
                g.bench_function(name, |b| b.iter(|| base.squeue_page(filter, offset, 50, 0)));
            }
        }

        // (b) one job completes on a full cluster; the decision that follows.
        let mut full = base.clone();
        for _ in 0..passes {
            full.schedule(0);
        }
        let running: Vec<JobId> = full
            .squeue(
                &SqueueFilter {
                    states: vec![JobState::Running],
                    ..Default::default()
                },
                10,
            )
            .iter()
            .map(|j| j.id)
            .collect();
        let mut k = 0usize;
        g.bench_function(format!("decision_after_one_completion{tag}"), |b| {
            b.iter_batched(
                || {
                    k = (k + 7919) % running.len();
                    (full.clone(), running[k])
                },
                |(mut cl, job)| {
                    cl.job_finished(job, JobOutcome::Exited(0), 10).unwrap();
                    let d = cl.schedule(10);
                    (cl, d)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(sched, benches);
criterion_main!(sched);
