//! Configuration: one TOML file plus `ATRIUM_…` environment overrides.
//!
//! Owns: the typed configuration, its defaults (which run on one machine), loading,
//! and `check`, which lists every problem with the key it concerns.
//! Must not touch: the database, the network, or any state beyond reading the file.

use std::collections::BTreeSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod quotas;
mod sessions;
mod slurm;
pub use quotas::QuotasConfig;
pub use sessions::{
    is_name as is_session_name, EnvironmentConfig, HumanDuration, MountConfig, SessionsConfig,
    StorageConfig,
};
pub use slurm::{SchedulerConfig, SlurmConfig};

/// Prefix of environment overrides. `ATRIUM_LISTEN` sets `listen`;
/// `ATRIUM_DATABASE__URL` sets `database.url` (a double underscore separates sections).
pub const ENV_PREFIX: &str = "ATRIUM_";

/// A value that must never be printed: `Debug` and `Display` show `***`.
#[derive(Clone, Deserialize, Default, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
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
    pub fn sqlite_file(&self) -> Option<std::path::PathBuf> {
        let rest = self.0.strip_prefix("sqlite:")?;
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        let path = rest.split('?').next().unwrap_or_default();
        (!path.is_empty() && path != ":memory:").then(|| std::path::PathBuf::from(path))
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

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct Config {
    /// Address and port the portal listens on.
    pub listen: String,
    /// Where the portal keeps its database, keys, run directory and (by default) storage.
    pub data_dir: PathBuf,
    /// The address users reach the portal at, e.g. `https://portal.example.org`.
    /// An `https` origin makes cookies `Secure`.
    pub public_url: Option<String>,
    pub database: DatabaseConfig,
    pub auth: AuthConfig,
    pub http: HttpConfig,
    pub tls: TlsConfig,
    pub log: LogConfig,
    pub jobs: JobsConfig,
    pub cluster: ClusterSection,
    pub accounts: AccountsConfig,
    pub sessions: SessionsConfig,
    /// What sessions (and jobs that name one) run in; none: this machine's software.
    pub environments: Vec<EnvironmentConfig>,
    pub storage: StorageConfig,
    pub quotas: QuotasConfig,
    pub scheduler: SchedulerConfig,
    pub slurm: SlurmConfig,
}

/// How batch jobs run.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct JobsConfig {
    /// Per-job step directories (script, state file). Default: `/var/spool/atrium`
    /// when running as root, else `<data_dir>/spool`.
    pub spool_dir: Option<PathBuf>,
    /// Container runtime for jobs: `auto` (bubblewrap when installed, else none),
    /// `bubblewrap` or `none`.
    pub runtime: String,
    /// Seconds between SIGTERM and SIGKILL when a job is cancelled or times out.
    pub kill_grace_seconds: u64,
    /// The cluster name in `SLURM_CLUSTER_NAME`.
    pub cluster_name: String,
    /// Largest batch script (or `--wrap` command) accepted, in bytes (Slurm's
    /// `max_script_size`). Over HTTP, `http.body_limit_bytes` applies first.
    pub max_script_bytes: usize,
    /// Slurm's `MaxArraySize`: array task indices must be below it (1 to 4000001).
    pub max_array_size: u32,
}

impl Default for JobsConfig {
    fn default() -> Self {
        Self {
            spool_dir: None,
            runtime: "auto".into(),
            kill_grace_seconds: 10,
            cluster_name: "atrium".into(),
            max_script_bytes: crate::sched::submission::DEFAULT_MAX_SCRIPT_BYTES,
            max_array_size: scheduler::MaxArraySize::DEFAULT.get(),
        }
    }
}

impl JobsConfig {
    /// The bounds submissions are checked against. An out-of-range
    /// `max_array_size` (which `check` reports) counts as the default.
    pub fn submission_limits(&self) -> crate::sched::submission::SubmissionLimits {
        crate::sched::submission::SubmissionLimits {
            max_script_bytes: self.max_script_bytes,
            parse: scheduler::ParseLimits {
                max_array_size: scheduler::MaxArraySize::new(self.max_array_size)
                    .unwrap_or_default(),
            },
        }
    }
}

/// Serve HTTPS directly (otherwise plain HTTP, e.g. behind a TLS-terminating proxy).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
}

impl TlsConfig {
    pub fn enabled(&self) -> bool {
        self.cert_file.is_some() || self.key_file.is_some()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct DatabaseConfig {
    /// `sqlite://PATH` or `postgres://USER:PASSWORD@HOST/DB`. Default: SQLite in `data_dir`.
    pub url: Option<DatabaseUrl>,
    pub max_connections: u32,
}

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
    fn check(&self, problem: &mut impl FnMut(&str, String)) {
        for group in &self.allowed_groups {
            let dn_ok = !crate::domain::dn::looks_like_dn(group)
                || crate::domain::dn::normalise(group).is_some();
            if group.trim().is_empty() || !dn_ok {
                problem(
                    "auth.ldap.allowed_groups",
                    format!("{group:?} is neither a group name nor a well-formed DN"),
                );
            }
        }
        if !self.groups.base.is_empty() && crate::domain::dn::normalise(&self.groups.base).is_none()
        {
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
            if let Err(e) = std::fs::metadata(ca) {
                problem(
                    "auth.ldap.ca_file",
                    format!("cannot read {}: {e}", ca.display()),
                );
            }
        }
        if self.timeout_seconds == 0 {
            problem("auth.ldap.timeout_seconds", "must be at least 1".into());
        }
        if self.pool_size == 0 {
            problem("auth.ldap.pool_size", "must be at least 1".into());
        }
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

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct RateLimitConfig {
    /// Failed logins allowed per username within the window.
    pub per_user: u32,
    /// Failed logins allowed per client address within the window.
    pub per_address: u32,
    pub window_seconds: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct HttpConfig {
    /// Largest accepted request body, in bytes.
    pub body_limit_bytes: usize,
    /// Worker threads (default: one per core).
    pub workers: Option<usize>,
    /// Peers whose `X-Forwarded-For` is trusted for the client address.
    pub trusted_proxies: Vec<String>,
    /// Serve `/metrics` without authentication (default: admins only).
    pub public_metrics: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct LogConfig {
    /// A `tracing` filter, e.g. `info` or `atrium=debug,actix_web=info`.
    pub filter: String,
    /// `text` or `json`.
    pub format: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8000".into(),
            data_dir: PathBuf::from("./var"),
            public_url: None,
            database: DatabaseConfig::default(),
            auth: AuthConfig::default(),
            http: HttpConfig::default(),
            tls: TlsConfig::default(),
            log: LogConfig::default(),
            jobs: JobsConfig::default(),
            cluster: ClusterSection::default(),
            accounts: AccountsConfig::default(),
            sessions: SessionsConfig::default(),
            environments: Vec::new(),
            storage: StorageConfig::default(),
            quotas: QuotasConfig::default(),
            scheduler: SchedulerConfig::default(),
            slurm: SlurmConfig::default(),
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: None,
            max_connections: 8,
        }
    }
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

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit_bytes: 1024 * 1024,
            workers: None,
            trusted_proxies: Vec::new(),
            public_metrics: false,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            filter: "info".into(),
            format: "text".into(),
        }
    }
}

/// This machine as a compute node: its resources, GPUs and partitions. What is left
/// out is detected (hostname, CPUs, memory) or discovered (GPUs, with `nvidia-smi`).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct ClusterSection {
    /// Node name (default: the machine's short hostname).
    pub node_name: Option<String>,
    /// CPUs jobs may use (default: the CPUs available to the portal).
    pub cpus: Option<u32>,
    /// Memory jobs may use, in MB (default: the machine's memory less
    /// `reserved_memory_mb`).
    pub memory_mb: Option<u64>,
    /// Memory left to the operating system and the portal when `memory_mb` is
    /// detected, in MB.
    pub reserved_memory_mb: u64,
    /// Node features that `--constraint` can ask for.
    pub features: Vec<String>,
    /// Ask `nvidia-smi` for the machine's GPUs (when it is installed).
    pub discover_gpus: bool,
    /// GPUs declared by hand: for machines without `nvidia-smi`, for tests, and to
    /// give a discovered GPU (same index) a MIG or shard layout.
    pub gpus: Vec<DeclaredGpu>,
    /// Partitions of this node (default: one partition `main`).
    pub partitions: Vec<PartitionSection>,
}

impl Default for ClusterSection {
    fn default() -> Self {
        Self {
            node_name: None,
            cpus: None,
            memory_mb: None,
            reserved_memory_mb: 1024,
            features: Vec::new(),
            discover_gpus: true,
            gpus: Vec::new(),
            partitions: Vec::new(),
        }
    }
}

/// A GPU as declared in `[[cluster.gpus]]`.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct DeclaredGpu {
    /// Index as `nvidia-smi` shows it.
    pub index: u32,
    /// Default: `GPU-declared-<node>-<index>`.
    pub uuid: Option<String>,
    /// Model, e.g. `A100-80GB`; `gpu:a100` requests match it.
    pub model: String,
    pub memory_mb: u64,
    /// MIG instances (exclusive with `shards`).
    pub mig: Vec<DeclaredMig>,
    /// Time-sliced shares (exclusive with `mig`).
    pub shards: Option<u32>,
}

/// A MIG instance of a declared GPU.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct DeclaredMig {
    /// A profile of the GPU's model, such as `3g.40gb`.
    pub profile: String,
    /// Default: the UUID `nvidia-smi` lists for an instance of this profile, or a
    /// placeholder when there is none.
    pub uuid: Option<String>,
}

/// A partition as declared in `[[cluster.partitions]]` (Slurm semantics).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct PartitionSection {
    pub name: String,
    /// The partition of jobs that name none; exactly one partition is the default.
    pub default: bool,
    /// Time limit of jobs that ask for none, in `sbatch --time` syntax (default:
    /// unlimited).
    pub default_time: Option<String>,
    /// Longest time limit a job may ask for, in `sbatch --time` syntax (default:
    /// unlimited).
    pub max_time: Option<String>,
    /// CPUs given per GPU when a job does not say.
    pub cpus_per_gpu: u32,
    /// Memory given per GPU when a job does not say, in MB.
    pub mem_per_gpu_mb: u64,
    /// Unix groups allowed to submit (empty: everyone).
    pub allowed_groups: Vec<String>,
    /// Higher tiers are scheduled first.
    pub priority_tier: u32,
}

impl Default for PartitionSection {
    fn default() -> Self {
        Self {
            name: String::new(),
            default: false,
            default_time: None,
            max_time: None,
            cpus_per_gpu: 8,
            mem_per_gpu_mb: 48 * 1024,
            allowed_groups: Vec::new(),
            priority_tier: 0,
        }
    }
}

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

/// Lowest uid `accounts.uid_min` may name: below are the system's own accounts.
pub const LOWEST_ALLOCATED_UID: u32 = 1000;
/// Highest uid `accounts.uid_max` may name (uids above do not survive every tool).
pub const HIGHEST_ALLOCATED_UID: u32 = i32::MAX as u32;

impl ClusterSection {
    fn check(&self, problem: &mut impl FnMut(&str, String)) {
        if let Some(name) = &self.node_name {
            if !is_node_name(name) {
                problem(
                    "cluster.node_name",
                    format!(
                        "{name:?} must be 1-64 characters of letters, digits, '-', '_' and '.'"
                    ),
                );
            }
        }
        if self.cpus == Some(0) {
            problem("cluster.cpus", "must be at least 1".into());
        }
        if self.memory_mb == Some(0) {
            problem("cluster.memory_mb", "must be at least 1".into());
        }
        for (i, feature) in self.features.iter().enumerate() {
            if !is_node_name(feature) {
                problem(
                    &format!("cluster.features[{i}]"),
                    format!(
                        "{feature:?} must be 1-64 characters of letters, digits, '-', '_' and '.'"
                    ),
                );
            }
        }
        let mut indices = BTreeSet::new();
        for (i, gpu) in self.gpus.iter().enumerate() {
            gpu.check(&format!("cluster.gpus[{i}]"), problem);
            if !indices.insert(gpu.index) {
                problem(
                    &format!("cluster.gpus[{i}].index"),
                    format!("GPU {} is declared more than once", gpu.index),
                );
            }
        }
        let mut names = BTreeSet::new();
        for (i, partition) in self.partitions.iter().enumerate() {
            partition.check(&format!("cluster.partitions[{i}]"), problem);
            if !partition.name.is_empty() && !names.insert(partition.name.as_str()) {
                problem(
                    &format!("cluster.partitions[{i}].name"),
                    format!("partition {:?} is declared more than once", partition.name),
                );
            }
        }
        let defaults = self.partitions.iter().filter(|p| p.default).count();
        if !self.partitions.is_empty() && defaults != 1 {
            problem(
                "cluster.partitions",
                format!("exactly one partition must have default = true ({defaults} have)"),
            );
        }
    }
}

/// Node names and features: what `sinfo` and `--constraint` can carry.
fn is_node_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl DeclaredGpu {
    fn check(&self, key: &str, problem: &mut impl FnMut(&str, String)) {
        if self.model.trim().is_empty() {
            problem(&format!("{key}.model"), "must not be empty".into());
        }
        if self.memory_mb == 0 {
            problem(&format!("{key}.memory_mb"), "must be at least 1".into());
        }
        if self.uuid.as_deref().is_some_and(|u| u.trim().is_empty()) {
            problem(&format!("{key}.uuid"), "must not be empty".into());
        }
        if let Some(shards) = self.shards {
            if !self.mig.is_empty() {
                problem(
                    &format!("{key}.shards"),
                    "a GPU is split into MIG instances or shards, not both".into(),
                );
            }
            if !(1..=1000).contains(&shards) {
                problem(&format!("{key}.shards"), "must be 1 to 1000".into());
            }
        }
        if self.mig.is_empty() || self.model.trim().is_empty() {
            return;
        }
        let Some(profiles) = scheduler::model::mig_profiles(&self.model) else {
            problem(
                &format!("{key}.mig"),
                format!("{} does not support MIG", self.model),
            );
            return;
        };
        let mut compute_slices = 0;
        for (j, instance) in self.mig.iter().enumerate() {
            match profiles.iter().find(|(p, _)| *p == instance.profile) {
                Some((_, slices)) => compute_slices += slices,
                None => {
                    let valid: Vec<&str> = profiles.iter().map(|(p, _)| *p).collect();
                    problem(
                        &format!("{key}.mig[{j}].profile"),
                        format!(
                            "{:?} is not a MIG profile of {} (valid: {})",
                            instance.profile,
                            self.model,
                            valid.join(", ")
                        ),
                    );
                }
            }
            if instance
                .uuid
                .as_deref()
                .is_some_and(|u| u.trim().is_empty())
            {
                problem(&format!("{key}.mig[{j}].uuid"), "must not be empty".into());
            }
        }
        if compute_slices > 7 {
            problem(
                &format!("{key}.mig"),
                format!("the instances use {compute_slices} of the GPU's 7 compute slices"),
            );
        }
    }
}

/// A partition's time limits in seconds (`None`: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionTimes {
    pub default_secs: Option<u64>,
    pub max_secs: Option<u64>,
}

impl PartitionSection {
    /// `default_time` and `max_time` in seconds; `Err((field, message))` names the
    /// field that does not parse.
    pub fn time_limits(&self) -> Result<PartitionTimes, (&'static str, String)> {
        let parse = |key: &'static str, value: &Option<String>| match value {
            None => Ok(None),
            Some(text) => match text.parse::<scheduler::TimeLimit>() {
                Ok(scheduler::TimeLimit::Seconds(secs)) => Ok(Some(secs)),
                Ok(scheduler::TimeLimit::Unlimited) => Ok(None),
                Err(message) => Err((key, message)),
            },
        };
        Ok(PartitionTimes {
            default_secs: parse("default_time", &self.default_time)?,
            max_secs: parse("max_time", &self.max_time)?,
        })
    }

    fn check(&self, key: &str, problem: &mut impl FnMut(&str, String)) {
        if !is_node_name(&self.name) {
            problem(
                &format!("{key}.name"),
                format!(
                    "{:?} must be 1-64 characters of letters, digits, '-', '_' and '.'",
                    self.name
                ),
            );
        }
        match self.time_limits() {
            Err((field, message)) => problem(&format!("{key}.{field}"), message),
            Ok(PartitionTimes {
                default_secs: Some(default),
                max_secs: Some(max),
            }) if default > max => problem(
                &format!("{key}.default_time"),
                "must not be longer than max_time".into(),
            ),
            Ok(_) => {}
        }
        if self.cpus_per_gpu == 0 {
            problem(&format!("{key}.cpus_per_gpu"), "must be at least 1".into());
        }
        if self.mem_per_gpu_mb == 0 {
            problem(
                &format!("{key}.mem_per_gpu_mb"),
                "must be at least 1".into(),
            );
        }
        if self.allowed_groups.iter().any(|g| g.trim().is_empty()) {
            problem(
                &format!("{key}.allowed_groups"),
                "group names must not be empty".into(),
            );
        }
    }
}

impl AccountsConfig {
    fn check(&self, problem: &mut impl FnMut(&str, String)) {
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
        if !self.home_root.is_absolute() {
            problem("accounts.home_root", "must be an absolute path".into());
        }
    }
}

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

/// A configuration as loaded, with what was wrong in it.
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    /// Where it came from (`None`: defaults and environment only).
    pub source: Option<PathBuf>,
    pub problems: Vec<Problem>,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    /// The database URL, defaulting to SQLite inside `data_dir`.
    pub fn database_url(&self) -> DatabaseUrl {
        match &self.database.url {
            Some(url) => url.clone(),
            None => DatabaseUrl::new(format!(
                "sqlite://{}?mode=rwc",
                self.data_dir.join("atrium.db").display()
            )),
        }
    }

    /// Where job steps keep their directories.
    pub fn spool_dir(&self, as_root: bool) -> PathBuf {
        match &self.jobs.spool_dir {
            Some(dir) => dir.clone(),
            None if as_root => PathBuf::from("/var/spool/atrium"),
            None => self.data_dir.join("spool"),
        }
    }

    /// The environments users choose from: the configured ones, or this machine's.
    pub fn environments(&self) -> Vec<EnvironmentConfig> {
        if self.environments.is_empty() {
            vec![EnvironmentConfig::host()]
        } else {
            self.environments.clone()
        }
    }

    /// Whether cookies must carry `Secure`: served over TLS, or behind an https origin.
    pub fn secure_cookies(&self) -> bool {
        self.tls.enabled()
            || self
                .public_url
                .as_deref()
                .is_some_and(|url| url.starts_with("https://"))
    }

    /// Load `path` (or `atrium.toml` in the working directory when it exists), then
    /// apply environment overrides from `env`. Unknown keys and invalid values become
    /// [`Problem`]s; only an unreadable file or one that does not parse is an error.
    pub fn load(
        path: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Loaded, LoadError> {
        let source = match path {
            Some(path) => Some(path.to_path_buf()),
            None => Some(PathBuf::from("atrium.toml")).filter(|p| p.exists()),
        };
        let mut table = match &source {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
                    path: path.clone(),
                    source,
                })?;
                text.parse::<toml::Table>()
                    .map_err(|e| LoadError::Invalid(format!("{}: {e}", path.display())))?
            }
            None => toml::Table::new(),
        };
        let mut problems = Vec::new();
        apply_env(&mut table, env, &mut problems);

        // Re-read the merged table as text so that type errors name their key.
        let merged = toml::to_string(&table).map_err(|e| LoadError::Invalid(e.to_string()))?;
        let deserializer =
            toml::Deserializer::parse(&merged).map_err(|e| LoadError::Invalid(e.to_string()))?;
        let mut unknown = BTreeSet::new();
        let config: Config = serde_ignored::deserialize(deserializer, |path| {
            unknown.insert(path.to_string());
        })
        .map_err(|e| LoadError::Invalid(e.to_string()))?;
        problems.extend(unknown.into_iter().map(|key| Problem {
            key,
            message: "unknown key".into(),
        }));
        problems.extend(config.check());
        Ok(Loaded {
            config,
            source,
            problems,
        })
    }

    /// Every semantic problem of this configuration.
    pub fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut problem = |key: &str, message: String| {
            problems.push(Problem {
                key: key.into(),
                message,
            })
        };
        if !sessions::RUNTIMES.contains(&self.jobs.runtime.as_str()) {
            problem(
                "jobs.runtime",
                format!(
                    "{:?} is not one of {}",
                    self.jobs.runtime,
                    sessions::RUNTIMES.join(", ")
                ),
            );
        }
        if let Err(e) = scheduler::MaxArraySize::new(self.jobs.max_array_size) {
            problem("jobs.max_array_size", e);
        }
        if self.jobs.max_script_bytes < 1024 {
            problem("jobs.max_script_bytes", "must be at least 1024".into());
        }
        if self.listen.parse::<SocketAddr>().is_err() {
            problem(
                "listen",
                format!(
                    "{:?} is not an address:port such as 127.0.0.1:8000",
                    self.listen
                ),
            );
        }
        if self.data_dir.as_os_str().is_empty() {
            problem("data_dir", "must not be empty".into());
        }
        if let Some(url) = &self.public_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                problem(
                    "public_url",
                    format!("{url:?} must start with http:// or https://"),
                );
            }
        }
        if let Some(url) = &self.database.url {
            if !url.is_postgres() && !url.is_sqlite() {
                problem(
                    "database.url",
                    format!("{url} must start with sqlite:// or postgres://"),
                );
            }
        }
        if self.database.max_connections == 0 {
            problem("database.max_connections", "must be at least 1".into());
        }
        if let Some(secret) = &self.auth.jwt_secret {
            if secret.expose().len() < 32 {
                problem(
                    "auth.jwt_secret",
                    "must be at least 32 characters (or leave it out to generate one)".into(),
                );
            }
        }
        if self.auth.session_minutes < 2 {
            problem("auth.session_minutes", "must be at least 2".into());
        }
        if self.auth.session_max_hours == 0
            || self.auth.session_max_hours * 60 < self.auth.session_minutes
        {
            problem(
                "auth.session_max_hours",
                "must be at least one hour and no shorter than auth.session_minutes".into(),
            );
        }
        if !self.auth.local_accounts && self.auth.ldap.is_none() {
            problem(
                "auth.local_accounts",
                "no login method is enabled: enable local accounts or configure [auth.ldap]".into(),
            );
        }
        if let Some(ldap) = &self.auth.ldap {
            ldap.check(&mut problem);
        }
        if let Err(e) = crate::domain::groups::GroupList::parse(&self.auth.admin_groups) {
            problem("auth.admin_groups", e.to_string());
        }
        if self.auth.token_max_days == 0 {
            problem("auth.token_max_days", "must be at least 1".into());
        }
        let rl = &self.auth.rate_limit;
        if rl.per_user == 0 {
            problem("auth.rate_limit.per_user", "must be at least 1".into());
        }
        if rl.per_address == 0 {
            problem("auth.rate_limit.per_address", "must be at least 1".into());
        }
        if rl.window_seconds == 0 {
            problem(
                "auth.rate_limit.window_seconds",
                "must be at least 1".into(),
            );
        }
        if self.http.body_limit_bytes < 1024 {
            problem("http.body_limit_bytes", "must be at least 1024".into());
        }
        if self.http.workers == Some(0) {
            problem("http.workers", "must be at least 1".into());
        }
        for (i, proxy) in self.http.trusted_proxies.iter().enumerate() {
            if proxy.parse::<std::net::IpAddr>().is_err() {
                problem(
                    &format!("http.trusted_proxies[{i}]"),
                    format!("{proxy:?} is not an IP address"),
                );
            }
        }
        match (&self.tls.cert_file, &self.tls.key_file) {
            (None, None) => {}
            (Some(_), None) => problem("tls.key_file", "required when tls.cert_file is set".into()),
            (None, Some(_)) => problem("tls.cert_file", "required when tls.key_file is set".into()),
            (Some(cert), Some(key)) => {
                for (k, path) in [("tls.cert_file", cert), ("tls.key_file", key)] {
                    if let Err(e) = std::fs::metadata(path) {
                        problem(k, format!("cannot read {}: {e}", path.display()));
                    }
                }
            }
        }
        self.cluster.check(&mut problem);
        sessions::check(
            &self.sessions,
            &self.environments,
            &self.storage,
            &mut problem,
        );
        self.accounts.check(&mut problem);
        self.quotas.check(&mut problem);
        self.scheduler.check(&mut problem);
        self.slurm.check(&mut problem);
        if tracing_subscriber::EnvFilter::try_new(&self.log.filter).is_err() {
            problem(
                "log.filter",
                format!("{:?} is not a valid filter", self.log.filter),
            );
        }
        if self.log.format != "text" && self.log.format != "json" {
            problem(
                "log.format",
                format!("{:?} must be \"text\" or \"json\"", self.log.format),
            );
        }
        problems
    }
}

/// Write `ATRIUM_A__B=value` into `table` at `a.b`. Values parse as TOML when they can
/// (numbers, booleans, arrays), otherwise they are strings.
fn apply_env(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
    problems: &mut Vec<Problem>,
) {
    for (name, raw) in env {
        let Some(path) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        // Variables the binary reads itself rather than configuration keys.
        if matches!(path, "CONFIG" | "TOKEN" | "URL") {
            continue;
        }
        let keys: Vec<String> = path.split("__").map(str::to_ascii_lowercase).collect();
        if keys.iter().any(String::is_empty) {
            problems.push(Problem {
                key: name.clone(),
                message: "malformed environment override".into(),
            });
            continue;
        }
        let value = parse_env_value(&raw);
        if let Err(message) = insert_at(table, &keys, value) {
            problems.push(Problem {
                key: name.clone(),
                message,
            });
        }
    }
}

/// Insert `value` at the dotted path `keys`, creating sections on the way.
fn insert_at(table: &mut toml::Table, keys: &[String], value: toml::Value) -> Result<(), String> {
    match keys {
        [] => Err("empty key".into()),
        [last] => {
            table.insert(last.clone(), value);
            Ok(())
        }
        [first, rest @ ..] => {
            let entry = table
                .entry(first.clone())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            match entry {
                toml::Value::Table(inner) => insert_at(inner, rest, value),
                _ => Err(format!("{first} is not a section")),
            }
        }
    }
}

fn parse_env_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_str(text: &str, env: &[(&str, &str)]) -> Loaded {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("atrium.toml");
        std::fs::write(&path, text).expect("write");
        Config::load(
            Some(&path),
            env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
        )
        .expect("load")
    }

    #[test]
    fn defaults_run_on_one_machine() {
        let loaded = load_str("", &[]);
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.config.listen, "127.0.0.1:8000");
        assert!(loaded.config.database_url().is_sqlite());
        assert!(!loaded.config.secure_cookies());
    }

    #[test]
    fn environment_overrides_file() {
        let loaded = load_str(
            "listen = \"127.0.0.1:9000\"\n[auth]\nsession_minutes = 10\n",
            &[
                ("ATRIUM_LISTEN", "127.0.0.1:9100"),
                ("ATRIUM_AUTH__RATE_LIMIT__PER_USER", "3"),
                ("ATRIUM_PUBLIC_URL", "https://portal.example.org"),
                ("HOME", "/root"),
            ],
        );
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.config.listen, "127.0.0.1:9100");
        assert_eq!(loaded.config.auth.session_minutes, 10);
        assert_eq!(loaded.config.auth.rate_limit.per_user, 3);
        assert!(loaded.config.secure_cookies());
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let loaded = load_str(
            "listen = \"nowhere\"\nbogus = 1\n[auth]\njwt_secret = \"short\"\n[auth.rate_limit]\nper_user = 0\n[log]\nformat = \"xml\"\n",
            &[],
        );
        let keys: Vec<&str> = loaded.problems.iter().map(|p| p.key.as_str()).collect();
        for key in [
            "bogus",
            "listen",
            "auth.jwt_secret",
            "auth.rate_limit.per_user",
            "log.format",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
    }

    #[test]
    fn submission_bounds_are_configured_and_checked() {
        let loaded = load_str("", &[]);
        let limits = loaded.config.jobs.submission_limits();
        assert_eq!(limits.max_script_bytes, 4 * 1024 * 1024);
        assert_eq!(limits.parse.max_array_size.get(), 1001);
        let loaded = load_str(
            "[jobs]\nmax_array_size = 5000\nmax_script_bytes = 65536\n",
            &[],
        );
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        let limits = loaded.config.jobs.submission_limits();
        assert_eq!(limits.max_script_bytes, 65536);
        assert_eq!(limits.parse.max_array_size.get(), 5000);
        for (bad, key) in [
            ("max_array_size = 0", "jobs.max_array_size"),
            ("max_array_size = 4000002", "jobs.max_array_size"),
            ("max_script_bytes = 100", "jobs.max_script_bytes"),
        ] {
            let loaded = load_str(&format!("[jobs]\n{bad}\n"), &[]);
            let keys: Vec<&str> = loaded.problems.iter().map(|p| p.key.as_str()).collect();
            assert_eq!(keys, [key], "{bad}");
        }
    }

    #[test]
    fn wrong_types_name_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("atrium.toml");
        std::fs::write(&path, "[auth]\nsession_minutes = \"soon\"\n").expect("write");
        let err = Config::load(Some(&path), Vec::new()).expect_err("must fail");
        assert!(err.to_string().contains("session_minutes"), "{err}");
    }

    const CLUSTER_EXAMPLE: &str = r#"
[cluster]
node_name = "head"
cpus = 64
memory_mb = 515000
reserved_memory_mb = 2048
features = ["nvme"]
discover_gpus = false
[[cluster.gpus]]
index = 0
uuid = "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"
model = "A100-80GB"
memory_mb = 81920
mig = [{ profile = "3g.40gb", uuid = "MIG-c6d4f1ef-42e4-5de3-91c7-45d71585b3bf" }, { profile = "4g.40gb" }]
[[cluster.gpus]]
index = 1
model = "A100-80GB"
memory_mb = 81920
shards = 4
[[cluster.partitions]]
name = "gpu"
default = true
default_time = "1:00:00"
max_time = "7-00:00:00"
cpus_per_gpu = 8
mem_per_gpu_mb = 49152
allowed_groups = ["ml"]
priority_tier = 1
[[cluster.partitions]]
name = "debug"
max_time = "30"
[accounts]
uid_min = 30000
uid_max = 30999
home_root = "/shared/home"
"#;

    #[test]
    fn cluster_and_accounts_default_to_one_machine() {
        let config = load_str("", &[]).config;
        assert_eq!(config.cluster.node_name, None);
        assert_eq!(config.cluster.cpus, None);
        assert_eq!(config.cluster.memory_mb, None);
        assert_eq!(config.cluster.reserved_memory_mb, 1024);
        assert!(config.cluster.discover_gpus);
        assert!(config.cluster.gpus.is_empty() && config.cluster.partitions.is_empty());
        assert_eq!(
            (config.accounts.uid_min, config.accounts.uid_max),
            (20000, 29999)
        );
        assert_eq!(config.accounts.home_root, PathBuf::from("/home"));
    }

    #[test]
    fn cluster_example_loads_without_problems() {
        let loaded = load_str(CLUSTER_EXAMPLE, &[("ATRIUM_CLUSTER__CPUS", "32")]);
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        let cluster = &loaded.config.cluster;
        assert_eq!(cluster.node_name.as_deref(), Some("head"));
        assert_eq!(cluster.cpus, Some(32), "environment overrides the file");
        assert_eq!(cluster.gpus.len(), 2);
        assert_eq!(cluster.gpus[0].mig[1].profile, "4g.40gb");
        assert_eq!(cluster.gpus[0].mig[1].uuid, None);
        assert_eq!(cluster.gpus[1].shards, Some(4));
        let gpu = &cluster.partitions[0];
        assert_eq!(
            gpu.time_limits(),
            Ok(PartitionTimes {
                default_secs: Some(3600),
                max_secs: Some(7 * 86_400)
            })
        );
        assert_eq!(gpu.allowed_groups, ["ml"]);
        let debug = &cluster.partitions[1];
        assert_eq!(
            debug.time_limits(),
            Ok(PartitionTimes {
                default_secs: None,
                max_secs: Some(30 * 60)
            })
        );
        assert_eq!((debug.cpus_per_gpu, debug.mem_per_gpu_mb), (8, 49152));
        assert_eq!(loaded.config.accounts.uid_min, 30000);
        assert_eq!(
            loaded.config.accounts.home_root,
            PathBuf::from("/shared/home")
        );
    }

    #[test]
    fn cluster_and_accounts_problems_name_their_keys() {
        let loaded = load_str(
            r#"
[cluster]
node_name = "head node"
cpus = 0
features = ["a,b"]
[[cluster.gpus]]
index = 0
model = "A100-40GB"
memory_mb = 40960
mig = [{ profile = "3g.40gb" }, { profile = "7g.40gb" }]
shards = 2
colour = "green"
[[cluster.gpus]]
index = 0
model = "V100-SXM2-32GB"
mig = [{ profile = "1g.5gb" }]
[[cluster.gpus]]
index = 2
model = ""
memory_mb = 1
shards = 0
[[cluster.partitions]]
name = "gpu"
default_time = "2:00:00"
max_time = "1:00:00"
cpus_per_gpu = 0
[[cluster.partitions]]
name = "gpu"
max_time = "soon"
mem_per_gpu_mb = 0
allowed_groups = [""]
[accounts]
uid_min = 0
uid_max = 4294967294
home_root = "home"
"#,
            &[],
        );
        let keys: Vec<&str> = loaded.problems.iter().map(|p| p.key.as_str()).collect();
        for key in [
            "cluster.node_name",
            "cluster.cpus",
            "cluster.features[0]",
            "cluster.gpus.0.colour",
            "cluster.gpus[0].mig[0].profile",
            "cluster.gpus[0].shards",
            "cluster.gpus[1].index",
            "cluster.gpus[1].memory_mb",
            "cluster.gpus[1].mig",
            "cluster.gpus[2].model",
            "cluster.gpus[2].shards",
            "cluster.partitions[0].default_time",
            "cluster.partitions[0].cpus_per_gpu",
            "cluster.partitions[1].name",
            "cluster.partitions[1].max_time",
            "cluster.partitions[1].mem_per_gpu_mb",
            "cluster.partitions[1].allowed_groups",
            "cluster.partitions",
            "accounts.uid_min",
            "accounts.uid_max",
            "accounts.home_root",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
        let over = load_str(
            "[[cluster.gpus]]\nindex = 0\nmodel = \"A100-80GB\"\nmemory_mb = 1\nmig = [{ profile = \"4g.40gb\" }, { profile = \"4g.40gb\" }]\n",
            &[],
        );
        assert_eq!(
            over.problems,
            [Problem {
                key: "cluster.gpus[0].mig".into(),
                message: "the instances use 8 of the GPU's 7 compute slices".into()
            }]
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

    #[test]
    fn secrets_and_passwords_never_print() {
        let url = DatabaseUrl::new("postgres://atrium:hunter2@db.example.org:5432/atrium");
        assert_eq!(
            format!("{url:?}"),
            "postgres://atrium:***@db.example.org:5432/atrium"
        );
        assert_eq!(format!("{:?}", Secret::new("hunter2")), "***");
        let plain = DatabaseUrl::new("postgres://atrium@localhost/atrium?host=/run/x");
        assert_eq!(plain.redacted(), plain.expose());
    }
}
