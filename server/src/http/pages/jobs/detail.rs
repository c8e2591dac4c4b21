//! `GET /jobs/{id}`: one job with its pending reason in plain words, its times
//! (time left while it runs, the real end after), its actions (cancel with a
//! confirmation, resubmit, edit as new, open its folder, download its output), its
//! efficiency charts, and the last part of its output (followed live by
//! `frontend/js/job-output.js`); `POST /jobs/{id}/cancel`, `POST /jobs/{id}/signal`
//! (a signal to a running job's processes, as `scancel --signal`) and
//! `POST /jobs/{id}/resubmit`.
//!
//! Who may see, cancel or resubmit a job is the jobs service's and the scheduler's
//! decision: another user's job answers "not found" there, and a 404 page here.

use crate::http::pages::PageError;
use crate::services::ServiceError;
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use scheduler::JobId;

use super::chart::{chart, Chart, Unit};
use super::filters::encode;
use super::{cluster_slices, duration, exit_text, is_active, parse_id, time_limit};
use crate::auth::{Principal, Scope};
use crate::http::authn::PageUser;
use crate::http::pages::when::{filters, span};
use crate::http::pages::{csrf_refused, not_found_page, render, CsrfForm, Nav};
use crate::http::{ApiError, AppState};
use crate::services::efficiency::Efficiency;
use crate::services::jobs::{JobAction, JobInfo, SignalJob, UpdateJob, SIGNAL_NAMES};
use crate::services::output::Tail;
use crate::services::reasons::{self, plural, ClusterSlices, Explained, GpuAsk};

/// How much output the page shows before the live tail takes over.
const TAIL_BYTES: u64 = 64 * 1024;

#[derive(Template)]
#[template(path = "jobs/show.html")]
struct JobPage {
    nav: Nav,
    job: JobInfo,
    time_used: String,
    time_limit: String,
    exit: String,
    /// Pending or running: it may be cancelled and its output followed.
    active: bool,
    /// Running: it has a time left rather than an end.
    running: bool,
    /// Why it waits, in plain words (pending only).
    waiting: Option<Explained>,
    /// While it runs: when its time limit stops it (RFC 3339) and what is left, in
    /// words.
    ends: Option<(String, String)>,
    /// `1 GPU (gpu:1)`, `none`.
    gpus: String,
    /// The caller owns it: it may resubmit it and edit it as new.
    owner: bool,
    /// The caller administers the portal: requeue (and hold or release anyone's).
    admin: bool,
    /// Held (by its owner or an administrator): it may be released.
    held: bool,
    /// The Files page at its working directory, and the download of its output.
    folder_link: Option<String>,
    output_link: Option<String>,
    output: Option<Tail>,
    /// Why the output cannot be shown.
    output_error: Option<String>,
    /// The outcome of an action on this page (a refused cancel).
    notice: Option<String>,
    /// The signal just sent to the job (`USR1`), once the page is shown again.
    sent: Option<String>,
    /// The signals the page offers (`USR1`, `TERM` …).
    signals: Vec<&'static str>,
    /// What it used of what it was given, once sampled.
    usage: Option<UsageView>,
    /// Once it ended other than well: what happened, first on the page.
    happened: Option<super::happened::Happened>,
}

/// The job's efficiency as the page shows it: `seff`'s figures and a chart per
/// resource.
struct UsageView {
    facts: Vec<(&'static str, String)>,
    charts: Vec<Chart>,
    final_figures: bool,
}

/// The fewest samples a usage chart is drawn from.
const MIN_CHART_SAMPLES: usize = 2;

const CORES: Unit = Unit {
    scale: 1.0,
    one: "core",
    many: "cores",
};
const MIB: Unit = Unit {
    scale: 1.0,
    one: "MiB",
    many: "MiB",
};
const GIB: Unit = Unit {
    scale: 1.0,
    one: "GiB",
    many: "GiB",
};
const PERCENT: Unit = Unit {
    scale: 1.0,
    one: "%",
    many: "%",
};

fn usage_view(e: &Efficiency) -> Option<UsageView> {
    e.source.as_ref()?;
    let mut facts = Vec::new();
    if let Some(cpu) = e.cpu_seconds {
        let pct = e
            .cpu_efficiency_percent
            .map_or(String::new(), |p| format!(": {p:.1} % of its cores × time"));
        facts.push(("CPU used", format!("{}{pct}", duration(cpu.round() as u64))));
    }
    if let Some(rss) = e.max_rss_bytes {
        let pct = e
            .memory_efficiency_percent
            .map_or(String::new(), |p| format!(": {p:.1} % of its request"));
        facts.push(("Peak memory", format!("{} MiB{pct}", rss >> 20)));
    }
    if let Some(u) = e.gpu_utilization_percent {
        facts.push(("GPU utilisation", format!("{u:.1} % on average")));
    }
    if let Some(idle) = e.gpu_idle_seconds {
        facts.push(("GPU idle", duration(idle.round() as u64)));
    }
    let mut charts = Vec::new();
    // A chart of one sample (a job that ended within seconds) says nothing.
    if let Some(series) = e
        .series
        .as_ref()
        .filter(|s| s.points.len() >= MIN_CHART_SAMPLES)
    {
        let end = series.points.last().map_or(1, |p| p.t);
        let cores = e.cpus.unwrap_or(1);
        let cpu: Vec<(u32, f64)> = series
            .points
            .iter()
            .map(|p| (p.t, f64::from(p.cpu)))
            .collect();
        charts.push(chart(
            "usage-cpu",
            format!("CPU cores busy (of {})", plural(cores, "core", "cores")),
            CORES,
            &cpu,
            cores as f64,
            end,
        ));
        let requested_mib = e.memory_requested_bytes.map_or(0.0, |b| (b >> 20) as f64);
        let peak_mib = series
            .points
            .iter()
            .map(|p| f64::from(p.rss_mib))
            .fold(0.0, f64::max);
        let mem_top = requested_mib.max(peak_mib);
        // Over 2 GiB the axis counts GiB, so its ticks stay round.
        let (unit, divide) = if mem_top > 2048.0 {
            (GIB, 1024.0)
        } else {
            (MIB, 1.0)
        };
        let mem: Vec<(u32, f64)> = series
            .points
            .iter()
            .map(|p| (p.t, f64::from(p.rss_mib) / divide))
            .collect();
        let title = if requested_mib > 0.0 {
            format!(
                "Memory used (of {} asked)",
                super::chart::value_label(requested_mib / divide, unit)
            )
        } else {
            "Memory used".to_string()
        };
        charts.push(chart(
            "usage-memory",
            title,
            unit,
            &mem,
            mem_top / divide,
            end,
        ));
        let gpu: Vec<(u32, f64)> = series
            .points
            .iter()
            .filter_map(|p| Some((p.t, f64::from(p.gpu?))))
            .collect();
        if !gpu.is_empty() {
            charts.push(chart(
                "usage-gpu",
                "GPU utilisation".into(),
                PERCENT,
                &gpu,
                100.0,
                end,
            ));
        }
    }
    Some(UsageView {
        facts,
        charts,
        final_figures: e.complete,
    })
}

impl JobPage {
    /// Its memory in GiB (MiB under one), as every page writes memory.
    fn memory(&self, mb: &u64) -> String {
        crate::services::gpu_map::memory_text(*mb)
    }

    /// Its scheduling priority (`sprio`'s figure), `unknown` where none is told.
    fn priority(&self) -> String {
        self.job
            .priority
            .map_or_else(|| "unknown".into(), |p| p.to_string())
    }

    /// Its nice: its own and an administrator's change.
    fn nice(&self) -> i64 {
        self.job.nice.unwrap_or(0)
    }

    /// Where the live tail starts reading.
    fn follow_offset(&self) -> u64 {
        self.output.as_ref().map_or(0, |t| t.next_offset)
    }
}

/// `1 GPU (gpu:1)`, `2 whole A100s (gpu:a100:2)` per node, or `none`.
fn gpus_text(gres: &str, nodes: u32) -> String {
    match GpuAsk::parse(gres) {
        None if gres.is_empty() => "none".into(),
        None => gres.to_string(),
        Some(ask) => {
            let words = if ask.types.is_empty() && !ask.shard {
                plural(u64::from(ask.count), "GPU", "GPUs")
            } else {
                ask.words()
            };
            if nodes > 1 {
                format!("{words} on each of {nodes} nodes ({gres})")
            } else {
                format!("{words} ({gres})")
            }
        }
    }
}

/// When a running job's time limit stops it: its planned end, or its start plus
/// its limit; with the time left from `now_ms` in words.
fn ends(job: &JobInfo, now_ms: i64) -> Option<(String, String)> {
    let ms = |t: &str| {
        t.parse::<jiff::Timestamp>()
            .ok()
            .map(|t| t.as_millisecond())
    };
    let end = job.end_time.as_deref().and_then(ms).or_else(|| {
        let start = ms(job.start_time.as_deref()?)?;
        Some(start + i64::try_from(job.time_limit?).ok()?.saturating_mul(1000))
    })?;
    let left = ((end - now_ms).max(0) / 1000) as u64;
    Some((crate::util::rfc3339(end), span(left)))
}

/// The page's view of `info` for `me`, seen at `now_ms`.
fn page_for(me: &Principal, info: JobInfo, slices: &ClusterSlices, now_ms: i64) -> JobPage {
    let running = info.state == "RUNNING";
    let waiting = (info.state == "PENDING")
        .then(|| reasons::explain(info.reason.as_deref().unwrap_or(""), &info.gres, slices));
    JobPage {
        nav: Nav::of(me).at(crate::http::pages::Section::Jobs),
        time_used: duration(info.time_used),
        time_limit: time_limit(info.time_limit),
        exit: exit_text(info.exit_code, info.signal),
        active: is_active(&info.state),
        running,
        waiting,
        ends: if running { ends(&info, now_ms) } else { None },
        gpus: gpus_text(&info.gres, info.nodes),
        owner: info.user == me.username,
        admin: me.acts_as_admin(),
        held: info.state == "PENDING"
            && info
                .reason
                .as_deref()
                .is_some_and(|r| r == "JobHeldUser" || r == "JobHeldAdmin"),
        folder_link: info
            .workdir
            .as_deref()
            .map(|d| format!("/files?path={}", encode(d))),
        output_link: info
            .stdout
            .as_deref()
            .map(|f| format!("/files/download?path={}", encode(f))),
        job: info,
        output: None,
        output_error: None,
        notice: None,
        sent: None,
        signals: SIGNAL_NAMES.iter().map(|(n, _)| *n).collect(),
        usage: None,
        happened: None,
    }
}

/// `GET /jobs/{id}`'s query: `sent=USR1` after a signal was sent from the page.
#[derive(Debug, Default, serde::Deserialize)]
pub struct ShowQuery {
    sent: Option<String>,
}

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
    query: crate::http::query::Query<ShowQuery>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let Some(job) = parse_id(&id) else {
        return not_found_page();
    };
    // Only a signal is echoed, by its own name (anything else in the address is
    // ignored).
    let sent = query
        .into_inner()
        .sent
        .as_deref()
        .and_then(scheduler::parse::scancel_signal)
        .map(scheduler::parse::signal_name);
    page_with(&state, &me, job, None, sent, StatusCode::OK).await
}

async fn job_page(
    state: &AppState,
    me: &Principal,
    job: JobId,
    notice: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    page_with(state, me, job, notice, None, status).await
}

async fn page_with(
    state: &AppState,
    me: &Principal,
    job: JobId,
    notice: Option<String>,
    sent: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let info = match state.jobs.show(me, job).await {
        Ok(info) => info,
        Err(ServiceError::NotFound) => return not_found_page(),
        Err(e) => return Err(e.into()),
    };
    // An array's own number: the array as one thing, its tasks listed.
    if info.is_array {
        let records = state
            .jobs
            .list(
                me,
                crate::services::jobs::JobQuery {
                    ids: Some(info.job_id.to_string()),
                    state: Some("all".into()),
                    per_page: Some(10_000),
                    ..Default::default()
                },
            )
            .await?
            .jobs;
        let owner = info.user == me.username;
        let page = super::array::page(
            Nav::of(me).at(crate::http::pages::Section::Jobs),
            info,
            records,
            owner,
            notice,
        );
        return render(&page, status);
    }
    let (output, output_error) = match state
        .jobs
        .tail(&info, TAIL_BYTES)
        .await
        .map_err(PageError::from)
    {
        Ok(tail) => (tail, None),
        Err(PageError::Refused { message, .. } | PageError::Invalid(message)) => {
            (None, Some(message))
        }
        Err(PageError::NotFound) => (
            None,
            Some(
                "The job's owner has no POSIX identity, so its output cannot be read.".to_string(),
            ),
        ),
        Err(PageError::Failed(e)) => return Err(e),
    };
    let usage = state.jobs.efficiency_of(&info).await?;
    let slices = if info.state == "PENDING" {
        match state.cluster.nodes().await {
            Ok((nodes, _)) => cluster_slices(&nodes),
            Err(_) => ClusterSlices::new(),
        }
    } else {
        ClusterSlices::new()
    };
    let cancelled_by = state
        .jobs
        .cancelled_by(&info)
        .await?
        .filter(|(admin, _, _)| *admin != info.user)
        .map(|(admin, _, reason)| super::happened::CancelledBy { admin, reason });
    let happened = super::happened::happened(
        &info,
        output.as_ref().map(|t| t.text.as_str()),
        cancelled_by.as_ref(),
    );
    let page = JobPage {
        output,
        output_error,
        notice,
        sent,
        // A job the cluster failed to start used nothing worth a figure.
        usage: usage_view(&usage).filter(|_| !happened.as_ref().is_some_and(|h| h.site)),
        happened,
        ..page_for(me, info, &slices, crate::util::now_ms())
    };
    render(&page, status)
}

/// What a page's form handler answers instead of acting (boxed: it is large).
type Answer = Box<Result<HttpResponse, ApiError>>;

/// The job a form of its page acts on, once the form's token and the caller's scope
/// are checked; `Err`: what to answer instead.
fn form_job(me: &Principal, csrf: &str, id: &str) -> Result<JobId, Answer> {
    if !me.csrf_ok(Some(csrf)) {
        return Err(Box::new(csrf_refused()));
    }
    me.require(Scope::Jobs).map_err(|e| Box::new(Err(e)))?;
    parse_id(id).ok_or_else(|| Box::new(not_found_page()))
}

/// After an action from the job's page: on to `done`, or the page again saying why
/// not (`what`: `Not resubmitted`, `Not sent`).
async fn after_action(
    state: &AppState,
    me: &Principal,
    job: JobId,
    outcome: Result<String, PageError>,
    what: &str,
) -> Result<HttpResponse, ApiError> {
    let refused = |m: &str| Some(format!("{what}: {}", reasons::refusal(m)));
    match outcome {
        Ok(done) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, done))
            .finish()),
        Err(PageError::NotFound) => not_found_page(),
        // The job page answers every refusal of an action alike.
        Err(PageError::Refused { message, .. }) => {
            job_page(state, me, job, refused(&message), StatusCode::CONFLICT).await
        }
        Err(PageError::Invalid(m)) => {
            job_page(state, me, job, refused(&m), StatusCode::BAD_REQUEST).await
        }
        Err(PageError::Failed(e)) => Err(e),
    }
}

/// The cancel form: its token and, from an administrator, why (shown to the owner).
#[derive(Debug, serde::Deserialize)]
pub struct CancelForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub reason: String,
}

pub async fn cancel(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
    form: web::Form<CancelForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    let job = match form_job(&me, &form.csrf, &id) {
        Ok(job) => job,
        Err(answer) => return *answer,
    };
    let cancelled = state
        .jobs
        .control_because(
            &me,
            &state.client_addr(&req),
            job,
            JobAction::Cancel,
            &form.reason,
        )
        .await
        .map_err(PageError::from);
    match cancelled {
        Ok(_) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, format!("/jobs/{job}")))
            .finish()),
        Err(PageError::NotFound) => not_found_page(),
        Err(PageError::Refused { message, .. }) => {
            job_page(&state, &me, job, Some(message), StatusCode::CONFLICT).await
        }
        Err(PageError::Invalid(m)) => {
            job_page(&state, &me, job, Some(m), StatusCode::BAD_REQUEST).await
        }
        Err(PageError::Failed(e)) => Err(e),
    }
}

/// `POST /jobs/{id}/hold|release|requeue|cancel-waiting` from the job's (or the
/// array's) page, its owner's or an administrator's (the scheduler decides which may):
/// back to the page, or it again saying why not.
pub async fn act(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    path: web::Path<(String, String)>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let (id, action) = path.into_inner();
    let (action, what) = match action.as_str() {
        "hold" => (JobAction::Hold, "Not held"),
        "release" => (JobAction::Release, "Not released"),
        "requeue" => (JobAction::Requeue, "Not requeued"),
        "cancel-waiting" => (JobAction::CancelWaiting, "Not cancelled"),
        "top" => (JobAction::Top, "Not moved"),
        _ => return not_found_page(),
    };
    let me = user.0;
    let job = match form_job(&me, &form.csrf, &id) {
        Ok(job) => job,
        Err(answer) => return *answer,
    };
    let outcome = state
        .jobs
        .control(&me, &state.client_addr(&req), job, action)
        .await
        .map(|_| format!("/jobs/{job}"))
        .map_err(PageError::from);
    after_action(&state, &me, job, outcome, what).await
}

/// The priority form: an administrator's nice for the job.
#[derive(Debug, serde::Deserialize)]
pub struct NiceForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    nice: String,
}

/// `POST /jobs/{id}/nice`: an administrator sets a pending job's nice (`scontrol
/// update Nice=`); back to the page, or it again saying why not.
pub async fn nice(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
    form: web::Form<NiceForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    let job = match form_job(&me, &form.csrf, &id) {
        Ok(job) => job,
        Err(answer) => return *answer,
    };
    let outcome = match form.nice.trim().parse::<i64>() {
        Ok(n) => {
            let body = UpdateJob {
                nice: Some(n),
                ..UpdateJob::default()
            };
            state
                .jobs
                .update(&me, &state.client_addr(&req), job, &body)
                .await
                .map(|_| format!("/jobs/{job}"))
                .map_err(PageError::from)
        }
        Err(_) => Err(PageError::Invalid(format!(
            "nice: \"{}\" is not a whole number",
            form.nice.trim().chars().take(20).collect::<String>()
        ))),
    };
    after_action(&state, &me, job, outcome, "Priority not changed").await
}

/// The signal form: which signal, and to whom (`steps`: what the script started,
/// `batch`: the script's shell, `full`: both).
#[derive(Debug, serde::Deserialize)]
pub struct SignalForm {
    csrf: String,
    signal: String,
    whom: Option<String>,
}

/// `POST /jobs/{id}/signal`: send a running job's processes a signal without ending
/// it (`scancel --signal`); back to the job's page, which says what was sent, or says
/// why not.
pub async fn signal(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
    form: web::Form<SignalForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    let job = match form_job(&me, &form.csrf, &id) {
        Ok(job) => job,
        Err(answer) => return *answer,
    };
    // The jobs service reads and bounds the signal, as for the API.
    let body = SignalJob {
        signal: serde_json::Value::String(form.signal.clone()),
        whom: form.whom.clone(),
    };
    let sent = state
        .jobs
        .signal(&me, &state.client_addr(&req), job, &body)
        .await
        .map(|n| format!("/jobs/{job}?sent={}", scheduler::parse::signal_name(n)))
        .map_err(PageError::from);
    after_action(&state, &me, job, sent, "Not sent").await
}

/// `POST /jobs/{id}/resubmit`: the same script and options as a new job (the
/// owner's only); the new job's page, or this one with the refusal in plain words.
pub async fn resubmit(
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    let job = match form_job(&me, &form.csrf, &id) {
        Ok(job) => job,
        Err(answer) => return *answer,
    };
    let new = state
        .jobs
        .resubmit(&me, job)
        .await
        .map(|new| format!("/jobs/{new}"))
        .map_err(PageError::from);
    after_action(&state, &me, job, new, "Not resubmitted").await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(state: &str) -> JobInfo {
        JobInfo {
            id: "42".into(),
            job_id: 42,
            array_task_id: None,
            display_id: "42".into(),
            name: "<script>alert(1)</script>".into(),
            user: "alice".into(),
            account: "alice".into(),
            partition: "gpu".into(),
            state: state.into(),
            state_code: "R".into(),
            reason: None,
            priority: Some(1),
            submit_time: "2026-01-02T03:04:05Z".into(),
            start_time: Some("2026-01-02T03:04:06Z".into()),
            expected_start: None,
            end_time: None,
            time_limit: Some(3600),
            time_used: 65,
            nodes: 1,
            nodelist: "node1".into(),
            gres: "gpu:1".into(),
            cpus: Some(2),
            memory_mb: Some(4096),
            cuda_visible_devices: Some("0".into()),
            exit_code: None,
            signal: None,
            workdir: Some("/home/alice".into()),
            stdout: Some("/home/alice/slurm-42.out".into()),
            stderr: None,
            message: None,
            restarts: 0,
            benchmark: None,
            benchmark_note: None,
            ignored: vec![scheduler::IgnoredOption {
                option: "--threads-per-core=1".into(),
                reason: "nodes are described by their CPUs".into(),
            }],
            steps: Vec::new(),
            ..JobInfo::default()
        }
    }

    /// alice, who owns the job.
    fn alice() -> Principal {
        Principal {
            user_id: 1,
            username: "alice".into(),
            admin_account: false,
            credential: crate::auth::Credential::Session {
                jti: "j".into(),
                csrf: "tok".into(),
                renewed: None,
            },
        }
    }

    /// 2026-01-02T03:34:06Z: 30 min after the job started.
    const NOW: i64 = 1_767_324_846_000;

    fn page(state: &str, output: Option<Tail>) -> String {
        let mut job = info(state);
        if state == "PENDING" {
            job.start_time = None;
            job.reason = Some("Resources".into());
            job.expected_start = Some("2026-01-02T05:00:00Z".into());
        }
        if state == "RUNNING" {
            job.end_time = Some("2026-01-02T04:04:06Z".into());
        }
        let slices: ClusterSlices = [(
            "a100".to_string(),
            crate::services::reasons::SliceCount { total: 2, used: 2 },
        )]
        .into_iter()
        .collect();
        JobPage {
            output,
            ..page_for(&alice(), job, &slices, NOW)
        }
        .render()
        .expect("render")
    }

    #[test]
    fn running_job_shows_details_output_and_cancel() {
        let html = page(
            "RUNNING",
            Some(Tail {
                text: "step 1 <ok>\n".into(),
                next_offset: 12,
                truncated: false,
            }),
        );
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{html}"
        );
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("CUDA_VISIBLE_DEVICES"), "{html}");
        assert!(html.contains("/home/alice/slurm-42.out"), "{html}");
        assert!(html.contains("00:01:05"), "{html}");
        assert!(html.contains("step 1 &#60;ok&#62;"), "{html}");
        assert!(html.contains("data-offset=\"12\""), "{html}");
        assert!(html.contains("data-follow=\"true\""), "{html}");
        assert!(html.contains("action=\"/jobs/42/cancel\""), "{html}");
        // A running job may be sent a signal from the page.
        assert!(html.contains("action=\"/jobs/42/signal\""), "{html}");
        assert!(
            html.contains("<option value=\"USR1\">SIGUSR1</option>"),
            "{html}"
        );
        assert!(html.contains("name=\"csrf\" value=\"tok\""), "{html}");
        assert!(html.contains("src=\"/static/js/job-output.js\""), "{html}");
        assert!(
            html.contains("<code>--threads-per-core=1</code>: nodes are described by their CPUs"),
            "{html}"
        );
        // While it runs: the time left, never an end; a start as a readable time.
        assert!(
            html.contains("<dd id=\"job-time-left\">30 min: its time limit stops it <time datetime=\"2026-01-02T04:04:06Z\""),
            "{html}"
        );
        assert!(!html.contains("id=\"job-ended\""), "{html}");
        assert!(
            html.contains("<dd id=\"job-started\"><time datetime=\"2026-01-02T03:04:06Z\""),
            "{html}"
        );
        // The actions: cancel behind a confirmation, resubmit, edit, folder, output.
        assert!(
            html.contains("<details class=\"confirm\" id=\"cancel-confirm\">"),
            "{html}"
        );
        assert!(html.contains("action=\"/jobs/42/resubmit\""), "{html}");
        assert!(html.contains("href=\"/jobs/new?from=42\""), "{html}");
        assert!(
            html.contains("href=\"/files?path=%2Fhome%2Falice\""),
            "{html}"
        );
        assert!(
            html.contains("href=\"/files/download?path=%2Fhome%2Falice%2Fslurm-42.out\""),
            "{html}"
        );
        assert!(html.contains("<dd id=\"job-gpus\">1 GPU (gpu:1)"), "{html}");
        assert!(html.contains("<dd>2 cores</dd>"), "{html}");
    }

    #[test]
    fn another_users_job_has_no_resubmit_or_edit() {
        let mut job = info("RUNNING");
        job.user = "bob".into();
        let html = page_for(&alice(), job, &ClusterSlices::new(), NOW)
            .render()
            .expect("render");
        assert!(!html.contains("/resubmit"), "{html}");
        assert!(!html.contains("/jobs/new?from="), "{html}");
        assert!(html.contains("id=\"job-folder\""), "{html}");
    }

    #[test]
    fn ended_job_has_no_cancel_button_and_is_not_followed() {
        let mut job = info("COMPLETED");
        job.exit_code = Some(3);
        job.message = Some("exited <3>".into());
        let mut samples = crate::launch::usage::Usage::new(0, 30);
        for (i, util) in [(1, 90), (2, 5)] {
            samples.record(&crate::launch::usage::Sample {
                at_ms: i * 30_000,
                cpu_seconds: i as f64 * 30.0,
                rss_bytes: 512 << 20,
                read: None,
                gpus: vec![crate::launch::usage::GpuSample {
                    index: 0,
                    utilization_percent: Some(util),
                    ..Default::default()
                }],
            });
        }
        samples.finish(60_000, 60.0, 0);
        let usage = usage_view(&crate::services::efficiency::efficiency(
            &job,
            Some(&samples),
        ));
        job.end_time = Some("2026-01-02T03:05:11Z".into());
        let html = JobPage {
            output_error: Some("not a regular file".into()),
            notice: Some("Job 42 is already over".into()),
            usage,
            ..page_for(&alice(), job, &ClusterSlices::new(), NOW)
        }
        .render()
        .expect("render");
        // The efficiency: figures, and a chart per resource with the GPU's.
        assert!(html.contains("<dt>Peak memory</dt><dd>512 MiB"), "{html}");
        assert!(
            html.contains("<dt>GPU idle</dt><dd>00:00:30</dd>"),
            "{html}"
        );
        assert!(
            html.contains("<polyline points=\"311.0,18.6 548.0,91.7\""),
            "GPU at 90 % then 5 %: {html}"
        );
        // Round ticks with units on both axes, each label once.
        let gpu_chart = html
            .split("id=\"usage-gpu\"")
            .nth(1)
            .and_then(|rest| rest.split("</svg>").next())
            .expect("the GPU chart");
        let labels: Vec<&str> = gpu_chart
            .split("class=\"tick y-tick\"")
            .skip(1)
            .filter_map(|t| t.split('>').nth(1)?.split('<').next())
            .collect();
        assert_eq!(labels, ["0 %", "50 %", "100 %"], "{gpu_chart}");
        assert!(gpu_chart.contains(">30 s</text>"), "{gpu_chart}");
        assert!(gpu_chart.contains(">1 min</text>"), "{gpu_chart}");
        assert!(gpu_chart.contains("time since the start"), "{gpu_chart}");
        assert!(html.contains(">0.5 cores</text>"), "{html}");
        // Over: when it ended, no time left.
        assert!(
            html.contains("<dd id=\"job-ended\"><time datetime=\"2026-01-02T03:05:11Z\""),
            "{html}"
        );
        assert!(!html.contains("job-time-left"), "{html}");
        assert!(html.contains("over its whole run"), "{html}");
        assert!(!html.contains("/jobs/42/cancel"), "{html}");
        assert!(!html.contains("/jobs/42/signal"), "{html}");
        assert!(html.contains("data-follow=\"false\""), "{html}");
        assert!(html.contains("id=\"job-exit-code\">3<"), "{html}");
        assert!(html.contains("exited &#60;3&#62;"), "{html}");
        assert!(html.contains("not a regular file"), "{html}");
        assert!(html.contains("Job 42 is already over"), "{html}");
    }

    #[test]
    fn pending_job_waits_for_output() {
        let html = page("PENDING", None);
        assert!(html.contains("data-follow=\"true\""), "{html}");
        assert!(html.contains("data-offset=\"0\""), "{html}");
        assert!(html.contains("action=\"/jobs/42/cancel\""), "{html}");
        // Why it waits, in words with the cluster's state, and when it may start.
        assert!(
            html.contains("Waiting for a GPU: both are in use; expected start <span id=\"job-expected-start\"><time datetime=\"2026-01-02T05:00:00Z\""),
            "{html}"
        );
        assert!(
            html.contains("<code class=\"reason-code\">Resources</code>"),
            "{html}"
        );
        assert!(!html.contains("id=\"job-started\""), "{html}");
        assert!(!html.contains("job-time-left"), "{html}");
        assert!(html.contains("It will not start."), "{html}");
    }
}
