//! The machine: the container runtimes (a real probe), cgroups, GPUs, disk space.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::Finding;
use crate::config::{ClusterSection, Config};
use crate::launch::{detect_runtime, probe_command, ProbeCommand, RuntimeKind};
use crate::privilege::{Identity, UserCommand};
use crate::sched::inventory::{self, GpuQuery, MigMode};

/// How long one runtime probe may take (an image runtime may have to pull).
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// Probe the jobs' runtime, and each environment's runtime and image that is not the
/// jobs' own: run `true` in it as a step would, as `nobody` when running as root.
pub(super) async fn runtimes(config: &Config) -> Vec<Finding> {
    let mut targets: Vec<(String, String, Option<String>)> =
        vec![("runtime".into(), config.jobs.runtime.clone(), None)];
    for env in &config.environments {
        let runtime = if env.runtime == "auto" || env.runtime.is_empty() {
            config.jobs.runtime.clone()
        } else {
            env.runtime.clone()
        };
        let image = env.image.clone().filter(|i| !i.is_empty());
        if !targets.iter().any(|(_, r, i)| *r == runtime && *i == image) {
            targets.push((format!("environment {}", env.name), runtime, image));
        }
    }
    let mut out = Vec::new();
    for (check, runtime, image) in targets {
        out.push(runtime_probe(&check, &runtime, image.as_deref()).await);
    }
    out
}

/// Where a session's command is looked for when its environment sets no `PATH`.
const SESSION_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Each app's server program, in each environment it may run in on this machine's
/// root (an image's are inside the image: not looked at): a program that is not on
/// the environment's `PATH` fails every session of that app at its start. A warning,
/// as a site rarely offers every built-in app.
pub(super) fn app_commands(config: &Config) -> Finding {
    let apps = config.apps();
    let environments = config.environments();
    let mut checked = 0;
    let mut missing = Vec::new();
    for env in environments
        .iter()
        .filter(|e| e.image.as_deref().is_none_or(str::is_empty))
    {
        let path = env.env.get("PATH").map_or(SESSION_PATH, String::as_str);
        for app in apps
            .iter()
            .filter(|a| a.environments.is_empty() || a.environments.contains(&env.name))
        {
            let command = env.command.as_ref().unwrap_or(&app.command);
            let Some(program) = command.first().filter(|p| !p.contains('{')) else {
                continue;
            };
            checked += 1;
            if !on_path(program, path) {
                missing.push(format!(
                    "{} in environment {}: {program} is not on its PATH ({path})",
                    app.id, env.name
                ));
            }
        }
    }
    if missing.is_empty() {
        return Finding::ok(
            "apps",
            format!("every app's server program is there ({checked} app and environment pairs)"),
        );
    }
    Finding::warning(
        "apps",
        format!(
            "sessions of these fail at their start: {}",
            missing.join("; ")
        ),
        "install the program into the environment (its PATH), set the environment's PATH, \
         or leave the app out of [[apps]] or of the environment",
    )
}

/// Whether `program` (a path, or a name looked up in `path`) is an executable file.
fn on_path(program: &str, path: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(std::path::Path::new(program));
    }
    path.split(':')
        .filter(|d| !d.is_empty())
        .any(|d| executable(&std::path::Path::new(d).join(program)))
}

/// The key that chose the runtime a check probes.
fn runtime_key(check: &str) -> String {
    match check.strip_prefix("environment ") {
        Some(name) => format!("the runtime of environment {name:?}"),
        None => "jobs.runtime".into(),
    }
}

/// How to install a runtime.
fn install_fix(configured: &str, check: &str) -> String {
    let package = match configured {
        "apptainer" | "singularity" => "install apptainer (https://apptainer.org/docs/admin/)",
        "podman" => "apt-get install podman",
        "docker" => "apt-get install docker.io",
        _ => "apt-get install bubblewrap",
    };
    format!(
        "{package}, or set {} to a runtime that is",
        runtime_key(check)
    )
}

/// Why a runtime that started nothing failed, and what to do (pure).
pub(super) fn probe_failure(kind: &RuntimeKind, said: &str) -> (String, String) {
    let said = last_lines(said, 2);
    let fix = match kind {
        RuntimeKind::Bubblewrap => {
            "bwrap needs unprivileged user namespaces: sysctl -w \
             kernel.unprivileged_userns_clone=1 (and user.max_user_namespaces > 0), \
             or chmod u+s /usr/bin/bwrap"
        }
        RuntimeKind::Podman => {
            "rootless podman needs subordinate ids (usermod --add-subuids 100000-165535 \
             --add-subgids 100000-165535 USER), newuidmap (apt-get install uidmap) and \
             user namespaces; try `podman run --rm IMAGE true` as a user"
        }
        RuntimeKind::Docker => {
            "start the daemon: systemctl start docker; try `docker run --rm IMAGE true`"
        }
        RuntimeKind::Apptainer => {
            "try `apptainer exec IMAGE true` as a user; see `apptainer buildcfg`"
        }
        RuntimeKind::Plain => "the switch to an unprivileged user failed: run the portal as root",
    };
    (
        format!("{kind} cannot start a step here: {said}"),
        fix.into(),
    )
}

/// The last `n` non-empty lines of `text`, joined.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let text = lines[lines.len().saturating_sub(n)..].join(" / ");
    if text.is_empty() {
        "it said nothing".into()
    } else {
        text
    }
}

async fn runtime_probe(check: &str, configured: &str, image: Option<&str>) -> Finding {
    let kind = match detect_runtime(configured) {
        Ok(kind) => kind,
        Err(e) => return Finding::problem(check, e, install_fix(configured, check)),
    };
    let scratch = match Scratch::new() {
        Ok(s) => s,
        Err(e) => {
            return Finding::problem(
                check,
                format!("cannot make a scratch directory to probe {kind} in: {e}"),
                format!("make {} writable", std::env::temp_dir().display()),
            )
        }
    };
    let identity = probe_identity(&scratch.0);
    let program = crate::privilege::system_program("true");
    let command = match probe_command(&kind, image, &identity, &scratch.0, &program) {
        Ok(c) => c,
        Err(e) => return Finding::problem(check, e, install_fix(configured, check)),
    };
    let started = Instant::now();
    let result = run_probe(&command, &identity, &scratch.0).await;
    let on_image = image.map(|i| format!(" ({i})")).unwrap_or_default();
    match result {
        Ok(()) => {
            let finding = format!(
                "{kind}{on_image} runs {} as {} ({:.2} s)",
                program.display(),
                identity.user,
                started.elapsed().as_secs_f64()
            );
            if kind == RuntimeKind::Plain {
                Finding::warning(
                    check,
                    format!("{finding}: jobs run as plain processes, not isolated"),
                    format!(
                        "apt-get install bubblewrap and set {} = \"bubblewrap\" (or \"auto\")",
                        runtime_key(check)
                    ),
                )
            } else {
                Finding::ok(check, finding)
            }
        }
        Err(said) => {
            let (finding, fix) = probe_failure(&kind, &said);
            Finding::problem(check, finding, fix)
        }
    }
}

/// Whom the probe runs as: `nobody` when the portal runs as root (steps switch to a
/// user), else the portal's own user.
fn probe_identity(dir: &Path) -> Identity {
    let (uid, gid) = crate::launch::current_ids();
    let nobody = crate::privilege::is_root()
        .then(|| nix::unistd::User::from_name("nobody").ok().flatten())
        .flatten();
    match nobody {
        Some(user) => Identity {
            user: user.name,
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
            groups: Vec::new(),
            home: dir.to_path_buf(),
        },
        None => Identity {
            user: nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                .ok()
                .flatten()
                .map_or_else(|| uid.to_string(), |u| u.name),
            uid,
            gid,
            groups: Vec::new(),
            home: dir.to_path_buf(),
        },
    }
}

/// Run the probe: through the privilege boundary as the user when root (as a step's
/// trampoline does), directly otherwise. `Err`: what it printed, or why it did not run.
async fn run_probe(command: &ProbeCommand, identity: &Identity, dir: &Path) -> Result<(), String> {
    let (program, args) = command
        .argv
        .split_first()
        .ok_or("the runtime gave no command")?;
    if let Some(text) = &command.env_file {
        std::fs::write(dir.join("container.env"), text).map_err(|e| e.to_string())?;
    }
    let run = async {
        let output = if crate::privilege::is_root() && !command.root_client {
            let (child, stdin) = UserCommand::new(identity, PathBuf::from(program))
                .args(args.iter().cloned())
                .envs(&command.env)
                .current_dir(dir)
                .spawn(Stdio::null(), Stdio::piped())
                .await?;
            drop(stdin);
            child.wait_with_output().await?
        } else {
            tokio::process::Command::new(program)
                .args(args)
                .env_clear()
                .envs(command.env.iter().cloned())
                .current_dir(dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .output()
                .await?
        };
        Ok::<_, std::io::Error>(output)
    };
    match tokio::time::timeout(PROBE_TIMEOUT, run).await {
        Err(_) => Err(format!(
            "it did not finish within {} s",
            PROBE_TIMEOUT.as_secs()
        )),
        Ok(Err(e)) => Err(format!("cannot start {program}: {e}")),
        Ok(Ok(output)) if output.status.success() => Ok(()),
        Ok(Ok(output)) => {
            let said = String::from_utf8_lossy(&output.stderr).trim().to_string();
            Err(if said.is_empty() {
                format!("it ended with {} and said nothing", output.status)
            } else {
                format!("{said} ({})", output.status)
            })
        }
    }
}

/// A directory of the probe's, which the probe's user can enter; removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let dir = std::env::temp_dir().join(format!(
            "atrium-doctor-{}",
            crate::util::random_text(9).replace(['-', '_'], "x")
        ));
        std::fs::DirBuilder::new().mode(0o755).create(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// cgroup v2 and its memory and cpu controllers.
pub(super) fn cgroups() -> Finding {
    let root = Path::new("/sys/fs/cgroup");
    let read = |name: &str| std::fs::read_to_string(root.join(name)).ok();
    classify_cgroups(
        read("cgroup.controllers").as_deref(),
        read("cgroup.subtree_control").as_deref(),
        crate::privilege::is_root(),
    )
}

/// What the memory limit falls back to without cgroup v2.
const SAMPLING: &str = "memory limits are enforced by sampling each job's memory every \
                        250 ms (a shorter spike is missed) and CPUs are not confined";

/// Classify cgroups from `/sys/fs/cgroup/cgroup.controllers` and
/// `cgroup.subtree_control` (`None`: absent, i.e. cgroup v1 or hybrid) (pure).
pub(super) fn classify_cgroups(
    controllers: Option<&str>,
    subtree_control: Option<&str>,
    root: bool,
) -> Finding {
    let Some(controllers) = controllers else {
        return Finding::warning(
            "cgroups",
            format!("cgroup v1 (legacy or hybrid hierarchy): {SAMPLING}"),
            "boot with systemd.unified_cgroup_hierarchy=1 on the kernel command line \
             (GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub and reboot)",
        );
    };
    let has = |list: &str, c: &str| list.split_whitespace().any(|x| x == c);
    let missing: Vec<&str> = ["memory", "cpu"]
        .into_iter()
        .filter(|c| !has(controllers, c))
        .collect();
    if !missing.is_empty() {
        return Finding::warning(
            "cgroups",
            format!(
                "cgroup v2 without the {} controller: {SAMPLING}",
                missing.join(" and ")
            ),
            "enable it on the kernel command line (cgroup_enable=memory) and reboot",
        );
    }
    let delegated = subtree_control.is_some_and(|s| has(s, "memory") && has(s, "cpu"));
    if delegated {
        Finding::ok(
            "cgroups",
            "cgroup v2 with memory and cpu delegated to child groups: memory limits are \
             the kernel's",
        )
    } else if root {
        Finding::ok(
            "cgroups",
            "cgroup v2 with memory and cpu; the step supervisor delegates memory \
             (cgroup.subtree_control) itself",
        )
    } else {
        Finding::warning(
            "cgroups",
            format!("cgroup v2, but not root and memory not delegated: {SAMPLING}"),
            "run the portal as root, or delegate a cgroup to it (systemd: Delegate=yes)",
        )
    }
}

/// `nvidia-smi` and the MIG state, against `[[cluster.gpus]]`.
pub(super) async fn gpus(cluster: &ClusterSection) -> Finding {
    let program = crate::privilege::system_program("nvidia-smi");
    let timeout = inventory::NVIDIA_SMI_TIMEOUT;
    let result = inventory::query(&program, timeout).await;
    let modes = match &result {
        Ok(Some(_)) => Some(inventory::mig_modes(&program, timeout).await),
        _ => None,
    };
    classify_gpus(cluster, result, modes)
}

/// Classify what `nvidia-smi` said (pure): `result` as [`inventory::query`]
/// returns it, `modes` the MIG modes when it answered.
pub(super) fn classify_gpus(
    cluster: &ClusterSection,
    result: GpuQuery,
    modes: Option<Result<Vec<MigMode>, String>>,
) -> Finding {
    let declared = cluster.gpus.len();
    let (gpus, list_error) = match result {
        Ok(None) if declared == 0 => {
            return Finding::skipped("gpus", "nvidia-smi is not installed: no GPUs here")
        }
        Ok(None) => {
            return Finding::warning(
                "gpus",
                format!(
                    "nvidia-smi is not installed: the {declared} GPU(s) of [[cluster.gpus]] \
                     are scheduled unseen"
                ),
                "install the NVIDIA driver (nvidia-smi), or remove [[cluster.gpus]]",
            )
        }
        Err(why) => {
            return Finding::problem(
                "gpus",
                format!("nvidia-smi: {why}"),
                "check the driver (nvidia-smi; dmesg | grep -i nvrm); reload it or reboot",
            )
        }
        Ok(Some(found)) => found,
    };
    if let Some(why) = list_error {
        return Finding::warning(
            "gpus",
            format!("nvidia-smi -L failed ({why}): MIG instances are not known"),
            "run nvidia-smi -L and check the driver",
        );
    }
    for d in &cluster.gpus {
        let found = gpus.iter().find(|g| g.index == d.index);
        match found {
            None => {
                return Finding::problem(
                    "gpus",
                    format!(
                        "GPU {} of [[cluster.gpus]] is not one nvidia-smi lists",
                        d.index
                    ),
                    "correct cluster.gpus' index, or check the GPU (nvidia-smi -L)",
                )
            }
            Some(g) if g.mig.len() < d.mig.len() => {
                return Finding::problem(
                    "gpus",
                    format!(
                        "GPU {} is declared with {} MIG instance(s), nvidia-smi lists {}",
                        d.index,
                        d.mig.len(),
                        g.mig.len()
                    ),
                    format!(
                        "create them (nvidia-smi mig -i {} -cgi PROFILES -C), or change \
                         [[cluster.gpus]]",
                        d.index
                    ),
                )
            }
            Some(_) => {}
        }
    }
    if let Some(Ok(modes)) = &modes {
        if let Some(m) = modes.iter().find(|m| m.current != m.pending) {
            return Finding::warning(
                "gpus",
                format!(
                    "GPU {}: MIG mode {} now, {} after the next GPU reset",
                    m.index, m.current, m.pending
                ),
                format!(
                    "reset it with nothing running on it (nvidia-smi -r -i {}), or reboot",
                    m.index
                ),
            );
        }
    }
    let mig: usize = gpus.iter().map(|g| g.mig.len()).sum();
    let mut models: Vec<String> = gpus
        .iter()
        .map(|g| inventory::model_from_name(&g.name))
        .collect();
    models.dedup();
    Finding::ok(
        "gpus",
        format!(
            "nvidia-smi lists {} GPU(s) ({}), {mig} MIG instance(s)",
            gpus.len(),
            models.join(", ")
        ),
    )
}

/// Free space on the data directory's file system.
pub(super) fn disk(data_dir: &Path) -> Finding {
    // The directory may not exist yet: its nearest existing parent's file system.
    let existing = data_dir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(data_dir);
    match crate::util::file_system_space(existing) {
        Ok((free, size)) => classify_disk(data_dir, free, size),
        Err(e) => Finding::problem(
            "disk",
            format!("cannot read the file system of {}: {e}", existing.display()),
            "check data_dir",
        ),
    }
}

/// Below this much free, the database may fail to write.
const MIN_FREE_BYTES: u64 = 1 << 30;

/// Classify free space (pure): a problem under 1 GiB, a warning over 90 % full (as
/// the alert rule `AtriumDataDirFilling` says).
pub(super) fn classify_disk(data_dir: &Path, free: u64, size: u64) -> Finding {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let used = if size == 0 {
        0.0
    } else {
        100.0 * (size - free.min(size)) as f64 / size as f64
    };
    let finding = format!(
        "{:.1} GiB free of {:.1} GiB ({used:.0} % used) on the file system of {}",
        gib(free),
        gib(size),
        data_dir.display()
    );
    let fix = "free space on that file system, or move data_dir to a larger one \
               (atrium backup, then atrium restore there)";
    if free < MIN_FREE_BYTES {
        Finding::problem("disk", finding, fix)
    } else if used > 90.0 {
        Finding::warning("disk", finding, fix)
    } else {
        Finding::ok("disk", finding)
    }
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::*;
    use crate::sched::inventory::DiscoveredGpu;

    #[test]
    fn cgroup_v1_is_a_warning_with_the_boot_option() {
        let f = classify_cgroups(None, None, true);
        assert_eq!(f.status, Status::Warning);
        assert!(f.finding.contains("cgroup v1"), "{}", f.finding);
        assert!(f.finding.contains("sampling"), "{}", f.finding);
        assert!(f
            .fix
            .as_deref()
            .is_some_and(|x| x.contains("systemd.unified_cgroup_hierarchy=1")));
    }

    #[test]
    fn cgroup_v2_needs_memory_and_cpu_and_their_delegation() {
        let all = "cpuset cpu io memory hugetlb pids rdma misc";
        assert_eq!(
            classify_cgroups(Some(all), Some("cpu memory pids"), false).status,
            Status::Ok
        );
        assert_eq!(
            classify_cgroups(Some(all), Some(""), true).status,
            Status::Ok
        );
        assert_eq!(
            classify_cgroups(Some(all), Some(""), false).status,
            Status::Warning
        );
        let f = classify_cgroups(Some("cpuset io pids"), Some(""), true);
        assert_eq!(f.status, Status::Warning);
        assert!(f.finding.contains("memory and cpu"), "{}", f.finding);
    }

    fn gpu(index: u32, mig: usize) -> DiscoveredGpu {
        DiscoveredGpu {
            index,
            uuid: format!("GPU-{index}"),
            name: "NVIDIA A100-SXM4-80GB".into(),
            memory_mb: 81920,
            mig: (0..mig)
                .map(|i| ("3g.40gb".to_string(), format!("MIG-{index}-{i}")))
                .collect(),
        }
    }

    fn cluster_with_mig(index: u32, instances: usize) -> ClusterSection {
        let toml = format!(
            "[[gpus]]\nindex = {index}\nmodel = \"A100-SXM4-80GB\"\nmemory_mb = 81920\n{}",
            "[[gpus.mig]]\nprofile = \"3g.40gb\"\n".repeat(instances)
        );
        toml::from_str(&toml).expect("a cluster section")
    }

    #[test]
    fn gpus_are_skipped_without_nvidia_smi_unless_declared() {
        let none = ClusterSection::default();
        assert_eq!(classify_gpus(&none, Ok(None), None).status, Status::Skipped);
        let declared = cluster_with_mig(0, 0);
        assert_eq!(
            classify_gpus(&declared, Ok(None), None).status,
            Status::Warning
        );
        let failed = classify_gpus(&none, Err("it failed (exit 9)".into()), None);
        assert_eq!(failed.status, Status::Problem);
    }

    #[test]
    fn declared_mig_instances_must_exist_and_pending_modes_are_told() {
        let cluster = cluster_with_mig(0, 2);
        let missing = classify_gpus(&cluster, Ok(Some((vec![gpu(0, 0)], None))), None);
        assert_eq!(missing.status, Status::Problem, "{missing:?}");
        assert!(missing.finding.contains("2 MIG instance(s)"), "{missing:?}");
        let fine = classify_gpus(&cluster, Ok(Some((vec![gpu(0, 2), gpu(1, 0)], None))), None);
        assert_eq!(fine.status, Status::Ok, "{fine:?}");
        assert!(
            fine.finding.contains("2 GPU(s) (A100-SXM4-80GB)"),
            "{fine:?}"
        );
        let modes = inventory::parse_mig_modes("0, Enabled, Enabled\n1, Disabled, Enabled\n")
            .expect("modes");
        let pending = classify_gpus(
            &cluster,
            Ok(Some((vec![gpu(0, 2), gpu(1, 0)], None))),
            Some(Ok(modes)),
        );
        assert_eq!(pending.status, Status::Warning, "{pending:?}");
        assert!(pending
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("-r -i 1")));
    }

    #[test]
    fn disk_space_is_a_problem_under_a_gib_and_a_warning_over_ninety_percent() {
        let dir = Path::new("/var/lib/atrium");
        let gib = 1u64 << 30;
        assert_eq!(classify_disk(dir, 50 * gib, 100 * gib).status, Status::Ok);
        assert_eq!(
            classify_disk(dir, 5 * gib, 100 * gib).status,
            Status::Warning
        );
        assert_eq!(
            classify_disk(dir, gib / 2, 100 * gib).status,
            Status::Problem
        );
    }

    #[test]
    fn a_failed_probe_says_the_runtimes_last_words_and_a_fix() {
        let (finding, fix) = probe_failure(
            &RuntimeKind::Podman,
            "Trying to pull x...\nError: cannot setup namespace: newuidmap: not found\n",
        );
        assert!(
            finding.starts_with("podman cannot start a step here:"),
            "{finding}"
        );
        assert!(finding.contains("newuidmap: not found"), "{finding}");
        assert!(
            fix.contains("subuid") || fix.contains("subordinate"),
            "{fix}"
        );
    }
}
