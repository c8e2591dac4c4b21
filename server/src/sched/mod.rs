//! The scheduler service: one handle ([`Scheduler`], `handle.rs`) in front of one of
//! two backends that do not know each other: atrium's own cluster (`internal`) or
//! the site's Slurm (`slurm`). Each backend's `start` returns the handle; handlers
//! talk only to the handle.
//! Owns: which backend answers, and the public paths (`Scheduler`, `Requester`,
//! `SchedError`, `LaunchSettings`, `Submission`).
//! Must not touch: HTTP types, SQL (the store does it), process details (`launch`).

mod handle;
pub mod host;
pub mod internal;
pub mod inventory;
pub mod job_token;
pub mod slurm;
pub mod step_env;
pub mod submission;

pub use handle::{JobUpdate, JobUsage, OptionJudge, Requester, SchedError, Scheduler};
pub use internal::{JobPortal, LaunchSettings, MIN_JOB_AGE_SECS as ENDED_JOB_AGE_SECS};
pub use job_token::JobTokens;
pub use submission::{Submission, SubmissionError};
