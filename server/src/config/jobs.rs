//! `[jobs]`: how batch jobs run, and the bounds a site puts on submissions.
//!
//! Owns: [`JobsConfig`], its defaults and checks, and [`SubmissionLimits`] (the
//! `max_script_bytes` and `max_array_size` that `sched::submission` applies).
//! Must not touch: submissions themselves (parsing and bounding them is
//! `sched::submission`'s) or job steps.

use std::path::PathBuf;

use scheduler::{MaxArraySize, ParseLimits};
use serde::Deserialize;

use super::check::{at_least, one_of};
use super::environments::RUNTIMES;

/// Default of `[jobs] max_script_bytes` (Slurm's `max_script_size`).
pub const DEFAULT_MAX_SCRIPT_BYTES: usize = 4 * 1024 * 1024;

/// How batch jobs run.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct JobsConfig {
    /// Per-job step directories (script, state file). Default: `/var/spool/atrium`
    /// when running as root, else `<data_dir>/spool`.
    pub spool_dir: Option<PathBuf>,
    /// Container runtime for jobs: `auto` (bubblewrap when installed, else none),
    /// `bubblewrap` or `none`.
    pub runtime: String,
    /// Seconds between SIGTERM and SIGKILL when a job is cancelled or times out.
    pub kill_grace_seconds: u64,
    /// The cluster name in `SLURM_CLUSTER_NAME`.
    pub cluster_name: String,
    /// Largest batch script (or `--wrap` command) accepted, in bytes (Slurm's
    /// `max_script_size`). Over HTTP, `http.body_limit_bytes` applies first.
    pub max_script_bytes: usize,
    /// Slurm's `MaxArraySize`: array task indices must be below it (1 to 4000001).
    pub max_array_size: u32,
    /// Slurm's `MaxJobCount`: most jobs pending and running at once (array tasks one
    /// each); a submission over it is refused with 429 until some have ended.
    pub max_job_count: u64,
    /// Most jobs pending and running per user where no quota sets
    /// `max_submitted_jobs`; 0: no default.
    pub max_submitted_jobs_per_user: u32,
    /// Seconds between two samples of a running job's CPU time, memory and GPUs (as
    /// Slurm's `JobAcctGatherFrequency`); 0: totals at the end only.
    pub usage_interval_seconds: u64,
    /// Seconds a starting job waits for the folder of its output file (`-o logs/%j.out`
    /// with no `logs/` yet): a program that makes it just after `sbatch` returns has
    /// that long; after it the job fails, as Slurm's does at once. 0: no wait.
    pub output_folder_wait_seconds: u64,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            spool_dir: None,
            runtime: "auto".into(),
            kill_grace_seconds: 10,
            cluster_name: "atrium".into(),
            max_script_bytes: DEFAULT_MAX_SCRIPT_BYTES,
            max_array_size: MaxArraySize::DEFAULT.get(),
            max_job_count: DEFAULT_MAX_JOB_COUNT,
            max_submitted_jobs_per_user: DEFAULT_MAX_SUBMITTED_JOBS_PER_USER,
            usage_interval_seconds: DEFAULT_USAGE_INTERVAL_SECONDS,
            output_folder_wait_seconds: DEFAULT_OUTPUT_FOLDER_WAIT_SECONDS,
        }
    }
}

/// Slurm's default `JobAcctGatherFrequency`.
pub const DEFAULT_USAGE_INTERVAL_SECONDS: u64 = 30;
/// Default of `[jobs] output_folder_wait_seconds`.
pub const DEFAULT_OUTPUT_FOLDER_WAIT_SECONDS: u64 = 10;
/// Slurm's default `MaxJobCount`.
pub const DEFAULT_MAX_JOB_COUNT: u64 = 10_000;
/// Half of it: one user cannot fill the queue alone.
pub const DEFAULT_MAX_SUBMITTED_JOBS_PER_USER: u32 = 5_000;

impl JobsConfig {
    /// The bounds submissions are checked against. An out-of-range
    /// `max_array_size` (which `check` reports) counts as the default.
    pub fn submission_limits(&self) -> SubmissionLimits {
        SubmissionLimits {
            max_script_bytes: self.max_script_bytes,
            parse: ParseLimits {
                max_array_size: MaxArraySize::new(self.max_array_size).unwrap_or_default(),
            },
        }
    }

    /// The admission limits the internal scheduler applies.
    pub fn admission(&self, cluster: scheduler::ClusterConfig) -> scheduler::ClusterConfig {
        scheduler::ClusterConfig {
            max_job_count: Some(self.max_job_count),
            default_max_submitted_jobs: (self.max_submitted_jobs_per_user > 0)
                .then_some(self.max_submitted_jobs_per_user),
            ..cluster
        }
    }

    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        one_of(problem, "jobs.runtime", &self.runtime, RUNTIMES);
        if self.max_job_count == 0 {
            problem(
                "jobs.max_job_count",
                "must be at least 1 (Slurm's MaxJobCount)".into(),
            );
        }
        if let Err(e) = MaxArraySize::new(self.max_array_size) {
            problem("jobs.max_array_size", e);
        }
        at_least(
            problem,
            "jobs.max_script_bytes",
            self.max_script_bytes,
            1024,
        );
        if self.output_folder_wait_seconds > 300 {
            problem(
                "jobs.output_folder_wait_seconds",
                "must be at most 300: the job holds its resources while it waits".into(),
            );
        }
        if self.usage_interval_seconds > 86_400 {
            problem(
                "jobs.usage_interval_seconds",
                "must be at most 86400 (one sample a day); 0 samples at the end only".into(),
            );
        }
    }
}

/// What a site bounds submissions by: `[jobs] max_script_bytes` and
/// `max_array_size`. The rest are fixed (`scheduler::parse::limits`, and the
/// environment's bounds in `sched::submission`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubmissionLimits {
    pub max_script_bytes: usize,
    pub parse: ParseLimits,
}

impl Default for SubmissionLimits {
    fn default() -> Self {
        SubmissionLimits {
            max_script_bytes: DEFAULT_MAX_SCRIPT_BYTES,
            parse: ParseLimits::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{load_str, problem_keys};

    #[test]
    fn submission_bounds_are_configured_and_checked() {
        let loaded = load_str("", &[]);
        let limits = loaded.config.jobs.submission_limits();
        assert_eq!(limits.max_script_bytes, 4 * 1024 * 1024);
        assert_eq!(limits.parse.max_array_size.get(), 1001);
        let loaded = load_str(
            "[jobs]\nmax_array_size = 5000\nmax_script_bytes = 65536\n",
            &[],
        );
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        let limits = loaded.config.jobs.submission_limits();
        assert_eq!(limits.max_script_bytes, 65536);
        assert_eq!(limits.parse.max_array_size.get(), 5000);
        for (bad, key) in [
            ("max_array_size = 0", "jobs.max_array_size"),
            ("max_array_size = 4000002", "jobs.max_array_size"),
            ("max_script_bytes = 100", "jobs.max_script_bytes"),
        ] {
            let loaded = load_str(&format!("[jobs]\n{bad}\n"), &[]);
            assert_eq!(problem_keys(&loaded), [key], "{bad}");
        }
    }
}
