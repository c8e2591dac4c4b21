//! The cluster and job model: plain data types shared by the parser, the policy and
//! the views. Owns: identifiers, GPU slices, nodes, partitions, job requests, job
//! states and pending reasons. Must not contain scheduling logic.

mod gpu;
pub(crate) mod gpu_internal {
    pub(crate) use super::gpu::{mig_compute_slices, model_matches};
}
mod job;
mod node;
mod partition;
mod request;

pub use gpu::{mig_profiles, GpuConfig, GpuMode, MigInstanceConfig, SliceId};
pub use job::{JobId, JobOutcome, JobState, Owner, PendingReason};
pub use node::{NodeCommand, NodeConfig, NodeState};
pub use partition::PartitionConfig;
pub use request::{
    ArraySpec, BeginTime, Constraint, DepKind, DepTarget, Dependency, DependencyItem, ExportSpec,
    GpuPer, GpuRequest, IgnoredOption, JobRequest, License, MailTypes, MemoryRequest, NodeRange,
    OpenMode, SignalSpec, SliceKind, TimeLimit,
};

/// Seconds since the Unix epoch (UTC). The scheduler never reads a clock: every
/// operation that depends on time takes `now: Time`.
pub type Time = i64;
