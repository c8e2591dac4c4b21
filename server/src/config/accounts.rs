//! `[accounts]`: the POSIX identities of local accounts.
//!
//! Owns: [`AccountsConfig`], its defaults and checks, and the range of uids it may
//! name.
//! Must not touch: the accounts themselves (creating them and their homes is
//! `auth`'s and `admin`'s).

use std::path::PathBuf;

use serde::Deserialize;

use super::check::absolute_path;

/// Lowest uid `accounts.uid_min` may name: below are the system's own accounts.
pub const LOWEST_ALLOCATED_UID: u32 = 1000;
/// Highest uid `accounts.uid_max` may name (uids above do not survive every tool).
pub const HIGHEST_ALLOCATED_UID: u32 = i32::MAX as u32;

/// POSIX identities of local accounts.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct AccountsConfig {
    /// Lowest uid given to a local account created without `--uid`.
    pub uid_min: u32,
    /// Highest such uid.
    pub uid_max: u32,
    /// Home directories are `<home_root>/<username>` unless given.
    pub home_root: PathBuf,
    /// Create a user's missing home at their login (owned by them, mode 0700; only
    /// when the portal runs as root).
    pub create_homes: bool,
    /// Keep `~/templates` filled from the starters shipped with atrium (files the
    /// user changed are left alone).
    pub templates: bool,
}

impl Default for AccountsConfig {
    fn default() -> Self {
        Self {
            uid_min: 20000,
            uid_max: 29999,
            home_root: PathBuf::from("/home"),
            create_homes: true,
            templates: true,
        }
    }
}

impl AccountsConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        if self.uid_min < LOWEST_ALLOCATED_UID {
            problem(
                "accounts.uid_min",
                format!("must be at least {LOWEST_ALLOCATED_UID} (lower uids are the system's)"),
            );
        }
        if self.uid_max > HIGHEST_ALLOCATED_UID {
            problem(
                "accounts.uid_max",
                format!("must be at most {HIGHEST_ALLOCATED_UID}"),
            );
        }
        if self.uid_max < self.uid_min {
            problem(
                "accounts.uid_max",
                "must not be below accounts.uid_min".into(),
            );
        }
        absolute_path(problem, "accounts.home_root", &self.home_root);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_reported, load_str};
    use super::super::Problem;
    use super::*;

    #[test]
    fn accounts_default_to_one_machine() {
        let config = load_str("", &[]).config;
        assert_eq!(
            (config.accounts.uid_min, config.accounts.uid_max),
            (20000, 29999)
        );
        assert_eq!(config.accounts.home_root, PathBuf::from("/home"));
    }

    #[test]
    fn accounts_example_loads_without_problems() {
        let loaded = load_str(
            "[accounts]\nuid_min = 30000\nuid_max = 30999\nhome_root = \"/shared/home\"\n",
            &[],
        );
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.config.accounts.uid_min, 30000);
        assert_eq!(
            loaded.config.accounts.home_root,
            PathBuf::from("/shared/home")
        );
    }

    #[test]
    fn accounts_problems_name_their_keys() {
        let loaded = load_str(
            "[accounts]\nuid_min = 0\nuid_max = 4294967294\nhome_root = \"home\"\n",
            &[],
        );
        assert_reported(
            &loaded,
            &["accounts.uid_min", "accounts.uid_max", "accounts.home_root"],
        );
        let reversed = load_str("[accounts]\nuid_min = 5000\nuid_max = 4999\n", &[]);
        assert_eq!(
            reversed.problems,
            [Problem {
                key: "accounts.uid_max".into(),
                message: "must not be below accounts.uid_min".into()
            }]
        );
    }
}
