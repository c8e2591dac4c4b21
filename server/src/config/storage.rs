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

/// Shared storage bound into every session and job.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct StorageConfig {
    /// Read-only data sets, e.g. `{ source = "/srv/datasets", target = "/datasets" }`.
    pub datasets: Vec<MountConfig>,
    /// Read-write project spaces, e.g. `{ source = "/srv/projects", target = "/projects" }`.
    pub projects: Vec<MountConfig>,
}

impl StorageConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
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
