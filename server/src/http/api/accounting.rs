//! `GET /api/v1/accounting` (JSON or CSV) and `GET /api/v1/accounting/chart.svg`:
//! what jobs and sessions used over a time range.
//!
//! Users see their own usage; administrators everyone's. Asking for another user's
//! is refused (403), not silently narrowed.

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use utoipa::IntoParams;

use crate::accounting::answer::Accounting;
use crate::accounting::chart::{self, Stacks};
use crate::accounting::{csv, GroupBy, Query};
use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use crate::services::records::{bucket_bounds, UsageKey};

/// The parameters of both routes.
#[derive(Debug, IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)] // documents the parameters; [`Query::parse`] reads them
pub struct AccountingParams {
    /// Only this user's usage (administrators; others see only their own).
    user: Option<String>,
    /// Only the usage of this group's current members.
    group: Option<String>,
    account: Option<String>,
    partition: Option<String>,
    /// Start of the range: RFC 3339 or a date (its midnight, UTC). Default: the start
    /// of the current month.
    from: Option<String>,
    /// End of the range, not included. Default: the start of next month.
    to: Option<String>,
    /// `job` (default), `user`, `group`, `account`, `day`, `week` or `month`.
    group_by: Option<String>,
    /// Jobs per answer for `group_by=job`: default 1000 (CSV: 100000), at most 100000.
    limit: Option<i64>,
    offset: Option<i64>,
    /// `json` (default) or `csv` (also chosen by `Accept: text/csv`).
    format: Option<String>,
    /// The chart's buckets: `day` (default), `week` or `month`.
    bucket: Option<String>,
}

/// The caller's query, checked and narrowed to what they may see (the `read` scope
/// is needed).
pub fn caller_query(req: &HttpRequest, caller: &Principal) -> Result<Query, ApiError> {
    caller.require(Scope::Read)?;
    let pairs = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map_err(|e| ApiError::invalid("query", format!("query: {e}")))?
        .into_inner();
    Ok(crate::services::usage::query_for(caller, &pairs)?)
}

/// CSV when `format=csv`, or without `format` when the client accepts `text/csv`.
fn wants_csv(req: &HttpRequest, query: &Query) -> bool {
    query.csv.unwrap_or_else(|| {
        req.headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/csv"))
    })
}

/// Usage over a time range: per job (paged), or summed by user, group, account or
/// calendar bucket, with the totals; as JSON or CSV.
#[utoipa::path(get, path = "/api/v1/accounting", params(AccountingParams),
    responses((status = 200, body = Accounting, description = "JSON, or CSV with a header row (`format=csv` or `Accept: text/csv`)"),
              (status = 400, description = "a parameter with a bad value, named in the message"),
              (status = 403, description = "another user's usage, asked for by a non-administrator")))]
pub async fn get(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let query = caller_query(&req, &caller)?;
    let csv = wants_csv(&req, &query);
    // An export is whole unless it asks for pages.
    let limit = query.limit.unwrap_or(if csv {
        crate::accounting::MAX_LIMIT
    } else {
        crate::accounting::DEFAULT_LIMIT
    });
    let answer = state.usage.answer(&query, limit).await?;
    if !csv {
        return Ok(HttpResponse::Ok().json(answer));
    }
    let name = format!(
        "atrium-{}-{}-{}.csv",
        answer.group_by,
        answer.from.get(..10).unwrap_or(""),
        answer.to.get(..10).unwrap_or("")
    );
    let mut response = HttpResponse::Ok();
    response
        .content_type("text/csv; charset=utf-8")
        .insert_header((
            header::CONTENT_DISPOSITION,
            format!("attachment; filename=\"{name}\""),
        ));
    if let Some(next) = answer.next {
        response.insert_header(("x-next-offset", next.to_string()));
    }
    Ok(response.body(csv::render(&answer)))
}

/// GPU-hours per day, week or month, stacked by user (`group_by=user`, the default)
/// or group, as SVG.
#[utoipa::path(get, path = "/api/v1/accounting/chart.svg", params(AccountingParams),
    responses((status = 200, content_type = "image/svg+xml", description = "the chart"),
              (status = 400), (status = 403)))]
pub async fn chart(
    caller: Principal,
    state: web::Data<AppState>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let query = caller_query(&req, &caller)?;
    let (key, by) = match query.group_by {
        GroupBy::Job | GroupBy::Key(UsageKey::User) => (UsageKey::User, "user"),
        GroupBy::Key(UsageKey::Group) => (UsageKey::Group, "group"),
        _ => {
            return Err(ApiError::invalid(
                "group_by",
                "group_by: a chart is by user or by group",
            ))
        }
    };
    let f = &query.filter;
    let usage = state.usage.by_bucket(&query, key).await?;
    let stacks = Stacks::of(&bucket_bounds(f.from, f.to, query.bucket), &usage);
    let svg = chart::render(&stacks, query.bucket, by).map_err(ApiError::internal)?;
    Ok(HttpResponse::Ok()
        .content_type("image/svg+xml")
        .insert_header(("cache-control", "no-store"))
        .body(svg))
}
