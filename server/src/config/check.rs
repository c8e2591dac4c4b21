//! What `atrium config check` reports, and the checks several sections share.
//!
//! Owns: [`Problem`] (a key and what is wrong with it) and the small checks that
//! sections apply to their own keys (a lower bound, one of a list, an absolute path, a
//! readable file, an IP address), each with the one wording the check prints.
//! Must not touch: any one section's rules; the file system beyond reading metadata.

use std::fmt;
use std::path::Path;

/// One thing wrong with a configuration, with the key it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// `key` must be at least `min` (a count, a size, a duration).
pub(super) fn at_least<T: PartialOrd + fmt::Display>(
    problem: &mut impl FnMut(&str, String),
    key: &str,
    value: T,
    min: T,
) {
    if value < min {
        problem(key, format!("must be at least {min}"));
    }
}

/// `key` must be one of `allowed`.
pub(super) fn one_of(
    problem: &mut impl FnMut(&str, String),
    key: &str,
    value: &str,
    allowed: &[&str],
) {
    if !allowed.contains(&value) {
        problem(
            key,
            format!("{value:?} is not one of {}", allowed.join(", ")),
        );
    }
}

/// `key` must name an absolute path.
pub(super) fn absolute_path(problem: &mut impl FnMut(&str, String), key: &str, path: &Path) {
    if !path.is_absolute() {
        problem(key, "must be an absolute path".into());
    }
}

/// The file `key` names must be there to read.
pub(super) fn readable_file(problem: &mut impl FnMut(&str, String), key: &str, path: &Path) {
    if let Err(e) = std::fs::metadata(path) {
        problem(key, format!("cannot read {}: {e}", path.display()));
    }
}

/// `key` must be an IP address (`10.0.0.1`, `::1`).
pub(super) fn ip_address(problem: &mut impl FnMut(&str, String), key: &str, text: &str) {
    if text.parse::<std::net::IpAddr>().is_err() {
        problem(key, format!("{text:?} is not an IP address"));
    }
}
