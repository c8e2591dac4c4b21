//! `[auth]` and `[auth.rate_limit]`: how users log in and how long a login lasts.
//!
//! Owns: [`AuthConfig`] and [`RateLimitConfig`], their defaults and checks (the
//! directory's own keys, `[auth.ldap]`, are `ldap`'s).
//! Must not touch: tokens, passwords or the directory (those are `auth`'s, outside
//! configuration).

use serde::Deserialize;

use super::check::at_least;
use super::{LdapConfig, Secret};

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct AuthConfig {
    /// Key that signs browser session tokens (at least 32 characters). Default: a
    /// random key generated on first start and kept (mode 0600) in `data_dir/jwt.key`.
    pub jwt_secret: Option<Secret>,
    /// Lifetime of a browser session token; renewed while the user is active.
    pub session_minutes: u64,
    /// A browser login never lasts longer than this, however active.
    pub session_max_hours: u64,
    /// Local accounts (argon2id passwords in the database).
    pub local_accounts: bool,
    /// Members of any of these groups are administrators: a plain name is a local
    /// group (given in the portal, never a directory group of that name); a DN
    /// (`cn=gpu-admins,ou=groups,dc=example,dc=org`) is that directory group.
    pub admin_groups: Vec<String>,
    /// Longest lifetime of an API token, in days.
    pub token_max_days: u32,
    pub rate_limit: RateLimitConfig,
    /// LDAP login; absent: local accounts only.
    pub ldap: Option<LdapConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct RateLimitConfig {
    /// Failed logins allowed per username within the window.
    pub per_user: u32,
    /// Failed logins allowed per client address within the window.
    pub per_address: u32,
    pub window_seconds: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            jwt_secret: None,
            session_minutes: 30,
            session_max_hours: 12,
            local_accounts: true,
            admin_groups: vec!["admin".into()],
            token_max_days: 365,
            rate_limit: RateLimitConfig::default(),
            ldap: None,
        }
    }
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        Self {
            per_user: 5,
            per_address: 20,
            window_seconds: 300,
        }
    }
}

impl AuthConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        if let Some(secret) = &self.jwt_secret {
            if secret.expose().len() < 32 {
                problem(
                    "auth.jwt_secret",
                    "must be at least 32 characters (or leave it out to generate one)".into(),
                );
            }
        }
        at_least(problem, "auth.session_minutes", self.session_minutes, 2);
        if self.session_max_hours == 0 || self.session_max_hours * 60 < self.session_minutes {
            problem(
                "auth.session_max_hours",
                "must be at least one hour and no shorter than auth.session_minutes".into(),
            );
        }
        if !self.local_accounts && self.ldap.is_none() {
            problem(
                "auth.local_accounts",
                "no login method is enabled: enable local accounts or configure [auth.ldap]".into(),
            );
        }
        if let Some(ldap) = &self.ldap {
            ldap.check(problem);
        }
        if let Err(e) = crate::domain::groups::GroupList::parse(&self.admin_groups) {
            problem("auth.admin_groups", e.to_string());
        }
        at_least(problem, "auth.token_max_days", self.token_max_days, 1);
        self.rate_limit.check(problem);
    }
}

impl RateLimitConfig {
    fn check(&self, problem: &mut impl FnMut(&str, String)) {
        at_least(problem, "auth.rate_limit.per_user", self.per_user, 1);
        at_least(problem, "auth.rate_limit.per_address", self.per_address, 1);
        at_least(
            problem,
            "auth.rate_limit.window_seconds",
            self.window_seconds,
            1,
        );
    }
}
