//! Container runtimes: the command line that runs a job's script. Pure functions,
//! so the exact argv is tested.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::StepSpec;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeKind {
    /// bubblewrap: new pid, ipc and uts namespaces, a read-only root, a private
    /// /tmp, the home and working directory writable, only the allocated GPUs.
    Bubblewrap,
    /// A plain process.
    Plain,
}

pub(super) fn find_bwrap() -> Option<PathBuf> {
    ["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// NVIDIA control devices every GPU job needs.
const NVIDIA_CONTROL: &[&str] = &[
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
    "/dev/nvidia-caps",
];

/// The script's command: itself when it has a `#!` line, else `/bin/sh script`.
fn script_command(spec: &StepSpec, script: &Path) -> Vec<String> {
    let s = script.display().to_string();
    if spec.script.starts_with("#!") {
        vec![s]
    } else {
        vec!["/bin/sh".into(), s]
    }
}

/// argv for the job; `exists` says which device files are present.
pub(super) fn argv(
    spec: &StepSpec,
    script: &Path,
    bwrap: &Path,
    exists: impl Fn(&str) -> bool,
) -> Vec<String> {
    let command = script_command(spec, script);
    match spec.runtime {
        RuntimeKind::Plain => command,
        RuntimeKind::Bubblewrap => {
            let mut a: Vec<String> = vec![bwrap.display().to_string()];
            let mut add = |xs: &[&str]| a.extend(xs.iter().map(|s| s.to_string()));
            add(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
            add(&["--tmpfs", "/tmp"]);
            let home = spec.home.display().to_string();
            let workdir = spec.workdir.display().to_string();
            add(&["--bind", &home, &home]);
            if !spec.workdir.starts_with(&spec.home) {
                add(&["--bind", &workdir, &workdir]);
            }
            let s = script.display().to_string();
            add(&["--ro-bind", &s, &s]);
            if !spec.gpu_indices.is_empty() {
                for d in NVIDIA_CONTROL {
                    if exists(d) {
                        add(&["--dev-bind", d, d]);
                    }
                }
                for i in &spec.gpu_indices {
                    let d = format!("/dev/nvidia{i}");
                    if exists(&d) {
                        add(&["--dev-bind", &d, &d]);
                    }
                }
            }
            add(&[
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--die-with-parent",
                "--chdir",
                &workdir,
                "--",
            ]);
            a.extend(command);
            a
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(runtime: RuntimeKind, gpus: Vec<u32>) -> StepSpec {
        StepSpec {
            job: "7".into(),
            user: "alice".into(),
            uid: 20001,
            gid: 20001,
            groups: vec![],
            home: "/home/alice".into(),
            workdir: "/scratch/alice/run".into(),
            script: "#!/bin/bash\ntrue\n".into(),
            env: vec![],
            stdout: "/home/alice/slurm-7.out".into(),
            stderr: None,
            time_limit_secs: None,
            memory_limit_mb: None,
            kill_grace_secs: 10,
            gpu_indices: gpus,
            runtime,
            drop_privileges: true,
        }
    }

    #[test]
    fn plain_runs_the_script_or_sh_without_a_shebang() {
        let script = Path::new("/spool/7/slurm_script");
        let mut s = spec(RuntimeKind::Plain, vec![]);
        assert_eq!(
            argv(&s, script, Path::new("bwrap"), |_| true),
            ["/spool/7/slurm_script"]
        );
        s.script = "echo hi\n".into();
        assert_eq!(
            argv(&s, script, Path::new("bwrap"), |_| true),
            ["/bin/sh", "/spool/7/slurm_script"]
        );
    }

    #[test]
    fn bubblewrap_exposes_only_the_allocated_gpus() {
        let s = spec(RuntimeKind::Bubblewrap, vec![1, 3]);
        let present = |d: &str| d != "/dev/nvidia3" && d != "/dev/nvidia-modeset";
        let a = argv(
            &s,
            Path::new("/spool/7/slurm_script"),
            Path::new("/usr/bin/bwrap"),
            present,
        )
        .join(" ");
        assert_eq!(
            a,
            "/usr/bin/bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
             --bind /home/alice /home/alice --bind /scratch/alice/run /scratch/alice/run \
             --ro-bind /spool/7/slurm_script /spool/7/slurm_script \
             --dev-bind /dev/nvidiactl /dev/nvidiactl --dev-bind /dev/nvidia-uvm /dev/nvidia-uvm \
             --dev-bind /dev/nvidia-uvm-tools /dev/nvidia-uvm-tools --dev-bind /dev/nvidia-caps /dev/nvidia-caps \
             --dev-bind /dev/nvidia1 /dev/nvidia1 \
             --unshare-pid --unshare-ipc --unshare-uts --die-with-parent --chdir /scratch/alice/run \
             -- /spool/7/slurm_script"
        );
        let no_gpu = spec(RuntimeKind::Bubblewrap, vec![]);
        let a = argv(&no_gpu, Path::new("/s"), Path::new("bwrap"), |_| true).join(" ");
        assert!(!a.contains("nvidia"), "{a}");
    }
}
