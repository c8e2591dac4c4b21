//! Recording benchmark jobs: when a job marked as a benchmark has ended, its output
//! is read, parsed, and the run recorded with the job's allocation (GPUs and their
//! model); the job says what became of it. Output that no parser understands
//! records nothing and says why; it never changes the job's own state.
//! Works from the database (ended, marked jobs without a note), so a restart loses
//! nothing: what was not read yet is read then.

use std::sync::Arc;
use std::time::Duration;

use super::parse;
use super::{names, Metric, RunSetup};
use super::{Outcome, Suite};
use crate::identities::Identities;
use crate::launch::usage::{ReadRate, Usage};
use crate::sched::inventory::Inventory;
use crate::store::benchmarks::{BenchmarkRun, LOCAL};
use crate::store::{CampaignRun, JobRecord, Store};

/// How often ended benchmark jobs are looked for.
const EVERY: Duration = Duration::from_secs(2);
/// At most this much of the end of an output is read.
const MAX_READ: u64 = 16 << 20;

/// Read ended benchmark jobs' outputs for as long as the portal runs.
pub fn spawn(
    store: Store,
    identities: Identities,
    inventory: Arc<Inventory>,
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
                let note = record(&store, &identities, &inventory, &job).await;
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
    identities: &Identities,
    inventory: &Inventory,
    job: &JobRecord,
) -> String {
    let Some(path) = job.stdout_path.clone() else {
        return "nothing recorded: the job has no output file".into();
    };
    // A plain file of the job's user; of the portal's only when it runs jobs as itself.
    // As root, a job whose user has no uid is never read: root's files are nobody's
    // benchmark output.
    let owner = match identities.file_owner(&job.user_name).await {
        Ok(Some(uid)) => uid,
        Ok(None) => return "nothing recorded: the job's user has no uid of their own".into(),
        Err(e) => {
            tracing::warn!(job = job.id, error = %e, "looking up a benchmark job's user failed");
            return "nothing recorded: looking up the job's user failed".into();
        }
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
    let mut run = run_of(job, inventory, suite, outcome);
    // What it read counts as its storage demand only when it read its data for long
    // enough, not made in memory (a synthetic run reads its imports and nothing else).
    // The job's samples are read only for a run that may be one.
    let read = match may_demand_storage(&run) {
        true => read_rate(store, job)
            .await
            .filter(|rate| is_storage_demand(&run, rate)),
        false => None,
    };
    if let Some(rate) = &read {
        add_storage_demand(&mut run, rate);
    }
    let headline = run
        .metrics
        .first()
        .map(|m| format!(": {} = {} {}", m.name, m.value, m.unit))
        .unwrap_or_default();
    match store
        .create_benchmark_run(&run, crate::util::now_ms())
        .await
    {
        Ok(r) => {
            link_to_campaign(store, job, r.id, read.as_ref()).await;
            format!("recorded as benchmark run {}{headline}", r.id)
        }
        Err(e) => {
            tracing::warn!(job = job.id, error = %e, "recording a benchmark run failed");
            format!("nothing recorded: the run could not be stored ({e})")
        }
    }
}

/// The fewest sample intervals a job must have read over for its rate to count as its
/// storage demand: a program's start-up (its imports) reads in one burst.
const MIN_READING_POINTS: usize = 3;

/// How fast the job read while it read, from its supervisor's samples.
async fn read_rate(store: &Store, job: &JobRecord) -> Option<ReadRate> {
    let row = match store.job_usage(job.id, job.task).await {
        Ok(row) => row?,
        Err(e) => {
            tracing::warn!(job = job.id, error = %e, "reading a benchmark job's usage failed");
            return None;
        }
    };
    serde_json::from_str::<Usage>(&row.series).ok()?.read_rate()
}

/// Whether what a job read is the storage its run demands: it read for long enough,
/// its data was not made in memory, it is no storage benchmark (fio measures the
/// storage itself) and its own output does not give the figure.
fn is_storage_demand(run: &BenchmarkRun, rate: &ReadRate) -> bool {
    may_demand_storage(run) && rate.points >= MIN_READING_POINTS
}

/// What of [`is_storage_demand`] the run alone says.
fn may_demand_storage(run: &BenchmarkRun) -> bool {
    let synthetic = run
        .setup
        .dataset
        .as_deref()
        .is_some_and(|d| d.eq_ignore_ascii_case("synthetic"));
    !synthetic
        && run.setup.suite != Suite::Fio.name()
        && !run
            .metrics
            .iter()
            .any(|m| m.name == names::STORAGE_MB_PER_S)
}

/// Record what a training job read as its storage demand (`storage_mb_per_s`, all its
/// GPUs together); the run's notes say how it was measured.
fn add_storage_demand(run: &mut BenchmarkRun, rate: &ReadRate) {
    run.metrics.push(Metric {
        name: names::STORAGE_MB_PER_S.into(),
        value: (rate.mb_per_s * 100.0).round() / 100.0,
        unit: "MB/s".into(),
    });
    run.metrics.sort_by(|a, b| a.name.cmp(&b.name));
    let notes = run.notes.get_or_insert_with(String::new);
    notes.push_str(&format!(
        "; storage_mb_per_s measured by atrium over the {:.0} s the job read ({:.0} % of it from \
         storage, the rest from the page cache; {})",
        rate.seconds,
        rate.from_storage * 100.0,
        rate.source
    ));
}

/// When the job is a task of a campaign, link its run to the campaign's point.
async fn link_to_campaign(store: &Store, job: &JobRecord, run_id: i64, read: Option<&ReadRate>) {
    let link = match store.campaign_job(job.id).await {
        Ok(Some(link)) => link,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(job = job.id, error = %e, "looking up a job's campaign failed");
            return;
        }
    };
    let tasks: Vec<(i64, i64, i64)> = serde_json::from_str(&link.tasks).unwrap_or_default();
    let Some(&(task, point, repetition)) = tasks.iter().find(|t| t.0 == job.task.max(0)) else {
        return;
    };
    let duration_s = job
        .start_time
        .zip(job.end_time)
        .map(|(s, e)| (e - s).max(0) as f64 / 1000.0);
    let run = CampaignRun {
        run_id,
        campaign_id: link.campaign_id,
        point,
        repetition,
        job_id: job.id,
        task,
        read_mb_per_s: read.map(|r| r.mb_per_s),
        read_from_storage: read.map(|r| r.from_storage),
        read_source: read.map(|r| r.source.clone()),
        duration_s,
    };
    if let Err(e) = store.record_campaign_run(&run).await {
        tracing::warn!(job = job.id, error = %e, "linking a run to its campaign failed");
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(points: usize) -> ReadRate {
        ReadRate {
            mb_per_s: 80.0,
            from_storage: 0.5,
            seconds: points as f64 * 5.0,
            points,
            source: "/proc/PID/io".into(),
        }
    }

    fn run(suite: &str, dataset: Option<&str>) -> BenchmarkRun {
        BenchmarkRun {
            setup: RunSetup {
                suite: suite.into(),
                dataset: dataset.map(str::to_string),
                gpus: 1,
                nodes: 1,
                ..Default::default()
            },
            metrics: vec![Metric {
                name: names::IMAGES_PER_SEC.into(),
                value: 1000.0,
                unit: "images/s".into(),
            }],
            notes: Some("recorded from job 7".into()),
            ..Default::default()
        }
    }

    #[test]
    fn what_a_training_job_read_is_its_storage_demand_only_when_it_read_its_data() {
        let mut training = run("custom", Some("imagenet"));
        assert!(is_storage_demand(&training, &rate(3)));
        // A start-up burst, data made in memory, fio: not a demand.
        assert!(!is_storage_demand(&training, &rate(2)));
        assert!(!is_storage_demand(
            &run("custom", Some("synthetic")),
            &rate(10)
        ));
        assert!(!is_storage_demand(&run("fio", None), &rate(10)));
        add_storage_demand(&mut training, &rate(3));
        let demand = training
            .metrics
            .iter()
            .find(|m| m.name == names::STORAGE_MB_PER_S);
        assert_eq!(demand.map(|m| m.value), Some(80.0));
        assert!(
            training
                .notes
                .as_deref()
                .is_some_and(|n| n.contains("50 % of it from storage")),
            "{:?}",
            training.notes
        );
        // Its own figure stands.
        assert!(!is_storage_demand(&training, &rate(10)));
    }
}
