//! `/api/v1/jobs`: submit, list, show, cancel, hold, release, requeue, and read a
//! job's output (optionally following it as server-sent events).
//!
//! Users see and touch only their own jobs (another user's job is 404);
//! administrators see all. Active jobs come from the scheduler; ended ones from the
//! database.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{web, HttpRequest, HttpResponse};
use scheduler::{JobId, JobState, JobView, Owner, SqueueFilter};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::rfc3339;
use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use crate::sched::{submission, Requester, SchedError};
use crate::store::{JobFilter, JobRecord, StoreError};

/// A job submission: a script with `#SBATCH` directives, or a command to wrap,
/// plus `sbatch` options by their long names.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitJob {
    /// The batch script.
    pub script: Option<String>,
    /// A command to run instead of a script (`sbatch --wrap`).
    pub wrap: Option<String>,
    /// `sbatch` long options, e.g. `{"gres": "gpu:2", "time": "1:00:00", "array": "0-9%2"}`;
    /// they override the script's directives.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub options: BTreeMap<String, serde_json::Value>,
    /// Environment given to the job (all of it unless `--export=NONE`).
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
    /// Where the job is submitted from (`SLURM_SUBMIT_DIR`); default: the home.
    pub working_directory: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Submitted {
    /// The job id (`123`).
    pub id: String,
    pub job_id: u64,
}

/// A job or array task. Fields without a value are left out.
#[derive(Debug, Serialize, ToSchema)]
pub struct JobInfo {
    /// `123`, or `123_4` for an array task.
    pub id: String,
    pub job_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_task_id: Option<u32>,
    /// As `squeue` shows it: `123_[5-9%2]` for an array's pending tasks.
    pub display_id: String,
    pub name: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    /// `PENDING`, `RUNNING`, `COMPLETING`, `COMPLETED`, `FAILED`, `CANCELLED`,
    /// `TIMEOUT`, `NODE_FAIL`, `OUT_OF_MEMORY`.
    pub state: String,
    /// Slurm's two-letter code (`PD`, `R` …).
    pub state_code: String,
    /// Why it is pending (`Priority`, `Resources`, `Dependency` …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    pub submit_time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_time: Option<String>,
    /// Seconds; absent: unlimited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<u64>,
    /// Seconds run so far (or in all).
    pub time_used: u64,
    pub nodes: u32,
    pub nodelist: String,
    /// Generic resources per node (`gpu:2`).
    pub gres: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    pub restarts: u32,
    /// Read as a benchmark of this suite (or `auto`) when it ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<String>,
    /// What became of it: the run recorded, or why nothing was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub benchmark_note: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<JobInfo>,
    pub total: u64,
    pub page: u64,
    pub per_page: u64,
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only this user's jobs (administrators; others always see only their own).
    pub user: Option<String>,
    /// Comma-separated states or codes (`PENDING,R`); `all` lists ended jobs too.
    /// Without it: jobs not yet over, as `squeue` lists them.
    pub state: Option<String>,
    pub partition: Option<String>,
    /// Ended jobs submitted at or after this Unix time (seconds).
    pub since: Option<i64>,
    /// From 1.
    pub page: Option<u64>,
    /// Default 1000, at most 10000.
    pub per_page: Option<u64>,
}

pub fn requester(caller: &Principal) -> Requester {
    Requester {
        user: caller.username.clone(),
        admin: caller.is_admin,
    }
}

impl From<SchedError> for ApiError {
    fn from(e: SchedError) -> Self {
        match e {
            SchedError::NotFound => ApiError::NotFound,
            SchedError::Rejected(m) => ApiError::BadRequest(m),
            SchedError::Conflict(m) => ApiError::Conflict(m),
            SchedError::Unavailable => {
                ApiError::Unavailable("the scheduler is not available".into())
            }
        }
    }
}

/// Submit a job.
#[utoipa::path(post, path = "/api/v1/jobs", request_body = SubmitJob,
    responses((status = 201, body = Submitted), (status = 400, description = "invalid directive or field, or a job that can never run")))]
pub async fn submit(
    caller: Principal,
    state: web::Data<AppState>,
    body: web::Json<SubmitJob>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let job = submit_as(&state, &caller, body.into_inner()).await?;
    let id = job.to_string();
    Ok(HttpResponse::Created()
        .insert_header(("Location", format!("/api/v1/jobs/{id}")))
        .json(Submitted {
            id,
            job_id: job.job,
        }))
}

/// Submit `body` as `caller`: the one path for the API and the pages.
pub async fn submit_as(
    state: &AppState,
    caller: &Principal,
    body: SubmitJob,
) -> Result<JobId, ApiError> {
    let sub = submission::build(
        body.script.as_deref(),
        body.wrap.as_deref(),
        &body.options,
        body.environment,
        body.working_directory,
        &state.config.jobs.submission_limits(),
    )
    .map_err(refused)?;
    let facts = state.jobs.owners.get(state, caller).await?;
    let workdir = submission::workdir(&sub.request, sub.submit_dir.as_deref(), &facts.home);
    sub.check_paths(&caller.username, &workdir)
        .map_err(refused)?;
    Ok(state
        .scheduler
        .submit(facts.owner(caller), sub, workdir)
        .await?)
}

/// A refused submission: a 400 naming the field or directive.
fn refused(e: submission::SubmissionError) -> ApiError {
    ApiError::InvalidField {
        field: e.field(),
        message: e.to_string(),
    }
}

/// The caller as the scheduler knows job owners (groups for `AllowGroups`).
pub async fn owner_of(state: &AppState, caller: &Principal) -> Result<Owner, ApiError> {
    Ok(state.jobs.owners.get(state, caller).await?.owner(caller))
}

/// What a submission needs to know of its user: the home (the default working
/// directory) and the groups (for partitions' `AllowGroups`).
#[derive(Debug)]
pub struct OwnerFacts {
    home: PathBuf,
    groups: Vec<String>,
    loaded: Instant,
}

/// [`OwnerFacts`] by user id, kept for a minute: a burst of submissions costs the
/// database nothing but the jobs themselves. Group changes reach new submissions within
/// that minute (Slurm's controller caches groups for ten, `GroupUpdateTime`).
#[derive(Debug, Default)]
pub struct OwnerCache(Mutex<HashMap<i64, Arc<OwnerFacts>>>);

impl OwnerFacts {
    fn owner(&self, caller: &Principal) -> Owner {
        Owner {
            user: caller.username.clone(),
            groups: self.groups.clone(),
            account: caller.username.clone(),
            other_accounts: Vec::new(),
        }
    }
}

impl OwnerCache {
    const TTL: Duration = Duration::from_secs(60);
    const MAX: usize = 10_000;

    async fn get(&self, state: &AppState, caller: &Principal) -> Result<Arc<OwnerFacts>, ApiError> {
        if let Some(hit) = self
            .lock()
            .get(&caller.user_id)
            .filter(|f| f.loaded.elapsed() < Self::TTL)
        {
            return Ok(hit.clone());
        }
        let home = if state.jobs.drop_privileges {
            let identity = state
                .store
                .posix_identity(&caller.username)
                .await?
                .ok_or_else(|| {
                    ApiError::forbidden(format!(
                        "account {} has no POSIX identity (uid); ask an administrator",
                        caller.username
                    ))
                })?;
            identity.home
        } else {
            std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from)
        };
        let facts = Arc::new(OwnerFacts {
            home,
            groups: state.store.groups_of(caller.user_id).await?,
            loaded: Instant::now(),
        });
        let mut map = self.lock();
        if map.len() >= Self::MAX {
            map.retain(|_, f| f.loaded.elapsed() < Self::TTL);
        }
        map.insert(caller.user_id, facts.clone());
        Ok(facts)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<OwnerFacts>>> {
        // A panic while holding the lock leaves nothing half-written: a map insert.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// List jobs.
#[utoipa::path(get, path = "/api/v1/jobs", params(ListQuery), responses((status = 200, body = JobList)))]
pub async fn list(
    caller: Principal,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let q = query.into_inner();
    let user = if caller.is_admin {
        q.user.clone()
    } else {
        Some(caller.username.clone())
    };
    if !caller.is_admin && q.user.as_ref().is_some_and(|u| *u != caller.username) {
        return Ok(HttpResponse::Ok().json(JobList {
            jobs: Vec::new(),
            total: 0,
            page: 1,
            per_page: 0,
        }));
    }
    let per_page = q.per_page.unwrap_or(1000).clamp(1, 10_000);
    let page = q.page.unwrap_or(1).max(1);
    let (states, all) = parse_states(q.state.as_deref())?;
    let active_only = !all && states.iter().all(|s| !s.is_terminal()) && q.since.is_none();
    if active_only {
        let filter = SqueueFilter {
            user,
            partition: q.partition,
            states,
            include_finished: false,
        };
        let jobs = state.scheduler.squeue(filter).await?;
        let total = jobs.len() as u64;
        let start = ((page - 1) * per_page) as usize;
        let jobs = jobs
            .into_iter()
            .skip(start)
            .take(per_page as usize)
            .map(from_view)
            .collect();
        return Ok(HttpResponse::Ok().json(JobList {
            jobs,
            total,
            page,
            per_page,
        }));
    }
    let filter = JobFilter {
        user,
        states: states.iter().map(|s| s.name().to_string()).collect(),
        partition: q.partition,
        since: q.since.map(|s| s.saturating_mul(1000)),
        limit: per_page as i64,
        offset: ((page - 1) * per_page) as i64,
    };
    let (rows, total) = state.store.list_jobs(&filter).await?;
    Ok(HttpResponse::Ok().json(JobList {
        jobs: rows.iter().map(from_record).collect(),
        total: total as u64,
        page,
        per_page,
    }))
}

fn parse_states(s: Option<&str>) -> Result<(Vec<JobState>, bool), ApiError> {
    let Some(s) = s else {
        return Ok((Vec::new(), false));
    };
    let mut out = Vec::new();
    for word in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        if word.eq_ignore_ascii_case("all") {
            return Ok((Vec::new(), true));
        }
        let state = JobState::ALL
            .iter()
            .find(|st| {
                st.name().eq_ignore_ascii_case(word) || st.short().eq_ignore_ascii_case(word)
            })
            .ok_or_else(|| ApiError::bad_request(format!("state: unknown job state \"{word}\"")))?;
        out.push(*state);
    }
    Ok((out, false))
}

fn parse_id(raw: &str) -> Result<JobId, ApiError> {
    raw.parse::<JobId>().map_err(|_| ApiError::NotFound)
}

/// The job's row if `caller` may see it.
async fn visible_record(
    state: &AppState,
    caller: &Principal,
    job: JobId,
) -> Result<Option<JobRecord>, ApiError> {
    let task = job.task.map_or(-1, i64::from);
    match state.store.job(job.job as i64, task).await {
        Ok(r) if r.user_name == caller.username || caller.is_admin => Ok(Some(r)),
        Ok(_) | Err(StoreError::NotFound) => Ok(None),
        Err(e) => Err(e.into()),
    }
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
    Ok(HttpResponse::Ok().json(job_info(&state, &caller, job).await?))
}

/// The scheduler's live view merged with the row's details; the row alone once the
/// scheduler has forgotten the job.
pub async fn job_info(
    state: &AppState,
    caller: &Principal,
    job: JobId,
) -> Result<JobInfo, ApiError> {
    let view = match state.scheduler.job(&requester(caller), job).await {
        Ok(v) => Some(v),
        Err(SchedError::NotFound) => None,
        Err(e) => return Err(e.into()),
    };
    let record = visible_record(state, caller, job).await?;
    match (view, record) {
        (Some(v), Some(r)) => {
            let mut info = from_view(v);
            let rec = from_record(&r);
            info.workdir = rec.workdir;
            info.stdout = rec.stdout;
            info.stderr = rec.stderr;
            info.message = rec.message;
            info.benchmark = rec.benchmark;
            info.benchmark_note = rec.benchmark_note;
            if info.reason.is_none() {
                info.reason = rec.reason;
            }
            if info.cuda_visible_devices.is_none() {
                info.cuda_visible_devices = rec.cuda_visible_devices;
                info.cpus = info.cpus.or(rec.cpus);
                info.memory_mb = info.memory_mb.or(rec.memory_mb);
            }
            if info.nodelist.is_empty() {
                info.nodelist = rec.nodelist;
            }
            if info.exit_code.is_none() {
                info.exit_code = rec.exit_code;
                info.signal = rec.signal;
            }
            Ok(info)
        }
        (Some(v), None) => Ok(from_view(v)),
        (None, Some(r)) => Ok(from_record(&r)),
        (None, None) => Err(ApiError::NotFound),
    }
}

fn secs(t: i64) -> String {
    rfc3339(t.saturating_mul(1000))
}

pub fn from_view(v: JobView) -> JobInfo {
    let (exit_code, signal) = scheduler::JobOutcome::code_and_signal(v.exit);
    let alloc = v.allocation.as_ref();
    JobInfo {
        id: v.id.to_string(),
        job_id: v.id.job,
        array_task_id: v.id.task,
        display_id: v.display_id,
        name: v.name,
        user: v.user,
        account: v.account,
        partition: v.partition,
        state: v.state.name().to_string(),
        state_code: v.state.short().to_string(),
        reason: v.reason.map(|r| r.name().to_string()),
        priority: Some(v.priority),
        submit_time: secs(v.submit_time),
        start_time: v.start_time.map(secs),
        end_time: v.end_time.map(secs),
        time_limit: match v.time_limit {
            scheduler::TimeLimit::Seconds(s) => Some(s),
            scheduler::TimeLimit::Unlimited => None,
        },
        time_used: v.time_used,
        nodes: v.nodes,
        nodelist: v.nodelist,
        gres: v.gres,
        cpus: alloc.map(|a| a.nodes.iter().map(|n| u64::from(n.cpus)).sum()),
        memory_mb: alloc.map(|a| a.nodes.iter().map(|n| n.memory_mb).sum()),
        cuda_visible_devices: alloc
            .and_then(|a| a.nodes.first())
            .map(|n| n.cuda_visible_devices()),
        exit_code,
        signal,
        workdir: None,
        stdout: None,
        stderr: None,
        message: None,
        restarts: v.restarts,
        benchmark: None,
        benchmark_note: None,
    }
}

pub fn from_record(r: &JobRecord) -> JobInfo {
    let job = if r.task >= 0 {
        JobId::task(r.id as u64, r.task as u32)
    } else {
        JobId::new(r.id as u64)
    };
    let state = JobState::parse(&r.state);
    let allocation: Option<scheduler::Allocation> = r
        .allocation
        .as_deref()
        .and_then(|a| serde_json::from_str(a).ok());
    let used_ms = match (r.start_time, r.end_time) {
        (Some(s), Some(e)) => e - s,
        (Some(s), None) => crate::util::now_ms() - s,
        _ => 0,
    };
    JobInfo {
        id: job.to_string(),
        job_id: job.job,
        array_task_id: job.task,
        display_id: match (&r.array_spec, r.task) {
            (Some(spec), -1) => format!("{}_[{}]", r.id, spec),
            _ => job.to_string(),
        },
        name: r.name.clone(),
        user: r.user_name.clone(),
        account: r.account.clone(),
        partition: r.partition.clone(),
        state: r.state.clone(),
        state_code: state.map_or_else(|| r.state.clone(), |s| s.short().to_string()),
        reason: r.reason.clone(),
        priority: None,
        submit_time: rfc3339(r.submit_time),
        start_time: r.start_time.map(rfc3339),
        end_time: r.end_time.map(rfc3339),
        time_limit: r.time_limit.map(|t| t.max(0) as u64),
        time_used: (used_ms.max(0) / 1000) as u64,
        nodes: u32::from(!r.nodelist.is_empty()),
        nodelist: r.nodelist.clone(),
        gres: r.gpus.clone(),
        cpus: (r.start_time.is_some()).then_some(r.cpus.max(0) as u64),
        memory_mb: (r.start_time.is_some()).then_some(r.memory_mb.max(0) as u64),
        cuda_visible_devices: allocation
            .as_ref()
            .and_then(|a| a.nodes.first())
            .map(|n| n.cuda_visible_devices()),
        exit_code: r.exit_code,
        signal: r.exit_signal,
        workdir: Some(r.workdir.clone()),
        stdout: r.stdout_path.clone(),
        stderr: r.stderr_path.clone(),
        message: r.message.clone(),
        restarts: 0,
        benchmark: r.benchmark.clone(),
        benchmark_note: r.benchmark_note.clone(),
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Done {
    pub id: String,
    pub state: String,
}

async fn control(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: &str,
    action: &str,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Jobs)?;
    let job = parse_id(id)?;
    let info = control_audited(&state, &req, &caller, job, action).await?;
    Ok(HttpResponse::Ok().json(Done {
        id: info.id,
        state: info.state,
    }))
}

/// Cancel, hold, release or requeue `job` (`action`) for `caller`; an
/// administrator's action on another user's job is written to the audit log with the
/// job's state before and after. The one path for the API and the pages.
pub async fn control_audited(
    state: &AppState,
    req: &HttpRequest,
    caller: &Principal,
    job: JobId,
    action: &str,
) -> Result<JobInfo, ApiError> {
    let who = requester(caller);
    let before = if caller.is_admin {
        state.scheduler.job(&who, job).await.ok()
    } else {
        None
    };
    match action {
        "cancel" => state.scheduler.cancel(&who, job).await?,
        "hold" => state.scheduler.hold(&who, job).await?,
        "release" => state.scheduler.release(&who, job).await?,
        _ => state.scheduler.requeue(&who, job).await?,
    }
    let info = job_info(state, caller, job).await?;
    if let Some(before) = before.filter(|v| v.user != caller.username) {
        let detail = serde_json::json!({
            "user": before.user,
            "before": {"state": before.state.name()},
            "after": {"state": info.state},
        });
        state
            .audit(
                req,
                &caller.username,
                &format!("job.{action}"),
                &info.id,
                detail,
            )
            .await?;
    }
    Ok(info)
}

/// Cancel a job (a running one gets SIGTERM, then SIGKILL after the grace time).
#[utoipa::path(delete, path = "/api/v1/jobs/{id}", responses((status = 200, body = Done), (status = 404), (status = 409)))]
pub async fn cancel(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    control(req, caller, state, &id, "cancel").await
}

/// Hold, release or requeue a job.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/{action}", params(("action" = String, Path, description = "hold, release or requeue")),
    responses((status = 200, body = Done), (status = 404), (status = 409)))]
pub async fn act(
    req: HttpRequest,
    caller: Principal,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, action) = path.into_inner();
    if !matches!(action.as_str(), "hold" | "release" | "requeue") {
        return Err(ApiError::NotFound);
    }
    control(req, caller, state, &id, &action).await
}
