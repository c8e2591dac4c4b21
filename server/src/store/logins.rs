//! Browser login sessions, keyed by the id (`jti`) of the JWT that carries them.

use sqlx::Row;

use super::{opt_i64, Result, Store, StoreError};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginSession {
    pub id: String,
    pub user_id: i64,
    pub created_at: i64,
    pub expires_at: i64,
    pub revoked_at: Option<i64>,
}

impl Store {
    #[tracing::instrument(skip_all, fields(user_id), err)]
    pub async fn create_login_session(
        &self,
        id: &str,
        user_id: i64,
        now: i64,
        expires_at: i64,
        client_addr: &str,
        user_agent: &str,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO login_sessions (id, user_id, created_at, expires_at, client_addr, user_agent) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id)
        .bind(user_id)
        .bind(now)
        .bind(expires_at)
        .bind(client_addr)
        .bind(user_agent)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn login_session(&self, id: &str) -> Result<Option<LoginSession>> {
        let row = sqlx::query(
            "SELECT id, user_id, created_at, expires_at, revoked_at FROM login_sessions WHERE id = $1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| {
            Ok(LoginSession {
                id: row.try_get("id")?,
                user_id: row.try_get("user_id")?,
                created_at: row.try_get("created_at")?,
                expires_at: row.try_get("expires_at")?,
                revoked_at: opt_i64(&row, "revoked_at")?,
            })
        })
        .transpose()
    }

    /// Move the expiry of a live session forward (sliding renewal).
    pub async fn extend_login_session(&self, id: &str, expires_at: i64) -> Result<()> {
        sqlx::query(
            "UPDATE login_sessions SET expires_at = $1 WHERE id = $2 AND revoked_at IS NULL",
        )
        .bind(expires_at)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Revoke a session. Returns whether it was live.
    #[tracing::instrument(skip_all, err)]
    pub async fn revoke_login_session(&self, id: &str, now: i64) -> Result<bool> {
        let revoke = sqlx::query(
            "UPDATE login_sessions SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(id);
        match self.change_credentials(revoke, Vec::new()).await {
            Ok(_) => Ok(true),
            Err(StoreError::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Forget sessions that expired more than `keep_ms` ago.
    pub async fn purge_login_sessions(&self, now: i64, keep_ms: i64) -> Result<u64> {
        let done = sqlx::query("DELETE FROM login_sessions WHERE expires_at < $1")
            .bind(now - keep_ms)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected())
    }
}
