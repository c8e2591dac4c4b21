//! `[auth.ldap]`: logging in against an LDAP directory.
//!
//! Owns: [`LdapConfig`] and its parts (search-then-bind, attributes, groups), their
//! defaults and checks.
//! Must not touch: the directory itself (binding and searching are `auth::ldap`'s).

use std::path::PathBuf;

use serde::Deserialize;

use super::check::{at_least, readable_file};
use super::Secret;
use crate::domain::dn;

/// How users log in against an LDAP directory.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LdapConfig {
    /// `ldap://host:389` or `ldaps://host:636`.
    pub url: String,
    /// Upgrade `ldap://` with StartTLS.
    pub starttls: bool,
    /// PEM CA bundle to verify the directory (default: the system's).
    pub ca_file: Option<PathBuf>,
    /// Verify the directory's certificate (never turn off in production).
    pub verify_tls: bool,
    /// Connect and per-operation timeout.
    pub timeout_seconds: u64,
    /// Connections kept for reuse.
    pub pool_size: usize,
    /// Direct bind: DN templates tried in order; `{username}` is replaced (DN-escaped).
    pub bind_dn_templates: Vec<String>,
    /// Search-then-bind with a service account (used when set).
    pub search: Option<LdapSearchConfig>,
    /// Lowercase usernames before anything else.
    pub lowercase_usernames: bool,
    /// Usernames must match this regular expression (after trimming).
    pub username_pattern: String,
    /// Only members of these groups may log in (empty: any directory user). A DN names
    /// that group; a plain name names the group of that name directly under
    /// `groups.base` (`<name_attribute>=<name>,<groups.base>`), or, with no
    /// `groups.base`, any directory group of that name.
    pub allowed_groups: Vec<String>,
    pub attributes: LdapAttributes,
    pub groups: LdapGroupsConfig,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LdapSearchConfig {
    pub bind_dn: String,
    pub bind_password: Secret,
    pub base: String,
    /// `{username}` is replaced (filter-escaped).
    pub filter: String,
    /// `sub`, `one` or `base`.
    pub scope: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LdapAttributes {
    pub uid_number: String,
    pub gid_number: String,
    pub home: String,
    /// Tried in order.
    pub display_name: Vec<String>,
    pub email: String,
    pub login_shell: String,
    pub member_of: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LdapGroupsConfig {
    /// `member_of` (the user's memberOf attribute) or `search`.
    pub source: String,
    /// Where to search for groups (source = "search").
    pub base: String,
    /// `posixGroup` (memberUid), `groupOfNames` (member), `groupOfUniqueNames`
    /// (uniqueMember) or `any`.
    pub kind: String,
    /// The attribute that names a group.
    pub name_attribute: String,
}

impl Default for LdapConfig {
    fn default() -> Self {
        Self {
            url: String::new(),
            starttls: false,
            ca_file: None,
            verify_tls: true,
            timeout_seconds: 5,
            pool_size: 4,
            bind_dn_templates: Vec::new(),
            search: None,
            lowercase_usernames: true,
            username_pattern: "^[a-z_][a-z0-9_.-]{0,31}$".into(),
            allowed_groups: Vec::new(),
            attributes: LdapAttributes::default(),
            groups: LdapGroupsConfig::default(),
        }
    }
}

impl Default for LdapSearchConfig {
    fn default() -> Self {
        Self {
            bind_dn: String::new(),
            bind_password: Secret::default(),
            base: String::new(),
            filter: "(uid={username})".into(),
            scope: "sub".into(),
        }
    }
}

impl Default for LdapAttributes {
    fn default() -> Self {
        Self {
            uid_number: "uidNumber".into(),
            gid_number: "gidNumber".into(),
            home: "homeDirectory".into(),
            display_name: vec!["displayName".into(), "cn".into()],
            email: "mail".into(),
            login_shell: "loginShell".into(),
            member_of: "memberOf".into(),
        }
    }
}

impl Default for LdapGroupsConfig {
    fn default() -> Self {
        Self {
            source: "member_of".into(),
            base: String::new(),
            kind: "any".into(),
            name_attribute: "cn".into(),
        }
    }
}

impl LdapConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        for group in &self.allowed_groups {
            let dn_ok = !dn::looks_like_dn(group) || dn::normalise(group).is_some();
            if group.trim().is_empty() || !dn_ok {
                problem(
                    "auth.ldap.allowed_groups",
                    format!("{group:?} is neither a group name nor a well-formed DN"),
                );
            }
        }
        if !self.groups.base.is_empty() && dn::normalise(&self.groups.base).is_none() {
            problem(
                "auth.ldap.groups.base",
                format!("{:?} is not a well-formed DN", self.groups.base),
            );
        }
        if !(self.url.starts_with("ldap://") || self.url.starts_with("ldaps://")) {
            problem(
                "auth.ldap.url",
                format!("{:?} must start with ldap:// or ldaps://", self.url),
            );
        }
        if self.starttls && self.url.starts_with("ldaps://") {
            problem(
                "auth.ldap.starttls",
                "StartTLS is for ldap:// URLs, not ldaps://".into(),
            );
        }
        if let Some(ca) = &self.ca_file {
            readable_file(problem, "auth.ldap.ca_file", ca);
        }
        at_least(
            problem,
            "auth.ldap.timeout_seconds",
            self.timeout_seconds,
            1,
        );
        at_least(problem, "auth.ldap.pool_size", self.pool_size, 1);
        match &self.search {
            None if self.bind_dn_templates.is_empty() => problem(
                "auth.ldap",
                "set bind_dn_templates (direct bind) or [auth.ldap.search] (search then bind)"
                    .into(),
            ),
            None => {}
            Some(search) => {
                if search.bind_dn.is_empty() || search.bind_password.is_empty() {
                    problem(
                        "auth.ldap.search.bind_dn",
                        "the service account needs bind_dn and bind_password".into(),
                    );
                }
                if search.base.is_empty() {
                    problem("auth.ldap.search.base", "must not be empty".into());
                }
                if !search.filter.contains("{username}") {
                    problem("auth.ldap.search.filter", "must contain {username}".into());
                }
                if !matches!(search.scope.as_str(), "sub" | "one" | "base") {
                    problem("auth.ldap.search.scope", "must be sub, one or base".into());
                }
            }
        }
        for (i, t) in self.bind_dn_templates.iter().enumerate() {
            if !t.contains("{username}") {
                problem(
                    &format!("auth.ldap.bind_dn_templates[{i}]"),
                    "must contain {username}".into(),
                );
            }
        }
        if regex_lite::Regex::new(&self.username_pattern).is_err() {
            problem(
                "auth.ldap.username_pattern",
                "is not a valid regular expression".into(),
            );
        }
        match self.groups.source.as_str() {
            "member_of" => {}
            "search" if self.groups.base.is_empty() => problem(
                "auth.ldap.groups.base",
                "required when groups.source = \"search\"".into(),
            ),
            "search" => {}
            other => problem(
                "auth.ldap.groups.source",
                format!("{other:?} must be \"member_of\" or \"search\""),
            ),
        }
        if !matches!(
            self.groups.kind.as_str(),
            "posixGroup" | "groupOfNames" | "groupOfUniqueNames" | "any"
        ) {
            problem(
                "auth.ldap.groups.kind",
                "must be posixGroup, groupOfNames, groupOfUniqueNames or any".into(),
            );
        }
    }
}
