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

/// Which audit entries to read: each field given must match (`from` inclusive,
/// `to` exclusive, in ms since the epoch).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<String>,
    pub target: Option<String>,
    pub from: Option<i64>,
    pub to: Option<i64>,
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
        self.audit_entries_matching(&AuditFilter::default(), limit)
            .await
    }

    /// The newest `limit` entries that match `filter`, newest first.
    pub async fn audit_entries_matching(
        &self,
        filter: &AuditFilter,
        limit: i64,
    ) -> Result<Vec<AuditEntry>> {
        let mut clauses: Vec<String> = Vec::new();
        let mut n = 0;
        let mut next = || {
            n += 1;
            n
        };
        for (column, value) in [
            ("actor", &filter.actor),
            ("action", &filter.action),
            ("target", &filter.target),
        ] {
            if value.is_some() {
                clauses.push(format!("{column} = ${}", next()));
            }
        }
        if filter.from.is_some() {
            clauses.push(format!("at >= ${}", next()));
        }
        if filter.to.is_some() {
            clauses.push(format!("at < ${}", next()));
        }
        let limit_arg = next();
        let sql = format!(
            "SELECT id, at, actor, action, target, detail, client_addr FROM audit_log {} \
             ORDER BY at DESC, id DESC LIMIT ${limit_arg}",
            if clauses.is_empty() {
                String::new()
            } else {
                format!("WHERE {}", clauses.join(" AND "))
            }
        );
        let mut query = sqlx::query(&sql);
        for value in [&filter.actor, &filter.action, &filter.target]
            .into_iter()
            .flatten()
        {
            query = query.bind(value.as_str());
        }
        for t in [filter.from, filter.to].into_iter().flatten() {
            query = query.bind(t);
        }
        let rows = query.bind(limit).fetch_all(&self.pool).await?;
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
