//! `GET /api/v1/admin/groups`: every group with its gid, source and members.
//! Administrators only.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};

pub use crate::services::accounts::GroupInfo;

#[derive(Debug, Serialize, ToSchema)]
pub struct GroupList {
    pub groups: Vec<GroupInfo>,
}

/// Every group.
#[utoipa::path(get, path = "/api/v1/admin/groups", responses((status = 200, body = GroupList)))]
pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    Ok(HttpResponse::Ok().json(GroupList {
        groups: state.accounts.groups().await?,
    }))
}
