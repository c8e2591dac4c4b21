//! bubblewrap: the job in new pid, ipc and uts namespaces over a read-only root
//! (the host's `/`, or an image directory), with a private `/tmp`, the home and
//! working directory writable, the spec's mounts, and only the allocated GPUs'
//! device files. Runs as the user (the trampoline has dropped privileges); the
//! job's environment is the process's own.
//! Must not touch: anything but the command line.

use std::path::Path;

use super::{binds, script_command, ContainerRuntime, Host, StepFiles, NVIDIA_CONTROL};
use crate::launch::StepSpec;

pub(crate) struct Bubblewrap;

impl ContainerRuntime for Bubblewrap {
    fn name(&self) -> &'static str {
        "bubblewrap"
    }

    fn programs(&self) -> &'static [&'static str] {
        &["bwrap"]
    }

    fn runs_host_root(&self) -> bool {
        true
    }

    /// An image is a root directory. Its mount points (home, working directory,
    /// mount targets, the script's path) must exist in it: bubblewrap cannot create
    /// them under a read-only root.
    fn check(&self, spec: &StepSpec) -> Result<(), String> {
        match spec.image.as_deref() {
            None => Ok(()),
            Some(image) if Path::new(image).is_absolute() && Path::new(image).is_dir() => Ok(()),
            Some(image) => Err(format!(
                "bubblewrap runs an image only from a root directory; {image:?} is not one"
            )),
        }
    }

    fn argv(&self, spec: &StepSpec, files: &StepFiles, host: &Host) -> Vec<String> {
        let mut a: Vec<String> = vec![host.program(self)];
        let mut add = |xs: &[&str]| a.extend(xs.iter().map(|s| s.to_string()));
        let root = spec.image.as_deref().unwrap_or("/");
        add(&["--ro-bind", root, "/", "--dev", "/dev", "--proc", "/proc"]);
        add(&["--tmpfs", "/tmp"]);
        // The portal's directories, on the host's root: empty (the job's own files
        // in them are bound back below).
        if spec.image.is_none() {
            for dir in &spec.hidden {
                add(&["--tmpfs", &dir.display().to_string()]);
            }
        }
        let home = spec.home.display().to_string();
        let workdir = spec.workdir.display().to_string();
        add(&["--bind", &home, &home]);
        // After the tmpfs and the home, so that a mount under /tmp or the home shows.
        for b in binds(spec, &files.script) {
            let option = if b.read_only { "--ro-bind" } else { "--bind" };
            add(&[option, &b.source, &b.target]);
        }
        if !spec.gpu_indices.is_empty() {
            for d in NVIDIA_CONTROL {
                if host.has_device(d) {
                    add(&["--dev-bind", d, d]);
                }
            }
            for i in &spec.gpu_indices {
                let d = format!("/dev/nvidia{i}");
                if host.has_device(&d) {
                    add(&["--dev-bind", &d, &d]);
                }
            }
        }
        add(&["--unshare-pid", "--unshare-ipc", "--unshare-uts"]);
        // No terminal of anyone's can be reached (TIOCSTI) from inside. An interactive
        // job keeps its own terminal, the only one it can reach.
        if !spec.pty {
            add(&["--new-session"]);
        }
        add(&["--die-with-parent", "--chdir", &workdir, "--"]);
        a.extend(script_command(spec, &files.script));
        a
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    use super::super::tests::{files, host, mounts, spec};
    use super::*;
    use crate::launch::RuntimeKind;

    #[test]
    fn bubblewrap_exposes_only_the_allocated_gpus() {
        let s = spec(RuntimeKind::Bubblewrap, vec![1, 3]);
        let mut h = host("/usr/bin/bwrap");
        h.nvidia_devices.remove(Path::new("/dev/nvidia3"));
        h.nvidia_devices.remove(Path::new("/dev/nvidia-modeset"));
        let a = Bubblewrap.argv(&s, &files(), &h).join(" ");
        assert_eq!(
            a,
            "/usr/bin/bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp \
             --bind /home/alice /home/alice --bind /scratch/alice/run /scratch/alice/run \
             --ro-bind /spool/7/slurm_script /spool/7/slurm_script \
             --dev-bind /dev/nvidiactl /dev/nvidiactl --dev-bind /dev/nvidia-uvm /dev/nvidia-uvm \
             --dev-bind /dev/nvidia-uvm-tools /dev/nvidia-uvm-tools --dev-bind /dev/nvidia-caps /dev/nvidia-caps \
             --dev-bind /dev/nvidia1 /dev/nvidia1 \
             --unshare-pid --unshare-ipc --unshare-uts --new-session --die-with-parent --chdir /scratch/alice/run \
             -- /spool/7/slurm_script"
        );
        let no_gpu = spec(RuntimeKind::Bubblewrap, vec![]);
        let a = Bubblewrap.argv(&no_gpu, &files(), &host("bwrap")).join(" ");
        assert!(!a.contains("nvidia"), "{a}"); // An interactive job keeps its own terminal: no new session is made for it.
        let mut interactive = spec(RuntimeKind::Bubblewrap, vec![]);
        interactive.pty = true;
        let a = Bubblewrap
            .argv(&interactive, &files(), &host("bwrap"))
            .join(" ");
        assert!(!a.contains("--new-session"), "{a}");
        assert!(
            a.contains("--unshare-pid --unshare-ipc --unshare-uts --die-with-parent"),
            "{a}"
        );
    }

    #[test]
    fn bubblewrap_hides_the_portals_directories_but_binds_the_script_back() {
        let mut s = spec(RuntimeKind::Bubblewrap, vec![]);
        s.hidden = vec!["/var/lib/atrium".into(), "/spool".into()];
        let a = Bubblewrap
            .argv(&s, &files(), &host("/usr/bin/bwrap"))
            .join(" ");
        let hide = a.find("--tmpfs /spool").expect("the spool is hidden");
        assert!(a.contains("--tmpfs /var/lib/atrium"), "{a}");
        let script = a
            .find("--ro-bind /spool/7/slurm_script")
            .expect("the script is bound");
        assert!(
            hide < script,
            "the script is bound after the spool is hidden: {a}"
        );
        // Over an image, the portal's directories are not there to hide.
        s.image = Some("/srv/images/pytorch".into());
        let a = Bubblewrap
            .argv(&s, &files(), &host("/usr/bin/bwrap"))
            .join(" ");
        assert!(!a.contains("--tmpfs /spool"), "{a}");
    }

    #[test]
    fn bubblewrap_binds_mounts_after_the_tmpfs_over_an_image() {
        let mut s = spec(RuntimeKind::Bubblewrap, vec![]);
        s.workdir = "/home/alice/run".into();
        s.script = "echo hi\n".into();
        s.image = Some("/srv/images/pytorch".into());
        s.mounts = mounts();
        s.mounts.push(crate::launch::Mount {
            source: "/scratch/alice".into(),
            target: "/tmp/scratch".into(),
            read_only: false,
        });
        let h = Host {
            program: Some(PathBuf::from("/usr/bin/bwrap")),
            nvidia_devices: BTreeSet::new(),
        };
        assert_eq!(
            Bubblewrap.argv(&s, &files(), &h),
            [
                "/usr/bin/bwrap",
                "--ro-bind",
                "/srv/images/pytorch",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--tmpfs",
                "/tmp",
                "--bind",
                "/home/alice",
                "/home/alice",
                "--ro-bind",
                "/srv/datasets",
                "/datasets",
                "--bind",
                "/srv/projects/vision",
                "/projects/vision",
                "--bind",
                "/scratch/alice",
                "/tmp/scratch",
                "--ro-bind",
                "/spool/7/slurm_script",
                "/spool/7/slurm_script",
                "--unshare-pid",
                "--unshare-ipc",
                "--unshare-uts",
                "--new-session",
                "--die-with-parent",
                "--chdir",
                "/home/alice/run",
                "--",
                "/bin/sh",
                "/spool/7/slurm_script",
            ]
        );
    }

    #[test]
    fn bubblewrap_runs_an_image_only_from_a_directory() {
        let mut s = spec(RuntimeKind::Bubblewrap, vec![]);
        assert_eq!(Bubblewrap.check(&s), Ok(()));
        s.image = Some("/".into());
        assert_eq!(Bubblewrap.check(&s), Ok(()));
        s.image = Some("docker.io/library/ubuntu:24.04".into());
        assert!(Bubblewrap.check(&s).is_err());
    }
}
