//! `[scheduler]` and `[slurm]`: which scheduler places work, and how atrium talks to
//! Slurm when a site's Slurm does.
//!
//! Owns: [`SchedulerConfig`] and [`SlurmConfig`], their defaults and checks.
//! Must not touch: Slurm itself (running its commands is `sched::slurm`'s).

use std::path::PathBuf;

use serde::Deserialize;

use super::check::{absolute_path, at_least, ip_address, one_of};
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
        one_of(
            problem,
            "scheduler.backend",
            &self.backend,
            &["internal", "slurm"],
        );
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
            poll_interval: HumanDuration::from_secs(5),
            nodes_interval: HumanDuration::from_secs(30),
            command_timeout: HumanDuration::from_secs(30),
            session_partition: None,
            session_listen: "0.0.0.0".into(),
        }
    }
}

impl SlurmConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        let poll_min = HumanDuration::from_millis(200);
        at_least(problem, "slurm.poll_interval", self.poll_interval, poll_min);
        let timeout_min = HumanDuration::from_secs(1);
        at_least(
            problem,
            "slurm.command_timeout",
            self.command_timeout,
            timeout_min,
        );
        ip_address(problem, "slurm.session_listen", &self.session_listen);
        if let Some(conf) = &self.conf {
            absolute_path(problem, "slurm.conf", conf);
        }
    }
}
