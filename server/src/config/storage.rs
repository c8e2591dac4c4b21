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
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            datasets: Vec::new(),
            projects: Vec::new(),
            max_upload_mb: 100 * 1024,
            max_upload_chunk_mb: 256,
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
