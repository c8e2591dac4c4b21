//! A Slurm-like scheduler for GPU slices, as a pure library.
//!
//! Owns: the cluster model (nodes, GPUs, MIG instances, shards, partitions), job
//! requests and their `#SBATCH` parsing, priority, limits, placement and backfill.
//! Must not touch: IO, clocks, threads or async. Time is always an argument.
//!
//! The server drives one [`Cluster`]: [`Cluster::submit_with_id`] on each
//! submission, [`Cluster::schedule`] after events and on a periodic tick (it
//! returns [`Decision`]s to carry out), [`Cluster::job_finished`] when a step ends,
//! and [`Cluster::snapshot`] / [`Cluster::restore`] to persist and rebuild.

mod backfill;
mod cluster;
pub mod config;
mod error;
pub mod model;
pub mod parse;
mod placement;
mod policy;
mod snapshot;
mod views;

pub use cluster::{
    Allocation, CancelEffect, Cluster, Decision, NodeAllocation, Reservation, TestOnly, UpdateError,
};
pub use config::{
    BackfillConfig, BillingWeights, ClusterConfig, FairshareConfig, LimitScope, Limits,
    LimitsConfig, PriorityWeights, QosConfig, UsagePeriod,
};
pub use error::{ConfigError, OpError, SubmitError};
pub use model::*;
pub use parse::{
    compress_hostlist, expand_hostlist, hostlist_count, parse_args, parse_args_with, parse_script,
    parse_script_with, parse_submission, read_submission, MaxArraySize, ParseError, ParseLimits,
};
pub use policy::limits::LimitUsage;
pub use policy::priority::{
    AccountShares, Factors, PriorityFactors, PriorityFilter, PriorityList, PriorityView,
    SharesView, UserShares,
};
pub use snapshot::Snapshot;
pub use views::{JobView, NodeView, PartitionView, QueueCounts, SliceUsage, SqueueFilter};
