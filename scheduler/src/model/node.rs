//! Compute nodes: configuration and administrative state.

use super::GpuConfig;
use serde::{Deserialize, Serialize};

/// A compute node as configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeConfig {
    pub name: String,
    pub cpus: u32,
    pub memory_mb: u64,
    #[serde(default)]
    pub features: Vec<String>,
    #[serde(default)]
    pub gpus: Vec<GpuConfig>,
}

/// A node's state as `sinfo` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE", tag = "state")]
pub enum NodeState {
    Idle,
    Mixed,
    Allocated,
    /// No new jobs; running jobs go on.
    Drain {
        reason: String,
    },
    /// Unusable; its jobs were failed.
    Down {
        reason: String,
    },
}

impl NodeState {
    /// Short upper-case name (`IDLE`, `MIXED`, `ALLOCATED`, `DRAIN`, `DOWN`).
    pub fn name(&self) -> &'static str {
        match self {
            NodeState::Idle => "IDLE",
            NodeState::Mixed => "MIXED",
            NodeState::Allocated => "ALLOCATED",
            NodeState::Drain { .. } => "DRAIN",
            NodeState::Down { .. } => "DOWN",
        }
    }
}

/// An administrative change of a node's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "command")]
pub enum NodeCommand {
    Drain { reason: String },
    Resume,
    Down { reason: String },
}
