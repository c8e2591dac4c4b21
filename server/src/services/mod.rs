//! The application layer: one service per domain, holding that domain's rules. The
//! JSON API, the pages and the command line's server side call the same service, so
//! a rule (who may see a job, what an administrator's action writes to the audit log)
//! exists once. A handler is extract → call → map.
//!
//! Owns: the rules of jobs (`jobs`), their output (`output`), quotas (`quotas`),
//! benchmark runs and sizing (`benchmarks`), node control (`nodes`),
//! usage accounting (`usage`), users' files (`files`: the Files app),
//! accounts and tokens (`accounts`; the changes the command line makes too:
//! `account_changes`), and the audit log (`audit`). Sessions (`crate::sessions`)
//! are a service of their own beside this layer: they call these (quotas, audit),
//! these never call them. Identities (`crate::identities`) sit below: these call them.
//! Must not touch: HTTP types (requests, responses, status codes: `http` maps
//! [`ServiceError`]), SQL (the store), the scheduler's internals (its handle only).

pub mod account_changes;
pub mod accounts;
pub mod announcements;
pub mod audit;
pub mod benchmarks;
pub mod campaigns;
pub mod cluster;
pub mod efficiency;
pub mod fairshare;
pub mod files;
pub mod gpu_map;
pub mod job_steps;
pub mod jobs;
pub mod nodes;
pub mod output;
pub mod quotas;
pub mod reasons;
pub mod records;
pub mod usage;

pub use account_changes::AccountChanges;
pub use accounts::Accounts;
pub use announcements::Announcements;
pub use audit::Audit;
pub use benchmarks::Benchmarks;
pub use campaigns::Campaigns;
pub use cluster::Cluster;
pub use files::Files;
pub use jobs::Jobs;
pub use nodes::Nodes;
pub use quotas::Quotas;
pub use usage::Usage;

use crate::identities::IdentityError;
use crate::sched::SchedError;
use crate::store::StoreError;

/// Why a service refused or failed. Each maps to one HTTP status (`http::error`) and
/// one CLI message.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// One field of the request was refused: every refusal of a request's content
    /// names its field.
    #[error("{message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    /// One field of the request, named as it was nested (`matrix.params.BATCH`).
    #[error("{message}")]
    InvalidPath { field: String, message: String },
    /// Directives of a script were refused: every one, by its line.
    #[error("{message}")]
    InvalidLines {
        field: &'static str,
        message: String,
        errors: Vec<crate::sched::submission::LineError>,
    },
    #[error("{0}")]
    Forbidden(String),
    /// Absent, or not the caller's to see (the two are not told apart).
    #[error("not found")]
    NotFound,
    /// Not in a state that allows this.
    #[error("{0}")]
    Conflict(String),
    /// The request would go over a quota: names it, its value and the use now.
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("{0}")]
    Unavailable(String),
    /// The queue is at its limit: try again when jobs have ended.
    #[error("{0}")]
    Full(String),
    /// Too much of this kind of work is in progress (for the caller, or for everyone):
    /// try again shortly.
    #[error("{0}")]
    Busy(String),
    /// The scheduler is rebuilding its queue after a restart: try again shortly.
    #[error("the scheduler is restoring its queue after a restart")]
    Restoring,
    /// Not available here (with this scheduler backend): says what to use instead.
    #[error("{0}")]
    NotSupported(String),
    /// Something that should not happen; the cause goes to the log only.
    #[error("{0}")]
    Internal(String),
}

impl ServiceError {
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::Internal(cause.to_string())
    }
}

impl ServiceError {
    /// `field` of the request was refused: `message` says why (and names it).
    pub fn invalid(field: &'static str, message: impl Into<String>) -> ServiceError {
        ServiceError::Invalid {
            field,
            message: message.into(),
        }
    }
}

/// A query parameter or a body's field refused where it was read.
impl From<crate::accounting::FieldError> for ServiceError {
    fn from(e: crate::accounting::FieldError) -> Self {
        Self::invalid(e.field, e.to_string())
    }
}

/// The store's errors as a service's: a missing row is not found, a duplicate a
/// conflict, a database out of reach unavailable; the rest internal.
impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => Self::NotFound,
            StoreError::Conflict(what) => Self::Conflict(format!("{what} already exists")),
            e if e.is_unavailable() => Self::Unavailable(e.to_string()),
            other => Self::Internal(other.to_string()),
        }
    }
}

impl From<SchedError> for ServiceError {
    fn from(e: SchedError) -> Self {
        match e {
            SchedError::NotFound => Self::NotFound,
            SchedError::Rejected { field, message } => Self::Invalid { field, message },
            SchedError::Conflict(m) => Self::Conflict(m),
            SchedError::Forbidden(m) => Self::Forbidden(m),
            SchedError::Unavailable => Self::Unavailable("the scheduler is not available".into()),
            SchedError::Restoring => Self::Restoring,
            SchedError::Full(m) => Self::Full(m),
            SchedError::NotSupported(m) => Self::NotSupported(m),
        }
    }
}

impl From<IdentityError> for ServiceError {
    fn from(e: IdentityError) -> Self {
        match e {
            IdentityError::Missing(_) => Self::Forbidden(e.to_string()),
            IdentityError::Store(e) => e.into(),
        }
    }
}

impl From<crate::services::quotas::QuotaError> for ServiceError {
    fn from(e: crate::services::quotas::QuotaError) -> Self {
        use crate::services::quotas::QuotaError as Q;
        match e {
            Q::Invalid { field, message } => Self::InvalidPath { field, message },
            Q::UnknownName(message) => Self::Invalid {
                field: "name",
                message,
            },
            Q::Exceeded(m) => Self::QuotaExceeded(m),
            Q::NotFound => Self::NotFound,
            Q::Conflict => Self::Conflict(e.to_string()),
            Q::Unavailable(m) => Self::Unavailable(m),
            Q::Internal(m) => Self::Internal(m),
        }
    }
}
