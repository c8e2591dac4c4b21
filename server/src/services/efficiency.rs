//! Job efficiency: what a job used of what it was given (CPU time against its cores
//! and wall time, peak memory against its request, its GPUs' utilisation and
//! memory), for `GET /api/v1/jobs/{id}/efficiency`, `atrium seff` and the job page;
//! and the jobs that held GPUs idle longest, for administrators.
//!
//! Owns: the efficiency arithmetic (as Slurm's `seff` computes it, plus the GPU
//! figures) and who sees it (whoever sees the job, through `Jobs::show`).
//! Must not touch: HTTP types, SQL (the store), sampling (`launch::usage`).

use scheduler::JobId;
use serde::Serialize;
use utoipa::ToSchema;

use super::jobs::JobInfo;
use super::{Jobs, ServiceError};
use crate::auth::Principal;
use crate::launch::usage::{Usage, UsagePoint};
use crate::sched::JobUsage;
use crate::store::IdleGpuJob;
use crate::util::rfc3339;

/// What a job used of what it was given.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Efficiency {
    /// `123`, or `123_4` for an array task.
    pub id: String,
    pub cluster: String,
    pub name: String,
    pub user: String,
    pub account: String,
    pub state: String,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub nodes: u32,
    /// Cores allocated.
    pub cpus: Option<u64>,
    /// Seconds run so far (or in all).
    pub elapsed_seconds: u64,
    /// Where the figures come from: `atrium` (its step supervisor's samples) or
    /// `slurm` (`sacct`); absent: nothing sampled yet.
    pub source: Option<String>,
    /// When the figures were taken.
    pub sampled_at: Option<String>,
    /// The job is over and these are its final figures.
    pub complete: bool,
    /// CPU time used (user and system), seconds.
    pub cpu_seconds: Option<f64>,
    /// CPU time against cores × wall time, percent (Slurm's `seff`).
    pub cpu_efficiency_percent: Option<f64>,
    pub memory_requested_bytes: Option<u64>,
    /// Peak resident memory.
    pub max_rss_bytes: Option<u64>,
    /// Peak memory against the request, percent.
    pub memory_efficiency_percent: Option<f64>,
    /// Generic resources per node (`gpu:2`).
    pub gres: String,
    /// Each GPU read, and each MIG instance (its memory only: no utilisation is
    /// reported per instance).
    pub gpus: Vec<GpuEfficiency>,
    /// Mean utilisation over its GPUs, percent.
    pub gpu_utilization_percent: Option<f64>,
    /// Time its GPUs sat idle (under 10 % busy), summed over them, seconds.
    pub gpu_idle_seconds: Option<f64>,
    /// The series the figures were taken from (atrium's samples only).
    pub series: Option<Series>,
}

/// One GPU of a job over its run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GpuEfficiency {
    /// As `nvidia-smi` numbers it.
    pub index: u32,
    pub uuid: String,
    pub mean_utilization_percent: Option<f64>,
    pub max_utilization_percent: u32,
    pub max_memory_bytes: u64,
    pub memory_total_bytes: u64,
    pub idle_seconds: f64,
}

/// A job's samples: at most 240 points, `interval_seconds` apart.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Series {
    pub interval_seconds: u32,
    pub points: Vec<SeriesPoint>,
}

/// One sample.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct SeriesPoint {
    /// Seconds after the start.
    pub t: u32,
    /// Cores busy, on average since the point before.
    pub cpu: f32,
    /// Resident memory, MiB.
    pub rss_mib: u32,
    /// Mean utilisation of its GPUs, percent.
    pub gpu: Option<u8>,
    /// Memory used on its GPUs, MiB.
    pub gpu_mib: Option<u32>,
}

impl From<&UsagePoint> for SeriesPoint {
    fn from(p: &UsagePoint) -> Self {
        SeriesPoint {
            t: p.t,
            cpu: p.cpu,
            rss_mib: p.rss_mib,
            gpu: p.gpu,
            gpu_mib: p.gpu_mib,
        }
    }
}

/// A job that held GPUs idle, for the administrators' list.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct IdleGpus {
    pub id: String,
    pub user: String,
    pub name: String,
    pub state: String,
    pub gpus: String,
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    pub idle_seconds: f64,
    pub gpu_utilization_percent: Option<f64>,
}

/// How many jobs the idle-GPU list shows.
pub const IDLE_GPU_JOBS: i64 = 50;
const WEEK_MS: i64 = 7 * 24 * 3600 * 1000;

fn percent(part: f64, whole: f64) -> Option<f64> {
    (whole > 0.0).then(|| (part / whole * 100.0 * 100.0).round() / 100.0)
}

/// The efficiency of `job` from what atrium sampled of it (`usage`, if anything).
pub fn efficiency(job: &JobInfo, usage: Option<&Usage>) -> Efficiency {
    let memory_requested = job.memory_mb.filter(|m| *m > 0).map(|m| m * 1024 * 1024);
    let mut e = Efficiency {
        id: job.id.clone(),
        cluster: String::new(),
        name: job.name.clone(),
        user: job.user.clone(),
        account: job.account.clone(),
        state: job.state.clone(),
        exit_code: job.exit_code,
        signal: job.signal,
        nodes: job.nodes,
        cpus: job.cpus,
        elapsed_seconds: job.time_used,
        source: None,
        sampled_at: None,
        complete: false,
        cpu_seconds: None,
        cpu_efficiency_percent: None,
        memory_requested_bytes: memory_requested,
        max_rss_bytes: None,
        memory_efficiency_percent: None,
        gres: job.gres.clone(),
        gpus: Vec::new(),
        gpu_utilization_percent: None,
        gpu_idle_seconds: None,
        series: None,
    };
    let Some(u) = usage else {
        return e;
    };
    // While it runs, against the time up to the sample; once over, its whole run.
    let wall = if u.complete {
        job.time_used as f64
    } else {
        (u.sampled_at_ms - u.started_at_ms).max(0) as f64 / 1000.0
    };
    e.source = Some("atrium".into());
    e.sampled_at = Some(rfc3339(u.sampled_at_ms));
    e.complete = u.complete;
    e.cpu_seconds = Some(u.cpu_seconds);
    e.cpu_efficiency_percent = job
        .cpus
        .and_then(|c| percent(u.cpu_seconds, wall * c as f64));
    e.max_rss_bytes = Some(u.max_rss_bytes);
    e.memory_efficiency_percent =
        memory_requested.and_then(|m| percent(u.max_rss_bytes as f64, m as f64));
    e.gpus = u
        .gpus
        .iter()
        .map(|g| GpuEfficiency {
            index: g.index,
            uuid: g.uuid.clone(),
            mean_utilization_percent: g.mean_utilization_percent(),
            max_utilization_percent: g.max_utilization_percent,
            max_memory_bytes: g.max_memory_bytes,
            memory_total_bytes: g.memory_total_bytes,
            idle_seconds: g.idle_seconds,
        })
        .collect();
    e.gpu_utilization_percent = u.mean_gpu_utilization_percent();
    e.gpu_idle_seconds = (!u.gpus.is_empty()).then(|| u.gpu_idle_seconds());
    e.series = Some(Series {
        interval_seconds: u.interval_secs,
        points: u.points.iter().map(SeriesPoint::from).collect(),
    });
    e
}

/// The figures of a backend's own accounting (Slurm's `sacct`): totals, no series.
pub fn from_accounting(e: &mut Efficiency, job: &JobInfo, usage: &JobUsage) {
    e.source = Some("slurm".into());
    e.complete = job.end_time.is_some();
    e.cpu_seconds = usage.cpu_seconds;
    e.cpu_efficiency_percent = usage
        .cpu_seconds
        .zip(job.cpus)
        .and_then(|(cpu, cores)| percent(cpu, job.time_used as f64 * cores as f64));
    e.max_rss_bytes = usage.max_rss_bytes;
    e.memory_efficiency_percent = usage
        .max_rss_bytes
        .zip(e.memory_requested_bytes)
        .and_then(|(rss, req)| percent(rss as f64, req as f64));
    e.gpu_utilization_percent = usage.gpu_utilization_percent;
}

fn idle_gpus(j: &IdleGpuJob) -> IdleGpus {
    IdleGpus {
        id: crate::store::job_id(j.job_id, j.task).to_string(),
        user: j.user_name.clone(),
        name: j.name.clone(),
        state: j.state.clone(),
        gpus: j.gpus.clone(),
        start_time: j.start_time.map(rfc3339),
        end_time: j.end_time.map(rfc3339),
        idle_seconds: j.gpu_idle_seconds,
        gpu_utilization_percent: j.gpu_utilization,
    }
}

impl Jobs {
    /// What `job` used of what it was given, for whoever may see it.
    pub async fn efficiency(
        &self,
        caller: &Principal,
        job: JobId,
    ) -> Result<Efficiency, ServiceError> {
        let info = self.show(caller, job).await?;
        self.efficiency_of(&info).await
    }

    /// The efficiency of a job its caller was already shown.
    pub async fn efficiency_of(&self, info: &JobInfo) -> Result<Efficiency, ServiceError> {
        let task = info.array_task_id.map_or(-1, i64::from);
        let job = info.id.as_str();
        let usage = match self.store().job_usage(info.job_id as i64, task).await? {
            Some(row) => Some(serde_json::from_str::<Usage>(&row.series).map_err(|e| {
                ServiceError::internal(format!("unreadable usage of job {job}: {e}"))
            })?),
            None => None,
        };
        let mut e = Efficiency {
            cluster: self.cluster_name().to_string(),
            ..efficiency(info, usage.as_ref())
        };
        if usage.is_none() && info.start_time.is_some() {
            let id = match info.array_task_id {
                Some(t) => JobId::task(info.job_id, t),
                None => JobId::new(info.job_id),
            };
            if let Some(slurm) = self.scheduler().usage(id).await? {
                from_accounting(&mut e, info, &slurm);
            }
        }
        Ok(e)
    }

    /// The jobs of the last week that held GPUs idle longest (administrators).
    pub async fn idle_gpus(&self, caller: &Principal) -> Result<Vec<IdleGpus>, ServiceError> {
        if !caller.acts_as_admin() {
            return Err(ServiceError::Forbidden(
                "the jobs that held GPUs idle are for administrators".into(),
            ));
        }
        let since = crate::util::now_ms() - WEEK_MS;
        let jobs = self.store().idle_gpu_jobs(since, IDLE_GPU_JOBS).await?;
        Ok(jobs.iter().map(idle_gpus).collect())
    }

    /// Whether any GPU reported its utilisation this week: without, "no job held a
    /// GPU idle" would be a false all-clear.
    pub async fn gpu_utilisation_measured(&self) -> Result<bool, ServiceError> {
        let since = crate::util::now_ms() - WEEK_MS;
        Ok(self.store().gpu_utilisation_measured(since).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::usage::{GpuSample, Sample};

    #[test]
    fn efficiency_is_seffs_arithmetic_with_the_gpus() {
        let info = JobInfo {
            id: "12".into(),
            cpus: Some(4),
            memory_mb: Some(1024),
            time_used: 100,
            ..Default::default()
        };
        let mut u = Usage::new(0, 30);
        u.record(&Sample {
            at_ms: 50_000,
            cpu_seconds: 100.0,
            rss_bytes: 256 << 20,
            read: None,
            gpus: vec![GpuSample {
                index: 0,
                uuid: "GPU-1".into(),
                utilization_percent: Some(5),
                memory_used_bytes: Some(1 << 30),
                memory_total_bytes: Some(80 << 30),
            }],
        });
        // Running: against the 50 s up to the sample.
        let e = efficiency(&info, Some(&u));
        assert_eq!(e.cpu_efficiency_percent, Some(50.0));
        assert_eq!(e.memory_efficiency_percent, Some(25.0));
        assert_eq!(e.gpu_idle_seconds, Some(50.0));
        assert!(!e.complete);
        // Over: against its whole run.
        u.finish(100_000, 200.0, 512 << 20);
        let e = efficiency(&info, Some(&u));
        assert_eq!(e.cpu_efficiency_percent, Some(50.0));
        assert_eq!(e.memory_efficiency_percent, Some(50.0));
        assert_eq!(e.gpus[0].mean_utilization_percent, Some(5.0));
        assert_eq!(e.series.map(|s| s.points.len()), Some(1));
        // Nothing sampled: the request alone.
        let e = efficiency(&info, None);
        assert_eq!((e.source, e.cpu_seconds), (None, None));
        assert_eq!(e.memory_requested_bytes, Some(1 << 30));
    }
}
