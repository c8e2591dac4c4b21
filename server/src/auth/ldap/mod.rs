//! LDAP login: find the user (direct bind with DN templates, or search then bind with
//! a service account), read their POSIX identity and groups, enforce `allowed_groups`.
//!
//! Owns: talking to the directory, escaping every user value that enters it (RFC 4515
//! filters, RFC 4514 DNs), and the connection pool. Must not touch: the store (the
//! caller records the identity), HTTP.
//!
//! A slow or dead directory never blocks anything but logins, and those fail within
//! the configured timeout with [`DirectoryError::Unavailable`].

mod pool;

use std::collections::BTreeSet;
use std::time::Duration;

use ldap3::{dn_escape, ldap_escape, Ldap, LdapError, Scope, SearchEntry};

use crate::config::LdapConfig;
use crate::domain::dn;
use crate::metrics::LdapMetrics;

pub use pool::Pool;

/// LDAP result code for a wrong password.
const INVALID_CREDENTIALS: u32 = 49;

/// What the directory says about a user who logged in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryUser {
    pub username: String,
    pub dn: String,
    pub display_name: String,
    pub email: String,
    pub uid_number: Option<i64>,
    pub gid_number: Option<i64>,
    pub home: Option<String>,
    pub login_shell: Option<String>,
    /// The user's groups, sorted by name.
    pub groups: Vec<DirectoryGroup>,
}

/// A directory group a user belongs to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DirectoryGroup {
    /// Its name (the first RDN's value, or the configured name attribute).
    pub name: String,
    /// Its DN, normalised ([`dn::normalise`]).
    pub dn: String,
}

/// `allowed_groups`, resolved: DNs (normalised), and plain names that match by name
/// because no `groups.base` says where the site's groups are.
#[derive(Debug, Default)]
struct AllowedGroups {
    dns: Vec<String>,
    names: Vec<String>,
}

impl AllowedGroups {
    fn new(config: &LdapConfig) -> Self {
        let mut allowed = AllowedGroups::default();
        let base = dn::normalise(&config.groups.base);
        for entry in &config.allowed_groups {
            let entry = entry.trim();
            if dn::looks_like_dn(entry) {
                allowed.dns.extend(dn::normalise(entry));
                continue;
            }
            match &base {
                Some(base) => allowed.dns.extend(dn::normalise(&format!(
                    "{}={},{base}",
                    config.groups.name_attribute,
                    dn::escape(entry)
                ))),
                None => {
                    tracing::warn!(
                        group = entry,
                        "auth.ldap.allowed_groups: a plain name with no auth.ldap.groups.base \
                         matches a directory group of that name anywhere; give its DN"
                    );
                    allowed.names.push(entry.to_string());
                }
            }
        }
        allowed
    }

    fn admit(&self, groups: &[DirectoryGroup]) -> bool {
        groups
            .iter()
            .any(|g| self.dns.contains(&g.dn) || self.names.contains(&g.name))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// Unknown user, wrong password, ambiguous search, malformed name: one answer.
    #[error("invalid username or password")]
    InvalidCredentials,
    /// The password was right but the user is in none of the allowed groups.
    #[error("not a member of an allowed group")]
    NotAllowed,
    #[error("directory unavailable: {0}")]
    Unavailable(String),
}

impl From<LdapError> for DirectoryError {
    fn from(e: LdapError) -> Self {
        DirectoryError::Unavailable(e.to_string())
    }
}

/// The directory, as configured.
#[derive(Debug)]
pub struct Directory {
    config: LdapConfig,
    allowed: AllowedGroups,
    username_pattern: regex_lite::Regex,
    pool: Pool,
    timeout: Duration,
    metrics: LdapMetrics,
}

impl Directory {
    pub fn new(config: LdapConfig, metrics: LdapMetrics) -> anyhow::Result<Self> {
        let username_pattern = regex_lite::Regex::new(&config.username_pattern)?;
        let timeout = Duration::from_secs(config.timeout_seconds);
        let pool = Pool::new(&config)?;
        Ok(Self {
            allowed: AllowedGroups::new(&config),
            config,
            username_pattern,
            pool,
            timeout,
            metrics,
        })
    }

    /// Simple bind, timed and counted. `Ok(Err(()))`: the directory refused the
    /// credentials.
    async fn bind(
        &self,
        ldap: &mut Ldap,
        dn: &str,
        password: &str,
    ) -> Result<Result<(), ()>, DirectoryError> {
        let started = std::time::Instant::now();
        let result = bind(ldap, self.timeout, dn, password).await;
        let accepted = match &result {
            Ok(r) => Some(r.is_ok()),
            Err(_) => None,
        };
        self.metrics.bind(started.elapsed().as_secs_f64(), accepted);
        result
    }

    /// The username as the directory knows it, or `None` when it cannot be one.
    pub fn normalise(&self, raw: &str) -> Option<String> {
        let name = raw.trim();
        let name = if self.config.lowercase_usernames {
            name.to_lowercase()
        } else {
            name.to_string()
        };
        (!name.is_empty() && !name.contains('\0') && self.username_pattern.is_match(&name))
            .then_some(name)
    }

    /// Reach the directory on a new connection and, with search-then-bind, bind as
    /// the service account, as a login does (`atrium doctor`). `Ok(true)`: the
    /// service account bound; `Ok(false)`: connected, and there is no service account
    /// (direct bind). `InvalidCredentials`: the directory refused the service account.
    pub async fn check_service_account(&self) -> Result<bool, DirectoryError> {
        let attempt = async {
            let mut conn = self.pool.get(self.timeout, true).await?;
            let Some(search) = &self.config.search else {
                return Ok(false);
            };
            self.bind(conn.ldap(), &search.bind_dn, search.bind_password.expose())
                .await?
                .map_err(|()| DirectoryError::InvalidCredentials)?;
            Ok(true)
        };
        tokio::time::timeout(self.timeout, attempt)
            .await
            .map_err(|_| DirectoryError::Unavailable("timed out".into()))?
    }

    /// Authenticate `raw_username` with `password` against the directory.
    pub async fn login(
        &self,
        raw_username: &str,
        password: &str,
    ) -> Result<DirectoryUser, DirectoryError> {
        let username = self
            .normalise(raw_username)
            .ok_or(DirectoryError::InvalidCredentials)?;
        // An empty password would be an anonymous ("unauthenticated") bind, which
        // succeeds: refuse it before anything reaches the directory.
        if password.is_empty() {
            return Err(DirectoryError::InvalidCredentials);
        }
        let attempt = async {
            let mut fresh = false;
            loop {
                let mut conn = self.pool.get(self.timeout, fresh).await?;
                let result = self.login_on(conn.ldap(), &username, password).await;
                if !matches!(result, Err(DirectoryError::Unavailable(_))) {
                    conn.release();
                    return result;
                }
                // A kept connection may have been dropped by the directory (idle
                // timeout, restart): try once more on a new one before giving up.
                if !conn.reused || fresh {
                    return result;
                }
                fresh = true;
            }
        };
        let user = tokio::time::timeout(self.timeout, attempt)
            .await
            .map_err(|_| DirectoryError::Unavailable("timed out".into()))??;
        if !self.config.allowed_groups.is_empty() && !self.allowed.admit(&user.groups) {
            return Err(DirectoryError::NotAllowed);
        }
        Ok(user)
    }

    async fn login_on(
        &self,
        ldap: &mut Ldap,
        username: &str,
        password: &str,
    ) -> Result<DirectoryUser, DirectoryError> {
        let attrs = self.wanted_attributes();
        let (dn, entry, groups) = match &self.config.search {
            Some(search) => {
                self.bind(ldap, &search.bind_dn, search.bind_password.expose())
                    .await?
                    .map_err(|_| {
                        DirectoryError::Unavailable("the service account cannot bind".into())
                    })?;
                let filter = search.filter.replace("{username}", &ldap_escape(username));
                let scope = match search.scope.as_str() {
                    "base" => Scope::Base,
                    "one" => Scope::OneLevel,
                    _ => Scope::Subtree,
                };
                let (entries, _) = ldap
                    .with_timeout(self.timeout)
                    .search(&search.base, scope, &filter, &attrs)
                    .await?
                    .success()?;
                // Zero or several matches: nobody to log in as.
                let [entry] =
                    <[_; 1]>::try_from(entries).map_err(|_| DirectoryError::InvalidCredentials)?;
                let entry = SearchEntry::construct(entry);
                let groups = self.groups(ldap, username, &entry).await?;
                self.bind(ldap, &entry.dn, password)
                    .await?
                    .map_err(|_| DirectoryError::InvalidCredentials)?;
                (entry.dn.clone(), entry, groups)
            }
            None => {
                let mut found = None;
                for template in &self.config.bind_dn_templates {
                    let dn = template.replace("{username}", &dn_escape(username));
                    if self.bind(ldap, &dn, password).await?.is_ok() {
                        found = Some(dn);
                        break;
                    }
                }
                let dn = found.ok_or(DirectoryError::InvalidCredentials)?;
                let (entries, _) = ldap
                    .with_timeout(self.timeout)
                    .search(&dn, Scope::Base, "(objectClass=*)", &attrs)
                    .await?
                    .success()?;
                let entry = entries
                    .into_iter()
                    .next()
                    .map(SearchEntry::construct)
                    .ok_or(DirectoryError::InvalidCredentials)?;
                let groups = self.groups(ldap, username, &entry).await?;
                (dn, entry, groups)
            }
        };
        let a = &self.config.attributes;
        let first = |name: &str| entry.attrs.get(name).and_then(|v| v.first()).cloned();
        let number = |name: &str| first(name).and_then(|v| v.trim().parse::<i64>().ok());
        Ok(DirectoryUser {
            username: username.to_string(),
            dn,
            display_name: a
                .display_name
                .iter()
                .find_map(|n| first(n))
                .unwrap_or_default(),
            email: first(&a.email).unwrap_or_default(),
            uid_number: number(&a.uid_number),
            gid_number: number(&a.gid_number),
            home: first(&a.home),
            login_shell: first(&a.login_shell),
            groups,
        })
    }

    fn wanted_attributes(&self) -> Vec<String> {
        let a = &self.config.attributes;
        let mut attrs = vec![
            a.uid_number.clone(),
            a.gid_number.clone(),
            a.home.clone(),
            a.email.clone(),
            a.login_shell.clone(),
            a.member_of.clone(),
        ];
        attrs.extend(a.display_name.iter().cloned());
        attrs
    }

    /// The user's groups, from `memberOf` or from a group search.
    async fn groups(
        &self,
        ldap: &mut Ldap,
        username: &str,
        entry: &SearchEntry,
    ) -> Result<Vec<DirectoryGroup>, DirectoryError> {
        let g = &self.config.groups;
        let mut names = BTreeSet::new();
        if g.source == "member_of" {
            for group_dn in entry
                .attrs
                .get(&self.config.attributes.member_of)
                .into_iter()
                .flatten()
            {
                if let (Some(name), Some(dn)) =
                    (dn::first_rdn_value(group_dn), dn::normalise(group_dn))
                {
                    names.insert(DirectoryGroup { name, dn });
                }
            }
            return Ok(names.into_iter().collect());
        }
        let uid = ldap_escape(username);
        let dn = ldap_escape(&entry.dn);
        let posix = format!("(&(objectClass=posixGroup)(memberUid={uid}))");
        let names_ = format!("(&(objectClass=groupOfNames)(member={dn}))");
        let unique = format!("(&(objectClass=groupOfUniqueNames)(uniqueMember={dn}))");
        let filter = match g.kind.as_str() {
            "posixGroup" => posix,
            "groupOfNames" => names_,
            "groupOfUniqueNames" => unique,
            _ => format!("(|{posix}{names_}{unique})"),
        };
        let (entries, _) = ldap
            .with_timeout(self.timeout)
            .search(
                &g.base,
                Scope::Subtree,
                &filter,
                vec![g.name_attribute.as_str()],
            )
            .await?
            .success()?;
        for entry in entries {
            let entry = SearchEntry::construct(entry);
            let name = entry.attrs.get(&g.name_attribute).and_then(|v| v.first());
            if let (Some(name), Some(dn)) = (name, dn::normalise(&entry.dn)) {
                names.insert(DirectoryGroup {
                    name: name.clone(),
                    dn,
                });
            }
        }
        Ok(names.into_iter().collect())
    }
}

/// Simple bind. `Ok(Err(()))`: the directory refused the credentials.
async fn bind(
    ldap: &mut Ldap,
    timeout: Duration,
    dn: &str,
    password: &str,
) -> Result<Result<(), ()>, DirectoryError> {
    if password.is_empty() {
        return Ok(Err(()));
    }
    let result = ldap.with_timeout(timeout).simple_bind(dn, password).await?;
    match result.rc {
        0 => Ok(Ok(())),
        // Wrong password, or no such entry (34: malformed DN, 32: no such object).
        INVALID_CREDENTIALS | 32 | 34 => Ok(Err(())),
        rc => Err(DirectoryError::Unavailable(format!(
            "bind failed with result code {rc}: {}",
            result.text
        ))),
    }
}
