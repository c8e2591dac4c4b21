//! `GET /api/v1/partitions` and `GET /api/v1/nodes`: what `sinfo` shows, with each
//! node's GPUs (where they came from, and whether `nvidia-smi` found them).

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};

#[derive(Debug, Serialize, ToSchema)]
pub struct Partitions {
    #[schema(value_type = Vec<Object>)]
    pub partitions: Vec<scheduler::PartitionView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Nodes {
    #[schema(value_type = Vec<Object>)]
    pub nodes: Vec<scheduler::NodeView>,
    /// Every GPU of the inventory: declared in the configuration or discovered
    /// with `nvidia-smi`; `present: false` marks a declared GPU that was not found.
    #[schema(value_type = Vec<Object>)]
    pub gpus: Vec<crate::sched::inventory::GpuStatus>,
}

/// Partitions as `sinfo` shows them.
#[utoipa::path(get, path = "/api/v1/partitions", responses((status = 200, body = Partitions)))]
pub async fn partitions(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let (_, partitions) = state.scheduler.nodes().await?;
    Ok(HttpResponse::Ok().json(Partitions { partitions }))
}

/// Nodes with their CPUs, memory and GPU slices in use.
#[utoipa::path(get, path = "/api/v1/nodes", responses((status = 200, body = Nodes)))]
pub async fn nodes(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let (nodes, _) = state.scheduler.nodes().await?;
    Ok(HttpResponse::Ok().json(Nodes {
        nodes,
        gpus: state.inventory.gpus.clone(),
    }))
}
