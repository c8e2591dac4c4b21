//! Cluster configuration: nodes, partitions, QOS, priority weights, fair-share,
//! limits and backfill settings. Owns defaults and validation of the shape of the
//! configuration; the cluster builds its runtime state from it.

use crate::model::{NodeConfig, PartitionConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Everything `Cluster::new` needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterConfig {
    pub nodes: Vec<NodeConfig>,
    pub partitions: Vec<PartitionConfig>,
    /// Quality of service levels; `normal` (priority 0) exists if not listed.
    pub qos: Vec<QosConfig>,
    pub priority: PriorityWeights,
    pub fairshare: FairshareConfig,
    pub limits: LimitsConfig,
    pub backfill: BackfillConfig,
    /// Reject at submit a job whose time limit is above its partition's maximum
    /// (Slurm `EnforcePartLimits=YES`); otherwise it pends with `PartitionTimeLimit`.
    pub enforce_partition_limits: bool,
    /// Cancel a job whose dependency can never be satisfied (a `Cancel` decision);
    /// otherwise it pends with `DependencyNeverSatisfied`.
    pub kill_invalid_dependencies: bool,
    /// Requeue jobs of a node that goes DOWN unless they asked `--no-requeue`.
    pub requeue_on_node_failure: bool,
    /// Counted site resources jobs ask with `-L name[:count]` (Slurm's
    /// `Licenses=`): how many of each exist.
    #[serde(default)]
    pub licenses: BTreeMap<String, u32>,
    /// Most jobs pending and running at once, array tasks one each (Slurm's
    /// `MaxJobCount`); `None`: no limit.
    #[serde(default)]
    pub max_job_count: Option<u64>,
    /// Pending plus running jobs a user may have when no quota says otherwise;
    /// `None`: no default.
    #[serde(default)]
    pub default_max_submitted_jobs: Option<u32>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            nodes: Vec::new(),
            partitions: Vec::new(),
            qos: Vec::new(),
            priority: PriorityWeights::default(),
            fairshare: FairshareConfig::default(),
            limits: LimitsConfig::default(),
            backfill: BackfillConfig::default(),
            enforce_partition_limits: true,
            kill_invalid_dependencies: true,
            requeue_on_node_failure: true,
            licenses: BTreeMap::new(),
            max_job_count: None,
            default_max_submitted_jobs: None,
        }
    }
}

/// A QOS level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QosConfig {
    pub name: String,
    pub priority: u32,
}

/// Multifactor priority weights (Slurm `PriorityWeight*`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PriorityWeights {
    pub age: u32,
    pub fairshare: u32,
    pub job_size: u32,
    pub partition: u32,
    pub qos: u32,
    /// Age at which the age factor reaches 1 (Slurm `PriorityMaxAge`), seconds.
    pub max_age_secs: u64,
    /// How often every pending job's priority is recomputed (Slurm
    /// `PriorityCalcPeriod`), seconds. A new or newly eligible job gets its priority
    /// at once.
    pub calc_period_secs: u64,
}

impl Default for PriorityWeights {
    fn default() -> Self {
        PriorityWeights {
            age: 1000,
            fairshare: 10_000,
            job_size: 1000,
            partition: 10_000,
            qos: 10_000,
            max_age_secs: 7 * 86_400,
            calc_period_secs: 300,
        }
    }
}

/// Fair-share accounting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FairshareConfig {
    /// Usage half-life (Slurm `PriorityDecayHalfLife`), seconds.
    pub half_life_secs: u64,
    /// Usage billed per second of a running job.
    pub billing: BillingWeights,
    /// Shares per account (default 1).
    pub shares: BTreeMap<String, u32>,
}

impl Default for FairshareConfig {
    fn default() -> Self {
        FairshareConfig {
            half_life_secs: 7 * 86_400,
            billing: BillingWeights::default(),
            shares: BTreeMap::new(),
        }
    }
}

/// Billing weights. The default bills GPU-seconds, each slice by its size (a
/// `3g.40gb` instance is 3/7 of a GPU, one of 4 shards is 1/4), so GPUs count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BillingWeights {
    pub gpu: f64,
    pub cpu: f64,
}

impl Default for BillingWeights {
    fn default() -> Self {
        BillingWeights { gpu: 1.0, cpu: 0.0 }
    }
}

/// Limits per user, group and account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LimitsConfig {
    /// The period GPU-minute limits count over.
    pub period: UsagePeriod,
    /// Limits of users not listed in `users`.
    pub default_user: Limits,
    pub users: BTreeMap<String, Limits>,
    pub groups: BTreeMap<String, Limits>,
    pub accounts: BTreeMap<String, Limits>,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            period: UsagePeriod::Month,
            default_user: Limits::default(),
            users: BTreeMap::new(),
            groups: BTreeMap::new(),
            accounts: BTreeMap::new(),
        }
    }
}

/// The period GPU-minute limits count over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum UsagePeriod {
    /// Calendar months (UTC): usage starts again at 0 on the first of each month.
    Month,
    /// Fixed periods of this many seconds, starting at multiples of it since the epoch.
    Fixed { secs: u64 },
    /// The last `secs` seconds, sliding: a job's GPU time counts until it is older.
    Rolling { secs: u64 },
}

/// One set of limits; `None` is unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// GPUs in use at once, counted in GPU equivalents (a MIG instance or shard
    /// counts its fraction).
    pub max_gpus: Option<u32>,
    /// Slices in use at once per slice type (`a100-80gb`, `1g.10gb`, `shard`).
    pub max_slices: BTreeMap<String, u32>,
    pub max_running_jobs: Option<u32>,
    /// Pending plus running jobs (array tasks count one each).
    pub max_submitted_jobs: Option<u32>,
    /// GPU-minutes per period; a job is charged `GPUs × time limit` when it
    /// starts and refunded the unused part when it ends.
    pub max_gpu_minutes: Option<u64>,
    /// Longest time limit a job may ask for, seconds.
    pub max_wall_secs: Option<u64>,
}

/// Who a set of limits applies to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum LimitScope {
    DefaultUser,
    User(String),
    Group(String),
    Account(String),
}

/// Backfill settings, and how much of the queue one pass may examine.
///
/// Ready jobs wait in one queue per (shape, owner, QOS); a pass walks the queue
/// heads in priority order. With many distinct time limits and users there can be
/// as many heads as jobs, so a pass stops after a bounded number of heads that
/// could not start (as Slurm's `default_queue_depth` and `bf_max_job_test`), and
/// spends a second, rotating budget further down the queue so that every head is
/// examined within a few passes (as Slurm's `bf_continue`). Starts do not count
/// against either budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BackfillConfig {
    /// How many of the highest-priority jobs that cannot start get a reservation
    /// (1 is classic EASY backfill).
    pub max_reservations: usize,
    /// Queue heads, from the highest priority down, that may fail to start in one
    /// pass before it stops walking from the top (Slurm `bf_max_job_test`).
    /// `usize::MAX` examines every head in every pass.
    pub max_job_test: usize,
    /// Further heads examined after that, continuing below where the previous
    /// pass's window stopped and wrapping round at the end of the queue, so that
    /// jobs beyond `max_job_test` are still reached. 0 turns the rotation off.
    pub rotating_job_test: usize,
}

impl Default for BackfillConfig {
    fn default() -> Self {
        BackfillConfig {
            max_reservations: 8,
            max_job_test: 500,
            rotating_job_test: 100,
        }
    }
}
