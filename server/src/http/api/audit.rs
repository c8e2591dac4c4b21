//! `GET /api/v1/admin/audit`: the audit log, newest first, as JSON or CSV
//! (`?format=csv`), filtered by `actor`, `action`, `target`, `from` and `to`.
//! Administrators only.

use actix_web::{http::header, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Most entries returned (default 1000, at most 100000).
    pub limit: Option<i64>,
    /// `json` (default) or `csv`.
    pub format: Option<String>,
    /// Only entries by this actor, of this action, on this target.
    pub actor: Option<String>,
    pub action: Option<String>,
    pub target: Option<String>,
    /// Only entries at or after this time, and before that one (RFC 3339 or a date).
    pub from: Option<String>,
    pub to: Option<String>,
}

pub use crate::services::audit::AuditInfo;

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditList {
    pub entries: Vec<AuditInfo>,
}

/// The audit log, newest first.
#[utoipa::path(get, path = "/api/v1/admin/audit", responses((status = 200, body = AuditList)))]
pub async fn list(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let query: AuditQuery = crate::http::query::parse(req.query_string())?;
    let limit = query.limit.unwrap_or(1000);
    if !(1..=100_000).contains(&limit) {
        return Err(ApiError::invalid(
            "limit",
            "limit: must be from 1 to 100000",
        ));
    }
    let pairs: Vec<(String, String)> =
        web::Query::<Vec<(String, String)>>::from_query(req.query_string())
            .map(|q| q.into_inner())
            .unwrap_or_default();
    let filter =
        crate::services::audit::parse_filter(&pairs).map_err(|e| ApiError::InvalidField {
            field: e.field,
            message: e.to_string(),
        })?;
    let entries = state.audit.matching(&filter, limit).await?;
    match query.format.as_deref() {
        None | Some("json") => Ok(HttpResponse::Ok().json(AuditList { entries })),
        Some("csv") => {
            let mut out = String::from("id,at,actor,action,target,detail,client_addr\n");
            for e in &entries {
                let row = [
                    e.id.to_string(),
                    e.at.clone(),
                    e.actor.clone(),
                    e.action.clone(),
                    e.target.clone(),
                    e.detail.to_string(),
                    e.client_addr.clone(),
                ];
                let row: Vec<_> = row.iter().map(|f| crate::csv::field(f)).collect();
                out.push_str(&row.join(","));
                out.push('\n');
            }
            Ok(HttpResponse::Ok()
                .content_type("text/csv; charset=utf-8")
                .insert_header((
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"atrium-audit.csv\"",
                ))
                .body(out))
        }
        Some(other) => Err(ApiError::invalid(
            "format",
            format!("format: {other:?} is not one of json, csv"),
        )),
    }
}
