//! The audit log: who did what, when, to what, from where.

use sqlx::Row;

use super::{Result, Store};

#[derive(Debug, Clone)]
pub struct NewAuditEntry<'a> {
    pub actor: &'a str,
    pub action: &'a str,
    pub target: &'a str,
    /// JSON text with before/after or other detail.
    pub detail: &'a str,
    pub client_addr: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub target: String,
    pub detail: String,
    pub client_addr: String,
}

impl Store {
    #[tracing::instrument(skip_all, fields(action = entry.action), err)]
    pub async fn audit(&self, entry: &NewAuditEntry<'_>, now: i64) -> Result<()> {
        let mut conn = self.pool.acquire().await?;
        Self::audit_in(&mut conn, entry, now).await
    }

    /// Write an audit entry on a connection, inside the transaction of the change.
    pub(super) async fn audit_in(
        conn: &mut sqlx::AnyConnection,
        entry: &NewAuditEntry<'_>,
        now: i64,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO audit_log (at, actor, action, target, detail, client_addr) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(now)
        .bind(entry.actor)
        .bind(entry.action)
        .bind(entry.target)
        .bind(entry.detail)
        .bind(entry.client_addr)
        .execute(conn)
        .await?;
        Ok(())
    }

    /// The newest `limit` entries, newest first.
    pub async fn audit_entries(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows = sqlx::query(
            "SELECT id, at, actor, action, target, detail, client_addr FROM audit_log \
             ORDER BY at DESC, id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok(AuditEntry {
                    id: row.try_get("id")?,
                    at: row.try_get("at")?,
                    actor: row.try_get("actor")?,
                    action: row.try_get("action")?,
                    target: row.try_get("target")?,
                    detail: row.try_get("detail")?,
                    client_addr: row.try_get("client_addr")?,
                })
            })
            .collect()
    }
}
