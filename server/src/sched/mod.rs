//! The scheduler service: one actor task owns the `scheduler::Cluster` (the only
//! writer), logs every input durably before it answers or acts, replays the log at
//! startup, starts a step supervisor for every job it places and re-adopts running
//! steps after a restart. Handlers talk to it through [`Scheduler`].
//! Must not touch: HTTP types, SQL (the store does it), process details (`launch`).

mod actor;
mod event;
pub mod host;
pub mod inventory;
pub mod slurm;
pub mod step_env;
mod steps;
pub mod submission;

pub use actor::{Requester, SchedError, Scheduler};
pub use steps::LaunchSettings;
pub use submission::{Submission, SubmissionError};
