//! `POST /api/v1/admin/nodes/{name}/drain|resume|down`: node control for
//! administrators, audited. A drained node takes no new work and its running work
//! finishes; a node marked down has its work failed (or requeued) at once.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};

/// Why a node is drained or down.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeAction {
    #[serde(default)]
    pub reason: String,
}

pub use crate::services::nodes::NodeChanged;

/// Drain, resume or down a node.
#[utoipa::path(post, path = "/api/v1/admin/nodes/{name}/{action}", request_body = NodeAction,
               responses((status = 200, body = NodeChanged)))]
pub async fn act(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: Option<web::Json<NodeAction>>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let (node, action) = path.into_inner();
    let reason = body.map(|b| b.into_inner().reason).unwrap_or_default();
    let changed = state
        .nodes
        .set(&caller, &state.client_addr(&req), &node, &action, &reason)
        .await?;
    Ok(HttpResponse::Ok().json(changed))
}
