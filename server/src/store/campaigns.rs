//! Benchmark campaigns: the campaign as planned (its template's script, the matrix
//! asked for and the points planned, as the caller's JSON), the job arrays it became
//! with the point and repetition of each task, and the runs recorded from them with
//! what each job read.
//! Must not touch: planning or judging a campaign (`benchmarks::campaign`), who may see
//! one (the Campaigns service).

use sqlx::any::AnyRow;
use sqlx::Row;

use super::sql::{Arg, Sql};
use super::{BenchmarkRecord, Result, Store, StoreError};

/// A campaign about to be stored.
#[derive(Debug, Clone)]
pub struct NewCampaign<'a> {
    pub user_name: &'a str,
    pub name: &'a str,
    pub template: &'a str,
    pub title: &'a str,
    pub template_script: &'a str,
    /// The matrix as asked, JSON.
    pub matrix: &'a str,
    /// The points planned, JSON.
    pub plan: &'a str,
    pub tasks: i64,
}

/// A stored campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignRecord {
    pub id: i64,
    pub user_name: String,
    pub name: String,
    pub template: String,
    pub title: String,
    pub template_script: String,
    pub matrix: String,
    pub plan: String,
    pub tasks: i64,
    pub created_at: i64,
}

/// One job array of a campaign.
#[derive(Debug, Clone, PartialEq)]
pub struct CampaignJob {
    pub job_id: i64,
    pub campaign_id: i64,
    pub gpus: i64,
    /// JSON `[[task, point, repetition], …]`.
    pub tasks: String,
}

/// A run recorded from a campaign's task.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CampaignRun {
    pub run_id: i64,
    pub campaign_id: i64,
    pub point: i64,
    pub repetition: i64,
    pub job_id: i64,
    pub task: i64,
    pub read_mb_per_s: Option<f64>,
    pub read_from_storage: Option<f64>,
    pub read_source: Option<String>,
    pub duration_s: Option<f64>,
}

/// How a campaign's tasks stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CampaignProgress {
    /// Tasks that ended, and of those the ones that did not complete.
    pub ended: i64,
    pub failed: i64,
    pub running: i64,
}

const COLUMNS: &str = "id, user_name, name, template, title, template_script, matrix, plan, \
    tasks, created_at";

/// The most campaign ids one query names.
const CHUNK: usize = 500;

fn record(row: &AnyRow) -> Result<CampaignRecord> {
    Ok(CampaignRecord {
        id: row.try_get("id")?,
        user_name: row.try_get("user_name")?,
        name: row.try_get("name")?,
        template: row.try_get("template")?,
        title: row.try_get("title")?,
        template_script: row.try_get("template_script")?,
        matrix: row.try_get("matrix")?,
        plan: row.try_get("plan")?,
        tasks: row.try_get("tasks")?,
        created_at: row.try_get("created_at")?,
    })
}

impl Store {
    /// Store a campaign before its jobs are submitted; its id.
    #[tracing::instrument(skip_all, fields(user = c.user_name, template = c.template), err)]
    pub async fn create_campaign(&self, c: &NewCampaign<'_>, now: i64) -> Result<i64> {
        let row = sqlx::query(
            "INSERT INTO campaigns (user_name, name, template, title, template_script, matrix, \
             plan, tasks, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        )
        .bind(c.user_name)
        .bind(c.name)
        .bind(c.template)
        .bind(c.title)
        .bind(c.template_script)
        .bind(c.matrix)
        .bind(c.plan)
        .bind(c.tasks)
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.try_get("id")?)
    }

    /// Remove a campaign none of whose jobs could be kept (its submission failed).
    #[tracing::instrument(skip(self), err)]
    pub async fn delete_campaign(&self, id: i64) -> Result<()> {
        let mut tx = self.write().await?;
        for table in ["campaign_runs", "campaign_jobs"] {
            sqlx::query(&format!("DELETE FROM {table} WHERE campaign_id = $1"))
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("DELETE FROM campaigns WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Link a submitted job array to its campaign.
    #[tracing::instrument(skip_all, fields(job = job.job_id, campaign = job.campaign_id), err)]
    pub async fn add_campaign_job(&self, job: &CampaignJob) -> Result<()> {
        sqlx::query(
            "INSERT INTO campaign_jobs (job_id, campaign_id, gpus, tasks) VALUES ($1, $2, $3, $4)",
        )
        .bind(job.job_id)
        .bind(job.campaign_id)
        .bind(job.gpus)
        .bind(&job.tasks)
        .execute(&self.pool)
        .await
        .map_err(|e| StoreError::conflict_on_unique(e, format!("job {}", job.job_id)))?;
        Ok(())
    }

    /// One campaign.
    pub async fn campaign(&self, id: i64) -> Result<Option<CampaignRecord>> {
        sqlx::query(&format!("SELECT {COLUMNS} FROM campaigns WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(record)
            .transpose()
    }

    /// Campaigns, newest first: `user`'s, or everyone's; of `template` when given.
    #[tracing::instrument(skip(self), err)]
    pub async fn campaigns(
        &self,
        user: Option<&str>,
        template: Option<&str>,
        before_id: Option<i64>,
        limit: i64,
    ) -> Result<Vec<CampaignRecord>> {
        let mut sql = Sql::default();
        let mut clauses = vec!["1 = 1".to_string()];
        if let Some(u) = user {
            clauses.push(format!("user_name = {}", sql.arg(Arg::Text(u))));
        }
        if let Some(t) = template {
            clauses.push(format!("template = {}", sql.arg(Arg::Text(t))));
        }
        if let Some(b) = before_id {
            clauses.push(format!("id < {}", sql.arg(Arg::Int(b))));
        }
        let limit = sql.arg(Arg::Int(limit));
        let text = format!(
            "SELECT {COLUMNS} FROM campaigns WHERE {} ORDER BY id DESC LIMIT {limit}",
            clauses.join(" AND ")
        );
        sql.bind(&text)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(record)
            .collect()
    }

    /// The job arrays of a campaign, in the order they were submitted.
    pub async fn campaign_jobs(&self, campaign_id: i64) -> Result<Vec<CampaignJob>> {
        let rows = sqlx::query(
            "SELECT job_id, campaign_id, gpus, tasks FROM campaign_jobs \
             WHERE campaign_id = $1 ORDER BY job_id",
        )
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(campaign_job).collect()
    }

    /// The campaign job array `job_id` belongs to, if any.
    pub async fn campaign_job(&self, job_id: i64) -> Result<Option<CampaignJob>> {
        sqlx::query("SELECT job_id, campaign_id, gpus, tasks FROM campaign_jobs WHERE job_id = $1")
            .bind(job_id)
            .fetch_optional(&self.pool)
            .await?
            .as_ref()
            .map(campaign_job)
            .transpose()
    }

    /// Link a recorded run to its campaign's point, with what the job read.
    #[tracing::instrument(skip_all, fields(run = r.run_id, campaign = r.campaign_id), err)]
    pub async fn record_campaign_run(&self, r: &CampaignRun) -> Result<()> {
        sqlx::query(
            "INSERT INTO campaign_runs (run_id, campaign_id, point, repetition, job_id, task, \
             read_mb_per_s, read_from_storage, read_source, duration_s) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(r.run_id)
        .bind(r.campaign_id)
        .bind(r.point)
        .bind(r.repetition)
        .bind(r.job_id)
        .bind(r.task)
        .bind(r.read_mb_per_s)
        .bind(r.read_from_storage)
        .bind(&r.read_source)
        .bind(r.duration_s)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// A campaign's recorded runs with their benchmark records, by point and repetition.
    pub async fn campaign_runs(
        &self,
        campaign_id: i64,
    ) -> Result<Vec<(CampaignRun, BenchmarkRecord)>> {
        let rows = sqlx::query(
            "SELECT run_id, campaign_id, point, repetition, job_id, task, read_mb_per_s, \
             read_from_storage, read_source, duration_s FROM campaign_runs \
             WHERE campaign_id = $1 ORDER BY point, repetition, run_id",
        )
        .bind(campaign_id)
        .fetch_all(&self.pool)
        .await?;
        let links = rows
            .iter()
            .map(|r| {
                Ok(CampaignRun {
                    run_id: r.try_get("run_id")?,
                    campaign_id: r.try_get("campaign_id")?,
                    point: r.try_get("point")?,
                    repetition: r.try_get("repetition")?,
                    job_id: r.try_get("job_id")?,
                    task: r.try_get("task")?,
                    read_mb_per_s: r.try_get("read_mb_per_s")?,
                    read_from_storage: r.try_get("read_from_storage")?,
                    read_source: r.try_get("read_source")?,
                    duration_s: r.try_get("duration_s")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let ids: Vec<i64> = links.iter().map(|l| l.run_id).collect();
        let mut runs: std::collections::HashMap<i64, BenchmarkRecord> = self
            .benchmark_runs_with_ids(&ids)
            .await?
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        Ok(links
            .into_iter()
            .filter_map(|l| {
                let run = runs.remove(&l.run_id)?;
                Some((l, run))
            })
            .collect())
    }

    /// How the tasks of these job arrays stand (started tasks have rows of their own).
    pub async fn campaign_progress(&self, job_ids: &[i64]) -> Result<CampaignProgress> {
        let mut progress = CampaignProgress::default();
        for chunk in job_ids.chunks(CHUNK) {
            let mut sql = Sql::default();
            let ids: Vec<String> = chunk.iter().map(|&id| sql.arg(Arg::Int(id))).collect();
            let text = format!(
                "SELECT state, end_time IS NOT NULL AS ended, COUNT(*) AS n FROM jobs \
                 WHERE id IN ({}) AND task >= 0 GROUP BY state, end_time IS NOT NULL",
                ids.join(", ")
            );
            for row in sql.bind(&text).fetch_all(&self.pool).await? {
                let state: String = row.try_get("state")?;
                let ended = match row.try_get::<bool, _>("ended") {
                    Ok(b) => b,
                    Err(_) => row.try_get::<i64, _>("ended")? != 0,
                };
                let n: i64 = row.try_get("n")?;
                if ended {
                    progress.ended += n;
                    if state != "COMPLETED" {
                        progress.failed += n;
                    }
                } else if state == "RUNNING" || state == "COMPLETING" {
                    progress.running += n;
                }
            }
        }
        Ok(progress)
    }
}

fn campaign_job(row: &AnyRow) -> Result<CampaignJob> {
    Ok(CampaignJob {
        job_id: row.try_get("job_id")?,
        campaign_id: row.try_get("campaign_id")?,
        gpus: row.try_get("gpus")?,
        tasks: row.try_get("tasks")?,
    })
}
