//! `GET /api/v1/partitions` and `GET /api/v1/nodes`: what `sinfo` shows, with each
//! node's GPUs (where they came from, and whether `nvidia-smi` found them).

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};

#[derive(Debug, Serialize, ToSchema)]
pub struct Partitions {
    #[schema(value_type = Vec<Object>)]
    pub partitions: Vec<scheduler::PartitionView>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Nodes {
    #[schema(value_type = Vec<Object>)]
    pub nodes: Vec<scheduler::NodeView>,
    /// Every GPU of the inventory: declared in the configuration or discovered
    /// with `nvidia-smi`; `present: false` marks a declared GPU that was not found.
    #[schema(value_type = Vec<Object>)]
    pub gpus: Vec<crate::services::cluster::GpuStatus>,
    /// The partitions, as `GET /api/v1/partitions` lists them (`sinfo` reads both in
    /// one call).
    #[schema(value_type = Vec<Object>)]
    pub partitions: Vec<scheduler::PartitionView>,
    /// The machine the portal runs on, when it is the cluster's node (the internal
    /// scheduler): what `scontrol show node` and `sinfo` read of a node's host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<ThisMachine>,
}

/// What a node's own daemon would tell of its machine, read from `/proc`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ThisMachine {
    /// The node's name.
    pub node: String,
    /// The kernel's name, release and version (`OS=` of `scontrol show node`).
    pub os: String,
    /// When the machine booted (Unix seconds).
    pub boot_time: Option<i64>,
    /// When the portal started (Unix seconds): its `SlurmdStartTime`.
    pub started: Option<i64>,
    /// The one-minute load average.
    pub cpu_load: Option<f64>,
    /// Memory available to new processes, MiB (`MemAvailable`).
    pub free_memory_mb: Option<u64>,
}

impl ThisMachine {
    /// This machine (`host`, read now) as node `node`; the portal started at `started`.
    fn of(host: crate::services::cluster::HostNow, node: String, started: i64) -> ThisMachine {
        ThisMachine {
            node,
            os: host.os,
            boot_time: host.boot_time,
            started: Some(started),
            cpu_load: host.cpu_load,
            free_memory_mb: host.free_memory_mb,
        }
    }
}

/// Partitions as `sinfo` shows them.
#[utoipa::path(get, path = "/api/v1/partitions", responses((status = 200, body = Partitions)))]
pub async fn partitions(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let (_, partitions) = state.cluster.nodes().await?;
    Ok(HttpResponse::Ok().json(Partitions { partitions }))
}

/// Nodes with their CPUs, memory and GPU slices in use.
#[utoipa::path(get, path = "/api/v1/nodes", responses((status = 200, body = Nodes)))]
pub async fn nodes(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let (nodes, partitions) = state.cluster.nodes().await?;
    let started = state.metrics.start_time.get();
    let host = (!state.cluster.is_slurm())
        .then(|| {
            nodes
                .first()
                .map(|n| ThisMachine::of(state.cluster.this_machine(), n.name.clone(), started))
        })
        .flatten();
    Ok(HttpResponse::Ok().json(Nodes {
        nodes,
        gpus: state.cluster.gpus().to_vec(),
        partitions,
        host,
    }))
}

/// The scheduler's configuration as `scontrol show config` lists Slurm's: the keys
/// programs read (`MinJobAge`, `MaxArraySize`, `ClusterName` …), in name order.
#[utoipa::path(get, path = "/api/v1/config", responses((status = 200, body = Object)))]
pub async fn config(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let jobs = &state.config.jobs;
    let slurm = state.cluster.is_slurm();
    let mut out = serde_json::Map::new();
    let mut put = |k: &str, v: serde_json::Value| {
        out.insert(k.to_string(), v);
    };
    put("AccountingStorageType", "accounting_storage/atrium".into());
    put("ClusterName", jobs.cluster_name.clone().into());
    put(
        "JobAcctGatherFrequency",
        format!("task={}", jobs.usage_interval_seconds).into(),
    );
    put(
        "KillWait",
        format!("{} sec", jobs.kill_grace_seconds).into(),
    );
    put("MaxArraySize", jobs.max_array_size.into());
    put("MaxJobCount", jobs.max_job_count.into());
    put(
        "MinJobAge",
        format!("{} sec", crate::sched::ENDED_JOB_AGE_SECS).into(),
    );
    put("PriorityType", "priority/multifactor".into());
    put(
        "SchedulerType",
        if slurm {
            "slurm (the site's)"
        } else {
            "sched/backfill (atrium)"
        }
        .into(),
    );
    put("SelectType", "select/cons_tres".into());
    put("SLURM_VERSION", "22.05.8".into());
    Ok(HttpResponse::Ok().json(serde_json::Value::Object(out)))
}

/// `GET /api/v1/cluster/gpus`: the GPU map as JSON, for the page's live refresh.
pub async fn gpu_map(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let map = state.cluster.gpu_map(&caller).await?;
    Ok(HttpResponse::Ok()
        .insert_header(("cache-control", "no-store"))
        .json(map))
}
