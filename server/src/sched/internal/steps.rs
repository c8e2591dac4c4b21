//! Starting and watching job steps for the actor: one task per step builds the
//! step's spec (identity, environment, output paths), starts the supervisor, relays
//! cancel and time-limit signals to it, and reports how the step ended. After a
//! restart the same task watches an adopted supervisor through its state file.
//! Owns: the step tasks of the internal backend.
//! Must not touch: the cluster (it only sends `StepEnded` back to the actor), the
//! Slurm backend.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use scheduler::{Allocation, JobId, JobOutcome, JobRequest};
use tokio::sync::mpsc;

use super::command::{Command, StepEnd};
use crate::launch::{self, usage, RuntimeKind, StepSpec, StepState};
use crate::metrics::{GpuReading, UsageMetrics};
use crate::sched::step_env::{self, StepContext};
use crate::store::{JobStart, JobUsageRow, Store};

/// How steps are started.
#[derive(Debug, Clone)]
pub struct LaunchSettings {
    /// Per-job step directories (`<spool>/<job>`).
    pub spool_dir: PathBuf,
    /// The `atrium` binary the supervisors run.
    pub exe: PathBuf,
    pub runtime: RuntimeKind,
    pub kill_grace_secs: u64,
    /// `[jobs] output_folder_wait_seconds`.
    pub output_folder_wait_secs: u64,
    /// Whether steps switch to the user's uid (the portal runs as root).
    pub drop_privileges: bool,
    pub cluster_name: String,
    /// Shared storage bound into every step (datasets read-only, project spaces).
    pub mounts: Vec<launch::Mount>,
    /// The portal's directories, hidden from steps (`StepSpec::hidden`).
    pub hidden: Vec<PathBuf>,
    /// How jobs reach the portal to record their steps (`srun`); `None`: they do not.
    pub portal: Option<JobPortal>,
    /// `[jobs] usage_interval_seconds`: how often supervisors sample a job's use.
    pub usage_interval_secs: u64,
}

/// What a job's `srun` is given: the step commands' directory (`<spool>/bin`), the
/// portal's address as a job reaches it, and the key its job token is derived with.
#[derive(Debug, Clone)]
pub struct JobPortal {
    pub bin_dir: PathBuf,
    pub url: String,
    pub tokens: crate::sched::JobTokens,
}

/// A signal for a step, relayed to its supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepSignal {
    Cancel,
    TimeLimit,
    /// `scancel --signal`: to the job's processes; the job goes on.
    Send {
        signal: i32,
        whom: launch::SignalWhom,
    },
}

pub(super) struct StepRunner {
    settings: std::sync::Arc<LaunchSettings>,
    store: Store,
    identities: crate::identities::Identities,
    actor: mpsc::Sender<Command>,
    usage: UsageMetrics,
}

/// How often an adopted step's state file is read.
const ADOPTED_POLL: Duration = Duration::from_millis(200);

impl StepRunner {
    pub fn new(
        settings: LaunchSettings,
        store: Store,
        identities: crate::identities::Identities,
        actor: mpsc::Sender<Command>,
        usage: UsageMetrics,
    ) -> Self {
        StepRunner {
            settings: std::sync::Arc::new(settings),
            store,
            identities,
            actor,
            usage,
        }
    }

    fn recorder(&self, job: JobId) -> UsageRecorder {
        UsageRecorder {
            store: self.store.clone(),
            metrics: self.usage.clone(),
            job,
            sampled_at: None,
            readings: Vec::new(),
            node: String::new(),
        }
    }

    fn dir(settings: &LaunchSettings, job: JobId) -> PathBuf {
        settings.spool_dir.join(job.to_string())
    }

    /// Remove the directories of steps whose end is recorded: each is renamed out of
    /// the way at once (a job requeued and started again gets a fresh one), then
    /// deleted off the actor.
    pub fn remove(&self, jobs: Vec<JobId>) {
        if jobs.is_empty() {
            return;
        }
        let mut ended = Vec::with_capacity(jobs.len());
        for job in jobs {
            let dir = Self::dir(&self.settings, job);
            let away = self
                .settings
                .spool_dir
                .join(format!(".ended-{job}-{}", crate::util::random_text(8)));
            match std::fs::rename(&dir, &away) {
                Ok(()) => ended.push(away),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!(%job, error = %e, "removing the step directory failed"),
            }
        }
        tokio::task::spawn_blocking(move || {
            for dir in ended {
                if let Err(e) = std::fs::remove_dir_all(&dir) {
                    tracing::warn!(dir = %dir.display(), error = %e, "removing an ended step's directory failed");
                }
            }
        });
    }

    /// Start the step of a job that was just placed.
    pub fn launch(
        &self,
        job: JobId,
        allocation: Allocation,
        start: JobStart,
        user: String,
    ) -> mpsc::UnboundedSender<StepSignal> {
        let (tx, rx) = mpsc::unbounded_channel();
        let settings = self.settings.clone();
        let (store, identities) = (self.store.clone(), self.identities.clone());
        let actor = self.actor.clone();
        let usage = self.recorder(job);
        tokio::spawn(async move {
            let end = match start_step(
                &settings,
                &store,
                &identities,
                job,
                &allocation,
                &start,
                &user,
            )
            .await
            {
                Ok(child) => watch(&settings, job, Some(child), rx, usage).await,
                Err(message) => {
                    tracing::warn!(%job, %message, "the step could not start");
                    StepEnd {
                        job,
                        outcome: JobOutcome::Exited(1),
                        time_limit: false,
                        message: Some(message),
                    }
                }
            };
            let _ = actor.send(Command::StepEnded(end)).await;
        });
        tx
    }

    /// Watch the step of a job that was running before a restart; `None` when its
    /// supervisor never started (the caller launches it).
    pub async fn adopt(&self, job: JobId) -> Option<mpsc::UnboundedSender<StepSignal>> {
        let dir = Self::dir(&self.settings, job);
        if !supervisor_started(&dir).await {
            return None;
        }
        tracing::info!(%job, "re-adopting the running step");
        let (tx, rx) = mpsc::unbounded_channel();
        let settings = self.settings.clone();
        let actor = self.actor.clone();
        let usage = self.recorder(job);
        tokio::spawn(async move {
            let end = watch(&settings, job, None, rx, usage).await;
            let _ = actor.send(Command::StepEnded(end)).await;
        });
        Some(tx)
    }
}

/// Whether a supervisor ever ran for this step directory: it wrote its state file,
/// or one is starting right now (its process exists but has not written it yet).
async fn supervisor_started(dir: &Path) -> bool {
    if matches!(launch::read_state(dir), Ok(Some(_))) {
        return true;
    }
    if !dir.exists() {
        return false;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while tokio::time::Instant::now() < deadline {
        if !launch::supervisor_running(dir) {
            return matches!(launch::read_state(dir), Ok(Some(_)));
        }
        if matches!(launch::read_state(dir), Ok(Some(_))) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Build the spec and start the supervisor. Errors are messages for the user.
async fn start_step(
    settings: &LaunchSettings,
    store: &Store,
    identities: &crate::identities::Identities,
    job: JobId,
    allocation: &Allocation,
    start: &JobStart,
    user: &str,
) -> Result<tokio::process::Child, String> {
    // The row and the user's identity at once: this is on the path to a job's start.
    // (`user` is the scheduler's word for the owner; empty when it did not know, and
    // then the row's.)
    let identity = |name: String| async move {
        if !settings.drop_privileges || name.is_empty() {
            return Ok(None);
        }
        identities
            .posix(&name)
            .await
            .map_err(|e| format!("reading the user's identity failed: {e}"))?
            .map(Some)
            .ok_or_else(|| format!("user {name} has no POSIX identity (uid)"))
    };
    let (row, early) = tokio::try_join!(
        async {
            store
                .job(job.job as i64, -1)
                .await
                .map_err(|e| format!("reading the job failed: {e}"))
        },
        identity(user.to_string()),
    )?;
    let request: JobRequest =
        serde_json::from_str(&row.request).map_err(|e| format!("bad stored request: {e}"))?;
    let mut submitted: BTreeMap<String, String> =
        serde_json::from_str(&row.environment).unwrap_or_default();
    let (uid, gid, groups, home) = if settings.drop_privileges {
        let id = match early.filter(|_| row.user_name == user) {
            Some(id) => id,
            None => identity(row.user_name.clone())
                .await?
                .ok_or_else(|| format!("user {} has no POSIX identity (uid)", row.user_name))?,
        };
        let groups = id.supplementary_gids();
        (id.uid, id.gid, groups, id.home)
    } else {
        let (uid, gid) = launch::current_ids();
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
        (uid, gid, Vec::new(), home)
    };
    // `--get-user-env` (ignored with `--export=NONE`, as Slurm ignores it): the
    // login environment under what was submitted.
    let export_all = request.export.as_ref().is_none_or(|e| e.all);
    if request.get_user_env && export_all && settings.drop_privileges {
        let who = crate::privilege::Identity {
            user: row.user_name.clone(),
            uid,
            gid,
            groups: groups.clone(),
            home: home.clone(),
        };
        match super::login_env::login_environment(&who).await {
            Ok(mut login) => {
                login.append(&mut submitted);
                submitted = login;
            }
            Err(e) => {
                tracing::warn!(%job, error = %e, "--get-user-env: the login environment could not be read")
            }
        }
    }
    let node = allocation
        .nodes
        .first()
        .ok_or_else(|| "empty allocation".to_string())?;
    let workdir = PathBuf::from(&row.workdir);
    let submit_dir = PathBuf::from(&row.submit_dir);
    let cx = StepContext {
        job,
        name: &row.name,
        user: &row.user_name,
        uid,
        gid,
        home: &home,
        account: &row.account,
        partition: &row.partition,
        submit_dir: &submit_dir,
        cluster_name: &settings.cluster_name,
        ntasks: request.ntasks.unwrap_or(1),
        time_limit_secs: start.time_limit.map(|t| t as u64),
        node,
    };
    let mut env = step_env::environment(&request, &submitted, &cx);
    let container: Option<launch::Container> = row
        .container
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| format!("bad stored container: {e}"))?;
    let mut mounts = settings.mounts.clone();
    let (runtime, image) = match container {
        Some(c) => {
            for (name, value) in c.env {
                env.retain(|(n, _)| *n != name);
                env.push((name, value));
            }
            mounts.extend(c.mounts);
            (c.runtime, c.image)
        }
        None => (settings.runtime.clone(), None),
    };
    if let Some(portal) = &settings.portal {
        let token = portal.tokens.token(job, start.start_time);
        let tools = step_env::StepTools {
            bin_dir: &portal.bin_dir,
            portal_url: &portal.url,
            token: &token,
        };
        step_env::add_step_tools(&mut env, &tools);
        // The step commands and the binary they link to, inside a container too.
        for path in [&portal.bin_dir, &settings.exe] {
            mounts.push(launch::Mount {
                source: path.clone(),
                target: path.clone(),
                read_only: true,
            });
        }
    }
    let spec = StepSpec {
        job: job.to_string(),
        user: row.user_name.clone(),
        uid,
        gid,
        groups,
        home: home.clone(),
        workdir,
        script: row.script.clone(),
        env,
        stdout: PathBuf::from(&start.stdout_path),
        stderr: start.stderr_path.as_ref().map(PathBuf::from),
        time_limit_secs: start.time_limit.map(|t| t as u64),
        memory_limit_mb: Some(node.memory_mb),
        kill_grace_secs: settings.kill_grace_secs,
        output_folder_wait_secs: settings.output_folder_wait_secs,
        pty: request.pty,
        pty_raw: request.pty_raw,
        gpu_indices: step_env::gpu_indices(node),
        usage_interval_secs: settings.usage_interval_secs,
        sampled_gpus: step_env::sampled_gpus(node),
        sampled_migs: step_env::sampled_migs(node),
        node: node.node.clone(),
        runtime,
        drop_privileges: settings.drop_privileges,
        image,
        mounts,
        hidden: settings.hidden.clone(),
        signal: request.signal.map(|s| launch::EarlySignal {
            signal: s.signal,
            batch_only: s.batch_only,
            seconds_before: u64::from(s.seconds_before),
        }),
        append_output: request.open_mode == Some(scheduler::OpenMode::Append),
        args: request.arguments.clone(),
    };
    let dir = launch::prepare(&settings.spool_dir, &spec)
        .map_err(|e| format!("preparing the step failed: {e}"))?;
    launch::spawn(&settings.exe, &dir)
        .await
        .map_err(|e| format!("starting the step supervisor failed: {e}"))
}

/// Wait for the step to end, relaying signals; `child` is `None` for an adopted
/// step (polled through its state file).
async fn watch(
    settings: &LaunchSettings,
    job: JobId,
    mut child: Option<tokio::process::Child>,
    mut signals: mpsc::UnboundedReceiver<StepSignal>,
    mut usage: UsageRecorder,
) -> StepEnd {
    let dir = StepRunner::dir(settings, job);
    let every = Duration::from_secs(settings.usage_interval_secs.max(1));
    let mut usage_tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    usage_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut pending: Vec<StepSignal> = Vec::new();
    let mut signals_open = true;
    let state = loop {
        // Deliver signals once the supervisor has said who it is.
        if !pending.is_empty() {
            if let Ok(Some(state)) = launch::read_state(&dir) {
                for s in pending.drain(..) {
                    let sig = match s {
                        StepSignal::Cancel => launch::StepSignal::Cancel,
                        StepSignal::TimeLimit => launch::StepSignal::TimeLimit,
                        StepSignal::Send { signal, whom } => {
                            launch::StepSignal::Send { signal, whom }
                        }
                    };
                    if let Err(e) = launch::signal(&dir, &state, sig) {
                        tracing::warn!(%job, error = %e, "signalling the step failed");
                    }
                }
            }
        }
        let poll = if pending.is_empty() {
            ADOPTED_POLL
        } else {
            Duration::from_millis(10)
        };
        tokio::select! {
            _ = usage_tick.tick(), if settings.usage_interval_secs > 0 => usage.look(&dir).await,
            sig = signals.recv(), if signals_open => match sig {
                Some(s) => pending.push(s),
                None => signals_open = false,
            },
            status = async {
                match child.as_mut() {
                    Some(c) => c.wait().await.ok(),
                    None => std::future::pending().await,
                }
            } => {
                let _ = status;
                match launch::read_state(&dir) {
                    Ok(Some(s)) if s.is_finished() => break s,
                    _ => break StepState::lost(&job.to_string()),
                }
            }
            _ = tokio::time::sleep(poll), if child.is_none() => {
                match launch::read_state(&dir) {
                    Ok(Some(s)) if s.is_finished() => break s,
                    Ok(Some(s)) if !s.supervisor_alive() => {
                        // Read once more: it may have finished between the two looks.
                        match launch::read_state(&dir) {
                            Ok(Some(s)) if s.is_finished() => break s,
                            _ => break StepState::lost(&job.to_string()),
                        }
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(%job, error = %e, "reading the step state failed"),
                }
            }
        }
    };
    usage.finish(&dir).await;
    StepEnd {
        job,
        outcome: state.outcome.unwrap_or(JobOutcome::Signaled(9)),
        time_limit: state.reason.as_deref() == Some("time_limit"),
        message: state.error.clone(),
    }
}

/// Reads a step's `usage.json` and records what is new: in the store (the job's
/// efficiency, the list of idle GPUs) and in the metrics (its GPUs now).
struct UsageRecorder {
    store: Store,
    metrics: UsageMetrics,
    job: JobId,
    /// The latest sample recorded.
    sampled_at: Option<i64>,
    /// What the metrics hold of this job's GPUs, and on which node.
    readings: Vec<GpuReading>,
    node: String,
}

impl UsageRecorder {
    /// Record the latest sample if it is new.
    async fn look(&mut self, dir: &Path) {
        let usage = match usage::read(dir) {
            Ok(Some(u)) => u,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(job = %self.job, error = %e, "reading the job's usage failed");
                return;
            }
        };
        if self.sampled_at == Some(usage.sampled_at_ms) {
            return;
        }
        let row = JobUsageRow {
            job_id: self.job.job as i64,
            task: self.job.task.map_or(-1, i64::from),
            sampled_at: usage.sampled_at_ms,
            complete: usage.complete,
            cpu_seconds: usage.cpu_seconds,
            max_rss_bytes: i64::try_from(usage.max_rss_bytes).unwrap_or(i64::MAX),
            gpu_idle_seconds: usage.gpu_idle_seconds(),
            gpu_utilization: usage.mean_gpu_utilization_percent(),
            series: match serde_json::to_string(&usage) {
                Ok(s) => s,
                Err(_) => return,
            },
        };
        if let Err(e) = self.store.record_job_usage(&row).await {
            tracing::warn!(job = %self.job, error = %e, "recording the job's usage failed");
            return;
        }
        self.sampled_at = Some(usage.sampled_at_ms);
        let now: Vec<GpuReading> = usage
            .gpus
            .iter()
            .filter(|g| g.samples > 0 && !usage.complete)
            .map(|g| GpuReading {
                index: g.index,
                utilization_percent: g.last_utilization_percent,
                memory_bytes: g.last_memory_bytes,
                idle: g.last_utilization_percent < usage::GPU_IDLE_PERCENT,
            })
            .collect();
        self.metrics.gpus(&usage.node, &self.readings, &now);
        self.readings = now;
        self.node = usage.node;
    }

    /// The step ended: record its final figures; its GPUs leave the metrics.
    async fn finish(mut self, dir: &Path) {
        self.look(dir).await;
        self.metrics.gone(&self.node, &self.readings);
    }
}
