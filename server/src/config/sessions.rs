//! `[sessions]`, `[[environments]]` and `[storage]`: interactive sessions, the
//! environments (container images and their software) they and batch jobs run in, and
//! the shared storage bound into every step.
//!
//! Must not touch: anything beyond describing and checking these sections.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// A duration written as humans do: `90s`, `15m`, `1h 30m`, `8h`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text)
            .map(HumanDuration)
            .map_err(|e| serde::de::Error::custom(format!("{text:?} is not a duration: {e}")))
    }
}

impl fmt::Debug for HumanDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

/// Interactive sessions (JupyterLab, terminal, TensorBoard).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct SessionsConfig {
    /// Sessions one user may have at once (pending or running).
    pub max_per_user: u32,
    /// Time limit of a session unless the user asks for another.
    pub default_hours: u32,
    /// The longest time limit a user may ask for (the partition's limit applies too).
    pub max_hours: u32,
    /// A session with no activity for this long is stopped (`0s`: never).
    pub idle_timeout: HumanDuration,
    /// How often activity is checked.
    pub cull_interval: HumanDuration,
    /// How long before its time limit a session's page is warned.
    pub time_limit_warning: HumanDuration,
    /// How long a started session's server may take to answer before it fails.
    pub ready_timeout: HumanDuration,
    /// Administrators may open other users' sessions through the proxy.
    pub admin_access: bool,
    /// The partition sessions run in (default: the default partition).
    pub partition: Option<String>,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            max_per_user: 4,
            default_hours: 8,
            max_hours: 24,
            idle_timeout: HumanDuration(Duration::from_secs(3600)),
            cull_interval: HumanDuration(Duration::from_secs(60)),
            time_limit_warning: HumanDuration(Duration::from_secs(300)),
            ready_timeout: HumanDuration(Duration::from_secs(300)),
            admin_access: false,
            partition: None,
        }
    }
}

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

/// A path of the host shown inside sessions and jobs.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct MountConfig {
    pub source: PathBuf,
    /// Where it appears inside (default: the same path).
    pub target: Option<PathBuf>,
    pub read_only: bool,
}

/// Shared storage bound into every session and job.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct StorageConfig {
    /// Read-only data sets, e.g. `{ source = "/srv/datasets", target = "/datasets" }`.
    pub datasets: Vec<MountConfig>,
    /// Read-write project spaces, e.g. `{ source = "/srv/projects", target = "/projects" }`.
    pub projects: Vec<MountConfig>,
}

pub const RUNTIMES: &[&str] = &[
    "auto",
    "apptainer",
    "singularity",
    "podman",
    "docker",
    "bubblewrap",
    "none",
];

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

pub(super) fn check(
    sessions: &SessionsConfig,
    environments: &[EnvironmentConfig],
    storage: &StorageConfig,
    problem: &mut impl FnMut(&str, String),
) {
    if sessions.max_per_user == 0 {
        problem("sessions.max_per_user", "must be at least 1".into());
    }
    if sessions.default_hours == 0 {
        problem("sessions.default_hours", "must be at least 1".into());
    }
    if sessions.max_hours < sessions.default_hours {
        problem(
            "sessions.max_hours",
            "must not be below sessions.default_hours".into(),
        );
    }
    if sessions.cull_interval.0 < Duration::from_secs(1) {
        problem("sessions.cull_interval", "must be at least 1s".into());
    }
    if sessions.ready_timeout.0 < Duration::from_secs(1) {
        problem("sessions.ready_timeout", "must be at least 1s".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, env) in environments.iter().enumerate() {
        let key = |k: &str| format!("environments[{i}].{k}");
        if !is_name(&env.name) {
            problem(
                &key("name"),
                format!(
                    "{:?} must be 1-64 letters, digits, '-', '_' or '.'",
                    env.name
                ),
            );
        } else if !seen.insert(env.name.clone()) {
            problem(&key("name"), format!("{:?} is used twice", env.name));
        }
        if !env.runtime.is_empty() && !RUNTIMES.contains(&env.runtime.as_str()) {
            problem(
                &key("runtime"),
                format!("{:?} is not one of {}", env.runtime, RUNTIMES.join(", ")),
            );
        }
        if matches!(
            env.runtime.as_str(),
            "apptainer" | "singularity" | "podman" | "docker"
        ) && env.image.as_deref().is_none_or(str::is_empty)
        {
            problem(
                &key("image"),
                format!("the {} runtime needs an image", env.runtime),
            );
        }
        if let Some(command) = &env.command {
            if command.is_empty() || command[0].trim().is_empty() {
                problem(&key("command"), "must name a program".into());
            } else if !command.iter().any(|a| a.contains("{socket}")) {
                problem(
                    &key("command"),
                    "must listen on {socket} (name it in an argument)".into(),
                );
            }
        }
        for (j, m) in env.mounts.iter().enumerate() {
            check_mount(m, &format!("environments[{i}].mounts[{j}]"), problem);
        }
        for name in env.env.keys() {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                problem(&key("env"), format!("{name:?} is not a variable name"));
            }
        }
    }
    for (j, m) in storage.datasets.iter().enumerate() {
        check_mount(m, &format!("storage.datasets[{j}]"), problem);
    }
    for (j, m) in storage.projects.iter().enumerate() {
        check_mount(m, &format!("storage.projects[{j}]"), problem);
    }
}

fn check_mount(m: &MountConfig, key: &str, problem: &mut impl FnMut(&str, String)) {
    if !m.source.is_absolute() {
        problem(&format!("{key}.source"), "must be an absolute path".into());
    }
    if m.target.as_ref().is_some_and(|t| !t.is_absolute()) {
        problem(&format!("{key}.target"), "must be an absolute path".into());
    }
}
