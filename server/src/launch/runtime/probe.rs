//! A probe of a container runtime (`atrium doctor`): the command line a step would
//! run, built by the runtime itself, with one program in place of a job's script.
//!
//! Owns: the probe's spec (no GPUs, no mounts, a scratch directory as home and
//! working directory). Must not touch: running it (the caller does, as the user a
//! step would run as), identities, the database.

use std::path::Path;

use super::{ContainerRuntime, Host, RuntimeKind, StepFiles};
use crate::launch::StepSpec;
use crate::privilege::Identity;

/// What a probe runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeCommand {
    /// The runtime's program (absolute), its options, then `program`.
    pub argv: Vec<String>,
    /// The environment the runtime's command starts with.
    pub env: Vec<(String, String)>,
    /// Whether the runtime's client must start as root (docker): the container still
    /// runs as the user.
    pub root_client: bool,
    /// Contents of the environment file the runtime reads, to write (0600) at
    /// `dir/container.env` before running.
    pub env_file: Option<String>,
}

/// The command that runs `program` (an absolute path, e.g. `/usr/bin/true`) inside
/// `kind` (with `image` where it needs one) as `identity`, in `dir` (which must
/// exist and which the user must be able to enter): the same command line a step
/// gets. An error says why the runtime cannot run it here (not installed, no image).
pub fn probe_command(
    kind: &RuntimeKind,
    image: Option<&str>,
    identity: &Identity,
    dir: &Path,
    program: &Path,
) -> Result<ProbeCommand, String> {
    let runtime: &dyn ContainerRuntime = kind.runtime();
    let host = Host::probe(runtime)?;
    let identity = Identity {
        home: dir.to_path_buf(),
        ..identity.clone()
    };
    // A `#!` script is run as itself: the command is `program` alone.
    let spec = StepSpec {
        env: crate::privilege::base_env(),
        kill_grace_secs: 1,
        image: image.map(str::to_string),
        ..StepSpec::plain(
            "doctor",
            &identity,
            dir,
            "#!",
            dir.join("probe.out"),
            kind.clone(),
        )
    };
    runtime.check(&spec)?;
    let files = StepFiles {
        script: program.to_path_buf(),
        env_file: dir.join("container.env"),
    };
    Ok(ProbeCommand {
        argv: runtime.argv(&spec, &files, &host),
        env: runtime.env(&spec, &host),
        root_client: runtime.needs_root_client(),
        env_file: runtime.env_file(&spec),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nobody() -> Identity {
        Identity {
            user: "nobody".into(),
            uid: 65534,
            gid: 65534,
            groups: vec![],
            home: "/nonexistent".into(),
        }
    }

    #[test]
    fn a_plain_probe_is_the_program_alone() {
        let p = probe_command(
            &RuntimeKind::Plain,
            None,
            &nobody(),
            Path::new("/tmp/probe"),
            Path::new("/usr/bin/true"),
        )
        .expect("a plain process runs anywhere");
        assert_eq!(p.argv, vec!["/usr/bin/true".to_string()]);
        assert!(!p.root_client);
    }

    #[test]
    fn an_image_runtime_without_an_image_cannot_be_probed() {
        // Either not installed here, or installed and asking for an image: never Ok.
        let e = probe_command(
            &RuntimeKind::Podman,
            None,
            &nobody(),
            Path::new("/tmp/probe"),
            Path::new("/usr/bin/true"),
        )
        .expect_err("podman needs an image");
        assert!(e.contains("podman"), "{e}");
    }
}
