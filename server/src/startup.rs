//! Building and running the application: open the store, load keys, create the first
//! administrator, bind the listener, serve until SIGTERM/SIGINT.

use std::net::{IpAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use actix_web::{dev::Server, web, HttpServer};
use anyhow::Context;

use crate::auth::jwt::Keys;
use crate::auth::ldap::Directory;
use crate::auth::login::Logins;
use crate::auth::principal::SessionPolicy;
use crate::auth::rate_limit::LoginLimiter;
use crate::auth::{local, Authenticator};
use crate::config::Config;
use crate::domain::groups::GroupList;
use crate::http::{self, AppState};
use crate::metrics::Metrics;
use crate::sched::LaunchSettings;
use crate::store::Store;
use crate::util::now_ms;

/// How long a stopping portal waits for the scheduler's last snapshot.
const SHUTDOWN_SNAPSHOT_WAIT: Duration = Duration::from_secs(30);

pub struct Application {
    port: u16,
    scheme: &'static str,
    server: Server,
    background: Vec<tokio::task::JoinHandle<()>>,
    /// The scheduler's task: it ends with an error when its state cannot be rebuilt.
    scheduler_task: tokio::task::JoinHandle<anyhow::Result<()>>,
    scheduler: crate::sched::Scheduler,
    store: Store,
}

/// Open the store named by the configuration and bring its schema up to date.
pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let url = config.database_url();
    if url.is_sqlite() {
        secure_data_dir(&config.data_dir, url.sqlite_file().as_deref())?;
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
        // open_store makes SQLite's data directory private; the keys need it too.
        if !config.database_url().is_sqlite() {
            secure_data_dir(&config.data_dir, None)?;
        }
        let store = open_store(&config).await?;
        crate::benchmarks::reference::seed(&store, now_ms())
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
        let metrics = Metrics::new()?;
        metrics.start_time.set(now_ms() / 1000);
        let directory = match &config.auth.ldap {
            Some(ldap) => {
                tracing::info!(url = %ldap.url, "LDAP login enabled");
                Some(Directory::new(ldap.clone(), metrics.ldap.clone())?)
            }
            None => None,
        };
        let logins = Logins::new(store.clone(), config.auth.local_accounts, directory);
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
        let exe = std::env::current_exe().context("locating the atrium binary")?;
        let bin_dir = crate::launch::ensure_step_commands(&spool_dir, &exe)
            .with_context(|| format!("creating the step commands in {}", spool_dir.display()))?;
        let portal = crate::sched::JobPortal {
            bin_dir,
            url: job_facing_url(config.public_url.as_deref(), scheme, listener.local_addr()?),
            tokens: crate::sched::JobTokens::new(&secret),
        };
        let settings = LaunchSettings {
            spool_dir: spool_dir.clone(),
            exe,
            runtime,
            kill_grace_secs: config.jobs.kill_grace_seconds,
            output_folder_wait_secs: config.jobs.output_folder_wait_seconds,
            drop_privileges: as_root,
            cluster_name: config.jobs.cluster_name.clone(),
            mounts: crate::launch::storage_mounts(&config.storage),
            hidden,
            portal: Some(portal),
            usage_interval_secs: config.jobs.usage_interval_seconds,
        };
        let jobs_runtime = settings.runtime.clone();
        let spool = settings.spool_dir.clone();
        // Jobs' notices (the internal scheduler's; Slurm mails its own) and sessions'.
        let notifier = crate::notifications::Notifier::start(&config.notify)?;
        // Who each account is, resolved in one place for every part that acts as a user.
        let identities = crate::identities::Identities::new(store.clone(), as_root);
        let (scheduler, scheduler_task) = if config.scheduler.is_slurm() {
            tracing::info!("jobs and sessions are Slurm jobs (scheduler.backend = \"slurm\")");
            let slurm = crate::sched::slurm::SlurmSettings::from_config(&config.slurm, as_root);
            crate::sched::slurm::start(
                store.clone(),
                identities.clone(),
                slurm,
                metrics.slurm.clone(),
            )
            .await?
        } else {
            crate::sched::internal::start(
                store.clone(),
                identities.clone(),
                config.jobs.admission(inventory.cluster.clone()),
                settings,
                notifier.clone(),
                metrics.scheduler.clone(),
            )
        };
        let _recorder = crate::benchmarks::recorder::spawn(
            store.clone(),
            identities.clone(),
            inventory.clone(),
        );
        let quotas = crate::services::Quotas::load(
            store.clone(),
            scheduler.clone(),
            config.quotas.usage_period(),
        )
        .await?;
        let config = Arc::new(config);
        let audit = crate::services::Audit::new(store.clone());
        let (sessions, culler) = crate::sessions::Sessions::start(
            store.clone(),
            scheduler.clone(),
            quotas.clone(),
            config.clone(),
            session_host(&config, &spool, as_root)?,
            jobs_runtime,
            as_root,
            crate::sessions::SessionSecrets::new(&secret),
            identities.clone(),
            audit.clone(),
            metrics.sessions_ready.clone(),
            notifier,
        )
        .await?;
        let jobs = crate::services::Jobs::new(
            config.clone(),
            store.clone(),
            scheduler.clone(),
            identities.clone(),
            audit.clone(),
            crate::sched::JobTokens::new(&secret),
            spool_dir,
        );
        let accounts = crate::services::Accounts::new(
            store.clone(),
            auth.clone(),
            scheduler.clone(),
            quotas.clone(),
            audit.clone(),
            config.auth.token_max_days,
        );
        let scheduler_handle = scheduler.clone();
        let portal = crate::portal::Portal {
            accounts,
            benchmarks: crate::services::Benchmarks::new(store.clone()),
            campaigns: crate::services::Campaigns::new(store.clone(), jobs.clone(), audit.clone()),
            nodes: crate::services::Nodes::new(scheduler.clone(), audit.clone()),
            cluster: crate::services::Cluster::new(
                scheduler,
                inventory,
                config.scheduler.is_slurm(),
                config.cluster.discover_gpus,
            ),
            usage: crate::services::Usage::new(store.clone()),
            announcements: crate::services::Announcements::new(store.clone()),
            files: crate::services::Files::new(
                identities.clone(),
                audit.clone(),
                config.storage.clone(),
            ),
            quotas,
            audit,
            jobs,
            homes: Arc::new(crate::homes::Homes::new(
                store.clone(),
                identities,
                config.accounts.create_homes,
                config.accounts.templates,
            )),
            sessions,
            store: store.clone(),
            auth: auth.clone(),
            config: config.clone(),
        };
        let state = web::Data::new(AppState {
            portal,
            secure_cookies: config.secure_cookies(),
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
            culler,
            tokio::spawn(auth.clone().watch_epoch(Duration::from_secs(1))),
            tokio::spawn(purge_expired_sessions(store.clone())),
        ];
        Ok(Self {
            port,
            scheme,
            server,
            background,
            scheduler_task,
            scheduler: scheduler_handle,
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

    /// Serve until SIGTERM or SIGINT, then finish in-flight requests, let the
    /// scheduler write its last snapshot, and close. Serving starts before the
    /// scheduler has rebuilt its queue; if it cannot, the portal stops with its error.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        tracing::info!(port = self.port, "atrium listening");
        let server = self.server;
        let stop = server.handle();
        let mut scheduler_task = self.scheduler_task;
        tokio::pin!(server);
        let (result, failed) = tokio::select! {
            result = &mut server => (result, None),
            ended = &mut scheduler_task => {
                let error = match ended {
                    Ok(Ok(())) => anyhow::anyhow!("the scheduler stopped"),
                    Ok(Err(e)) => e.context("restoring the scheduler's queue"),
                    Err(e) => anyhow::anyhow!("the scheduler's task failed: {e}"),
                };
                tracing::error!(error = %format!("{error:#}"), "the scheduler is gone; stopping");
                stop.stop(true).await;
                (server.await, Some(error))
            }
        };
        if failed.is_none() {
            let last =
                tokio::time::timeout(SHUTDOWN_SNAPSHOT_WAIT, self.scheduler.shutdown()).await;
            if !matches!(last, Ok(Ok(()))) {
                tracing::warn!("the scheduler did not write its last snapshot; the log will be replayed at the next start");
            }
            scheduler_task.abort();
        }
        for task in self.background {
            task.abort();
        }
        self.store.close().await;
        tracing::info!("atrium stopped");
        if let Some(error) = failed {
            return Err(error);
        }
        Ok(result?)
    }
}

/// The portal's address as a job on this machine reaches it (`ATRIUM_URL` in jobs):
/// the listener itself over plain HTTP (loopback when it listens on every address);
/// with TLS the public URL, whose name the certificate holds.
fn job_facing_url(public_url: Option<&str>, scheme: &str, addr: std::net::SocketAddr) -> String {
    if scheme == "https" {
        if let Some(url) = public_url {
            return url.trim_end_matches('/').to_string();
        }
        return format!("https://localhost:{}", addr.port());
    }
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("{scheme}://{}", std::net::SocketAddr::new(ip, addr.port()))
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

/// What the portal keeps in its data directory (the spool only when unprivileged),
/// besides the SQLite database wherever its URL puts it.
const DATA_DIR_ENTRIES: &[&str] = &["atrium.db", "jwt.key", "spool"];

/// Create the data directory (0700), or make an existing one and the portal's files in
/// it private again (0700 and 0600), saying so: it holds the database, the keys and the
/// jobs' environments, which no user's process may read. A directory that also holds
/// files of others (a data directory set to `/var/lib`, say) keeps its mode, with an
/// error in the log: the portal needs a directory of its own. `database` is the SQLite
/// file, whose files are the portal's wherever they are.
pub fn secure_data_dir(dir: &Path, database: Option<&Path>) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating data directory {}", dir.display()))?;
    let open_to_others = |path: &Path| -> anyhow::Result<Option<u32>> {
        let meta = std::fs::symlink_metadata(path)?;
        let mode = meta.permissions().mode() & 0o7777;
        Ok((!meta.file_type().is_symlink() && mode & 0o077 != 0).then_some(mode))
    };
    let tighten = |path: &Path, mode: u32| -> anyhow::Result<()> {
        let Some(was) = open_to_others(path)? else {
            return Ok(());
        };
        tracing::warn!(
            path = %path.display(),
            was = format!("{was:o}"),
            now = format!("{mode:o}"),
            "the portal's files were readable by others; made private"
        );
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("making {} private", path.display()))
    };
    // The database's own files: the file, its -wal and -shm.
    let db_name = database
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    if let (Some(db), Some(name)) = (database, &db_name) {
        if db.parent().map(|p| p.canonicalize().ok()) != Some(dir.canonicalize().ok()) {
            for suffix in ["", "-wal", "-shm"] {
                let file = db.with_file_name(format!("{name}{suffix}"));
                if file.is_file() {
                    tighten(&file, 0o600)?;
                }
            }
        }
    }
    let is_db = |name: &str, db: &str| {
        name == db
            || ["-wal", "-shm", "-journal"]
                .iter()
                .any(|s| name == format!("{db}{s}"))
    };
    let mut foreign = Vec::new();
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let own = DATA_DIR_ENTRIES
            .iter()
            .any(|e| name == *e || is_db(&name, e))
            || db_name.as_deref().is_some_and(|db| is_db(&name, db));
        match entry.file_type() {
            Ok(t) if own && t.is_file() => tighten(&entry.path(), 0o600)?,
            _ if own => {}
            _ => foreign.push(name),
        }
    }
    if foreign.is_empty() {
        tighten(dir, 0o700)?;
    } else if let Some(mode) = open_to_others(dir)? {
        foreign.truncate(5);
        tracing::error!(
            path = %dir.display(),
            mode = format!("{mode:o}"),
            others = ?foreign,
            "the data directory is readable by others and holds files that are not the \
             portal's, so its mode is left alone: give data_dir a directory of its own"
        );
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

/// Where sessions' servers run: the Slurm backend's compute nodes, else this machine.
fn session_host(
    config: &Config,
    spool: &Path,
    as_root: bool,
) -> anyhow::Result<crate::sched::host::SessionHost> {
    use crate::sched::host::SessionHost;
    if config.scheduler.is_slurm() {
        let nodes = crate::sched::slurm::nodes::SlurmNodes::new(&config.slurm, as_root);
        return Ok(SessionHost::on_nodes(Arc::new(nodes), config));
    }
    SessionHost::local(config, spool, as_root).context("preparing the sessions' directory")
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::secure_data_dir;

    fn mode(p: &std::path::Path) -> u32 {
        std::fs::metadata(p).expect("meta").permissions().mode() & 0o7777
    }

    fn chmod(p: &std::path::Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn the_portals_own_directory_and_files_are_made_private() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("var");
        secure_data_dir(&dir, None).expect("create");
        assert_eq!(mode(&dir), 0o700);
        for name in ["atrium.db", "atrium.db-wal", "jwt.key"] {
            std::fs::write(dir.join(name), "x").expect("write");
            chmod(&dir.join(name), 0o644);
        }
        chmod(&dir, 0o755);
        secure_data_dir(&dir, None).expect("secure");
        assert_eq!(mode(&dir), 0o700);
        for name in ["atrium.db", "atrium.db-wal", "jwt.key"] {
            assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
        }
    }

    #[test]
    fn a_directory_shared_with_others_keeps_its_mode() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("lib");
        std::fs::create_dir(&dir).expect("dir");
        std::fs::create_dir(dir.join("postgresql")).expect("another service's");
        std::fs::write(dir.join("atrium.db"), "x").expect("write");
        chmod(&dir.join("atrium.db"), 0o644);
        chmod(&dir, 0o755);
        secure_data_dir(&dir, None).expect("secure");
        assert_eq!(
            mode(&dir),
            0o755,
            "another service's directory stays reachable"
        );
        assert_eq!(mode(&dir.join("postgresql")), 0o755);
        assert_eq!(
            mode(&dir.join("atrium.db")),
            0o600,
            "the portal's own file is private"
        );
    }
}
