//! `GET /api/v1/sizing`: storage nodes a number of GPUs needs, or GPUs a number of
//! storage nodes feeds, with the formula and the data used (see [`crate::benchmarks::sizing`]);
//! `GET /api/v1/benchmarks/reference/sizing`: the published sizing rows it draws on.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::{IntoParams, ToSchema};

use super::benchmarks::query_pairs;
use crate::auth::{Principal, Scope};
use crate::benchmarks::reference::{self, SizingRow};
use crate::benchmarks::sizing::Advice;
use crate::http::{ApiError, AppState};

/// The parameters of a sizing question.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documents the parameters; [`SizingQuery::parse`] reads them
pub struct SizingParams {
    /// Storage throughput one GPU demands (MB/s).
    mb_per_s_per_gpu: Option<f64>,
    /// A reference workload (its text): MB/s per GPU, and a node's throughput.
    workload: Option<String>,
    /// A recorded run: its `storage_mb_per_s` ÷ its GPUs is the MB/s per GPU.
    from_run: Option<i64>,
    /// The storage nodes these GPUs need.
    gpus: Option<u32>,
    /// The GPUs these storage nodes feed.
    storage_nodes: Option<u32>,
    /// `f800` (default) or `h500`: which node of the workload's row.
    node: Option<String>,
    /// One storage node's throughput (MB/s), instead of the workload's.
    node_mb_per_s: Option<f64>,
    /// Extra throughput to plan for, in percent (default 0).
    headroom: Option<f64>,
}

/// Storage nodes needed for `gpus`, and GPUs fed by `storage_nodes`.
#[utoipa::path(get, path = "/api/v1/sizing", params(SizingParams),
    responses((status = 200, body = Advice), (status = 400, description = "a parameter with a bad value, or a figure missing, named in the message")))]
pub async fn get(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(state.benchmarks.sizing(&query_pairs(&req)?).await?))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SizingRows {
    pub rows: Vec<SizingRow>,
}

/// The published sizing rows: MB/s per GPU of each workload, GPUs one node feeds.
#[utoipa::path(get, path = "/api/v1/benchmarks/reference/sizing",
    responses((status = 200, body = SizingRows)))]
pub async fn reference_rows(caller: Principal) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(SizingRows {
        rows: reference::sizing().to_vec(),
    }))
}
