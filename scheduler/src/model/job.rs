//! Job identity, owner, states and Slurm-style pending reasons.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A job or one task of an array job (`123` or `123_4`). Ids are chosen by the
/// caller (`Cluster::submit_with_id`) or by the cluster's counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct JobId {
    pub job: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<u32>,
}

impl JobId {
    /// A plain job (or a whole array).
    pub const fn new(job: u64) -> Self {
        JobId { job, task: None }
    }
    /// One task of array job `job`.
    pub const fn task(job: u64, task: u32) -> Self {
        JobId {
            job,
            task: Some(task),
        }
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.task {
            Some(t) => write!(f, "{}_{}", self.job, t),
            None => write!(f, "{}", self.job),
        }
    }
}

impl FromStr for JobId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("invalid job id \"{s}\"");
        match s.split_once('_') {
            Some((j, t)) => Ok(JobId::task(
                j.parse().map_err(|_| bad())?,
                t.parse().map_err(|_| bad())?,
            )),
            None => Ok(JobId::new(s.parse().map_err(|_| bad())?)),
        }
    }
}

/// Who submitted a job. The server fills it from LDAP or the local users table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Owner {
    pub user: String,
    #[serde(default)]
    pub groups: Vec<String>,
    /// Default account (charged unless the job says `-A`).
    pub account: String,
    /// Other accounts the user may charge with `-A`.
    #[serde(default)]
    pub other_accounts: Vec<String>,
}

impl Owner {
    /// An owner whose account is named after the user.
    pub fn user(name: &str) -> Self {
        Owner {
            user: name.to_string(),
            groups: Vec::new(),
            account: name.to_string(),
            other_accounts: Vec::new(),
        }
    }
}

/// Job states (Slurm names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    Pending,
    Running,
    /// Told to stop (cancel, time limit, requeue); waiting for `job_finished`.
    Completing,
    Completed,
    Failed,
    Cancelled,
    Timeout,
    NodeFail,
    OutOfMemory,
    /// Removed: it could not end before its `--deadline`.
    Deadline,
    /// An external scheduler (Slurm) did not answer: the last known state is not
    /// guessed on. Never set by this crate's cluster.
    Unknown,
}

impl JobState {
    /// Whether the job is over.
    pub fn is_terminal(self) -> bool {
        !matches!(
            self,
            JobState::Pending | JobState::Running | JobState::Completing | JobState::Unknown
        )
    }
    /// Slurm's upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Completing => "COMPLETING",
            JobState::Completed => "COMPLETED",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
            JobState::Timeout => "TIMEOUT",
            JobState::NodeFail => "NODE_FAIL",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::Deadline => "DEADLINE",
            JobState::Unknown => "UNKNOWN",
        }
    }
    /// Every state, in Slurm's order.
    pub const ALL: [JobState; 11] = [
        JobState::Pending,
        JobState::Running,
        JobState::Completing,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::Timeout,
        JobState::NodeFail,
        JobState::OutOfMemory,
        JobState::Deadline,
        JobState::Unknown,
    ];
    /// The state named as [`JobState::name`] spells it.
    pub fn parse(name: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|s| s.name() == name)
    }
    /// Slurm's two-letter code as `squeue` prints it.
    pub fn short(self) -> &'static str {
        match self {
            JobState::Pending => "PD",
            JobState::Running => "R",
            JobState::Completing => "CG",
            JobState::Completed => "CD",
            JobState::Failed => "F",
            JobState::Cancelled => "CA",
            JobState::Timeout => "TO",
            JobState::NodeFail => "NF",
            JobState::OutOfMemory => "OOM",
            JobState::Deadline => "DL",
            JobState::Unknown => "??",
        }
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a job is pending (Slurm's reason names, as `squeue` prints them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PendingReason {
    None,
    Priority,
    Resources,
    Dependency,
    DependencyNeverSatisfied,
    JobHeldUser,
    JobHeldAdmin,
    BeginTime,
    PartitionTimeLimit,
    ReqNodeNotAvail,
    /// A per-user GPU (or slice type) limit.
    #[serde(rename = "QOSMaxGRESPerUser")]
    QosMaxGresPerUser,
    /// A group or account GPU (or slice type) limit.
    #[serde(rename = "AssocGrpGRES")]
    AssocGrpGres,
    /// GPU-minutes per period used up.
    #[serde(rename = "AssocGrpGRESMinutes")]
    AssocGrpGresMinutes,
    /// Per-user running jobs limit.
    AssocMaxJobsLimit,
    /// Group or account running jobs limit.
    AssocGrpJobsLimit,
    /// The job's time limit is above a (lowered) wall time limit.
    AssocMaxWallDurationPerJobLimit,
    /// The array's `%` limit of running tasks is reached.
    JobArrayTaskLimit,
    /// The licenses (`-L`) it asks are in use by other jobs.
    Licenses,
    /// It could not end before its `--deadline`: removed.
    DeadLine,
}

impl PendingReason {
    /// Slurm's spelling.
    pub fn name(self) -> &'static str {
        match self {
            PendingReason::None => "None",
            PendingReason::Priority => "Priority",
            PendingReason::Resources => "Resources",
            PendingReason::Dependency => "Dependency",
            PendingReason::DependencyNeverSatisfied => "DependencyNeverSatisfied",
            PendingReason::JobHeldUser => "JobHeldUser",
            PendingReason::JobHeldAdmin => "JobHeldAdmin",
            PendingReason::BeginTime => "BeginTime",
            PendingReason::PartitionTimeLimit => "PartitionTimeLimit",
            PendingReason::ReqNodeNotAvail => "ReqNodeNotAvail",
            PendingReason::QosMaxGresPerUser => "QOSMaxGRESPerUser",
            PendingReason::AssocGrpGres => "AssocGrpGRES",
            PendingReason::AssocGrpGresMinutes => "AssocGrpGRESMinutes",
            PendingReason::AssocMaxJobsLimit => "AssocMaxJobsLimit",
            PendingReason::AssocGrpJobsLimit => "AssocGrpJobsLimit",
            PendingReason::AssocMaxWallDurationPerJobLimit => "AssocMaxWallDurationPerJobLimit",
            PendingReason::JobArrayTaskLimit => "JobArrayTaskLimit",
            PendingReason::Licenses => "Licenses",
            PendingReason::DeadLine => "DeadLine",
        }
    }
}

impl PendingReason {
    /// Every reason, for [`PendingReason::parse`].
    const ALL: [PendingReason; 19] = [
        PendingReason::None,
        PendingReason::Priority,
        PendingReason::Resources,
        PendingReason::Dependency,
        PendingReason::DependencyNeverSatisfied,
        PendingReason::JobHeldUser,
        PendingReason::JobHeldAdmin,
        PendingReason::BeginTime,
        PendingReason::PartitionTimeLimit,
        PendingReason::ReqNodeNotAvail,
        PendingReason::QosMaxGresPerUser,
        PendingReason::AssocGrpGres,
        PendingReason::AssocGrpGresMinutes,
        PendingReason::AssocMaxJobsLimit,
        PendingReason::AssocGrpJobsLimit,
        PendingReason::AssocMaxWallDurationPerJobLimit,
        PendingReason::JobArrayTaskLimit,
        PendingReason::Licenses,
        PendingReason::DeadLine,
    ];
    /// The reason Slurm spells `name`, if it is one of these.
    pub fn parse(name: &str) -> Option<PendingReason> {
        PendingReason::ALL.into_iter().find(|r| r.name() == name)
    }
}

impl fmt::Display for PendingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a running job ended, as the step supervisor saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "code")]
pub enum JobOutcome {
    /// The batch script exited with this code (0: COMPLETED, else FAILED).
    Exited(i32),
    /// Killed by the out-of-memory killer.
    OutOfMemory,
    /// Killed by a signal.
    Signaled(i32),
}

impl JobOutcome {
    /// The exit code and the signal as job records keep them (an out-of-memory kill
    /// is signal 9).
    pub fn code_and_signal(outcome: Option<JobOutcome>) -> (Option<i64>, Option<i64>) {
        match outcome {
            Some(JobOutcome::Exited(c)) => (Some(i64::from(c)), None),
            Some(JobOutcome::Signaled(s)) => (None, Some(i64::from(s))),
            Some(JobOutcome::OutOfMemory) => (None, Some(9)),
            None => (None, None),
        }
    }
}
