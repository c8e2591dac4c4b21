//! `[storage]`: shared storage bound into every session and job, and the mounts
//! environments add.
//!
//! Owns: [`StorageConfig`] and [`MountConfig`], their checks (absolute paths).
//! Must not touch: the file systems themselves (binding them is `launch`'s).

use std::path::PathBuf;

use serde::Deserialize;

use super::check::absolute_path;

/// A path of the host shown inside sessions and jobs.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct MountConfig {
    pub source: PathBuf,
    /// Where it appears inside (default: the same path).
    pub target: Option<PathBuf>,
    pub read_only: bool,
}

/// Shared storage bound into every session and job, and what the Files app accepts.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct StorageConfig {
    /// Read-only data sets, e.g. `{ source = "/srv/datasets", target = "/datasets" }`.
    pub datasets: Vec<MountConfig>,
    /// Read-write project spaces, e.g. `{ source = "/srv/projects", target = "/projects" }`.
    pub projects: Vec<MountConfig>,
    /// The largest file the Files app accepts in an upload, in MiB.
    pub max_upload_mb: u64,
    /// The largest piece of an upload one request may carry, in MiB.
    pub max_upload_chunk_mb: u64,
    /// How long one operation of the Files app as the user (a listing, a recursive
    /// delete, opening a file) may take before its helper is killed, in seconds.
    pub files_timeout_seconds: u64,
    /// Operations, and transfers (downloads, upload pieces), that one user may have
    /// in progress at once; beyond, 503 with `Retry-After`.
    pub files_per_user: usize,
    /// The same for all users together.
    pub files_in_all: usize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            datasets: Vec::new(),
            projects: Vec::new(),
            max_upload_mb: 100 * 1024,
            max_upload_chunk_mb: 256,
            files_timeout_seconds: 300,
            files_per_user: 8,
            files_in_all: 128,
        }
    }
}

impl StorageConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        super::check::at_least(problem, "storage.max_upload_mb", self.max_upload_mb, 1);
        super::check::at_least(
            problem,
            "storage.max_upload_chunk_mb",
            self.max_upload_chunk_mb,
            1,
        );
        super::check::at_least(
            problem,
            "storage.files_timeout_seconds",
            self.files_timeout_seconds,
            1,
        );
        super::check::at_least(
            problem,
            "storage.files_per_user",
            self.files_per_user as u64,
            1,
        );
        super::check::at_least(problem, "storage.files_in_all", self.files_in_all as u64, 1);
        for (j, m) in self.datasets.iter().enumerate() {
            m.check(&format!("storage.datasets[{j}]"), problem);
        }
        for (j, m) in self.projects.iter().enumerate() {
            m.check(&format!("storage.projects[{j}]"), problem);
        }
    }
}

impl MountConfig {
    pub(super) fn check(&self, key: &str, problem: &mut impl FnMut(&str, String)) {
        absolute_path(problem, &format!("{key}.source"), &self.source);
        if let Some(target) = &self.target {
            absolute_path(problem, &format!("{key}.target"), target);
        }
    }
}
