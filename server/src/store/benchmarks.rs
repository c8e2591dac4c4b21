//! Benchmark runs and their metrics: the runs recorded on this portal (`source`
//! `local`) and the published reference runs, seeded from the binary at startup.
//!
//! Must not touch: checking a run's values (`benchmarks::run` does) or who may delete
//! what (the Benchmarks service decides). Reference runs are never deleted one by one: only a new
//! version of the reference data replaces them all.

use sqlx::any::AnyRow;
use sqlx::Row;

use super::sql::{Arg, Sql};
use super::{opt_i64, NewAuditEntry, Result, Store, StoreError};
use crate::domain::benchmark::{Metric, RunSetup};

/// What the runs recorded here carry as `source`.
pub const LOCAL: &str = "local";

/// A benchmark run as stored: what it is, when it ran, who recorded it, and what it
/// measured. Text a run does not say is `None`; times are Unix ms.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BenchmarkRun {
    pub setup: RunSetup,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    /// The job it came from.
    pub job_id: Option<i64>,
    /// Who recorded it; empty for reference runs.
    pub user_name: String,
    pub notes: Option<String>,
    /// Lower-case tags, comma-separated.
    pub tags: String,
    /// `local`, or the published study of a reference run.
    pub source: String,
    /// In name order.
    pub metrics: Vec<Metric>,
}

/// A stored run.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchmarkRecord {
    pub id: i64,
    pub created_at: i64,
    pub run: BenchmarkRun,
}

impl BenchmarkRecord {
    pub fn is_reference(&self) -> bool {
        self.run.source != LOCAL
    }
}

/// In which order runs are listed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BenchmarkSort {
    /// Most recently recorded first.
    #[default]
    Newest,
    /// Fewest GPUs first, then most recent.
    Gpus,
    /// The highest value of this metric first; runs without it last.
    Metric(String),
}

/// Which runs to list; `None` matches everything.
#[derive(Debug, Clone, Default)]
pub struct BenchmarkFilter {
    pub suite: Option<String>,
    pub model: Option<String>,
    pub gpu_model: Option<String>,
    pub storage: Option<String>,
    pub user: Option<String>,
    /// Runs carrying this (lower-case) tag.
    pub tag: Option<String>,
    pub job_id: Option<i64>,
    /// `Some(true)`: only reference runs; `Some(false)`: only local ones.
    pub reference: Option<bool>,
    /// Local runs that started (or, without a start, were recorded) at or after this
    /// time and before `to`; reference runs carry no date and are not narrowed.
    pub from: Option<i64>,
    pub to: Option<i64>,
    /// Runs that measured this metric.
    pub metric: Option<String>,
    pub sort: BenchmarkSort,
    pub limit: i64,
    pub offset: i64,
}

const COLUMNS: &str = "r.id, r.suite, r.model, r.framework, r.precision, r.batch_size_per_gpu, \
    r.gpus, r.nodes, r.gpu_model, r.storage, r.dataset, r.started_at, r.ended_at, r.job_id, \
    r.user_name, r.notes, r.tags, r.source, r.created_at";

/// A run's time for the `from`/`to` filters (the expression of its index).
const RUN_TIME: &str = "COALESCE(r.started_at, r.created_at)";

/// Metrics are read for this many runs per query.
const METRIC_CHUNK: usize = 500;

fn record(row: &AnyRow) -> Result<BenchmarkRecord> {
    Ok(BenchmarkRecord {
        id: row.try_get("id")?,
        created_at: row.try_get("created_at")?,
        run: BenchmarkRun {
            setup: RunSetup {
                suite: row.try_get("suite")?,
                model: row.try_get("model")?,
                framework: row.try_get("framework")?,
                precision: row.try_get("precision")?,
                batch_size_per_gpu: opt_i64(row, "batch_size_per_gpu")?,
                gpus: row.try_get("gpus")?,
                nodes: row.try_get("nodes")?,
                gpu_model: row.try_get("gpu_model")?,
                storage: row.try_get("storage")?,
                dataset: row.try_get("dataset")?,
            },
            started_at: opt_i64(row, "started_at")?,
            ended_at: opt_i64(row, "ended_at")?,
            job_id: opt_i64(row, "job_id")?,
            user_name: row.try_get("user_name")?,
            notes: row.try_get("notes")?,
            tags: row.try_get("tags")?,
            source: row.try_get("source")?,
            metrics: Vec::new(),
        },
    })
}

/// `text` for a `LIKE` pattern, matched literally (`\` escapes).
fn like_literal(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

fn filter_sql<'a>(filter: &'a BenchmarkFilter, sql: &mut Sql<'a>) -> String {
    let mut clauses: Vec<String> = Vec::new();
    for (column, value) in [
        ("r.suite", &filter.suite),
        ("r.model", &filter.model),
        ("r.gpu_model", &filter.gpu_model),
        ("r.storage", &filter.storage),
        ("r.user_name", &filter.user),
    ] {
        if let Some(v) = value {
            clauses.push(format!("{column} = {}", sql.arg(Arg::Text(v))));
        }
    }
    if let Some(tag) = &filter.tag {
        let pattern = format!("%,{},%", like_literal(tag));
        clauses.push(format!(
            "(',' || r.tags || ',') LIKE {} ESCAPE '\\'",
            sql.arg(Arg::Owned(pattern))
        ));
    }
    if let Some(job) = filter.job_id {
        clauses.push(format!("r.job_id = {}", sql.arg(Arg::Int(job))));
    }
    match filter.reference {
        Some(true) => clauses.push(format!("r.source <> '{LOCAL}'")),
        Some(false) => clauses.push(format!("r.source = '{LOCAL}'")),
        None => {}
    }
    for (op, value) in [(">=", filter.from), ("<", filter.to)] {
        if let Some(t) = value {
            clauses.push(format!(
                "(r.source <> '{LOCAL}' OR {RUN_TIME} {op} {})",
                sql.arg(Arg::Int(t))
            ));
        }
    }
    if let Some(name) = &filter.metric {
        clauses.push(format!(
            "EXISTS (SELECT 1 FROM benchmark_metrics m WHERE m.run_id = r.id AND m.name = {})",
            sql.arg(Arg::Text(name))
        ));
    }
    if clauses.is_empty() {
        "1 = 1".to_string()
    } else {
        clauses.join(" AND ")
    }
}

fn order_sql<'a>(sort: &'a BenchmarkSort, sql: &mut Sql<'a>) -> String {
    match sort {
        BenchmarkSort::Newest => "r.created_at DESC, r.id DESC".into(),
        BenchmarkSort::Gpus => "r.gpus, r.created_at DESC, r.id DESC".into(),
        BenchmarkSort::Metric(name) => format!(
            "(SELECT m.value FROM benchmark_metrics m WHERE m.run_id = r.id AND m.name = {}) \
             DESC NULLS LAST, r.id DESC",
            sql.arg(Arg::Text(name))
        ),
    }
}

async fn insert_run(conn: &mut sqlx::AnyConnection, run: &BenchmarkRun, now: i64) -> Result<i64> {
    let setup = &run.setup;
    let row = sqlx::query(
        "INSERT INTO benchmark_runs (suite, model, framework, precision, batch_size_per_gpu, \
         gpus, nodes, gpu_model, storage, dataset, started_at, ended_at, job_id, user_name, \
         notes, tags, source, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) \
         RETURNING id",
    )
    .bind(&setup.suite)
    .bind(&setup.model)
    .bind(&setup.framework)
    .bind(&setup.precision)
    .bind(setup.batch_size_per_gpu)
    .bind(setup.gpus)
    .bind(setup.nodes)
    .bind(&setup.gpu_model)
    .bind(&setup.storage)
    .bind(&setup.dataset)
    .bind(run.started_at)
    .bind(run.ended_at)
    .bind(run.job_id)
    .bind(&run.user_name)
    .bind(&run.notes)
    .bind(&run.tags)
    .bind(&run.source)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?;
    let id: i64 = row.try_get("id")?;
    for m in &run.metrics {
        sqlx::query(
            "INSERT INTO benchmark_metrics (run_id, name, value, unit) VALUES ($1, $2, $3, $4)",
        )
        .bind(id)
        .bind(&m.name)
        .bind(m.value)
        .bind(&m.unit)
        .execute(&mut *conn)
        .await
        .map_err(|e| StoreError::conflict_on_unique(e, format!("metric {}", m.name)))?;
    }
    Ok(id)
}

impl Store {
    /// Record a run with its metrics.
    #[tracing::instrument(skip_all, fields(suite = %run.setup.suite, user = %run.user_name), err)]
    pub async fn create_benchmark_run(
        &self,
        run: &BenchmarkRun,
        now: i64,
    ) -> Result<BenchmarkRecord> {
        let mut tx = self.write().await?;
        let id = insert_run(&mut tx, run, now).await?;
        tx.commit().await?;
        self.benchmark_run(id).await?.ok_or(StoreError::NotFound)
    }

    /// One run with its metrics.
    pub async fn benchmark_run(&self, id: i64) -> Result<Option<BenchmarkRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM benchmark_runs r WHERE r.id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let mut records = vec![record(&row)?];
        self.load_metrics(&mut records).await?;
        Ok(records.pop())
    }

    /// The runs `filter` matches, in its order, `limit` from `offset`, with their metrics.
    #[tracing::instrument(skip_all, err)]
    pub async fn benchmark_runs(&self, filter: &BenchmarkFilter) -> Result<Vec<BenchmarkRecord>> {
        let mut sql = Sql::default();
        let clause = filter_sql(filter, &mut sql);
        let order = order_sql(&filter.sort, &mut sql);
        let limit = sql.arg(Arg::Int(filter.limit));
        let offset = sql.arg(Arg::Int(filter.offset));
        let text = format!(
            "SELECT {COLUMNS} FROM benchmark_runs r WHERE {clause} ORDER BY {order} \
             LIMIT {limit} OFFSET {offset}"
        );
        let mut records = sql
            .bind(&text)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(record)
            .collect::<Result<Vec<_>>>()?;
        self.load_metrics(&mut records).await?;
        Ok(records)
    }

    /// The runs with these ids (those that exist), with their metrics.
    pub async fn benchmark_runs_with_ids(&self, ids: &[i64]) -> Result<Vec<BenchmarkRecord>> {
        let mut records = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(METRIC_CHUNK) {
            let mut sql = Sql::default();
            let args: Vec<String> = chunk.iter().map(|&id| sql.arg(Arg::Int(id))).collect();
            let text = format!(
                "SELECT {COLUMNS} FROM benchmark_runs r WHERE r.id IN ({}) ORDER BY r.id",
                args.join(", ")
            );
            for row in sql.bind(&text).fetch_all(&self.pool).await? {
                records.push(record(&row)?);
            }
        }
        self.load_metrics(&mut records).await?;
        Ok(records)
    }

    /// Fill in the metrics of `records`, in name order.
    async fn load_metrics(&self, records: &mut [BenchmarkRecord]) -> Result<()> {
        for chunk in records.chunks_mut(METRIC_CHUNK) {
            let mut sql = Sql::default();
            let ids: Vec<String> = chunk.iter().map(|r| sql.arg(Arg::Int(r.id))).collect();
            let text = format!(
                "SELECT run_id, name, value, unit FROM benchmark_metrics WHERE run_id IN ({}) \
                 ORDER BY run_id, name",
                ids.join(", ")
            );
            for row in sql.bind(&text).fetch_all(&self.pool).await? {
                let run_id: i64 = row.try_get("run_id")?;
                if let Some(r) = chunk.iter_mut().find(|r| r.id == run_id) {
                    r.run.metrics.push(Metric {
                        name: row.try_get("name")?,
                        value: row.try_get("value")?,
                        unit: row.try_get("unit")?,
                    });
                }
            }
        }
        Ok(())
    }

    /// Delete a local run and its metrics, with its audit entry when one is given;
    /// returns what it was. `NotFound` for a reference run.
    #[tracing::instrument(skip_all, fields(id), err)]
    pub async fn delete_benchmark_run(
        &self,
        id: i64,
        now: i64,
        audit: Option<&NewAuditEntry<'_>>,
    ) -> Result<BenchmarkRecord> {
        let deleted = self
            .benchmark_run(id)
            .await?
            .filter(|r| !r.is_reference())
            .ok_or(StoreError::NotFound)?;
        let mut tx = self.write().await?;
        sqlx::query("DELETE FROM benchmark_metrics WHERE run_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let gone = sqlx::query(&format!(
            "DELETE FROM benchmark_runs WHERE id = $1 AND source = '{LOCAL}'"
        ))
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if gone.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        if let Some(audit) = audit {
            Self::audit_in(&mut tx, audit, now).await?;
        }
        tx.commit().await?;
        Ok(deleted)
    }

    /// Make the stored reference runs those of `version`: when another version (or none)
    /// is stored, replace them all, in one transaction; otherwise leave them (and their
    /// ids) alone. Returns whether they were replaced.
    #[tracing::instrument(skip_all, fields(version, runs = runs.len()), err)]
    pub async fn seed_reference_benchmarks(
        &self,
        version: i64,
        runs: &[BenchmarkRun],
        now: i64,
    ) -> Result<bool> {
        let mut tx = self.write().await?;
        // The update takes the row's lock first: a second portal seeding at the same
        // time waits, then finds the version current.
        let changed = sqlx::query(
            "UPDATE meta SET value = $1 WHERE key = 'benchmark_reference' AND value <> $1",
        )
        .bind(version)
        .execute(&mut *tx)
        .await?;
        if changed.rows_affected() == 0 {
            return Ok(false);
        }
        let old = format!("SELECT id FROM benchmark_runs WHERE source <> '{LOCAL}'");
        sqlx::query(&format!(
            "DELETE FROM benchmark_metrics WHERE run_id IN ({old})"
        ))
        .execute(&mut *tx)
        .await?;
        sqlx::query(&format!(
            "DELETE FROM benchmark_runs WHERE source <> '{LOCAL}'"
        ))
        .execute(&mut *tx)
        .await?;
        for run in runs {
            insert_run(&mut tx, run, now).await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_match_literally() {
        assert_eq!(like_literal("a_b%c\\"), "a\\_b\\%c\\\\");
    }
}
