//! `none`: the script as a plain process of the user, on the host's file system
//! as it is (the spec's mounts are not applied: their sources are where they are),
//! with the job's environment as its own. It cannot run an image.
//! Must not touch: anything but the command line.

use super::{script_command, ContainerRuntime, Host, StepFiles};
use crate::launch::StepSpec;

pub(crate) struct Plain;

impl ContainerRuntime for Plain {
    fn name(&self) -> &'static str {
        "none"
    }

    fn programs(&self) -> &'static [&'static str] {
        &[]
    }

    fn runs_host_root(&self) -> bool {
        true
    }

    fn check(&self, spec: &StepSpec) -> Result<(), String> {
        match &spec.image {
            None => Ok(()),
            Some(image) => Err(format!(
                "runtime \"none\" cannot run the image {image:?}: choose a container runtime"
            )),
        }
    }

    fn argv(&self, spec: &StepSpec, files: &StepFiles, _host: &Host) -> Vec<String> {
        script_command(spec, &files.script)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{files, host, spec};
    use super::*;
    use crate::launch::RuntimeKind;

    #[test]
    fn plain_runs_the_script_or_sh_without_a_shebang() {
        let mut s = spec(RuntimeKind::Plain, vec![0]);
        assert_eq!(
            Plain.argv(&s, &files(), &host("")),
            ["/spool/7/slurm_script"]
        );
        s.script = "echo hi\n".into();
        assert_eq!(
            Plain.argv(&s, &files(), &host("")),
            ["/bin/sh", "/spool/7/slurm_script"]
        );
        assert_eq!(Plain.check(&s), Ok(()));
        s.image = Some("/srv/images/pytorch.sif".into());
        assert!(Plain.check(&s).is_err());
    }
}
