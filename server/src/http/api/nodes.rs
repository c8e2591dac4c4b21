//! `POST /api/v1/admin/nodes/{name}/drain|resume|down`: node control for
//! administrators, audited. A drained node takes no new work and its running work
//! finishes; a node marked down has its work failed (or requeued) at once.

use actix_web::{web, HttpRequest, HttpResponse};
use scheduler::NodeCommand;
use serde::{Deserialize, Serialize};
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

#[derive(Debug, Serialize, ToSchema)]
pub struct NodeChanged {
    pub node: String,
    /// The node's state now, as `sinfo` names it.
    pub state: String,
}

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
    let changed = set_node_audited(&state, &req, &caller, &node, &action, &reason).await?;
    Ok(HttpResponse::Ok().json(changed))
}

/// Drain, resume or down `node` for `caller` (an administrator), audited with its
/// state before and after: the one path for the API and the pages.
pub async fn set_node_audited(
    state: &AppState,
    req: &HttpRequest,
    caller: &Principal,
    node: &str,
    action: &str,
    reason: &str,
) -> Result<NodeChanged, ApiError> {
    let reason = reason.trim().to_string();
    if reason.len() > 200 || reason.chars().any(char::is_control) {
        return Err(ApiError::bad_request(
            "reason: at most 200 characters, on one line",
        ));
    }
    let command = match action {
        "drain" | "down" if reason.is_empty() => {
            return Err(ApiError::bad_request(format!(
                "reason: say why the node is {}",
                if action == "drain" { "drained" } else { "down" }
            )))
        }
        "drain" => NodeCommand::Drain {
            reason: reason.clone(),
        },
        "down" => NodeCommand::Down {
            reason: reason.clone(),
        },
        "resume" => NodeCommand::Resume,
        other => {
            return Err(ApiError::bad_request(format!(
                "action: {other:?} is not one of drain, resume, down"
            )))
        }
    };
    let (nodes, _) = state.scheduler.nodes().await?;
    let before = nodes
        .iter()
        .find(|n| n.name == node)
        .ok_or(ApiError::NotFound)?
        .state
        .clone();
    state.scheduler.set_node(node.to_string(), command).await?;
    let (nodes, _) = state.scheduler.nodes().await?;
    let after = nodes
        .iter()
        .find(|n| n.name == node)
        .map(|n| n.state.clone())
        .unwrap_or_else(|| before.clone());
    state
        .record_audit(
            req,
            &caller.username,
            &format!("node.{action}"),
            node,
            serde_json::json!({"before": before, "after": after, "reason": reason}),
        )
        .await?;
    Ok(NodeChanged {
        node: node.to_string(),
        state: after.name().to_string(),
    })
}
