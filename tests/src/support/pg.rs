//! Throwaway PostgreSQL databases for tests.
//!
//! [`fresh_database`] returns a new, empty database that is dropped again when the returned
//! [`PgDatabase`] is dropped. Where the database lives:
//!
//! * `ATRIUM_TEST_PG_URL` set (a superuser URL of a running cluster, e.g. exported by
//!   `tests/pg-cluster.sh start DIR`): a uniquely named database is created there.
//! * Otherwise a private cluster is started once per test process: `initdb` into a temp dir
//!   (as the `postgres` OS user when running as root), trust auth, no TCP at all (unix socket in
//!   the temp dir), `fsync=off`. It runs under a [`Supervised`] lifeline, so it is stopped and its
//!   directory removed when the test process exits, however it exits.
//!
//! URLs look like `postgres://postgres@localhost/atrium_test_123_0_456?host=/tmp/atrium-pg-abc123`;
//! both sqlx 0.8 (`host=` starting with `/` selects the unix socket directory) and libpq/psql
//! accept that form.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use tokio::sync::OnceCell;

use super::process::{file_tail, find_binary, is_root, Supervised, SupervisedCommand};
use super::wait;

/// Environment variable naming an existing cluster to use instead of a private one.
pub const PG_URL_ENV: &str = "ATRIUM_TEST_PG_URL";
/// Environment variable overriding the directory holding `initdb`, `postgres` and `psql`.
pub const PG_BIN_ENV: &str = "ATRIUM_TEST_PG_BIN";

/// OS user owning the private cluster when the tests run as root.
const PG_OS_USER: &str = "postgres";
/// How long a private cluster may take to accept connections.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// A database that is dropped (best effort, `WITH (FORCE)`) when this value is dropped.
#[derive(Debug)]
pub struct PgDatabase {
    /// Connection URL for sqlx / the atrium server, e.g.
    /// `postgres://postgres@localhost/atrium_test_1_0_2?host=/tmp/atrium-pg-abc`.
    pub url: String,
    /// The database name.
    pub name: String,
    admin_url: String,
    psql: PathBuf,
}

impl PgDatabase {
    /// Runs `sql` in this database with `psql` and returns its unaligned, tuples-only output
    /// (fields separated by `|`, one row per line), trimmed. Fails on any SQL error.
    pub async fn psql(&self, sql: &str) -> anyhow::Result<String> {
        run_psql(&self.psql, &self.url, sql).await
    }

    /// Runs `sql` as the cluster's superuser, connected to the `postgres` database (for
    /// what cannot be done from inside this one, such as closing it to connections).
    pub async fn psql_admin(&self, sql: &str) -> anyhow::Result<String> {
        run_psql(&self.psql, &self.admin_url, sql).await
    }

    /// A superuser URL of the cluster holding this database (connected to `postgres`).
    pub fn admin_url(&self) -> &str {
        &self.admin_url
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        // Synchronous on purpose: the runtime may be shutting down, and the process may exit
        // right after this test; a database drop takes a few milliseconds.
        let result = std::process::Command::new(&self.psql)
            .args(psql_args(
                &self.admin_url,
                &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
            ))
            .env("PGCONNECT_TIMEOUT", "5")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        match result {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "warning: dropping test database {}: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => eprintln!("warning: dropping test database {}: {e}", self.name),
        }
    }
}

/// Creates a new, empty, uniquely named database (see the module docs for where).
pub async fn fresh_database() -> anyhow::Result<PgDatabase> {
    let admin_url = admin_url().await?;
    let psql = find_binary("psql", &[&pg_bin_dir()?])?;
    let name = unique_db_name();
    run_psql(
        &psql,
        &admin_url,
        &format!("CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8'"),
    )
    .await
    .with_context(|| format!("creating test database {name}"))?;
    let url = database_url(&admin_url, &name)?;
    Ok(PgDatabase {
        url,
        name,
        admin_url,
        psql,
    })
}

/// Superuser URL (database `postgres`) of the cluster [`fresh_database`] uses: the value of
/// `ATRIUM_TEST_PG_URL`, or the private cluster of this process (started on first use).
pub async fn admin_url() -> anyhow::Result<String> {
    if let Some(url) = std::env::var_os(PG_URL_ENV) {
        return url
            .into_string()
            .map_err(|u| anyhow::anyhow!("{PG_URL_ENV} is not UTF-8: {u:?}"));
    }
    Ok(private_cluster().await?.admin_url.clone())
}

/// Directory with the PostgreSQL server binaries: `ATRIUM_TEST_PG_BIN`, else the newest
/// `/usr/lib/postgresql/*/bin` (Debian/Ubuntu), else the directory of `initdb` on `PATH`.
pub fn pg_bin_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(PG_BIN_ENV) {
        return Ok(PathBuf::from(dir));
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max_by_key(|(version, _)| *version);
    if let Some((_, bin)) = newest {
        return Ok(bin);
    }
    let initdb = find_binary("initdb", &[])
        .context("PostgreSQL server binaries not found; run tests/install-deps.sh")?;
    Ok(initdb
        .parent()
        .context("initdb path has a parent directory")?
        .to_path_buf())
}

/// Runs as the cluster owner. Arguments: INITDB POSTGRES DATA_DIR SOCKET_DIR.
const CLUSTER_SCRIPT: &str = r#"
initdb=$1; postgres=$2; data=$3; sock=$4
"$initdb" -D "$data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 --no-sync --no-instructions \
    || { echo "initdb failed" >&2; exit 1; }
exec "$postgres" -D "$data" -c listen_addresses= -c "unix_socket_directories=$sock" \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300
"#;

/// The process-wide private cluster. Never dropped: its lifeline pipe closes at process exit.
struct Cluster {
    admin_url: String,
    _server: Supervised,
}

static CLUSTER: OnceCell<Cluster> = OnceCell::const_new();

async fn private_cluster() -> anyhow::Result<&'static Cluster> {
    CLUSTER.get_or_try_init(start_private_cluster).await
}

async fn start_private_cluster() -> anyhow::Result<Cluster> {
    let started = Instant::now();
    let bin = pg_bin_dir()?;
    let initdb = find_binary("initdb", &[&bin])?;
    let postgres = find_binary("postgres", &[&bin])?;
    let run_as = is_root().then(|| PG_OS_USER.to_owned());

    let dir = tempfile::Builder::new()
        .prefix("atrium-pg-")
        .tempdir()
        .context("creating temp dir for PostgreSQL")?;
    if run_as.is_some() {
        let (uid, gid) = os_user_ids(PG_OS_USER)?;
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
            .with_context(|| format!("chown {} to {PG_OS_USER}", dir.path().display()))?;
    }
    let data = dir.path().join("data");
    let socket = dir.path().join(format!(".s.PGSQL.{}", 5432));
    anyhow::ensure!(
        socket.as_os_str().len() < 100,
        "unix socket path {} is too long; set TMPDIR to a shorter directory",
        socket.display()
    );

    // initdb and postgres run as one supervised shell, so that the directory is removed even if
    // the test process is killed during initdb.
    let dir = dir.keep();
    let log = dir.join("postgres.log");
    let mut spec = SupervisedCommand::new("postgres", "/bin/sh", &log).args([
        "-c".as_ref(),
        CLUSTER_SCRIPT.as_ref(),
        "atrium-test-pg".as_ref(),
        initdb.as_os_str(),
        postgres.as_os_str(),
        data.as_os_str(),
        dir.as_os_str(),
    ]);
    spec.run_as = run_as;
    // SIGQUIT to the group = immediate shutdown; postgres then releases its shared memory.
    spec.stop_signal = "QUIT";
    spec.remove_on_exit = Some(dir.clone());
    spec.current_dir = Some(dir.clone());
    let server = match Supervised::spawn(spec) {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };

    let pid_file = data.join("postmaster.pid");
    wait::until("postgres to accept connections", START_DEADLINE, || async {
        if !server.is_running() {
            return Some(Err(anyhow::anyhow!(
                "initdb/postgres exited during startup; log {}:\n{}",
                server.log_path().display(),
                server.log_tail(30)
            )));
        }
        // Line 8 of postmaster.pid is the postmaster status; "ready" once it accepts connections.
        let status = std::fs::read_to_string(&pid_file).ok()?;
        (status.lines().nth(7)?.trim() == "ready" && socket.exists()).then_some(Ok(()))
    })
    .await
    .with_context(|| format!("postgres log {}:\n{}", log.display(), file_tail(&log, 30)))??;

    let admin_url = format!(
        "postgres://postgres@localhost/postgres?host={}",
        dir.display()
    );
    if std::env::var_os("ATRIUM_TEST_VERBOSE").is_some() {
        eprintln!(
            "private PostgreSQL cluster at {} ready in {} ms",
            dir.display(),
            started.elapsed().as_millis()
        );
    }
    Ok(Cluster {
        admin_url,
        _server: server,
    })
}

fn unique_db_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("atrium_test_{}_{n}_{nanos}", std::process::id())
}

/// `admin_url` with its path (database) replaced by `name`; query (e.g. `host=`) is kept.
fn database_url(admin_url: &str, name: &str) -> anyhow::Result<String> {
    let mut url = reqwest::Url::parse(admin_url)
        .with_context(|| format!("parsing PostgreSQL URL {admin_url:?}"))?;
    url.set_path(&format!("/{name}"));
    Ok(url.to_string())
}

fn psql_args(url: &str, sql: &str) -> Vec<String> {
    [
        "-X", // ignore ~/.psqlrc
        "-q",
        "-A",
        "-t",
        "-v",
        "ON_ERROR_STOP=1",
        "-d",
        url,
        "-c",
        sql,
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

async fn run_psql(psql: &Path, url: &str, sql: &str) -> anyhow::Result<String> {
    let out = tokio::process::Command::new(psql)
        .args(psql_args(url, sql))
        .env("PGCONNECT_TIMEOUT", "10")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running {}", psql.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "psql {sql:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// uid and gid of an OS user, from /etc/passwd.
fn os_user_ids(user: &str) -> anyhow::Result<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").context("reading /etc/passwd")?;
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() >= 4 && fields[0] == user {
            let uid = fields[2].parse().context("uid in /etc/passwd")?;
            let gid = fields[3].parse().context("gid in /etc/passwd")?;
            return Ok((uid, gid));
        }
    }
    anyhow::bail!(
        "OS user {user:?} not found (install the postgresql package: tests/install-deps.sh)"
    )
}
