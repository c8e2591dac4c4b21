//! Container runtimes: the command line that runs a job step's script, one file per
//! runtime behind the `ContainerRuntime` trait. Building the command is a pure
//! function of the step's spec and of what was probed on the machine (`Host`), so
//! each runtime's exact argv is tested; probing (which binaries and device files
//! exist) happens once, in `Host::probe`.
//!
//! `RuntimeKind` is the name stored in `spec.json` and picks the implementation.
//! Must not touch: identities and privileges (the trampoline in `supervisor.rs`
//! switches them), the step's files (the trampoline writes them), the database.

mod apptainer;
mod bubblewrap;
mod oci;
mod plain;
mod probe;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::StepSpec;

pub use probe::{probe_command, ProbeCommand};

/// The runtime a step runs in, as stored in `spec.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeKind {
    /// bubblewrap: new pid, ipc and uts namespaces, a read-only root, a private
    /// /tmp, the home and working directory writable, only the allocated GPUs.
    Bubblewrap,
    /// A plain process.
    Plain,
    /// apptainer (or singularity) with a `.sif` image or a sandbox directory.
    Apptainer,
    /// Rootless podman with an OCI image, run as the user.
    Podman,
    /// docker with an OCI image: a root daemon, the user's identity given to the
    /// container.
    Docker,
}

impl RuntimeKind {
    /// Every runtime, most preferred first (`auto` takes the first installed one
    /// that `runs_host_root`).
    const PREFERENCE: [RuntimeKind; 5] = [
        RuntimeKind::Apptainer,
        RuntimeKind::Podman,
        RuntimeKind::Docker,
        RuntimeKind::Bubblewrap,
        RuntimeKind::Plain,
    ];

    pub(crate) fn runtime(&self) -> &'static dyn ContainerRuntime {
        match self {
            RuntimeKind::Bubblewrap => &bubblewrap::Bubblewrap,
            RuntimeKind::Plain => &plain::Plain,
            RuntimeKind::Apptainer => &apptainer::Apptainer,
            RuntimeKind::Podman => &oci::Podman,
            RuntimeKind::Docker => &oci::Docker,
        }
    }

    /// The name `jobs.runtime` gives it (`none` for a plain process).
    pub fn name(&self) -> &'static str {
        self.runtime().name()
    }
}

impl std::fmt::Display for RuntimeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One way of running a job's script. `argv` and `env` are pure: everything they
/// need from the machine is in `Host`.
pub(crate) trait ContainerRuntime: Sync {
    /// The name in `jobs.runtime`.
    fn name(&self) -> &'static str;

    /// Executables that provide the runtime, most preferred first, looked up in
    /// `SEARCH_DIRS`; empty when none is needed.
    fn programs(&self) -> &'static [&'static str];

    /// Other files that must exist for it to work, with what they are.
    fn requires(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// Whether it can run a job without an image, on the host's own root: only
    /// those are a default for jobs (`auto`).
    fn runs_host_root(&self) -> bool;

    /// Whether the runtime's command must start as root (a client of a root
    /// daemon): the trampoline then opens the job's files as the user but does
    /// not give up root before exec. The container itself still runs as the user.
    fn needs_root_client(&self) -> bool {
        false
    }

    /// Whether the spec can run here: the image it needs, paths the runtime's
    /// option syntax can carry. May look at the file system (bubblewrap's image).
    fn check(&self, spec: &StepSpec) -> Result<(), String>;

    /// The command line: the runtime's program, its options, the script's command.
    fn argv(&self, spec: &StepSpec, files: &StepFiles, host: &Host) -> Vec<String>;

    /// The environment the command starts with. By default the job's own, which
    /// the runtime passes on to the process inside.
    fn env(&self, spec: &StepSpec, _host: &Host) -> Vec<(String, String)> {
        spec.env.clone()
    }

    /// Contents of `files.env_file` when the runtime reads the job's environment
    /// from a file; the trampoline writes it (0600) before exec.
    fn env_file(&self, _spec: &StepSpec) -> Option<String> {
        None
    }

    /// A command that removes the step's container once the runtime's client is
    /// gone (killed at the end of the grace time, the container may outlive it).
    /// Run with `env`, as the user unless `needs_root_client`.
    fn cleanup_argv(&self, _spec: &StepSpec, _host: &Host) -> Option<Vec<String>> {
        None
    }
}

/// Where runtime executables are looked for, in order.
pub(crate) const SEARCH_DIRS: &[&str] = &["/usr/bin", "/usr/local/bin", "/bin"];

/// What was found on the machine for one runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Host {
    /// The runtime's executable (`None` for a plain process).
    pub program: Option<PathBuf>,
    /// NVIDIA device files present (`/dev/nvidia0`, `/dev/nvidiactl`, …).
    pub nvidia_devices: BTreeSet<PathBuf>,
}

impl Host {
    /// Find the runtime's executable and the device files; an error says what is
    /// missing.
    pub fn probe(runtime: &dyn ContainerRuntime) -> Result<Host, String> {
        let names = runtime.programs();
        let program = if names.is_empty() {
            None
        } else {
            Some(find_program(names).ok_or_else(|| {
                format!(
                    "{} is not installed (no {} in {})",
                    runtime.name(),
                    names.join(" or "),
                    SEARCH_DIRS.join(", ")
                )
            })?)
        };
        for (path, what) in runtime.requires() {
            if !Path::new(path).exists() {
                return Err(format!(
                    "{} is not usable: {path} ({what}) does not exist",
                    runtime.name()
                ));
            }
        }
        Ok(Host {
            program,
            nvidia_devices: nvidia_devices(),
        })
    }

    pub fn has_device(&self, path: &str) -> bool {
        self.nvidia_devices.contains(Path::new(path))
    }

    /// The executable for argv: the one found, else the runtime's first name.
    fn program(&self, runtime: &dyn ContainerRuntime) -> String {
        match &self.program {
            Some(p) => p.display().to_string(),
            None => runtime.programs().first().copied().unwrap_or("").into(),
        }
    }
}

/// Files of the step directory that a command refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepFiles {
    /// The job's script (the user's, mode 0500).
    pub script: PathBuf,
    /// The job's environment for runtimes that read it from a file (root, 0600).
    pub env_file: PathBuf,
}

impl StepFiles {
    pub fn in_dir(dir: &Path) -> StepFiles {
        StepFiles {
            script: dir.join("slurm_script"),
            env_file: dir.join("container.env"),
        }
    }
}

/// Pick the runtime named by `jobs.runtime` (or an environment's `runtime`):
/// `auto`, `apptainer`, `singularity`, `podman`, `docker`, `bubblewrap` or `none`.
/// `auto` is for steps without an image, so it picks the first installed runtime
/// that can run the host's own root: bubblewrap, else a plain process. Naming a
/// runtime that is not installed is an error saying what is missing.
pub fn detect_runtime(configured: &str) -> Result<RuntimeKind, String> {
    let kind = match configured {
        "auto" => {
            return Ok(RuntimeKind::PREFERENCE
                .into_iter()
                .filter(|k| k.runtime().runs_host_root())
                .find(|k| Host::probe(k.runtime()).is_ok())
                .unwrap_or(RuntimeKind::Plain))
        }
        "apptainer" | "singularity" => RuntimeKind::Apptainer,
        "podman" => RuntimeKind::Podman,
        "docker" => RuntimeKind::Docker,
        "bubblewrap" => RuntimeKind::Bubblewrap,
        "none" => RuntimeKind::Plain,
        other => {
            return Err(format!(
                "unknown runtime \"{other}\" (expected auto, apptainer, singularity, \
                 podman, docker, bubblewrap or none)"
            ))
        }
    };
    Host::probe(kind.runtime()).map(|_| kind)
}

/// Every runtime usable on this machine, for the startup log.
pub fn detect_available() -> Vec<RuntimeKind> {
    RuntimeKind::PREFERENCE
        .into_iter()
        .filter(|k| Host::probe(k.runtime()).is_ok())
        .collect()
}

fn find_program(names: &[&str]) -> Option<PathBuf> {
    names
        .iter()
        .flat_map(|n| SEARCH_DIRS.iter().map(move |d| Path::new(d).join(n)))
        .find(|p| p.is_file())
}

/// `/dev/nvidia*` entries (device files and the `nvidia-caps` directory).
fn nvidia_devices() -> BTreeSet<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/dev") else {
        return BTreeSet::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"nvidia"))
        .map(|e| e.path())
        .collect()
}

/// NVIDIA control devices every GPU job needs.
pub(crate) const NVIDIA_CONTROL: &[&str] = &[
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
    "/dev/nvidia-caps",
];

/// The script's command: itself when it has a `#!` line, else `/bin/sh script`;
/// then its arguments (`sbatch script ARGS`).
fn script_command(spec: &StepSpec, script: &Path) -> Vec<String> {
    let s = script.display().to_string();
    let mut command = if spec.script.starts_with("#!") {
        vec![s]
    } else {
        vec!["/bin/sh".into(), s]
    };
    command.extend(spec.args.iter().cloned());
    command
}

/// A host path made visible in the container, as the runtimes' options need it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bind {
    source: String,
    target: String,
    read_only: bool,
}

impl Bind {
    fn same(path: &Path, read_only: bool) -> Bind {
        let p = path.display().to_string();
        Bind {
            source: p.clone(),
            target: p,
            read_only,
        }
    }

    /// `SRC:DST` or `SRC:DST:ro` (apptainer's `--bind`, podman's and docker's `-v`).
    fn spec(&self) -> String {
        let ro = if self.read_only { ":ro" } else { "" };
        format!("{}:{}{ro}", self.source, self.target)
    }
}

/// What every container sees besides the home, in order: the working directory
/// when outside the home, the spec's mounts, then the script (read-only), last so
/// that no mount hides it.
fn binds(spec: &StepSpec, script: &Path) -> Vec<Bind> {
    let mut out = Vec::new();
    if !spec.workdir.starts_with(&spec.home) {
        out.push(Bind::same(&spec.workdir, false));
    }
    out.extend(spec.mounts.iter().map(|m| Bind {
        source: m.source.display().to_string(),
        target: m.target.display().to_string(),
        read_only: m.read_only,
    }));
    out.push(Bind::same(script, true));
    out
}

/// The container name of a step: `atrium-<job>`.
fn container_name(spec: &StepSpec) -> String {
    format!("atrium-{}", spec.job)
}

/// Check what an image runtime needs: an image that cannot be read as an option,
/// absolute mount paths, and no path containing a character of the bind syntax.
fn check_image_and_paths(
    runtime: &dyn ContainerRuntime,
    spec: &StepSpec,
    forbidden: &[char],
) -> Result<(), String> {
    match spec.image.as_deref() {
        None | Some("") => return Err(format!("{} needs an image", runtime.name())),
        Some(image) if image.starts_with('-') => {
            return Err(format!("image {image:?} is not a valid image name"))
        }
        Some(_) => {}
    }
    for m in &spec.mounts {
        if !m.source.is_absolute() || !m.target.is_absolute() {
            return Err(format!(
                "mount {} -> {} is not between absolute paths",
                m.source.display(),
                m.target.display()
            ));
        }
    }
    let paths = [&spec.home, &spec.workdir]
        .into_iter()
        .chain(spec.mounts.iter().flat_map(|m| [&m.source, &m.target]));
    for p in paths {
        let s = p.display().to_string();
        if let Some(c) = s.chars().find(|c| forbidden.contains(c)) {
            return Err(format!(
                "{} cannot bind {s}: its path contains {c:?}",
                runtime.name()
            ));
        }
    }
    Ok(())
}

/// GPU numbering inside a container that holds only the allocated GPUs (podman's
/// CDI devices, docker's `--gpus`): CUDA counts them from 0, so physical indices in
/// `CUDA_VISIBLE_DEVICES` and `GPU_DEVICE_ORDINAL` become `0..n`. UUIDs (MIG
/// instances) name the same device everywhere and stay.
fn renumber_gpus(env: &[(String, String)]) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| {
            let renumber = (k == "CUDA_VISIBLE_DEVICES" || k == "GPU_DEVICE_ORDINAL")
                && !v.is_empty()
                && v.split(',').all(|d| d.trim().parse::<u32>().is_ok());
            if renumber {
                let n = v.split(',').count();
                let ordinals: Vec<String> = (0..n).map(|i| i.to_string()).collect();
                (k.clone(), ordinals.join(","))
            } else {
                (k.clone(), v.clone())
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::launch::Mount;

    pub fn spec(runtime: RuntimeKind, gpus: Vec<u32>) -> StepSpec {
        let alice = crate::privilege::Identity {
            user: "alice".into(),
            uid: 20001,
            gid: 20001,
            groups: vec![],
            home: "/home/alice".into(),
        };
        StepSpec {
            gpu_indices: gpus,
            ..StepSpec::plain(
                "7",
                &alice,
                Path::new("/scratch/alice/run"),
                "#!/bin/bash\ntrue\n",
                "/home/alice/slurm-7.out".into(),
                runtime,
            )
        }
    }

    /// A read-only data set and a writable project space.
    pub fn mounts() -> Vec<Mount> {
        vec![
            Mount {
                source: "/srv/datasets".into(),
                target: "/datasets".into(),
                read_only: true,
            },
            Mount {
                source: "/srv/projects/vision".into(),
                target: "/projects/vision".into(),
                read_only: false,
            },
        ]
    }

    pub fn files() -> StepFiles {
        StepFiles::in_dir(Path::new("/spool/7"))
    }

    /// A host with `program`, GPUs 0-3 and every control device.
    pub fn host(program: &str) -> Host {
        let mut nvidia_devices: BTreeSet<PathBuf> =
            NVIDIA_CONTROL.iter().map(PathBuf::from).collect();
        nvidia_devices.extend((0..4).map(|i| PathBuf::from(format!("/dev/nvidia{i}"))));
        Host {
            program: (!program.is_empty()).then(|| PathBuf::from(program)),
            nvidia_devices,
        }
    }

    #[test]
    fn runtime_kinds_keep_their_names_in_spec_json() {
        for (kind, json) in [
            (RuntimeKind::Bubblewrap, "\"bubblewrap\""),
            (RuntimeKind::Plain, "\"plain\""),
            (RuntimeKind::Apptainer, "\"apptainer\""),
            (RuntimeKind::Podman, "\"podman\""),
            (RuntimeKind::Docker, "\"docker\""),
        ] {
            assert_eq!(serde_json::to_string(&kind).ok().as_deref(), Some(json));
            assert_eq!(serde_json::from_str::<RuntimeKind>(json).ok(), Some(kind));
        }
    }

    #[test]
    fn naming_an_unknown_or_missing_runtime_is_an_error() {
        let unknown = detect_runtime("lxc").err().unwrap_or_default();
        assert!(unknown.contains("unknown runtime \"lxc\""), "{unknown}");
        assert_eq!(detect_runtime("none"), Ok(RuntimeKind::Plain));
        let auto = detect_runtime("auto");
        assert!(
            matches!(auto, Ok(RuntimeKind::Bubblewrap | RuntimeKind::Plain)),
            "{auto:?}"
        );
        if find_program(&["apptainer", "singularity"]).is_none() {
            let e = detect_runtime("singularity").err().unwrap_or_default();
            assert_eq!(
                e,
                "apptainer is not installed (no apptainer or singularity in \
                 /usr/bin, /usr/local/bin, /bin)"
            );
        }
        assert!(detect_available().contains(&RuntimeKind::Plain));
    }

    #[test]
    fn physical_gpu_indices_become_container_ordinals() {
        let env = vec![
            ("CUDA_VISIBLE_DEVICES".to_string(), "1,3".to_string()),
            ("GPU_DEVICE_ORDINAL".to_string(), "1,3".to_string()),
            ("SLURM_JOB_GPUS".to_string(), "1,3".to_string()),
        ];
        let out = renumber_gpus(&env);
        assert_eq!(out[0].1, "0,1");
        assert_eq!(out[1].1, "0,1");
        assert_eq!(out[2].1, "1,3");
        let mig = vec![(
            "CUDA_VISIBLE_DEVICES".to_string(),
            "MIG-6e2a6c3b-1d0a-5f52-9a8e-2c0f1b6e4d11".to_string(),
        )];
        assert_eq!(renumber_gpus(&mig), mig);
    }

    #[test]
    fn image_runtimes_refuse_paths_their_syntax_cannot_carry() {
        let mut s = spec(RuntimeKind::Docker, vec![]);
        let docker = RuntimeKind::Docker.runtime();
        assert_eq!(
            check_image_and_paths(docker, &s, &[':']),
            Err("docker needs an image".into())
        );
        s.image = Some("--privileged".into());
        assert!(check_image_and_paths(docker, &s, &[':']).is_err());
        s.image = Some("nvcr.io/nvidia/pytorch:24.01-py3".into());
        assert_eq!(check_image_and_paths(docker, &s, &[':']), Ok(()));
        s.workdir = "/scratch/a:/etc".into();
        assert_eq!(
            check_image_and_paths(docker, &s, &[':']),
            Err("docker cannot bind /scratch/a:/etc: its path contains ':'".into())
        );
    }
}
