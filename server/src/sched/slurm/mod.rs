//! The Slurm backend (`[scheduler] backend = "slurm"`): the same [`Scheduler`] handle,
//! answered by the site's Slurm instead of atrium's own cluster.
//!
//! - Submissions go to `sbatch` run as the user (munge vouches for the uid), with the
//!   script and its directives unchanged, the options given beside it, and
//!   `--comment=atrium`. The row is written with Slurm's id before the caller hears
//!   back; a row that cannot be written cancels the job, so nothing is acknowledged
//!   that atrium could lose.
//! - State is read, never guessed: one `squeue` call per interval for every job; a job
//!   `squeue` no longer lists is asked of `sacct`. When Slurm does not answer, the
//!   jobs show UNKNOWN and the rows keep the last state Slurm reported; nothing is
//!   ended or cancelled on atrium's own account.
//! - Nodes and partitions come from `scontrol show node|partition`.
//! - Quotas are Slurm's (associations, `atrium slurm apply-quotas`): atrium shows
//!   them with their use (`usage`) but does not enforce them here.
//!
//! Must not touch: HTTP types, SQL (the store).

pub mod cli;
pub mod nodes;
pub mod parse;
pub mod quotas;
pub mod sbatch;
mod usage;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scheduler::{
    JobId, JobOutcome, JobState, JobView, LimitsConfig, NodeCommand, NodeView, Owner,
    PartitionView, PendingReason, SliceUsage, SqueueFilter, TimeLimit,
};
use tokio::sync::{mpsc, Notify};

use self::cli::{CliError, SlurmCli};
use self::parse::{ArrayTask, SlurmNode, SlurmPartition, SqueueRow};
use super::actor::{Command, Control, Requester, SchedError};
use super::submission::Submission;
use crate::privilege::Identity;
use crate::store::{JobChange, JobRecord, JobStart, Store};
use crate::util::now_secs;

/// Ended jobs stay in the live view this long; the rows keep them for good.
const KEEP_ENDED_SECS: i64 = 300;

/// How the backend reaches Slurm.
#[derive(Debug, Clone)]
pub struct SlurmSettings {
    pub cli: SlurmCli,
    pub poll_interval: Duration,
    pub nodes_interval: Duration,
}

impl SlurmSettings {
    pub fn from_config(config: &crate::config::SlurmConfig, switch_user: bool) -> SlurmSettings {
        SlurmSettings {
            cli: SlurmCli::from_config(config, switch_user),
            poll_interval: config.poll_interval.0,
            nodes_interval: config.nodes_interval.0,
        }
    }
}

/// One row of atrium's (a job, an array, or one task of it) as Slurm last told.
#[derive(Debug, Clone)]
struct Entry {
    /// Slurm's id of the job, or of the array for an array and its tasks.
    slurm_id: String,
    /// The row as stored.
    record: JobRecord,
    view: JobView,
}

#[derive(Default)]
struct State {
    jobs: BTreeMap<JobId, Entry>,
    nodes: Vec<NodeView>,
    partitions: Vec<PartitionView>,
    /// Why Slurm did not answer the last poll.
    unreachable: Option<String>,
    /// atrium's quotas, shown with their use (Slurm enforces them).
    limits: LimitsConfig,
    /// Slurm ids carrying atrium's comment that are not to be adopted (their row exists,
    /// or their user is not atrium's): asked about once.
    not_adopted: std::collections::HashSet<String>,
}

type Shared = Arc<Mutex<State>>;

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

struct Backend {
    store: Store,
    settings: SlurmSettings,
    state: Shared,
    wake: Notify,
}

/// Load atrium's open Slurm jobs and start answering `rx`.
pub(super) async fn start(
    store: Store,
    settings: SlurmSettings,
    rx: mpsc::Receiver<Command>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let mut state = State::default();
    let now = now_secs();
    for (record, slurm_id) in store.open_slurm_jobs().await? {
        let id = job_id(&record);
        let view = view_of_record(&record, now);
        state.jobs.insert(
            id,
            Entry {
                slurm_id,
                record,
                view,
            },
        );
    }
    tracing::info!(
        jobs = state.jobs.len(),
        "the Slurm backend follows the jobs it had"
    );
    // Off the start-up path: with Slurm down, scontrol waits out its timeout.
    tokio::spawn(check_first_job_id(store.clone(), settings.cli.clone()));
    let backend = Arc::new(Backend {
        store,
        settings,
        state: Arc::new(Mutex::new(state)),
        wake: Notify::new(),
    });
    tokio::spawn(poll_loop(backend.clone()));
    Ok(tokio::spawn(serve(backend, rx)))
}

/// Slurm's ids become atrium's: after the internal scheduler, Slurm must start above
/// the ids it used, or a new job whose id Slurm gives again is refused.
async fn check_first_job_id(store: Store, cli: SlurmCli) {
    let highest = match store.highest_internal_job_id().await {
        Ok(0) | Err(_) => return,
        Ok(n) => n,
    };
    let Ok(config) = cli
        .admin("scontrol", &["show".into(), "config".into()])
        .await
    else {
        return;
    };
    match parse::first_job_id(&config) {
        Some(first) if first > highest => {}
        first => tracing::warn!(
            highest,
            first_job_id = ?first,
            "atrium's own scheduler used job ids up to {highest}: set FirstJobId above it in \
             slurm.conf, or Slurm's new jobs with those ids cannot be recorded"
        ),
    }
}

fn job_id(r: &JobRecord) -> JobId {
    if r.task >= 0 {
        JobId::task(r.id as u64, r.task as u32)
    } else {
        JobId::new(r.id as u64)
    }
}

async fn serve(backend: Arc<Backend>, mut rx: mpsc::Receiver<Command>) {
    while let Some(cmd) = rx.recv().await {
        match cmd {
            Command::Submit {
                owner,
                submission,
                workdir,
                reply,
            } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let _ = reply.send(b.submit(owner, *submission, workdir).await);
                });
            }
            Command::Control {
                who,
                job,
                action,
                reply,
            } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let _ = reply.send(b.control(&who, job, action).await);
                });
            }
            Command::Job { who, job, reply } => {
                let _ = reply.send(backend.job(&who, job));
            }
            Command::Squeue { filter, reply } => {
                let _ = reply.send(Ok(backend.squeue(&filter)));
            }
            Command::Nodes { reply } => {
                let s = lock(&backend.state);
                let _ = reply.send(Ok((s.nodes.clone(), s.partitions.clone())));
            }
            // Slurm's associations enforce quotas; atrium keeps them to show.
            Command::Limits { limits, reply } => {
                lock(&backend.state).limits = *limits;
                let _ = reply.send(Ok(()));
            }
            Command::LimitUsage { owners, reply } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let (limits, live) = {
                        let s = lock(&b.state);
                        (s.limits.clone(), live_jobs(&s))
                    };
                    let each =
                        usage::limit_usages(&b.store, &limits, &live, &owners, now_secs()).await;
                    let _ = reply.send(Ok(each));
                });
            }
            Command::Node {
                node,
                command,
                reply,
            } => {
                let b = backend.clone();
                tokio::spawn(async move {
                    let _ = reply.send(b.set_node(&node, command).await);
                });
            }
            Command::StepEnded(_) => {}
        }
    }
}

fn sched_error(e: CliError) -> SchedError {
    match e {
        CliError::Refused(m) => SchedError::Rejected(m),
        CliError::Unreachable(m) => {
            tracing::warn!(error = %m, "Slurm did not answer");
            SchedError::Unavailable
        }
    }
}

impl Backend {
    async fn identity(&self, user: &str) -> Result<Identity, SchedError> {
        let id = self
            .store
            .posix_identity(user)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "reading a user's identity failed");
                SchedError::Unavailable
            })?
            .ok_or_else(|| {
                SchedError::Rejected(format!("user {user} has no POSIX identity (uid)"))
            })?;
        Ok(Identity::from_posix(user, id))
    }

    async fn submit(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<JobId, SchedError> {
        if submission.container.is_some() {
            return Err(SchedError::Rejected(
                "container: jobs under Slurm run in the site's own environment; \
                 leave the container out"
                    .into(),
            ));
        }
        let user = self.identity(&owner.user).await?;
        let mut args = vec![
            "--parsable".to_string(),
            "--comment=atrium".to_string(),
            format!("--chdir={}", workdir.display()),
        ];
        args.extend(submission.options.iter().cloned());
        let env: Vec<(String, String)> = submission
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let cwd = submission
            .submit_dir
            .as_ref()
            .map(PathBuf::from)
            .unwrap_or_else(|| workdir.clone());
        let out = self
            .settings
            .cli
            .run(
                "sbatch",
                &args,
                Some(&user),
                &env,
                Some(&submission.script),
                Some(&cwd),
            )
            .await
            .map_err(sched_error)?;
        let slurm_id = parse::sbatch_id(&out).ok_or_else(|| {
            tracing::error!(output = %out, "sbatch answered without a job id");
            SchedError::Unavailable
        })?;
        // Slurm's id is atrium's: users, `squeue` and dependencies name the same job.
        let id: u64 = slurm_id.parse().map_err(|_| SchedError::Unavailable)?;
        let record = submission.record(id, &owner, &workdir);
        if let Err(e) = self.store.record_slurm_submission(&record, &slurm_id).await {
            tracing::error!(error = %e, slurm_id, "recording a Slurm job failed; cancelling it");
            let _ = self
                .settings
                .cli
                .run(
                    "scancel",
                    std::slice::from_ref(&slurm_id),
                    Some(&user),
                    &[],
                    None,
                    None,
                )
                .await;
            return Err(SchedError::Unavailable);
        }
        tracing::info!(job = id, slurm_id, user = %owner.user, "submitted to Slurm");
        let job = JobId::new(id);
        {
            let mut s = lock(&self.state);
            let view = view_of_record(&record, now_secs());
            s.jobs.insert(
                job,
                Entry {
                    slurm_id,
                    record,
                    view,
                },
            );
        }
        self.wake.notify_one();
        Ok(job)
    }

    fn visible(&self, who: &Requester, job: JobId) -> Result<Entry, SchedError> {
        let s = lock(&self.state);
        match s.jobs.get(&job) {
            Some(e) if who.may_see(&e.record.user_name) => Ok(e.clone()),
            _ => Err(SchedError::NotFound),
        }
    }

    fn job(&self, who: &Requester, job: JobId) -> Result<JobView, SchedError> {
        self.visible(who, job).map(|e| e.view)
    }

    fn squeue(&self, filter: &SqueueFilter) -> Vec<JobView> {
        let s = lock(&self.state);
        s.jobs
            .values()
            .map(|e| &e.view)
            // An array's row is listed while tasks of it wait; its tasks on their own.
            .filter(|v| {
                !(v.id.task.is_none() && v.state != JobState::Pending && is_array(&s, v.id))
            })
            .filter(|v| filter.include_finished || !v.state.is_terminal())
            .filter(|v| filter.user.as_ref().is_none_or(|u| &v.user == u))
            .filter(|v| filter.partition.as_ref().is_none_or(|p| &v.partition == p))
            .filter(|v| filter.states.is_empty() || filter.states.contains(&v.state))
            .cloned()
            .collect()
    }

    async fn control(
        &self,
        who: &Requester,
        job: JobId,
        action: Control,
    ) -> Result<(), SchedError> {
        let entry = self.visible(who, job)?;
        if entry.view.state.is_terminal() {
            return Err(SchedError::Conflict(format!(
                "job {job} is {} already",
                entry.view.state.name()
            )));
        }
        let target = match job.task {
            Some(t) => format!("{}_{t}", entry.slurm_id),
            None => entry.slurm_id.clone(),
        };
        let (program, args): (&str, Vec<String>) = match action {
            Control::Cancel => ("scancel", vec![target]),
            Control::Hold => ("scontrol", vec!["hold".into(), target]),
            Control::Release => ("scontrol", vec!["release".into(), target]),
            Control::Requeue => ("scontrol", vec!["requeue".into(), target]),
        };
        let user = self.identity(&entry.record.user_name).await?;
        self.settings
            .cli
            .run(program, &args, Some(&user), &[], None, None)
            .await
            .map_err(|e| match e {
                CliError::Refused(m) => SchedError::Conflict(m),
                other => sched_error(other),
            })?;
        self.wake.notify_one();
        Ok(())
    }

    async fn set_node(&self, node: &str, command: NodeCommand) -> Result<(), SchedError> {
        let mut args = vec!["update".to_string(), format!("NodeName={node}")];
        match &command {
            NodeCommand::Drain { reason } => {
                args.push("State=DRAIN".into());
                args.push(format!("Reason={reason}"));
            }
            NodeCommand::Down { reason } => {
                args.push("State=DOWN".into());
                args.push(format!("Reason={reason}"));
            }
            NodeCommand::Resume => args.push("State=RESUME".into()),
        }
        self.settings
            .cli
            .admin("scontrol", &args)
            .await
            .map_err(sched_error)?;
        self.refresh_nodes().await;
        Ok(())
    }

    async fn refresh_nodes(&self) {
        let cli = &self.settings.cli;
        let nodes = cli
            .admin("scontrol", &["show".into(), "node".into(), "-o".into()])
            .await;
        let parts = cli
            .admin(
                "scontrol",
                &["show".into(), "partition".into(), "-o".into()],
            )
            .await;
        let (Ok(nodes), Ok(parts)) = (nodes, parts) else {
            return;
        };
        let nodes: Vec<SlurmNode> = parse::records(&nodes)
            .iter()
            .filter_map(SlurmNode::from_record)
            .collect();
        let parts: Vec<SlurmPartition> = parse::records(&parts)
            .iter()
            .filter_map(SlurmPartition::from_record)
            .collect();
        let mut s = lock(&self.state);
        let partitions = partition_views(&parts, &nodes, &s);
        s.nodes = nodes.into_iter().map(node_view).collect();
        s.partitions = partitions;
    }

    /// One poll: `squeue` for every job, `sacct` for those it no longer lists, the
    /// changes written in one transaction.
    async fn poll(&self) {
        let args = vec![
            "-h".to_string(),
            "-t".into(),
            "all".into(),
            "-O".into(),
            parse::squeue_format(),
        ];
        let out = self.settings.cli.admin("squeue", &args).await;
        let rows = match out {
            Ok(out) => out.lines().filter_map(SqueueRow::parse).collect::<Vec<_>>(),
            Err(e) => {
                self.mark_unknown(&e.to_string());
                return;
            }
        };
        self.adopt(&rows).await;
        let (changes, missing) = {
            let s = lock(&self.state);
            diff(&s, &rows)
        };
        let mut changes = changes;
        if !missing.is_empty() {
            match self.sacct(&missing).await {
                Ok(more) => changes.extend(more),
                Err(e) => {
                    tracing::warn!(error = %e, "sacct did not answer for jobs squeue no longer lists")
                }
            }
        }
        let writes: Vec<JobChange> = changes.iter().flat_map(|c| c.writes.clone()).collect();
        if !writes.is_empty() {
            if let Err(e) = self.store.commit_scheduler_batch(&[], &writes).await {
                tracing::error!(error = %e, "recording Slurm's job states failed; trying again");
                return;
            }
        }
        let now = now_secs();
        let mut s = lock(&self.state);
        s.unreachable = None;
        for c in changes {
            let id = job_id(&c.record);
            s.jobs.insert(
                id,
                Entry {
                    slurm_id: c.slurm_id,
                    record: c.record,
                    view: c.view,
                },
            );
        }
        // Rows whose state did not change but that squeue lists: refresh time used.
        for row in &rows {
            if let Some(id) = entry_id(&s, row) {
                if let Some(e) = s.jobs.get_mut(&id) {
                    e.view.time_used = row.time_used;
                    if e.view.state == JobState::Unknown {
                        e.view.state = parse::job_state(&row.state);
                    }
                }
            }
        }
        s.jobs.retain(|_, e| {
            !e.view.state.is_terminal() || e.view.end_time.is_none_or(|t| now - t < KEEP_ENDED_SECS)
        });
    }

    /// Jobs carrying atrium's comment without a row: `sbatch` succeeded and the portal
    /// stopped before it recorded the job, so its user never heard back (or the user
    /// submitted it by hand with the comment). They are adopted, so that the user sees
    /// the job running and can cancel it rather than find a second copy later. Array
    /// jobs are left to Slurm.
    async fn adopt(&self, rows: &[SqueueRow]) {
        let candidates: Vec<&SqueueRow> = {
            let mut s = lock(&self.state);
            // Forget the ids Slurm no longer lists.
            if !s.not_adopted.is_empty() {
                let listed: std::collections::HashSet<&str> =
                    rows.iter().map(|r| r.job_id.as_str()).collect();
                s.not_adopted.retain(|id| listed.contains(id.as_str()));
            }
            rows.iter()
                .filter(|r| r.comment == "atrium" && r.array_task == ArrayTask::None)
                .filter(|r| !s.not_adopted.contains(&r.job_id))
                .filter(|r| {
                    r.job_id
                        .parse::<u64>()
                        .is_ok_and(|id| !s.jobs.contains_key(&JobId::new(id)))
                })
                .collect()
        };
        for row in candidates {
            match self.adopt_one(row).await {
                Ok(true) => {}
                Ok(false) => {
                    lock(&self.state).not_adopted.insert(row.job_id.clone());
                }
                Err(e) => {
                    tracing::warn!(slurm_id = %row.job_id, error = %e, "adopting a job failed; trying again");
                }
            }
        }
    }

    /// Adopt one job; `Ok(false)`: it is not to be adopted.
    async fn adopt_one(&self, row: &SqueueRow) -> anyhow::Result<bool> {
        let id: i64 = row.job_id.parse()?;
        match self.store.job(id, -1).await {
            Ok(_) => return Ok(false),
            Err(crate::store::StoreError::NotFound) => {}
            Err(e) => return Err(e.into()),
        }
        let show = self
            .settings
            .cli
            .admin(
                "scontrol",
                &["show".into(), "job".into(), row.job_id.clone(), "-o".into()],
            )
            .await?;
        let Some(job) = parse::records(&show).into_iter().next() else {
            return Ok(false);
        };
        // By uid: the portal's host may not resolve every user's name.
        let Some(uid) = job.get("UserId").and_then(|u| parse::id_in_parentheses(u)) else {
            return Ok(false);
        };
        let Some(user) = self.store.username_of_uid(uid).await? else {
            return Ok(false);
        };
        let workdir = job.get("WorkDir").cloned().unwrap_or_else(|| "/".into());
        let script = self
            .settings
            .cli
            .admin(
                "scontrol",
                &[
                    "write".into(),
                    "batch_script".into(),
                    row.job_id.clone(),
                    "-".into(),
                ],
            )
            .await
            .unwrap_or_default();
        let request = scheduler::parse_script(&script).unwrap_or_default();
        let record = JobRecord {
            id,
            task: -1,
            user_name: user.clone(),
            account: row.account.clone(),
            partition: row.partition.clone(),
            name: row.name.clone(),
            state: "PENDING".into(),
            request: serde_json::to_string(&request)?,
            environment: "{}".into(),
            script,
            submit_dir: workdir.clone(),
            workdir,
            submit_time: row.submit_time.unwrap_or_else(now_secs) * 1000,
            time_limit: match row.time_limit {
                TimeLimit::Seconds(s) => Some(s as i64),
                TimeLimit::Unlimited => None,
            },
            message: Some(
                "adopted from Slurm: it carries atrium's comment but was never recorded".into(),
            ),
            ..Default::default()
        };
        self.store
            .record_slurm_submission(&record, &row.job_id)
            .await?;
        tracing::warn!(job = id, %user, "adopted a Slurm job of atrium's that had no row");
        let view = view_of_record(&record, now_secs());
        lock(&self.state).jobs.insert(
            JobId::new(id as u64),
            Entry {
                slurm_id: row.job_id.clone(),
                record,
                view,
            },
        );
        Ok(true)
    }

    fn mark_unknown(&self, why: &str) {
        let mut s = lock(&self.state);
        if s.unreachable.is_none() {
            tracing::warn!(error = %why, "Slurm does not answer; atrium's jobs show UNKNOWN until it does");
        }
        s.unreachable = Some(why.to_string());
        for e in s.jobs.values_mut() {
            if !e.view.state.is_terminal() {
                e.view.state = JobState::Unknown;
                e.view.reason = None;
            }
        }
    }

    /// Ask `sacct` about jobs `squeue` no longer lists.
    async fn sacct(&self, missing: &[(JobId, String)]) -> Result<Vec<Change>, CliError> {
        let ids: Vec<String> = missing.iter().map(|(_, s)| s.clone()).collect();
        let args = vec![
            "-X".to_string(),
            "-n".into(),
            "-P".into(),
            format!("--delimiter={}", parse::SEP),
            "-o".into(),
            "JobID,State,ExitCode,Start,End,NodeList,AllocTRES".into(),
            "-j".into(),
            ids.join(","),
        ];
        let out = self.settings.cli.admin("sacct", &args).await?;
        let s = lock(&self.state);
        let mut changes = Vec::new();
        for line in out.lines() {
            let f: Vec<&str> = line.split(parse::SEP).collect();
            if f.len() < 7 {
                continue;
            }
            let (slurm, task) = match f[0].split_once('_') {
                Some((j, t)) => (j, t.parse::<u32>().ok()),
                None => (f[0], None),
            };
            let Ok(atrium) = slurm.parse::<u64>() else {
                continue;
            };
            let id = match task {
                Some(t) => JobId::task(atrium, t),
                None => JobId::new(atrium),
            };
            let Some(entry) = s.jobs.get(&id) else {
                continue;
            };
            let state = parse::job_state(f[1]);
            if !state.is_terminal() {
                continue;
            }
            let (code, signal) = f[2].split_once(':').unwrap_or((f[2], "0"));
            let code: i32 = code.parse().unwrap_or(0);
            let signal: i32 = signal.parse().unwrap_or(0);
            let end = f[4].trim().parse::<i64>().unwrap_or_else(|_| now_secs());
            let mut view = entry.view.clone();
            view.state = state;
            view.end_time = Some(end);
            if let Some(start) = view.start_time {
                view.time_used = (end - start).max(0) as u64;
            }
            view.exit = Some(if signal != 0 {
                JobOutcome::Signaled(signal)
            } else {
                JobOutcome::Exited(code)
            });
            let mut record = entry.record.clone();
            record.state = state.name().to_string();
            record.end_time = Some(end * 1000);
            let (exit_code, exit_signal) = JobOutcome::code_and_signal(view.exit);
            record.exit_code = exit_code;
            record.exit_signal = exit_signal;
            changes.push(Change {
                slurm_id: entry.slurm_id.clone(),
                writes: vec![JobChange::Ended {
                    id: record.id,
                    task: record.task,
                    state: record.state.clone(),
                    end_time: end * 1000,
                    exit_code,
                    exit_signal,
                    reason: None,
                    message: None,
                }],
                record,
                view,
            });
        }
        Ok(changes)
    }
}

/// What one poll changes of one row: what to write, and the row and view after.
struct Change {
    slurm_id: String,
    writes: Vec<JobChange>,
    record: JobRecord,
    view: JobView,
}

/// What each job holds now, for quotas: jobs and array tasks, and an array's row only
/// while it stands for tasks still waiting.
fn live_jobs(s: &State) -> Vec<usage::Live> {
    s.jobs
        .values()
        .filter(|e| {
            e.record.task >= 0 || e.record.array_spec.is_none() || e.record.state == "PENDING"
        })
        .filter_map(|e| {
            usage::Live::of(
                &e.record.user_name,
                &e.record.account,
                &e.record.state,
                &e.view.gres,
                e.view.gpu_milli,
            )
        })
        .collect()
}

fn is_array(s: &State, id: JobId) -> bool {
    s.jobs
        .get(&JobId::new(id.job))
        .is_some_and(|e| e.record.array_spec.is_some())
}

/// The atrium row a `squeue` line is about.
fn entry_id(s: &State, row: &SqueueRow) -> Option<JobId> {
    let atrium: u64 = row.array_job_id.parse().ok()?;
    if !s.jobs.contains_key(&JobId::new(atrium)) {
        return None;
    }
    Some(match &row.array_task {
        ArrayTask::One(t) => JobId::task(atrium, *t),
        ArrayTask::None | ArrayTask::Pending(_) => JobId::new(atrium),
    })
}

/// Compare what `squeue` says with the rows: the changes, and the open rows it does
/// not list (to ask `sacct`).
fn diff(s: &State, rows: &[SqueueRow]) -> (Vec<Change>, Vec<(JobId, String)>) {
    let mut changes = Vec::new();
    let mut listed = std::collections::HashSet::new();
    let mut arrays_pending = std::collections::HashSet::new();
    for row in rows {
        let Some(id) = entry_id(s, row) else {
            continue;
        };
        listed.insert(id);
        if matches!(row.array_task, ArrayTask::Pending(_)) {
            arrays_pending.insert(id.job);
        }
        let parent = s.jobs.get(&JobId::new(id.job));
        let Some(base) = s.jobs.get(&id).or(parent) else {
            continue;
        };
        let mut record = base.record.clone();
        if id.task.is_some() && !s.jobs.contains_key(&id) {
            // A task seen for the first time: its row is the array's, copied.
            record.task = i64::from(id.task.unwrap_or(0));
            record.array_spec = None;
            record.start_time = None;
            record.end_time = None;
            record.state = "PENDING".into();
        }
        let (view, writes) = apply_row(&record, row, base);
        if !writes.is_empty() || !s.jobs.contains_key(&id) {
            let mut record = record;
            for w in &writes {
                update_record(&mut record, w);
            }
            changes.push(Change {
                slurm_id: base.slurm_id.clone(),
                writes,
                record,
                view,
            });
        }
    }
    let mut missing = Vec::new();
    for (id, e) in &s.jobs {
        if e.view.state.is_terminal() && e.record.end_time.is_some() || listed.contains(id) {
            continue;
        }
        let is_parent_of_array = id.task.is_none() && e.record.array_spec.is_some();
        if is_parent_of_array && !arrays_pending.contains(&id.job) {
            // No task waits any more: the array is over once every task is.
            let tasks: Vec<&Entry> = s
                .jobs
                .range(JobId::task(id.job, 0)..=JobId::task(id.job, u32::MAX))
                .map(|(_, t)| t)
                .collect();
            if tasks.is_empty() {
                missing.push((*id, e.slurm_id.clone()));
                continue;
            }
            if tasks
                .iter()
                .all(|t| t.view.state.is_terminal() || changes_end(&changes, t.view.id))
            {
                let state = array_state(&tasks, &changes);
                let now = now_secs();
                let mut record = e.record.clone();
                let write = JobChange::Ended {
                    id: record.id,
                    task: -1,
                    state: state.name().to_string(),
                    end_time: now * 1000,
                    exit_code: None,
                    exit_signal: None,
                    reason: None,
                    message: None,
                };
                update_record(&mut record, &write);
                let mut view = e.view.clone();
                view.state = state;
                view.end_time = Some(now);
                changes.push(Change {
                    slurm_id: e.slurm_id.clone(),
                    writes: vec![write],
                    record,
                    view,
                });
            } else if e.view.state == JobState::Pending {
                let mut view = e.view.clone();
                view.state = JobState::Running;
                view.reason = None;
                changes.push(Change {
                    slurm_id: e.slurm_id.clone(),
                    writes: Vec::new(),
                    record: e.record.clone(),
                    view,
                });
            }
            continue;
        }
        if !e.view.state.is_terminal() {
            missing.push((*id, e.slurm_id.clone()));
        }
    }
    (changes, missing)
}

fn changes_end(changes: &[Change], id: JobId) -> bool {
    changes
        .iter()
        .any(|c| c.view.id == id && c.view.state.is_terminal())
}

/// An array's state once all its tasks are over: COMPLETED when every task did,
/// else the first other state.
fn array_state(tasks: &[&Entry], changes: &[Change]) -> JobState {
    let state_of = |t: &Entry| {
        changes
            .iter()
            .find(|c| c.view.id == t.view.id)
            .map_or(t.view.state, |c| c.view.state)
    };
    tasks
        .iter()
        .map(|t| state_of(t))
        .find(|s| *s != JobState::Completed)
        .unwrap_or(JobState::Completed)
}

/// The view a `squeue` line gives, and what to write for it.
fn apply_row(record: &JobRecord, row: &SqueueRow, base: &Entry) -> (JobView, Vec<JobChange>) {
    let state = parse::job_state(&row.state);
    let id = job_id(record);
    let reason = (!row.reason.is_empty() && row.reason != "None").then(|| row.reason.clone());
    let exit = state
        .is_terminal()
        .then(|| parse::outcome(state, row.exit_status))
        .filter(|_| row.start_time.is_some() || row.exit_status != 0);
    let view = JobView {
        id,
        display_id: match &row.array_task {
            ArrayTask::Pending(spec) => format!("{}_[{spec}]", id.job),
            _ => id.to_string(),
        },
        name: row.name.clone(),
        user: record.user_name.clone(),
        account: if row.account.is_empty() {
            record.account.clone()
        } else {
            row.account.clone()
        },
        partition: row.partition.clone(),
        state,
        reason: if state == JobState::Pending {
            reason.as_deref().and_then(PendingReason::parse)
        } else {
            None
        },
        priority: row.priority,
        submit_time: row.submit_time.unwrap_or(base.view.submit_time),
        start_time: row.start_time,
        end_time: if state.is_terminal() {
            row.end_time
        } else {
            None
        },
        time_limit: row.time_limit,
        time_used: row.time_used,
        nodes: row.nodes,
        nodelist: row.nodelist.clone(),
        gres: row.gres.clone(),
        gpu_milli: row.tres.gpu_milli(),
        allocation: None,
        exit,
        restarts: 0,
    };
    let mut writes = Vec::new();
    if !row.account.is_empty()
        && !row.partition.is_empty()
        && (row.account != record.account || row.partition != record.partition)
    {
        writes.push(JobChange::Placed {
            id: record.id,
            task: record.task,
            account: row.account.clone(),
            partition: row.partition.clone(),
        });
    }
    let started = row.start_time.filter(|_| {
        let never_ran = state == JobState::Cancelled && row.nodelist.is_empty();
        !(matches!(state, JobState::Pending | JobState::Unknown) || never_ran)
    });
    if let Some(start) = started {
        if record.start_time != Some(start * 1000) {
            writes.push(JobChange::Started(Box::new(JobStart {
                id: record.id,
                task: record.task,
                start_time: start * 1000,
                time_limit: match row.time_limit {
                    TimeLimit::Seconds(s) => Some(s as i64),
                    TimeLimit::Unlimited => None,
                },
                allocation: String::new(),
                nodelist: row.nodelist.clone(),
                cpus: row.tres.cpus as i64,
                memory_mb: row.tres.memory_mb as i64,
                gpus: row.gres.clone(),
                gpu_milli: row.tres.gpu_milli() as i64,
                stdout_path: row.stdout_path(),
                stderr_path: Some(row.stderr_path()).filter(|e| *e != row.stdout_path()),
            })));
        }
    }
    if state.is_terminal() {
        if record.end_time.is_none() {
            let (exit_code, exit_signal) = JobOutcome::code_and_signal(exit);
            writes.push(JobChange::Ended {
                id: record.id,
                task: record.task,
                state: state.name().to_string(),
                end_time: row.end_time.unwrap_or_else(now_secs) * 1000,
                exit_code,
                exit_signal,
                reason: reason.clone(),
                message: None,
            });
        }
    } else if state != JobState::Unknown {
        let started_now = writes.iter().any(|w| matches!(w, JobChange::Started(_)));
        let stored_state = if started_now {
            "RUNNING".to_string()
        } else {
            record.state.clone()
        };
        if stored_state != state.name() || record.reason != reason {
            writes.push(JobChange::State {
                id: record.id,
                task: record.task,
                state: state.name().to_string(),
                reason: reason.clone(),
            });
        }
    }
    (view, writes)
}

/// `record` after `change` is written.
fn update_record(record: &mut JobRecord, change: &JobChange) {
    match change {
        JobChange::Submitted(r) => *record = (**r).clone(),
        JobChange::Started(s) => {
            record.state = "RUNNING".into();
            record.reason = None;
            record.start_time = Some(s.start_time);
            record.end_time = None;
            record.nodelist = s.nodelist.clone();
            record.cpus = s.cpus;
            record.memory_mb = s.memory_mb;
            record.gpus = s.gpus.clone();
            record.stdout_path = Some(s.stdout_path.clone());
            record.stderr_path = s.stderr_path.clone();
        }
        JobChange::Ended {
            state,
            end_time,
            exit_code,
            exit_signal,
            reason,
            ..
        } => {
            record.state = state.clone();
            record.end_time = Some(*end_time);
            record.exit_code = *exit_code;
            record.exit_signal = *exit_signal;
            record.reason = reason.clone();
        }
        JobChange::Placed {
            account, partition, ..
        } => {
            record.account = account.clone();
            record.partition = partition.clone();
        }
        JobChange::State { state, reason, .. } => {
            record.state = state.clone();
            record.reason = reason.clone();
        }
    }
}

/// The view of a row, before Slurm has said anything about it in this process.
fn view_of_record(r: &JobRecord, now: i64) -> JobView {
    let state = JobState::parse(&r.state).unwrap_or(JobState::Unknown);
    let id = job_id(r);
    JobView {
        id,
        display_id: match (&r.array_spec, r.task) {
            (Some(spec), -1) => format!("{}_[{spec}]", r.id),
            _ => id.to_string(),
        },
        name: r.name.clone(),
        user: r.user_name.clone(),
        account: r.account.clone(),
        partition: r.partition.clone(),
        state,
        reason: r.reason.as_deref().and_then(PendingReason::parse),
        priority: 0,
        submit_time: r.submit_time / 1000,
        start_time: r.start_time.map(|t| t / 1000),
        end_time: r.end_time.map(|t| t / 1000),
        time_limit: r.time_limit.map_or(TimeLimit::Unlimited, |s| {
            TimeLimit::Seconds(s.max(0) as u64)
        }),
        time_used: r.start_time.map_or(0, |s| {
            (r.end_time.unwrap_or(now * 1000) - s).max(0) as u64 / 1000
        }),
        nodes: u32::from(!r.nodelist.is_empty()),
        nodelist: r.nodelist.clone(),
        gres: r.gpus.clone(),
        gpu_milli: 0,
        allocation: None,
        exit: match (r.exit_code, r.exit_signal) {
            (Some(c), _) => Some(JobOutcome::Exited(c as i32)),
            (None, Some(s)) => Some(JobOutcome::Signaled(s as i32)),
            _ => None,
        },
        restarts: 0,
    }
}

fn node_view(n: SlurmNode) -> NodeView {
    NodeView {
        name: n.name,
        state: n.state,
        partitions: n.partitions,
        cpus_total: n.cpus_total,
        cpus_free: n.cpus_total.saturating_sub(n.cpus_alloc),
        memory_mb_total: n.memory_mb_total,
        memory_mb_free: n.memory_mb_total.saturating_sub(n.memory_mb_alloc),
        features: n.features,
        slices: n.slices,
    }
}

fn partition_views(parts: &[SlurmPartition], nodes: &[SlurmNode], s: &State) -> Vec<PartitionView> {
    parts
        .iter()
        .map(|p| {
            let members: Vec<&SlurmNode> = nodes
                .iter()
                .filter(|n| n.partitions.contains(&p.name))
                .collect();
            let mut by_state: BTreeMap<String, Vec<&str>> = BTreeMap::new();
            for n in &members {
                by_state
                    .entry(n.state.name().to_string())
                    .or_default()
                    .push(&n.name);
            }
            let mut slices: BTreeMap<String, (u32, u32)> = BTreeMap::new();
            for n in &members {
                for sl in &n.slices {
                    let e = slices.entry(sl.r#type.clone()).or_default();
                    e.0 += sl.total;
                    e.1 += sl.used;
                }
            }
            let jobs = s.jobs.values().filter(|e| e.view.partition == p.name);
            let (mut pending, mut running) = (0, 0);
            for e in jobs {
                match e.view.state {
                    JobState::Pending => pending += 1,
                    JobState::Running | JobState::Completing => running += 1,
                    _ => {}
                }
            }
            PartitionView {
                name: p.name.clone(),
                default: p.default,
                max_time: p.max_time,
                nodes_total: members.len() as u32,
                nodes_by_state: by_state
                    .into_iter()
                    .map(|(k, v)| {
                        let n = v.len() as u32;
                        (k, n, scheduler::compress_hostlist(&v))
                    })
                    .collect(),
                cpus_total: members.iter().map(|n| u64::from(n.cpus_total)).sum(),
                cpus_used: members.iter().map(|n| u64::from(n.cpus_alloc)).sum(),
                slices: slices
                    .into_iter()
                    .map(|(ty, (total, used))| SliceUsage {
                        r#type: ty,
                        total,
                        used,
                    })
                    .collect(),
                pending_jobs: pending,
                running_jobs: running,
            }
        })
        .collect()
}

async fn poll_loop(backend: Arc<Backend>) {
    let mut last_nodes: Option<Instant> = None;
    loop {
        if last_nodes.is_none_or(|t| t.elapsed() >= backend.settings.nodes_interval) {
            backend.refresh_nodes().await;
            last_nodes = Some(Instant::now());
        }
        backend.poll().await;
        // Wake early after a submission or a control so that pages catch up at once.
        let _ = tokio::time::timeout(backend.settings.poll_interval, backend.wake.notified()).await;
    }
}
