//! Building and running the application: open the store, load keys, create the first
//! administrator, bind the listener, serve until SIGTERM/SIGINT.

use std::net::{IpAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{dev::Server, web, HttpServer};
use anyhow::Context;

use crate::auth::groups::GroupList;
use crate::auth::jwt::Keys;
use crate::auth::ldap::Directory;
use crate::auth::login::Logins;
use crate::auth::principal::SessionPolicy;
use crate::auth::rate_limit::LoginLimiter;
use crate::auth::{local, now_ms, Authenticator};
use crate::config::Config;
use crate::http::{self, AppState};
use crate::metrics::Metrics;
use crate::sched::{LaunchSettings, Scheduler};
use crate::store::Store;

pub struct Application {
    port: u16,
    scheme: &'static str,
    server: Server,
    background: Vec<tokio::task::JoinHandle<()>>,
    store: Store,
}

/// Open the store named by the configuration and bring its schema up to date.
pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let url = config.database_url();
    if url.is_sqlite() {
        secure_data_dir(&config.data_dir)?;
    }
    let store = Store::connect(&url, config.database.max_connections)
        .await
        .with_context(|| format!("connecting to {url}"))?;
    store.migrate().await.context("applying migrations")?;
    Ok(store)
}

/// The portal's secret key: `auth.jwt_secret`, else `jwt.key` in the data directory.
/// It signs browser logins and derives session tokens.
fn portal_secret(config: &Config) -> anyhow::Result<Vec<u8>> {
    match &config.auth.jwt_secret {
        Some(secret) => Ok(secret.expose().as_bytes().to_vec()),
        None => Ok(Keys::read_or_create_secret(
            &config.data_dir.join("jwt.key"),
        )?),
    }
}

impl Application {
    /// Prepare everything and bind the listener (`listen` may use port 0).
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        secure_data_dir(&config.data_dir)?;
        let store = open_store(&config).await?;
        crate::bench::reference::seed(&store, now_ms())
            .await
            .context("storing the reference benchmark runs")?;
        let secret = portal_secret(&config)?;
        let keys = Keys::from_secret(&secret);

        let admin_groups =
            GroupList::parse(&config.auth.admin_groups).context("auth.admin_groups")?;
        let first_admin = if config.auth.local_accounts {
            local::bootstrap_admin(&store, &admin_groups, &config.accounts).await?
        } else {
            None
        };
        if let Some(password) = first_admin {
            // Printed once, to the terminal that started the portal; only its hash is kept.
            println!(
                "\n  atrium: created the first administrator.\n    username: admin\n    password: {password}\n  Change it with `atrium user passwd admin`.\n"
            );
        }
        if !running_as_root() {
            tracing::info!("running unprivileged: every process will run as this user (single-user workstation mode)");
        }

        let auth = Arc::new(Authenticator::new(
            store.clone(),
            keys,
            admin_groups,
            SessionPolicy {
                ttl: Duration::from_secs(config.auth.session_minutes * 60),
                max: Duration::from_secs(config.auth.session_max_hours * 3600),
            },
        ));
        auth.follow_epoch().await?;
        let directory = match &config.auth.ldap {
            Some(ldap) => {
                tracing::info!(url = %ldap.url, "LDAP login enabled");
                Some(Directory::new(ldap.clone())?)
            }
            None => None,
        };
        let logins = Logins::new(store.clone(), config.auth.local_accounts, directory);
        let metrics = Metrics::new()?;
        metrics.start_time.set(now_ms() / 1000);
        let rl = &config.auth.rate_limit;
        let limiter = LoginLimiter::new(
            rl.per_user,
            rl.per_address,
            Duration::from_secs(rl.window_seconds),
        );
        let trusted_proxies = config
            .http
            .trusted_proxies
            .iter()
            .filter_map(|p| p.parse::<IpAddr>().ok())
            .collect();
        let workers = config
            .http
            .workers
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
        let tls = config
            .tls
            .cert_file
            .as_deref()
            .zip(config.tls.key_file.as_deref())
            .map(|(cert, key)| tls_config(cert, key))
            .transpose()?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let listener = TcpListener::bind(&config.listen)
            .with_context(|| format!("binding {}", config.listen))?;
        let port = listener.local_addr()?.port();
        let as_root = running_as_root();
        let inventory = Arc::new(crate::sched::inventory::discover(&config.cluster).await?);
        let spool_dir = config.spool_dir(as_root);
        if as_root && spool_dir.starts_with(&config.data_dir) {
            anyhow::bail!(
                "jobs.spool_dir ({}) is inside data_dir ({}), which no user may enter: \
                 give the spool a directory of its own",
                spool_dir.display(),
                config.data_dir.display()
            );
        }
        crate::launch::ensure_spool(&spool_dir)
            .with_context(|| format!("creating the spool directory {}", spool_dir.display()))?;
        let runtime = crate::launch::detect_runtime(&config.jobs.runtime)
            .map_err(|e| anyhow::anyhow!("jobs.runtime: {e}"))?;
        tracing::info!(
            ?runtime,
            available = ?crate::launch::detect_available(),
            spool = %spool_dir.display(),
            "jobs run in this container runtime"
        );
        let hidden = [&config.data_dir, &spool_dir]
            .into_iter()
            .filter_map(|d| std::fs::canonicalize(d).ok())
            .collect();
        let settings = LaunchSettings {
            spool_dir,
            exe: std::env::current_exe().context("locating the atrium binary")?,
            runtime,
            kill_grace_secs: config.jobs.kill_grace_seconds,
            drop_privileges: as_root,
            cluster_name: config.jobs.cluster_name.clone(),
            mounts: crate::launch::storage_mounts(&config.storage),
            hidden,
        };
        let jobs_runtime = settings.runtime.clone();
        let spool = settings.spool_dir.clone();
        let (scheduler, scheduler_task) = if config.scheduler.is_slurm() {
            tracing::info!("jobs and sessions are Slurm jobs (scheduler.backend = \"slurm\")");
            let slurm = crate::sched::slurm::SlurmSettings::from_config(&config.slurm, as_root);
            Scheduler::start_slurm(store.clone(), slurm).await?
        } else {
            Scheduler::start(store.clone(), inventory.cluster.clone(), settings).await?
        };
        let _recorder = crate::bench::recorder::spawn(store.clone(), inventory.clone(), as_root);
        let quotas = crate::admin::Quotas::load(
            store.clone(),
            scheduler.clone(),
            config.quotas.usage_period(),
        )
        .await?;
        let config = Arc::new(config);
        let (sessions, culler) = crate::sessions::Sessions::start(
            store.clone(),
            scheduler.clone(),
            quotas.clone(),
            config.clone(),
            &spool,
            jobs_runtime,
            as_root,
            crate::sessions::SessionSecrets::new(&secret),
        )
        .await?;
        let state = web::Data::new(AppState {
            scheduler,
            quotas,
            inventory,
            jobs: http::JobsRuntime {
                drop_privileges: as_root,
                owners: Default::default(),
            },
            homes: Arc::new(crate::storage::Homes::new(
                config.accounts.create_homes,
                config.accounts.templates,
            )),
            secure_cookies: config.secure_cookies(),
            sessions,
            config,
            store: store.clone(),
            auth: auth.clone(),
            logins,
            limiter,
            metrics,
            trusted_proxies,
        });

        let server = HttpServer::new(move || http::app(state.clone()))
            .workers(workers)
            .shutdown_timeout(10);
        let server = match tls {
            Some(tls) => server.listen_rustls_0_23(listener, tls)?,
            None => server.listen(listener)?,
        }
        .run();

        let background = vec![
            scheduler_task,
            culler,
            tokio::spawn(auth.clone().watch_epoch(Duration::from_secs(1))),
            tokio::spawn(purge_expired_sessions(store.clone())),
        ];
        Ok(Self {
            port,
            scheme,
            server,
            background,
            store,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// Serve until SIGTERM or SIGINT, then finish in-flight requests and close.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        tracing::info!(port = self.port, "atrium listening");
        let result = self.server.await;
        for task in self.background {
            task.abort();
        }
        self.store.close().await;
        tracing::info!("atrium stopped");
        Ok(result?)
    }
}

/// A rustls server configuration from PEM files (ring provider, TLS 1.2 and 1.3).
fn tls_config(cert: &Path, key: &Path) -> anyhow::Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading certificates from {}", cert.display()))?;
    anyhow::ensure!(!certs.is_empty(), "no certificate in {}", cert.display());
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("reading the private key from {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not match")?;
    Ok(config)
}

/// Forget login sessions a day after they expired, hourly.
async fn purge_expired_sessions(store: Store) {
    let mut ticker = tokio::time::interval(Duration::from_secs(3600));
    loop {
        ticker.tick().await;
        if let Err(e) = store.purge_login_sessions(now_ms(), 24 * 3600 * 1000).await {
            tracing::warn!(error = %e, "cannot purge expired login sessions");
        }
    }
}

/// Create the data directory (0700), or make an existing one and the files in it
/// private again (0700 and 0600), saying so: it holds the database, the keys and the
/// jobs' environments, which no user's process may read.
pub fn secure_data_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating data directory {}", dir.display()))?;
    let tighten = |path: &Path, mode: u32| -> anyhow::Result<()> {
        let meta = std::fs::symlink_metadata(path)?;
        if meta.file_type().is_symlink() || meta.permissions().mode() & 0o077 == 0 {
            return Ok(());
        }
        tracing::warn!(
            path = %path.display(),
            was = format!("{:o}", meta.permissions().mode() & 0o7777),
            now = format!("{mode:o}"),
            "the portal's files were readable by others; made private"
        );
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("making {} private", path.display()))
    };
    tighten(dir, 0o700)?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_file() => tighten(&path, 0o600)?,
            Ok(t) if t.is_dir() => tighten(&path, 0o700)?,
            _ => {}
        }
    }
    Ok(())
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}
