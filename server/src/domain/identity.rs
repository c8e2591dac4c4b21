//! A user's POSIX identity as the accounts know it (uid, gid, groups, home).

use std::path::PathBuf;

/// Who a user's jobs run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PosixIdentity {
    pub uid: u32,
    /// Primary group.
    pub gid: u32,
    pub home: PathBuf,
    /// The user's groups (sorted by name) with their gid where known: supplementary
    /// groups are those with a gid.
    pub groups: Vec<(String, Option<u32>)>,
}

impl PosixIdentity {
    /// The gids of the user's groups that have one (the supplementary groups).
    pub fn supplementary_gids(&self) -> Vec<u32> {
        self.groups.iter().filter_map(|(_, gid)| *gid).collect()
    }
}
