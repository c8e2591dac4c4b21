//! The node inventory: what this machine offers the scheduler.
//!
//! Owns: detecting the host (name, CPUs, memory), discovering GPUs with
//! `nvidia-smi`, merging them with the GPUs and partitions of `[cluster]`, and the
//! resulting `scheduler::ClusterConfig` with a status line per GPU.
//! Must not touch: the scheduler's state (the actor owns it), the database, HTTP.

mod nvidia_smi;

use scheduler::model::{GpuConfig, GpuMode, MigInstanceConfig, NodeConfig, PartitionConfig};
use scheduler::ClusterConfig;
use serde::{Serialize, Serializer};

use crate::config::{ClusterSection, DeclaredGpu};

pub use nvidia_smi::{
    mig_modes, model_from_name, parse_gpu_list, parse_gpu_query, parse_mig_modes, query, with_mig,
    GpuQuery, ListedGpu, MigMode, TIMEOUT as NVIDIA_SMI_TIMEOUT,
};

/// The scheduler's configuration for this node, and what is known of each GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inventory {
    pub cluster: ClusterConfig,
    pub gpus: Vec<GpuStatus>,
}

/// One GPU of the inventory: where it comes from and whether the machine has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuStatus {
    pub node: String,
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub memory_mb: u64,
    pub source: GpuSource,
    /// Whether `nvidia-smi` reported it. A declared GPU it did not report (or when
    /// it is absent, failed or disabled) is still scheduled.
    pub present: bool,
    /// `(profile, uuid)` of each MIG instance scheduled; serialized as
    /// `[{"profile": …, "uuid": …}]`.
    #[serde(serialize_with = "mig_instances")]
    pub mig: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuSource {
    /// Only in `[[cluster.gpus]]`.
    Declared,
    /// Reported by `nvidia-smi` (possibly also declared, for its layout).
    Discovered,
}

/// A GPU as `nvidia-smi` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredGpu {
    pub index: u32,
    pub uuid: String,
    /// The name `nvidia-smi` prints, e.g. `NVIDIA A100-SXM4-80GB`.
    pub name: String,
    pub memory_mb: u64,
    /// `(profile, uuid)` of each MIG instance.
    pub mig: Vec<(String, String)>,
}

/// What the machine says about itself; `None` where it could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// Short hostname.
    pub hostname: Option<String>,
    /// CPUs available to this process.
    pub cpus: Option<u32>,
    /// `MemTotal`, in MB.
    pub memory_total_mb: Option<u64>,
}

impl HostFacts {
    /// Read the hostname, CPUs and memory of this machine.
    pub fn detect() -> HostFacts {
        let read = |path: &str| std::fs::read_to_string(path).ok();
        HostFacts {
            hostname: read("/proc/sys/kernel/hostname")
                .as_deref()
                .and_then(short_hostname),
            cpus: std::thread::available_parallelism()
                .ok()
                .and_then(|n| u32::try_from(n.get()).ok())
                .or_else(|| {
                    read("/proc/cpuinfo")
                        .as_deref()
                        .and_then(cpuinfo_processors)
                }),
            memory_total_mb: read("/proc/meminfo").as_deref().and_then(meminfo_total_mb),
        }
    }
}

/// `gpu01` of `gpu01.cluster.example.org\n`.
pub fn short_hostname(text: &str) -> Option<String> {
    let name = text.trim().split('.').next()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// The `processor` entries of `/proc/cpuinfo`.
pub fn cpuinfo_processors(text: &str) -> Option<u32> {
    let n = text
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count();
    u32::try_from(n).ok().filter(|n| *n > 0)
}

/// `MemTotal` of `/proc/meminfo`, in MB.
pub fn meminfo_total_mb(text: &str) -> Option<u64> {
    meminfo_mb(text, "MemTotal:")
}

/// The value of `key` (`MemAvailable:`) in `/proc/meminfo`'s text, in MiB.
pub fn meminfo_mb(text: &str, key: &str) -> Option<u64> {
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024)
}

/// What the machine tells of itself now, as a node's daemon would (`scontrol show
/// node`'s `OS`, `BootTime`, `CPULoad`, `FreeMem`).
#[derive(Debug, Clone, PartialEq)]
pub struct HostNow {
    /// The kernel's name, release and version.
    pub os: String,
    /// When the machine booted (Unix seconds).
    pub boot_time: Option<i64>,
    /// The one-minute load average.
    pub cpu_load: Option<f64>,
    /// Memory available to new processes, MiB (`MemAvailable`).
    pub free_memory_mb: Option<u64>,
}

impl HostNow {
    /// Read from `/proc`.
    pub fn read() -> HostNow {
        let proc = |p: &str| std::fs::read_to_string(format!("/proc/{p}")).ok();
        let os = ["ostype", "osrelease", "version"]
            .iter()
            .filter_map(|k| proc(&format!("sys/kernel/{k}")))
            .map(|s| s.trim().to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let boot_time = proc("stat").and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse().ok())
        });
        let cpu_load =
            proc("loadavg").and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()));
        let free_memory_mb = proc("meminfo")
            .as_deref()
            .and_then(|s| meminfo_mb(s, "MemAvailable:"));
        HostNow {
            os,
            boot_time,
            cpu_load,
            free_memory_mb,
        }
    }
}

/// Detect the host, discover GPUs (when `cluster.discover_gpus`), and [`build`].
pub async fn discover(cfg: &ClusterSection) -> anyhow::Result<Inventory> {
    let host = HostFacts::detect();
    let discovered = if cfg.discover_gpus {
        nvidia_smi::discover(
            &crate::privilege::system_program("nvidia-smi"),
            nvidia_smi::TIMEOUT,
        )
        .await
    } else {
        None
    };
    build(cfg, host, discovered).map_err(anyhow::Error::msg)
}

/// The inventory of `cfg` on a host with `host`'s facts and the GPUs `nvidia-smi`
/// reported (`None`: not run, absent or failed). Discovered GPUs are used, with the
/// MIG or shard layout of a declared GPU of the same index; declared GPUs it did
/// not report are used too, with `present: false`. The result is checked by
/// building a `scheduler::Cluster` from it.
pub fn build(
    cfg: &ClusterSection,
    host: HostFacts,
    discovered: Option<Vec<DiscoveredGpu>>,
) -> Result<Inventory, String> {
    let node = cfg
        .node_name
        .clone()
        .or(host.hostname)
        .ok_or("cannot read this machine's hostname: set cluster.node_name")?;
    let cpus = cfg
        .cpus
        .or(host.cpus)
        .ok_or("cannot count this machine's CPUs: set cluster.cpus")?;
    let memory_mb = match cfg.memory_mb {
        Some(mb) => mb,
        None => {
            let total = host
                .memory_total_mb
                .ok_or("cannot read this machine's memory: set cluster.memory_mb")?;
            total
                .checked_sub(cfg.reserved_memory_mb)
                .filter(|mb| *mb > 0)
                .ok_or_else(|| {
                    format!(
                        "cluster.reserved_memory_mb ({}) leaves nothing of this machine's \
                         {total} MB: lower it or set cluster.memory_mb",
                        cfg.reserved_memory_mb
                    )
                })?
        }
    };
    let (gpus, status) = merge_gpus(&node, cfg, discovered);
    let cluster = ClusterConfig {
        nodes: vec![NodeConfig {
            name: node.clone(),
            cpus,
            memory_mb,
            features: cfg.features.clone(),
            gpus,
        }],
        partitions: partitions(cfg, &node)?,
        licenses: cfg.licenses.clone(),
        ..ClusterConfig::default()
    };
    scheduler::Cluster::new(cluster.clone())
        .map_err(|e| format!("the scheduler refuses this node's inventory: {e}"))?;
    Ok(Inventory {
        cluster,
        gpus: status,
    })
}

/// The partitions of `cfg`, all on `node`; one default partition `main` when none.
fn partitions(cfg: &ClusterSection, node: &str) -> Result<Vec<PartitionConfig>, String> {
    if cfg.partitions.is_empty() {
        let mut main = PartitionConfig::new("main", vec![node.to_string()]);
        main.default = true;
        return Ok(vec![main]);
    }
    cfg.partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let times = p.time_limits().map_err(|(field, message)| {
                format!("cluster.partitions[{i}].{field}: {message}")
            })?;
            Ok(PartitionConfig {
                default_time_secs: times.default_secs,
                max_time_secs: times.max_secs,
                default_cpus_per_gpu: p.cpus_per_gpu,
                default_mem_per_gpu_mb: p.mem_per_gpu_mb,
                allowed_groups: p.allowed_groups.clone(),
                priority_tier: p.priority_tier,
                default: p.default,
                ..PartitionConfig::new(p.name.clone(), vec![node.to_string()])
            })
        })
        .collect()
}

/// The GPUs to schedule and their status, by index.
fn merge_gpus(
    node: &str,
    cfg: &ClusterSection,
    discovered: Option<Vec<DiscoveredGpu>>,
) -> (Vec<GpuConfig>, Vec<GpuStatus>) {
    let mut gpus = Vec::new();
    let mut status = Vec::new();
    let mut found = discovered.unwrap_or_default();
    found.sort_by_key(|g| g.index);
    for d in &found {
        let model = model_from_name(&d.name);
        let declared = cfg.gpus.iter().find(|g| g.index == d.index);
        let mode = match declared {
            Some(g) if g.shards.is_some() || !g.mig.is_empty() => {
                if !g.model.eq_ignore_ascii_case(&model) {
                    tracing::info!(
                        "declared GPU {} ({}) is a {model} according to nvidia-smi: \
                         its declared layout is used with the discovered model",
                        g.index,
                        g.model
                    );
                }
                Some(declared_mode(node, g, &d.mig))
            }
            _ => discovered_mode(&model, d),
        };
        if let Some(mode) = &mode {
            gpus.push(GpuConfig {
                index: d.index,
                uuid: d.uuid.clone(),
                model: model.clone(),
                memory_mb: d.memory_mb,
                mode: mode.clone(),
            });
        }
        status.push(GpuStatus {
            node: node.to_string(),
            index: d.index,
            uuid: d.uuid.clone(),
            model,
            memory_mb: d.memory_mb,
            source: GpuSource::Discovered,
            present: true,
            mig: mode.as_ref().map(mig_of).unwrap_or_default(),
        });
    }
    for g in &cfg.gpus {
        if found.iter().any(|d| d.index == g.index) {
            continue;
        }
        if cfg.discover_gpus {
            tracing::warn!(
                "declared GPU {} ({}) was not found by nvidia-smi",
                g.index,
                g.model
            );
        } else {
            tracing::info!(
                "declared GPU {} ({}) is used unchecked (cluster.discover_gpus = false)",
                g.index,
                g.model
            );
        }
        let uuid = g
            .uuid
            .clone()
            .unwrap_or_else(|| format!("GPU-declared-{node}-{}", g.index));
        let mode = declared_mode(node, g, &[]);
        status.push(GpuStatus {
            node: node.to_string(),
            index: g.index,
            uuid: uuid.clone(),
            model: g.model.clone(),
            memory_mb: g.memory_mb,
            source: GpuSource::Declared,
            present: false,
            mig: mig_of(&mode),
        });
        gpus.push(GpuConfig {
            index: g.index,
            uuid,
            model: g.model.clone(),
            memory_mb: g.memory_mb,
            mode,
        });
    }
    gpus.sort_by_key(|g| g.index);
    status.sort_by_key(|g| g.index);
    (gpus, status)
}

/// The layout of a declared GPU. A MIG instance declared without a UUID takes the
/// UUID of an instance of its profile that `nvidia-smi` listed, else a placeholder.
fn declared_mode(node: &str, g: &DeclaredGpu, listed: &[(String, String)]) -> GpuMode {
    if let Some(shards) = g.shards {
        return GpuMode::Shards(shards);
    }
    if g.mig.is_empty() {
        return GpuMode::Whole;
    }
    let mut unused: Vec<&(String, String)> = listed
        .iter()
        .filter(|(_, uuid)| !g.mig.iter().any(|m| m.uuid.as_deref() == Some(uuid)))
        .collect();
    let instances = g
        .mig
        .iter()
        .enumerate()
        .map(|(j, m)| {
            let uuid = m.uuid.clone().unwrap_or_else(|| {
                match unused.iter().position(|(p, _)| *p == m.profile) {
                    Some(k) => unused.remove(k).1.clone(),
                    None => format!("MIG-declared-{node}-{}-{j}", g.index),
                }
            });
            MigInstanceConfig {
                profile: m.profile.clone(),
                uuid,
            }
        })
        .collect();
    GpuMode::Mig(instances)
}

/// The layout `nvidia-smi` reported: whole, or the MIG instances of profiles the
/// scheduler knows for the model. `None`: in MIG mode, but the scheduler knows no
/// MIG profiles of the model, so the GPU cannot be scheduled.
fn discovered_mode(model: &str, d: &DiscoveredGpu) -> Option<GpuMode> {
    if d.mig.is_empty() {
        return Some(GpuMode::Whole);
    }
    let Some(profiles) = scheduler::model::mig_profiles(model) else {
        tracing::warn!(
            "GPU {} ({model}) is in MIG mode, but the scheduler knows no MIG profiles \
             of this model: it is not scheduled",
            d.index
        );
        return None;
    };
    let mut instances = Vec::new();
    for (profile, uuid) in &d.mig {
        if profiles.iter().any(|(p, _)| p == profile) {
            instances.push(MigInstanceConfig {
                profile: profile.clone(),
                uuid: uuid.clone(),
            });
        } else {
            tracing::warn!(
                "MIG instance {uuid} of GPU {} has profile {profile}, which the scheduler \
                 does not know for {model}: it is not scheduled",
                d.index
            );
        }
    }
    Some(GpuMode::Mig(instances))
}

fn mig_of(mode: &GpuMode) -> Vec<(String, String)> {
    match mode {
        GpuMode::Mig(instances) => instances
            .iter()
            .map(|m| (m.profile.clone(), m.uuid.clone()))
            .collect(),
        GpuMode::Whole | GpuMode::Shards(_) => Vec::new(),
    }
}

fn mig_instances<S: Serializer>(mig: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Instance<'a> {
        profile: &'a str,
        uuid: &'a str,
    }
    s.collect_seq(mig.iter().map(|(profile, uuid)| Instance { profile, uuid }))
}

#[cfg(test)]
mod tests;
