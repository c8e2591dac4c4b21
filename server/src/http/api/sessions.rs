//! `/api/v1/sessions`: start, list, show, stop, and follow a session's progress as
//! server-sent events; `/api/v1/environments`: what sessions can run in.
//!
//! Users see and touch only their own sessions (another user's is 404);
//! administrators see all and may stop any.

use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::rfc3339;
use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use crate::sessions::{Progress, SessionError, StartRequest};
use crate::store::SessionRecord;

/// Keep-alive comments on the progress stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A session to start.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartSession {
    /// Unique among your running sessions (default `default`).
    pub name: Option<String>,
    /// `notebook` (default), `terminal` or `tensorboard`.
    pub kind: Option<String>,
    /// An environment's name (default: the first).
    pub environment: Option<String>,
    /// Whole GPUs, or slices of the `slice` type.
    pub gpus: Option<u32>,
    /// A GPU type or MIG profile (`a100`, `1g.10gb`), or `shard`.
    pub slice: Option<String>,
    /// Time limit in hours, fractions allowed (default `sessions.default_hours`).
    pub hours: Option<f64>,
    /// TensorBoard's log folder, inside your home or a project space.
    pub logdir: Option<String>,
}

/// A session.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionInfo {
    pub id: i64,
    pub name: String,
    pub user: String,
    pub kind: String,
    pub environment: String,
    /// `pending`, `starting`, `ready`, `stopping` or `ended`.
    pub state: String,
    pub ready: bool,
    /// Where it opens (`/user/alice/default/lab`), once ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[schema(value_type = Object)]
    pub progress: Progress,
    /// The job that runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
    /// What it was given (`gpu:2`), empty for none.
    pub gres: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodelist: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logdir: Option<String>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Seconds until its time limit (while it runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_left: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<String>,
    /// `stopped`, `idle`, `time_limit`, `cancelled`, `failed`, `ended`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EnvironmentInfo {
    pub name: String,
    pub description: String,
    pub runtime: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub kernels: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EnvironmentList {
    pub environments: Vec<EnvironmentInfo>,
}

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::Invalid { .. } => ApiError::BadRequest(e.to_string()),
            SessionError::Conflict(m) => ApiError::Conflict(m),
            SessionError::NotFound => ApiError::NotFound,
            SessionError::Forbidden(m) => ApiError::Forbidden(m),
            SessionError::Scheduler(e) => e.into(),
            SessionError::Store(e) => e.into(),
            SessionError::Quota(e) => e.into(),
            SessionError::Internal(m) => ApiError::internal(m),
        }
    }
}

/// A session as the API shows it: its row, its live progress and its job.
pub async fn session_info(state: &AppState, record: SessionRecord) -> SessionInfo {
    let progress = state.sessions.progress_of(&record);
    let view = if record.ended_at.is_none() {
        state.sessions.job_view(&record).await
    } else {
        None
    };
    let now = crate::util::now_ms() / 1000;
    let (time_left, time_limit) = match view.as_ref() {
        Some(v) => match (v.start_time, v.time_limit) {
            (Some(start), scheduler::TimeLimit::Seconds(s)) => {
                (Some((start + s as i64 - now).max(0)), Some(s))
            }
            (None, scheduler::TimeLimit::Seconds(s)) => (None, Some(s)),
            _ => (None, None),
        },
        None => (None, None),
    };
    let node = view
        .as_ref()
        .and_then(|v| v.allocation.as_ref())
        .and_then(|a| a.nodes.first().cloned());
    SessionInfo {
        id: record.id,
        name: record.name,
        user: record.user_name,
        kind: record.kind,
        environment: record.environment,
        state: progress.state.clone(),
        ready: progress.ready,
        url: progress.url.clone(),
        progress,
        job_id: record.job_id,
        gres: crate::domain::gres::text_of(record.gpus.as_ref()),
        cuda_visible_devices: node
            .as_ref()
            .filter(|n| !n.slices.is_empty())
            .map(|n| n.cuda_visible_devices()),
        nodelist: view
            .as_ref()
            .map(|v| v.nodelist.clone())
            .filter(|n| !n.is_empty()),
        logdir: record.logdir,
        created_at: rfc3339(record.created_at),
        ready_at: record.ready_at.map(rfc3339),
        ended_at: record.ended_at.map(rfc3339),
        time_left,
        time_limit,
        last_activity: record.last_activity.map(rfc3339),
        end_reason: record.end_reason,
        message: record.message,
    }
}

/// Start a session as `caller` and write it to the audit log: the one path for the API
/// and the pages.
pub async fn start_audited(
    state: &AppState,
    req: &HttpRequest,
    caller: &Principal,
    request: StartRequest,
) -> Result<SessionRecord, ApiError> {
    let owner = state.jobs.owner_of(caller).await?;
    let record = state.sessions.launch(owner, request).await?;
    let detail = serde_json::json!({
        "name": record.name,
        "kind": record.kind,
        "gres": crate::domain::gres::text_of(record.gpus.as_ref()),
    });
    state
        .record_audit(
            req,
            &caller.username,
            "session.start",
            &record.id.to_string(),
            detail,
        )
        .await?;
    Ok(record)
}

/// Stop session `id` for `caller` (its owner: `stopped`; an administrator: `cancelled`)
/// and write it to the audit log: the one path for the API and the pages.
pub async fn stop_audited(
    state: &AppState,
    req: &HttpRequest,
    caller: &Principal,
    id: i64,
) -> Result<(), ApiError> {
    let record = state
        .sessions
        .get(&caller.username, caller.is_admin, id)
        .await?;
    let reason = if record.user_name == caller.username {
        "stopped"
    } else {
        "cancelled"
    };
    state.sessions.stop(id, reason).await?;
    let after = state.store.session(id).await?;
    let detail = serde_json::json!({
        "user": record.user_name,
        "name": record.name,
        "before": {"state": record.state},
        "after": {"state": after.state, "end_reason": after.end_reason},
    });
    state
        .record_audit(
            req,
            &caller.username,
            "session.stop",
            &id.to_string(),
            detail,
        )
        .await
}

/// Start a session.
#[utoipa::path(post, path = "/api/v1/sessions", request_body = StartSession,
    responses((status = 201, body = SessionInfo), (status = 400, description = "a bad field, named"),
              (status = 409, description = "a session of that name runs, or too many sessions")))]
pub async fn start(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    body: web::Json<StartSession>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Sessions)?;
    let body = body.into_inner();
    let request = StartRequest {
        name: body.name,
        kind: body.kind,
        environment: body.environment,
        gpus: body.gpus,
        slice: body.slice,
        hours: body.hours,
        logdir: body.logdir,
    };
    let record = start_audited(&state, &req, &caller, request).await?;
    let id = record.id;
    Ok(HttpResponse::Created()
        .insert_header(("Location", format!("/api/v1/sessions/{id}")))
        .json(session_info(&state, record).await))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Also this many ended sessions (default 10).
    pub ended: Option<i64>,
    /// Another user's sessions (administrators).
    pub user: Option<String>,
}

/// List your sessions.
#[utoipa::path(get, path = "/api/v1/sessions", responses((status = 200, body = SessionList)))]
pub async fn list(
    caller: Principal,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let user = match &query.user {
        Some(u) if caller.is_admin => u.clone(),
        Some(u) if *u != caller.username => {
            return Ok(HttpResponse::Ok().json(SessionList {
                sessions: Vec::new(),
            }))
        }
        _ => caller.username.clone(),
    };
    let rows = state
        .sessions
        .list(&user, query.ended.unwrap_or(10).clamp(0, 1000))
        .await?;
    let sessions = session_infos(&state, rows).await;
    Ok(HttpResponse::Ok().json(SessionList { sessions }))
}

async fn session_infos(state: &AppState, rows: Vec<SessionRecord>) -> Vec<SessionInfo> {
    let mut sessions = Vec::with_capacity(rows.len());
    for r in rows {
        sessions.push(session_info(state, r).await);
    }
    sessions
}

/// Every user's sessions that have not ended, oldest first.
pub async fn running_infos(state: &AppState) -> Result<Vec<SessionInfo>, ApiError> {
    let rows = state.store.active_sessions().await?;
    Ok(session_infos(state, rows).await)
}

/// Every user's sessions that have not ended (administrators).
#[utoipa::path(get, path = "/api/v1/admin/sessions", responses((status = 200, body = SessionList)))]
pub async fn list_running(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let sessions = running_infos(&state).await?;
    Ok(HttpResponse::Ok().json(SessionList { sessions }))
}

fn parse_id(id: &str) -> Result<i64, ApiError> {
    id.parse::<i64>()
        .ok()
        .filter(|i| *i > 0)
        .ok_or(ApiError::NotFound)
}

/// Show a session.
#[utoipa::path(get, path = "/api/v1/sessions/{id}", responses((status = 200, body = SessionInfo), (status = 404)))]
pub async fn get(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let record = state
        .sessions
        .get(&caller.username, caller.is_admin, parse_id(&id)?)
        .await?;
    Ok(HttpResponse::Ok().json(session_info(&state, record).await))
}

/// Stop a session (its slices are freed).
#[utoipa::path(delete, path = "/api/v1/sessions/{id}", responses((status = 202, body = SessionInfo), (status = 404)))]
pub async fn stop(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Sessions)?;
    let id = parse_id(&id)?;
    stop_audited(&state, &req, &caller, id).await?;
    let record = state
        .sessions
        .get(&caller.username, caller.is_admin, id)
        .await?;
    Ok(HttpResponse::Accepted().json(session_info(&state, record).await))
}

/// A session's progress as server-sent events: one `data:` JSON object
/// (`{progress, message, ready, url, state, failed, warning}`) per change, keep-alive
/// comments in between. It goes on after `ready` (a warning comes before the time
/// limit) and ends when the session does.
#[utoipa::path(get, path = "/api/v1/sessions/{id}/progress",
    responses((status = 200, description = "text/event-stream"), (status = 404)))]
pub async fn progress(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let record = state
        .sessions
        .get(&caller.username, caller.is_admin, parse_id(&id)?)
        .await?;
    let sse = |p: &Progress| {
        let json = serde_json::to_string(p).unwrap_or_else(|_| "{}".into());
        Bytes::from(format!("data: {json}\n\n"))
    };
    let response = || {
        let mut r = HttpResponse::Ok();
        r.content_type("text/event-stream")
            .insert_header(("Cache-Control", "no-cache"))
            .insert_header(("X-Accel-Buffering", "no"));
        r
    };
    let Some(route) = state.sessions.route_by_id(record.id) else {
        let last = sse(&state.sessions.progress_of(&record));
        return Ok(response().body(last));
    };
    let rx = route.subscribe();
    drop(route);
    let stream =
        futures_util::stream::unfold((rx, true, false), move |(mut rx, first, done)| async move {
            if done {
                return None;
            }
            if first {
                let p = rx.borrow_and_update().clone();
                let over = p.state == "ended";
                return Some((Ok::<Bytes, actix_web::Error>(sse(&p)), (rx, false, over)));
            }
            match tokio::time::timeout(KEEP_ALIVE, rx.changed()).await {
                Err(_) => Some((
                    Ok(Bytes::from_static(b": keep-alive\n\n")),
                    (rx, false, false),
                )),
                Ok(Ok(())) => {
                    let p = rx.borrow_and_update().clone();
                    let over = p.state == "ended";
                    Some((Ok(sse(&p)), (rx, false, over)))
                }
                Ok(Err(_)) => {
                    // The session is over and its last word was already sent.
                    None
                }
            }
        });
    Ok(response().streaming(stream))
}

/// The environments sessions can run in.
#[utoipa::path(get, path = "/api/v1/environments", responses((status = 200, body = EnvironmentList)))]
pub async fn environments(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let environments = state
        .sessions
        .environments()
        .iter()
        .map(|e| EnvironmentInfo {
            name: e.config.name.clone(),
            description: e.config.description.clone(),
            runtime: e.runtime.name().to_string(),
            image: e.config.image.clone(),
            kernels: e.config.kernels.clone(),
        })
        .collect();
    Ok(HttpResponse::Ok().json(EnvironmentList { environments }))
}
