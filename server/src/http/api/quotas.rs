//! Quotas: `GET /api/v1/me/usage` (the caller's quotas and use), and for
//! administrators `/api/v1/admin/quotas` (list, create, read, replace, delete). Every
//! change is written to the audit log with the quota before and after.

use actix_web::{web, HttpRequest, HttpResponse};
use scheduler::LimitScope;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::admin::quotas::{scope_of, scope_parts, Audit, Quota, QuotaError};
use crate::admin::QuotaLimits;
use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};

use super::rfc3339;

impl From<QuotaError> for ApiError {
    fn from(e: QuotaError) -> Self {
        match e {
            QuotaError::Exceeded(m) => ApiError::QuotaExceeded(m),
            QuotaError::NotFound => ApiError::NotFound,
            QuotaError::Conflict => ApiError::Conflict(e.to_string()),
            QuotaError::Unavailable(m) => ApiError::Unavailable(m),
            QuotaError::Internal(m) => ApiError::Internal(m),
        }
    }
}

/// A quota.
#[derive(Debug, Serialize, ToSchema)]
pub struct QuotaInfo {
    pub id: i64,
    /// `default`, `user`, `group` or `account`.
    pub scope: String,
    /// The user, group or account; empty for `default`.
    pub name: String,
    pub limits: QuotaLimits,
    pub updated_at: String,
    pub updated_by: String,
}

impl From<&Quota> for QuotaInfo {
    fn from(q: &Quota) -> Self {
        let (kind, name) = scope_parts(&q.scope);
        QuotaInfo {
            id: q.id,
            scope: kind.into(),
            name: name.into(),
            limits: q.limits.clone(),
            updated_at: rfc3339(q.updated_at),
            updated_by: q.updated_by.clone(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct QuotaList {
    pub quotas: Vec<QuotaInfo>,
    /// How GPU-hours are counted: `month`, `rolling` or `fixed`.
    pub period: String,
}

/// A new quota.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewQuota {
    /// `default`, `user`, `group` or `account`.
    pub scope: String,
    /// The user, group or account (absent or empty for `default`).
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub limits: QuotaLimits,
}

/// A quota's new limits.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QuotaUpdate {
    pub limits: QuotaLimits,
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b))
}

/// The scope a request names, checked.
pub fn requested_scope(kind: &str, name: &str) -> Result<LimitScope, ApiError> {
    let scope = scope_of(kind, name).ok_or_else(|| {
        ApiError::bad_request(format!(
            "scope: {kind:?} is not one of default, user, group, account"
        ))
    })?;
    match &scope {
        LimitScope::DefaultUser if !name.is_empty() => Err(ApiError::bad_request(
            "name: the default quota names no one; leave it empty",
        )),
        LimitScope::DefaultUser => Ok(scope),
        _ if !is_name(name) => Err(ApiError::bad_request(format!(
            "name: {name:?} is not a user, group or account name"
        ))),
        _ => Ok(scope),
    }
}

/// The limits a request carries, checked.
pub fn checked_limits(limits: &QuotaLimits) -> Result<(), ApiError> {
    limits
        .check()
        .map_err(|(field, message)| ApiError::bad_request(format!("limits.{field}: {message}")))
}

/// Who makes a change, from where, for its audit entry.
pub fn audit_by<'a>(caller: &'a Principal, client_addr: &'a str) -> Audit<'a> {
    Audit {
        actor: &caller.username,
        client_addr,
    }
}

pub fn period_name(state: &AppState) -> String {
    match state.quotas.period() {
        scheduler::UsagePeriod::Month => "month",
        scheduler::UsagePeriod::Rolling { .. } => "rolling",
        scheduler::UsagePeriod::Fixed { .. } => "fixed",
    }
    .into()
}

/// Every quota.
#[utoipa::path(get, path = "/api/v1/admin/quotas", responses((status = 200, body = QuotaList)))]
pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let quotas = state.quotas.all().iter().map(QuotaInfo::from).collect();
    Ok(HttpResponse::Ok().json(QuotaList {
        quotas,
        period: period_name(&state),
    }))
}

/// One quota.
#[utoipa::path(get, path = "/api/v1/admin/quotas/{id}", responses((status = 200, body = QuotaInfo)))]
pub async fn get(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let id = id.into_inner();
    let quota = state
        .quotas
        .all()
        .into_iter()
        .find(|q| q.id == id)
        .ok_or(ApiError::NotFound)?;
    Ok(HttpResponse::Ok().json(QuotaInfo::from(&quota)))
}

/// Create a quota; it applies from the next scheduling pass.
#[utoipa::path(post, path = "/api/v1/admin/quotas", request_body = NewQuota,
               responses((status = 201, body = QuotaInfo)))]
pub async fn create(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    body: web::Json<NewQuota>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let body = body.into_inner();
    let scope = requested_scope(&body.scope, &body.name)?;
    checked_limits(&body.limits)?;
    let addr = state.client_addr(&req);
    let audit = audit_by(&caller, &addr);
    let quota = state
        .quotas
        .create(&scope, &body.limits, crate::util::now_ms(), audit)
        .await?;
    Ok(HttpResponse::Created().json(QuotaInfo::from(&quota)))
}

/// Replace a quota's limits; they apply from the next scheduling pass.
#[utoipa::path(put, path = "/api/v1/admin/quotas/{id}", request_body = QuotaUpdate,
               responses((status = 200, body = QuotaInfo)))]
pub async fn update(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<i64>,
    body: web::Json<QuotaUpdate>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    checked_limits(&body.limits)?;
    let addr = state.client_addr(&req);
    let audit = audit_by(&caller, &addr);
    let quota = state
        .quotas
        .update(id.into_inner(), &body.limits, crate::util::now_ms(), audit)
        .await?;
    Ok(HttpResponse::Ok().json(QuotaInfo::from(&quota)))
}

/// Delete a quota: its user falls back to the default quota.
#[utoipa::path(delete, path = "/api/v1/admin/quotas/{id}", responses((status = 204)))]
pub async fn delete(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<i64>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let addr = state.client_addr(&req);
    let audit = audit_by(&caller, &addr);
    state
        .quotas
        .delete(id.into_inner(), crate::util::now_ms(), audit)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// One quota that applies to the caller, and its use now.
#[derive(Debug, Serialize, ToSchema)]
pub struct QuotaUsage {
    /// `default`, `user`, `group` or `account`.
    pub scope: String,
    pub name: String,
    pub limits: QuotaLimits,
    /// GPUs in use now by everyone the quota covers (MIG instances and shards count
    /// their fraction).
    pub gpus_in_use: f64,
    #[schema(value_type = Object)]
    pub slices_in_use: std::collections::BTreeMap<String, u32>,
    pub running_jobs: u32,
    pub submitted_jobs: u32,
    /// GPU-hours counted this period: what ended jobs used, and what running jobs
    /// reserve (GPUs × time limit) until they end.
    pub gpu_hours_used: f64,
    pub period_start: String,
    pub period_end: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MyUsage {
    pub user: String,
    /// How GPU-hours are counted: `month`, `rolling` or `fixed`.
    pub period: String,
    /// The quotas that apply: the caller's own (or the default), then their groups'
    /// and their account's. Without any, usage is unlimited and the list is empty.
    pub quotas: Vec<QuotaUsage>,
}

/// The caller's quotas and use now.
pub async fn my_usage(state: &AppState, caller: &Principal) -> Result<MyUsage, ApiError> {
    let owner = state.jobs.owner_of(caller).await?;
    let stored = state.quotas.applying(&owner);
    let usage = state.quotas.usage(&owner).await?;
    let quotas = usage
        .into_iter()
        .filter_map(|u| {
            let q = stored.iter().find(|q| q.scope == u.scope)?;
            let (kind, name) = scope_parts(&u.scope);
            Some(QuotaUsage {
                scope: kind.into(),
                name: name.into(),
                limits: q.limits.clone(),
                gpus_in_use: u.gpus_milli as f64 / 1000.0,
                slices_in_use: u.slices,
                running_jobs: u.running_jobs,
                submitted_jobs: u.submitted_jobs,
                gpu_hours_used: u.gpu_milli_seconds as f64 / 3_600_000.0,
                period_start: rfc3339(u.period_start * 1000),
                period_end: rfc3339(u.period_end * 1000),
            })
        })
        .collect();
    Ok(MyUsage {
        user: caller.username.clone(),
        period: period_name(state),
        quotas,
    })
}

/// The caller's quotas and what of each is in use.
#[utoipa::path(get, path = "/api/v1/me/usage", responses((status = 200, body = MyUsage)))]
pub async fn me_usage(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(my_usage(&state, &caller).await?))
}
