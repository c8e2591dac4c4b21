//! `GET /api/v1/benchmarks/chart/scaling.svg` and `…/chart/storage.svg`: benchmark
//! runs drawn as SVG, with the filters of the listing (`model`, `gpu_model`,
//! `storage`, `source` …) and `metric` (default `images_per_sec`).
//!
//! The scaling chart has one series for local runs and one per reference study, each
//! with its ideal linear line and the efficiency at each point; the storage chart one
//! series per storage system, for comparing the same model across them.

use actix_web::{web, HttpRequest, HttpResponse};

use super::benchmarks::{query_pairs, ListParams};
use crate::auth::{Principal, Scope};
use crate::benchmarks::chart::{self, Chart, SeriesBy};
use crate::benchmarks::names;
use crate::benchmarks::run::{ListQuery, MAX_LIMIT};
use crate::http::{ApiError, AppState};
use crate::services::records::BenchmarkSort;

/// The chart of the runs `req` asks for.
pub async fn chart_of(
    state: &AppState,
    req: &HttpRequest,
    by: SeriesBy,
) -> Result<String, ApiError> {
    let mut query = ListQuery::parse(&query_pairs(req)?)?;
    let f = &mut query.filter;
    let metric = f
        .metric
        .get_or_insert_with(|| names::IMAGES_PER_SEC.to_string())
        .clone();
    f.sort = BenchmarkSort::Gpus;
    f.limit = MAX_LIMIT;
    f.offset = 0;
    let runs = state.benchmarks.records(f).await?;
    let on: Vec<&str> = [&f.gpu_model, &f.storage]
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let what = f.model.as_deref().unwrap_or("every model");
    let title = match (by, on.is_empty()) {
        (SeriesBy::Source, true) => format!("{what}: scaling"),
        (SeriesBy::Source, false) => format!("{what} on {}: scaling", on.join(", ")),
        (SeriesBy::Storage, _) => format!("{what}: by storage system"),
    };
    chart::render(&Chart::of(&runs, &metric, by, title)).map_err(ApiError::internal)
}

fn svg(body: String) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("image/svg+xml")
        .insert_header(("cache-control", "no-store"))
        .body(body)
}

/// A metric against GPUs: local runs and each reference study, with the ideal linear
/// line from each series' smallest point and the efficiency in percent at each point.
#[utoipa::path(get, path = "/api/v1/benchmarks/chart/scaling.svg", params(ListParams),
    responses((status = 200, content_type = "image/svg+xml", description = "the chart"), (status = 400)))]
pub async fn scaling(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(svg(chart_of(&state, &req, SeriesBy::Source).await?))
}

/// A metric against GPUs, one series per storage system.
#[utoipa::path(get, path = "/api/v1/benchmarks/chart/storage.svg", params(ListParams),
    responses((status = 200, content_type = "image/svg+xml", description = "the chart"), (status = 400)))]
pub async fn storage(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(svg(chart_of(&state, &req, SeriesBy::Storage).await?))
}
