//! apptainer (or singularity, when apptainer is not installed): the job in an image
//! (`.sif` or a sandbox directory) with `--containall`, run as the user (the
//! trampoline has dropped privileges).
//!
//! The environment: `--containall` implies `--cleanenv`, which keeps the host's
//! environment out of the container, so the job's variables go in through
//! apptainer's own channel: each `NAME=value` is also given to apptainer as
//! `APPTAINERENV_NAME=value` (`SINGULARITYENV_` for singularity), which it sets
//! inside after cleaning. Values never appear in argv. `HOME` is set by `--home`.
//!
//! GPUs: `--nv` binds the driver's libraries and every `/dev/nvidia*`; the job is
//! kept to its GPUs by `CUDA_VISIBLE_DEVICES` (physical indices, as on the host),
//! not by device isolation.
//! Must not touch: anything but the command line and its environment.

use super::{binds, check_image_and_paths, script_command, ContainerRuntime, Host, StepFiles};
use crate::launch::StepSpec;

pub(crate) struct Apptainer;

impl Apptainer {
    /// The prefix of variables apptainer sets inside the container.
    fn env_prefix(host: &Host) -> &'static str {
        let singularity = host
            .program
            .as_deref()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "singularity");
        if singularity {
            "SINGULARITYENV_"
        } else {
            "APPTAINERENV_"
        }
    }
}

impl ContainerRuntime for Apptainer {
    fn name(&self) -> &'static str {
        "apptainer"
    }

    fn programs(&self) -> &'static [&'static str] {
        &["apptainer", "singularity"]
    }

    fn runs_host_root(&self) -> bool {
        false
    }

    /// `--bind` takes a comma-separated list of `src:dst[:opts]`.
    fn check(&self, spec: &StepSpec) -> Result<(), String> {
        check_image_and_paths(self, spec, &[':', ','])
    }

    /// `apptainer exec [--nv] --containall --cleanenv --pwd WORKDIR --home HOME
    /// [--bind WORKDIR:WORKDIR] --bind SRC:DST[:ro]… --bind SCRIPT:SCRIPT:ro IMAGE
    /// <script command>`. `--home` binds the home itself (a custom home is bound
    /// even under `--contain`), so it gets no `--bind` of its own, which apptainer
    /// would report as a duplicate.
    fn argv(&self, spec: &StepSpec, files: &StepFiles, host: &Host) -> Vec<String> {
        let mut a: Vec<String> = vec![host.program(self), "exec".into()];
        if !spec.gpu_indices.is_empty() {
            a.push("--nv".into());
        }
        a.extend([
            "--containall".to_string(),
            "--cleanenv".into(),
            "--pwd".into(),
            spec.workdir.display().to_string(),
            "--home".into(),
            spec.home.display().to_string(),
        ]);
        for b in binds(spec, &files.script) {
            a.push("--bind".into());
            a.push(b.spec());
        }
        a.push(spec.image.clone().unwrap_or_default());
        a.extend(script_command(spec, &files.script));
        a
    }

    /// The job's environment for apptainer itself, and each variable again under
    /// the prefix that carries it into the container.
    fn env(&self, spec: &StepSpec, host: &Host) -> Vec<(String, String)> {
        let prefix = Apptainer::env_prefix(host);
        let inside = spec
            .env
            .iter()
            .filter(|(k, _)| k != "HOME")
            .map(|(k, v)| (format!("{prefix}{k}"), v.clone()));
        spec.env.iter().cloned().chain(inside).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{files, host, mounts, spec};
    use super::*;
    use crate::launch::RuntimeKind;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn apptainer_with_gpus_and_mounts() {
        let mut s = spec(RuntimeKind::Apptainer, vec![1, 3]);
        s.image = Some("/srv/images/pytorch-24.01.sif".into());
        s.mounts = mounts();
        assert_eq!(
            Apptainer
                .argv(&s, &files(), &host("/usr/bin/apptainer"))
                .join(" "),
            "/usr/bin/apptainer exec --nv --containall --cleanenv \
             --pwd /scratch/alice/run --home /home/alice \
             --bind /scratch/alice/run:/scratch/alice/run \
             --bind /srv/datasets:/datasets:ro \
             --bind /srv/projects/vision:/projects/vision \
             --bind /spool/7/slurm_script:/spool/7/slurm_script:ro \
             /srv/images/pytorch-24.01.sif /spool/7/slurm_script"
        );
    }

    #[test]
    fn apptainer_without_gpus_in_the_home() {
        let mut s = spec(RuntimeKind::Apptainer, vec![]);
        s.workdir = "/home/alice/run".into();
        s.script = "python train.py\n".into();
        s.image = Some("/srv/images/r-4".into());
        assert_eq!(
            Apptainer.argv(&s, &files(), &host("/usr/local/bin/singularity")),
            [
                "/usr/local/bin/singularity",
                "exec",
                "--containall",
                "--cleanenv",
                "--pwd",
                "/home/alice/run",
                "--home",
                "/home/alice",
                "--bind",
                "/spool/7/slurm_script:/spool/7/slurm_script:ro",
                "/srv/images/r-4",
                "/bin/sh",
                "/spool/7/slurm_script",
            ]
        );
    }

    #[test]
    fn apptainer_carries_the_environment_inside_under_its_prefix() {
        let mut s = spec(RuntimeKind::Apptainer, vec![1]);
        s.env = env(&[
            ("HOME", "/home/alice"),
            ("CUDA_VISIBLE_DEVICES", "1"),
            ("WANDB_API_KEY", "secret"),
        ]);
        let expected = env(&[
            ("HOME", "/home/alice"),
            ("CUDA_VISIBLE_DEVICES", "1"),
            ("WANDB_API_KEY", "secret"),
            ("APPTAINERENV_CUDA_VISIBLE_DEVICES", "1"),
            ("APPTAINERENV_WANDB_API_KEY", "secret"),
        ]);
        assert_eq!(Apptainer.env(&s, &host("/usr/bin/apptainer")), expected);
        let singularity = Apptainer.env(&s, &host("/usr/bin/singularity"));
        assert!(singularity.contains(&("SINGULARITYENV_WANDB_API_KEY".into(), "secret".into())));
        s.image = Some("/srv/images/pytorch.sif".into());
        assert!(!Apptainer
            .argv(&s, &files(), &host("/usr/bin/apptainer"))
            .concat()
            .contains("secret"));
    }

    #[test]
    fn apptainer_needs_an_image_and_bindable_paths() {
        let mut s = spec(RuntimeKind::Apptainer, vec![]);
        assert!(Apptainer.check(&s).is_err());
        s.image = Some("docker://nvcr.io/nvidia/pytorch:24.01-py3".into());
        assert_eq!(Apptainer.check(&s), Ok(()));
        s.workdir = "/scratch/a,b".into();
        assert!(Apptainer.check(&s).is_err());
    }
}
