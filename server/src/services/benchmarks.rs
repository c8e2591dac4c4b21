//! Benchmark runs and sizing advice: recording a run (by hand, or read from a job's
//! output), listing and deleting runs, and answering a sizing question from a run or
//! the published reference figures.
//!
//! Owns: who may record a run for a job (its owner or an administrator), who may
//! delete one (its owner or an administrator, a reference run never; an
//! administrator's deletion of another user's run is audited).
//! Must not touch: HTTP types (CSV and JSON are the handlers'), SQL (the store).

use serde::Serialize;
use utoipa::ToSchema;

use super::ServiceError;
use crate::auth::Principal;
use crate::benchmarks::reference;
use crate::benchmarks::run::{may_delete, DeleteRefusal, ListQuery, NewRun};
use crate::benchmarks::sizing::{advise, Advice, SizingQuery};
use crate::benchmarks::{Metric, RunSetup};
use crate::store::{BenchmarkRecord, NewAuditEntry, Store, StoreError};
use crate::util::{now_ms, rfc3339};

/// A benchmark run.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RunInfo {
    pub id: i64,
    /// `local`, or the published study a reference run comes from.
    pub source: String,
    /// Whether this is a published reference run (read-only).
    pub reference: bool,
    /// What the run is (suite, model, GPUs, storage …), its fields inline.
    #[serde(flatten)]
    pub setup: RunSetup,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub job_id: Option<i64>,
    /// Who recorded it; empty for reference runs.
    pub user: String,
    pub notes: Option<String>,
    pub tags: Vec<String>,
    pub metrics: Vec<Metric>,
    pub created_at: String,
}

impl From<BenchmarkRecord> for RunInfo {
    fn from(r: BenchmarkRecord) -> Self {
        let reference = r.is_reference();
        let run = r.run;
        RunInfo {
            id: r.id,
            source: run.source,
            reference,
            setup: run.setup,
            started_at: run.started_at.map(rfc3339),
            ended_at: run.ended_at.map(rfc3339),
            job_id: run.job_id,
            user: run.user_name,
            notes: run.notes,
            tags: run
                .tags
                .split(',')
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
            metrics: run.metrics,
            created_at: rfc3339(r.created_at),
        }
    }
}

impl RunInfo {
    /// The value of `metric`, when the run measured it.
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
    }
}

/// The benchmarks service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Benchmarks {
    store: Store,
}

impl Benchmarks {
    pub fn new(store: Store) -> Benchmarks {
        Benchmarks { store }
    }

    /// Record `body` as `caller`'s run; a run of a job must be of the caller's own
    /// job (any job for an administrator).
    pub async fn record(&self, caller: &Principal, body: &NewRun) -> Result<RunInfo, ServiceError> {
        let run = body.check(&caller.username)?;
        if let Some(job) = run.job_id {
            let owner = match self.store.job(job, -1).await {
                Ok(j) => Some(j.user_name),
                Err(StoreError::NotFound) => None,
                Err(e) => return Err(e.into()),
            };
            if !owner.is_some_and(|o| caller.may_see(&o)) {
                return Err(ServiceError::invalid(
                    "job_id",
                    format!("job_id: no job {job} of yours"),
                ));
            }
        }
        Ok(self
            .store
            .create_benchmark_run(&run, now_ms())
            .await?
            .into())
    }

    /// Run `id`; every run is everyone's to see.
    pub async fn run(&self, id: i64) -> Result<RunInfo, ServiceError> {
        Ok(self
            .store
            .benchmark_run(id)
            .await?
            .ok_or(ServiceError::NotFound)?
            .into())
    }

    /// The runs `query` lists, and the offset of the next page when there is one.
    pub async fn list(
        &self,
        query: &ListQuery,
    ) -> Result<(Vec<RunInfo>, Option<i64>), ServiceError> {
        let mut filter = query.filter.clone();
        filter.limit += 1;
        let mut runs = self.store.benchmark_runs(&filter).await?;
        let next = (runs.len() as i64 > query.filter.limit).then(|| {
            runs.truncate(query.filter.limit as usize);
            query.filter.offset + query.filter.limit
        });
        Ok((runs.into_iter().map(RunInfo::from).collect(), next))
    }

    /// Delete run `id` as `caller`, by the one rule of [`may_delete`]; an administrator
    /// deleting another user's run is audited. The one path for the API and the pages.
    pub async fn delete(
        &self,
        caller: &Principal,
        client_addr: &str,
        id: i64,
    ) -> Result<BenchmarkRecord, ServiceError> {
        let record = self
            .store
            .benchmark_run(id)
            .await?
            .ok_or(ServiceError::NotFound)?;
        may_delete(&record, caller.may_see(&record.run.user_name)).map_err(
            |refusal| match refusal {
                DeleteRefusal::Reference => ServiceError::Forbidden(
                    "reference runs are published results and cannot be deleted".into(),
                ),
                DeleteRefusal::NotOwner => ServiceError::Forbidden(format!(
                    "only {} (who recorded it) or an administrator may delete run {id}",
                    record.run.user_name
                )),
            },
        )?;
        let target = format!("benchmark {id}");
        let detail = serde_json::json!({ "before": RunInfo::from(record.clone()) }).to_string();
        let audit = (record.run.user_name != caller.username).then(|| NewAuditEntry {
            actor: &caller.username,
            action: "benchmark.delete",
            target: &target,
            detail: &detail,
            client_addr,
        });
        Ok(self
            .store
            .delete_benchmark_run(id, now_ms(), audit.as_ref())
            .await?)
    }

    /// Run `id` as `caller` sees it, and whether `caller` may delete it.
    pub async fn run_for(
        &self,
        caller: &Principal,
        id: i64,
    ) -> Result<Option<(RunInfo, bool)>, ServiceError> {
        let Some(record) = self.store.benchmark_run(id).await? else {
            return Ok(None);
        };
        let deletable = may_delete(&record, caller.may_see(&record.run.user_name)).is_ok();
        Ok(Some((record.into(), deletable)))
    }

    /// Every run `filter` selects, as stored (for charts).
    pub async fn records(
        &self,
        filter: &crate::store::BenchmarkFilter,
    ) -> Result<Vec<BenchmarkRecord>, ServiceError> {
        Ok(self.store.benchmark_runs(filter).await?)
    }

    /// The answer to a sizing question (`pairs`: its parameters).
    pub async fn sizing(&self, pairs: &[(String, String)]) -> Result<Advice, ServiceError> {
        let query = SizingQuery::parse(pairs)?;
        let run = match query.from_run {
            Some(id) => Some(self.store.benchmark_run(id).await?.ok_or_else(|| {
                ServiceError::invalid("from_run", format!("from_run: there is no run {id}"))
            })?),
            None => None,
        };
        Ok(advise(&query, run.as_ref(), reference::sizing())?)
    }
}
