//! What the configuration's unit tests share: loading a configuration from text, and
//! asserting which keys its problems name.
//!
//! Owns: test helpers only (compiled for tests).
//! Must not touch: anything outside the tests.

use super::{Config, Loaded};

/// Load `text` as a configuration file, with `env` as the environment.
pub(super) fn load_str(text: &str, env: &[(&str, &str)]) -> Loaded {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("atrium.toml");
    std::fs::write(&path, text).expect("write");
    Config::load(
        Some(&path),
        env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
    )
    .expect("load")
}

/// The keys `loaded`'s problems name, in the order `check` lists them.
pub(super) fn problem_keys(loaded: &Loaded) -> Vec<&str> {
    loaded.problems.iter().map(|p| p.key.as_str()).collect()
}

/// Every key of `expected` is named by one of `loaded`'s problems.
pub(super) fn assert_reported(loaded: &Loaded, expected: &[&str]) {
    let keys = problem_keys(loaded);
    for key in expected {
        assert!(keys.contains(key), "{key} missing from {keys:?}");
    }
}
