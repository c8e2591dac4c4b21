//! Quotas: the limits of a user, group or account, or every user's default. Each
//! change is written with its audit entry in one transaction.

use sqlx::Row;

use super::{NewAuditEntry, Result, Store, StoreError};

/// One stored quota; `limits` is JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRecord {
    pub id: i64,
    /// `default`, `user`, `group` or `account`.
    pub scope_kind: String,
    /// Empty for `default`.
    pub scope_name: String,
    pub limits: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub updated_by: String,
}

const COLUMNS: &str = "id, scope_kind, scope_name, limits, created_at, updated_at, updated_by";

fn record(row: &sqlx::any::AnyRow) -> Result<QuotaRecord> {
    Ok(QuotaRecord {
        id: row.try_get("id")?,
        scope_kind: row.try_get("scope_kind")?,
        scope_name: row.try_get("scope_name")?,
        limits: row.try_get("limits")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        updated_by: row.try_get("updated_by")?,
    })
}

impl Store {
    /// Every quota, default first, then by kind and name.
    pub async fn quotas(&self) -> Result<Vec<QuotaRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM quotas ORDER BY CASE scope_kind WHEN 'default' THEN 0 \
             WHEN 'user' THEN 1 WHEN 'group' THEN 2 ELSE 3 END, scope_name"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(record).collect()
    }

    pub async fn quota(&self, id: i64) -> Result<Option<QuotaRecord>> {
        let row = sqlx::query(&format!("SELECT {COLUMNS} FROM quotas WHERE id = $1"))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(record).transpose()
    }

    /// Create a quota; a quota for the same scope is a conflict.
    #[tracing::instrument(skip_all, fields(kind, name), err)]
    pub async fn create_quota(
        &self,
        kind: &str,
        name: &str,
        limits: &str,
        now: i64,
        audit: &NewAuditEntry<'_>,
    ) -> Result<QuotaRecord> {
        let mut tx = self.write().await?;
        let exists = sqlx::query("SELECT id FROM quotas WHERE scope_kind = $1 AND scope_name = $2")
            .bind(kind)
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        if exists.is_some() {
            return Err(StoreError::Conflict(format!("a quota for {kind} {name}")));
        }
        let row = sqlx::query(&format!(
            "INSERT INTO quotas (scope_kind, scope_name, limits, created_at, updated_at, \
             updated_by) VALUES ($1, $2, $3, $4, $4, $5) RETURNING {COLUMNS}"
        ))
        .bind(kind)
        .bind(name)
        .bind(limits)
        .bind(now)
        .bind(audit.actor)
        .fetch_one(&mut *tx)
        .await?;
        let created = record(&row)?;
        Self::audit_in(&mut tx, audit, now).await?;
        tx.commit().await?;
        Ok(created)
    }

    /// Replace a quota's limits; returns it before and after.
    pub async fn update_quota(
        &self,
        id: i64,
        limits: &str,
        now: i64,
        audit: &NewAuditEntry<'_>,
    ) -> Result<(QuotaRecord, QuotaRecord)> {
        let mut tx = self.write().await?;
        let before = sqlx::query(&format!("SELECT {COLUMNS} FROM quotas WHERE id = $1"))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or(StoreError::NotFound)?;
        let before = record(&before)?;
        let row = sqlx::query(&format!(
            "UPDATE quotas SET limits = $2, updated_at = $3, updated_by = $4 WHERE id = $1 \
             RETURNING {COLUMNS}"
        ))
        .bind(id)
        .bind(limits)
        .bind(now)
        .bind(audit.actor)
        .fetch_one(&mut *tx)
        .await?;
        let after = record(&row)?;
        Self::audit_in(&mut tx, audit, now).await?;
        tx.commit().await?;
        Ok((before, after))
    }

    /// Delete a quota; returns what it was.
    pub async fn delete_quota(
        &self,
        id: i64,
        now: i64,
        audit: &NewAuditEntry<'_>,
    ) -> Result<QuotaRecord> {
        let mut tx = self.write().await?;
        let row = sqlx::query(&format!(
            "DELETE FROM quotas WHERE id = $1 RETURNING {COLUMNS}"
        ))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound)?;
        let deleted = record(&row)?;
        Self::audit_in(&mut tx, audit, now).await?;
        tx.commit().await?;
        Ok(deleted)
    }
}
