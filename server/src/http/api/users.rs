//! `/api/v1/admin/users`: every account with its last login, what it runs now and
//! its GPU-hours this period; `POST …/{name}/disable` and `…/enable`, audited.
//! Administrators only.
//!
//! The list costs one query per concern (users, memberships, running sessions), one
//! look at the queue and one usage request to the scheduler, whatever the number of
//! users.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};

pub use crate::services::accounts::{UserChanged, UserInfo};

#[derive(Debug, Serialize, ToSchema)]
pub struct UserList {
    pub users: Vec<UserInfo>,
    /// How GPU-hours are counted: `month`, `rolling` or `fixed`.
    pub period: String,
}

/// Every account.
#[utoipa::path(get, path = "/api/v1/admin/users", responses((status = 200, body = UserList)))]
pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    Ok(HttpResponse::Ok().json(UserList {
        users: state.accounts.users().await?,
        period: state.quotas.period_name(),
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
            return Err(ApiError::bad_request(format!(
                "action: {other:?} is not one of disable, enable"
            )))
        }
    };
    let changed = state
        .accounts
        .set_disabled(&caller, &state.client_addr(&req), &name, disabled)
        .await?;
    Ok(HttpResponse::Ok().json(changed))
}
