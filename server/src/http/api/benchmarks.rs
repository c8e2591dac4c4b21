//! Benchmark runs: `POST /api/v1/benchmarks` (record one), `GET /api/v1/benchmarks`
//! (filtered, as JSON or CSV), `GET` and `DELETE /api/v1/benchmarks/{id}`.
//!
//! Everyone logged in sees every run, local and reference: benchmark knowledge is
//! shared. Recording and deleting need the `jobs` scope; a run is deleted by its owner
//! or an administrator, and reference runs never (403).

use std::collections::BTreeSet;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

use crate::auth::{Principal, Scope};
use crate::benchmarks::run::{ListQuery, NewRun};
use crate::http::{ApiError, AppState};
pub use crate::services::benchmarks::RunInfo;

/// A CSV field as an owned string.
fn csv_field(text: &str) -> String {
    crate::csv::field(text).into_owned()
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RunList {
    pub runs: Vec<RunInfo>,
    /// The `offset` of the next page, when there is one.
    pub next_offset: Option<i64>,
}

/// The parameters of the listing.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documents the parameters; [`ListQuery::parse`] reads them
pub struct ListParams {
    /// A suite (`tf_cnn_benchmarks`, `fio` …).
    suite: Option<String>,
    model: Option<String>,
    gpu_model: Option<String>,
    storage: Option<String>,
    /// Runs recorded by this user.
    user: Option<String>,
    tag: Option<String>,
    /// Runs of this job.
    job: Option<i64>,
    /// `all` (default), `local` or `reference`.
    source: Option<String>,
    /// Local runs that started (or were recorded) at or after this time: RFC 3339 or a
    /// date. Reference runs carry no date and are not narrowed by `from`/`to`.
    from: Option<String>,
    to: Option<String>,
    /// Runs that measured this metric.
    metric: Option<String>,
    /// `newest` (default), `gpus`, or `metric` (the highest `metric` first).
    sort: Option<String>,
    /// Runs per answer: default 1000 (CSV: 100000), at most 100000.
    limit: Option<i64>,
    offset: Option<i64>,
    /// `json` (default) or `csv` (also chosen by `Accept: text/csv`).
    format: Option<String>,
}

/// The query string's pairs.
pub fn query_pairs(req: &HttpRequest) -> Result<Vec<(String, String)>, ApiError> {
    Ok(
        web::Query::<Vec<(String, String)>>::from_query(req.query_string())
            .map_err(|e| ApiError::invalid("query", format!("query: {e}")))?
            .into_inner(),
    )
}

/// The columns of the CSV export before the metrics.
const CSV_COLUMNS: [&str; 20] = [
    "id",
    "source",
    "suite",
    "model",
    "framework",
    "precision",
    "batch_size_per_gpu",
    "gpus",
    "nodes",
    "gpu_model",
    "storage",
    "dataset",
    "started_at",
    "ended_at",
    "job_id",
    "user",
    "tags",
    "notes",
    "created_at",
    "reference",
];

/// Runs as CSV: one line per run, then one column per metric name and unit found,
/// headed `metric:NAME [UNIT]`, empty where a run did not measure it.
pub fn csv(runs: &[RunInfo]) -> String {
    let metrics: BTreeSet<(&str, &str)> = runs
        .iter()
        .flat_map(|r| r.metrics.iter().map(|m| (m.name.as_str(), m.unit.as_str())))
        .collect();
    let mut header: Vec<String> = CSV_COLUMNS.iter().map(|c| c.to_string()).collect();
    header.extend(
        metrics
            .iter()
            .map(|(name, unit)| csv_field(&format!("metric:{name} [{unit}]"))),
    );
    let mut out = header.join(",");
    out.push_str("\r\n");
    let text = |v: &Option<String>| v.as_deref().map(csv_field).unwrap_or_default();
    let number = |v: Option<i64>| v.map(|n| n.to_string()).unwrap_or_default();
    for r in runs {
        let mut line = vec![
            r.id.to_string(),
            csv_field(&r.source),
            csv_field(&r.setup.suite),
            text(&r.setup.model),
            text(&r.setup.framework),
            text(&r.setup.precision),
            number(r.setup.batch_size_per_gpu),
            r.setup.gpus.to_string(),
            r.setup.nodes.to_string(),
            text(&r.setup.gpu_model),
            text(&r.setup.storage),
            text(&r.setup.dataset),
            text(&r.started_at),
            text(&r.ended_at),
            number(r.job_id),
            csv_field(&r.user),
            csv_field(&r.tags.join(" ")),
            text(&r.notes),
            csv_field(&r.created_at),
            r.reference.to_string(),
        ];
        line.extend(metrics.iter().map(|(name, unit)| {
            r.metrics
                .iter()
                .find(|m| m.name == *name && m.unit == *unit)
                .map(|m| m.value.to_string())
                .unwrap_or_default()
        }));
        out.push_str(&line.join(","));
        out.push_str("\r\n");
    }
    out
}

/// Benchmark runs, local and reference, newest first unless sorted otherwise; as JSON
/// or CSV.
#[utoipa::path(get, path = "/api/v1/benchmarks", params(ListParams),
    responses((status = 200, body = RunList, description = "JSON, or CSV with a header row (`format=csv` or `Accept: text/csv`): one line per run, a column `metric:NAME [UNIT]` per metric"),
              (status = 400, description = "a parameter with a bad value, named in the message")))]
pub async fn list(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let mut query = ListQuery::parse(&query_pairs(&req)?)?;
    let csv_wanted = query.csv.unwrap_or_else(|| {
        req.headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/csv"))
    });
    if csv_wanted && !query.limited {
        query.filter.limit = crate::benchmarks::run::MAX_LIMIT;
    }
    let (runs, next_offset) = state.benchmarks.list(&query).await?;
    if !csv_wanted {
        return Ok(HttpResponse::Ok().json(RunList { runs, next_offset }));
    }
    let mut response = HttpResponse::Ok();
    response
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            "attachment; filename=\"atrium-benchmarks.csv\"",
        ));
    if let Some(next) = next_offset {
        response.insert_header(("x-next-offset", next.to_string()));
    }
    Ok(response.body(csv(&runs)))
}

/// Record a benchmark run (the `jobs` scope). Nothing is stored unless every field is
/// good; the error names the first bad one.
#[utoipa::path(post, path = "/api/v1/benchmarks", request_body = NewRun,
    responses((status = 201, body = RunInfo),
              (status = 400, description = "a field with a bad value, named in the message"),
              (status = 413, description = "the body is over the server's limit")))]
pub async fn create(
    caller: Principal,
    state: web::Data<AppState>,
    body: web::Json<NewRun>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let record = state.benchmarks.record(&caller, &body).await?;
    Ok(HttpResponse::Created()
        .insert_header(("Location", format!("/api/v1/benchmarks/{}", record.id)))
        .json(record))
}

/// One run.
#[utoipa::path(get, path = "/api/v1/benchmarks/{id}",
    responses((status = 200, body = RunInfo), (status = 404)))]
pub async fn get(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(state.benchmarks.run(id.into_inner()).await?))
}

/// Delete a run: its owner or an administrator (the `jobs` scope); reference runs
/// cannot be deleted.
#[utoipa::path(delete, path = "/api/v1/benchmarks/{id}",
    responses((status = 204), (status = 403, description = "not the owner, or a reference run"), (status = 404)))]
pub async fn delete(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    state
        .benchmarks
        .delete(&caller, &state.client_addr(&req), id.into_inner())
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmarks::{Metric, RunSetup};
    use crate::services::records::{BenchmarkRecord, BenchmarkRun};

    #[test]
    fn csv_has_a_column_per_metric_and_unit() {
        let run = |id: i64, metrics: Vec<Metric>| {
            RunInfo::from(BenchmarkRecord {
                id,
                created_at: 0,
                run: BenchmarkRun {
                    setup: RunSetup {
                        suite: "fio".into(),
                        model: Some("=seq, read".into()),
                        gpus: 1,
                        nodes: 1,
                        ..RunSetup::default()
                    },
                    user_name: "alice".into(),
                    tags: "a,b".into(),
                    source: "local".into(),
                    metrics,
                    ..BenchmarkRun::default()
                },
            })
        };
        let m = |name: &str, value: f64, unit: &str| Metric {
            name: name.into(),
            value,
            unit: unit.into(),
        };
        let text = csv(&[
            run(1, vec![m("read_mb_per_s", 512.5, "MB/s")]),
            run(
                2,
                vec![
                    m("read_iops", 9000.0, "IOPS"),
                    m("read_mb_per_s", -1.0, "MB/s"),
                ],
            ),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("id,source,suite,model,"), "{text}");
        assert!(
            lines[0].ends_with(",reference,metric:read_iops [IOPS],metric:read_mb_per_s [MB/s]"),
            "{text}"
        );
        assert!(
            lines[1].starts_with("1,local,fio,\"'=seq, read\",,,,1,1,"),
            "{text}"
        );
        assert!(
            lines[1].ends_with(",alice,a b,,1970-01-01T00:00:00Z,false,,512.5"),
            "{text}"
        );
        assert!(lines[2].ends_with(",false,9000,-1"), "{text}");
    }
}
