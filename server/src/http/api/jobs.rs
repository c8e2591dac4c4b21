//! `/api/v1/jobs`: submit, list, show, cancel, hold, release, requeue. The rules are
//! the jobs service's (`services::jobs`); these handlers parse, call it and answer.

use actix_web::{web, HttpRequest, HttpResponse};
use scheduler::JobId;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
pub use crate::services::efficiency::{Efficiency, GpuEfficiency, IdleGpus, Series, SeriesPoint};
use crate::services::jobs::JobAction;
pub use crate::services::jobs::{
    DryRun, JobInfo, JobList, JobQuery as ListQuery, SignalJob, SubmitJob, UpdateJob,
};

#[derive(Debug, Serialize, ToSchema)]
pub struct Submitted {
    /// The job id (`123`).
    pub id: String,
    pub job_id: u64,
}

/// `POST /jobs?dry_run=true`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct SubmitQuery {
    /// Parse, check limits and quotas, and answer what would happen
    /// (`sbatch --test-only`) without storing anything.
    #[serde(default)]
    pub dry_run: bool,
}

/// Submit a job, or with `dry_run=true` answer what it would do.
#[utoipa::path(post, path = "/api/v1/jobs", request_body = SubmitJob, params(SubmitQuery),
    responses((status = 201, body = Submitted), (status = 200, body = DryRun, description = "dry_run=true: what would happen; nothing stored"), (status = 400, description = "invalid directive or field, or a job that can never run"), (status = 429, description = "the queue holds its most jobs (jobs.max_job_count, Slurm's MaxJobCount); retry after Retry-After seconds")))]
pub async fn submit(
    caller: Principal,
    state: web::Data<AppState>,
    query: crate::http::query::Query<SubmitQuery>,
    body: web::Json<SubmitJob>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    if query.dry_run {
        return Ok(HttpResponse::Ok().json(state.jobs.dry_run(&caller, body.into_inner()).await?));
    }
    let job = state.jobs.submit(&caller, body.into_inner()).await?;
    let id = job.to_string();
    Ok(HttpResponse::Created()
        .insert_header(("Location", format!("/api/v1/jobs/{id}")))
        .json(Submitted {
            id,
            job_id: job.job,
        }))
}

/// List jobs.
#[utoipa::path(get, path = "/api/v1/jobs", params(ListQuery), responses((status = 200, body = JobList)))]
pub async fn list(
    caller: Principal,
    state: web::Data<AppState>,
    query: crate::http::query::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let list = state.jobs.list(&caller, query.into_inner()).await?;
    // Written once into a buffer of about its size: a page of a thousand jobs is a few
    // hundred kilobytes, which growing by halves would copy and fault in again.
    let mut body = Vec::with_capacity(512 + list.jobs.len() * JOB_JSON_BYTES);
    serde_json::to_writer(&mut body, &list).map_err(|e| ApiError::Internal(e.to_string()))?;
    Ok(HttpResponse::Ok()
        .content_type(actix_web::http::header::ContentType::json())
        .body(body))
}

/// The window's size, as a text message on a terminal's websocket.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowSize {
    rows: u16,
    cols: u16,
}

/// Attach to the terminal of an interactive job of the caller's (`salloc`,
/// `srun --pty`), once it runs: a websocket on which binary messages carry bytes,
/// what the terminal prints one way and what is typed the other, and a text message
/// `{"rows": R, "cols": C}` tells the window's size. The job closes it (code 1000)
/// when its terminal closes; closing it hangs the terminal up (SIGHUP), as closing a
/// terminal window does. One attachment per job.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/attach",
    responses((status = 101), (status = 400), (status = 404), (status = 409)))]
pub async fn attach(
    req: HttpRequest,
    body: web::Payload,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let job = parse_id(&id)?;
    let (response, session, messages) = actix_ws::handle(&req, body).map_err(|e| {
        ApiError::invalid("attach", format!("attach: not a websocket handshake: {e}"))
    })?;
    let attachment = state.jobs.attach(&caller, job).await?;
    let messages = messages
        .max_frame_size(TERMINAL_MESSAGE)
        .aggregate_continuations()
        .max_continuation_size(TERMINAL_MESSAGE);
    actix_web::rt::spawn(relay_terminal(attachment, session, messages));
    Ok(response)
}

/// The largest message a terminal's websocket takes (a paste of 1 MiB).
const TERMINAL_MESSAGE: usize = 1 << 20;

/// Carry a terminal's bytes between its job and the websocket until either ends.
async fn relay_terminal(
    attachment: crate::launch::terminal::Attachment,
    mut session: actix_ws::Session,
    mut messages: actix_ws::AggregatedMessageStream,
) {
    use actix_ws::AggregatedMessage as Message;
    use futures_util::StreamExt;
    use tokio::io::AsyncReadExt;
    let (mut output, mut keys) = attachment.split();
    let mut buffer = vec![0u8; 16 << 10];
    let close = loop {
        tokio::select! {
            read = output.read(&mut buffer) => match read {
                Ok(0) | Err(_) => break Some(actix_ws::CloseCode::Normal.into()),
                Ok(n) => {
                    if session.binary(bytes::Bytes::copy_from_slice(&buffer[..n])).await.is_err() {
                        return;
                    }
                }
            },
            message = messages.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    if keys.typed(&bytes).await.is_err() {
                        break Some(actix_ws::CloseCode::Normal.into());
                    }
                }
                Some(Ok(Message::Text(text))) => {
                    let Ok(size) = serde_json::from_str::<WindowSize>(&text) else {
                        break Some(actix_ws::CloseReason {
                            code: actix_ws::CloseCode::Invalid,
                            description: Some(
                                "a text message is the window's size: {\"rows\": R, \"cols\": C}".into(),
                            ),
                        });
                    };
                    if keys.resize(size.rows, size.cols).await.is_err() {
                        break Some(actix_ws::CloseCode::Normal.into());
                    }
                }
                Some(Ok(Message::Ping(ping))) => {
                    if session.pong(&ping).await.is_err() {
                        return;
                    }
                }
                Some(Ok(Message::Pong(_))) => {}
                // The user closed the terminal (or the connection broke): the job's
                // side hangs it up when this connection ends.
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break None,
            },
        }
    };
    let _ = session.close(close).await;
}

/// About what one job's JSON takes in a listing.
const JOB_JSON_BYTES: usize = 400;

pub(super) fn parse_id(raw: &str) -> Result<JobId, ApiError> {
    raw.parse::<JobId>().map_err(|_| ApiError::NotFound)
}

/// Show one job.
#[utoipa::path(get, path = "/api/v1/jobs/{id}", responses((status = 200, body = JobInfo), (status = 404)))]
pub async fn get(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let job = parse_id(&id)?;
    Ok(HttpResponse::Ok().json(state.jobs.show_detail(&caller, job).await?))
}

/// What a job used of what it was given (as Slurm's `seff`, with its GPUs).
#[utoipa::path(get, path = "/api/v1/jobs/{id}/efficiency", responses((status = 200, body = Efficiency), (status = 404)))]
pub async fn efficiency(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let job = parse_id(&id)?;
    Ok(HttpResponse::Ok().json(state.jobs.efficiency(&caller, job).await?))
}

/// The jobs of the last week that held GPUs idle longest (administrators).
#[utoipa::path(get, path = "/api/v1/admin/idle-gpus", responses((status = 200, body = [IdleGpus]), (status = 403)))]
pub async fn idle_gpus(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    Ok(HttpResponse::Ok().json(state.jobs.idle_gpus(&caller).await?))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Done {
    pub id: String,
    pub state: String,
}

/// `DELETE /jobs/{id}?reason=…`, `POST /jobs/{id}/{action}?reason=…`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ActionQuery {
    /// Why (an administrator acting on another user's job): kept in the audit log
    /// and shown to the job's owner on its page; at most 500 characters.
    pub reason: Option<String>,
}

async fn control(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: &str,
    action: JobAction,
    reason: &str,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let job = parse_id(id)?;
    let info = state
        .jobs
        .control_because(&caller, &state.client_addr(&req), job, action, reason)
        .await?;
    Ok(HttpResponse::Ok().json(Done {
        id: info.id,
        state: info.state,
    }))
}

/// Cancel a job (a running one gets SIGTERM, then SIGKILL after the grace time; an
/// array: all its tasks).
#[utoipa::path(delete, path = "/api/v1/jobs/{id}", params(ActionQuery), responses((status = 200, body = Done), (status = 400), (status = 404), (status = 409)))]
pub async fn cancel(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
    query: crate::http::query::Query<ActionQuery>,
) -> Result<HttpResponse, ApiError> {
    let reason = query.into_inner().reason.unwrap_or_default();
    control(req, caller, state, &id, JobAction::Cancel, &reason).await
}

/// Change a pending job (`scontrol update`): time limit, partition, dependency, node
/// count, name, comment.
#[utoipa::path(patch, path = "/api/v1/jobs/{id}", request_body = UpdateJob,
    responses((status = 200, body = JobInfo), (status = 400), (status = 403), (status = 404), (status = 409)))]
pub async fn update(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<UpdateJob>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let job = parse_id(&id)?;
    let info = state
        .jobs
        .update(&caller, &state.client_addr(&req), job, &body)
        .await?;
    Ok(HttpResponse::Ok().json(info))
}

/// Send a signal to a running job's processes (`scancel --signal`); the job goes on.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/signal", request_body = SignalJob,
    responses((status = 200, body = Done), (status = 400), (status = 404), (status = 409)))]
pub async fn signal(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
    body: web::Json<SignalJob>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let job = parse_id(&id)?;
    state
        .jobs
        .signal(&caller, &state.client_addr(&req), job, &body)
        .await?;
    Ok(HttpResponse::Ok().json(Done {
        id: job.to_string(),
        state: "RUNNING".into(),
    }))
}

/// Hold, release, requeue or put first (`top`) a job, or cancel only what of an
/// array waits (`cancel-waiting`: its pending tasks; the running ones go on).
#[utoipa::path(post, path = "/api/v1/jobs/{id}/{action}", params(("action" = String, Path, description = "hold, release, requeue, top or cancel-waiting"), ActionQuery),
    responses((status = 200, body = Done), (status = 400), (status = 404), (status = 409)))]
pub async fn act(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    query: crate::http::query::Query<ActionQuery>,
) -> Result<HttpResponse, ApiError> {
    let (id, action) = path.into_inner();
    let action = JobAction::parse(&action)
        .filter(|a| *a != JobAction::Cancel)
        .ok_or(ApiError::NotFound)?;
    let reason = query.into_inner().reason.unwrap_or_default();
    control(req, caller, state, &id, action, &reason).await
}
