//! What a started job's step is given: its output paths (Slurm's `%j %A %a %u %x
//! %N %%` patterns, expanded within `PATH_MAX`) and its environment (the submitted
//! variables, a base, Slurm's variables and exactly the allocated GPUs).
//! Must not touch: the scheduler state, the database or processes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use scheduler::parse::limits::PATH_MAX;
use scheduler::{JobId, JobRequest, NodeAllocation};

/// Environment variable names a job may not set: they are the portal's to give.
const RESERVED_PREFIXES: &[&str] = &[
    "SLURM_",
    "SLURMD_",
    "CUDA_VISIBLE_DEVICES",
    "ATRIUM_JOB_TOKEN",
];

/// What a batch step's `-o/-e` patterns expand from (the scheduler crate's).
pub use scheduler::parse::PatternContext as PatternValues;

/// An expanded output path would be longer than `PATH_MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the path expands to more than {PATH_MAX} bytes (PATH_MAX)")]
pub struct PathTooLong;

/// Expand an `-o/-e` pattern (Slurm's `%j %A %a %u %x %N %%`) relative to `workdir`.
/// A path longer than `PATH_MAX` is refused, never truncated; the expansion stops
/// as soon as it is too long.
pub fn output_path(
    pattern: Option<&str>,
    v: &PatternValues<'_>,
    workdir: &Path,
) -> Result<PathBuf, PathTooLong> {
    let default = if v.job.task.is_some() {
        "slurm-%A_%a.out"
    } else {
        "slurm-%j.out"
    };
    let pattern = pattern.unwrap_or(default);
    let room = PATH_MAX
        .checked_sub(workdir.as_os_str().len() + 1)
        .ok_or(PathTooLong)?;
    let out = expand_pattern_within(pattern, room, |c| v.batch_value(c))?;
    Ok(workdir.join(out))
}

pub use scheduler::parse::NO_TASK;

/// Expand Slurm's `%X` filename pattern: `value` gives each letter's text; `%%` is a
/// `%`; an unknown letter and a trailing `%` stay as written. At most `PATH_MAX`
/// bytes.
pub fn expand_pattern(
    pattern: &str,
    value: impl Fn(char) -> Option<String>,
) -> Result<String, PathTooLong> {
    expand_pattern_within(pattern, PATH_MAX, value)
}

/// [`expand_pattern`] into at most `max` bytes: longer is an error, found before
/// more than `max` bytes (and one value) are held.
fn expand_pattern_within(
    pattern: &str,
    max: usize,
    value: impl Fn(char) -> Option<String>,
) -> Result<String, PathTooLong> {
    scheduler::parse::expand_filename(pattern, max, true, value).map_err(|_| PathTooLong)
}

/// Everything a job's environment is made of, besides the user's own variables.
pub struct StepContext<'a> {
    pub job: JobId,
    pub name: &'a str,
    pub user: &'a str,
    pub uid: u32,
    pub gid: u32,
    pub home: &'a Path,
    pub account: &'a str,
    pub partition: &'a str,
    pub submit_dir: &'a Path,
    pub cluster_name: &'a str,
    pub ntasks: u32,
    pub time_limit_secs: Option<u64>,
    pub node: &'a NodeAllocation,
}

/// The complete environment of a job: the submitted variables (`--export`: all of
/// them unless `NONE`, plus `VAR=value` items), then a base (`HOME`, `USER`,
/// `PATH` …) where the submission gave none, then Slurm's variables and
/// `CUDA_VISIBLE_DEVICES` with exactly the allocated devices.
pub fn environment(
    request: &JobRequest,
    submitted: &BTreeMap<String, String>,
    cx: &StepContext<'_>,
) -> Vec<(String, String)> {
    let mut env: BTreeMap<String, String> = BTreeMap::new();
    let export_all = request.export.as_ref().is_none_or(|e| e.all);
    let reserved = |k: &str| RESERVED_PREFIXES.iter().any(|p| k.starts_with(p));
    if export_all {
        for (k, v) in submitted {
            if !reserved(k) {
                env.insert(k.clone(), v.clone());
            }
        }
    }
    if let Some(export) = &request.export {
        for (k, v) in &export.vars {
            if reserved(k) {
                continue;
            }
            match v {
                Some(v) => {
                    env.insert(k.clone(), v.clone());
                }
                None => {
                    if let Some(v) = submitted.get(k) {
                        env.insert(k.clone(), v.clone());
                    }
                }
            }
        }
    }
    let home = cx.home.display().to_string();
    for (k, v) in [
        ("HOME", home.as_str()),
        ("USER", cx.user),
        ("LOGNAME", cx.user),
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("SHELL", "/bin/bash"),
        ("LANG", "C.UTF-8"),
    ] {
        env.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    // Inside the job these always describe the job, whatever was submitted.
    env.insert("HOME".into(), home);
    env.insert("USER".into(), cx.user.into());
    env.insert("LOGNAME".into(), cx.user.into());
    env.insert("TMPDIR".into(), "/tmp".into());
    let gpus: Vec<String> = gpu_indices(cx.node).iter().map(|i| i.to_string()).collect();
    let cpus = cx.node.cpus.to_string();
    let mut slurm = vec![
        ("SLURM_JOB_ID", cx.job.job.to_string()),
        ("SLURM_JOBID", cx.job.job.to_string()),
        ("SLURM_JOB_NAME", cx.name.to_string()),
        ("SLURM_JOB_USER", cx.user.to_string()),
        ("SLURM_JOB_UID", cx.uid.to_string()),
        ("SLURM_JOB_GID", cx.gid.to_string()),
        ("SLURM_JOB_ACCOUNT", cx.account.to_string()),
        ("SLURM_JOB_PARTITION", cx.partition.to_string()),
        ("SLURM_CLUSTER_NAME", cx.cluster_name.to_string()),
        ("SLURM_NTASKS", cx.ntasks.to_string()),
        ("SLURM_NPROCS", cx.ntasks.to_string()),
        ("SLURM_CPUS_ON_NODE", cpus.clone()),
        ("SLURM_JOB_CPUS_PER_NODE", cpus),
        ("SLURM_MEM_PER_NODE", cx.node.memory_mb.to_string()),
        ("SLURM_JOB_NODELIST", cx.node.node.clone()),
        ("SLURM_NODELIST", cx.node.node.clone()),
        ("SLURM_JOB_NUM_NODES", "1".to_string()),
        ("SLURM_NNODES", "1".to_string()),
        ("SLURMD_NODENAME", cx.node.node.clone()),
        ("SLURM_SUBMIT_DIR", cx.submit_dir.display().to_string()),
        ("SLURM_SUBMIT_HOST", cx.node.node.clone()),
        ("SLURM_GPUS_ON_NODE", gpus.len().to_string()),
        ("CUDA_VISIBLE_DEVICES", cx.node.cuda_visible_devices()),
    ];
    if !gpus.is_empty() {
        slurm.push(("SLURM_JOB_GPUS", gpus.join(",")));
        slurm.push(("GPU_DEVICE_ORDINAL", cx.node.cuda_visible_devices()));
    }
    if let Some(t) = cx.time_limit_secs {
        slurm.push(("SLURM_JOB_TIME_LIMIT_SECONDS", t.to_string()));
    }
    if let Some(task) = cx.job.task {
        slurm.push(("SLURM_ARRAY_JOB_ID", cx.job.job.to_string()));
        slurm.push(("SLURM_ARRAY_TASK_ID", task.to_string()));
        if let Some((min, max)) = request.array.as_ref().and_then(|a| a.bounds()) {
            let count = request.array.as_ref().map_or(0, |a| a.len());
            slurm.push(("SLURM_ARRAY_TASK_COUNT", count.to_string()));
            slurm.push(("SLURM_ARRAY_TASK_MIN", min.to_string()));
            slurm.push(("SLURM_ARRAY_TASK_MAX", max.to_string()));
        }
    }
    for (k, v) in slurm {
        env.insert(k.to_string(), v);
    }
    env.into_iter().collect()
}

/// What a job's `srun` needs: the directory of the step commands, the portal's
/// address as the job reaches it, and the job's token.
pub struct StepTools<'a> {
    pub bin_dir: &'a Path,
    pub portal_url: &'a str,
    pub token: &'a str,
}

/// Put the step commands first on the job's `PATH` (inside an internal job, `srun`
/// is atrium's whatever else the user's `PATH` holds) and give the job the portal's
/// address (`ATRIUM_URL`) and its token (`ATRIUM_JOB_TOKEN`). Applied last, over a
/// container's own variables.
pub fn add_step_tools(env: &mut Vec<(String, String)>, tools: &StepTools<'_>) {
    let bin = tools.bin_dir.display().to_string();
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let path = if path.is_empty() {
        bin
    } else {
        format!("{bin}:{path}")
    };
    env.retain(|(k, _)| !matches!(k.as_str(), "PATH" | "ATRIUM_URL" | "ATRIUM_JOB_TOKEN"));
    env.push(("PATH".into(), path));
    env.push(("ATRIUM_URL".into(), tools.portal_url.into()));
    env.push(("ATRIUM_JOB_TOKEN".into(), tools.token.into()));
}

/// Physical GPU indices of an allocation on one node (whole GPUs, MIG parents,
/// shard parents), each once, for `SLURM_JOB_GPUS` and device access.
pub fn sampled_gpus(node: &NodeAllocation) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for s in &node.slices {
        let i = match s {
            scheduler::SliceId::Gpu { index } => *index,
            scheduler::SliceId::Shard { gpu, .. } => *gpu,
            scheduler::SliceId::Mig { .. } => continue,
        };
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// The node's MIG instances, which usage samples read the memory of.
pub fn sampled_migs(node: &NodeAllocation) -> Vec<crate::launch::usage::MigSlice> {
    node.slices
        .iter()
        .filter_map(|s| match s {
            scheduler::SliceId::Mig { gpu, uuid, .. } => Some(crate::launch::usage::MigSlice {
                gpu: *gpu,
                uuid: uuid.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// Physical GPU indices of the node's slices, each once.
pub fn gpu_indices(node: &NodeAllocation) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for s in &node.slices {
        let i = match s {
            scheduler::SliceId::Gpu { index } => *index,
            scheduler::SliceId::Mig { gpu, .. } => *gpu,
            scheduler::SliceId::Shard { gpu, .. } => *gpu,
        };
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_patterns_expand_like_slurm() {
        let v = PatternValues {
            job: JobId::task(12, 3),
            user: "alice",
            name: "train",
            node: "head",
        };
        let dir = Path::new("/home/alice");
        assert_eq!(
            output_path(None, &v, dir).expect("fits"),
            PathBuf::from("/home/alice/slurm-12_3.out")
        );
        assert_eq!(
            output_path(Some("logs/%x-%A-%a-%u-%N-%j.%%"), &v, dir).expect("fits"),
            PathBuf::from("/home/alice/logs/train-12-3-alice-head-12_3.%")
        );
        let plain = PatternValues {
            job: JobId::new(7),
            ..v
        };
        assert_eq!(
            output_path(None, &plain, dir).expect("fits"),
            PathBuf::from("/home/alice/slurm-7.out")
        );
        assert_eq!(
            output_path(Some("/scratch/o-%j"), &plain, dir).expect("fits"),
            PathBuf::from("/scratch/o-7")
        );
    }

    #[test]
    fn the_environment_has_slurm_variables_and_only_the_allocated_gpus() {
        let node = NodeAllocation {
            node: "head".into(),
            cpus: 16,
            memory_mb: 1000,
            slices: vec![
                scheduler::SliceId::Gpu { index: 2 },
                scheduler::SliceId::Gpu { index: 3 },
            ],
        };
        let submitted = BTreeMap::from([
            ("FOO".to_string(), "bar".to_string()),
            ("CUDA_VISIBLE_DEVICES".to_string(), "0,1,2,3".to_string()),
            ("HOME".to_string(), "/elsewhere".to_string()),
        ]);
        let cx = StepContext {
            job: JobId::new(5),
            name: "n",
            user: "alice",
            uid: 20001,
            gid: 20001,
            home: Path::new("/home/alice"),
            account: "alice",
            partition: "gpu",
            submit_dir: Path::new("/home/alice/work"),
            cluster_name: "atrium",
            ntasks: 1,
            time_limit_secs: Some(60),
            node: &node,
        };
        let env: BTreeMap<_, _> = environment(&JobRequest::default(), &submitted, &cx)
            .into_iter()
            .collect();
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], "2,3");
        assert_eq!(env["SLURM_JOB_GPUS"], "2,3");
        assert_eq!(env["FOO"], "bar");
        assert_eq!(env["HOME"], "/home/alice");
        assert_eq!(env["SLURM_CPUS_ON_NODE"], "16");
        assert_eq!(env["SLURM_SUBMIT_DIR"], "/home/alice/work");
        let none = scheduler::parse_args(&["--export=NONE"]).expect("export");
        let env: BTreeMap<_, _> = environment(&none, &submitted, &cx).into_iter().collect();
        assert!(!env.contains_key("FOO"));
    }

    #[test]
    fn srun_comes_first_on_the_path_with_the_portal_and_the_jobs_token() {
        let mut env = vec![
            ("PATH".to_string(), "/opt/conda/bin:/usr/bin".to_string()),
            ("ATRIUM_URL".to_string(), "https://elsewhere".to_string()),
        ];
        let tools = StepTools {
            bin_dir: Path::new("/var/spool/atrium/bin"),
            portal_url: "http://127.0.0.1:8000",
            token: "abc",
        };
        add_step_tools(&mut env, &tools);
        let env: BTreeMap<_, _> = env.into_iter().collect();
        assert_eq!(env["PATH"], "/var/spool/atrium/bin:/opt/conda/bin:/usr/bin");
        assert_eq!(env["ATRIUM_URL"], "http://127.0.0.1:8000");
        assert_eq!(env["ATRIUM_JOB_TOKEN"], "abc");
        let submitted = BTreeMap::from([("ATRIUM_JOB_TOKEN".to_string(), "forged".to_string())]);
        let node = NodeAllocation {
            node: "head".into(),
            cpus: 1,
            memory_mb: 1,
            slices: Vec::new(),
        };
        let cx = StepContext {
            job: JobId::new(5),
            name: "n",
            user: "alice",
            uid: 1,
            gid: 1,
            home: Path::new("/home/alice"),
            account: "alice",
            partition: "gpu",
            submit_dir: Path::new("/home/alice"),
            cluster_name: "atrium",
            ntasks: 1,
            time_limit_secs: None,
            node: &node,
        };
        let env = environment(&JobRequest::default(), &submitted, &cx);
        assert!(env.iter().all(|(k, _)| k != "ATRIUM_JOB_TOKEN"), "{env:?}");
    }
}
