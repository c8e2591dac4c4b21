//! Session pages: the start form (`/sessions/new`), a session's progress page
//! (`/sessions/{id}`, followed live by `frontend/js/session-progress.js`, which opens
//! the session once ready), and the start and stop form posts. The home page lists
//! the sessions (`SessionRow`).
//!
//! Who may start, see or stop a session is the sessions service's decision; these
//! handlers map its answers to pages.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use super::{csrf_refused, not_found_page, render, CsrfForm, Nav};
use crate::auth::{Principal, Scope};
use crate::http::authn::PageUser;
use crate::http::{ApiError, AppState};
use crate::sessions::requests::SessionInfo;
use crate::sessions::{SessionError, StartRequest};

/// A session in the home page's list.
pub struct SessionRow {
    pub info: SessionInfo,
    pub time_left: String,
}

impl SessionRow {
    pub fn of(info: SessionInfo) -> Self {
        let time_left = info.time_left.map(left).unwrap_or_default();
        SessionRow { info, time_left }
    }
}

/// `1 h 05 min`, `12 min`, `40 s`.
fn left(seconds: i64) -> String {
    match seconds {
        s if s >= 3600 => format!("{} h {:02} min", s / 3600, s / 60 % 60),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// The user's sessions for the home page: running ones and the last few ended.
pub async fn rows(state: &AppState, me: &Principal) -> Result<Vec<SessionRow>, ApiError> {
    let mut out = Vec::new();
    for r in state.sessions.list(&me.username, 5).await? {
        out.push(SessionRow::of(state.sessions.info(r).await));
    }
    Ok(out)
}

struct EnvironmentChoice {
    name: String,
    description: String,
}

#[derive(Template)]
#[template(path = "sessions/new.html")]
struct NewSessionPage {
    nav: Nav,
    environments: Vec<EnvironmentChoice>,
    slices: Vec<String>,
    form: StartForm,
    max_hours: u32,
    error: Option<String>,
}

#[derive(Debug, Deserialize, Default, Clone)]
pub struct StartForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    environment: String,
    #[serde(default)]
    gpus: String,
    #[serde(default)]
    slice: String,
    #[serde(default)]
    hours: String,
    #[serde(default)]
    logdir: String,
}

#[derive(Debug, Deserialize)]
pub struct NewQuery {
    kind: Option<String>,
    logdir: Option<String>,
}

fn new_page(
    state: &AppState,
    me: &Principal,
    form: StartForm,
    error: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let environments = state
        .sessions
        .environments()
        .iter()
        .map(|e| EnvironmentChoice {
            name: e.config.name.clone(),
            description: if e.config.description.is_empty() {
                e.config.name.clone()
            } else {
                e.config.description.clone()
            },
        })
        .collect();
    let mut slices: Vec<String> = state
        .inventory
        .gpus
        .iter()
        .flat_map(|g| g.mig.iter().map(|(profile, _)| profile.clone()))
        .collect();
    slices.sort();
    slices.dedup();
    render(
        &NewSessionPage {
            nav: Nav::of(me),
            environments,
            slices,
            form,
            max_hours: state.sessions.config().max_hours,
            error,
        },
        status,
    )
}

/// `GET /sessions/new`: the start form (`?kind=tensorboard&logdir=…` preselects).
pub async fn new_form(
    state: web::Data<AppState>,
    user: PageUser,
    query: web::Query<NewQuery>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Sessions)?;
    let q = query.into_inner();
    let form = StartForm {
        name: if q.kind.as_deref() == Some("tensorboard") {
            "tensorboard".into()
        } else {
            "default".into()
        },
        kind: q.kind.unwrap_or_else(|| "notebook".into()),
        gpus: "1".into(),
        hours: state.sessions.config().default_hours.to_string(),
        logdir: q.logdir.unwrap_or_default(),
        ..Default::default()
    };
    new_page(&state, &me, form, None, StatusCode::OK)
}

/// `POST /sessions`: start one and show its progress.
pub async fn start(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    form: web::Form<StartForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    let form = form.into_inner();
    if !me.csrf_ok(Some(&form.csrf)) {
        return csrf_refused();
    }
    me.require(Scope::Sessions)?;
    let number = |field: &'static str, text: &str| -> Result<Option<f64>, String> {
        match text.trim() {
            "" => Ok(None),
            t => t
                .parse::<f64>()
                .map(Some)
                .map_err(|_| format!("{field}: {t:?} is not a number")),
        }
    };
    let parsed = number("gpus", &form.gpus).and_then(|g| Ok((g, number("hours", &form.hours)?)));
    let (gpus, hours) = match parsed {
        Ok(v) => v,
        Err(e) => return new_page(&state, &me, form, Some(e), StatusCode::BAD_REQUEST),
    };
    if gpus.is_some_and(|g| g < 0.0 || g.fract() != 0.0) {
        let e = "gpus: must be a whole number".to_string();
        return new_page(&state, &me, form, Some(e), StatusCode::BAD_REQUEST);
    }
    let text = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    let request = StartRequest {
        name: text(&form.name),
        kind: text(&form.kind),
        environment: text(&form.environment),
        gpus: gpus.map(|g| g as u32),
        slice: text(&form.slice),
        hours,
        logdir: text(&form.logdir),
    };
    let started = state
        .sessions
        .start_as(&me, &state.client_addr(&req), request)
        .await
        .map_err(ApiError::from);
    match started {
        Ok(record) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, format!("/sessions/{}", record.id)))
            .finish()),
        Err(ApiError::BadRequest(m) | ApiError::Conflict(m)) => {
            new_page(&state, &me, form, Some(m), StatusCode::BAD_REQUEST)
        }
        Err(ApiError::QuotaExceeded(m)) => {
            new_page(&state, &me, form, Some(m), StatusCode::FORBIDDEN)
        }
        Err(e) => Err(e),
    }
}

#[derive(Template)]
#[template(path = "sessions/show.html")]
struct SessionPage {
    nav: Nav,
    session: SessionRow,
    active: bool,
}

/// `GET /sessions/{id}`: where a session stands, followed live until it is ready.
pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let Ok(id) = id.parse::<i64>() else {
        return not_found_page();
    };
    let record = match state.sessions.get(&me.username, me.is_admin, id).await {
        Ok(r) => r,
        Err(SessionError::NotFound) => return not_found_page(),
        Err(e) => return Err(e.into()),
    };
    let active = record.ended_at.is_none();
    let info = state.sessions.info(record).await;
    render(
        &SessionPage {
            nav: Nav::of(&me),
            session: SessionRow::of(info),
            active,
        },
        StatusCode::OK,
    )
}

/// `POST /sessions/{id}/stop`.
pub async fn stop(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<i64>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    if !me.csrf_ok(Some(&form.csrf)) {
        return csrf_refused();
    }
    me.require(Scope::Sessions)?;
    let stopped = state
        .sessions
        .stop_as(&me, &state.client_addr(&req), id.into_inner())
        .await
        .map_err(ApiError::from);
    match stopped {
        Err(ApiError::NotFound) => return not_found_page(),
        other => other?,
    }
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/#sessions"))
        .finish())
}

/// `GET /hub/…`: where JupyterLab's hub menu leads: `spawn` to the start form, the
/// rest (control panel, logout) to the home page, which lists the sessions.
pub async fn hub_link(req: HttpRequest) -> HttpResponse {
    let tail = req.match_info().get("tail").unwrap_or("");
    let to = if tail.starts_with("spawn") {
        "/sessions/new"
    } else {
        "/#sessions"
    };
    HttpResponse::Found()
        .insert_header((header::LOCATION, to))
        .finish()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::sessions::Progress;

    /// A session for render tests.
    pub fn info(state: &str, ready: bool) -> SessionInfo {
        SessionInfo {
            id: 7,
            name: "<b>nb</b>".into(),
            user: "alice".into(),
            kind: "notebook".into(),
            environment: "python".into(),
            state: state.into(),
            ready,
            url: ready.then(|| "/user/alice/nb/lab".to_string()),
            progress: Progress {
                progress: if ready { 100 } else { 10 },
                message: "Queued: position 2".into(),
                ready,
                state: state.into(),
                ..Default::default()
            },
            job_id: Some(3),
            gres: "gpu:2".into(),
            cuda_visible_devices: Some("0,1".into()),
            nodelist: Some("head".into()),
            logdir: None,
            created_at: "2026-11-23T02:00:00Z".into(),
            ready_at: None,
            ended_at: None,
            time_left: Some(3725),
            time_limit: Some(28800),
            last_activity: None,
            end_reason: None,
            message: None,
        }
    }

    #[test]
    fn the_progress_page_escapes_and_follows() {
        let html = SessionPage {
            nav: super::super::tests::nav(),
            session: SessionRow::of(info("pending", false)),
            active: true,
        }
        .render()
        .expect("render");
        assert!(html.contains("&#60;b&#62;nb&#60;/b&#62;"), "{html}");
        assert!(html.contains("data-session=\"7\""), "{html}");
        assert!(html.contains("Queued: position 2"));
        assert!(html.contains("1 h 02 min"));
        assert!(html.contains("session-progress.js"));
    }

    #[test]
    fn the_start_form_lists_environments_and_slices() {
        let html = NewSessionPage {
            nav: super::super::tests::nav(),
            environments: vec![EnvironmentChoice {
                name: "pytorch".into(),
                description: "PyTorch 2 / CUDA 12".into(),
            }],
            slices: vec!["1g.10gb".into()],
            form: StartForm {
                kind: "tensorboard".into(),
                logdir: "runs".into(),
                ..Default::default()
            },
            max_hours: 24,
            error: Some("gpus: bad".into()),
        }
        .render()
        .expect("render");
        assert!(html.contains("PyTorch 2 / CUDA 12"));
        assert!(html.contains("value=\"1g.10gb\""));
        assert!(html.contains("value=\"runs\""));
        assert!(html.contains("gpus: bad"));
    }
}
