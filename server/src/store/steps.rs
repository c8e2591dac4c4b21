//! Job steps (`srun` inside a running job): recording their start and end, and
//! listing those of a page of jobs for `sacct`.
//! Must not touch: who may record a step (the jobs service checks the job token).

use sqlx::any::AnyRow;
use sqlx::Row;

use super::{opt_i64, Result, Store};

/// A step as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    pub job_id: i64,
    /// The array task (-1: none).
    pub task: i64,
    pub step_id: i64,
    pub name: String,
    pub ntasks: i64,
    /// The step's GPUs as `SLURM_STEP_GPUS` lists them.
    pub gpus: String,
    /// `RUNNING`, `COMPLETED`, `FAILED` or `CANCELLED`.
    pub state: String,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<i64>,
    pub start_time: i64,
    pub end_time: Option<i64>,
}

/// A step that starts: its job and what it runs.
#[derive(Debug, Clone)]
pub struct NewStep<'a> {
    pub job_id: i64,
    pub task: i64,
    pub name: &'a str,
    pub ntasks: i64,
    pub gpus: &'a str,
    pub start_time: i64,
}

/// How a step ended.
#[derive(Debug, Clone)]
pub struct StepEnd<'a> {
    pub state: &'a str,
    pub exit_code: i64,
    pub exit_signal: Option<i64>,
    pub end_time: i64,
}

const STEP_COLUMNS: &str = "job_id, task, step_id, name, ntasks, gpus, state, exit_code, \
                            exit_signal, start_time, end_time";

/// How many jobs one listing query names (bind parameters stay far below SQLite's
/// limit).
const JOBS_PER_QUERY: usize = 500;

/// Two `srun` of one job asking at the same moment may pick the same number on
/// PostgreSQL: the loser tries again this many times.
const INSERT_TRIES: usize = 5;

fn step_from_row(row: &AnyRow) -> Result<StepRecord> {
    Ok(StepRecord {
        job_id: row.try_get("job_id")?,
        task: row.try_get("task")?,
        step_id: row.try_get("step_id")?,
        name: row.try_get("name")?,
        ntasks: row.try_get("ntasks")?,
        gpus: row.try_get("gpus")?,
        state: row.try_get("state")?,
        exit_code: opt_i64(row, "exit_code")?,
        exit_signal: opt_i64(row, "exit_signal")?,
        start_time: row.try_get("start_time")?,
        end_time: opt_i64(row, "end_time")?,
    })
}

impl Store {
    /// Record a running step with the next free number of its job; `None` when the
    /// job has `max_steps` steps already.
    #[tracing::instrument(skip_all, fields(job = step.job_id), err)]
    pub async fn insert_step(&self, step: &NewStep<'_>, max_steps: i64) -> Result<Option<i64>> {
        let mut last = None;
        for _ in 0..INSERT_TRIES {
            let inserted = sqlx::query(
                "INSERT INTO job_steps (job_id, task, step_id, name, ntasks, gpus, state, start_time) \
                 SELECT $1, $2, COALESCE(MAX(step_id) + 1, 0), $3, $4, $5, 'RUNNING', $6 \
                 FROM job_steps WHERE job_id = $1 AND task = $2 \
                 HAVING COALESCE(MAX(step_id) + 1, 0) < $7 \
                 RETURNING step_id",
            )
            .bind(step.job_id)
            .bind(step.task)
            .bind(step.name)
            .bind(step.ntasks)
            .bind(step.gpus)
            .bind(step.start_time)
            .bind(max_steps)
            .fetch_optional(&self.pool)
            .await;
            match inserted {
                Ok(Some(row)) => return Ok(Some(row.try_get(0)?)),
                Ok(None) => return Ok(None),
                Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                    last = Some(sqlx::Error::Database(db));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(last.map_or(super::StoreError::NotFound, Into::into))
    }

    /// Record how a running step ended; `false` when there is no such running step.
    #[tracing::instrument(skip_all, fields(job = job_id, step = step_id), err)]
    pub async fn end_step(
        &self,
        job_id: i64,
        task: i64,
        step_id: i64,
        end: &StepEnd<'_>,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE job_steps SET state = $4, exit_code = $5, exit_signal = $6, end_time = $7 \
             WHERE job_id = $1 AND task = $2 AND step_id = $3 AND state = 'RUNNING'",
        )
        .bind(job_id)
        .bind(task)
        .bind(step_id)
        .bind(end.state)
        .bind(end.exit_code)
        .bind(end.exit_signal)
        .bind(end.end_time)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// The steps of these jobs (`(job_id, task)`), by job and step number.
    #[tracing::instrument(skip_all, fields(jobs = jobs.len()), err)]
    pub async fn steps_of(&self, jobs: &[(i64, i64)]) -> Result<Vec<StepRecord>> {
        let wanted: std::collections::HashSet<(i64, i64)> = jobs.iter().copied().collect();
        let mut ids: Vec<i64> = jobs.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut out = Vec::new();
        for chunk in ids.chunks(JOBS_PER_QUERY) {
            let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT {STEP_COLUMNS} FROM job_steps WHERE job_id IN ({}) \
                 ORDER BY job_id, task, step_id",
                marks.join(", ")
            );
            let mut query = sqlx::query(&sql);
            for id in chunk {
                query = query.bind(*id);
            }
            for row in query.fetch_all(&self.pool).await? {
                let step = step_from_row(&row)?;
                if wanted.contains(&(step.job_id, step.task)) {
                    out.push(step);
                }
            }
        }
        Ok(out)
    }
}
