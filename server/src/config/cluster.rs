//! `[cluster]`: this machine as a compute node (its resources, GPUs and partitions).
//!
//! Owns: [`ClusterSection`], [`DeclaredGpu`], [`DeclaredMig`] and [`PartitionSection`],
//! their defaults and checks, and a partition's time limits in seconds.
//! Must not touch: detecting or discovering the machine (`sched::inventory`'s) or the
//! scheduler's state.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::check::at_least;

/// This machine as a compute node: its resources, GPUs and partitions. What is left
/// out is detected (hostname, CPUs, memory) or discovered (GPUs, with `nvidia-smi`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ClusterSection {
    /// Node name (default: the machine's short hostname).
    pub node_name: Option<String>,
    /// CPUs jobs may use (default: the CPUs available to the portal).
    pub cpus: Option<u32>,
    /// Memory jobs may use, in MB (default: the machine's memory less
    /// `reserved_memory_mb`).
    pub memory_mb: Option<u64>,
    /// Memory left to the operating system and the portal when `memory_mb` is
    /// detected, in MB.
    pub reserved_memory_mb: u64,
    /// Node features that `--constraint` can ask for.
    pub features: Vec<String>,
    /// Ask `nvidia-smi` for the machine's GPUs (when it is installed).
    pub discover_gpus: bool,
    /// GPUs declared by hand: for machines without `nvidia-smi`, for tests, and to
    /// give a discovered GPU (same index) a MIG or shard layout.
    pub gpus: Vec<DeclaredGpu>,
    /// Partitions of this node (default: one partition `main`).
    pub partitions: Vec<PartitionSection>,
    /// Counted site resources jobs ask with `-L name[:count]` (Slurm's
    /// `Licenses=`), e.g. `licenses = { scratch = 10, matlab = 2 }`.
    pub licenses: std::collections::BTreeMap<String, u32>,
}

impl Default for ClusterSection {
    fn default() -> Self {
        Self {
            node_name: None,
            cpus: None,
            memory_mb: None,
            reserved_memory_mb: 1024,
            features: Vec::new(),
            discover_gpus: true,
            gpus: Vec::new(),
            partitions: Vec::new(),
            licenses: Default::default(),
        }
    }
}

/// A GPU as declared in `[[cluster.gpus]]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct DeclaredGpu {
    /// Index as `nvidia-smi` shows it.
    pub index: u32,
    /// Default: `GPU-declared-<node>-<index>`.
    pub uuid: Option<String>,
    /// Model, e.g. `A100-80GB`; `gpu:a100` requests match it.
    pub model: String,
    pub memory_mb: u64,
    /// MIG instances (exclusive with `shards`).
    pub mig: Vec<DeclaredMig>,
    /// Time-sliced shares (exclusive with `mig`).
    pub shards: Option<u32>,
}

/// A MIG instance of a declared GPU.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct DeclaredMig {
    /// A profile of the GPU's model, such as `3g.40gb`.
    pub profile: String,
    /// Default: the UUID `nvidia-smi` lists for an instance of this profile, or a
    /// placeholder when there is none.
    pub uuid: Option<String>,
}

/// A partition as declared in `[[cluster.partitions]]` (Slurm semantics).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct PartitionSection {
    pub name: String,
    /// The partition of jobs that name none; exactly one partition is the default.
    pub default: bool,
    /// Time limit of jobs that ask for none, in `sbatch --time` syntax (default:
    /// unlimited).
    pub default_time: Option<String>,
    /// Longest time limit a job may ask for, in `sbatch --time` syntax (default:
    /// unlimited).
    pub max_time: Option<String>,
    /// CPUs given per GPU when a job does not say.
    pub cpus_per_gpu: u32,
    /// Memory given per GPU when a job does not say, in MB.
    pub mem_per_gpu_mb: u64,
    /// Unix groups allowed to submit (empty: everyone).
    pub allowed_groups: Vec<String>,
    /// Higher tiers are scheduled first.
    pub priority_tier: u32,
}

impl Default for PartitionSection {
    fn default() -> Self {
        Self {
            name: String::new(),
            default: false,
            default_time: None,
            max_time: None,
            cpus_per_gpu: 8,
            mem_per_gpu_mb: 48 * 1024,
            allowed_groups: Vec::new(),
            priority_tier: 0,
        }
    }
}

impl ClusterSection {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        if let Some(name) = &self.node_name {
            node_name(problem, "cluster.node_name", name);
        }
        if let Some(cpus) = self.cpus {
            at_least(problem, "cluster.cpus", cpus, 1);
        }
        if let Some(memory_mb) = self.memory_mb {
            at_least(problem, "cluster.memory_mb", memory_mb, 1);
        }
        for (i, feature) in self.features.iter().enumerate() {
            node_name(problem, &format!("cluster.features[{i}]"), feature);
        }
        let mut indices = BTreeSet::new();
        for (i, gpu) in self.gpus.iter().enumerate() {
            gpu.check(&format!("cluster.gpus[{i}]"), problem);
            if !indices.insert(gpu.index) {
                problem(
                    &format!("cluster.gpus[{i}].index"),
                    format!("GPU {} is declared more than once", gpu.index),
                );
            }
        }
        let mut names = BTreeSet::new();
        for (i, partition) in self.partitions.iter().enumerate() {
            partition.check(&format!("cluster.partitions[{i}]"), problem);
            if !partition.name.is_empty() && !names.insert(partition.name.as_str()) {
                problem(
                    &format!("cluster.partitions[{i}].name"),
                    format!("partition {:?} is declared more than once", partition.name),
                );
            }
        }
        let defaults = self.partitions.iter().filter(|p| p.default).count();
        if !self.partitions.is_empty() && defaults != 1 {
            problem(
                "cluster.partitions",
                format!("exactly one partition must have default = true ({defaults} have)"),
            );
        }
    }
}

/// Node names, features and partition names: what `sinfo` and `--constraint` can
/// carry.
fn node_name(problem: &mut impl FnMut(&str, String), key: &str, name: &str) {
    let ok = (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        problem(
            key,
            format!("{name:?} must be 1-64 characters of letters, digits, '-', '_' and '.'"),
        );
    }
}

impl DeclaredGpu {
    fn check(&self, key: &str, problem: &mut impl FnMut(&str, String)) {
        if self.model.trim().is_empty() {
            problem(&format!("{key}.model"), "must not be empty".into());
        }
        at_least(problem, &format!("{key}.memory_mb"), self.memory_mb, 1);
        if self.uuid.as_deref().is_some_and(|u| u.trim().is_empty()) {
            problem(&format!("{key}.uuid"), "must not be empty".into());
        }
        if let Some(shards) = self.shards {
            if !self.mig.is_empty() {
                problem(
                    &format!("{key}.shards"),
                    "a GPU is split into MIG instances or shards, not both".into(),
                );
            }
            if !(1..=1000).contains(&shards) {
                problem(&format!("{key}.shards"), "must be 1 to 1000".into());
            }
        }
        if self.mig.is_empty() || self.model.trim().is_empty() {
            return;
        }
        let Some(profiles) = scheduler::model::mig_profiles(&self.model) else {
            problem(
                &format!("{key}.mig"),
                format!("{} does not support MIG", self.model),
            );
            return;
        };
        let mut compute_slices = 0;
        for (j, instance) in self.mig.iter().enumerate() {
            match profiles.iter().find(|(p, _)| *p == instance.profile) {
                Some((_, slices)) => compute_slices += slices,
                None => {
                    let valid: Vec<&str> = profiles.iter().map(|(p, _)| *p).collect();
                    problem(
                        &format!("{key}.mig[{j}].profile"),
                        format!(
                            "{:?} is not a MIG profile of {} (valid: {})",
                            instance.profile,
                            self.model,
                            valid.join(", ")
                        ),
                    );
                }
            }
            if instance
                .uuid
                .as_deref()
                .is_some_and(|u| u.trim().is_empty())
            {
                problem(&format!("{key}.mig[{j}].uuid"), "must not be empty".into());
            }
        }
        if compute_slices > 7 {
            problem(
                &format!("{key}.mig"),
                format!("the instances use {compute_slices} of the GPU's 7 compute slices"),
            );
        }
    }
}

/// A partition's time limits in seconds (`None`: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionTimes {
    pub default_secs: Option<u64>,
    pub max_secs: Option<u64>,
}

impl PartitionSection {
    /// `default_time` and `max_time` in seconds; `Err((field, message))` names the
    /// field that does not parse.
    pub fn time_limits(&self) -> Result<PartitionTimes, (&'static str, String)> {
        let parse = |key: &'static str, value: &Option<String>| match value {
            None => Ok(None),
            Some(text) => match text.parse::<scheduler::TimeLimit>() {
                Ok(scheduler::TimeLimit::Seconds(secs)) => Ok(Some(secs)),
                Ok(scheduler::TimeLimit::Unlimited) => Ok(None),
                Err(message) => Err((key, message)),
            },
        };
        Ok(PartitionTimes {
            default_secs: parse("default_time", &self.default_time)?,
            max_secs: parse("max_time", &self.max_time)?,
        })
    }

    fn check(&self, key: &str, problem: &mut impl FnMut(&str, String)) {
        node_name(problem, &format!("{key}.name"), &self.name);
        match self.time_limits() {
            Err((field, message)) => problem(&format!("{key}.{field}"), message),
            Ok(PartitionTimes {
                default_secs: Some(default),
                max_secs: Some(max),
            }) if default > max => problem(
                &format!("{key}.default_time"),
                "must not be longer than max_time".into(),
            ),
            Ok(_) => {}
        }
        at_least(
            problem,
            &format!("{key}.cpus_per_gpu"),
            self.cpus_per_gpu,
            1,
        );
        at_least(
            problem,
            &format!("{key}.mem_per_gpu_mb"),
            self.mem_per_gpu_mb,
            1,
        );
        if self.allowed_groups.iter().any(|g| g.trim().is_empty()) {
            problem(
                &format!("{key}.allowed_groups"),
                "group names must not be empty".into(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_reported, load_str};
    use super::super::Problem;
    use super::*;

    const CLUSTER_EXAMPLE: &str = r#"
[cluster]
node_name = "head"
cpus = 64
memory_mb = 515000
reserved_memory_mb = 2048
features = ["nvme"]
discover_gpus = false
[[cluster.gpus]]
index = 0
uuid = "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"
model = "A100-80GB"
memory_mb = 81920
mig = [{ profile = "3g.40gb", uuid = "MIG-c6d4f1ef-42e4-5de3-91c7-45d71585b3bf" }, { profile = "4g.40gb" }]
[[cluster.gpus]]
index = 1
model = "A100-80GB"
memory_mb = 81920
shards = 4
[[cluster.partitions]]
name = "gpu"
default = true
default_time = "1:00:00"
max_time = "7-00:00:00"
cpus_per_gpu = 8
mem_per_gpu_mb = 49152
allowed_groups = ["ml"]
priority_tier = 1
[[cluster.partitions]]
name = "debug"
max_time = "30"
"#;

    #[test]
    fn cluster_defaults_to_one_machine() {
        let config = load_str("", &[]).config;
        assert_eq!(config.cluster.node_name, None);
        assert_eq!(config.cluster.cpus, None);
        assert_eq!(config.cluster.memory_mb, None);
        assert_eq!(config.cluster.reserved_memory_mb, 1024);
        assert!(config.cluster.discover_gpus);
        assert!(config.cluster.gpus.is_empty() && config.cluster.partitions.is_empty());
    }

    #[test]
    fn cluster_example_loads_without_problems() {
        let loaded = load_str(CLUSTER_EXAMPLE, &[("ATRIUM_CLUSTER__CPUS", "32")]);
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        let cluster = &loaded.config.cluster;
        assert_eq!(cluster.node_name.as_deref(), Some("head"));
        assert_eq!(cluster.cpus, Some(32), "environment overrides the file");
        assert_eq!(cluster.gpus.len(), 2);
        assert_eq!(cluster.gpus[0].mig[1].profile, "4g.40gb");
        assert_eq!(cluster.gpus[0].mig[1].uuid, None);
        assert_eq!(cluster.gpus[1].shards, Some(4));
        let gpu = &cluster.partitions[0];
        assert_eq!(
            gpu.time_limits(),
            Ok(PartitionTimes {
                default_secs: Some(3600),
                max_secs: Some(7 * 86_400)
            })
        );
        assert_eq!(gpu.allowed_groups, ["ml"]);
        let debug = &cluster.partitions[1];
        assert_eq!(
            debug.time_limits(),
            Ok(PartitionTimes {
                default_secs: None,
                max_secs: Some(30 * 60)
            })
        );
        assert_eq!((debug.cpus_per_gpu, debug.mem_per_gpu_mb), (8, 49152));
    }

    #[test]
    fn cluster_problems_name_their_keys() {
        let loaded = load_str(
            r#"
[cluster]
node_name = "head node"
cpus = 0
features = ["a,b"]
[[cluster.gpus]]
index = 0
model = "A100-40GB"
memory_mb = 40960
mig = [{ profile = "3g.40gb" }, { profile = "7g.40gb" }]
shards = 2
colour = "green"
[[cluster.gpus]]
index = 0
model = "V100-SXM2-32GB"
mig = [{ profile = "1g.5gb" }]
[[cluster.gpus]]
index = 2
model = ""
memory_mb = 1
shards = 0
[[cluster.partitions]]
name = "gpu"
default_time = "2:00:00"
max_time = "1:00:00"
cpus_per_gpu = 0
[[cluster.partitions]]
name = "gpu"
max_time = "soon"
mem_per_gpu_mb = 0
allowed_groups = [""]
"#,
            &[],
        );
        assert_reported(
            &loaded,
            &[
                "cluster.node_name",
                "cluster.cpus",
                "cluster.features[0]",
                "cluster.gpus.0.colour",
                "cluster.gpus[0].mig[0].profile",
                "cluster.gpus[0].shards",
                "cluster.gpus[1].index",
                "cluster.gpus[1].memory_mb",
                "cluster.gpus[1].mig",
                "cluster.gpus[2].model",
                "cluster.gpus[2].shards",
                "cluster.partitions[0].default_time",
                "cluster.partitions[0].cpus_per_gpu",
                "cluster.partitions[1].name",
                "cluster.partitions[1].max_time",
                "cluster.partitions[1].mem_per_gpu_mb",
                "cluster.partitions[1].allowed_groups",
                "cluster.partitions",
            ],
        );
        let over = load_str(
            "[[cluster.gpus]]\nindex = 0\nmodel = \"A100-80GB\"\nmemory_mb = 1\nmig = [{ profile = \"4g.40gb\" }, { profile = \"4g.40gb\" }]\n",
            &[],
        );
        assert_eq!(
            over.problems,
            [Problem {
                key: "cluster.gpus[0].mig".into(),
                message: "the instances use 8 of the GPU's 7 compute slices".into()
            }]
        );
    }
}
