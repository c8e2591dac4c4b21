//! `[[environments]]`: what sessions and batch jobs run in (a container image and its
//! software).
//!
//! Owns: [`EnvironmentConfig`], the runtimes it may name, the names it and sessions
//! may take, and the checks of the list (names unique, an image where the runtime
//! needs one, a command that listens on `{socket}`).
//! Must not touch: containers themselves (starting them is `launch`'s).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use super::check::one_of;
use super::MountConfig;

/// The container runtimes `jobs.runtime` and an environment's `runtime` may name.
pub const RUNTIMES: &[&str] = &[
    "auto",
    "apptainer",
    "singularity",
    "podman",
    "docker",
    "bubblewrap",
    "none",
];

/// An environment users choose on the start form: a container image and its software.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct EnvironmentConfig {
    /// Short name, as the API takes it (`pytorch`).
    pub name: String,
    /// What the form shows (`PyTorch 2 / CUDA 12`).
    pub description: String,
    /// `auto` (the jobs' runtime), `apptainer`, `podman`, `docker`, `bubblewrap` or `none`.
    pub runtime: String,
    /// An apptainer `.sif`, an OCI image for podman/docker, or a root directory for
    /// bubblewrap; none: the host's own software.
    pub image: Option<String>,
    /// Kernels offered in JupyterLab (kernelspec names); empty: every kernel installed.
    pub kernels: Vec<String>,
    /// Extra paths bound into the container.
    pub mounts: Vec<MountConfig>,
    /// Extra environment variables (e.g. `PATH` to reach the image's Jupyter).
    pub env: BTreeMap<String, String>,
    /// The server command instead of JupyterLab/TensorBoard; `{socket}`, `{base_url}`,
    /// `{logdir}` are replaced. It must serve HTTP on `{socket}`.
    pub command: Option<Vec<String>>,
}

impl EnvironmentConfig {
    /// The environment used when the configuration names none: this machine's own
    /// software, in the jobs' runtime.
    pub fn host() -> Self {
        EnvironmentConfig {
            name: "default".into(),
            description: "This machine's software".into(),
            runtime: "auto".into(),
            ..Default::default()
        }
    }

    /// Every problem of the environment at `environments[i]` but a name used twice.
    fn check(&self, i: usize, problem: &mut impl FnMut(&str, String)) {
        let key = |k: &str| format!("environments[{i}].{k}");
        if !self.runtime.is_empty() {
            one_of(problem, &key("runtime"), &self.runtime, RUNTIMES);
        }
        if matches!(
            self.runtime.as_str(),
            "apptainer" | "singularity" | "podman" | "docker"
        ) && self.image.as_deref().is_none_or(str::is_empty)
        {
            problem(
                &key("image"),
                format!("the {} runtime needs an image", self.runtime),
            );
        }
        if let Some(command) = &self.command {
            if command.is_empty() || command[0].trim().is_empty() {
                problem(&key("command"), "must name a program".into());
            } else if !command.iter().any(|a| a.contains("{socket}")) {
                problem(
                    &key("command"),
                    "must listen on {socket} (name it in an argument)".into(),
                );
            }
        }
        for (j, m) in self.mounts.iter().enumerate() {
            m.check(&format!("environments[{i}].mounts[{j}]"), problem);
        }
        for name in self.env.keys() {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                problem(&key("env"), format!("{name:?} is not a variable name"));
            }
        }
    }
}

/// A name for an environment or a session: 1-64 letters, digits, `-`, `_` or `.`,
/// starting with a letter or digit.
pub fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && s.as_bytes()[0].is_ascii_alphanumeric()
}

/// Every problem of `[[environments]]`: each environment's, and names used twice.
pub(super) fn check(environments: &[EnvironmentConfig], problem: &mut impl FnMut(&str, String)) {
    let mut seen = BTreeSet::new();
    for (i, env) in environments.iter().enumerate() {
        if !is_name(&env.name) {
            problem(
                &format!("environments[{i}].name"),
                format!(
                    "{:?} must be 1-64 letters, digits, '-', '_' or '.'",
                    env.name
                ),
            );
        } else if !seen.insert(env.name.as_str()) {
            problem(
                &format!("environments[{i}].name"),
                format!("{:?} is used twice", env.name),
            );
        }
        env.check(i, problem);
    }
}
