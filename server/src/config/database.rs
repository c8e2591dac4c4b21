//! `[database]`: where the portal keeps its records.
//!
//! Owns: [`DatabaseConfig`], its defaults and checks, and [`DatabaseUrl`], which
//! never prints a password.
//! Must not touch: the database itself (connecting and migrating are the store's).

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;

use super::check::at_least;

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct DatabaseConfig {
    /// `sqlite://PATH` or `postgres://USER:PASSWORD@HOST/DB`. Default: SQLite in `data_dir`.
    pub url: Option<DatabaseUrl>,
    pub max_connections: u32,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: None,
            max_connections: 8,
        }
    }
}

impl DatabaseConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        if let Some(url) = &self.url {
            if !url.is_postgres() && !url.is_sqlite() {
                problem(
                    "database.url",
                    format!("{url} must start with sqlite:// or postgres://"),
                );
            }
        }
        at_least(problem, "database.max_connections", self.max_connections, 1);
    }
}

/// A database URL whose password `Debug` and `Display` hide.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct DatabaseUrl(String);

impl DatabaseUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self(url.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_postgres(&self) -> bool {
        self.0.starts_with("postgres://") || self.0.starts_with("postgresql://")
    }
    pub fn is_sqlite(&self) -> bool {
        self.0.starts_with("sqlite:")
    }
    /// The database file of a SQLite URL (`sqlite://./var/atrium.db?mode=rwc`).
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        let rest = self.0.strip_prefix("sqlite:")?;
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        let path = rest.split('?').next().unwrap_or_default();
        (!path.is_empty() && path != ":memory:").then(|| PathBuf::from(path))
    }
    /// The URL with any password replaced by `***`.
    pub fn redacted(&self) -> String {
        let url = &self.0;
        let Some(scheme_end) = url.find("://") else {
            return url.clone();
        };
        let rest = &url[scheme_end + 3..];
        let authority_end = rest.find('/').unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => format!(
                "{}{}:***{}",
                &url[..scheme_end + 3],
                &authority[..colon],
                &rest[at..]
            ),
            _ => url.clone(),
        }
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_print() {
        let url = DatabaseUrl::new("postgres://atrium:hunter2@db.example.org:5432/atrium");
        assert_eq!(
            format!("{url:?}"),
            "postgres://atrium:***@db.example.org:5432/atrium"
        );
        let plain = DatabaseUrl::new("postgres://atrium@localhost/atrium?host=/run/x");
        assert_eq!(plain.redacted(), plain.expose());
    }
}
