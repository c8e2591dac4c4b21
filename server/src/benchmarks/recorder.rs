//! Recording benchmark jobs: when a job marked as a benchmark has ended, its output
//! is read, parsed, and the run recorded with the job's allocation (GPUs and their
//! model); the job says what became of it. Output that no parser understands
//! records nothing and says why; it never changes the job's own state.
//! Works from the database (ended, marked jobs without a note), so a restart loses
//! nothing: what was not read yet is read then.

use std::sync::Arc;
use std::time::Duration;

use super::parse;
use super::RunSetup;
use super::{Outcome, Suite};
use crate::sched::inventory::Inventory;
use crate::store::benchmarks::{BenchmarkRun, LOCAL};
use crate::store::{JobRecord, Store};

/// How often ended benchmark jobs are looked for.
const EVERY: Duration = Duration::from_secs(2);
/// At most this much of the end of an output is read.
const MAX_READ: u64 = 16 << 20;

/// Read ended benchmark jobs' outputs for as long as the portal runs.
pub fn spawn(
    store: Store,
    inventory: Arc<Inventory>,
    check_owner: bool,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let jobs = match store.unread_benchmark_jobs(32).await {
                Ok(jobs) => jobs,
                Err(e) => {
                    tracing::warn!(error = %e, "looking for ended benchmark jobs failed");
                    continue;
                }
            };
            for job in jobs {
                let note = record(&store, &inventory, &job, check_owner).await;
                if let Err(e) = store.set_benchmark_note(job.id, job.task, &note).await {
                    tracing::warn!(job = job.id, error = %e, "noting a benchmark job failed");
                }
            }
        }
    })
}

/// Read, parse and record one job; returns the note for the job.
async fn record(
    store: &Store,
    inventory: &Inventory,
    job: &JobRecord,
    check_owner: bool,
) -> String {
    let Some(path) = job.stdout_path.clone() else {
        return "nothing recorded: the job has no output file".into();
    };
    // A plain file of the job's user; of the portal's only when it runs jobs as itself.
    // As root, a job whose user has no uid is never read: root's files are nobody's
    // benchmark output.
    let owner = if check_owner {
        match store.user_by_name(&job.user_name).await {
            Ok(Some(u)) => match u.uid_number.and_then(|n| u32::try_from(n).ok()) {
                Some(0) | None => {
                    return "nothing recorded: the job's user has no uid of their own".into()
                }
                Some(uid) => uid,
            },
            Ok(None) => return "nothing recorded: the job's user is gone".into(),
            Err(e) => {
                tracing::warn!(job = job.id, error = %e, "looking up a benchmark job's user failed");
                return "nothing recorded: looking up the job's user failed".into();
            }
        }
    } else {
        crate::launch::current_ids().0
    };
    let shown = path.clone();
    let read = tokio::task::spawn_blocking(move || {
        crate::launch::read_tail_owned(std::path::Path::new(&path), owner, MAX_READ)
    })
    .await;
    let output = match read {
        Ok(Ok(Some(text))) => text,
        Ok(Ok(None)) => return format!("nothing recorded: there is no output file {shown}"),
        Ok(Err(e)) => return format!("nothing recorded: the output {shown} cannot be read ({e})"),
        Err(e) => return format!("nothing recorded: reading the output failed ({e})"),
    };
    let marked = job.benchmark.clone().unwrap_or_default();
    let suite = match Suite::parse(&marked) {
        Some(s) => Some(s),
        None => parse::detect(&output),
    };
    let parsed = tokio::task::spawn_blocking(move || match suite {
        Some(s) => parse::parse(s, &output).map(|o| (s, o)),
        None => parse::parse(Suite::Custom, &output).map(|o| (Suite::Custom, o)),
    })
    .await;
    let (suite, outcome) = match parsed {
        Ok(Ok(found)) => found,
        Ok(Err(no)) => return format!("nothing recorded: {}", no.reason()),
        Err(e) => return format!("nothing recorded: the parser stopped ({e})"),
    };
    let run = run_of(job, inventory, suite, outcome);
    let headline = run
        .metrics
        .first()
        .map(|m| format!(": {} = {} {}", m.name, m.value, m.unit))
        .unwrap_or_default();
    match store
        .create_benchmark_run(&run, crate::util::now_ms())
        .await
    {
        Ok(r) => format!("recorded as benchmark run {}{headline}", r.id),
        Err(e) => {
            tracing::warn!(job = job.id, error = %e, "recording a benchmark run failed");
            format!("nothing recorded: the run could not be stored ({e})")
        }
    }
}

/// The run of a job's outcome: what the output says, with the GPUs and their model
/// from the job's allocation where the output does not say.
fn run_of(job: &JobRecord, inventory: &Inventory, suite: Suite, outcome: Outcome) -> BenchmarkRun {
    let allocation: Option<scheduler::Allocation> = job
        .allocation
        .as_deref()
        .and_then(|a| serde_json::from_str(a).ok());
    let slices: Vec<&scheduler::SliceId> = allocation
        .iter()
        .flat_map(|a| a.nodes.iter().flat_map(|n| n.slices.iter()))
        .collect();
    let gpu_model = slices.first().and_then(|s| {
        let index = match s {
            scheduler::SliceId::Gpu { index } => *index,
            scheduler::SliceId::Mig { gpu, .. } | scheduler::SliceId::Shard { gpu, .. } => *gpu,
        };
        inventory
            .gpus
            .iter()
            .find(|g| g.index == index)
            .map(|g| g.model.clone())
    });
    let nodes = allocation.as_ref().map_or(1, |a| a.nodes.len().max(1));
    BenchmarkRun {
        setup: RunSetup {
            suite: suite.name().to_string(),
            model: outcome.model,
            framework: outcome.framework,
            precision: outcome.precision,
            batch_size_per_gpu: outcome.batch_size_per_gpu.map(i64::from),
            gpus: outcome.gpus.map_or(slices.len() as i64, i64::from),
            nodes: nodes as i64,
            gpu_model,
            storage: None,
            dataset: outcome.dataset,
        },
        started_at: job.start_time,
        ended_at: job.end_time,
        job_id: Some(job.id),
        user_name: job.user_name.clone(),
        notes: Some(format!("recorded from job {}", job_display(job))),
        tags: "job".into(),
        source: LOCAL.into(),
        metrics: outcome.metrics,
    }
}

fn job_display(job: &JobRecord) -> String {
    if job.task >= 0 {
        format!("{}_{}", job.id, job.task)
    } else {
        job.id.to_string()
    }
}
