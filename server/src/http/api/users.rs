//! `/api/v1/admin/users`: the accounts, a page at a time, each with its last login,
//! what it runs now and its GPU-hours this period; `POST …/{name}/disable` and
//! `…/enable`, audited. Administrators only.
//!
//! A page costs one query per concern (users, memberships, running sessions), one
//! look at the queue and one usage request to the scheduler for the page's accounts,
//! whatever the number of users.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};

pub use crate::services::accounts::{UserChanged, UserInfo};

/// Accounts per page unless `per_page` says otherwise.
const DEFAULT_PER_PAGE: u64 = 100;
/// The most accounts a page holds.
const MAX_PER_PAGE: u64 = 1000;

#[derive(Debug, Serialize, ToSchema)]
pub struct UserList {
    /// This page's accounts, by name.
    pub users: Vec<UserInfo>,
    /// How GPU-hours are counted: `month`, `rolling` or `fixed`.
    pub period: String,
    /// How many accounts there are.
    pub total: u64,
    pub page: u64,
    pub per_page: u64,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct UserQuery {
    /// From 1.
    pub page: Option<u64>,
    /// Default 100, at most 1000.
    pub per_page: Option<u64>,
}

/// The accounts by name, a page at a time.
#[utoipa::path(get, path = "/api/v1/admin/users", params(UserQuery),
    responses((status = 200, body = UserList)))]
pub async fn list(
    caller: Principal,
    state: web::Data<AppState>,
    query: crate::http::query::Query<UserQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let per_page = query
        .per_page
        .unwrap_or(DEFAULT_PER_PAGE)
        .clamp(1, MAX_PER_PAGE);
    let page = query.page.unwrap_or(1).max(1);
    let offset = usize::try_from((page - 1).saturating_mul(per_page)).unwrap_or(usize::MAX);
    let found = state.accounts.users(offset, per_page as usize).await?;
    Ok(HttpResponse::Ok().json(UserList {
        users: found.users,
        period: state.quotas.period_name(),
        total: found.total,
        page,
        per_page,
    }))
}

/// Disable or enable an account. A disabled one's browser sessions and tokens stop
/// working at once and it cannot log in. An administrator cannot disable their own
/// account (409).
#[utoipa::path(post, path = "/api/v1/admin/users/{name}/{action}",
    params(("action" = String, Path, description = "disable or enable")),
    responses((status = 200, body = UserChanged), (status = 404), (status = 409)))]
pub async fn act(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let (name, action) = path.into_inner();
    let disabled = match action.as_str() {
        "disable" => true,
        "enable" => false,
        other => {
            return Err(ApiError::invalid(
                "action",
                format!("action: {other:?} is not one of disable, enable"),
            ))
        }
    };
    let changed = state
        .accounts
        .set_disabled(&caller, &state.client_addr(&req), &name, disabled)
        .await?;
    Ok(HttpResponse::Ok().json(changed))
}
