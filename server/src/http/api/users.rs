//! `/api/v1/admin/users`: every account with its last login, what it runs now and
//! its GPU-hours this period; `POST …/{name}/disable` and `…/enable`, audited.
//! Administrators only.
//!
//! The list costs one query per concern (users, memberships, running sessions), one
//! look at the queue and one usage request to the scheduler, whatever the number of
//! users.

use std::collections::{BTreeMap, BTreeSet};

use actix_web::{web, HttpRequest, HttpResponse};
use scheduler::{JobState, SqueueFilter};
use serde::Serialize;
use utoipa::ToSchema;

use super::quotas::{audit_by, period_name};
use super::rfc3339;
use crate::admin::users::UserError;
use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use crate::util::now_ms;

impl From<UserError> for ApiError {
    fn from(e: UserError) -> Self {
        match e {
            UserError::NotFound => ApiError::NotFound,
            UserError::Myself => ApiError::Conflict(e.to_string()),
            UserError::Store(e) => e.into(),
        }
    }
}

/// An account as administrators see it.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserInfo {
    pub username: String,
    pub display_name: String,
    /// `local` or `ldap`.
    pub source: String,
    /// A member of an administrators' group.
    pub admin: bool,
    pub disabled: bool,
    pub last_login: Option<String>,
    pub running_sessions: u32,
    /// Batch jobs (sessions are counted on their own).
    pub running_jobs: u32,
    pub pending_jobs: u32,
    /// GPUs in use now (MIG instances and shards count their fraction).
    pub gpus_in_use: f64,
    /// GPU-hours counted this period: what ended jobs used, and what running jobs
    /// reserve (GPUs × time limit) until they end.
    pub gpu_hours: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UserList {
    pub users: Vec<UserInfo>,
    /// How GPU-hours are counted: `month`, `rolling` or `fixed`.
    pub period: String,
}

/// An account after a change.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserChanged {
    pub username: String,
    pub disabled: bool,
}

/// Every account, by name, with what it runs and uses now.
pub async fn user_infos(state: &AppState) -> Result<Vec<UserInfo>, ApiError> {
    let users = state.store.list_users().await?;
    let admins: BTreeSet<String> = state.auth.administrators().await?;
    let sessions = state.store.active_sessions().await?;
    let session_jobs: BTreeSet<u64> = sessions
        .iter()
        .filter_map(|s| s.job_id)
        .map(|j| j as u64)
        .collect();
    let mut running_sessions: BTreeMap<&str, u32> = BTreeMap::new();
    for s in &sessions {
        *running_sessions.entry(&s.user_name).or_default() += 1;
    }
    let mut jobs: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    for job in state.scheduler.squeue(SqueueFilter::default()).await? {
        if session_jobs.contains(&job.id.job) {
            continue;
        }
        let counts = jobs.entry(job.user).or_default();
        match job.state {
            JobState::Pending => counts.1 += 1,
            JobState::Running | JobState::Completing => counts.0 += 1,
            _ => {}
        }
    }
    let names: Vec<String> = users.iter().map(|u| u.username.clone()).collect();
    let usage = state.quotas.users_usage(&names).await?;
    Ok(users
        .into_iter()
        .map(|u| {
            let (running_jobs, pending_jobs) = jobs.get(&u.username).copied().unwrap_or_default();
            let used = usage.get(&u.username);
            UserInfo {
                admin: admins.contains(&u.username),
                running_sessions: running_sessions
                    .get(u.username.as_str())
                    .copied()
                    .unwrap_or(0),
                running_jobs,
                pending_jobs,
                gpus_in_use: used.map_or(0.0, |x| x.gpus_milli as f64 / 1000.0),
                gpu_hours: used.map_or(0.0, |x| x.gpu_milli_seconds as f64 / 3_600_000.0),
                last_login: u.last_login_at.map(rfc3339),
                username: u.username,
                display_name: u.display_name,
                source: u.source,
                disabled: u.disabled,
            }
        })
        .collect())
}

/// Every account.
#[utoipa::path(get, path = "/api/v1/admin/users", responses((status = 200, body = UserList)))]
pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    Ok(HttpResponse::Ok().json(UserList {
        users: user_infos(&state).await?,
        period: period_name(&state),
    }))
}

/// Disable or enable an account for `caller`, audited: the one path for the API and
/// the pages.
pub async fn set_disabled_audited(
    state: &AppState,
    req: &HttpRequest,
    caller: &Principal,
    username: &str,
    disabled: bool,
) -> Result<UserChanged, ApiError> {
    let addr = state.client_addr(req);
    let audit = audit_by(caller, &addr);
    let user = crate::admin::users::set_disabled(
        &state.store,
        &state.auth,
        username,
        disabled,
        now_ms(),
        audit,
    )
    .await?;
    Ok(UserChanged {
        username: user.username,
        disabled: user.disabled,
    })
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
    let changed = set_disabled_audited(&state, &req, &caller, &name, disabled).await?;
    Ok(HttpResponse::Ok().json(changed))
}
