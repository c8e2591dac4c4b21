//! The store: every SQL statement of the portal, over SQLite or PostgreSQL.
//!
//! Owns: the connection pool, migrations, and one narrow function per query.
//! Must not touch: HTTP, password hashing, policy decisions. Callers pass domain
//! values in and get rows out; times are Unix milliseconds.

mod accounting;
mod announcements;
mod audit;
pub mod benchmarks;
mod campaigns;
mod interactive;
mod jobs;
mod logins;
mod memberships;
mod quotas;
mod sql;
mod steps;
mod tokens;
mod usage;
mod users;

use std::time::Duration;

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Row};

use crate::config::DatabaseUrl;

pub use accounting::{
    bucket_bounds, Bucket, BucketUsage, Usage, UsageFilter, UsageKey, UsageRecord, UsageRow,
    MAX_BUCKETS,
};
pub use announcements::AnnouncementRecord;
pub use audit::{AuditEntry, AuditFilter, NewAuditEntry};
pub use benchmarks::{BenchmarkFilter, BenchmarkRecord, BenchmarkRun, BenchmarkSort};
pub use campaigns::{CampaignJob, CampaignProgress, CampaignRecord, CampaignRun, NewCampaign};
pub use interactive::{NewSession, SessionRecord};
pub use jobs::{
    job_id, JobChange, JobFilter, JobMetaRow, JobRecord, JobStart, SchedulerLog, StoredSnapshot,
};
pub use logins::LoginSession;
pub use quotas::QuotaRecord;
pub use steps::{NewStep, StepEnd, StepRecord};
pub use tokens::{ApiToken, NewApiToken, TokenOwner};
pub use usage::{IdleGpuJob, JobUsageRow};
pub use users::{Group, NewUser, PosixIdentity, Revoked, User};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    #[error("already exists: {0}")]
    Conflict(String),
    #[error("database error: {0}")]
    Database(sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(sqlx::migrate::MigrateError),
    /// Every uid of the range is taken.
    #[error("no free uid in {min}..={max}")]
    NoFreeUid { min: u32, max: u32 },
}

impl StoreError {
    /// The database is out of reach (no connection from the pool in time, or its
    /// connection failed), rather than the query wrong: worth trying again.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Self::Database(sqlx::Error::PoolTimedOut) | Self::Database(sqlx::Error::Io(_))
        )
    }

    /// A failure on the way to or from the database that is not the database's own
    /// (encoding what is stored, signing what is handed out).
    pub fn other(message: impl Into<String>) -> Self {
        Self::Database(sqlx::Error::Protocol(message.into()))
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        Self::Database(e)
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        Self::Migrate(e)
    }
}

impl StoreError {
    /// Map a unique-constraint violation to `Conflict(what)`.
    fn conflict_on_unique(err: sqlx::Error, what: impl Into<String>) -> Self {
        match &err {
            sqlx::Error::Database(db) if db.is_unique_violation() => Self::Conflict(what.into()),
            _ => Self::Database(err),
        }
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The portal's database. Cheap to clone.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish()
    }
}

impl Store {
    /// Connect to `url`. SQLite files are created when missing and use WAL.
    #[tracing::instrument(skip_all, fields(url = %url), err)]
    pub async fn connect(url: &DatabaseUrl, max_connections: u32) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let backend = if url.is_postgres() {
            Backend::Postgres
        } else {
            Backend::Sqlite
        };
        let options = AnyPoolOptions::new()
            .max_connections(max_connections)
            .min_connections(1)
            .acquire_timeout(Duration::from_secs(10));
        let options = match backend {
            Backend::Sqlite => options.after_connect(|conn, _meta| {
                Box::pin(async move {
                    sqlx::query(
                        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
                         PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;",
                    )
                    .execute(conn)
                    .await?;
                    Ok(())
                })
            }),
            Backend::Postgres => options,
        };
        let pool = options.connect(url.expose()).await?;
        Ok(Self { pool, backend })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Apply pending migrations for this database.
    #[tracing::instrument(skip_all, err)]
    pub async fn migrate(&self) -> Result<()> {
        let migrator = match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        };
        migrator.run(&self.pool).await?;
        Ok(())
    }

    /// The embedded migrations compared with those the database has applied, without
    /// applying any (`atrium doctor`).
    pub async fn migration_status(&self) -> Result<MigrationStatus> {
        let migrator = match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        };
        let exists = match self.backend {
            Backend::Sqlite => {
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'"
            }
            Backend::Postgres => {
                "SELECT COUNT(*) FROM information_schema.tables \
                 WHERE table_schema = current_schema() AND table_name = '_sqlx_migrations'"
            }
        };
        let tables: i64 = sqlx::query(exists)
            .fetch_one(&self.pool)
            .await?
            .try_get(0)?;
        let mut applied = Vec::new();
        if tables > 0 {
            // `success` is a boolean, which the Any driver does not read from SQLite.
            for row in sqlx::query(
                "SELECT version, CAST(CASE WHEN success THEN 1 ELSE 0 END AS BIGINT), checksum \
                 FROM _sqlx_migrations",
            )
            .fetch_all(&self.pool)
            .await?
            {
                applied.push(AppliedMigration {
                    version: row.try_get(0)?,
                    success: row.try_get::<i64, _>(1)? != 0,
                    checksum: row.try_get(2)?,
                });
            }
        }
        let known = migrator
            .iter()
            .filter(|m| !m.migration_type.is_down_migration())
            .map(|m| KnownMigration {
                version: m.version,
                description: m.description.to_string(),
                checksum: m.checksum.to_vec(),
            })
            .collect();
        Ok(MigrationStatus::compare(known, applied))
    }

    /// Whether the database answers.
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// A consistent copy of a SQLite database in `file` (which must not exist), taken
    /// while the portal serves: `VACUUM INTO` reads one snapshot of the database, as a
    /// reader does, so writers go on. SQLite only (PostgreSQL has `pg_dump`).
    #[tracing::instrument(skip_all, err)]
    pub async fn backup_into(&self, file: &std::path::Path) -> Result<()> {
        sqlx::query("VACUUM INTO $1")
            .bind(file.to_string_lossy().into_owned())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The current authentication epoch: it changes whenever a credential is revoked
    /// or a user is disabled, by any process using this database.
    pub async fn auth_epoch(&self) -> Result<i64> {
        let row = sqlx::query("SELECT value FROM meta WHERE key = 'auth_epoch'")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get(0)?)
    }

    /// A transaction that will write. On SQLite it takes the write lock at `BEGIN`
    /// (waiting up to the busy timeout for another writer), so a transaction that
    /// reads before it writes cannot fail with "database is locked" when another
    /// connection commits in between; PostgreSQL needs no such thing.
    pub(crate) async fn write(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        Ok(match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.pool.begin().await?,
        })
    }

    /// A change to credentials: run `guard`, then `then`, in one transaction, and bump
    /// the auth epoch so that every process drops what it cached. `NotFound` (and
    /// nothing changed) when `guard` changes no row; else the rows each of `then`
    /// changed.
    pub(crate) async fn change_credentials<'q>(
        &self,
        guard: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
        then: Vec<sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>>,
    ) -> Result<Vec<u64>> {
        let mut tx = self.write().await?;
        if guard.execute(&mut *tx).await?.rows_affected() == 0 {
            return Err(StoreError::NotFound);
        }
        let mut changed = Vec::with_capacity(then.len());
        for statement in then {
            changed.push(statement.execute(&mut *tx).await?.rows_affected());
        }
        Store::bump_auth_epoch(&mut *tx).await?;
        tx.commit().await?;
        Ok(changed)
    }

    pub(crate) async fn bump_auth_epoch<'c, E>(executor: E) -> Result<()>
    where
        E: sqlx::Executor<'c, Database = sqlx::Any>,
    {
        sqlx::query("UPDATE meta SET value = value + 1 WHERE key = 'auth_epoch'")
            .execute(executor)
            .await?;
        Ok(())
    }
}

fn opt_i64(row: &AnyRow, column: &str) -> Result<Option<i64>> {
    Ok(row.try_get::<Option<i64>, _>(column)?)
}

/// A 0/1 flag column (both databases store flags as integers).
fn flag(row: &AnyRow, column: &str) -> Result<bool> {
    Ok(row.try_get::<i64, _>(column)? != 0)
}

/// A migration this binary carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownMigration {
    pub version: i64,
    pub description: String,
    pub checksum: Vec<u8>,
}

/// A row of `_sqlx_migrations`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedMigration {
    pub version: i64,
    pub success: bool,
    pub checksum: Vec<u8>,
}

/// The database's migrations against this binary's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationStatus {
    /// How many this binary carries.
    pub known: usize,
    /// Applied, and the same as this binary's.
    pub current: usize,
    /// Not applied yet: `serve` or `migrate` applies them.
    pub pending: Vec<KnownMigration>,
    /// Applied by another binary (a newer release): this one does not know them.
    pub unknown: Vec<i64>,
    /// Applied with another checksum than this binary's: `migrate` refuses to run.
    pub modified: Vec<i64>,
    /// Started and not finished.
    pub failed: Vec<i64>,
}

impl MigrationStatus {
    /// Compare (pure).
    pub fn compare(known: Vec<KnownMigration>, applied: Vec<AppliedMigration>) -> Self {
        let mut status = MigrationStatus {
            known: known.len(),
            ..Self::default()
        };
        for a in &applied {
            match known.iter().find(|k| k.version == a.version) {
                _ if !a.success => status.failed.push(a.version),
                None => status.unknown.push(a.version),
                Some(k) if k.checksum != a.checksum => status.modified.push(a.version),
                Some(_) => status.current += 1,
            }
        }
        status.pending = known
            .into_iter()
            .filter(|k| !applied.iter().any(|a| a.version == k.version))
            .collect();
        status
    }
}

#[cfg(test)]
mod migration_status_tests {
    use super::*;

    fn known(version: i64, checksum: u8) -> KnownMigration {
        KnownMigration {
            version,
            description: format!("m{version}"),
            checksum: vec![checksum],
        }
    }

    fn applied(version: i64, checksum: u8, success: bool) -> AppliedMigration {
        AppliedMigration {
            version,
            success,
            checksum: vec![checksum],
        }
    }

    #[test]
    fn pending_unknown_modified_and_failed_migrations_are_told_apart() {
        let status = MigrationStatus::compare(
            vec![known(1, 1), known(2, 2), known(3, 3), known(4, 4)],
            vec![
                applied(1, 1, true),
                applied(2, 9, true),
                applied(3, 3, false),
                applied(7, 7, true),
            ],
        );
        assert_eq!(status.known, 4);
        assert_eq!(status.current, 1);
        assert_eq!(status.pending, vec![known(4, 4)]);
        assert_eq!(status.unknown, vec![7]);
        assert_eq!(status.modified, vec![2]);
        assert_eq!(status.failed, vec![3]);
    }

    #[test]
    fn a_database_without_migrations_has_every_one_pending() {
        let status = MigrationStatus::compare(vec![known(1, 1), known(2, 2)], vec![]);
        assert_eq!(status.pending.len(), 2);
        assert_eq!(status.current, 0);
    }
}
