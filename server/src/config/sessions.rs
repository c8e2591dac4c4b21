//! `[sessions]`: interactive sessions (JupyterLab, terminal, TensorBoard).
//!
//! Owns: [`SessionsConfig`], its defaults and checks. What sessions run in is
//! `environments`'; the storage bound into them is `storage`'s.
//! Must not touch: sessions themselves (starting, proxying and culling them is
//! `sessions`'s, outside configuration).

use serde::Deserialize;

use super::check::at_least;
use super::HumanDuration;

/// Interactive sessions (JupyterLab, terminal, TensorBoard).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct SessionsConfig {
    /// Sessions one user may have at once (pending or running).
    pub max_per_user: u32,
    /// Time limit of a session unless the user asks for another.
    pub default_hours: u32,
    /// The longest time limit a user may ask for (the partition's limit applies too).
    pub max_hours: u32,
    /// A session with no activity for this long is stopped (`0s`: never).
    pub idle_timeout: HumanDuration,
    /// How often activity is checked.
    pub cull_interval: HumanDuration,
    /// How long before its time limit a session's page is warned.
    pub time_limit_warning: HumanDuration,
    /// How long a started session's server may take to answer before it fails.
    pub ready_timeout: HumanDuration,
    /// A session that waited in the queue at least this long is told to its user once
    /// it is ready, by `[notify]`'s mail and webhook (`0s`: never).
    pub ready_mail_after: HumanDuration,
    /// Administrators may open other users' sessions through the proxy.
    pub admin_access: bool,
    /// The partition sessions run in (default: the default partition).
    pub partition: Option<String>,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            max_per_user: 4,
            default_hours: 8,
            max_hours: 24,
            idle_timeout: HumanDuration::from_secs(3600),
            cull_interval: HumanDuration::from_secs(60),
            time_limit_warning: HumanDuration::from_secs(300),
            ready_timeout: HumanDuration::from_secs(300),
            ready_mail_after: HumanDuration::from_secs(60),
            admin_access: false,
            partition: None,
        }
    }
}

impl SessionsConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        at_least(problem, "sessions.max_per_user", self.max_per_user, 1);
        at_least(problem, "sessions.default_hours", self.default_hours, 1);
        if self.max_hours < self.default_hours {
            problem(
                "sessions.max_hours",
                "must not be below sessions.default_hours".into(),
            );
        }
        let second = HumanDuration::from_secs(1);
        at_least(
            problem,
            "sessions.cull_interval",
            self.cull_interval,
            second,
        );
        at_least(
            problem,
            "sessions.ready_timeout",
            self.ready_timeout,
            second,
        );
    }
}
