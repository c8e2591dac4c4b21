//! `[log]`: what the portal logs and in which format.
//!
//! Owns: [`LogConfig`], its defaults and checks.
//! Must not touch: the subscriber itself (installing it is `telemetry`'s).

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LogConfig {
    /// A `tracing` filter, e.g. `info` or `atrium=debug,actix_web=info`.
    pub filter: String,
    /// `text` or `json`.
    pub format: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            filter: "info".into(),
            format: "text".into(),
        }
    }
}

impl LogConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        if tracing_subscriber::EnvFilter::try_new(&self.filter).is_err() {
            problem(
                "log.filter",
                format!("{:?} is not a valid filter", self.filter),
            );
        }
        if self.format != "text" && self.format != "json" {
            problem(
                "log.format",
                format!("{:?} must be \"text\" or \"json\"", self.format),
            );
        }
    }
}
