//! Jobs' use of what they were given (`job_usage`): the latest record of each job,
//! written while it runs and once it ends, and the jobs that held GPUs idle longest.
//! Must not touch: what the record holds (the caller's JSON) or how it was sampled.

use sqlx::Row;

use super::{Result, Store};

/// One job's usage as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct JobUsageRow {
    pub job_id: i64,
    /// The array task (-1: none).
    pub task: i64,
    /// Unix milliseconds of the latest sample.
    pub sampled_at: i64,
    /// The job is over: these are its final figures.
    pub complete: bool,
    pub cpu_seconds: f64,
    pub max_rss_bytes: i64,
    pub gpu_idle_seconds: f64,
    /// Mean utilisation over its GPUs, percent.
    pub gpu_utilization: Option<f64>,
    /// The whole record, as JSON.
    pub series: String,
}

/// A job that held GPUs idle, with what lists show of it.
#[derive(Debug, Clone, PartialEq)]
pub struct IdleGpuJob {
    pub job_id: i64,
    pub task: i64,
    pub user_name: String,
    pub name: String,
    pub state: String,
    pub gpus: String,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    pub sampled_at: i64,
    pub gpu_idle_seconds: f64,
    pub gpu_utilization: Option<f64>,
}

impl Store {
    /// Write a job's latest usage over what was there; a record already complete is
    /// never replaced by one that is not (a late sample after the end).
    #[tracing::instrument(skip_all, fields(job = row.job_id), err)]
    pub async fn record_job_usage(&self, row: &JobUsageRow) -> Result<()> {
        sqlx::query(
            "INSERT INTO job_usage (job_id, task, sampled_at, complete, cpu_seconds, \
             max_rss_bytes, gpu_idle_seconds, gpu_utilization, series) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (job_id, task) DO UPDATE SET sampled_at = excluded.sampled_at, \
             complete = excluded.complete, cpu_seconds = excluded.cpu_seconds, \
             max_rss_bytes = excluded.max_rss_bytes, \
             gpu_idle_seconds = excluded.gpu_idle_seconds, \
             gpu_utilization = excluded.gpu_utilization, series = excluded.series \
             WHERE job_usage.complete = 0 OR excluded.complete = 1",
        )
        .bind(row.job_id)
        .bind(row.task)
        .bind(row.sampled_at)
        .bind(i64::from(row.complete))
        .bind(row.cpu_seconds)
        .bind(row.max_rss_bytes)
        .bind(row.gpu_idle_seconds)
        .bind(row.gpu_utilization)
        .bind(&row.series)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A job's latest usage; `None` before its first sample.
    #[tracing::instrument(skip(self), err)]
    pub async fn job_usage(&self, job_id: i64, task: i64) -> Result<Option<JobUsageRow>> {
        let row = sqlx::query(
            "SELECT job_id, task, sampled_at, complete, cpu_seconds, max_rss_bytes, \
             gpu_idle_seconds, gpu_utilization, series FROM job_usage \
             WHERE job_id = $1 AND task = $2",
        )
        .bind(job_id)
        .bind(task)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|r| {
            Ok(JobUsageRow {
                job_id: r.try_get("job_id")?,
                task: r.try_get("task")?,
                sampled_at: r.try_get("sampled_at")?,
                complete: r.try_get::<i64, _>("complete")? != 0,
                cpu_seconds: r.try_get("cpu_seconds")?,
                max_rss_bytes: r.try_get("max_rss_bytes")?,
                gpu_idle_seconds: r.try_get("gpu_idle_seconds")?,
                gpu_utilization: r.try_get("gpu_utilization")?,
                series: r.try_get("series")?,
            })
        })
        .transpose()
    }

    /// The CPU seconds and largest resident memory (bytes) of each of `jobs` that has
    /// been sampled, without their series: `(job, task, cpu_seconds, max_rss_bytes)`.
    #[tracing::instrument(skip_all, fields(jobs = jobs.len()), err)]
    pub async fn usage_of_jobs(&self, jobs: &[(i64, i64)]) -> Result<Vec<(i64, i64, f64, i64)>> {
        const PER_QUERY: usize = 500;
        let wanted: std::collections::HashSet<(i64, i64)> = jobs.iter().copied().collect();
        let mut ids: Vec<i64> = jobs.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut out = Vec::new();
        for chunk in ids.chunks(PER_QUERY) {
            let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT job_id, task, cpu_seconds, max_rss_bytes FROM job_usage \
                 WHERE job_id IN ({})",
                marks.join(", ")
            );
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(*id);
            }
            for r in query.fetch_all(&self.pool).await? {
                let key: (i64, i64) = (r.try_get("job_id")?, r.try_get("task")?);
                if wanted.contains(&key) {
                    out.push((
                        key.0,
                        key.1,
                        r.try_get("cpu_seconds")?,
                        r.try_get("max_rss_bytes")?,
                    ));
                }
            }
        }
        Ok(out)
    }

    /// The jobs sampled since `since` (Unix ms) that held GPUs idle, longest first.
    #[tracing::instrument(skip(self), err)]
    /// Whether any job sampled since `since` (ms) had a GPU utilisation reading: where
    /// none had, idle GPUs cannot be told from busy ones.
    pub async fn gpu_utilisation_measured(&self, since: i64) -> Result<bool> {
        let n: i64 = sqlx::query(
            "SELECT COUNT(*) FROM (SELECT 1 FROM job_usage \
             WHERE sampled_at >= $1 AND gpu_utilization IS NOT NULL LIMIT 1) AS measured",
        )
        .bind(since)
        .fetch_one(&self.pool)
        .await?
        .try_get(0)?;
        Ok(n > 0)
    }

    pub async fn idle_gpu_jobs(&self, since: i64, limit: i64) -> Result<Vec<IdleGpuJob>> {
        let rows = sqlx::query(
            "SELECT u.job_id, u.task, j.user_name, j.name, j.state, j.gpus, j.start_time, \
             j.end_time, u.sampled_at, u.gpu_idle_seconds, u.gpu_utilization \
             FROM job_usage u JOIN jobs j ON j.id = u.job_id AND j.task = u.task \
             WHERE u.sampled_at >= $1 AND u.gpu_idle_seconds > 0 \
             ORDER BY u.gpu_idle_seconds DESC, u.job_id DESC LIMIT $2",
        )
        .bind(since)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(IdleGpuJob {
                    job_id: r.try_get("job_id")?,
                    task: r.try_get("task")?,
                    user_name: r.try_get("user_name")?,
                    name: r.try_get("name")?,
                    state: r.try_get("state")?,
                    gpus: r.try_get("gpus")?,
                    start_time: super::opt_i64(r, "start_time")?,
                    end_time: super::opt_i64(r, "end_time")?,
                    sampled_at: r.try_get("sampled_at")?,
                    gpu_idle_seconds: r.try_get("gpu_idle_seconds")?,
                    gpu_utilization: r.try_get("gpu_utilization")?,
                })
            })
            .collect()
    }
}
