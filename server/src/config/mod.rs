//! Configuration: one TOML file plus `ATRIUM_…` environment overrides.
//!
//! Owns: the top-level [`Config`] and its own keys (`listen`, `data_dir`,
//! `public_url`), loading (the file, then the environment), what spans sections
//! (the database URL, the spool directory, secure cookies), and `check`, which asks
//! every section for its problems and lists each with the key it concerns. Each
//! section's keys, defaults and checks are in its own file below.
//! Must not touch: the database, the network, or any state beyond reading the file;
//! nor any module of the portal but the leaves (`domain`, `util`) and the
//! `scheduler` crate.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

mod accounts;
mod apps;
mod auth;
mod check;
mod cluster;
mod database;
mod environments;
mod http;
mod jobs;
mod ldap;
mod log;
mod notify;
mod quotas;
mod sessions;
mod slurm;
mod storage;
#[cfg(test)]
mod testing;
mod tls;
mod values;

pub use accounts::{AccountsConfig, HIGHEST_ALLOCATED_UID, LOWEST_ALLOCATED_UID};
pub use apps::{is_field_name, AppConfig, FieldConfig, ICONS as APP_ICONS};
pub use auth::{AuthConfig, RateLimitConfig};
pub use check::Problem;
pub use cluster::{ClusterSection, DeclaredGpu, DeclaredMig, PartitionSection, PartitionTimes};
pub use database::{DatabaseConfig, DatabaseUrl};
pub use environments::{is_name as is_session_name, EnvironmentConfig};
pub use http::HttpConfig;
pub use jobs::{
    JobsConfig, SubmissionLimits, DEFAULT_MAX_SCRIPT_BYTES, DEFAULT_USAGE_INTERVAL_SECONDS,
};
pub use ldap::{LdapAttributes, LdapConfig, LdapGroupsConfig, LdapSearchConfig};
pub use log::LogConfig;
pub use notify::{is_address, is_domain, NotifyConfig, MAX_ADDRESS_LEN};
pub use quotas::QuotasConfig;
pub use sessions::SessionsConfig;
pub use slurm::{SchedulerConfig, SlurmConfig};
pub use storage::{MountConfig, StorageConfig};
pub use tls::TlsConfig;
pub use values::{HumanDuration, Secret};

/// Prefix of environment overrides. `ATRIUM_LISTEN` sets `listen`;
/// `ATRIUM_DATABASE__URL` sets `database.url` (a double underscore separates sections).
pub const ENV_PREFIX: &str = "ATRIUM_";

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
    /// The apps users start as sessions; none: the built-in ones (`apps.toml`).
    pub apps: Vec<AppConfig>,
    pub storage: StorageConfig,
    pub quotas: QuotasConfig,
    pub scheduler: SchedulerConfig,
    pub slurm: SlurmConfig,
    pub notify: NotifyConfig,
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
            apps: Vec::new(),
            storage: StorageConfig::default(),
            quotas: QuotasConfig::default(),
            scheduler: SchedulerConfig::default(),
            slurm: SlurmConfig::default(),
            notify: NotifyConfig::default(),
        }
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

    /// The apps users start as sessions: the configured ones, or the built-in ones.
    pub fn apps(&self) -> Vec<AppConfig> {
        if self.apps.is_empty() {
            apps::built_in()
        } else {
            self.apps.clone()
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

    /// Every semantic problem of this configuration, section by section.
    pub fn check(&self) -> Vec<Problem> {
        let mut problems = Vec::new();
        let mut problem = |key: &str, message: String| {
            problems.push(Problem {
                key: key.into(),
                message,
            })
        };
        self.jobs.check(&mut problem);
        self.check_own_keys(&mut problem);
        self.database.check(&mut problem);
        self.auth.check(&mut problem);
        self.http.check(&mut problem);
        self.tls.check(&mut problem);
        self.cluster.check(&mut problem);
        self.sessions.check(&mut problem);
        environments::check(&self.environments, &mut problem);
        let environment_names: Vec<String> =
            self.environments().into_iter().map(|e| e.name).collect();
        apps::check(&self.apps, &environment_names, &mut problem);
        self.storage.check(&mut problem);
        self.accounts.check(&mut problem);
        self.quotas.check(&mut problem);
        self.scheduler.check(&mut problem);
        self.slurm.check(&mut problem);
        self.log.check(&mut problem);
        self.notify.check(&mut problem);
        problems
    }

    /// The keys outside any section: `listen`, `data_dir`, `public_url`.
    fn check_own_keys(&self, problem: &mut impl FnMut(&str, String)) {
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
        if matches!(path, "CONFIG" | "TOKEN" | "URL" | "CA_FILE") {
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
    use super::testing::{assert_reported, load_str};
    use super::*;

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
    fn the_commands_own_variables_are_not_keys() {
        let loaded = load_str(
            "",
            &[
                ("ATRIUM_CONFIG", "/etc/atrium/atrium.toml"),
                ("ATRIUM_URL", "https://portal.example.org"),
                ("ATRIUM_TOKEN", "atr_x"),
                ("ATRIUM_CA_FILE", "/etc/atrium/ca.pem"),
            ],
        );
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    }

    #[test]
    fn every_problem_is_reported_with_its_key() {
        let loaded = load_str(
            "listen = \"nowhere\"\nbogus = 1\n[auth]\njwt_secret = \"short\"\n[auth.rate_limit]\nper_user = 0\n[log]\nformat = \"xml\"\n",
            &[],
        );
        assert_reported(
            &loaded,
            &[
                "bogus",
                "listen",
                "auth.jwt_secret",
                "auth.rate_limit.per_user",
                "log.format",
            ],
        );
    }

    #[test]
    fn wrong_types_name_the_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("atrium.toml");
        std::fs::write(&path, "[auth]\nsession_minutes = \"soon\"\n").expect("write");
        let err = Config::load(Some(&path), Vec::new()).expect_err("must fail");
        assert!(err.to_string().contains("session_minutes"), "{err}");
    }
}
