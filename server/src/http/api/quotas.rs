//! Quotas: `GET /api/v1/me/usage` (the caller's quotas and use), and for
//! administrators `/api/v1/admin/quotas` (list, create, read, replace, delete). Every
//! change is written to the audit log with the quota before and after.

use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::domain::quota::QuotaLimits;
use crate::http::{ApiError, AppState};
use crate::services::quotas::{scope_parts, ChangedBy, Quota};
pub use crate::services::quotas::{MyUsage, QuotaUsage};

use super::rfc3339;

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

/// Every quota.
#[utoipa::path(get, path = "/api/v1/admin/quotas", responses((status = 200, body = QuotaList)))]
pub async fn list(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let quotas = state.quotas.all().iter().map(QuotaInfo::from).collect();
    Ok(HttpResponse::Ok().json(QuotaList {
        quotas,
        period: state.quotas.period_name(),
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
    let addr = state.client_addr(&req);
    let audit = ChangedBy::new(&caller, &addr);
    let quota = state
        .quotas
        .create(
            &body.scope,
            &body.name,
            &body.limits,
            crate::util::now_ms(),
            audit,
        )
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
    let addr = state.client_addr(&req);
    let audit = ChangedBy::new(&caller, &addr);
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
    let audit = ChangedBy::new(&caller, &addr);
    state
        .quotas
        .delete(id.into_inner(), crate::util::now_ms(), audit)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The caller's quotas and what of each is in use.
#[utoipa::path(get, path = "/api/v1/me/usage", responses((status = 200, body = MyUsage)))]
pub async fn me_usage(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let owner = state.jobs.owner_of(&caller).await?;
    Ok(HttpResponse::Ok().json(state.quotas.my_usage(&caller.username, &owner).await?))
}
