//! Jobs, the scheduler's input log and its snapshot.
//!
//! The scheduler actor is the only writer: it hands one batch of log entries and job
//! row changes to [`Store::commit_scheduler_batch`], which writes them in a single
//! transaction (a group commit) before any submitter is answered. Readers list and
//! fetch job rows. Must not touch: scheduling decisions or processes.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::{opt_i64, Result, Store, StoreError};

/// The job a row's `(id, task)` names: `task` is the array task, -1 for none.
pub fn job_id(id: i64, task: i64) -> scheduler::JobId {
    match u32::try_from(task) {
        Ok(t) => scheduler::JobId::task(id as u64, t),
        Err(_) => scheduler::JobId::new(id as u64),
    }
}

/// One job row: a job (`task = -1`, also the row of a whole array) or one started
/// array task (`task >= 0`). Times are Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JobRecord {
    pub id: i64,
    pub task: i64,
    pub user_name: String,
    pub account: String,
    pub partition: String,
    pub name: String,
    pub state: String,
    pub reason: Option<String>,
    pub array_spec: Option<String>,
    pub script: String,
    /// The job request as JSON (`scheduler::JobRequest`).
    pub request: String,
    /// Extra environment as a JSON object.
    pub environment: String,
    pub workdir: String,
    /// Where it was submitted from (`SLURM_SUBMIT_DIR`).
    pub submit_dir: String,
    pub submit_time: i64,
    pub start_time: Option<i64>,
    pub end_time: Option<i64>,
    /// Seconds; `None`: unlimited.
    pub time_limit: Option<i64>,
    /// The allocation as JSON (`scheduler::Allocation`).
    pub allocation: Option<String>,
    pub nodelist: String,
    pub cpus: i64,
    pub memory_mb: i64,
    /// Generic resources per node as `squeue` prints them (`gpu:2`).
    pub gpus: String,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<i64>,
    pub stdout_path: Option<String>,
    pub stderr_path: Option<String>,
    /// Why the job ended the way it did, for the user (setup errors, lost steps).
    pub message: Option<String>,
    /// The environment it runs in (`launch::Container` as JSON); `None`: the jobs' runtime
    /// on this machine's software.
    pub container: Option<String>,
    /// A benchmark's suite (or `auto`): its output is read when it ends.
    pub benchmark: Option<String>,
    /// What became of the benchmark's output: the run recorded, or why nothing was.
    pub benchmark_note: Option<String>,
}

/// What a job (or array task) got when it started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStart {
    pub id: i64,
    pub task: i64,
    pub start_time: i64,
    pub time_limit: Option<i64>,
    pub allocation: String,
    pub nodelist: String,
    pub cpus: i64,
    pub memory_mb: i64,
    pub gpus: String,
    /// GPUs given, in thousandths of a whole GPU (MIG instances and shards weighted).
    pub gpu_milli: i64,
    pub stdout_path: String,
    pub stderr_path: Option<String>,
}

/// One change to the job rows, written with the log entries of the same batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobChange {
    /// A pending job asks for something else (`scontrol update`).
    Updated {
        id: i64,
        task: i64,
        name: String,
        partition: String,
        time_limit: Option<i64>,
        request: String,
    },
    Submitted(Box<JobRecord>),
    Started(Box<JobStart>),
    /// The job (or task) is over.
    Ended {
        id: i64,
        task: i64,
        state: String,
        end_time: i64,
        exit_code: Option<i64>,
        exit_signal: Option<i64>,
        /// Why the scheduler ended it (e.g. `DependencyNeverSatisfied`).
        reason: Option<String>,
        message: Option<String>,
    },
    /// The account and partition the scheduler settled on (Slurm's defaults where the
    /// submission named none).
    Placed {
        id: i64,
        task: i64,
        account: String,
        partition: String,
    },
    /// An array task taken out of its array's record of waiting tasks before it
    /// started (`scancel 12_5`): its own row, made from the array's, in `state`.
    TakenOut {
        id: i64,
        task: i64,
        state: String,
        end_time: i64,
    },
    /// A state change without resources (hold, release, requeue, cancel of a
    /// pending job, a pending array finishing its last task).
    State {
        id: i64,
        task: i64,
        state: String,
        reason: Option<String>,
    },
}

/// Which job rows to list; `None` matches everything.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub user: Option<String>,
    /// Any of these users (besides `user`); empty: no such filter.
    pub users: Vec<String>,
    pub states: Vec<String>,
    pub partition: Option<String>,
    /// Any of these partitions; empty: no such filter.
    pub partitions: Vec<String>,
    /// These jobs (ids, an array's tasks included); empty: no such filter.
    pub ids: Vec<i64>,
    /// Jobs named any of these; empty: no such filter.
    pub names: Vec<String>,
    /// Not over before this time (ms): running, or ended at or after it.
    pub active_since: Option<i64>,
    /// Submitted at or after (ms).
    pub since: Option<i64>,
    /// Submitted before (ms).
    pub until: Option<i64>,
    /// Whose name or partition holds this text (any case); `%`, `_` and a backslash are
    /// matched as themselves.
    pub search: Option<String>,
    /// Also the rows of arrays that are over (their tasks have rows of their own; what
    /// never started is only in the array's row).
    pub array_rows: bool,
    pub limit: i64,
    pub offset: i64,
}

/// What the scheduler actor reads at startup.
#[derive(Debug, Default)]
pub struct SchedulerLog {
    pub snapshot: Option<StoredSnapshot>,
    /// Entries after the snapshot, in order.
    pub entries: Vec<(i64, String)>,
    pub max_job_id: i64,
}

/// The scheduler's snapshot as stored: the log's sequence number it covers, its
/// format (see `migrations/*/0014_snapshot_format.sql` and `0015_snapshot_packed.sql`)
/// and its data: text (JSON) in formats 1 and 2, bytes (`packed`) from format 3.
#[derive(Default)]
pub struct StoredSnapshot {
    pub seq: i64,
    pub format: i64,
    pub data: String,
    pub packed: Option<Vec<u8>>,
}

impl std::fmt::Debug for StoredSnapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredSnapshot")
            .field("seq", &self.seq)
            .field("format", &self.format)
            .field("bytes", &self.data.len())
            .field("packed_bytes", &self.packed.as_ref().map(Vec::len))
            .finish()
    }
}

/// What the scheduler actor keeps of an open job, read from its row.
pub struct JobMetaRow {
    pub id: i64,
    pub user_name: String,
    pub name: String,
    pub workdir: String,
}

const JOB_COLUMNS: &str = "id, task, user_name, account, partition, name, state, reason, \
    array_spec, script, request, environment, workdir, submit_dir, submit_time, start_time, \
    end_time, time_limit, allocation, nodelist, cpus, memory_mb, gpus, exit_code, exit_signal, \
    stdout_path, stderr_path, message, container, benchmark, benchmark_note";

fn job_from_row(row: &AnyRow) -> Result<JobRecord> {
    Ok(JobRecord {
        id: row.try_get("id")?,
        task: row.try_get("task")?,
        user_name: row.try_get("user_name")?,
        account: row.try_get("account")?,
        partition: row.try_get("partition")?,
        name: row.try_get("name")?,
        state: row.try_get("state")?,
        reason: row.try_get("reason")?,
        array_spec: row.try_get("array_spec")?,
        script: row.try_get("script")?,
        request: row.try_get("request")?,
        environment: row.try_get("environment")?,
        workdir: row.try_get("workdir")?,
        submit_dir: row.try_get("submit_dir")?,
        submit_time: row.try_get("submit_time")?,
        start_time: opt_i64(row, "start_time")?,
        end_time: opt_i64(row, "end_time")?,
        time_limit: opt_i64(row, "time_limit")?,
        allocation: row.try_get("allocation")?,
        nodelist: row.try_get("nodelist")?,
        cpus: row.try_get("cpus")?,
        memory_mb: row.try_get("memory_mb")?,
        gpus: row.try_get("gpus")?,
        exit_code: opt_i64(row, "exit_code")?,
        exit_signal: opt_i64(row, "exit_signal")?,
        stdout_path: row.try_get("stdout_path")?,
        stderr_path: row.try_get("stderr_path")?,
        message: row.try_get("message")?,
        container: row.try_get("container")?,
        benchmark: row.try_get("benchmark")?,
        benchmark_note: row.try_get("benchmark_note")?,
    })
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// The columns a submitted job's row is written with ([`bind_submitted`] binds them
/// in this order).
const SUBMITTED_COLUMNS: [&str; 21] = [
    "id",
    "task",
    "user_name",
    "account",
    "partition",
    "name",
    "state",
    "reason",
    "array_spec",
    "script",
    "request",
    "environment",
    "workdir",
    "submit_dir",
    "submit_time",
    "time_limit",
    "gpus",
    "stdout_path",
    "stderr_path",
    "container",
    "benchmark",
];

/// Rows written by one multi-row `INSERT` at most: 21 columns × 200 rows is far below
/// either database's limit on bound parameters (SQLite 32,766; PostgreSQL 65,535).
const ROWS_PER_INSERT: usize = 200;

static INSERT_ONE_JOB: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| insert_rows("jobs", &SUBMITTED_COLUMNS, 1));

/// `INSERT INTO table (columns) VALUES ($1, $2), ($3, $4) …` for `rows` rows: one
/// statement, so a batch costs one round trip to the database, not one a row.
fn insert_rows(table: &str, columns: &[&str], rows: usize) -> String {
    let mut sql = format!("INSERT INTO {table} ({}) VALUES ", columns.join(", "));
    let mut n = 0;
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..columns.len() {
            n += 1;
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push('$');
            sql.push_str(&n.to_string());
        }
        sql.push(')');
    }
    sql
}

fn bind_submitted<'q>(q: AnyQuery<'q>, j: &'q JobRecord) -> AnyQuery<'q> {
    q.bind(j.id)
        .bind(j.task)
        .bind(&j.user_name)
        .bind(&j.account)
        .bind(&j.partition)
        .bind(&j.name)
        .bind(&j.state)
        .bind(&j.reason)
        .bind(&j.array_spec)
        .bind(&j.script)
        .bind(&j.request)
        .bind(&j.environment)
        .bind(&j.workdir)
        .bind(&j.submit_dir)
        .bind(j.submit_time)
        .bind(j.time_limit)
        .bind(&j.gpus)
        .bind(&j.stdout_path)
        .bind(&j.stderr_path)
        .bind(&j.container)
        .bind(&j.benchmark)
}

fn change_query(change: &JobChange) -> AnyQuery<'_> {
    match change {
        JobChange::Updated {
            id,
            task,
            name,
            partition,
            time_limit,
            request,
        } => sqlx::query(
            "UPDATE jobs SET name = $3, partition = $4, time_limit = $5, request = $6 \
             WHERE id = $1 AND task = $2",
        )
        .bind(id)
        .bind(task)
        .bind(name)
        .bind(partition)
        .bind(time_limit)
        .bind(request),
        JobChange::Submitted(j) => bind_submitted(sqlx::query(&INSERT_ONE_JOB), j),
        // One statement for a plain job (its own row) and an array task (a new row
        // copied from the array's row, or the task's row again after a requeue).
        JobChange::Started(s) => sqlx::query(
            "INSERT INTO jobs (id, task, user_name, account, partition, name, state, reason, \
             array_spec, script, request, environment, workdir, submit_dir, submit_time, \
             start_time, time_limit, allocation, nodelist, cpus, memory_mb, gpus, stdout_path, \
             stderr_path, gpu_milli, benchmark, slurm_id) \
             SELECT id, $2, user_name, account, partition, name, 'RUNNING', NULL, NULL, '', \
             '{}', '{}', workdir, submit_dir, submit_time, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
             $12, benchmark, slurm_id \
             FROM jobs WHERE id = $1 AND task = -1 \
             ON CONFLICT (id, task) DO UPDATE SET state = 'RUNNING', reason = NULL, \
             start_time = excluded.start_time, end_time = NULL, time_limit = excluded.time_limit, \
             allocation = excluded.allocation, nodelist = excluded.nodelist, \
             cpus = excluded.cpus, memory_mb = excluded.memory_mb, gpus = excluded.gpus, \
             gpu_milli = excluded.gpu_milli, stdout_path = excluded.stdout_path, stderr_path = excluded.stderr_path, \
             exit_code = NULL, exit_signal = NULL, message = NULL, benchmark_note = NULL",
        )
        .bind(s.id)
        .bind(s.task)
        .bind(s.start_time)
        .bind(s.time_limit)
        .bind(&s.allocation)
        .bind(&s.nodelist)
        .bind(s.cpus)
        .bind(s.memory_mb)
        .bind(&s.gpus)
        .bind(&s.stdout_path)
        .bind(&s.stderr_path)
        .bind(s.gpu_milli),
        JobChange::Placed {
            id,
            task,
            account,
            partition,
        } => sqlx::query("UPDATE jobs SET account = $3, partition = $4 WHERE id = $1 AND task = $2")
            .bind(id)
            .bind(task)
            .bind(account)
            .bind(partition),
        JobChange::Ended {
            id,
            task,
            state,
            end_time,
            exit_code,
            exit_signal,
            reason,
            message,
        } => sqlx::query(
            "UPDATE jobs SET state = $3, reason = $8, end_time = $4, exit_code = $5, \
             exit_signal = $6, message = COALESCE($7, message) WHERE id = $1 AND task = $2",
        )
        .bind(*id)
        .bind(*task)
        .bind(state)
        .bind(*end_time)
        .bind(*exit_code)
        .bind(*exit_signal)
        .bind(message)
        .bind(reason),
        JobChange::TakenOut {
            id,
            task,
            state,
            end_time,
        } => sqlx::query(
            "INSERT INTO jobs (id, task, user_name, account, partition, name, state, reason, \
             array_spec, script, request, environment, workdir, submit_dir, submit_time, \
             end_time, time_limit, benchmark, slurm_id) \
             SELECT id, $2, user_name, account, partition, name, $3, NULL, NULL, '', '{}', \
             '{}', workdir, submit_dir, submit_time, $4, time_limit, benchmark, slurm_id \
             FROM jobs WHERE id = $1 AND task = -1 \
             ON CONFLICT (id, task) DO NOTHING",
        )
        .bind(*id)
        .bind(*task)
        .bind(state)
        .bind(*end_time),
        JobChange::State {
            id,
            task,
            state,
            reason,
        } => sqlx::query("UPDATE jobs SET state = $3, reason = $4 WHERE id = $1 AND task = $2")
            .bind(*id)
            .bind(*task)
            .bind(state)
            .bind(reason),
    }
}

impl Store {
    /// Write one batch of the scheduler actor: log entries and job row changes, all
    /// or nothing.
    #[tracing::instrument(skip_all, fields(log = log.len(), changes = changes.len()), err)]
    pub async fn commit_scheduler_batch(
        &self,
        log: &[(i64, String)],
        changes: &[JobChange],
    ) -> Result<()> {
        let mut tx = self.write().await?;
        for chunk in log.chunks(ROWS_PER_INSERT) {
            let sql = insert_rows("sched_log", &["seq", "event"], chunk.len());
            let mut q = sqlx::query(&sql);
            for (seq, event) in chunk {
                q = q.bind(*seq).bind(event);
            }
            q.execute(&mut *tx).await?;
        }
        // Runs of submissions (most of a busy batch) as multi-row inserts; every other
        // change on its own, in order.
        let mut rest = changes;
        while let Some(first) = rest.first() {
            let submitted = rest
                .iter()
                .take(ROWS_PER_INSERT)
                .take_while(|c| matches!(c, JobChange::Submitted(_)))
                .count();
            if submitted > 1 {
                let sql = insert_rows("jobs", &SUBMITTED_COLUMNS, submitted);
                let mut q = sqlx::query(&sql);
                for change in &rest[..submitted] {
                    if let JobChange::Submitted(j) = change {
                        q = bind_submitted(q, j);
                    }
                }
                q.execute(&mut *tx).await?;
                rest = &rest[submitted..];
            } else {
                change_query(first).execute(&mut *tx).await?;
                rest = &rest[1..];
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Replace the scheduler snapshot (its bytes, in `format`) and drop the log entries
    /// it covers.
    #[tracing::instrument(skip_all, fields(seq, format, bytes = packed.len()), err)]
    pub async fn save_scheduler_snapshot(
        &self,
        seq: i64,
        format: i64,
        packed: &[u8],
    ) -> Result<()> {
        let mut tx = self.write().await?;
        sqlx::query("DELETE FROM sched_snapshot")
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO sched_snapshot (id, seq, format, data, packed) VALUES (1, $1, $2, '', $3)",
        )
        .bind(seq)
        .bind(format)
        .bind(packed)
        .execute(&mut *tx)
        .await?;
        sqlx::query("DELETE FROM sched_log WHERE seq <= $1")
            .bind(seq)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The snapshot, the log after it, and the highest job id ever used.
    #[tracing::instrument(skip_all, err)]
    pub async fn load_scheduler_log(&self) -> Result<SchedulerLog> {
        let snapshot =
            sqlx::query("SELECT seq, format, data, packed FROM sched_snapshot WHERE id = 1")
                .fetch_optional(&self.pool)
                .await?
                .map(|row| -> Result<StoredSnapshot> {
                    Ok(StoredSnapshot {
                        seq: row.try_get(0)?,
                        format: row.try_get(1)?,
                        data: row.try_get(2)?,
                        packed: row.try_get(3)?,
                    })
                })
                .transpose()?;
        let after = snapshot.as_ref().map_or(i64::MIN, |s| s.seq);
        let entries = sqlx::query("SELECT seq, event FROM sched_log WHERE seq > $1 ORDER BY seq")
            .bind(after)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<Vec<_>>>()?;
        let max_job_id = sqlx::query("SELECT COALESCE(MAX(id), 0) FROM jobs")
            .fetch_one(&self.pool)
            .await?
            .try_get::<i64, _>(0)?;
        Ok(SchedulerLog {
            snapshot,
            entries,
            max_job_id,
        })
    }

    /// Record a job Slurm accepted (`slurm_id`, its id there) in one transaction.
    #[tracing::instrument(skip_all, fields(id = record.id, slurm_id), err)]
    pub async fn record_slurm_submission(&self, record: &JobRecord, slurm_id: &str) -> Result<()> {
        let mut tx = self.write().await?;
        change_query(&JobChange::Submitted(Box::new(record.clone())))
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE jobs SET slurm_id = $2 WHERE id = $1 AND task = -1")
            .bind(record.id)
            .bind(slurm_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The Slurm backend's jobs that have not ended, each row with its Slurm id: the
    /// job's (or array's) row and every task row of it.
    #[tracing::instrument(skip_all, err)]
    pub async fn open_slurm_jobs(&self) -> Result<Vec<(JobRecord, String)>> {
        sqlx::query(&format!(
            "SELECT {JOB_COLUMNS}, slurm_id FROM jobs WHERE id IN (SELECT id FROM jobs \
             WHERE task = -1 AND slurm_id IS NOT NULL AND end_time IS NULL) ORDER BY id, task"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| Ok((job_from_row(row)?, row.try_get("slurm_id")?)))
        .collect()
    }

    /// The highest id of a job atrium's own scheduler ran (0: none): Slurm must number
    /// its jobs above it once it is the backend.
    #[tracing::instrument(skip_all, err)]
    pub async fn highest_internal_job_id(&self) -> Result<i64> {
        let row = sqlx::query("SELECT MAX(id) AS id FROM jobs WHERE slurm_id IS NULL")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<Option<i64>, _>("id")?.unwrap_or(0))
    }

    /// One job row (`task = -1` for a job or a whole array).
    #[tracing::instrument(skip_all, fields(id, task), err)]
    pub async fn job(&self, id: i64, task: i64) -> Result<JobRecord> {
        let row = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1 AND task = $2"
        ))
        .bind(id)
        .bind(task)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StoreError::NotFound)?;
        job_from_row(&row)
    }

    /// Rows of running and completing jobs and tasks: the steps to re-adopt.
    #[tracing::instrument(skip_all, err)]
    pub async fn running_jobs(&self) -> Result<Vec<JobRecord>> {
        sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ('RUNNING', 'COMPLETING') \
             AND start_time IS NOT NULL ORDER BY id, task"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(job_from_row)
        .collect()
    }

    /// What the scheduler actor keeps of each job (or array) numbered `from_id` or
    /// above that has not ended: a range of the primary key, so a restore reads only
    /// the jobs submitted after its snapshot.
    #[tracing::instrument(skip_all, fields(from_id), err)]
    pub async fn open_job_meta(&self, from_id: i64) -> Result<Vec<JobMetaRow>> {
        sqlx::query(
            "SELECT id, user_name, name, workdir FROM jobs \
             WHERE id >= $1 AND task = -1 AND end_time IS NULL ORDER BY id",
        )
        .bind(from_id)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| {
            Ok(JobMetaRow {
                id: row.try_get(0)?,
                user_name: row.try_get(1)?,
                name: row.try_get(2)?,
                workdir: row.try_get(3)?,
            })
        })
        .collect()
    }

    /// The working directories of jobs `ids` (their own rows, not their tasks').
    #[tracing::instrument(skip_all, err)]
    pub async fn workdirs(&self, ids: &[i64]) -> Result<Vec<(i64, String)>> {
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT id, workdir FROM jobs WHERE task = -1 AND id IN ({})",
                marks.join(", ")
            );
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(*id);
            }
            for row in q.fetch_all(&self.pool).await? {
                out.push((row.try_get(0)?, row.try_get(1)?));
            }
        }
        Ok(out)
    }

    /// The tasks of arrays `ids` that have rows of their own (those that started), by
    /// array.
    #[tracing::instrument(skip_all, err)]
    pub async fn array_tasks(
        &self,
        ids: &[i64],
    ) -> Result<std::collections::HashMap<i64, Vec<i64>>> {
        let mut out: std::collections::HashMap<i64, Vec<i64>> = Default::default();
        for chunk in ids.chunks(500) {
            let marks: Vec<String> = (1..=chunk.len()).map(|i| format!("${i}")).collect();
            let sql = format!(
                "SELECT id, task FROM jobs WHERE task >= 0 AND id IN ({})",
                marks.join(", ")
            );
            let mut q = sqlx::query(&sql);
            for id in chunk {
                q = q.bind(*id);
            }
            for row in q.fetch_all(&self.pool).await? {
                out.entry(row.try_get(0)?)
                    .or_default()
                    .push(row.try_get(1)?);
            }
        }
        Ok(out)
    }

    /// The `limit` jobs (of `user`, or everyone's) that ended last, latest first:
    /// what the queue pages show under "Recent jobs". An index range
    /// (`jobs_user_end`, `jobs_end`), whatever the size of the queue.
    #[tracing::instrument(skip_all, err)]
    pub async fn recently_ended(&self, user: Option<&str>, limit: i64) -> Result<Vec<JobRecord>> {
        let by_user = if user.is_some() {
            "user_name = $2 AND "
        } else {
            ""
        };
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE {by_user}end_time IS NOT NULL \
             AND NOT (task = -1 AND array_spec IS NOT NULL AND state <> 'PENDING') \
             ORDER BY end_time DESC, id DESC, task DESC LIMIT $1"
        );
        let mut q = sqlx::query(&sql).bind(limit);
        if let Some(u) = user {
            q = q.bind(u);
        }
        q.fetch_all(&self.pool)
            .await?
            .iter()
            .map(job_from_row)
            .collect()
    }

    /// Job rows matching `filter`, newest first, and how many match in all. The row
    /// of an array that has started tasks is left out (its tasks are listed).
    #[tracing::instrument(skip_all, err)]
    pub async fn list_jobs(&self, filter: &JobFilter) -> Result<(Vec<JobRecord>, i64)> {
        let mut clauses = Vec::new();
        if !filter.array_rows {
            clauses
                .push("NOT (task = -1 AND array_spec IS NOT NULL AND state <> 'PENDING')".into());
        }
        let mut n = 0;
        let mut next = || {
            n += 1;
            format!("${n}")
        };
        // Named jobs are found by their key: `|| ''` and `+ 0` keep SQLite from
        // walking a user's whole history through its (user, time) indexes to pick
        // out a few ids (`sacct -j`).
        let (by_user, by_time) = if filter.ids.is_empty() {
            ("user_name", "submit_time")
        } else {
            ("user_name || ''", "submit_time + 0")
        };
        if filter.user.is_some() {
            clauses.push(format!("{by_user} = {}", next()));
        }
        if filter.partition.is_some() {
            clauses.push(format!("partition = {}", next()));
        }
        for (column, values) in [
            (by_user, filter.users.len()),
            ("partition", filter.partitions.len()),
            ("name", filter.names.len()),
            ("id", filter.ids.len()),
        ] {
            if values > 0 {
                let marks: Vec<String> = (0..values).map(|_| next()).collect();
                clauses.push(format!("{column} IN ({})", marks.join(", ")));
            }
        }
        if filter.active_since.is_some() {
            clauses.push(format!("(end_time IS NULL OR end_time >= {})", next()));
        }
        if filter.since.is_some() {
            clauses.push(format!("{by_time} >= {}", next()));
        }
        if filter.until.is_some() {
            clauses.push(format!("{by_time} < {}", next()));
        }
        if filter.search.is_some() {
            let (a, b) = (next(), next());
            clauses.push(format!(
                "(LOWER(name) LIKE {a} ESCAPE '\\' OR LOWER(partition) LIKE {b} ESCAPE '\\')"
            ));
        }
        if !filter.states.is_empty() {
            let marks: Vec<String> = filter.states.iter().map(|_| next()).collect();
            clauses.push(format!("state IN ({})", marks.join(", ")));
        }
        if clauses.is_empty() {
            clauses.push("TRUE".into());
        }
        let filter_sql = clauses.join(" AND ");
        let limit = next();
        let offset = next();
        let list_sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE {filter_sql} \
             ORDER BY submit_time DESC, id DESC, task DESC LIMIT {limit} OFFSET {offset}"
        );
        let count_sql = format!("SELECT COUNT(*) FROM jobs WHERE {filter_sql}");
        let rows = bind_filter(sqlx::query(&list_sql), filter)
            .bind(filter.limit)
            .bind(filter.offset)
            .fetch_all(&self.pool)
            .await?;
        // A first page that is not full holds them all: no need to count.
        let total: i64 = if filter.offset == 0 && (rows.len() as i64) < filter.limit {
            rows.len() as i64
        } else {
            bind_filter(sqlx::query(&count_sql), filter)
                .fetch_one(&self.pool)
                .await?
                .try_get(0)?
        };
        let jobs = rows.iter().map(job_from_row).collect::<Result<Vec<_>>>()?;
        Ok((jobs, total))
    }
}

/// `%text%` in lower case with LIKE's wildcards (and its escape) escaped by a backslash.
fn like_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('%');
    for c in text.to_lowercase().chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// Bind the values of `filter` in the order `list_jobs` numbered them.
fn bind_filter<'q>(mut q: AnyQuery<'q>, filter: &'q JobFilter) -> AnyQuery<'q> {
    if let Some(u) = &filter.user {
        q = q.bind(u);
    }
    if let Some(p) = &filter.partition {
        q = q.bind(p);
    }
    for u in &filter.users {
        q = q.bind(u);
    }
    for p in &filter.partitions {
        q = q.bind(p);
    }
    for n in &filter.names {
        q = q.bind(n);
    }
    for id in &filter.ids {
        q = q.bind(*id);
    }
    if let Some(t) = filter.active_since {
        q = q.bind(t);
    }
    if let Some(s) = filter.since {
        q = q.bind(s);
    }
    if let Some(u) = filter.until {
        q = q.bind(u);
    }
    if let Some(text) = &filter.search {
        let pattern = like_pattern(text);
        q = q.bind(pattern.clone()).bind(pattern);
    }
    for s in &filter.states {
        q = q.bind(s);
    }
    q
}

impl Store {
    /// Ended jobs marked as benchmarks whose output has not been read yet, oldest
    /// first.
    pub async fn unread_benchmark_jobs(&self, limit: i64) -> Result<Vec<JobRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE benchmark IS NOT NULL \
             AND benchmark_note IS NULL AND end_time IS NOT NULL \
             AND state NOT IN ('PENDING', 'RUNNING', 'COMPLETING') \
             ORDER BY end_time, id, task LIMIT $1"
        ))
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// Say what became of a benchmark job's output.
    pub async fn set_benchmark_note(&self, id: i64, task: i64, note: &str) -> Result<()> {
        sqlx::query("UPDATE jobs SET benchmark_note = $3 WHERE id = $1 AND task = $2")
            .bind(id)
            .bind(task)
            .bind(note)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
