//! Session pages: the start form (`/sessions/new`), a session's progress page
//! (`/sessions/{id}`, followed live by `frontend/js/session-progress.js`, which opens
//! the session once ready), and the start and stop form posts. The home page lists
//! the sessions (`SessionRow`).
//!
//! Who may start, see or stop a session is the sessions service's decision; these
//! handlers map its answers to pages.

use crate::http::pages::PageError;
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
        // Only a session that runs has time left (a failed one never had any).
        let time_left = info
            .time_left
            .filter(|_| info.ended_at.is_none())
            .map(left)
            .unwrap_or_default();
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

/// An app's tile on the start form, with its fields.
struct AppChoice {
    id: String,
    title: String,
    description: String,
    icon: String,
    fields: Vec<FieldChoice>,
}

/// One form field of an app, as the form shows it.
struct FieldChoice {
    /// `f.<app>.<field>`: apps may name their fields alike.
    input: String,
    label: String,
    help: String,
    kind: String,
    value: String,
    min: String,
    max: String,
    step: String,
    options: Vec<String>,
    max_length: usize,
    required: bool,
}

impl FieldChoice {
    fn checked(&self) -> bool {
        matches!(self.value.as_str(), "true" | "on" | "1" | "yes")
    }
}

/// What one GPU brings and how many are free, in words.
struct GpuWords {
    brings: String,
    free: String,
}

/// One choice of the GPU kind: whole GPUs (of a type), a MIG profile or a share,
/// with how many are free now.
struct GpuKindChoice {
    /// The form's `slice` (empty: whole GPUs of any type).
    value: String,
    /// In words: `1g.10gb: 1/7 of an A100-80GB`.
    label: String,
    free: u32,
    total: u32,
    /// With none free: when one is expected to be, in words (`in 2 h`), from the
    /// scheduler's plan.
    expected: Option<String>,
}

impl GpuKindChoice {
    /// `2 of 4 free now`, `none free now; expected in 2 h`.
    fn availability(&self) -> String {
        match (self.free, &self.expected) {
            (0, Some(when)) => format!("none of {} free now; one expected {when}", self.total),
            (0, None) => format!("none of {} free now", self.total),
            (f, _) => format!("{f} of {} free now", self.total),
        }
    }
}

/// For each kind with none free, when one would start: the scheduler's plan for a
/// one-GPU job of it of `hours` (a dry run: nothing is submitted).
async fn expected_starts(
    state: &AppState,
    me: &Principal,
    kinds: &mut [GpuKindChoice],
    hours: &str,
) {
    let minutes = hours
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|h| *h > 0.0)
        .map_or(60, |h| (h * 60.0).ceil() as u64);
    let now = crate::util::now_ms();
    for k in kinds.iter_mut().filter(|k| k.free == 0 && k.total > 0) {
        let gres = match k.value.as_str() {
            "" => "gpu:1".to_string(),
            "shard" => "shard:1".to_string(),
            t => format!("gpu:{t}:1"),
        };
        let body = crate::services::jobs::SubmitJob {
            wrap: Some("true".into()),
            options: [
                ("gres".to_string(), serde_json::Value::from(gres)),
                (
                    "time".to_string(),
                    serde_json::Value::from(minutes.to_string()),
                ),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        if let Ok(plan) = state.jobs.dry_run(me, body).await {
            k.expected = plan
                .expected_start
                .as_deref()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(|t| crate::http::pages::when::relative(t.as_millisecond(), now));
        }
    }
}

/// The GPU kinds of the offer, in words: whole GPUs first (any type, then each type
/// when there are several), then MIG profiles as parts of their GPU, then shares.
fn gpu_kind_choices(
    offer: &crate::sessions::GpuOffer,
    gpus: &[crate::services::cluster::GpuStatus],
) -> Vec<GpuKindChoice> {
    let whole: Vec<_> = offer
        .kinds
        .iter()
        .filter(|k| crate::services::reasons::is_whole_gpu(&k.r#type))
        .collect();
    let mut out = Vec::new();
    if !whole.is_empty() {
        let model = |t: &str| {
            gpus.iter()
                .find(|g| g.model.to_lowercase().contains(&t.to_lowercase()))
                .map_or_else(|| t.to_string(), |g| g.model.clone())
        };
        out.push(GpuKindChoice {
            value: String::new(),
            label: if whole.len() == 1 {
                format!("Whole GPU ({})", model(&whole[0].r#type))
            } else {
                "Whole GPU, any type".into()
            },
            free: whole.iter().map(|k| k.free).sum(),
            total: whole.iter().map(|k| k.total).sum(),
            expected: None,
        });
        if whole.len() > 1 {
            for k in &whole {
                out.push(GpuKindChoice {
                    value: k.r#type.clone(),
                    label: format!("Whole GPU ({})", model(&k.r#type)),
                    free: k.free,
                    total: k.total,
                    expected: None,
                });
            }
        }
    }
    let mut migs: Vec<_> = offer.kinds.iter().filter(|k| k.is_mig()).collect();
    migs.sort_by_key(|k| {
        (
            k.r#type
                .split('g')
                .next()
                .and_then(|g| g.parse::<u32>().ok()),
            k.r#type.clone(),
        )
    });
    for k in migs {
        let parent = gpus
            .iter()
            .find(|g| g.mig.iter().any(|(p, _)| *p == k.r#type))
            .map(|g| g.model.clone());
        out.push(GpuKindChoice {
            value: k.r#type.clone(),
            label: mig_words(&k.r#type, parent.as_deref()),
            free: k.free,
            total: k.total,
            expected: None,
        });
    }
    if let Some(k) = offer.kinds.iter().find(|k| k.r#type == "shard") {
        out.push(GpuKindChoice {
            value: "shard".into(),
            label: "GPU share (time-sliced with others)".into(),
            free: k.free,
            total: k.total,
            expected: None,
        });
    }
    out
}

/// `1g.10gb: 1/7 of an A100-80GB`: a MIG profile as a part of its GPU (A30s are cut
/// in fourths, the others in sevenths).
fn mig_words(profile: &str, model: Option<&str>) -> String {
    match model.and_then(|m| super::mig_part(profile, m)) {
        Some(part) => format!("{profile}: {part}"),
        None => format!("{profile} (a MIG slice of a GPU)"),
    }
}

/// What the form starts on by default: one whole GPU while one is free, else the
/// first kind with one free (a MIG slice or a share starts now where a whole GPU
/// would queue), else whole GPUs (it queues); none on a cluster without GPUs.
fn default_gpu_choice(choices: &[GpuKindChoice]) -> (String, String) {
    if choices.is_empty() {
        return ("0".into(), String::new());
    }
    let pick = choices.iter().find(|c| c.free > 0).unwrap_or(&choices[0]);
    ("1".into(), pick.value.clone())
}

#[derive(Template)]
#[template(path = "sessions/new.html")]
struct NewSessionPage {
    nav: Nav,
    apps: Vec<AppChoice>,
    /// The ids of the apps that ask for a log folder, space-separated.
    logdir_apps: String,
    /// The apps that open a terminal in a folder ("Open a terminal here").
    folder_apps: String,
    environments: Vec<EnvironmentChoice>,
    gpu_kinds: Vec<GpuKindChoice>,
    gpu: GpuWords,
    form: StartForm,
    max_hours: u32,
    error: Option<String>,
}

impl NewSessionPage {
    /// The field the error names (`gpus: …`), to show it beside that field.
    fn error_for(&self, field: &str) -> Option<&str> {
        let e = self.error.as_deref()?;
        let (named, message) = e.split_once(": ")?;
        (named == field).then_some(message)
    }
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
    #[serde(default)]
    folder: String,
    /// The apps' fields, `f.<app>.<field>`.
    #[serde(flatten)]
    fields: std::collections::BTreeMap<String, String>,
}

impl StartForm {
    /// The chosen app's field values, by field name.
    fn values_of(&self, app: &str) -> std::collections::BTreeMap<String, String> {
        let prefix = format!("f.{app}.");
        self.fields
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_string(), v.clone())))
            .collect()
    }
}

#[derive(Debug, Deserialize)]
pub struct NewQuery {
    kind: Option<String>,
    logdir: Option<String>,
    /// The folder a terminal opens in (`?kind=terminal&folder=…`: "Open a terminal
    /// here" on the Files page).
    folder: Option<String>,
    /// An ended session of the caller's whose choices fill the form ("Relaunch").
    relaunch: Option<i64>,
}

/// `8 CPU cores and 48 GB of memory`; `3 of 4 free now`.
fn gpu_words(offer: &crate::sessions::GpuOffer) -> GpuWords {
    let gib = offer.mem_per_gpu_mb as f64 / 1024.0;
    let memory = if gib.fract() == 0.0 {
        format!("{gib:.0} GiB")
    } else {
        format!("{gib:.1} GiB")
    };
    let brings = format!(
        "Each GPU brings {} CPU cores and {memory} of memory; a slice or share its part of them.",
        offer.cpus_per_gpu
    );
    let free = match (offer.free, offer.total) {
        (Some(_), Some(_)) if offer.kinds.is_empty() => {
            "This cluster has no GPUs: sessions run on CPUs.".to_string()
        }
        (Some(_), Some(0)) => String::new(),
        (Some(1), Some(t)) => format!("1 of {t} whole GPUs is free now."),
        (Some(f), Some(t)) => format!("{f} of {t} whole GPUs are free now."),
        _ => String::new(),
    };
    GpuWords { brings, free }
}

async fn new_page(
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
    let number = |n: Option<f64>| n.map(|n| n.to_string()).unwrap_or_default();
    let apps: Vec<AppChoice> = state
        .sessions
        .app_configs()
        .iter()
        .map(|a| {
            let chosen = form.kind == a.id();
            let given = form.values_of(a.id());
            AppChoice {
                id: a.id().to_string(),
                title: a.config.title.clone(),
                description: a.config.description.clone(),
                icon: a.icon_url(),
                fields: a
                    .config
                    .fields
                    .iter()
                    .map(|f| FieldChoice {
                        input: format!("f.{}.{}", a.id(), f.name),
                        label: if f.label.is_empty() {
                            f.name.clone()
                        } else {
                            f.label.clone()
                        },
                        help: f.help.clone(),
                        kind: f.kind.clone(),
                        value: match given.get(&f.name) {
                            Some(v) if chosen => v.clone(),
                            // A checkbox left unticked sends nothing.
                            None if chosen && f.kind == "checkbox" && !form.csrf.is_empty() => {
                                "false".into()
                            }
                            _ => f.default_text(),
                        },
                        min: number(f.min),
                        max: number(f.max),
                        step: if f.integer { "1".into() } else { "any".into() },
                        options: f.options.clone(),
                        max_length: f.max_length(),
                        required: f.required,
                    })
                    .collect(),
            }
        })
        .collect();
    let logdir_apps = state
        .sessions
        .app_configs()
        .iter()
        .filter(|a| a.config.logdir)
        .map(|a| a.id().to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let folder_apps = state.sessions.terminal_apps().join(" ");
    let offer = state.sessions.gpu_offer().await;
    let mut gpu_kinds = gpu_kind_choices(&offer, state.cluster.gpus());
    expected_starts(state, me, &mut gpu_kinds, &form.hours).await;
    let gpu = gpu_words(&offer);
    render(
        &NewSessionPage {
            nav: Nav::of(me),
            apps,
            logdir_apps,
            folder_apps,
            environments,
            gpu_kinds,
            gpu,
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
    query: crate::http::query::Query<NewQuery>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Sessions)?;
    let q = query.into_inner();
    let first = state
        .sessions
        .app_configs()
        .iter()
        .find(|a| a.id() == "notebook")
        .or_else(|| state.sessions.app_configs().first())
        .map(|a| a.id().to_string())
        .unwrap_or_default();
    let kind = q
        .kind
        .filter(|k| state.sessions.app_configs().iter().any(|a| a.id() == k))
        .unwrap_or(first);
    // What starts now: a free whole GPU, else a free slice or share; none on a
    // cluster without GPUs.
    let offer = state.sessions.gpu_offer().await;
    let (gpus, slice) = default_gpu_choice(&gpu_kind_choices(&offer, state.cluster.gpus()));
    // Relaunch: the same app, environment, GPUs, hours, name and log folder.
    if let Some(id) = q.relaunch {
        let record = state.sessions.get(&me.username, false, id).await;
        let record = match record {
            Ok(r) => r,
            Err(SessionError::NotFound) => return not_found_page(),
            Err(e) => return Err(e.into()),
        };
        let info = state.sessions.info(record.clone()).await;
        let (gpus, slice) = match &record.gpus {
            None => ("0".to_string(), String::new()),
            Some(g) => (
                g.count.to_string(),
                match &g.kind {
                    scheduler::SliceKind::Shard => "shard".to_string(),
                    scheduler::SliceKind::Gpu { r#type } => r#type.clone().unwrap_or_default(),
                },
            ),
        };
        let hours = info
            .time_limit
            .map(|s| {
                let h = s as f64 / 3600.0;
                if h.fract() == 0.0 {
                    format!("{h:.0}")
                } else {
                    format!("{h:.2}")
                }
            })
            .unwrap_or_else(|| state.sessions.config().default_hours.to_string());
        let form = StartForm {
            name: record.name.clone(),
            kind: record.kind.clone(),
            environment: record.environment.clone(),
            gpus,
            slice,
            hours,
            logdir: record.logdir.clone().unwrap_or_default(),
            folder: record.folder.clone().unwrap_or_default(),
            ..Default::default()
        };
        return new_page(&state, &me, form, None, StatusCode::OK).await;
    }
    let form = StartForm {
        name: if kind == "notebook" {
            "default".into()
        } else {
            kind.clone()
        },
        kind,
        gpus,
        slice,
        hours: state.sessions.config().default_hours.to_string(),
        logdir: q.logdir.unwrap_or_default(),
        folder: q.folder.unwrap_or_default(),
        ..Default::default()
    };
    new_page(&state, &me, form, None, StatusCode::OK).await
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
            t => t.parse::<f64>().map(Some).map_err(|_| match field {
                "gpus" => format!("gpus: \"{t}\" is not a count; write a whole number, 0 or more"),
                _ => format!("hours: \"{t}\" is not a number of hours; write one like 8 or 1.5"),
            }),
        }
    };
    let parsed = number("gpus", &form.gpus).and_then(|g| Ok((g, number("hours", &form.hours)?)));
    let (gpus, hours) = match parsed {
        Ok(v) => v,
        Err(e) => return new_page(&state, &me, form, Some(e), StatusCode::BAD_REQUEST).await,
    };
    if gpus.is_some_and(|g| g < 0.0 || g.fract() != 0.0) {
        let e = "gpus: write a whole number of GPUs, 0 or more".to_string();
        return new_page(&state, &me, form, Some(e), StatusCode::BAD_REQUEST).await;
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
        // Sent by a form without its script for any app: only a terminal takes it.
        folder: text(&form.folder).filter(|_| {
            state
                .sessions
                .terminal_apps()
                .iter()
                .any(|a| a == form.kind.trim())
        }),
        fields: form.values_of(form.kind.trim()),
    };
    let started = state
        .sessions
        .start_as(&me, &state.client_addr(&req), request)
        .await
        .map_err(PageError::from);
    // The form again with its values: a refused field, a session of that name, the
    // most sessions (400); a quota or what is not the caller's (403).
    let (message, status) = match started {
        Ok(record) => {
            return Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, format!("/sessions/{}", record.id)))
                .finish())
        }
        Err(PageError::Invalid(m)) => (m, StatusCode::BAD_REQUEST),
        Err(PageError::Refused { message, status }) if status == StatusCode::FORBIDDEN => {
            (message, status)
        }
        Err(PageError::Refused { message, .. }) => (message, StatusCode::BAD_REQUEST),
        Err(PageError::NotFound) => return not_found_page(),
        Err(PageError::Failed(e)) => return Err(e),
    };
    new_page(&state, &me, form, Some(message), status).await
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
    let record = match state
        .sessions
        .get(&me.username, me.acts_as_admin(), id)
        .await
    {
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
        .await;
    match stopped {
        Err(SessionError::NotFound) => return not_found_page(),
        other => other?,
    }
    Ok(HttpResponse::SeeOther()
        .insert_header((header::LOCATION, "/#sessions"))
        .finish())
}

/// `POST /sessions/{id}/dismiss`: an ended session's card leaves the dashboard.
pub async fn dismiss(
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
    match state.sessions.dismiss(&me.username, id.into_inner()).await {
        Err(SessionError::NotFound) => return not_found_page(),
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
            app_title: "JupyterLab".into(),
            environment: "python".into(),
            state: state.into(),
            ready,
            url: ready.then(|| "/user/alice/nb/lab".to_string()),
            progress: Progress {
                progress: if ready { 100 } else { 10 },
                message: "Queued: position 2".into(),
                ready,
                state: state.into(),
                events: vec![crate::sessions::Event {
                    at: "2026-11-23T02:00:00Z".into(),
                    message: "Queued <now>".into(),
                }],
                ..Default::default()
            },
            job_id: Some(3),
            gres: "gpu:2".into(),
            cuda_visible_devices: Some("0,1".into()),
            nodelist: Some("head".into()),
            logdir: None,
            folder: None,
            created_at: "2026-11-23T02:00:00Z".into(),
            started_at: None,
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
        // The event log, and a queued session is not "Started".
        assert!(
            html.contains("<time datetime=\"2026-11-23T02:00:00Z\">2026-11-23T02:00:00Z</time> Queued &#60;now&#62;"),
            "{html}"
        );
        assert!(html.contains("Queued since"), "{html}");
        assert!(!html.contains("<dt>Started</dt>"), "{html}");
        // Stop asks first: the form that stops is behind a confirmation step.
        assert!(html.contains("id=\"session-stop-confirm\""), "{html}");
        assert!(html.contains("<details class=\"confirm\""), "{html}");
        assert!(
            html.contains("id=\"session-failure\" role=\"alert\" hidden"),
            "{html}"
        );
    }

    #[test]
    fn the_start_form_carries_the_chosen_apps_fields() {
        use actix_web::FromRequest;
        let (req, mut payload) = actix_web::test::TestRequest::post()
            .insert_header((header::CONTENT_TYPE, "application/x-www-form-urlencoded"))
            .set_payload(
                "csrf=c&kind=crashes&name=again&gpus=1&hours=2&logdir=\
                 &f.crashes.note=from+the+form&f.crashes.cores=2&f.other.note=no",
            )
            .to_http_parts();
        let form = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(web::Form::<StartForm>::from_request(&req, &mut payload))
            .expect("form")
            .into_inner();
        assert_eq!(form.kind, "crashes");
        assert_eq!(form.name, "again");
        let values = form.values_of("crashes");
        assert_eq!(
            values.get("note").map(String::as_str),
            Some("from the form")
        );
        assert_eq!(values.get("cores").map(String::as_str), Some("2"));
        assert_eq!(values.len(), 2);
    }

    #[test]
    fn a_failed_session_shows_its_error_and_log() {
        let mut info = info("ended", false);
        info.progress.failed = true;
        info.progress.message = "Failed: its job ended FAILED".into();
        info.progress.log = Some("no server for <x>".into());
        info.ended_at = Some("2026-11-23T02:01:00Z".into());
        let html = SessionPage {
            nav: super::super::tests::nav(),
            session: SessionRow::of(info),
            active: false,
        }
        .render()
        .expect("render");
        assert!(
            html.contains("id=\"session-failure\" role=\"alert\" >"),
            "{html}"
        );
        assert!(html.contains("no server for &#60;x&#62;"), "{html}");
        assert!(!html.contains("session-stop-confirm"), "{html}");
    }

    #[test]
    fn the_start_form_lists_environments_and_slices() {
        let html = NewSessionPage {
            nav: super::super::tests::nav(),
            apps: vec![AppChoice {
                id: "vscode".into(),
                title: "VS Code".into(),
                description: "An <editor>".into(),
                icon: "/static/icons/apps/vscode.svg".into(),
                fields: vec![FieldChoice {
                    input: "f.vscode.cores".into(),
                    label: "Cores".into(),
                    help: String::new(),
                    kind: "number".into(),
                    value: "2".into(),
                    min: "1".into(),
                    max: "8".into(),
                    step: "1".into(),
                    options: Vec::new(),
                    max_length: 10,
                    required: false,
                }],
            }],
            logdir_apps: "tensorboard".into(),
            folder_apps: "terminal".into(),
            environments: vec![EnvironmentChoice {
                name: "pytorch".into(),
                description: "PyTorch 2 / CUDA 12".into(),
            }],
            gpu_kinds: vec![GpuKindChoice {
                value: "1g.10gb".into(),
                label: mig_words("1g.10gb", Some("A100-80GB")),
                free: 2,
                total: 7,
                expected: None,
            }],
            gpu: gpu_words(&crate::sessions::GpuOffer {
                cpus_per_gpu: 8,
                mem_per_gpu_mb: 48 * 1024,
                free: Some(3),
                total: Some(4),
                kinds: vec![crate::sessions::SliceFree {
                    r#type: "a100".into(),
                    free: 3,
                    total: 4,
                }],
            }),
            form: StartForm {
                kind: "vscode".into(),
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
        assert!(
            html.contains(
                "<span class=\"field-error\" id=\"gpus-error\" role=\"alert\">bad</span>"
            ),
            "the error beside its field: {html}"
        );
        assert!(
            html.contains("value=\"\" aria-describedby=\"gpu-offer\" aria-invalid=\"true\""),
            "{html}"
        );
        assert!(
            html.contains("src=\"/static/icons/apps/vscode.svg\""),
            "{html}"
        );
        assert!(html.contains("value=\"vscode\" checked"), "{html}");
        assert!(html.contains("An &#60;editor&#62;"), "{html}");
        assert!(
            html.contains("name=\"f.vscode.cores\" value=\"2\" step=\"1\" min=\"1\" max=\"8\""),
            "{html}"
        );
        assert!(
            html.contains("Each GPU brings 8 CPU cores and 48 GiB of memory; a slice or share its part of them. <span id=\"gpus-free\">3 of 4 whole GPUs are free now.</span>"),
            "{html}"
        );
        assert!(
            html.contains("1g.10gb: 1/7 of an A100-80GB — 2 of 7 free now"),
            "{html}"
        );
    }

    fn offer(kinds: &[(&str, u32, u32)]) -> crate::sessions::GpuOffer {
        crate::sessions::GpuOffer {
            cpus_per_gpu: 8,
            mem_per_gpu_mb: 1024,
            free: None,
            total: None,
            kinds: kinds
                .iter()
                .map(|&(t, free, total)| crate::sessions::SliceFree {
                    r#type: t.into(),
                    free,
                    total,
                })
                .collect(),
        }
    }

    #[test]
    fn the_start_form_offers_each_kind_with_its_free_count_and_defaults_to_what_starts_now() {
        // Whole GPUs all taken, a MIG slice free: the default starts at once.
        let kinds = offer(&[
            ("shard", 4, 8),
            ("1g.10gb", 1, 7),
            ("a100", 0, 2),
            ("3g.40gb", 0, 2),
        ]);
        let choices = gpu_kind_choices(&kinds, &[]);
        let seen: Vec<(&str, u32, u32)> = choices
            .iter()
            .map(|c| (c.value.as_str(), c.free, c.total))
            .collect();
        assert_eq!(
            seen,
            [
                ("", 0, 2),
                ("1g.10gb", 1, 7),
                ("3g.40gb", 0, 2),
                ("shard", 4, 8)
            ]
        );
        assert_eq!(default_gpu_choice(&choices), ("1".into(), "1g.10gb".into()));
        assert_eq!(choices[0].availability(), "none of 2 free now");
        // A whole GPU free: that.
        let choices = gpu_kind_choices(&offer(&[("a100", 1, 2), ("1g.10gb", 7, 7)]), &[]);
        assert_eq!(default_gpu_choice(&choices), ("1".into(), String::new()));
        // Nothing free: whole GPUs (it waits); no GPUs at all: none asked.
        let choices = gpu_kind_choices(&offer(&[("a100", 0, 2), ("shard", 0, 4)]), &[]);
        assert_eq!(default_gpu_choice(&choices), ("1".into(), String::new()));
        assert_eq!(default_gpu_choice(&[]), ("0".into(), String::new()));
        // Several whole types: any, then each.
        let choices = gpu_kind_choices(&offer(&[("a100", 1, 2), ("h100", 2, 4)]), &[]);
        let values: Vec<&str> = choices.iter().map(|c| c.value.as_str()).collect();
        assert_eq!(values, ["", "a100", "h100"]);
        assert_eq!(choices[0].free, 3);
        assert_eq!(
            mig_words("3g.40gb", Some("NVIDIA A30")),
            "3g.40gb: 3/4 of an A30"
        );
        assert_eq!(mig_words("2g.20gb", None), "2g.20gb (a MIG slice of a GPU)");
    }
}
