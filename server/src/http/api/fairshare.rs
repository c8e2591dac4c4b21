//! `/api/v1/priority` and `/api/v1/shares`: what the pending jobs' priorities are
//! made of (`sprio`) and the fair-share tree (`sshare`). The rules are the jobs
//! service's (`services::fairshare`); these handlers parse, call it and answer.

use actix_web::{web, HttpRequest, HttpResponse};

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
pub use crate::services::fairshare::{
    FactorValues, JobPriority, PriorityAnswer, PriorityQuery, PriorityWeights, ShareLine,
    SharesAnswer, SharesQuery,
};

/// The weights of the priority factors and each pending job's factors, normalized
/// and weighted (as Slurm's `sprio`). A user sees their own jobs only.
#[utoipa::path(get, path = "/api/v1/priority", params(PriorityQuery),
    responses((status = 200, body = PriorityAnswer), (status = 400, description = "a list too long, or an id that is not a job number (`field` names it)"),
              (status = 501, description = "the Slurm backend: use Slurm's own sprio")))]
pub async fn priority(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let query: PriorityQuery = crate::http::query::parse(req.query_string())?;
    Ok(HttpResponse::Ok().json(state.jobs.priority(&caller, query).await?))
}

/// The fair-share tree (as Slurm's `sshare`): the root, each account and its users,
/// with shares, decayed usage and fair-share factors. A user sees the root, the
/// accounts they charge and their own lines.
#[utoipa::path(get, path = "/api/v1/shares", params(SharesQuery),
    responses((status = 200, body = SharesAnswer), (status = 400, description = "a list too long (`field` names it)"),
              (status = 501, description = "the Slurm backend: use Slurm's own sshare")))]
pub async fn shares(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let query: SharesQuery = crate::http::query::parse(req.query_string())?;
    Ok(HttpResponse::Ok().json(state.jobs.shares(&caller, query).await?))
}
