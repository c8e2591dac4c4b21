//! Slurm's answers reconciled with atrium's rows, without IO: what a `squeue` line
//! or an `sacct` line changes of a job's row and view, how an array's own state
//! follows its tasks, which rows `squeue` no longer lists, and the node and
//! partition views from `scontrol`. Time is a parameter (`now`).
//!
//! Owns: the live view of atrium's Slurm jobs ([`Jobs`]) and the row changes
//! ([`Change`]) a poll writes.
//! Must not touch: the store, processes (`cli`), the clock, the internal backend.

use std::collections::{BTreeMap, HashSet};

use scheduler::{
    JobId, JobOutcome, JobState, JobView, NodeView, PartitionView, PendingReason, SliceUsage,
    SqueueFilter, TimeLimit,
};

use super::parse::{self, ArrayTask, SlurmNode, SlurmPartition, SqueueRow};
use super::usage;
use crate::store::{JobChange, JobRecord, JobStart};

/// Ended jobs stay in the live view this long; the rows keep them for good.
const KEEP_ENDED_SECS: i64 = 300;

/// One row of atrium's (a job, an array, or one task of it) as Slurm last told.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    /// Slurm's id of the job, or of the array for an array and its tasks.
    pub slurm_id: String,
    /// The row as stored.
    pub record: JobRecord,
    pub view: JobView,
}

/// atrium's Slurm jobs (and arrays, and their tasks) by atrium's id.
pub(super) type Jobs = BTreeMap<JobId, Entry>;

pub(super) fn job_id(r: &JobRecord) -> JobId {
    crate::store::job_id(r.id, r.task)
}

/// What one poll changes of one row: what to write, and the row and view after.
pub(super) struct Change {
    pub slurm_id: String,
    pub writes: Vec<JobChange>,
    pub record: JobRecord,
    pub view: JobView,
}

/// What each job holds now, for quotas: jobs and array tasks, and an array's row only
/// while it stands for tasks still waiting.
pub(super) fn live_jobs(jobs: &Jobs) -> Vec<usage::Live> {
    jobs.values()
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

fn is_array(jobs: &Jobs, id: JobId) -> bool {
    jobs.get(&JobId::new(id.job))
        .is_some_and(|e| e.record.array_spec.is_some())
}

/// The atrium row a `squeue` line is about.
fn entry_id(jobs: &Jobs, row: &SqueueRow) -> Option<JobId> {
    let atrium: u64 = row.array_job_id.parse().ok()?;
    if !jobs.contains_key(&JobId::new(atrium)) {
        return None;
    }
    Some(match &row.array_task {
        ArrayTask::One(t) => JobId::task(atrium, *t),
        ArrayTask::None | ArrayTask::Pending(_) => JobId::new(atrium),
    })
}

/// The changes what `squeue` says of some jobs makes, and nothing about the jobs it
/// does not list: for a listing of chosen jobs (those settling after a submission).
pub(super) fn diff_listed(jobs: &Jobs, rows: &[SqueueRow], now: i64) -> Vec<Change> {
    diff_rows(jobs, rows, now).0
}

/// Compare what `squeue` says with the rows: the changes, and the open rows it does
/// not list (to ask `sacct`). `now` ends an array whose tasks are all over, and a
/// job Slurm says ended without saying when. `rows` must list every job the poll
/// follows (see [`followed`]) that Slurm still knows.
pub(super) fn diff(
    jobs: &Jobs,
    rows: &[SqueueRow],
    now: i64,
) -> (Vec<Change>, Vec<(JobId, String)>) {
    let (mut changes, listed, arrays_pending) = diff_rows(jobs, rows, now);
    let missing = unlisted(jobs, &listed, &arrays_pending, &mut changes, now);
    (changes, missing)
}

type Listed = (Vec<Change>, HashSet<JobId>, HashSet<u64>);

/// The changes of the rows listed, which jobs they list, and which arrays still have
/// tasks waiting.
fn diff_rows(jobs: &Jobs, rows: &[SqueueRow], now: i64) -> Listed {
    let mut changes = Vec::new();
    let mut listed = HashSet::new();
    let mut arrays_pending = HashSet::new();
    for row in rows {
        let Some(id) = entry_id(jobs, row) else {
            continue;
        };
        listed.insert(id);
        if matches!(row.array_task, ArrayTask::Pending(_)) {
            arrays_pending.insert(id.job);
        }
        let parent = jobs.get(&JobId::new(id.job));
        let Some(base) = jobs.get(&id).or(parent) else {
            continue;
        };
        let mut record = base.record.clone();
        if id.task.is_some() && !jobs.contains_key(&id) {
            // A task seen for the first time: its row is the array's, copied.
            record.task = i64::from(id.task.unwrap_or(0));
            record.array_spec = None;
            record.start_time = None;
            record.end_time = None;
            record.state = "PENDING".into();
        }
        let (view, writes) = apply_row(&record, row, base, now);
        if !writes.is_empty() || !jobs.contains_key(&id) {
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
    (changes, listed, arrays_pending)
}

/// The followed jobs `squeue` did not list: those to ask `sacct` about, and the end of
/// each array whose tasks are all over (added to `changes`).
fn unlisted(
    jobs: &Jobs,
    listed: &HashSet<JobId>,
    arrays_pending: &HashSet<u64>,
    changes: &mut Vec<Change>,
    now: i64,
) -> Vec<(JobId, String)> {
    let mut missing = Vec::new();
    for (id, e) in jobs {
        if !followed(e) || listed.contains(id) {
            continue;
        }
        let is_parent_of_array = id.task.is_none() && e.record.array_spec.is_some();
        if is_parent_of_array && !arrays_pending.contains(&id.job) {
            // No task waits any more: the array is over once every task is.
            let tasks: Vec<&Entry> = jobs
                .range(JobId::task(id.job, 0)..=JobId::task(id.job, u32::MAX))
                .map(|(_, t)| t)
                .collect();
            if tasks.is_empty() {
                missing.push((*id, e.slurm_id.clone()));
                continue;
            }
            // A task Slurm lists now and that is not over (one seen for the first
            // time too, which `tasks` does not hold yet) keeps the array open.
            let open_task = listed.iter().any(|l| {
                l.job == id.job
                    && l.task.is_some()
                    && match changes.iter().rev().find(|c| c.view.id == *l) {
                        Some(c) => !c.view.state.is_terminal(),
                        None => jobs.get(l).is_some_and(|t| !t.view.state.is_terminal()),
                    }
            });
            if !open_task
                && tasks
                    .iter()
                    .all(|t| t.view.state.is_terminal() || changes_end(changes, t.view.id))
            {
                let state = array_state(&tasks, changes);
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
    missing
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
fn apply_row(
    record: &JobRecord,
    row: &SqueueRow,
    base: &Entry,
    now: i64,
) -> (JobView, Vec<JobChange>) {
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
        admin_nice: 0,
        submit_time: row.submit_time.unwrap_or(base.view.submit_time),
        start_time: row.start_time,
        // A pending job's StartTime is Slurm's expected start (`squeue --start`).
        expected_start: row.start_time.filter(|_| state == JobState::Pending),
        eligible_time: eligible(
            state,
            reason.as_deref(),
            row.submit_time.unwrap_or(base.view.submit_time),
        ),
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
        request: None,
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
                end_time: row.end_time.unwrap_or(now) * 1000,
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
        // The internal scheduler's: a task row of its own, not this record.
        JobChange::TakenOut { .. } => {}
        JobChange::Updated {
            name,
            partition,
            time_limit,
            request,
            ..
        } => {
            record.name = name.clone();
            record.partition = partition.clone();
            record.time_limit = *time_limit;
            record.request = request.clone();
        }
    }
}

/// Whether the poll still follows a job: it is not over, or its end is not recorded.
/// The poll asks `sacct` about such a job when `squeue` no longer lists it.
pub(super) fn followed(e: &Entry) -> bool {
    !(e.view.state.is_terminal() && e.record.end_time.is_some())
}

/// The users with a job the poll follows, each once.
pub(super) fn followed_users(jobs: &Jobs) -> std::collections::BTreeSet<String> {
    jobs.values()
        .filter(|e| followed(e))
        .map(|e| e.record.user_name.clone())
        .collect()
}

/// When a job became eligible, as far as its state and reason tell: not while it is
/// held or waits on a dependency or a begin time; else from its submission.
fn eligible(state: JobState, reason: Option<&str>, submit: i64) -> Option<i64> {
    let waiting = state == JobState::Pending
        && reason.is_some_and(|r| {
            r.starts_with("JobHeld") || r.starts_with("Dependency") || r == "BeginTime"
        });
    (!waiting).then_some(submit)
}

/// The view of a row, before Slurm has said anything about it in this process.
pub(super) fn view_of_record(r: &JobRecord, now: i64) -> JobView {
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
        admin_nice: 0,
        submit_time: r.submit_time / 1000,
        start_time: r.start_time.map(|t| t / 1000),
        expected_start: None,
        eligible_time: eligible(state, r.reason.as_deref(), r.submit_time / 1000),
        end_time: r.end_time.map(|t| t / 1000),
        time_limit: r.time_limit.map_or(TimeLimit::Unlimited, |s| {
            TimeLimit::Seconds(s.max(0) as u64)
        }),
        time_used: r.start_time.map_or(0, |s| {
            (r.end_time.unwrap_or(now * 1000) - s).max(0) as u64 / 1000
        }),
        nodes: scheduler::hostlist_count(&r.nodelist),
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
        request: None,
    }
}

pub(super) fn node_view(n: SlurmNode) -> NodeView {
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

pub(super) fn partition_views(
    parts: &[SlurmPartition],
    nodes: &[SlurmNode],
    jobs: &Jobs,
) -> Vec<PartitionView> {
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
            let (mut pending, mut running) = (0, 0);
            for e in jobs.values().filter(|e| e.view.partition == p.name) {
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

/// `squeue`'s answer for atrium: the jobs `filter` selects. An array's row is listed
/// while tasks of it wait; its tasks on their own.
pub(super) fn squeue(jobs: &Jobs, filter: &SqueueFilter) -> Vec<JobView> {
    jobs.values()
        .map(|e| &e.view)
        .filter(|v| !(v.id.task.is_none() && v.state != JobState::Pending && is_array(jobs, v.id)))
        .filter(|v| filter.include_finished || !v.state.is_terminal())
        .filter(|v| filter.user.as_ref().is_none_or(|u| &v.user == u))
        .filter(|v| filter.partition.as_ref().is_none_or(|p| &v.partition == p))
        .filter(|v| filter.states.is_empty() || filter.states.contains(&v.state))
        .cloned()
        .collect()
}

/// The live view once a poll's `changes` are written: the changed rows, the time used
/// of every row `squeue` listed (`rows`), and ended jobs dropped after
/// [`KEEP_ENDED_SECS`].
pub(super) fn apply(jobs: &mut Jobs, changes: Vec<Change>, rows: &[SqueueRow], now: i64) {
    for c in changes {
        let id = job_id(&c.record);
        jobs.insert(
            id,
            Entry {
                slurm_id: c.slurm_id,
                record: c.record,
                view: c.view,
            },
        );
    }
    // Rows whose state did not change but that squeue lists: refresh time used.
    for row in rows {
        if let Some(id) = entry_id(jobs, row) {
            if let Some(e) = jobs.get_mut(&id) {
                e.view.time_used = row.time_used;
                if e.view.state == JobState::Unknown {
                    e.view.state = parse::job_state(&row.state);
                }
            }
        }
    }
    jobs.retain(|_, e| {
        !e.view.state.is_terminal() || e.view.end_time.is_none_or(|t| now - t < KEEP_ENDED_SECS)
    });
}

/// Slurm does not answer: open jobs show UNKNOWN (the rows keep what Slurm last said).
pub(super) fn mark_unknown(jobs: &mut Jobs) {
    for e in jobs.values_mut() {
        if !e.view.state.is_terminal() {
            e.view.state = JobState::Unknown;
            e.view.reason = None;
        }
    }
}

/// What `sacct`'s lines (`-X -n -P`, fields `JobID,State,ExitCode,Start,End,NodeList,
/// AllocTRES`) say of jobs `squeue` no longer lists: an end for each that is over.
/// `now` is the end of one whose end `sacct` does not give.
pub(super) fn sacct_changes(jobs: &Jobs, out: &str, now: i64) -> Vec<Change> {
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
        let Some(entry) = jobs.get(&id) else {
            continue;
        };
        let state = parse::job_state(f[1]);
        if !state.is_terminal() {
            continue;
        }
        let (code, signal) = f[2].split_once(':').unwrap_or((f[2], "0"));
        let code: i32 = code.parse().unwrap_or(0);
        let signal: i32 = signal.parse().unwrap_or(0);
        let end = f[4].trim().parse::<i64>().unwrap_or(now);
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
    changes
}

/// The jobs to adopt: Slurm's rows that carry atrium's comment, are not array
/// tasks, have no entry and were not refused before; and, while submissions are
/// in flight (`earliest_in_flight`: when the first of them started, Unix seconds),
/// only those Slurm had before then: a later one may be a submission whose row is
/// being written, which adopting would race.
pub(super) fn adoption_candidates<'a>(
    rows: &'a [SqueueRow],
    jobs: &Jobs,
    not_adopted: &HashSet<String>,
    earliest_in_flight: Option<i64>,
) -> Vec<&'a SqueueRow> {
    rows.iter()
        .filter(|r| r.comment == "atrium" && r.array_task == ArrayTask::None)
        .filter(|r| !not_adopted.contains(&r.job_id))
        .filter(|r| {
            r.job_id
                .parse::<u64>()
                .is_ok_and(|id| !jobs.contains_key(&JobId::new(id)))
        })
        .filter(|r| match (earliest_in_flight, r.submit_time) {
            (None, _) => true,
            // Slurm's times are whole seconds: a second of margin.
            (Some(start), Some(submitted)) => submitted < start - 1,
            (Some(_), None) => false,
        })
        .collect()
}

#[cfg(test)]
mod tests;
