//! `/api/v1/jobs/{id}/steps` and `/api/v1/jobs/{id}/self/requeue`: a running job's
//! `srun` records its steps, and its `scontrol requeue` requeues it, with the job's
//! token (`Atrium-Job-Token`, from `ATRIUM_JOB_TOKEN`), never a user's. The
//! token's reach is the jobs service's rule (`services::job_steps`); these handlers
//! parse, call it and answer.

use actix_web::{web, HttpRequest, HttpResponse};

use super::jobs::parse_id;
use crate::http::{ApiError, AppState};
pub use crate::services::job_steps::{EndStep, StartStep, StepInfo};

/// The header that carries a job's token.
pub const JOB_TOKEN_HEADER: &str = "Atrium-Job-Token";

fn job_token(req: &HttpRequest) -> Result<&str, ApiError> {
    req.headers()
        .get(JOB_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            ApiError::Forbidden(format!("{JOB_TOKEN_HEADER}: a job's token is required"))
        })
}

/// Record a step that starts in a running job (its `srun`).
#[utoipa::path(post, path = "/api/v1/jobs/{id}/steps", request_body = StartStep,
    params(("Atrium-Job-Token" = String, Header, description = "the job's token (ATRIUM_JOB_TOKEN)")),
    responses((status = 201, body = StepInfo), (status = 400, description = "a field out of bounds"),
        (status = 403, description = "not this job's token"), (status = 409, description = "the job is not running")))]
pub async fn start(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<StartStep>,
) -> Result<HttpResponse, ApiError> {
    let job = parse_id(&id)?;
    let step = state
        .jobs
        .steps()
        .start(job, job_token(&req)?, body.into_inner())
        .await?;
    Ok(HttpResponse::Created().json(step))
}

/// Record how a step of a running job ended.
#[utoipa::path(put, path = "/api/v1/jobs/{id}/steps/{step}", request_body = EndStep,
    params(("Atrium-Job-Token" = String, Header, description = "the job's token (ATRIUM_JOB_TOKEN)")),
    responses((status = 204), (status = 400, description = "a field out of bounds"),
        (status = 403, description = "not this job's token"), (status = 404, description = "no such running step")))]
pub async fn end(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    body: web::Json<EndStep>,
) -> Result<HttpResponse, ApiError> {
    let (id, step) = path.into_inner();
    let job = parse_id(&id)?;
    let step: u32 = step.parse().map_err(|_| ApiError::NotFound)?;
    state
        .jobs
        .steps()
        .end(job, step, job_token(&req)?, body.into_inner())
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Requeue a running job at its own request (its `scontrol requeue`).
#[utoipa::path(post, path = "/api/v1/jobs/{id}/self/requeue",
    params(("Atrium-Job-Token" = String, Header, description = "the job's token (ATRIUM_JOB_TOKEN)")),
    responses((status = 204), (status = 403, description = "not this job's token"),
        (status = 409, description = "the job is not running or cannot be requeued")))]
pub async fn requeue_itself(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let job = parse_id(&id)?;
    state.jobs.requeue_itself(job, job_token(&req)?).await?;
    Ok(HttpResponse::NoContent().finish())
}
