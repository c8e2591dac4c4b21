//! `[scheduler]` and `[slurm]`: which scheduler places work, and how atrium talks to
//! Slurm when a site's Slurm does.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::HumanDuration;

/// Which scheduler places jobs and sessions.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct SchedulerConfig {
    /// `internal` (this machine's GPUs, atrium's own scheduler) or `slurm` (the
    /// site's Slurm cluster: jobs and sessions become Slurm jobs).
    pub backend: String,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            backend: "internal".into(),
        }
    }
}

impl SchedulerConfig {
    pub fn is_slurm(&self) -> bool {
        self.backend == "slurm"
    }

    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        if !matches!(self.backend.as_str(), "internal" | "slurm") {
            problem(
                "scheduler.backend",
                format!("{:?} is not one of internal, slurm", self.backend),
            );
        }
    }
}

/// How atrium reaches Slurm (`backend = "slurm"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct SlurmConfig {
    /// Where `sbatch`, `squeue`, `scontrol`, `scancel` and `sacct` are (default: `PATH`).
    pub bin_dir: Option<PathBuf>,
    /// The `slurm.conf` to use (`SLURM_CONF`; default: Slurm's own default).
    pub conf: Option<PathBuf>,
    /// How often atrium asks Slurm for the state of its jobs (one `squeue` call).
    pub poll_interval: HumanDuration,
    /// How often nodes and partitions are read again (`scontrol show node|partition`).
    pub nodes_interval: HumanDuration,
    /// The longest a Slurm command may take before it counts as not answering.
    pub command_timeout: HumanDuration,
    /// The partition sessions go to (default: `[sessions] partition`, else Slurm's
    /// default partition).
    pub session_partition: Option<String>,
    /// The address a session's server listens on, on its compute node: one the head
    /// node reaches (`0.0.0.0`: every address of the node). The server answers only
    /// requests that carry the session's token.
    pub session_listen: String,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            bin_dir: None,
            conf: None,
            poll_interval: HumanDuration(Duration::from_secs(5)),
            nodes_interval: HumanDuration(Duration::from_secs(30)),
            command_timeout: HumanDuration(Duration::from_secs(30)),
            session_partition: None,
            session_listen: "0.0.0.0".into(),
        }
    }
}

impl SlurmConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        if self.poll_interval.0 < Duration::from_millis(200) {
            problem("slurm.poll_interval", "must be at least 200ms".into());
        }
        if self.command_timeout.0 < Duration::from_secs(1) {
            problem("slurm.command_timeout", "must be at least 1s".into());
        }
        if self.session_listen.parse::<std::net::IpAddr>().is_err() {
            problem(
                "slurm.session_listen",
                format!("{:?} is not an IP address", self.session_listen),
            );
        }
        if let Some(conf) = &self.conf {
            if !conf.is_absolute() {
                problem("slurm.conf", "must be an absolute path".into());
            }
        }
    }
}
