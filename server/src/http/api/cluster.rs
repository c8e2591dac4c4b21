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
    pub gpus: Vec<crate::sched::inventory::GpuStatus>,
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
    fn read(node: String) -> ThisMachine {
        let proc = |p: &str| std::fs::read_to_string(format!("/proc/{p}")).ok();
        let os = ["ostype", "osrelease", "version"]
            .iter()
            .filter_map(|k| proc(&format!("sys/kernel/{k}")))
            .map(|s| s.trim().to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let boot_time: Option<i64> = proc("stat").and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse().ok())
        });
        // Field 22 of our own stat: clock ticks after boot (the name, field 2, may
        // hold blanks: count from its closing parenthesis).
        let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .filter(|t| *t > 0);
        let started = proc("self/stat").and_then(|s| {
            let after = s.rsplit_once(')')?.1;
            let since_boot: i64 = after.split_whitespace().nth(19)?.parse().ok()?;
            Some(boot_time? + since_boot / ticks?)
        });
        let cpu_load =
            proc("loadavg").and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()));
        let free_memory_mb = proc("meminfo").and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kb| kb / 1024)
        });
        ThisMachine {
            node,
            os,
            boot_time,
            started,
            cpu_load,
            free_memory_mb,
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
    let (_, partitions) = state.scheduler.nodes().await?;
    Ok(HttpResponse::Ok().json(Partitions { partitions }))
}

/// Nodes with their CPUs, memory and GPU slices in use.
#[utoipa::path(get, path = "/api/v1/nodes", responses((status = 200, body = Nodes)))]
pub async fn nodes(
    caller: Principal,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let (nodes, partitions) = state.scheduler.nodes().await?;
    let host = (state.config.scheduler.backend != "slurm")
        .then(|| nodes.first().map(|n| ThisMachine::read(n.name.clone())))
        .flatten();
    Ok(HttpResponse::Ok().json(Nodes {
        nodes,
        gpus: state.inventory.gpus.clone(),
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
    let slurm = state.config.scheduler.backend == "slurm";
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
