//! Interactive sessions: what the proxy needs to reach each one (socket directory,
//! secret) and where it stands. The scheduler owns the job behind a session; this
//! table links to it by `job_id`.
//! Must not touch: processes, the scheduler, or HTTP.

use scheduler::{GpuPer, GpuRequest, SliceKind};
use sqlx::any::AnyRow;
use sqlx::Row;

use super::{opt_i64, Result, Store, StoreError};

/// One session row. Times are Unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub id: i64,
    pub user_name: String,
    pub name: String,
    /// `notebook`, `terminal` or `tensorboard`.
    pub kind: String,
    pub environment: String,
    pub job_id: Option<i64>,
    /// The GPUs asked for (per node: a session is one node); `None` for none.
    pub gpus: Option<GpuRequest>,
    pub logdir: Option<String>,
    /// The folder a terminal opens in (`None`: the home).
    pub folder: Option<String>,
    pub socket_dir: String,
    pub secret: String,
    /// `pending`, `starting`, `ready`, `stopping` or `ended`.
    pub state: String,
    /// Why it ended: `stopped`, `idle`, `time_limit`, `failed`, `cancelled`.
    pub end_reason: Option<String>,
    pub message: Option<String>,
    pub created_at: i64,
    pub ready_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub last_activity: Option<i64>,
    /// The event log as JSON (`[{at, message}]`), written when it ended.
    pub events: Option<String>,
}

/// A session about to be submitted.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    pub user_name: &'a str,
    pub name: &'a str,
    pub kind: &'a str,
    pub environment: &'a str,
    pub gpus: Option<&'a GpuRequest>,
    pub logdir: Option<&'a str>,
    pub folder: Option<&'a str>,
    pub secret: &'a str,
}

const COLUMNS: &str = "id, user_name, name, kind, environment, job_id, gpu_kind, gpu_type, \
    gpu_count, logdir, folder, socket_dir, secret, state, end_reason, message, created_at, ready_at, \
    ended_at, last_activity, events";

/// The `gpu_kind`, `gpu_type` and `gpu_count` columns of a GPU request.
fn gpu_columns(gpus: Option<&GpuRequest>) -> (Option<&'static str>, Option<&str>, i64) {
    match gpus {
        None => (None, None, 0),
        Some(g) => match &g.kind {
            SliceKind::Gpu { r#type } => (Some("gpu"), r#type.as_deref(), i64::from(g.count)),
            SliceKind::Shard => (Some("shard"), None, i64::from(g.count)),
        },
    }
}

fn corrupt(message: String) -> StoreError {
    StoreError::Database(sqlx::Error::Decode(message.into()))
}

/// The GPU request of a row's `gpu_*` columns.
fn gpu_request(row: &AnyRow) -> Result<Option<GpuRequest>> {
    let kind: Option<String> = row.try_get("gpu_kind")?;
    let r#type: Option<String> = row.try_get("gpu_type")?;
    let count: i64 = row.try_get("gpu_count")?;
    let kind = match kind.as_deref() {
        None => return Ok(None),
        Some("gpu") => SliceKind::Gpu { r#type },
        Some("shard") => SliceKind::Shard,
        Some(other) => {
            return Err(corrupt(format!(
                "sessions.gpu_kind is {other:?}, not gpu or shard"
            )))
        }
    };
    let count =
        u32::try_from(count).map_err(|_| corrupt(format!("sessions.gpu_count is {count}")))?;
    Ok(Some(GpuRequest {
        kind,
        count,
        per: GpuPer::Node,
    }))
}

fn from_row(row: &AnyRow) -> Result<SessionRecord> {
    Ok(SessionRecord {
        id: row.try_get("id")?,
        user_name: row.try_get("user_name")?,
        name: row.try_get("name")?,
        kind: row.try_get("kind")?,
        environment: row.try_get("environment")?,
        job_id: opt_i64(row, "job_id")?,
        gpus: gpu_request(row)?,
        logdir: row.try_get("logdir")?,
        folder: row.try_get("folder")?,
        socket_dir: row.try_get("socket_dir")?,
        secret: row.try_get("secret")?,
        state: row.try_get("state")?,
        end_reason: row.try_get("end_reason")?,
        message: row.try_get("message")?,
        created_at: row.try_get("created_at")?,
        ready_at: opt_i64(row, "ready_at")?,
        ended_at: opt_i64(row, "ended_at")?,
        last_activity: opt_i64(row, "last_activity")?,
        events: row.try_get("events")?,
    })
}

impl Store {
    /// Record a new session (state `pending`) with its socket directory
    /// `<socket_root>/<id>`, unless the user has `max_active` sessions already or one of
    /// this name that has not ended (`Conflict`).
    #[tracing::instrument(skip_all, fields(user = new.user_name, name = new.name), err)]
    pub async fn create_session(
        &self,
        new: &NewSession<'_>,
        socket_root: &str,
        max_active: i64,
        now: i64,
    ) -> Result<SessionRecord> {
        let mut tx = self.write().await?;
        // Writing first serializes starts of the same user: SQLite takes its write lock
        // (a read first could not be upgraded while another writer commits), and
        // PostgreSQL locks the user's row until commit, so the count below is exact.
        sqlx::query("UPDATE users SET updated_at = updated_at WHERE username = $1")
            .bind(new.user_name)
            .execute(&mut *tx)
            .await?;
        let active: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM sessions WHERE user_name = $1 AND ended_at IS NULL",
        )
        .bind(new.user_name)
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
        if active >= max_active {
            return Err(StoreError::Conflict(format!(
                "you have {active} sessions already, the most allowed; stop one first"
            )));
        }
        let (gpu_kind, gpu_type, gpu_count) = gpu_columns(new.gpus);
        let row = sqlx::query(&format!(
            "INSERT INTO sessions (user_name, name, kind, environment, gpu_kind, gpu_type, \
             gpu_count, logdir, folder, socket_dir, secret, state, created_at, last_activity) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, '', $10, 'pending', $11, $11) \
             RETURNING {COLUMNS}"
        ))
        .bind(new.user_name)
        .bind(new.name)
        .bind(new.kind)
        .bind(new.environment)
        .bind(gpu_kind)
        .bind(gpu_type)
        .bind(gpu_count)
        .bind(new.logdir)
        .bind(new.folder)
        .bind(new.secret)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| {
            StoreError::conflict_on_unique(
                e,
                format!("you already have a session named {:?}", new.name),
            )
        })?;
        let mut record = from_row(&row)?;
        record.socket_dir = format!("{}/{}", socket_root.trim_end_matches('/'), record.id);
        sqlx::query("UPDATE sessions SET socket_dir = $2 WHERE id = $1")
            .bind(record.id)
            .bind(&record.socket_dir)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(record)
    }

    /// Link a session to the job that runs it.
    #[tracing::instrument(skip_all, fields(id, job_id), err)]
    pub async fn set_session_job(&self, id: i64, job_id: i64) -> Result<()> {
        sqlx::query("UPDATE sessions SET job_id = $2 WHERE id = $1")
            .bind(id)
            .bind(job_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Move a session that has not ended to `state` (`ready` also records when).
    #[tracing::instrument(skip_all, fields(id, state), err)]
    pub async fn set_session_state(&self, id: i64, state: &str, now: i64) -> Result<()> {
        sqlx::query(
            "UPDATE sessions SET state = $2, \
             ready_at = CASE WHEN $2 = 'ready' THEN COALESCE(ready_at, $3) ELSE ready_at END \
             WHERE id = $1 AND ended_at IS NULL",
        )
        .bind(id)
        .bind(state)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// End a session, once; a reason given when it was asked to stop is kept.
    #[tracing::instrument(skip_all, fields(id, reason), err)]
    pub async fn end_session(
        &self,
        id: i64,
        reason: &str,
        message: Option<&str>,
        now: i64,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE sessions SET state = 'ended', end_reason = COALESCE(end_reason, $2), \
             message = COALESCE($3, message), ended_at = $4 WHERE id = $1 AND ended_at IS NULL",
        )
        .bind(id)
        .bind(reason)
        .bind(message)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Keep a session's event log (JSON, bounded by the caller) once it has ended.
    #[tracing::instrument(skip_all, fields(id), err)]
    pub async fn set_session_events(&self, id: i64, events: &str) -> Result<()> {
        sqlx::query("UPDATE sessions SET events = $2 WHERE id = $1")
            .bind(id)
            .bind(events)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Record why a session is being stopped, before its job is cancelled.
    #[tracing::instrument(skip_all, fields(id, reason), err)]
    pub async fn stopping_session(&self, id: i64, reason: &str) -> Result<()> {
        sqlx::query(
            "UPDATE sessions SET state = 'stopping', end_reason = COALESCE(end_reason, $2) \
             WHERE id = $1 AND ended_at IS NULL",
        )
        .bind(id)
        .bind(reason)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Keep the last activity of sessions seen active.
    #[tracing::instrument(skip_all, fields(n = seen.len()), err)]
    pub async fn touch_sessions(&self, seen: &[(i64, i64)]) -> Result<()> {
        if seen.is_empty() {
            return Ok(());
        }
        let mut tx = self.write().await?;
        for (id, at) in seen {
            sqlx::query(
                "UPDATE sessions SET last_activity = $2 \
                 WHERE id = $1 AND (last_activity IS NULL OR last_activity < $2)",
            )
            .bind(*id)
            .bind(*at)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn session(&self, id: i64) -> Result<SessionRecord> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM sessions WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or(StoreError::NotFound)?;
        from_row(&row)
    }

    /// Sessions that have not ended: the proxy's routes after a restart.
    #[tracing::instrument(skip_all, err)]
    pub async fn active_sessions(&self) -> Result<Vec<SessionRecord>> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM sessions WHERE ended_at IS NULL ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(from_row)
        .collect()
    }

    /// How many sessions have not ended, by kind and state.
    #[tracing::instrument(skip_all, err)]
    pub async fn session_counts(&self) -> Result<Vec<(String, String, i64)>> {
        sqlx::query(
            "SELECT kind, state, COUNT(*) FROM sessions WHERE ended_at IS NULL \
             GROUP BY kind, state ORDER BY kind, state",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .collect()
    }

    /// Take `user`'s ended session `id` off the dashboard; whether there was one.
    pub async fn dismiss_session(&self, id: i64, user: &str, now: i64) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE sessions SET dismissed_at = $3 \
             WHERE id = $1 AND user_name = $2 AND ended_at IS NOT NULL",
        )
        .bind(id)
        .bind(user)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// A user's sessions, newest first: those not ended, and the last `ended` ended ones
    /// they have not dismissed.
    #[tracing::instrument(skip_all, fields(user), err)]
    pub async fn sessions_of(&self, user: &str, ended: i64) -> Result<Vec<SessionRecord>> {
        let mut rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM sessions WHERE user_name = $1 AND ended_at IS NULL ORDER BY id DESC"
        ))
        .bind(user)
        .fetch_all(&self.pool)
        .await?;
        if ended > 0 {
            rows.extend(
                sqlx::query(&format!(
                    "SELECT {COLUMNS} FROM sessions WHERE user_name = $1 AND ended_at IS NOT NULL \
                     AND dismissed_at IS NULL ORDER BY id DESC LIMIT $2"
                ))
                .bind(user)
                .bind(ended)
                .fetch_all(&self.pool)
                .await?,
            );
        }
        rows.iter().map(from_row).collect()
    }
}

impl Store {
    /// Sessions not ended of `user`, and of the members of each of `groups`, keyed
    /// `user:NAME` and `group:NAME`.
    pub async fn running_sessions(
        &self,
        user: &str,
        groups: &[String],
    ) -> Result<std::collections::BTreeMap<String, u32>> {
        let mut out = std::collections::BTreeMap::new();
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM sessions WHERE user_name = $1 AND ended_at IS NULL",
        )
        .bind(user)
        .fetch_one(&self.pool)
        .await?;
        out.insert(format!("user:{user}"), n as u32);
        for g in groups {
            let n: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM sessions s JOIN users u ON u.username = s.user_name \
                 JOIN memberships m ON m.user_id = u.id JOIN groups g ON g.id = m.group_id \
                 WHERE g.name = $1 AND s.ended_at IS NULL",
            )
            .bind(g)
            .fetch_one(&self.pool)
            .await?;
            out.insert(format!("group:{g}"), n as u32);
        }
        Ok(out)
    }
}
