//! The Slurm backend's IO: the commands it runs (`sbatch`, `scancel`, `scontrol`,
//! `squeue`, `sacct`) and the poll that feeds their answers through `reconcile` into
//! the shared live view and the store.
//!
//! Owns: talking to Slurm and writing what it says.
//! Must not touch: what Slurm's answers mean (`reconcile`, `parse`), the internal
//! backend, HTTP types, SQL (the store).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scheduler::{JobId, JobView, NodeCommand, Owner, SqueueFilter, TimeLimit};
use tokio::sync::Notify;

use super::cli::{CliError, SlurmCli};
use super::parse::{self, SlurmNode, SlurmPartition, SqueueRow};
use super::reconcile::{self, Change, Entry};
use super::{lock, Shared, SlurmSettings};
use crate::privilege::Identity;
use crate::sched::handle::{Control, JobUsage, Requester, SchedError};
use crate::sched::submission::Submission;
use crate::store::{JobChange, JobRecord, Store};
use crate::util::now_secs;

/// What the handle's calls and the poll share.
pub(super) struct Backend {
    pub store: Store,
    pub identities: crate::identities::Identities,
    pub settings: SlurmSettings,
    pub state: Shared,
    /// Wakes the poll early (after a submission or a control).
    pub wake: Notify,
    pub metrics: crate::metrics::SlurmMetrics,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlurmBackend")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Slurm's ids become atrium's: after the internal scheduler, Slurm must start above
/// the ids it used, or a new job whose id Slurm gives again is refused.
pub(super) async fn check_first_job_id(store: Store, cli: SlurmCli) {
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

fn sched_error(e: CliError) -> SchedError {
    match e {
        CliError::Refused(m) => SchedError::rejected("script", m),
        CliError::Unreachable(m) => {
            tracing::warn!(error = %m, "Slurm did not answer");
            SchedError::Unavailable
        }
    }
}

/// The arguments, environment and directory of an `sbatch` call for `submission`:
/// `first` (`--parsable`, `--test-only`), atrium's comment and the working
/// directory, then the options as the user wrote them (or as a typed request prints
/// them).
#[allow(clippy::type_complexity)]
fn sbatch_call(
    submission: &Submission,
    workdir: &std::path::Path,
    first: &str,
) -> Result<(Vec<String>, Vec<(String, String)>, PathBuf), SchedError> {
    if !submission.request.arguments.is_empty() {
        return Err(SchedError::rejected(
            "arguments",
            "arguments: under Slurm the script is given to sbatch on its standard input, \
             which takes no arguments; pass them through the environment",
        ));
    }
    if submission.request.pty {
        return Err(SchedError::rejected(
            "interactive",
            "interactive: under Slurm, interactive jobs are Slurm's own: use its salloc or \
             srun --pty",
        ));
    }
    if submission.container.is_some() {
        return Err(SchedError::rejected(
            "container",
            "container: jobs under Slurm run in the site's own environment; \
             leave the container out",
        ));
    }
    let mut args = vec![
        first.to_string(),
        "--comment=atrium".to_string(),
        format!("--chdir={}", workdir.display()),
    ];
    if submission.typed {
        args.extend(super::sbatch::options(&submission.request));
    } else {
        args.extend(submission.options.iter().cloned());
    }
    let env = submission
        .environment
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let cwd = submission
        .submit_dir
        .as_ref()
        .map(PathBuf::from)
        .unwrap_or_else(|| workdir.to_path_buf());
    Ok((args, env, cwd))
}

impl Backend {
    async fn identity(&self, user: &str) -> Result<Identity, SchedError> {
        let id = self
            .identities
            .posix(user)
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "reading a user's identity failed");
                SchedError::Unavailable
            })?
            .ok_or_else(|| {
                SchedError::Forbidden(format!("user {user} has no POSIX identity (uid)"))
            })?;
        Ok(Identity::from_posix(user, id))
    }

    pub(super) async fn submit(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<JobId, SchedError> {
        let user = self.identity(&owner.user).await?;
        let (args, env, cwd) = sbatch_call(&submission, &workdir, "--parsable")?;
        // Until the row and the entry exist, the poll does not adopt this job.
        let _in_flight = super::InFlight::start(&self.state);
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
            let view = reconcile::view_of_record(&record, now_secs());
            s.settling
                .insert(slurm_id.clone(), Instant::now() + SETTLE_WINDOW);
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

    /// `sbatch --test-only` as the user: Slurm judges the submission and answers
    /// when and where it would start; nothing is submitted.
    pub(super) async fn test_only(
        &self,
        owner: Owner,
        submission: Submission,
        workdir: PathBuf,
    ) -> Result<scheduler::TestOnly, SchedError> {
        let user = self.identity(&owner.user).await?;
        let (args, env, cwd) = sbatch_call(&submission, &workdir, "--test-only")?;
        let (_, answer) = self
            .settings
            .cli
            .run_answering_both(
                "sbatch",
                &args,
                &user,
                &env,
                Some(&submission.script),
                Some(&cwd),
            )
            .await
            .map_err(sched_error)?;
        parse::test_only_answer(&answer).ok_or_else(|| {
            tracing::error!(output = %answer, "sbatch --test-only answered without a start");
            SchedError::Unavailable
        })
    }

    fn visible(&self, who: &Requester, job: JobId) -> Result<Entry, SchedError> {
        let s = lock(&self.state);
        who.visible(s.jobs.get(&job), |e| &e.record.user_name)
            .cloned()
    }

    pub(super) fn job(&self, who: &Requester, job: JobId) -> Result<JobView, SchedError> {
        self.visible(who, job).map(|e| e.view)
    }

    pub(super) fn squeue(&self, filter: &SqueueFilter) -> Vec<JobView> {
        reconcile::squeue(&lock(&self.state).jobs, filter)
    }

    pub(super) async fn control(
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
        // A nice below the job's own is Slurm's operators': an administrator's change
        // runs as root, anything else as the job's owner.
        let as_root = matches!(action, Control::Nice(_));
        if as_root && !who.admin {
            return Err(SchedError::Forbidden(
                "Access/permission denied: only an administrator may change a job's nice".into(),
            ));
        }
        let (program, args): (&str, Vec<String>) = match action {
            Control::Cancel => ("scancel", vec![target]),
            Control::CancelWaiting => ("scancel", vec!["--state=PENDING".into(), target]),
            Control::Hold => ("scontrol", vec!["hold".into(), target]),
            Control::Release => ("scontrol", vec!["release".into(), target]),
            Control::Requeue => ("scontrol", vec!["requeue".into(), target]),
            Control::Signal { signal, whom } => {
                let mut args = vec![format!("--signal={signal}")];
                match whom {
                    crate::launch::SignalWhom::Batch => args.push("--batch".into()),
                    crate::launch::SignalWhom::Full => args.push("--full".into()),
                    crate::launch::SignalWhom::Steps => {}
                }
                args.push(target);
                ("scancel", args)
            }
            Control::Top => ("scontrol", vec!["top".into(), target]),
            Control::Nice(nice) => (
                "scontrol",
                vec![
                    "update".into(),
                    format!("JobId={target}"),
                    format!("Nice={nice}"),
                ],
            ),
            Control::Update(changes) => {
                let mut args = vec!["update".into(), format!("JobId={target}")];
                if let Some(t) = changes.time_limit {
                    args.push(format!("TimeLimit={t}"));
                }
                if let Some(p) = &changes.partition {
                    args.push(format!("Partition={p}"));
                }
                if let Some(d) = &changes.dependency {
                    args.push(format!(
                        "Dependency={}",
                        d.as_ref().map(ToString::to_string).unwrap_or_default()
                    ));
                }
                if let Some(n) = &changes.nodes {
                    args.push(format!("NumNodes={n}"));
                }
                if let Some(n) = &changes.name {
                    args.push(format!("JobName={n}"));
                }
                if let Some(c) = &changes.comment {
                    args.push(format!("Comment={c}"));
                }
                ("scontrol", args)
            }
        };
        let user = self.identity(&entry.record.user_name).await?;
        self.settings
            .cli
            .run(program, &args, (!as_root).then_some(&user), &[], None, None)
            .await
            .map_err(|e| match e {
                CliError::Refused(m) => SchedError::Conflict(m),
                other => sched_error(other),
            })?;
        lock(&self.state)
            .settling
            .insert(entry.slurm_id.clone(), Instant::now() + SETTLE_WINDOW);
        self.wake.notify_one();
        Ok(())
    }

    pub(super) async fn set_node(
        &self,
        node: &str,
        command: NodeCommand,
    ) -> Result<(), SchedError> {
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
        let partitions = reconcile::partition_views(&parts, &nodes, &s.jobs);
        s.nodes = nodes.into_iter().map(reconcile::node_view).collect();
        s.partitions = partitions;
    }

    /// One poll: `squeue` for atrium's jobs that are not over (see [`Backend::listed`]),
    /// `sacct` for those it no longer lists, the changes written in one transaction. A
    /// `sweep` lists the whole queue, for jobs to adopt.
    async fn poll(&self, sweep: bool) {
        let started = Instant::now();
        let rows = match self.listed(sweep).await {
            Ok(rows) => rows,
            Err(e) => {
                self.metrics.poll(started.elapsed().as_secs_f64(), false);
                self.mark_unknown(&e.to_string());
                return;
            }
        };
        self.adopt(&rows, sweep).await;
        let (changes, missing) = {
            let s = lock(&self.state);
            reconcile::diff(&s.jobs, &rows, now_secs())
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
        let changed = changes.len();
        reconcile::apply(&mut s.jobs, changes, &rows, now);
        let elapsed = started.elapsed().as_secs_f64();
        self.metrics.poll(elapsed, true);
        tracing::debug!(
            sweep,
            rows = rows.len(),
            changed,
            elapsed_ms = elapsed * 1000.0,
            "Slurm poll"
        );
    }

    /// A poll of the jobs just submitted or acted on alone, each by its id (`squeue -j
    /// ID`: slurmctld packs that job only), when there are a few; `false` when there
    /// are none or too many (then the full poll serves). A job drops out once it no
    /// longer waits, or at the end of its settle window.
    async fn poll_settling(&self) -> bool {
        use futures_util::stream::{self, StreamExt as _, TryStreamExt as _};
        let ids: Vec<String> = {
            let mut s = lock(&self.state);
            let now = Instant::now();
            s.settling.retain(|_, until| *until > now);
            s.settling.keys().cloned().collect()
        };
        if ids.is_empty() || ids.len() > PARALLEL_QUERIES {
            return false;
        }
        let format = parse::squeue_format();
        let listed: Result<Vec<Vec<SqueueRow>>, CliError> = stream::iter(ids)
            .map(|id| {
                let args = vec![
                    "-h".to_string(),
                    "-t".into(),
                    "all".into(),
                    "-O".into(),
                    format.clone(),
                    format!("--jobs={id}"),
                ];
                async move {
                    let out = self.settings.cli.admin("squeue", &args).await?;
                    Ok::<_, CliError>(out.lines().filter_map(SqueueRow::parse).collect())
                }
            })
            .buffer_unordered(PARALLEL_QUERIES)
            .try_collect()
            .await;
        let Ok(rows) = listed.map(|l| l.into_iter().flatten().collect::<Vec<_>>()) else {
            // The next full poll says whether Slurm answers.
            return false;
        };
        let changes = reconcile::diff_listed(&lock(&self.state).jobs, &rows, now_secs());
        let writes: Vec<JobChange> = changes.iter().flat_map(|c| c.writes.clone()).collect();
        if !writes.is_empty() {
            if let Err(e) = self.store.commit_scheduler_batch(&[], &writes).await {
                tracing::error!(error = %e, "recording Slurm's job states failed; trying again");
                return true;
            }
        }
        let mut s = lock(&self.state);
        reconcile::apply(&mut s.jobs, changes, &rows, now_secs());
        // Settled: Slurm started it, or ended it, or lists it no more.
        let waiting: std::collections::HashSet<&str> = rows
            .iter()
            .filter(|r| parse::job_state(&r.state) == scheduler::JobState::Pending)
            .map(|r| r.job_id.as_str())
            .collect();
        let still: Vec<String> = s
            .settling
            .keys()
            .filter(|id| waiting.contains(id.as_str()))
            .cloned()
            .collect();
        s.settling.retain(|id, _| still.contains(id));
        true
    }

    /// Slurm's rows for the poll. `squeue` asks for every job on the cluster unless it
    /// names one job or one user; then slurmctld packs only those. So the poll asks
    /// per user (by uid) for each user with a job atrium follows, [`USER_QUERIES`] at
    /// most, [`PARALLEL_QUERIES`] at a time; with no such user it asks nothing. With
    /// more users, or a user without a uid, and on a `sweep`, one call lists them all.
    async fn listed(&self, sweep: bool) -> Result<Vec<SqueueRow>, CliError> {
        use futures_util::stream::{self, StreamExt as _, TryStreamExt as _};
        let users = (!sweep)
            .then(|| reconcile::followed_users(&lock(&self.state).jobs))
            .filter(|users| users.len() <= USER_QUERIES);
        let mut uids = Vec::new();
        for user in users.iter().flatten() {
            match self.identity(user).await {
                Ok(id) => uids.push(Some(id.uid)),
                Err(_) => {
                    uids = vec![None];
                    break;
                }
            }
        }
        if users.is_none() {
            uids = vec![None];
        }
        let lists: Vec<Vec<SqueueRow>> = stream::iter(uids)
            .map(|uid| self.squeue_rows(uid))
            .buffer_unordered(PARALLEL_QUERIES)
            .try_collect()
            .await?;
        Ok(lists.into_iter().flatten().collect())
    }

    /// `squeue` of every state for user `uid`, or for everyone.
    async fn squeue_rows(&self, uid: Option<u32>) -> Result<Vec<SqueueRow>, CliError> {
        let mut args = vec![
            "-h".to_string(),
            "-t".into(),
            "all".into(),
            "-O".into(),
            parse::squeue_format(),
        ];
        if let Some(uid) = uid {
            args.push(format!("--user={uid}"));
        }
        let out = self.settings.cli.admin("squeue", &args).await?;
        Ok(out.lines().filter_map(SqueueRow::parse).collect())
    }

    /// Jobs carrying atrium's comment without a row: `sbatch` succeeded and the portal
    /// stopped before it recorded the job, so its user never heard back (or the user
    /// submitted it by hand with the comment). They are adopted, so that the user sees
    /// the job running and can cancel it rather than find a second copy later. Array
    /// jobs are left to Slurm. The rows are those of the users the poll follows, and
    /// on a `sweep` (at start, then every [`SWEEP_INTERVAL`]) the whole queue's.
    async fn adopt(&self, rows: &[SqueueRow], sweep: bool) {
        let candidates: Vec<&SqueueRow> = {
            let mut s = lock(&self.state);
            // Forget the ids Slurm no longer lists (only a sweep lists them all).
            if sweep && !s.not_adopted.is_empty() {
                let listed: std::collections::HashSet<&str> =
                    rows.iter().map(|r| r.job_id.as_str()).collect();
                s.not_adopted.retain(|id| listed.contains(id.as_str()));
            }
            let earliest = s.submitting.values().min().copied();
            reconcile::adoption_candidates(rows, &s.jobs, &s.not_adopted, earliest)
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
        let view = reconcile::view_of_record(&record, now_secs());
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
        reconcile::mark_unknown(&mut s.jobs);
    }

    /// What `sacct` recorded of `job`'s use (its allocation and its steps); `None`
    /// when it has nothing (no accounting storage, or not started).
    pub(super) async fn usage(&self, job: JobId) -> Result<Option<JobUsage>, SchedError> {
        let args = vec![
            "-n".to_string(),
            "-P".into(),
            format!("--delimiter={}", parse::SEP),
            "-o".into(),
            parse::SACCT_USAGE_FIELDS.join(","),
            "-j".into(),
            job.to_string(),
        ];
        match self.settings.cli.admin("sacct", &args).await {
            Ok(out) => Ok(parse::sacct_usage(&out)),
            Err(e) => {
                tracing::warn!(%job, error = %e, "sacct could not tell a job's usage");
                Ok(None)
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
        Ok(reconcile::sacct_changes(&s.jobs, &out, now_secs()))
    }
}

pub(super) async fn poll_loop(backend: Arc<Backend>) {
    let mut last_nodes: Option<Instant> = None;
    let mut last_sweep: Option<Instant> = None;
    let mut last_poll: Option<Instant> = None;
    // Until then, polls come every SETTLE_POLL: a job just submitted or acted on
    // usually changes state within a second (Slurm starts it, or ends it).
    let mut settle_until: Option<Instant> = None;
    loop {
        if last_nodes.is_none_or(|t| t.elapsed() >= backend.settings.nodes_interval) {
            backend.refresh_nodes().await;
            last_nodes = Some(Instant::now());
        }
        // Between full polls, a settling job alone is asked about; a full poll comes
        // every interval, and right after a wake-up.
        let full_due = last_poll.is_none_or(|t| t.elapsed() >= backend.settings.poll_interval);
        let settling_only = !full_due && backend.poll_settling().await;
        if !settling_only {
            let sweep = last_sweep.is_none_or(|t| t.elapsed() >= SWEEP_INTERVAL);
            if sweep {
                last_sweep = Some(Instant::now());
            }
            backend.poll(sweep).await;
            last_poll = Some(Instant::now());
        }
        let settle = if settling_only {
            SETTLE_POLL_JOBS
        } else {
            SETTLE_POLL
        };
        let interval = match settle_until {
            Some(t) if Instant::now() < t => settle.min(backend.settings.poll_interval),
            _ => backend.settings.poll_interval,
        };
        // Wake early after a submission or a control so that pages catch up at once,
        // then poll often for a while so that its next state shows within a second.
        if tokio::time::timeout(interval, backend.wake.notified())
            .await
            .is_ok()
        {
            settle_until = Some(Instant::now() + SETTLE_WINDOW);
        }
    }
}

/// How often the poll lists the whole queue (and at start): jobs with atrium's comment
/// that it has no row for, of users it follows no job of, are adopted then.
const SWEEP_INTERVAL: Duration = Duration::from_secs(300);
/// The most users the poll asks `squeue` about one by one; with more, one call lists
/// the whole queue.
const USER_QUERIES: usize = 32;
/// How many of those calls run at once.
const PARALLEL_QUERIES: usize = 8;

/// How often the poll runs while jobs just submitted or acted on settle.
const SETTLE_POLL: Duration = Duration::from_millis(250);
/// The same when those jobs are few: each is asked about alone, which costs Slurm
/// next to nothing.
const SETTLE_POLL_JOBS: Duration = Duration::from_millis(100);
/// How long after a submission or a control the poll runs every [`SETTLE_POLL`].
const SETTLE_WINDOW: Duration = Duration::from_secs(3);
