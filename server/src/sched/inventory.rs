//! TEMP stand-in for the node inventory (being written elsewhere): the types the
//! pages read, so the rest of the crate type-checks. Reverted before merge.
#![allow(dead_code, unused_variables, clippy::all)]

use scheduler::ClusterConfig;
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inventory {
    pub cluster: ClusterConfig,
    pub gpus: Vec<GpuStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuStatus {
    pub node: String,
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub memory_mb: u64,
    pub source: GpuSource,
    pub present: bool,
    pub mig: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuSource {
    Declared,
    Discovered,
}

pub async fn discover<T>(cfg: &T) -> anyhow::Result<Inventory> {
    unimplemented!()
}
