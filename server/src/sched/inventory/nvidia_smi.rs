//! `nvidia-smi`: running its two queries and reading what they print.
//!
//! Owns: the command lines, their time limit, and pure parsers of their output.
//! Must not touch: configuration or the scheduler's model; merging with declared
//! GPUs is the inventory's.

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

use super::DiscoveredGpu;

/// `index, uuid, name, memory.total` of every GPU, one CSV line each.
pub const QUERY_ARGS: [&str; 2] = [
    "--query-gpu=index,uuid,name,memory.total",
    "--format=csv,noheader,nounits",
];
/// Every GPU with its MIG instances.
pub const LIST_ARGS: [&str; 1] = ["-L"];
/// How long one `nvidia-smi` run may take.
pub const TIMEOUT: Duration = Duration::from_secs(5);

/// A GPU line of `nvidia-smi -L` with the MIG instances listed under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGpu {
    pub index: u32,
    pub uuid: String,
    /// `(profile, uuid)` of each MIG instance, in the order listed.
    pub mig: Vec<(String, String)>,
}

/// Parse `nvidia-smi --query-gpu=index,uuid,name,memory.total
/// --format=csv,noheader,nounits` (memory may also read `81920 MiB`). The GPUs
/// come back without MIG instances; [`with_mig`] adds them.
pub fn parse_gpu_query(text: &str) -> Result<Vec<DiscoveredGpu>, String> {
    let mut gpus = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let bad = |what: &str| format!("line {}: {what} in {line:?}", n + 1);
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let [index, uuid, name, memory] = fields[..] else {
            return Err(bad("expected index, uuid, name, memory.total"));
        };
        let index = index.parse().map_err(|_| bad("bad index"))?;
        if uuid.is_empty() || uuid.contains(char::is_whitespace) {
            return Err(bad("bad UUID"));
        }
        if name.is_empty() {
            return Err(bad("empty name"));
        }
        let memory = memory.strip_suffix("MiB").unwrap_or(memory).trim();
        let memory_mb = memory.parse().map_err(|_| bad("bad memory.total"))?;
        gpus.push(DiscoveredGpu {
            index,
            uuid: uuid.to_string(),
            name: name.to_string(),
            memory_mb,
            mig: Vec::new(),
        });
    }
    Ok(gpus)
}

/// Parse `nvidia-smi -L`: `GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-…)` lines, each
/// followed by indented `MIG 3g.40gb Device 0: (UUID: MIG-…)` lines for its MIG
/// instances. Other lines are ignored.
pub fn parse_gpu_list(text: &str) -> Result<Vec<ListedGpu>, String> {
    let mut gpus: Vec<ListedGpu> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        let bad = |what: &str| format!("line {}: {what} in {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("GPU ") {
            let (index, _) = rest.split_once(':').ok_or_else(|| bad("no GPU index"))?;
            gpus.push(ListedGpu {
                index: index.trim().parse().map_err(|_| bad("bad GPU index"))?,
                uuid: uuid_of(line).ok_or_else(|| bad("no UUID"))?,
                mig: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("MIG ") {
            let profile = rest
                .split_whitespace()
                .next()
                .ok_or_else(|| bad("no MIG profile"))?;
            let uuid = uuid_of(line).ok_or_else(|| bad("no UUID"))?;
            let gpu = gpus
                .last_mut()
                .ok_or_else(|| bad("MIG instance before any GPU"))?;
            gpu.mig.push((profile.to_string(), uuid));
        }
    }
    Ok(gpus)
}

/// The text of a trailing `(UUID: …)`.
fn uuid_of(line: &str) -> Option<String> {
    let start = line.rfind("(UUID:")? + "(UUID:".len();
    let uuid = line[start..].strip_suffix(')')?.trim();
    (!uuid.is_empty() && !uuid.contains(char::is_whitespace)).then(|| uuid.to_string())
}

/// `gpus` with the MIG instances `nvidia-smi -L` lists for each (matched by UUID).
pub fn with_mig(mut gpus: Vec<DiscoveredGpu>, listed: &[ListedGpu]) -> Vec<DiscoveredGpu> {
    for gpu in &mut gpus {
        if let Some(l) = listed.iter().find(|l| l.uuid == gpu.uuid) {
            gpu.mig = l.mig.clone();
        }
    }
    gpus
}

/// The scheduler's model name for a name `nvidia-smi` prints: the vendor and brand
/// words dropped and spaces made dashes, so that `NVIDIA A100-SXM4-80GB` becomes
/// `A100-SXM4-80GB` (which `gpu:a100` requests match and whose MIG profiles the
/// scheduler knows) and `NVIDIA H100 80GB HBM3` becomes `H100-80GB-HBM3`.
pub fn model_from_name(name: &str) -> String {
    let mut words: Vec<&str> = name.split_whitespace().collect();
    if words.len() > 1 && words[0].eq_ignore_ascii_case("nvidia") {
        words.remove(0);
    }
    if words.len() > 1
        && ["tesla", "geforce", "quadro"]
            .iter()
            .any(|brand| words[0].eq_ignore_ascii_case(brand))
    {
        words.remove(0);
    }
    words.join("-")
}

/// Why a run of `nvidia-smi` gave nothing.
#[derive(Debug)]
enum RunError {
    /// Not installed: normal on a machine without NVIDIA GPUs.
    NotFound,
    Failed(String),
}

async fn run(program: &Path, args: &[&str], timeout: Duration) -> Result<String, RunError> {
    let child = Command::new(program)
        .args(args)
        .env_clear()
        .envs(crate::privilege::base_env())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(timeout, child).await {
        Err(_) => {
            return Err(RunError::Failed(format!(
                "no answer within {} s",
                timeout.as_secs_f32()
            )))
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => return Err(RunError::NotFound),
        Ok(Err(e)) => return Err(RunError::Failed(e.to_string())),
        Ok(Ok(output)) => output,
    };
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stdout);
        let said = said.trim();
        let said = if said.is_empty() {
            String::from_utf8_lossy(&output.stderr).trim().to_string()
        } else {
            said.to_string()
        };
        return Err(RunError::Failed(format!("{}: {said}", output.status)));
    }
    String::from_utf8(output.stdout).map_err(|_| RunError::Failed("output is not UTF-8".into()))
}

/// What [`query`] found: `None` when `nvidia-smi` is not installed, else the GPUs and
/// why their MIG instances are unknown (`-L` failed); an error when it failed.
pub type GpuQuery = Result<Option<(Vec<DiscoveredGpu>, Option<String>)>, String>;

/// What `program` (normally `nvidia-smi`) says: `Ok(None)` when it is not installed,
/// an error when it fails or prints what cannot be read; else the GPUs with their MIG
/// instances, and why those are unknown when `-L` failed.
pub async fn query(program: &Path, timeout: Duration) -> GpuQuery {
    let query = match run(program, &QUERY_ARGS, timeout).await {
        Ok(text) => text,
        Err(RunError::NotFound) => return Ok(None),
        Err(RunError::Failed(why)) => return Err(format!("it failed ({why})")),
    };
    let gpus = parse_gpu_query(&query)
        .map_err(|why| format!("cannot read the GPUs it reports ({why})"))?;
    let listed = match run(program, &LIST_ARGS, timeout).await {
        Ok(text) => parse_gpu_list(&text),
        Err(RunError::NotFound) => Err("it disappeared".into()),
        Err(RunError::Failed(why)) => Err(why),
    };
    Ok(Some(match listed {
        Ok(listed) => (with_mig(gpus, &listed), None),
        Err(why) => (gpus, Some(why)),
    }))
}

/// `index, mig.mode.current, mig.mode.pending` of every GPU.
pub const MIG_MODE_ARGS: [&str; 2] = [
    "--query-gpu=index,mig.mode.current,mig.mode.pending",
    "--format=csv,noheader",
];

/// A GPU's MIG mode now and after its next reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigMode {
    pub index: u32,
    /// `Enabled`, `Disabled`, or `[N/A]` on GPUs without MIG.
    pub current: String,
    pub pending: String,
}

/// Parse `nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending
/// --format=csv,noheader`.
pub fn parse_mig_modes(text: &str) -> Result<Vec<MigMode>, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|line| {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [index, current, pending] = fields[..] else {
                return Err(format!("expected index, current, pending in {line:?}"));
            };
            Ok(MigMode {
                index: index
                    .parse()
                    .map_err(|_| format!("bad index in {line:?}"))?,
                current: current.to_string(),
                pending: pending.to_string(),
            })
        })
        .collect()
}

/// The MIG modes `program` reports (`nvidia-smi`); an error when it fails.
pub async fn mig_modes(program: &Path, timeout: Duration) -> Result<Vec<MigMode>, String> {
    match run(program, &MIG_MODE_ARGS, timeout).await {
        Ok(text) => parse_mig_modes(&text),
        Err(RunError::NotFound) => Err("it is not installed".into()),
        Err(RunError::Failed(why)) => Err(why),
    }
}

/// The GPUs `program` (normally `nvidia-smi`) reports, with their MIG instances, or
/// `None` when it is not installed (logged at info) or fails (logged as a warning).
pub(crate) async fn discover(program: &Path, timeout: Duration) -> Option<Vec<DiscoveredGpu>> {
    let shown = program.display();
    match query(program, timeout).await {
        Ok(None) => {
            tracing::info!("{shown} is not installed: using declared GPUs only");
            None
        }
        Err(why) => {
            tracing::warn!("{shown}: {why}: using declared GPUs only");
            None
        }
        Ok(Some((gpus, mig_error))) => {
            if let Some(why) = mig_error {
                tracing::warn!("{shown} -L failed ({why}): MIG instances are not known");
            }
            Some(gpus)
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `--query-gpu` on a DGX A100 whose GPU 0 is in MIG mode.
    pub const A100_QUERY: &str = "\
0, GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77, NVIDIA A100-SXM4-80GB, 81920
1, GPU-1f5b2c4e-8a3d-4c1e-9b7a-2e6f0d3c5a91, NVIDIA A100-SXM4-80GB, 81920
2, GPU-a3e0c7d2-5b1f-4e8a-b6c9-7d2e1f0a4b83, NVIDIA A100-SXM4-80GB, 81920
3, GPU-c9d8e7f6-1a2b-4c3d-8e9f-0a1b2c3d4e5f, NVIDIA A100-SXM4-80GB, 81920
";
    /// `-L` on the same machine.
    pub const A100_LIST: &str = "\
GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 3g.40gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71585b3bf)
  MIG 2g.20gb     Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)
  MIG 1g.10gb     Device  2: (UUID: MIG-1e4f4a9e-0b0f-5a5f-9d5c-3b8c2b9f7e11)
GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1f5b2c4e-8a3d-4c1e-9b7a-2e6f0d3c5a91)
GPU 2: NVIDIA A100-SXM4-80GB (UUID: GPU-a3e0c7d2-5b1f-4e8a-b6c9-7d2e1f0a4b83)
GPU 3: NVIDIA A100-SXM4-80GB (UUID: GPU-c9d8e7f6-1a2b-4c3d-8e9f-0a1b2c3d4e5f)
";
    /// `--query-gpu` with units (as `--format=csv,noheader` prints) on an H100 node.
    const H100_QUERY_WITH_UNITS: &str = "\
0, GPU-0e3f8f5c-63a4-9b1d-2b6c-8a1f3e2d4c5b, NVIDIA H100 80GB HBM3, 81559 MiB
1, GPU-7b2c9d1e-4f3a-8e6d-1c5b-9a0f2e3d4c6a, NVIDIA H100 80GB HBM3, 81559 MiB
";
    /// `-L` of a driver that names MIG instances by GPU UUID and instance ids.
    const OLD_DRIVER_LIST: &str = "\
GPU 0: A100-SXM4-40GB (UUID: GPU-e91edf3b-b297-37c1-a2a7-7601c7a0a5a9)
  MIG 3g.20gb Device 0: (UUID: MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c7a0a5a9/1/0)
  MIG 3g.20gb Device 1: (UUID: MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c7a0a5a9/2/0)
";

    #[test]
    fn query_output_parses_with_and_without_units() {
        let gpus = parse_gpu_query(A100_QUERY).expect("parse");
        assert_eq!(gpus.len(), 4);
        assert_eq!(gpus[0].index, 0);
        assert_eq!(gpus[0].uuid, "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77");
        assert_eq!(gpus[0].name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(gpus[3].memory_mb, 81920);
        assert!(gpus.iter().all(|g| g.mig.is_empty()));

        let h100 = parse_gpu_query(H100_QUERY_WITH_UNITS).expect("parse");
        assert_eq!(h100.len(), 2);
        assert_eq!(h100[1].index, 1);
        assert_eq!(h100[1].name, "NVIDIA H100 80GB HBM3");
        assert_eq!(h100[1].memory_mb, 81559);
        assert_eq!(parse_gpu_query("\n").expect("empty"), []);
    }

    #[test]
    fn malformed_query_output_is_refused_with_its_line() {
        for bad in [
            "0, GPU-x, NVIDIA A100-SXM4-80GB",
            "zero, GPU-x, NVIDIA A100-SXM4-80GB, 81920",
            "0, GPU-x, NVIDIA A100-SXM4-80GB, [N/A]",
            "0, , NVIDIA A100-SXM4-80GB, 81920",
        ] {
            let err = parse_gpu_query(&format!(
                "{}\n{bad}\n",
                A100_QUERY.lines().next().unwrap_or_default()
            ))
            .expect_err(bad);
            assert!(err.starts_with("line 2:"), "{err}");
        }
    }

    #[test]
    fn list_output_gives_mig_instances_under_their_gpu() {
        let listed = parse_gpu_list(A100_LIST).expect("parse");
        assert_eq!(listed.len(), 4);
        assert_eq!(listed[0].uuid, "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77");
        assert_eq!(
            listed[0].mig,
            [
                (
                    "3g.40gb".to_string(),
                    "MIG-c6d4f1ef-42e4-5de3-91c7-45d71585b3bf".to_string()
                ),
                (
                    "2g.20gb".to_string(),
                    "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb".to_string()
                ),
                (
                    "1g.10gb".to_string(),
                    "MIG-1e4f4a9e-0b0f-5a5f-9d5c-3b8c2b9f7e11".to_string()
                ),
            ]
        );
        assert!(listed[1..].iter().all(|g| g.mig.is_empty()));
        assert_eq!(listed[3].index, 3);

        let old = parse_gpu_list(OLD_DRIVER_LIST).expect("parse");
        assert_eq!(old[0].mig.len(), 2);
        assert_eq!(
            old[0].mig[1].1,
            "MIG-GPU-e91edf3b-b297-37c1-a2a7-7601c7a0a5a9/2/0"
        );
        assert!(parse_gpu_list("  MIG 1g.10gb Device 0: (UUID: MIG-x)\n").is_err());
        assert!(parse_gpu_list("GPU 0: NVIDIA A100-SXM4-80GB\n").is_err());
    }

    #[test]
    fn mig_instances_join_their_gpu_by_uuid() {
        let gpus = with_mig(
            parse_gpu_query(A100_QUERY).expect("query"),
            &parse_gpu_list(A100_LIST).expect("list"),
        );
        assert_eq!(gpus[0].mig.len(), 3);
        assert!(gpus[1..].iter().all(|g| g.mig.is_empty()));
    }

    #[test]
    fn names_become_models_the_scheduler_understands() {
        for (name, model) in [
            ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
            ("NVIDIA A100-PCIE-40GB", "A100-PCIE-40GB"),
            ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"),
            ("NVIDIA H100 80GB HBM3", "H100-80GB-HBM3"),
            ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
            ("NVIDIA GeForce RTX 4090", "RTX-4090"),
            ("NVIDIA RTX A6000", "RTX-A6000"),
            ("A100-SXM4-40GB", "A100-SXM4-40GB"),
        ] {
            assert_eq!(model_from_name(name), model, "{name}");
        }
        let a100 = model_from_name("NVIDIA A100-SXM4-80GB");
        let profiles = scheduler::model::mig_profiles(&a100).expect("A100 has MIG");
        assert!(profiles.iter().any(|(p, _)| *p == "3g.40gb"));
        let h100 = model_from_name("NVIDIA H100 80GB HBM3");
        let profiles = scheduler::model::mig_profiles(&h100).expect("H100 has MIG");
        assert!(profiles.iter().any(|(p, _)| *p == "1g.10gb"));
        assert!(scheduler::model::mig_profiles(&model_from_name("Tesla V100-SXM2-32GB")).is_none());
    }

    /// An executable shell script standing in for `nvidia-smi`.
    fn fake_nvidia_smi(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write fake");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path
    }

    #[tokio::test]
    async fn discovery_runs_both_queries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = fake_nvidia_smi(
            dir.path(),
            "nvidia-smi",
            &format!(
                "if [ \"$1\" = -L ]; then cat <<'EOF'\n{A100_LIST}EOF\nelif [ \"$1\" = {} ] && [ \"$2\" = {} ]; then cat <<'EOF'\n{A100_QUERY}EOF\nelse exit 9; fi",
                QUERY_ARGS[0], QUERY_ARGS[1]
            ),
        );
        let gpus = discover(&fake, TIMEOUT).await.expect("discovered");
        assert_eq!(gpus.len(), 4);
        assert_eq!(gpus[0].mig.len(), 3);
    }

    #[tokio::test]
    async fn discovery_without_nvidia_smi_or_with_a_broken_one_gives_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(discover(&dir.path().join("absent"), TIMEOUT).await, None);

        let failing = fake_nvidia_smi(
            dir.path(),
            "failing",
            "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'; exit 9",
        );
        assert_eq!(discover(&failing, TIMEOUT).await, None);

        let hanging = fake_nvidia_smi(dir.path(), "hanging", "exec sleep 30");
        let started = std::time::Instant::now();
        assert_eq!(discover(&hanging, Duration::from_millis(300)).await, None);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the time limit holds"
        );

        // A failing -L still gives the GPUs, without MIG instances.
        let no_list = fake_nvidia_smi(
            dir.path(),
            "no-list",
            &format!("if [ \"$1\" = -L ]; then exit 3; fi\ncat <<'EOF'\n{A100_QUERY}EOF"),
        );
        let gpus = discover(&no_list, TIMEOUT).await.expect("query worked");
        assert_eq!(gpus.len(), 4);
        assert!(gpus.iter().all(|g| g.mig.is_empty()));
    }
}
