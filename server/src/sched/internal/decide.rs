//! The internal scheduler's decisions, apart from its IO: given the cluster (and what
//! the actor keeps of each open job), a command and `now`, what happens — the events
//! to log, the job rows to write, the replies (at once, or once the batch is
//! durable), the steps to launch and the signals to send. Everything here runs
//! without a store, a clock or a task; the actor (`actor.rs`) writes the [`Batch`]
//! and carries it out.
//!
//! Owns: the mapping from commands, step ends, passes and purges to events, row
//! changes, launches and signals.
//! Must not touch: the store, the clock (time is `now`), processes or channels other
//! than the reply senders it is handed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use scheduler::{
    Cluster, Decision, JobId, JobOutcome, JobState, JobView, Owner, PendingReason, Time,
};

use super::command::{Command, Reply, StepEnd};
use super::event::{Applied, ApplyError, Event};
use super::steps::StepSignal;
use crate::launch::SignalWhom;
use crate::notifications::{Notice, NoticeEvent};
use crate::sched::handle::{Control, JobUpdate, Requester, SchedError};
use crate::sched::step_env::{self, PatternValues};
use crate::sched::submission::Submission;
use crate::store::{JobChange, JobRecord, JobStart};

/// Ended jobs stay in the scheduler's memory this long (Slurm's default `MinJobAge`);
/// the database keeps them for good, and the API reads ended jobs from there.
pub const MIN_JOB_AGE_SECS: i64 = 300;

/// What the actor keeps of a job that is not over: what its steps need. Jobs that
/// share all of it share one (`Decider::shared_meta`), and a snapshot keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct JobMeta {
    user: String,
    name: String,
    workdir: PathBuf,
    output: Option<String>,
    error: Option<String>,
    /// `--mail-type` and `--mail-user`: whether, and to whom, notices go.
    mail: Option<scheduler::MailTypes>,
    mail_user: Option<String>,
}

impl JobMeta {
    /// From a job's user, name, working directory and request.
    pub(super) fn new(
        user: &str,
        name: &str,
        workdir: &str,
        request: &scheduler::JobRequest,
    ) -> Self {
        JobMeta {
            user: user.to_string(),
            name: name.to_string(),
            workdir: PathBuf::from(workdir),
            output: request.output.clone(),
            error: request.error.clone(),
            mail: request.mail_type.filter(|m| m.0 != 0),
            mail_user: request.mail_user.clone(),
        }
    }
}

/// One batch: what to write, and what to do once it is written.
#[derive(Default)]
pub(super) struct Batch {
    /// Log entries (sequence number, event as JSON).
    pub log: Vec<(i64, String)>,
    /// Events recorded (applied to the cluster), serialized or not.
    pub recorded: usize,
    pub changes: Vec<JobChange>,
    /// Answers given once the batch is written (`true`) or not (`false`).
    pub replies: Vec<Box<dyn FnOnce(bool) + Send>>,
    pub launches: Vec<(JobId, scheduler::Allocation, JobStart)>,
    pub signals: Vec<(JobId, StepSignal)>,
    /// Notifications, sent once the batch is written.
    pub notices: Vec<Notice>,
    /// Steps that ended: their directories go once the batch is written.
    pub ended_steps: Vec<JobId>,
    /// Something changed: run a scheduling pass before writing.
    pub touched: bool,
}

/// The scheduler's state in memory and the rules that change it. The only writer is
/// the actor.
pub(super) struct Decider {
    pub cluster: Cluster,
    /// Sequence number of the last event logged.
    pub seq: i64,
    /// The id the next submission gets.
    pub next_id: u64,
    /// Open jobs (and arrays) by job number.
    pub meta: HashMap<u64, Arc<JobMeta>>,
    /// The meta last added, shared with the next job that has the same.
    last_meta: Option<Arc<JobMeta>>,
    /// `--mail-type=TIME_LIMIT*`: when each running job reaches a share of its limit
    /// (kept in memory only: a restart forgets the marks of running jobs).
    pub time_marks: std::collections::BTreeSet<(Time, JobId, u8)>,
    /// The wall clock in milliseconds when the actor took its batch: a start's time
    /// to the millisecond (two runs of one job id never share it, and a job token
    /// names its run by it); `None` (tests): the decision's second.
    pub wall_ms: Option<i64>,
}

impl Decider {
    pub fn new(cluster: Cluster, seq: i64, next_id: u64) -> Decider {
        Decider {
            cluster,
            seq,
            next_id,
            meta: HashMap::new(),
            last_meta: None,
            time_marks: Default::default(),
            wall_ms: None,
        }
    }

    /// `now` in milliseconds: the batch's wall clock when it is in that second (a
    /// start and an end to the millisecond), else the second itself.
    fn ms(&self, now: Time) -> i64 {
        self.wall_ms
            .filter(|ms| ms.div_euclid(1000) == now)
            .unwrap_or(now * 1000)
    }

    /// `meta` as a job keeps it: the one the previous job got if it is the same.
    pub fn shared_meta(&mut self, meta: JobMeta) -> Arc<JobMeta> {
        if let Some(last) = &self.last_meta {
            if **last == meta {
                return last.clone();
            }
        }
        let meta = Arc::new(meta);
        self.last_meta = Some(meta.clone());
        meta
    }

    /// A notice of `event` for `job`, if the job asked for it (`--mail-type`). Call
    /// it before the job's meta is forgotten. `exit` is the exit code and signal.
    fn notify(
        &self,
        batch: &mut Batch,
        job: JobId,
        event: NoticeEvent,
        exit: (Option<i64>, Option<i64>),
        now: Time,
    ) {
        let Some(meta) = self.meta.get(&job.job) else {
            return;
        };
        let Some(types) = meta.mail else {
            return;
        };
        if !event.wanted(types, job.task.is_some()) {
            return;
        }
        let view = self.cluster.job(job, now);
        let state = view.as_ref().map_or("UNKNOWN", |v| v.state.name());
        let seconds = view.as_ref().map(|v| match event {
            NoticeEvent::Began => v.start_time.unwrap_or(now) - v.submit_time,
            _ => v
                .start_time
                .map_or(0, |start| v.end_time.unwrap_or(now) - start),
        });
        batch.notices.push(Notice {
            job: job.to_string(),
            job_id: job.job,
            name: view
                .as_ref()
                .map_or_else(|| meta.name.clone(), |v| v.name.clone()),
            user: meta.user.clone(),
            mail_user: meta.mail_user.clone(),
            event,
            state: state.to_string(),
            exit_code: exit.0,
            exit_signal: exit.1,
            seconds,
            link: None,
        });
    }

    /// Arm the `TIME_LIMIT*` notices of a job that starts now.
    fn arm_time_marks(&mut self, job: JobId, now: Time) {
        let Some(types) = self.meta.get(&job.job).and_then(|m| m.mail) else {
            return;
        };
        let Some(limit) = self.cluster.job(job, now).and_then(|v| match v.time_limit {
            scheduler::TimeLimit::Seconds(s) => Some(s as i64),
            scheduler::TimeLimit::Unlimited => None,
        }) else {
            return;
        };
        for percent in [50u8, 80, 90, 100] {
            if NoticeEvent::TimeLimit(percent).wanted(types, job.task.is_some()) {
                let at = now + limit * i64::from(percent) / 100;
                self.time_marks.insert((at, job, percent));
            }
        }
    }

    /// The `TIME_LIMIT*` notices due at `now`, for jobs still running.
    fn time_marks_due(&mut self, batch: &mut Batch, now: Time) {
        while let Some(&(at, job, percent)) = self.time_marks.first() {
            if at > now {
                break;
            }
            self.time_marks.pop_first();
            let running = self
                .cluster
                .job(job, now)
                .is_some_and(|v| v.state == JobState::Running);
            if running {
                self.notify(
                    batch,
                    job,
                    NoticeEvent::TimeLimit(percent),
                    (None, None),
                    now,
                );
            }
        }
    }

    /// Whether any job is open (a tick then runs a pass: time limits, begin times).
    pub fn has_open_jobs(&self) -> bool {
        !self.meta.is_empty()
    }

    /// The user whose step a launch starts (empty if the job is forgotten).
    pub fn user_of(&self, job: JobId) -> String {
        self.meta
            .get(&job.job)
            .map(|m| m.user.clone())
            .unwrap_or_default()
    }

    /// Apply `event` to the cluster and log it in `batch`.
    fn record(&mut self, batch: &mut Batch, event: &Event) -> Result<Applied, ApplyError> {
        let applied = event.apply(&mut self.cluster)?;
        self.seq += 1;
        batch.recorded += 1;
        match serde_json::to_string(event) {
            Ok(json) => batch.log.push((self.seq, json)),
            Err(e) => tracing::error!(error = %e, "cannot serialize a scheduler event"),
        }
        batch.touched = true;
        Ok(applied)
    }

    /// Decide what `cmd` does at `now`. Read-only commands are answered at once; a
    /// change is answered once `batch` is durable.
    pub fn handle(&mut self, cmd: Command, batch: &mut Batch, now: Time) {
        match cmd {
            Command::Submit {
                owner,
                submission,
                workdir,
                reply,
            } => self.submit(batch, owner, &submission, &workdir, reply, now),
            Command::TestOnly {
                owner,
                submission,
                reply,
            } => {
                let answer = self
                    .cluster
                    .test_only(submission.request.clone(), &owner, now)
                    .map_err(|e| SchedError::rejected(e.field(), e.to_string()));
                let _ = reply.send(answer);
            }
            Command::Control {
                who,
                job,
                action,
                reply,
            } => self.control(batch, &who, job, action, reply, now),
            Command::Job { who, job, reply } => {
                let _ = reply.send(self.visible(&who, job, now));
            }
            Command::Squeue { filter, reply } => {
                let _ = reply.send(Ok(self.cluster.squeue(&filter, now)));
            }
            Command::SqueuePage {
                filter,
                offset,
                limit,
                reply,
            } => {
                let _ = reply.send(Ok(self.cluster.squeue_page(&filter, offset, limit, now)));
            }
            // The actor's own (it writes the last snapshot); never handed here.
            Command::Shutdown { reply } => {
                let _ = reply.send(Ok(()));
            }
            Command::Nodes { reply } => {
                let _ = reply.send(Ok((self.cluster.nodes(), self.cluster.sinfo())));
            }
            Command::QueueCounts { reply } => {
                let _ = reply.send(Ok(self.cluster.queue_counts()));
            }
            Command::Priority { filter, reply } => {
                let _ = reply.send(Ok(self.cluster.priority_factors_list(&filter, now)));
            }
            Command::Shares { reply } => {
                let _ = reply.send(Ok(self.cluster.shares(now)));
            }
            Command::Limits { limits, reply } => {
                if self.cluster.config().limits == *limits {
                    let _ = reply.send(Ok(()));
                    return;
                }
                let result = self.record(batch, &Event::Limits { limits, now });
                reply_when_durable(batch, reply, result.map(|_| ()));
            }
            Command::LimitUsage { owners, reply } => {
                let each = owners
                    .iter()
                    .map(|owner| self.cluster.limit_usage(owner, now))
                    .collect();
                let _ = reply.send(Ok(each));
            }
            Command::Node {
                node,
                command,
                reply,
            } => {
                let result = self.record(batch, &Event::Node { node, command, now });
                let result = match result {
                    Ok(Applied::Decisions(decisions)) => {
                        self.decided(batch, decisions, now);
                        Ok(())
                    }
                    Ok(_) => Ok(()),
                    Err(e) => Err(e),
                };
                reply_when_durable(batch, reply, result);
            }
            Command::StepEnded(end) => self.step_ended(batch, end, now),
        }
    }

    fn submit(
        &mut self,
        batch: &mut Batch,
        owner: Owner,
        submission: &Submission,
        workdir: &Path,
        reply: Reply<JobId>,
        now: Time,
    ) {
        let id = self.next_id;
        let event = Event::Submit {
            id,
            request: Box::new(submission.request.clone()),
            owner: owner.clone(),
            now,
        };
        match self.record(batch, &event) {
            Ok(_) => {
                self.next_id += 1;
                let record = self.submitted_record(id, &owner, submission, workdir, now);
                let meta = JobMeta::new(
                    &record.user_name,
                    &record.name,
                    &record.workdir,
                    &submission.request,
                );
                let meta = self.shared_meta(meta);
                self.meta.insert(id, meta);
                batch.changes.push(JobChange::Submitted(Box::new(record)));
                let job = JobId::new(id);
                batch.replies.push(Box::new(move |ok| {
                    let _ = reply.send(if ok {
                        Ok(job)
                    } else {
                        Err(SchedError::Unavailable)
                    });
                }));
            }
            Err(e @ ApplyError::Submit(scheduler::SubmitError::TooManyJobs { .. })) => {
                let _ = reply.send(Err(SchedError::Full(e.to_string())));
            }
            Err(e) => {
                let _ = reply.send(Err(SchedError::rejected(e.field(), e.to_string())));
            }
        }
    }

    fn control(
        &mut self,
        batch: &mut Batch,
        who: &Requester,
        job: JobId,
        action: Control,
        reply: Reply<()>,
        now: Time,
    ) {
        let view = match self.visible(who, job, now) {
            Ok(view) => view,
            Err(e) => {
                let _ = reply.send(Err(e));
                return;
            }
        };
        let event = match action {
            Control::Signal { signal, whom } => {
                let _ = reply.send(signal_running(batch, job, view.state, signal, whom));
                return;
            }
            Control::Update(changes) => {
                self.update_pending(batch, who, job, &view, &changes, reply, now);
                return;
            }
            Control::Cancel => Event::Cancel {
                job,
                now,
                waiting_only: false,
            },
            Control::CancelWaiting => Event::Cancel {
                job,
                now,
                waiting_only: true,
            },
            Control::Hold => Event::Hold {
                job,
                admin: who.admin,
                now,
            },
            Control::Release => Event::Release {
                job,
                admin: who.admin,
                now,
            },
            Control::Requeue => Event::Requeue { job, now },
            Control::Top => Event::Top { job, now },
            Control::Nice(_) if !who.admin => {
                let _ = reply.send(Err(SchedError::Forbidden(
                    "Access/permission denied: only an administrator may change a job's nice"
                        .into(),
                )));
                return;
            }
            Control::Nice(nice) => Event::Nice { job, nice, now },
        };
        match self.record(batch, &event) {
            Ok(applied) => {
                self.after_control(batch, job, action, applied, now);
                reply_durable(batch, reply);
            }
            Err(e) => {
                let _ = reply.send(Err(SchedError::Conflict(e.to_string())));
            }
        }
    }

    /// `scontrol update` of a pending job: its request changed and recorded.
    #[allow(clippy::too_many_arguments)]
    fn update_pending(
        &mut self,
        batch: &mut Batch,
        who: &Requester,
        job: JobId,
        view: &JobView,
        changes: &JobUpdate,
        reply: Reply<()>,
        now: Time,
    ) {
        let Some(asked) = view.request.as_deref() else {
            let _ = reply.send(Err(SchedError::Conflict(
                "the job's request is not known".into(),
            )));
            return;
        };
        if view.state != JobState::Pending {
            let _ = reply.send(Err(SchedError::Conflict(
                "Job is no longer pending execution".into(),
            )));
            return;
        }
        // A user may shorten a job's time limit, not lengthen it (as Slurm).
        let longer = match (changes.time_limit, view.time_limit) {
            (Some(scheduler::TimeLimit::Unlimited), scheduler::TimeLimit::Seconds(_)) => true,
            (Some(scheduler::TimeLimit::Seconds(new)), scheduler::TimeLimit::Seconds(old)) => {
                new > old
            }
            _ => false,
        };
        if longer && !who.admin {
            let _ = reply.send(Err(SchedError::Forbidden(
                "Access/permission denied: only an administrator may lengthen a time limit".into(),
            )));
            return;
        }
        let request = changes.applied_to(asked);
        let event = Event::Update {
            job,
            request: Box::new(request.clone()),
            now,
        };
        match self.record(batch, &event) {
            Ok(_) => {
                if let Some(v) = self.cluster.job(job, now) {
                    batch.changes.push(JobChange::Updated {
                        id: job.job as i64,
                        task: job.task.map_or(-1, i64::from),
                        name: v.name.clone(),
                        partition: v.partition.clone(),
                        time_limit: match v.time_limit {
                            scheduler::TimeLimit::Seconds(s) => Some(s as i64),
                            scheduler::TimeLimit::Unlimited => None,
                        },
                        request: serde_json::to_string(&request).unwrap_or_default(),
                    });
                }
                reply_durable(batch, reply);
            }
            Err(e) => {
                let _ = reply.send(Err(SchedError::rejected(e.field(), e.to_string())));
            }
        }
    }

    /// The job's view if `who` may see it; another user's job does not exist.
    fn visible(&self, who: &Requester, job: JobId, now: Time) -> Result<JobView, SchedError> {
        // A task still in its array's record of waiting tasks is its array's to see.
        let view = self.cluster.job(job, now).or_else(|| {
            self.cluster
                .waits_in_array(job)
                .then(|| self.cluster.job(JobId::new(job.job), now))
                .flatten()
        });
        who.visible(view, |v| &v.user)
    }

    fn after_control(
        &mut self,
        batch: &mut Batch,
        job: JobId,
        action: Control,
        applied: Applied,
        now: Time,
    ) {
        match (action, applied) {
            (Control::Cancel | Control::CancelWaiting, Applied::Cancelled(effect)) => {
                for j in effect.cancelled {
                    // A task taken out of its array's record gets a row of its own.
                    if effect.taken_out.contains(&j) {
                        batch.changes.push(JobChange::TakenOut {
                            id: j.job as i64,
                            task: j.task.map_or(-1, i64::from),
                            state: "CANCELLED".into(),
                            end_time: self.ms(now),
                        });
                    }
                    batch
                        .changes
                        .push(ended(j, "CANCELLED", self.ms(now), None, None));
                    self.notify(batch, j, NoticeEvent::Ended, (None, None), now);
                }
                for j in effect.signal {
                    batch.signals.push((j, StepSignal::Cancel));
                }
                self.array_row(batch, job, now);
            }
            (Control::Requeue, _) => match self.cluster.job(job, now).map(|v| v.state) {
                Some(JobState::Completing) => batch.signals.push((job, StepSignal::Cancel)),
                Some(state) => {
                    batch.changes.push(state_change(job, state, None));
                    self.notify(batch, job, NoticeEvent::Requeued, (None, None), now);
                }
                None => {}
            },
            (Control::Hold, _) | (Control::Release, _) => {
                let reason = self
                    .cluster
                    .job(job, now)
                    .and_then(|v| v.reason)
                    .map(|r| r.name().to_string());
                batch.changes.push(JobChange::State {
                    id: job.job as i64,
                    task: job.task.map_or(-1, i64::from),
                    state: "PENDING".into(),
                    reason,
                });
            }
            _ => {}
        }
    }

    fn step_ended(&mut self, batch: &mut Batch, end: StepEnd, now: Time) {
        let before = self.cluster.job(end.job, now).map(|v| v.state);
        if !matches!(before, Some(JobState::Running | JobState::Completing)) {
            tracing::warn!(job = %end.job, ?before, "a step ended for a job that is not running");
            return;
        }
        if end.time_limit && before == Some(JobState::Running) {
            // Let the scheduler see the time limit first so that the job is TIMEOUT.
            self.pass(batch, now);
        }
        let event = Event::Finished {
            job: end.job,
            outcome: end.outcome,
            now,
        };
        match self.record(batch, &event) {
            Ok(Applied::Finished(JobState::Pending)) => {
                batch
                    .changes
                    .push(state_change(end.job, JobState::Pending, None));
                self.notify(batch, end.job, NoticeEvent::Requeued, (None, None), now);
            }
            Ok(Applied::Finished(state)) => {
                let (code, signal) = match end.outcome {
                    JobOutcome::Exited(c) => (Some(i64::from(c)), None),
                    JobOutcome::Signaled(s) => (None, Some(i64::from(s))),
                    JobOutcome::OutOfMemory => (None, Some(9)),
                };
                let mut change = ended(end.job, state.name(), self.ms(now), code, end.message);
                if let JobChange::Ended { exit_signal, .. } = &mut change {
                    *exit_signal = signal;
                }
                batch.changes.push(change);
                let event = NoticeEvent::of_end(state.name());
                self.notify(batch, end.job, event, (code, signal), now);
                self.array_row(batch, end.job, now);
                self.forget_if_over(end.job, now);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::error!(job = %end.job, error = %e, "recording the end of a step failed")
            }
        }
    }

    /// When the last task of an array is over, its own row is over too.
    fn array_row(&mut self, batch: &mut Batch, job: JobId, now: Time) {
        let parent = JobId::new(job.job);
        if job.task.is_none() && !self.meta.contains_key(&job.job) {
            return;
        }
        if let Some(v) = self.cluster.job(parent, now) {
            if v.state.is_terminal() && job.task.is_some() {
                batch
                    .changes
                    .push(ended(parent, v.state.name(), self.ms(now), None, None));
                let event = NoticeEvent::of_end(v.state.name());
                self.notify(batch, parent, event, (None, None), now);
                self.meta.remove(&job.job);
            }
        }
    }

    fn forget_if_over(&mut self, job: JobId, now: Time) {
        let parent = JobId::new(job.job);
        if self
            .cluster
            .job(parent, now)
            .is_none_or(|v| v.state.is_terminal())
        {
            self.meta.remove(&job.job);
        }
    }

    /// Forget jobs ended more than [`MIN_JOB_AGE_SECS`] before `now`, through the log
    /// like every other change, so that a replay forgets exactly the same ones.
    pub fn purge(&mut self, batch: &mut Batch, now: Time) {
        let ended_before = now - MIN_JOB_AGE_SECS;
        if !self.cluster.any_ended_by(ended_before) {
            return;
        }
        match self.record(batch, &Event::Purge { ended_before }) {
            Ok(Applied::Purged(n)) => tracing::debug!(n, "forgot ended jobs"),
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "forgetting ended jobs failed"),
        }
    }

    /// One scheduling pass at `now`, and what it decided.
    pub fn pass(&mut self, batch: &mut Batch, now: Time) {
        let decisions = match self.record(batch, &Event::Pass { now }) {
            Ok(Applied::Decisions(d)) => d,
            _ => return,
        };
        self.decided(batch, decisions, now);
        self.time_marks_due(batch, now);
    }

    /// Carry out what the cluster decided: starts, cancels, kills.
    fn decided(&mut self, batch: &mut Batch, decisions: Vec<Decision>, now: Time) {
        for d in decisions {
            match d {
                Decision::Start { job, allocation } => {
                    let start_ms = self.ms(now);
                    let start = self.job_start(job, &allocation, start_ms, now);
                    batch
                        .changes
                        .push(JobChange::Started(Box::new(start.clone())));
                    batch.launches.push((job, allocation, start));
                    self.notify(batch, job, NoticeEvent::Began, (None, None), now);
                    self.arm_time_marks(job, now);
                }
                Decision::Cancel { job, reason } => {
                    let (state, message) = match reason {
                        PendingReason::DeadLine => (
                            "DEADLINE",
                            "removed: it could not end before its --deadline".to_string(),
                        ),
                        _ => (
                            "CANCELLED",
                            format!("cancelled by the scheduler: {}", reason.name()),
                        ),
                    };
                    let mut change = ended(job, state, self.ms(now), None, Some(message));
                    if let JobChange::Ended { reason: r, .. } = &mut change {
                        *r = Some(reason.name().to_string());
                    }
                    batch.changes.push(change);
                    let event =
                        if matches!(reason, scheduler::PendingReason::DependencyNeverSatisfied) {
                            NoticeEvent::InvalidDependency
                        } else {
                            NoticeEvent::Ended
                        };
                    self.notify(batch, job, event, (None, None), now);
                    self.forget_if_over(job, now);
                }
                Decision::TimeLimit { job } => batch.signals.push((job, StepSignal::TimeLimit)),
                Decision::NodeFail { job, requeued } => {
                    batch.signals.push((job, StepSignal::Cancel));
                    let state = if requeued {
                        JobState::Pending
                    } else {
                        JobState::NodeFail
                    };
                    batch.changes.push(state_change(job, state, None));
                    let event = if requeued {
                        NoticeEvent::Requeued
                    } else {
                        NoticeEvent::Failed
                    };
                    self.notify(batch, job, event, (None, None), now);
                }
            }
        }
    }

    /// The row change and step details of a job that starts at `start_ms`.
    pub fn job_start(
        &self,
        job: JobId,
        allocation: &scheduler::Allocation,
        start_ms: i64,
        now: Time,
    ) -> JobStart {
        let view = self.cluster.job(job, now);
        let node = allocation.nodes.first();
        let meta = self.meta.get(&job.job);
        let values = PatternValues {
            job,
            user: meta.map_or("", |m| m.user.as_str()),
            name: meta.map_or("", |m| m.name.as_str()),
            node: node.map_or("", |n| n.node.as_str()),
        };
        let workdir = meta.map_or_else(PathBuf::new, |m| m.workdir.clone());
        // Paths were checked against PATH_MAX at submission; one that still does not
        // fit (a node name longer than a host name may be) goes to the default file.
        let path = |pattern: Option<&str>| {
            step_env::output_path(pattern, &values, &workdir).unwrap_or_else(|e| {
                tracing::warn!(job = %job, error = %e, "output pattern refused; using the default");
                workdir.join(format!("slurm-{job}.out"))
            })
        };
        let stdout = path(meta.and_then(|m| m.output.as_deref()));
        let stderr = meta.and_then(|m| m.error.as_deref()).map(|e| path(Some(e)));
        JobStart {
            id: job.job as i64,
            task: job.task.map_or(-1, i64::from),
            start_time: start_ms,
            time_limit: view.as_ref().and_then(|v| match v.time_limit {
                scheduler::TimeLimit::Seconds(s) => Some(s as i64),
                scheduler::TimeLimit::Unlimited => None,
            }),
            allocation: serde_json::to_string(allocation).unwrap_or_default(),
            nodelist: view
                .as_ref()
                .map_or_else(String::new, |v| v.nodelist.clone()),
            cpus: allocation.nodes.iter().map(|n| i64::from(n.cpus)).sum(),
            memory_mb: allocation.nodes.iter().map(|n| n.memory_mb as i64).sum(),
            gpus: view.as_ref().map_or_else(String::new, |v| v.gres.clone()),
            gpu_milli: view.as_ref().map_or(0, |v| v.gpu_milli as i64),
            stdout_path: stdout.display().to_string(),
            stderr_path: stderr.map(|p| p.display().to_string()),
        }
    }

    /// The submission's row, with what the cluster resolved at submission (account,
    /// partition, name, reason, time limit, GPUs).
    fn submitted_record(
        &self,
        id: u64,
        owner: &Owner,
        s: &Submission,
        workdir: &Path,
        now: Time,
    ) -> JobRecord {
        let mut record = s.record(id, owner, workdir);
        if let Some(v) = self.cluster.job(JobId::new(id), now) {
            record.account = v.account;
            record.partition = v.partition;
            record.name = v.name;
            record.reason = v.reason.map(|r| r.name().to_string());
            record.time_limit = match v.time_limit {
                scheduler::TimeLimit::Seconds(s) => Some(s as i64),
                scheduler::TimeLimit::Unlimited => None,
            };
            record.gpus = v.gres;
        }
        record
    }
}

/// Answer once the batch is written; a change the cluster refused is a conflict.
fn reply_when_durable(batch: &mut Batch, reply: Reply<()>, result: Result<(), ApplyError>) {
    match result {
        Ok(()) => reply_durable(batch, reply),
        Err(e) => {
            let _ = reply.send(Err(SchedError::Conflict(e.to_string())));
        }
    }
}

/// Answer `reply` once the batch is in the database (an error if it could not be).
fn reply_durable(batch: &mut Batch, reply: Reply<()>) {
    batch.replies.push(Box::new(move |ok| {
        let _ = reply.send(if ok {
            Ok(())
        } else {
            Err(SchedError::Unavailable)
        });
    }));
}

/// `scancel --signal`: nothing changes in the queue; a running job's supervisor is told.
fn signal_running(
    batch: &mut Batch,
    job: JobId,
    state: JobState,
    signal: i32,
    whom: SignalWhom,
) -> Result<(), SchedError> {
    match state {
        JobState::Running => {
            batch.signals.push((job, StepSignal::Send { signal, whom }));
            Ok(())
        }
        JobState::Pending => Err(SchedError::Conflict("Job is pending execution".into())),
        _ => Err(SchedError::Conflict(
            "Job/step already completing or completed".into(),
        )),
    }
}

fn ended(
    job: JobId,
    state: &str,
    end_ms: i64,
    exit_code: Option<i64>,
    message: Option<String>,
) -> JobChange {
    JobChange::Ended {
        id: job.job as i64,
        task: job.task.map_or(-1, i64::from),
        state: state.to_string(),
        end_time: end_ms,
        exit_code,
        exit_signal: None,
        reason: None,
        message,
    }
}

fn state_change(job: JobId, state: JobState, reason: Option<String>) -> JobChange {
    JobChange::State {
        id: job.job as i64,
        task: job.task.map_or(-1, i64::from),
        state: state.name().to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests;
