//! Errors of the cluster's operations. Each message is meant for the user who made
//! the request and names what to change.

use crate::model::{JobId, JobState};

/// Why a configuration was refused by `Cluster::new`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid cluster configuration: {0}")]
pub struct ConfigError(pub String);

/// Why a job was rejected at submit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("job id {0} is already in use")]
    DuplicateId(JobId),
    #[error("no such partition \"{0}\"")]
    UnknownPartition(String),
    #[error("no default partition; name one with -p")]
    NoDefaultPartition,
    #[error("not allowed to use partition \"{0}\"")]
    PartitionNotAllowed(String),
    #[error("not allowed to charge account \"{0}\"")]
    AccountNotAllowed(String),
    #[error("no such QOS \"{0}\"")]
    UnknownQos(String),
    #[error("the job can never run: {0}")]
    Unsatisfiable(String),
    #[error("time limit {requested} is above the limit {limit} of {scope}")]
    TimeLimitTooLong {
        requested: String,
        limit: String,
        scope: String,
    },
    #[error("limit exceeded ({reason}): {detail}")]
    LimitExceeded {
        reason: &'static str,
        detail: String,
    },
    #[error("invalid dependency: {0}")]
    InvalidDependency(String),
    /// The cluster holds its most jobs (Slurm's `MaxJobCount`): try again when some
    /// have ended.
    #[error(
        "the cluster holds its most jobs, {limit} pending and running (MaxJobCount); \
         submit again when some have ended"
    )]
    TooManyJobs { limit: u64 },
}

impl SubmitError {
    /// The option of the request the refusal is about, by its long name (`partition`,
    /// `account`, `qos`, `time`, `dependency`); `script` when it is the request as a
    /// whole (what it asks for can never be had, a limit, a malformed request).
    pub fn field(&self) -> &'static str {
        match self {
            Self::UnknownPartition(_) | Self::NoDefaultPartition | Self::PartitionNotAllowed(_) => {
                "partition"
            }
            Self::AccountNotAllowed(_) => "account",
            Self::UnknownQos(_) => "qos",
            Self::TimeLimitTooLong { .. } => "time",
            Self::InvalidDependency(_) => "dependency",
            Self::Invalid(_)
            | Self::DuplicateId(_)
            | Self::Unsatisfiable(_)
            | Self::LimitExceeded { .. }
            | Self::TooManyJobs { .. } => "script",
        }
    }
}

/// Why an operation on an existing job or node was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpError {
    #[error("no such job {0}")]
    NoSuchJob(JobId),
    #[error("job {job} is {state}, which does not allow this")]
    WrongState { job: JobId, state: JobState },
    #[error("job {0} is held by an administrator")]
    AdminHold(JobId),
    #[error("no such node \"{0}\"")]
    NoSuchNode(String),
    #[error("{0}")]
    Invalid(String),
}
