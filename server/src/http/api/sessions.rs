//! `/api/v1/sessions`: start, list, show, stop, and follow a session's progress as
//! server-sent events; `/api/v1/environments`: what sessions can run in;
//! `/api/v1/apps`: the apps sessions run.
//!
//! Users see and touch only their own sessions (another user's is 404);
//! administrators see all and may stop any.

use std::collections::BTreeMap;
use std::time::Duration;

use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use crate::sessions::{Progress, StartRequest};

/// Keep-alive comments on the progress stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A session to start.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartSession {
    /// Unique among your running sessions (default `default`).
    pub name: Option<String>,
    /// The app's id (`GET /api/v1/apps`): `notebook` (default), `terminal`,
    /// `tensorboard`, `vscode` with the built-in apps.
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
    /// The folder a terminal (`terminal`) opens in, inside your home or a project
    /// space (default: the home).
    pub folder: Option<String>,
    /// Values of the app's form fields, by name (a string, a number or a boolean).
    #[schema(value_type = Object)]
    pub fields: Option<BTreeMap<String, serde_json::Value>>,
}

/// The app's field values as text: a string, a number or a boolean each; at most
/// `MAX_VALUES` of them.
fn field_values(
    fields: Option<BTreeMap<String, serde_json::Value>>,
) -> Result<BTreeMap<String, String>, ApiError> {
    let fields = fields.unwrap_or_default();
    if fields.len() > crate::sessions::apps::MAX_VALUES {
        return Err(ApiError::invalid(
            "fields",
            format!(
                "fields: at most {} values",
                crate::sessions::apps::MAX_VALUES
            ),
        ));
    }
    fields
        .into_iter()
        .map(|(name, value)| {
            let text = match value {
                serde_json::Value::String(s) => s,
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => {
                    let name: String = name.chars().take(40).collect();
                    return Err(ApiError::invalid(
                        "fields",
                        format!("fields: {name:?} must be a string, a number or true/false"),
                    ));
                }
            };
            Ok((name, text))
        })
        .collect()
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AppList {
    pub apps: Vec<crate::sessions::AppSummary>,
}

pub use crate::sessions::requests::SessionInfo;

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
        folder: body.folder,
        fields: field_values(body.fields)?,
    };
    let record = state
        .sessions
        .start_as(&caller, &state.client_addr(&req), request)
        .await?;
    let id = record.id;
    Ok(HttpResponse::Created()
        .insert_header(("Location", format!("/api/v1/sessions/{id}")))
        .json(state.sessions.info(record).await))
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
    query: crate::http::query::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let user = match &query.user {
        Some(u) if caller.acts_as_admin() => u.clone(),
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
    let sessions = state.sessions.infos(rows).await;
    Ok(HttpResponse::Ok().json(SessionList { sessions }))
}

/// Every user's sessions that have not ended (administrators).
#[utoipa::path(get, path = "/api/v1/admin/sessions", responses((status = 200, body = SessionList)))]
pub async fn list_running(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Admin)?;
    let sessions = state.sessions.running().await?;
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
        .get(&caller.username, caller.acts_as_admin(), parse_id(&id)?)
        .await?;
    Ok(HttpResponse::Ok().json(state.sessions.info(record).await))
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
    state
        .sessions
        .stop_as(&caller, &state.client_addr(&req), id)
        .await?;
    let record = state
        .sessions
        .get(&caller.username, caller.acts_as_admin(), id)
        .await?;
    Ok(HttpResponse::Accepted().json(state.sessions.info(record).await))
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
        .get(&caller.username, caller.acts_as_admin(), parse_id(&id)?)
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

/// The apps sessions run (the start form's tiles).
#[utoipa::path(get, path = "/api/v1/apps", responses((status = 200, body = AppList)))]
pub async fn apps(caller: Principal, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    Ok(HttpResponse::Ok().json(AppList {
        apps: state.sessions.apps(),
    }))
}
