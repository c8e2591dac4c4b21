//! Batch jobs: submitting, listing, showing and controlling them, for the JSON API,
//! the pages and the command line alike.
//!
//! Owns: who sees which job (users their own, administrators all; another user's
//! job is "not found"), where a job's view comes from (the scheduler while it knows
//! the job, the database after), the submitter's defaults (home, groups), and which
//! actions are audited (an administrator's on another user's job, with the state
//! before and after).
//! Must not touch: HTTP types, SQL (the store), the scheduler's internals.

use std::collections::BTreeMap;

use scheduler::{JobId, JobState, JobView, Owner, SqueueFilter};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::job_steps::{step_info, JobSteps, StepInfo};
use super::{Audit, ServiceError};
use crate::auth::Principal;
use crate::config::Config;
use crate::identities::Identities;
use crate::sched::{submission, JobTokens, OptionJudge, Requester, SchedError, Scheduler};
use crate::store::{JobFilter, JobRecord, Store, StoreError};
use crate::util::rfc3339;
use std::sync::Arc;

/// A job submission: a script with `#SBATCH` directives, or a command to wrap,
/// plus `sbatch` options by their long names.
#[derive(Debug, Default, Deserialize, ToSchema)]
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
    /// The script's arguments (`sbatch script ARGS`: `$1`, `$2` … in the script).
    #[serde(default)]
    pub arguments: Vec<String>,
    /// An interactive job (`salloc`, `srun --pty`): the script runs on a terminal of
    /// its own, which its owner attaches to (`GET /api/v1/jobs/{id}/attach`); ending
    /// the terminal's program ends the job. Not for arrays.
    #[serde(default)]
    pub interactive: bool,
    /// With `interactive`: the terminal passes bytes as they are, no echo, no line
    /// editing, no carriage return added (`srun` outside a job without `--pty`).
    #[serde(default)]
    pub raw_terminal: bool,
}

/// A job or array task. Fields without a value are left out.
#[derive(Debug, Default, Serialize, ToSchema)]
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
    /// A pending job's planned start (the internal scheduler's backfill plan, or
    /// Slurm's `squeue --start`); null when unknown.
    pub expected_start: Option<String>,
    /// When it became eligible to start (Slurm's `EligibleTime`); absent while it
    /// waits on a hold or a dependency, a time to come for `--begin`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eligible_time: Option<String>,
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
    /// Options accepted that mean nothing here, each with why (as Slurm ignores
    /// options that mean nothing on a site).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<Object>)]
    pub ignored: Vec<scheduler::IgnoredOption>,
    /// Its steps (`srun` inside it), listed with ended jobs as `sacct` shows them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepInfo>,
    /// The tasks an array's pending record still holds (`5-9%2`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_spec: Option<String>,
    /// An array's own record (not one of its tasks'), even once none of its tasks
    /// waits in it: its page lists its tasks.
    #[serde(skip)]
    pub is_array: bool,
    /// What it asked for, where known (the scheduler's queue, or `detail=true`):
    /// `--qos`, `--dependency` (`afterok:12`), `--comment`, `--constraint`,
    /// `--nodelist`, `--exclude`, the CPUs in all, `--cpus-per-task`, `--ntasks`,
    /// the memory as given (`4G`, `2G/cpu`), `--nice`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub req_nodes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exc_nodes: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_cpus: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus_per_task: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ntasks: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_memory: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nice: Option<i64>,
    /// Its user's uid and gid, and the group's name, when they resolve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The cluster's name (`[jobs] cluster_name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// CPU time used and the largest resident memory, from the supervisor's samples
    /// (`detail=true`): `sacct`'s `TotalCPU` and `MaxRSS`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_rss_kb: Option<u64>,
}

/// A page of a queue shown on a page: `per_page` jobs from page `number` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuePage {
    pub number: usize,
    pub per_page: usize,
}

impl QueuePage {
    /// The jobs before this page.
    pub fn offset(self) -> usize {
        self.number.saturating_sub(1).saturating_mul(self.per_page)
    }

    /// How many pages `total` jobs fill (at least one).
    pub fn count(self, total: u64) -> usize {
        usize::try_from(total.div_ceil(self.per_page.max(1) as u64))
            .unwrap_or(usize::MAX)
            .max(1)
    }
}

/// What a job list page filters on, over both the queue and the ended jobs; `None`
/// matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoardFilter {
    pub state: Option<JobState>,
    /// Text the job's name or partition holds (any case), at most
    /// [`BoardFilter::MAX_SEARCH`] bytes.
    pub search: Option<String>,
    /// Submitted at or after (ms since the epoch).
    pub since: Option<i64>,
    /// Submitted before (ms since the epoch).
    pub until: Option<i64>,
    /// Only this user's jobs (an administrator's list of everyone's).
    pub user: Option<String>,
}

impl BoardFilter {
    /// Most bytes a search text may hold.
    pub const MAX_SEARCH: usize = 100;
    /// Most queue lines a filtered queue is read from (the scheduler cannot match
    /// names itself): a queue longer than this is filtered over its first lines.
    pub const MAX_SCAN: usize = 10_000;

    /// Whether nothing is filtered.
    pub fn is_empty(&self) -> bool {
        *self == BoardFilter::default()
    }

    /// Whether the scheduler's own filter (user, state) is not enough.
    fn needs_scan(&self) -> bool {
        self.search.is_some() || self.since.is_some() || self.until.is_some()
    }

    fn matches(&self, j: &JobInfo) -> bool {
        let text = self.search.as_deref().map(str::to_lowercase);
        let submitted = j
            .submit_time
            .parse::<jiff::Timestamp>()
            .map_or(0, |t| t.as_millisecond());
        text.is_none_or(|t| {
            j.name.to_lowercase().contains(&t) || j.partition.to_lowercase().contains(&t)
        }) && self.since.is_none_or(|s| submitted >= s)
            && self.until.is_none_or(|u| submitted < u)
    }
}

/// What a submission would do (`sbatch --test-only`, `?dry_run=true`): nothing is
/// stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct DryRun {
    /// Always true: nothing was submitted.
    pub dry_run: bool,
    /// The request as parsed from the script and the options.
    #[schema(value_type = Object)]
    pub request: scheduler::JobRequest,
    /// Options accepted that mean nothing here, each with why.
    #[schema(value_type = Vec<Object>)]
    pub ignored: Vec<scheduler::IgnoredOption>,
    /// When it would start (RFC 3339): now, or the backfill plan's start; absent
    /// when no start can be planned (see `reason`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_start: Option<String>,
    /// The start assumes the job first in the queue: the plan did not reach it.
    pub ahead_of_queue: bool,
    pub nodes: Vec<String>,
    pub cpus: u32,
    pub partition: String,
    /// Why it would wait, when it would not start at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who judged it: `atrium`, or `slurm` (`sbatch --test-only`).
    pub judged_by: &'static str,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<JobInfo>,
    pub total: u64,
    pub page: u64,
    pub per_page: u64,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct JobQuery {
    /// Only these users' jobs, comma-separated (administrators; others always see
    /// only their own).
    pub user: Option<String>,
    /// Only the caller's own jobs (`squeue --me`), whoever they are.
    pub me: Option<bool>,
    /// Comma-separated states or codes (`PENDING,R`); `all` lists ended jobs too.
    /// Without it: jobs not yet over, as `squeue` lists them.
    pub state: Option<String>,
    /// Comma-separated partitions.
    pub partition: Option<String>,
    /// Only these jobs, comma-separated ids (an array's id lists its tasks); at most
    /// 10,000.
    pub ids: Option<String>,
    /// Only jobs of these names, comma-separated (`sacct --name`); at most 1,000.
    pub name: Option<String>,
    /// Ended jobs submitted at or after this Unix time (seconds).
    pub since: Option<i64>,
    /// Jobs not over before this Unix time (seconds): running, or ended after it
    /// (`sacct -S`).
    pub from: Option<i64>,
    /// Jobs submitted before this Unix time (seconds) (`sacct -E`).
    pub to: Option<i64>,
    /// With what each job asked for (QOS, comment, dependency, constraint, memory …),
    /// read from its stored request: `sacct`'s columns.
    pub detail: Option<bool>,
    /// From 1.
    pub page: Option<u64>,
    /// Default 1000, at most 10000.
    pub per_page: Option<u64>,
}

/// The longest reason an administrator may give for acting on a job.
pub const MAX_REASON_CHARS: usize = 500;

/// Most job ids one query may name.
pub const MAX_QUERY_IDS: usize = 10_000;
/// Most names, users or partitions one query may list, and the longest of each.
pub const MAX_QUERY_NAMES: usize = 1_000;
const MAX_QUERY_NAME_BYTES: usize = 256;

/// A comma-separated list of a query, bounded as it is read: at most `max` items of
/// at most [`MAX_QUERY_NAME_BYTES`] each; blanks trimmed, empty items dropped.
pub(super) fn query_list(
    field: &'static str,
    text: Option<&str>,
    max: usize,
) -> Result<Vec<String>, ServiceError> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let mut items = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if items.len() == max {
            return Err(ServiceError::Invalid {
                field,
                message: format!("{field} lists more than {max} items"),
            });
        }
        if item.len() > MAX_QUERY_NAME_BYTES {
            return Err(ServiceError::Invalid {
                field,
                message: format!(
                    "{field}: \"{}…\" is longer than {MAX_QUERY_NAME_BYTES} bytes",
                    &item[..item.floor_char_boundary(32)]
                ),
            });
        }
        items.push(item.to_string());
    }
    Ok(items)
}

/// A comma-separated list of job numbers, bounded as [`query_list`].
pub(super) fn query_ids(
    field: &'static str,
    text: Option<&str>,
    max: usize,
) -> Result<Vec<u64>, ServiceError> {
    query_list(field, text, max)?
        .iter()
        .map(|i| {
            i.parse::<u64>().map_err(|_| ServiceError::Invalid {
                field,
                message: format!("{field}: \"{i}\" is not a job id"),
            })
        })
        .collect()
}

/// What may be done to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobAction {
    /// A running job gets SIGTERM, then SIGKILL after the grace time.
    Cancel,
    Hold,
    Release,
    Requeue,
    /// First among its owner's pending jobs (`scontrol top`).
    Top,
    /// Only what waits: an array's pending tasks (`scancel --state=PENDING`); its
    /// running tasks go on.
    CancelWaiting,
}

impl JobAction {
    /// An action by its name (`cancel`, `hold`, `release`, `requeue`).
    pub fn parse(name: &str) -> Option<JobAction> {
        Some(match name {
            "cancel" => JobAction::Cancel,
            "hold" => JobAction::Hold,
            "release" => JobAction::Release,
            "requeue" => JobAction::Requeue,
            "top" => JobAction::Top,
            "cancel-waiting" => JobAction::CancelWaiting,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            JobAction::Cancel => "cancel",
            JobAction::Hold => "hold",
            JobAction::Release => "release",
            JobAction::Requeue => "requeue",
            JobAction::Top => "top",
            JobAction::CancelWaiting => "cancel-waiting",
        }
    }
}

/// The caller as the scheduler knows requesters.
pub fn requester(caller: &Principal) -> Requester {
    Requester {
        user: caller.username.clone(),
        admin: caller.acts_as_admin(),
    }
}

/// The jobs service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Jobs {
    config: Arc<Config>,
    store: Store,
    scheduler: Scheduler,
    identities: Identities,
    audit: Audit,
    steps: JobSteps,
    /// The steps' directories (`jobs.spool_dir`, as startup resolved it): where an
    /// interactive job's terminal is reached.
    spool_dir: std::path::PathBuf,
}

/// What a listing of jobs not yet over asks for: empty lists ask for nothing.
#[derive(Clone, Copy)]
struct Wanted<'a> {
    users: &'a [String],
    partitions: &'a [String],
    states: &'a [JobState],
    ids: &'a [u64],
    names: &'a [String],
}

impl Jobs {
    pub fn new(
        config: Arc<Config>,
        store: Store,
        scheduler: Scheduler,
        identities: Identities,
        audit: Audit,
        tokens: JobTokens,
        spool_dir: std::path::PathBuf,
    ) -> Jobs {
        Jobs {
            config,
            spool_dir,
            store: store.clone(),
            scheduler,
            identities,
            audit,
            steps: JobSteps::new(store, tokens),
        }
    }

    pub(super) fn store(&self) -> &Store {
        &self.store
    }

    pub(super) fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// The cluster's name (`SLURM_CLUSTER_NAME`).
    pub(super) fn cluster_name(&self) -> &str {
        &self.config.jobs.cluster_name
    }

    /// The steps of jobs: what a running job's `srun` records with its token.
    pub fn steps(&self) -> &JobSteps {
        &self.steps
    }

    /// Requeue a running job at its own request (`scontrol requeue $SLURM_JOB_ID`
    /// in its script), with its job token: as its owner would, nothing more.
    pub async fn requeue_itself(&self, job: JobId, token: &str) -> Result<(), ServiceError> {
        let owner = self.steps.job_of_token(job, token).await?;
        let who = Requester {
            user: owner,
            admin: false,
        };
        Ok(self.scheduler.requeue(&who, job).await?)
    }

    /// Give each job of `jobs` its steps (one query for the page).
    async fn attach_steps(&self, jobs: &mut [JobInfo]) -> Result<(), ServiceError> {
        let key = |j: &JobInfo| (j.job_id as i64, j.array_task_id.map_or(-1, i64::from));
        let keys: Vec<(i64, i64)> = jobs.iter().map(key).collect();
        let steps = self.steps.of_jobs(&keys).await?;
        if steps.is_empty() {
            return Ok(());
        }
        for job in jobs.iter_mut() {
            let k = key(job);
            job.steps = steps
                .iter()
                .filter(|s| (s.job_id, s.task) == k)
                .map(|s| step_info(&job.id, &job.state, s))
                .collect();
        }
        Ok(())
    }

    /// Submit `body` as `caller`.
    pub async fn submit(&self, caller: &Principal, body: SubmitJob) -> Result<JobId, ServiceError> {
        let (owner, sub, workdir) = self.prepare(caller, body).await?;
        Ok(self.scheduler.submit(owner, sub, workdir).await?)
    }

    /// Submit again, as a new job, what `caller`'s job `job` was submitted with: its
    /// script, its options (the request as stored), environment, directory,
    /// container and benchmark. Its owner's alone: another user's job is "not
    /// found", an administrator's included (it would run as its owner). An array's
    /// task resubmits the whole array.
    pub async fn resubmit(&self, caller: &Principal, job: JobId) -> Result<JobId, ServiceError> {
        let r = self
            .visible_record(caller, JobId::new(job.job))
            .await?
            .filter(|r| r.user_name == caller.username)
            .ok_or(ServiceError::NotFound)?;
        let request: scheduler::JobRequest = serde_json::from_str(&r.request).map_err(|_| {
            ServiceError::Conflict(
                "this job's options cannot be read again; submit its script from the form".into(),
            )
        })?;
        let environment: BTreeMap<String, String> =
            serde_json::from_str(&r.environment).unwrap_or_default();
        let submit_dir = (!r.submit_dir.is_empty()).then(|| r.submit_dir.clone());
        let mut sub = submission::Submission::from_request(
            r.script.clone(),
            request,
            environment,
            submit_dir,
            &self.config.jobs.submission_limits(),
        )
        .map_err(refused)?;
        sub.container = r
            .container
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok());
        sub.benchmark = r.benchmark.clone();
        let facts = self
            .identities
            .owner_facts(caller.user_id, &caller.username)
            .await?;
        let workdir = submission::workdir(&sub.request, sub.submit_dir.as_deref(), &facts.home);
        sub.check_paths(&caller.username, &workdir)
            .map_err(refused)?;
        Ok(self
            .scheduler
            .submit(facts.owner(&caller.username), sub, workdir)
            .await?)
    }

    /// The script of a job `caller` may see and the directory it was submitted
    /// from: what "edit as new" fills the submission form with.
    pub async fn script_of(
        &self,
        caller: &Principal,
        job: JobId,
    ) -> Result<(String, String), ServiceError> {
        let r = self
            .visible_record(caller, JobId::new(job.job))
            .await?
            .ok_or(ServiceError::NotFound)?;
        Ok((r.script, r.submit_dir))
    }

    /// What `body` would do if submitted now (`sbatch --test-only`): parsed, checked
    /// against partitions, limits and quotas, with the expected start from the
    /// backfill plan; nothing is stored.
    pub async fn dry_run(
        &self,
        caller: &Principal,
        body: SubmitJob,
    ) -> Result<DryRun, ServiceError> {
        let (owner, sub, workdir) = self.prepare(caller, body).await?;
        let request = sub.request.clone();
        let answer = self.scheduler.test_only(owner, sub, workdir).await?;
        Ok(DryRun {
            dry_run: true,
            ignored: request.ignored.clone(),
            request,
            expected_start: answer.start.map(secs),
            ahead_of_queue: answer.start.is_some() && !answer.in_plan,
            nodes: answer.nodes,
            cpus: answer.cpus,
            partition: answer.partition,
            reason: answer.reason.map(|r| r.name().to_string()),
            judged_by: match self.scheduler.option_judge() {
                OptionJudge::Atrium => "atrium",
                OptionJudge::Slurm => "slurm",
            },
        })
    }

    /// A submission built and bounded for `caller`, with its owner and working
    /// directory.
    async fn prepare(
        &self,
        caller: &Principal,
        body: SubmitJob,
    ) -> Result<(Owner, submission::Submission, std::path::PathBuf), ServiceError> {
        let mut sub = submission::build_for(
            self.scheduler.option_judge(),
            body.script.as_deref(),
            body.wrap.as_deref(),
            &body.options,
            body.environment,
            body.working_directory,
            &self.config.jobs.submission_limits(),
        )
        .map_err(refused)?;
        submission::set_arguments(&mut sub, body.arguments).map_err(refused)?;
        if body.interactive {
            if sub.request.array.is_some() {
                return Err(ServiceError::Invalid {
                    field: "interactive",
                    message: "interactive: an array's tasks cannot share one terminal".into(),
                });
            }
            sub.request.pty = true;
            sub.request.pty_raw = body.raw_terminal;
        } else if body.raw_terminal {
            return Err(ServiceError::Invalid {
                field: "raw_terminal",
                message: "raw_terminal: only an interactive job has a terminal".into(),
            });
        }
        let facts = self
            .identities
            .owner_facts(caller.user_id, &caller.username)
            .await?;
        let workdir = submission::workdir(&sub.request, sub.submit_dir.as_deref(), &facts.home);
        sub.check_paths(&caller.username, &workdir)
            .map_err(refused)?;
        Ok((facts.owner(&caller.username), sub, workdir))
    }

    pub(super) fn identities(&self) -> &Identities {
        &self.identities
    }

    /// The caller as the scheduler knows job owners (groups for `AllowGroups`).
    pub async fn owner_of(&self, caller: &Principal) -> Result<Owner, ServiceError> {
        Ok(self
            .identities
            .owner_facts(caller.user_id, &caller.username)
            .await?
            .owner(&caller.username))
    }

    /// The jobs `caller` may see that match `q`: those not yet over from the
    /// scheduler, as `squeue` lists them; with ended states, `all`, `since` or a
    /// window (`from`, `to`), the rows.
    pub async fn list(&self, caller: &Principal, q: JobQuery) -> Result<JobList, ServiceError> {
        let mut users = query_list("user", q.user.as_deref(), MAX_QUERY_NAMES)?;
        if q.me == Some(true) {
            users = vec![caller.username.clone()];
        }
        if !caller.acts_as_admin() {
            if users.iter().any(|u| *u != caller.username) {
                return Ok(JobList {
                    jobs: Vec::new(),
                    total: 0,
                    page: 1,
                    per_page: 0,
                });
            }
            users = vec![caller.username.clone()];
        }
        let partitions = query_list("partition", q.partition.as_deref(), MAX_QUERY_NAMES)?;
        let names = query_list("name", q.name.as_deref(), MAX_QUERY_NAMES)?;
        let ids = query_ids("ids", q.ids.as_deref(), MAX_QUERY_IDS)?;
        let per_page = q.per_page.unwrap_or(1000).clamp(1, 10_000);
        let page = q.page.unwrap_or(1).max(1);
        let (states, all) = parse_states(q.state.as_deref())?;
        let window = q.since.is_some() || q.from.is_some() || q.to.is_some();
        let active_only = !all && states.iter().all(|s| !s.is_terminal()) && !window;
        let mut jobs = if active_only {
            let wanted = Wanted {
                users: &users,
                partitions: &partitions,
                states: &states,
                ids: &ids,
                names: &names,
            };
            let (mut jobs, total) = self.active(&wanted, page, per_page).await?;
            if q.detail == Some(true) {
                self.attach_workdirs(&mut jobs).await?;
            }
            JobList {
                total,
                jobs,
                page,
                per_page,
            }
        } else {
            let filter = JobFilter {
                user: (users.len() == 1).then(|| users[0].clone()),
                users: if users.len() > 1 {
                    users.clone()
                } else {
                    Vec::new()
                },
                states: states.iter().map(|s| s.name().to_string()).collect(),
                partitions,
                ids: ids.iter().map(|&i| i as i64).collect(),
                names,
                since: q.since.map(|s| s.saturating_mul(1000)),
                active_since: q.from.map(|s| s.saturating_mul(1000)),
                until: q.to.map(|s| s.saturating_mul(1000)),
                limit: per_page as i64,
                offset: ((page - 1) * per_page) as i64,
                array_rows: true,
                ..JobFilter::default()
            };
            let (rows, total) = self.store.list_jobs(&filter).await?;
            let detail = q.detail == Some(true);
            let mut jobs: Vec<JobInfo> = rows
                .iter()
                .map(|r| {
                    let mut info = from_record(r);
                    if detail {
                        if let Ok(asked) = serde_json::from_str::<scheduler::JobRequest>(&r.request)
                        {
                            with_request(&mut info, &asked);
                        }
                    }
                    info
                })
                .collect();
            let dropped = self.pending_from_scheduler(caller, &mut jobs).await?;
            self.attach_steps(&mut jobs).await?;
            if detail {
                self.attach_usage(&mut jobs).await?;
            }
            JobList {
                jobs,
                total: (total as u64).saturating_sub(dropped),
                page,
                per_page,
            }
        };
        self.with_identities(&mut jobs.jobs).await?;
        Ok(jobs)
    }

    /// Jobs not yet over from the scheduler (one user through its own filter, several
    /// or none by scanning), those of `ids` by asking for each.
    async fn active(
        &self,
        wanted: &Wanted<'_>,
        page: u64,
        per_page: u64,
    ) -> Result<(Vec<JobInfo>, u64), ServiceError> {
        let Wanted {
            users,
            partitions,
            states,
            ids,
            names,
        } = *wanted;
        let ids: std::collections::HashSet<u64> = ids.iter().copied().collect();
        // Filtered before the page is cut and before a view becomes a `JobInfo`.
        let keep = |v: &JobView| {
            (users.is_empty() || users.contains(&v.user))
                && (partitions.is_empty() || partitions.contains(&v.partition))
                && (states.is_empty() || states.contains(&v.state))
                && (ids.is_empty() || ids.contains(&v.id.job))
                && (names.is_empty() || names.contains(&v.name))
        };
        let scan = users.len() > 1 || partitions.len() > 1 || !ids.is_empty() || !names.is_empty();
        let filter = SqueueFilter {
            user: (users.len() == 1).then(|| users[0].clone()),
            partition: (partitions.len() == 1).then(|| partitions[0].clone()),
            states: states.to_vec(),
            include_finished: false,
        };
        if scan {
            let (views, _) = self.scheduler.squeue_page(filter, 0, usize::MAX).await?;
            let matching: Vec<JobView> = views.into_iter().filter(|v| keep(v)).collect();
            let total = matching.len() as u64;
            let start = ((page - 1) * per_page) as usize;
            return Ok((
                matching
                    .into_iter()
                    .skip(start)
                    .take(per_page as usize)
                    .map(from_view)
                    .collect(),
                total,
            ));
        }
        let start = usize::try_from((page - 1).saturating_mul(per_page)).unwrap_or(usize::MAX);
        let (views, total) = self
            .scheduler
            .squeue_page(filter, start, per_page as usize)
            .await?;
        Ok((views.into_iter().map(from_view).collect(), total))
    }

    /// What the rows do not hold of jobs not started, from the scheduler: a pending
    /// job's reason and when it became eligible; of an array, what is still pending (an
    /// array's row names the tasks it was submitted with), and of an ended array what
    /// never started (what has no row of its own). Such an array row becomes that
    /// remainder (`7_[4-9]`), or goes when every task has started. Returns how many went.
    async fn pending_from_scheduler(
        &self,
        caller: &Principal,
        jobs: &mut Vec<JobInfo>,
    ) -> Result<u64, ServiceError> {
        let before = jobs.len();
        // The scheduler's view of every pending job, asked for at once: the actor
        // answers them in one batch rather than one wake-up each.
        let who = requester(caller);
        let asked: std::collections::BTreeSet<u64> = jobs
            .iter()
            .filter(|j| j.state == "PENDING" && j.end_time.is_none())
            .map(|j| j.job_id)
            .collect();
        let views = futures_util::future::join_all(
            asked
                .iter()
                .map(|&id| self.scheduler.job(&who, JobId::new(id))),
        )
        .await;
        let mut views: std::collections::HashMap<u64, Result<JobView, SchedError>> =
            asked.into_iter().zip(views).collect();
        // What the ended arrays started, in one query.
        let ended_arrays: Vec<i64> = jobs
            .iter()
            .filter(|j| j.array_task_id.is_none() && j.array_spec.is_some())
            .filter(|j| j.end_time.is_some())
            .map(|j| j.job_id as i64)
            .collect();
        let mut started_tasks = self.store.array_tasks(&ended_arrays).await?;
        let mut kept = Vec::with_capacity(before);
        for mut job in std::mem::take(jobs) {
            let spec = job
                .array_spec
                .clone()
                .filter(|_| job.array_task_id.is_none());
            if let (Some(spec), Some(_)) = (&spec, &job.end_time) {
                let Ok(spec) = spec.parse::<scheduler::ArraySpec>() else {
                    continue;
                };
                let started = started_tasks
                    .remove(&(job.job_id as i64))
                    .unwrap_or_default();
                let started = started.into_iter().filter_map(|t| u32::try_from(t).ok());
                let Some(rest) = spec.without(started) else {
                    continue;
                };
                job.display_id = format!("{}_[{rest}]", job.job_id);
                job.array_spec = Some(rest.to_string());
            } else if job.state == "PENDING" {
                // An array's requeued tasks share its number, and its view.
                match views.get(&job.job_id) {
                    Some(Ok(view)) => {
                        let now = from_view(view.clone());
                        if spec.is_some() {
                            let Some(rest) = now.array_spec.filter(|s| !s.is_empty()) else {
                                continue;
                            };
                            job.display_id = now.display_id;
                            job.array_spec = Some(rest);
                        }
                        job.reason = now.reason.or(job.reason);
                        job.eligible_time = now.eligible_time;
                    }
                    Some(Err(SchedError::NotFound)) | None => {}
                    Some(Err(_)) => {
                        if let Some(Err(e)) = views.remove(&job.job_id) {
                            return Err(e.into());
                        }
                    }
                }
            }
            kept.push(job);
        }
        *jobs = kept;
        Ok((before - jobs.len()) as u64)
    }

    /// Each job's working directory (the scheduler's views do not hold it).
    async fn attach_workdirs(&self, jobs: &mut [JobInfo]) -> Result<(), ServiceError> {
        let mut ids: Vec<i64> = jobs.iter().map(|j| j.job_id as i64).collect();
        ids.sort_unstable();
        ids.dedup();
        let dirs: std::collections::HashMap<i64, String> =
            self.store.workdirs(&ids).await?.into_iter().collect();
        for job in jobs.iter_mut() {
            if let Some(dir) = dirs.get(&(job.job_id as i64)) {
                job.workdir = Some(dir.clone());
            }
        }
        Ok(())
    }

    /// Each job's CPU time and largest memory, where it was sampled.
    async fn attach_usage(&self, jobs: &mut [JobInfo]) -> Result<(), ServiceError> {
        let key = |j: &JobInfo| (j.job_id as i64, j.array_task_id.map_or(-1, i64::from));
        let keys: Vec<(i64, i64)> = jobs.iter().map(key).collect();
        let usage = self.store.usage_of_jobs(&keys).await?;
        let by_job: std::collections::HashMap<(i64, i64), (f64, i64)> = usage
            .into_iter()
            .map(|(j, t, cpu, rss)| ((j, t), (cpu, rss)))
            .collect();
        for job in jobs.iter_mut() {
            if let Some((cpu, rss)) = by_job.get(&key(job)) {
                job.cpu_seconds = Some(*cpu);
                job.max_rss_kb = Some((*rss).max(0) as u64 / 1024);
            }
        }
        Ok(())
    }

    /// Each job's uid, gid and group, and the cluster's name: once per user listed.
    async fn with_identities(&self, jobs: &mut [JobInfo]) -> Result<(), ServiceError> {
        // Looked up once per user listed: the identity, and its group's name (the
        // system's group database may be remote).
        type Known = Option<(u32, u32, Option<String>)>;
        let mut known: std::collections::HashMap<String, Known> = std::collections::HashMap::new();
        for job in jobs.iter_mut() {
            if !known.contains_key(&job.user) {
                let ids = match self.identities.posix(&job.user).await? {
                    Some(p) => {
                        let gid = p.gid;
                        let group = tokio::task::spawn_blocking(move || {
                            nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid))
                                .ok()
                                .flatten()
                                .map(|g| g.name)
                        })
                        .await
                        .ok()
                        .flatten();
                        Some((p.uid, p.gid, group))
                    }
                    None => None,
                };
                known.insert(job.user.clone(), ids);
            }
            if let Some(Some((uid, gid, group))) = known.get(&job.user) {
                job.uid = Some(*uid);
                job.gid = Some(*gid);
                job.group.clone_from(group);
            }
            job.cluster = Some(self.config.jobs.cluster_name.clone());
        }
        Ok(())
    }

    /// The jobs not yet over, as `squeue` lists them, and the latest `recent` that
    /// are over: the caller's own, or everyone's for an administrator who asks
    /// (`all`).
    pub async fn board(
        &self,
        caller: &Principal,
        all: bool,
        recent: i64,
        queue_page: QueuePage,
    ) -> Result<(Vec<JobInfo>, u64, Vec<JobInfo>), ServiceError> {
        let user = (!(all && caller.acts_as_admin())).then(|| caller.username.clone());
        let (queue, total) = self
            .scheduler
            .squeue_page(
                SqueueFilter {
                    user: user.clone(),
                    ..SqueueFilter::default()
                },
                queue_page.offset(),
                queue_page.per_page,
            )
            .await?;
        let queue = queue.into_iter().map(from_view).collect();
        let rows = self.store.recently_ended(user.as_deref(), recent).await?;
        Ok((queue, total, rows.iter().map(from_record).collect()))
    }

    /// [`Jobs::board`] with `filter` applied to both lists: the queue (jobs not yet
    /// over) and the `recent` latest ended jobs that match (newest submitted first).
    pub async fn board_filtered(
        &self,
        caller: &Principal,
        all: bool,
        filter: &BoardFilter,
        recent: i64,
        queue_page: QueuePage,
    ) -> Result<(Vec<JobInfo>, u64, Vec<JobInfo>), ServiceError> {
        if filter.is_empty() {
            return self.board(caller, all, recent, queue_page).await;
        }
        let user = if all && caller.acts_as_admin() {
            filter.user.clone()
        } else {
            Some(caller.username.clone())
        };
        let ended_only = filter.state.is_some_and(|s| s.is_terminal());
        let (queue, total) = if ended_only {
            (Vec::new(), 0)
        } else {
            let squeue = SqueueFilter {
                user: user.clone(),
                states: filter.state.into_iter().collect(),
                ..SqueueFilter::default()
            };
            if filter.needs_scan() {
                let (lines, _) = self
                    .scheduler
                    .squeue_page(squeue, 0, BoardFilter::MAX_SCAN)
                    .await?;
                let matching: Vec<JobInfo> = lines
                    .into_iter()
                    .map(from_view)
                    .filter(|j| filter.matches(j))
                    .collect();
                let total = matching.len() as u64;
                let page = matching
                    .into_iter()
                    .skip(queue_page.offset())
                    .take(queue_page.per_page)
                    .collect();
                (page, total)
            } else {
                let (lines, total) = self
                    .scheduler
                    .squeue_page(squeue, queue_page.offset(), queue_page.per_page)
                    .await?;
                (lines.into_iter().map(from_view).collect(), total)
            }
        };
        let recent_rows = if filter.state.is_some_and(|s| !s.is_terminal()) {
            Vec::new()
        } else {
            let states = match filter.state {
                Some(s) => vec![s.name().to_string()],
                None => JobState::ALL
                    .iter()
                    .filter(|s| s.is_terminal())
                    .map(|s| s.name().to_string())
                    .collect(),
            };
            let (rows, _) = self
                .store
                .list_jobs(&JobFilter {
                    user,
                    states,
                    since: filter.since,
                    until: filter.until,
                    search: filter.search.clone(),
                    limit: recent,
                    ..JobFilter::default()
                })
                .await?;
            rows
        };
        Ok((queue, total, recent_rows.iter().map(from_record).collect()))
    }

    /// The job's row if `caller` may see it.
    async fn visible_record(
        &self,
        caller: &Principal,
        job: JobId,
    ) -> Result<Option<JobRecord>, ServiceError> {
        let task = job.task.map_or(-1, i64::from);
        match self.store.job(job.job as i64, task).await {
            Ok(r) if caller.may_see(&r.user_name) => Ok(Some(r)),
            Ok(_) | Err(StoreError::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The scheduler's live view merged with the row's details; the row alone once the
    /// scheduler has forgotten the job.
    pub async fn show(&self, caller: &Principal, job: JobId) -> Result<JobInfo, ServiceError> {
        let mut info = self.show_job(caller, job).await?;
        self.attach_steps(std::slice::from_mut(&mut info)).await?;
        Ok(info)
    }

    /// [`Jobs::show`] with the owner's uid, gid and group and the cluster's name
    /// (`GET /api/v1/jobs/{id}`, which `scontrol show job` prints): the lookups the
    /// pages, the output stream and the actions do without.
    pub async fn show_detail(
        &self,
        caller: &Principal,
        job: JobId,
    ) -> Result<JobInfo, ServiceError> {
        let mut info = self.show(caller, job).await?;
        self.with_identities(std::slice::from_mut(&mut info))
            .await?;
        Ok(info)
    }

    async fn show_job(&self, caller: &Principal, job: JobId) -> Result<JobInfo, ServiceError> {
        let view = match self.scheduler.job(&requester(caller), job).await {
            Ok(v) => Some(v),
            Err(SchedError::NotFound) => None,
            Err(e) => return Err(e.into()),
        };
        let record = self.visible_record(caller, job).await?;
        match (view, record) {
            (Some(v), Some(r)) => {
                let asked = v.request.clone();
                let mut info = from_view(v);
                let rec = from_record(&r);
                info.workdir = rec.workdir;
                info.stdout = rec.stdout;
                info.stderr = rec.stderr;
                if let Some(asked) = asked {
                    expected_output(&mut info, &asked);
                }
                info.message = rec.message;
                info.benchmark = rec.benchmark;
                info.benchmark_note = rec.benchmark_note;
                info.ignored = ignored_options(&r);
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
            (None, Some(r)) => {
                let mut info = JobInfo {
                    ignored: ignored_options(&r),
                    ..from_record(&r)
                };
                if let Ok(asked) = serde_json::from_str::<scheduler::JobRequest>(&r.request) {
                    with_request(&mut info, &asked);
                }
                Ok(info)
            }
            (None, None) => Err(ServiceError::NotFound),
        }
    }

    /// Cancel, hold, release or requeue `job` for `caller` (calling from
    /// `client_addr`); an administrator's action on another user's job is written to
    /// the audit log with the job's state before and after.
    pub async fn control(
        &self,
        caller: &Principal,
        client_addr: &str,
        job: JobId,
        action: JobAction,
    ) -> Result<JobInfo, ServiceError> {
        self.control_because(caller, client_addr, job, action, "")
            .await
    }

    /// [`Jobs::control`] with why: an administrator's `reason` for acting on another
    /// user's job is kept in the audit log, and its owner reads it on the job's page
    /// ([`Jobs::cancelled_by`]). At most [`MAX_REASON_CHARS`] characters.
    pub async fn control_because(
        &self,
        caller: &Principal,
        client_addr: &str,
        job: JobId,
        action: JobAction,
        reason: &str,
    ) -> Result<JobInfo, ServiceError> {
        let reason = reason.trim();
        if reason.chars().count() > MAX_REASON_CHARS {
            return Err(ServiceError::Invalid {
                field: "reason",
                message: format!("a reason is at most {MAX_REASON_CHARS} characters"),
            });
        }
        if reason.chars().any(char::is_control) {
            return Err(ServiceError::Invalid {
                field: "reason",
                message: "a reason is one line of text".into(),
            });
        }
        let who = requester(caller);
        let before = if caller.acts_as_admin() {
            self.scheduler.job(&who, job).await.ok()
        } else {
            None
        };
        match action {
            JobAction::Cancel => self.scheduler.cancel(&who, job).await?,
            JobAction::Hold => self.scheduler.hold(&who, job).await?,
            JobAction::Release => self.scheduler.release(&who, job).await?,
            JobAction::Requeue => self.scheduler.requeue(&who, job).await?,
            JobAction::Top => self.scheduler.top(&who, job).await?,
            JobAction::CancelWaiting => self.scheduler.cancel_waiting(&who, job).await?,
        }
        let info = self.show(caller, job).await?;
        if let Some(before) = before.filter(|v| v.user != caller.username) {
            let mut detail = serde_json::json!({
                "user": before.user,
                "before": {"state": before.state.name()},
                "after": {"state": info.state},
            });
            if !reason.is_empty() {
                detail["reason"] = reason.into();
            }
            self.audit
                .record(
                    &caller.username,
                    client_addr,
                    &format!("job.{}", action.name()),
                    &info.id,
                    detail,
                )
                .await?;
        }
        Ok(info)
    }

    /// Who cancelled `job` for its owner, when it was an administrator: their name,
    /// when (RFC 3339) and the reason they gave (possibly empty), from the audit log.
    pub async fn cancelled_by(
        &self,
        info: &JobInfo,
    ) -> Result<Option<(String, String, String)>, ServiceError> {
        if info.state != "CANCELLED" {
            return Ok(None);
        }
        let filter = crate::store::AuditFilter {
            target: Some(info.id.clone()),
            ..Default::default()
        };
        let entries = self.audit.matching(&filter, 20).await?;
        Ok(entries
            .into_iter()
            .find(|e| e.action == "job.cancel" || e.action == "job.cancel-waiting")
            .map(|e| {
                let reason = e.detail["reason"].as_str().unwrap_or_default().to_string();
                (e.actor, e.at, reason)
            }))
    }

    /// Change `caller`'s pending job (an administrator's: anyone's, audited), as
    /// `scontrol update` does.
    pub async fn update(
        &self,
        caller: &Principal,
        client_addr: &str,
        job: JobId,
        body: &UpdateJob,
    ) -> Result<JobInfo, ServiceError> {
        let changes = body.checked()?;
        let nice = body.nice()?;
        if nice.is_some() && !caller.acts_as_admin() {
            return Err(ServiceError::Forbidden(
                "nice: only an administrator may change a job's nice".into(),
            ));
        }
        let who = requester(caller);
        // The scheduler's view is enough for the audit's "before" (a pending job).
        let before = from_view(self.scheduler.job(&who, job).await?);
        if let Some(changes) = changes {
            self.scheduler.update(&who, job, changes).await?;
        }
        if let Some(nice) = nice {
            self.scheduler.nice(&who, job, nice).await?;
        }
        let info = self.show(caller, job).await?;
        if before.user != caller.username {
            self.audit
                .record(
                    &caller.username,
                    client_addr,
                    "job.update",
                    &info.id,
                    serde_json::json!({"user": before.user,
                        "before": {"time_limit": before.time_limit, "partition": before.partition, "name": before.name, "nice": before.nice, "priority": before.priority},
                        "after": {"time_limit": info.time_limit, "partition": info.partition, "name": info.name, "nice": info.nice, "priority": info.priority}}),
                )
                .await?;
        }
        Ok(info)
    }

    /// Attach to `caller`'s own running interactive job's terminal
    /// (`launch::terminal`); nobody else's, an administrator's neither (the terminal is
    /// the user's session). The job takes one attachment.
    pub async fn attach(
        &self,
        caller: &Principal,
        job: JobId,
    ) -> Result<crate::launch::terminal::Attachment, ServiceError> {
        let info = self.show_job(caller, job).await?;
        if info.user != caller.username {
            return Err(ServiceError::NotFound);
        }
        if info.state != "RUNNING" {
            return Err(ServiceError::Conflict(format!(
                "job {job} is {}: its terminal opens once it runs",
                info.state
            )));
        }
        let socket = self
            .spool_dir
            .join(job.to_string())
            .join(crate::launch::terminal::SOCKET);
        // No socket (not interactive, or attached once already) or a closed one.
        crate::launch::terminal::Attachment::connect(&socket)
            .await
            .map_err(|_| {
                ServiceError::Conflict(format!(
                    "job {job} has no terminal to attach to: it is not interactive, or its \
                     terminal was taken or has closed"
                ))
            })
    }

    /// Send a signal to `caller`'s running job (an administrator's: anyone's, audited)
    /// without ending it, as `scancel --signal` does.
    pub async fn signal(
        &self,
        caller: &Principal,
        client_addr: &str,
        job: JobId,
        body: &SignalJob,
    ) -> Result<i32, ServiceError> {
        let (signal, whom) = body.checked()?;
        let who = requester(caller);
        let owner = if caller.acts_as_admin() {
            self.scheduler.job(&who, job).await.ok().map(|v| v.user)
        } else {
            None
        };
        self.scheduler.signal(&who, job, signal, whom).await?;
        if let Some(owner) = owner.filter(|u| *u != caller.username) {
            self.audit
                .record(
                    &caller.username,
                    client_addr,
                    "job.signal",
                    &job.to_string(),
                    serde_json::json!({"user": owner, "signal": signal, "whom": body.whom.as_deref().unwrap_or("steps")}),
                )
                .await?;
        }
        Ok(signal)
    }
}

/// `PATCH /jobs/{id}`'s body: what `scontrol update` changes of a pending job, each
/// in sbatch's spelling (`time_limit`: `2:00:00`, `90`; `dependency`: `afterok:12`,
/// empty for none; `nodes`: `2` or `1-2`).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateJob {
    pub time_limit: Option<String>,
    pub partition: Option<String>,
    pub dependency: Option<String>,
    pub nodes: Option<String>,
    pub name: Option<String>,
    pub comment: Option<String>,
    /// The job's nice, replacing its own (`scontrol update Nice=`): administrators
    /// only; negative raises its priority. -2147483645 to 2147483645, as Slurm's.
    pub nice: Option<i64>,
}

/// The widest nice Slurm takes, either way.
pub const MAX_NICE: i64 = 2_147_483_645;

impl UpdateJob {
    /// The nice asked for, or the field refused.
    pub fn nice(&self) -> Result<Option<i32>, ServiceError> {
        self.nice
            .map(|n| {
                i32::try_from(n)
                    .ok()
                    .filter(|n| i64::from(*n).abs() <= MAX_NICE)
                    .ok_or_else(|| ServiceError::Invalid {
                        field: "nice",
                        message: format!("nice: {n} is not between -{MAX_NICE} and {MAX_NICE}"),
                    })
            })
            .transpose()
    }

    /// The changes, each read as sbatch reads its option, or the field refused; none
    /// at all (the nice aside) is `None`.
    pub fn checked(&self) -> Result<Option<crate::sched::JobUpdate>, ServiceError> {
        let text = |field: &'static str,
                    v: &Option<String>,
                    max: usize|
         -> Result<Option<String>, ServiceError> {
            match v {
                Some(v) if v.len() > max || v.chars().any(char::is_control) => {
                    Err(ServiceError::Invalid {
                        field,
                        message: format!(
                            "{field} must be at most {max} bytes without control characters"
                        ),
                    })
                }
                other => Ok(other.clone()),
            }
        };
        let args = |option: &str, value: &str, field: &'static str| {
            scheduler::parse_args(&[format!("--{option}={value}")]).map_err(|e| {
                ServiceError::Invalid {
                    field,
                    message: format!("{field}: {e}"),
                }
            })
        };
        let mut out = crate::sched::JobUpdate::default();
        if let Some(t) = text("time_limit", &self.time_limit, 64)? {
            out.time_limit = args("time", &t, "time_limit")?.time_limit;
        }
        if let Some(p) = text("partition", &self.partition, 256)? {
            out.partition = Some(args("partition", &p, "partition")?.partition.unwrap_or(p));
        }
        if let Some(d) = text("dependency", &self.dependency, 8192)? {
            out.dependency = Some(if d.trim().is_empty() {
                None
            } else {
                args("dependency", &d, "dependency")?.dependency
            });
        }
        if let Some(n) = text("nodes", &self.nodes, 64)? {
            out.nodes = args("nodes", &n, "nodes")?.nodes;
        }
        if let Some(n) = text("name", &self.name, 256)? {
            out.name = Some(n);
        }
        if let Some(c) = text("comment", &self.comment, 1024)? {
            out.comment = Some(c);
        }
        if out == crate::sched::JobUpdate::default() {
            if self.nice.is_none() {
                return Err(ServiceError::invalid("body", "No changes specified"));
            }
            return Ok(None);
        }
        Ok(Some(out))
    }
}

/// `POST /jobs/{id}/signal`'s body: a signal by name (`USR1`, `SIGTERM`, any case) or
/// number (1 to 64), and which processes get it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalJob {
    #[schema(value_type = Object)]
    pub signal: serde_json::Value,
    /// `steps` (default: what the batch script started, as `scancel --signal`),
    /// `batch` (the batch shell, `--batch`) or `full` (both, `--full`).
    pub whom: Option<String>,
}

/// The signals a job may be sent by name, as scancel takes them (the job page offers
/// them in this order).
pub use scheduler::parse::SCANCEL_SIGNALS as SIGNAL_NAMES;

impl SignalJob {
    /// The signal's number and whom it reaches, or the field refused.
    pub fn checked(&self) -> Result<(i32, crate::launch::SignalWhom), ServiceError> {
        let bad = |what: String| ServiceError::Invalid {
            field: "signal",
            message: format!("signal: {what} is not a signal (a name such as USR1, or 1 to 64)"),
        };
        let signal = match &self.signal {
            serde_json::Value::Number(n) => n
                .as_i64()
                .filter(|n| (1..=64).contains(n))
                .map(|n| n as i32)
                .ok_or_else(|| bad(n.to_string()))?,
            serde_json::Value::String(text) if text.len() <= 16 => {
                scheduler::parse::scancel_signal(text).ok_or_else(|| bad(format!("\"{text}\"")))?
            }
            other => return Err(bad(format!("{}", other).chars().take(20).collect())),
        };
        let whom = match self.whom.as_deref().unwrap_or("steps") {
            "steps" => crate::launch::SignalWhom::Steps,
            "batch" => crate::launch::SignalWhom::Batch,
            "full" => crate::launch::SignalWhom::Full,
            other => {
                return Err(ServiceError::Invalid {
                    field: "whom",
                    message: format!(
                        "whom: \"{}\" is not one of steps, batch, full",
                        other.chars().take(32).collect::<String>()
                    ),
                })
            }
        };
        Ok((signal, whom))
    }
}

/// A refused submission: names the field or directive; a script's refused
/// directives are listed by line, every one.
fn refused(e: submission::SubmissionError) -> ServiceError {
    let errors = e.line_errors();
    if errors.is_empty() {
        ServiceError::Invalid {
            field: e.field(),
            message: e.to_string(),
        }
    } else {
        ServiceError::InvalidLines {
            field: e.field(),
            message: e.to_string(),
            errors,
        }
    }
}

fn parse_states(s: Option<&str>) -> Result<(Vec<JobState>, bool), ServiceError> {
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
            .ok_or_else(|| {
                ServiceError::invalid("state", format!("state: unknown job state \"{word}\""))
            })?;
        out.push(*state);
    }
    Ok((out, false))
}

fn secs(t: i64) -> String {
    rfc3339(t.saturating_mul(1000))
}

pub fn from_view(v: JobView) -> JobInfo {
    let (exit_code, signal) = scheduler::JobOutcome::code_and_signal(v.exit);
    let alloc = v.allocation.as_ref();
    let request = v.request.clone();
    let array_spec = v
        .display_id
        .split_once("_[")
        .map(|(_, spec)| spec.trim_end_matches(']').to_string())
        .filter(|spec| !spec.is_empty());
    // An array none of whose tasks is pending any more is named by its number.
    let display_id = if array_spec.is_none() && v.display_id.ends_with("_[]") {
        v.id.to_string()
    } else {
        v.display_id
    };
    let mut info = JobInfo {
        id: v.id.to_string(),
        job_id: v.id.job,
        array_task_id: v.id.task,
        display_id,
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
        // One waiting for its begin time is planned for then, at the earliest.
        expected_start: v
            .expected_start
            .or(v
                .eligible_time
                .filter(|_| v.reason == Some(scheduler::PendingReason::BeginTime)))
            .map(secs),
        eligible_time: v.eligible_time.map(secs),
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
        ignored: Vec::new(),
        steps: Vec::new(),
        is_array: v.id.task.is_none() && request.as_ref().is_some_and(|r| r.array.is_some()),
        array_spec,
        ..JobInfo::default()
    };
    if let Some(asked) = request {
        with_request(&mut info, &asked);
    }
    // One nice, as Slurm shows it: the job's own and an administrator's change.
    if v.admin_nice != 0 {
        info.nice = Some(info.nice.unwrap_or(0) + i64::from(v.admin_nice));
    }
    info
}

/// What `asked` says of a job that its view or row does not.
pub fn with_request(info: &mut JobInfo, asked: &scheduler::JobRequest) {
    info.qos = asked.qos.clone();
    info.dependency = asked.dependency.as_ref().map(ToString::to_string);
    info.comment = asked.comment.clone();
    info.features = asked.constraint.as_ref().map(ToString::to_string);
    let hosts = |names: &[String]| {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        (!names.is_empty()).then(|| scheduler::compress_hostlist(&names))
    };
    info.req_nodes = hosts(&asked.nodelist);
    info.exc_nodes = hosts(&asked.exclude);
    let tasks = u64::from(asked.ntasks.unwrap_or(1).max(1));
    let per_task = u64::from(asked.cpus_per_task.unwrap_or(1).max(1));
    info.ntasks = Some(tasks);
    info.cpus_per_task = Some(per_task);
    info.min_cpus = Some(tasks * per_task);
    info.min_memory = asked.memory.as_ref().map(|m| match m {
        scheduler::MemoryRequest::PerNode(mb) => memory_text(*mb),
        scheduler::MemoryRequest::PerCpu(mb) => format!("{}/cpu", memory_text(*mb)),
        scheduler::MemoryRequest::PerGpu(mb) => format!("{}/gpu", memory_text(*mb)),
    });
    info.nice = asked.nice.map(i64::from);
    if info.workdir.is_none() {
        info.workdir = asked.chdir.clone();
    }
    expected_output(info, asked);
}

/// Before a job starts, where its output will go as far as is known now (`%N`, the
/// node, stays as written).
fn expected_output(info: &mut JobInfo, asked: &scheduler::JobRequest) {
    if info.stdout.is_none() {
        if let Some(dir) = info.workdir.clone() {
            let job = match info.array_task_id {
                Some(t) => JobId::task(info.job_id, t),
                None => JobId::new(info.job_id),
            };
            let values = crate::sched::step_env::PatternValues {
                job,
                user: &info.user,
                name: &info.name,
                node: "%N",
            };
            let path = |p: Option<&str>| {
                crate::sched::step_env::output_path(p, &values, std::path::Path::new(&dir))
                    .ok()
                    .map(|p| p.display().to_string())
            };
            info.stdout = path(asked.output.as_deref());
            if asked.error.is_some() {
                info.stderr = path(asked.error.as_deref());
            }
        }
    }
}

/// Megabytes as Slurm prints a size: `512M`, `4G`, `1.50T`.
fn memory_text(mb: u64) -> String {
    if mb >= 1 << 20 && mb.is_multiple_of(1 << 20) {
        format!("{}T", mb >> 20)
    } else if mb >= 1 << 10 && mb.is_multiple_of(1 << 10) {
        format!("{}G", mb >> 10)
    } else {
        format!("{mb}M")
    }
}

/// The options the job's stored request records as ignored: read for one job's
/// page, not for every row of a list (it parses the whole request).
fn ignored_options(r: &JobRecord) -> Vec<scheduler::IgnoredOption> {
    serde_json::from_str::<scheduler::JobRequest>(&r.request)
        .map(|q| q.ignored)
        .unwrap_or_default()
}

pub fn from_record(r: &JobRecord) -> JobInfo {
    let job = crate::store::job_id(r.id, r.task);
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
            // `%2` alone: no task left in the record, its number alone.
            (Some(spec), -1) if !spec.starts_with('%') && !spec.is_empty() => {
                format!("{}_[{}]", r.id, spec)
            }
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
        expected_start: None,
        // Started: eligible by then, as far as the row tells (from its submission); a
        // pending row's comes from the scheduler.
        eligible_time: r.start_time.map(|_| rfc3339(r.submit_time)),
        end_time: r.end_time.map(rfc3339),
        time_limit: r.time_limit.map(|t| t.max(0) as u64),
        time_used: (used_ms.max(0) / 1000) as u64,
        nodes: scheduler::hostlist_count(&r.nodelist),
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
        ignored: Vec::new(),
        steps: Vec::new(),
        array_spec: r.array_spec.clone().filter(|_| r.task == -1),
        is_array: r.task == -1 && r.array_spec.is_some(),
        ..JobInfo::default()
    }
}
