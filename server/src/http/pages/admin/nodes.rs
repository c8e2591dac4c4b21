//! `GET /admin/nodes`: every node's state, reason and slices, with forms to drain,
//! resume or down it; and the GPU slice map. `POST /admin/nodes/{name}/{action}`.

use crate::http::pages::PageError;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use scheduler::SqueueFilter;
use serde::Deserialize;

use super::{see_other, AdminPost, AdminUser, CsrfField};
use crate::auth::Principal;
use crate::http::pages::cluster::{node_row, NodeRow};
use crate::http::pages::{not_found_page, render, Nav};
use crate::http::{ApiError, AppState};
use crate::services::gpu_map::GpuMap;

#[derive(Template)]
#[template(path = "admin/nodes.html")]
struct NodesPage {
    nav: Nav,
    nodes: Vec<NodeRow>,
    gpu_map: GpuMap,
    /// Why the last change was refused.
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct NodeForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

impl CsrfField for NodeForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

async fn nodes_page(
    state: &AppState,
    admin: &Principal,
    error: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let (nodes, _) = state.cluster.nodes().await?;
    let jobs = state.cluster.jobs(SqueueFilter::default()).await?;
    let page = NodesPage {
        nav: Nav::of(admin).at(crate::http::pages::Section::Admin),
        nodes: nodes.iter().cloned().map(node_row).collect(),
        gpu_map: state.cluster.gpu_map_of(&nodes, &jobs, &|_| true),
        error,
    };
    render(&page, status)
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    nodes_page(&state, &admin.0, None, StatusCode::OK).await
}

pub async fn act(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    post: AdminPost<NodeForm>,
) -> Result<HttpResponse, ApiError> {
    let (admin, reason) = (post.admin, post.form.reason);
    let (node, action) = path.into_inner();
    let changed = state
        .nodes
        .set(&admin, &state.client_addr(&req), &node, &action, &reason)
        .await
        .map_err(PageError::from);
    match changed {
        Ok(_) => Ok(see_other("/admin/nodes")),
        Err(PageError::NotFound) => not_found_page(),
        Err(PageError::Invalid(m)) => {
            nodes_page(&state, &admin, Some(m), StatusCode::BAD_REQUEST).await
        }
        Err(PageError::Refused { message, status }) => {
            nodes_page(&state, &admin, Some(message), status).await
        }
        Err(PageError::Failed(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::cluster::tests::drained_node;
    use crate::http::pages::tests::nav;

    #[test]
    fn each_node_has_drain_down_and_resume_with_a_reason() {
        let html = NodesPage {
            nav: nav(),
            nodes: vec![drained_node()],
            gpu_map: GpuMap {
                nodes: Vec::new(),
                types: Vec::new(),
                brings: Vec::new(),
            },
            error: Some("reason: say why the node is drained".into()),
        }
        .render()
        .expect("render");
        assert!(
            html.contains("action=\"/admin/nodes/node1/drain\""),
            "{html}"
        );
        assert!(
            html.contains("formaction=\"/admin/nodes/node1/down\""),
            "{html}"
        );
        assert!(
            html.contains("formaction=\"/admin/nodes/node1/resume\""),
            "{html}"
        );
        assert!(html.contains("name=\"reason\""), "{html}");
        assert!(html.contains("fan &#60;broken&#62;"), "{html}");
        assert!(
            html.contains("reason: say why the node is drained"),
            "{html}"
        );
        assert!(html.contains("This cluster has no GPUs."), "{html}");
    }
}
