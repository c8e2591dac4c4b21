//! Partitions: named sets of nodes with limits and defaults (Slurm semantics).

use serde::{Deserialize, Serialize};

/// A partition as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionConfig {
    pub name: String,
    /// Node names; a node may belong to several partitions.
    pub nodes: Vec<String>,
    /// Time limit given to jobs that ask for none, in seconds (`None`: unlimited).
    #[serde(default)]
    pub default_time_secs: Option<u64>,
    /// Longest time limit a job may ask for, in seconds (`None`: unlimited).
    #[serde(default)]
    pub max_time_secs: Option<u64>,
    /// CPUs given per whole GPU when the job does not say (MIG instances and shards
    /// get their fraction of it, rounded up).
    #[serde(default = "default_cpus_per_gpu")]
    pub default_cpus_per_gpu: u32,
    /// Memory given per whole GPU when the job does not say, in MB.
    #[serde(default = "default_mem_per_gpu_mb")]
    pub default_mem_per_gpu_mb: u64,
    /// Memory per CPU for jobs without GPUs that do not say, in MB.
    #[serde(default = "default_mem_per_cpu_mb")]
    pub default_mem_per_cpu_mb: u64,
    /// Unix groups allowed to submit; empty means everyone.
    #[serde(default)]
    pub allowed_groups: Vec<String>,
    /// Higher tiers are scheduled first (Slurm `PriorityTier`).
    #[serde(default)]
    pub priority_tier: u32,
    /// The partition used when a job names none; exactly one is the default.
    #[serde(default)]
    pub default: bool,
}

fn default_cpus_per_gpu() -> u32 {
    8
}
fn default_mem_per_gpu_mb() -> u64 {
    48 * 1024
}
fn default_mem_per_cpu_mb() -> u64 {
    2048
}

impl PartitionConfig {
    /// A partition with the portal's defaults (8 cores and 48 GB per GPU).
    pub fn new(name: impl Into<String>, nodes: Vec<String>) -> Self {
        PartitionConfig {
            name: name.into(),
            nodes,
            default_time_secs: None,
            max_time_secs: None,
            default_cpus_per_gpu: default_cpus_per_gpu(),
            default_mem_per_gpu_mb: default_mem_per_gpu_mb(),
            default_mem_per_cpu_mb: default_mem_per_cpu_mb(),
            allowed_groups: Vec::new(),
            priority_tier: 0,
            default: false,
        }
    }
}
