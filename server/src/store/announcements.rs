//! `announcements`: administrators' messages to everyone, each in a time window.

use sqlx::Row;

use super::{NewAuditEntry, Result, Store, StoreError};

/// One announcement as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnouncementRecord {
    pub id: i64,
    pub message: String,
    /// `info`, `warning` or `critical`.
    pub severity: String,
    /// Shown from, until (ms since the epoch).
    pub starts_at: i64,
    pub ends_at: i64,
    pub created_by: String,
    pub created_at: i64,
}

const COLUMNS: &str = "id, message, severity, starts_at, ends_at, created_by, created_at";

fn record(row: &sqlx::any::AnyRow) -> Result<AnnouncementRecord> {
    Ok(AnnouncementRecord {
        id: row.try_get("id")?,
        message: row.try_get("message")?,
        severity: row.try_get("severity")?,
        starts_at: row.try_get("starts_at")?,
        ends_at: row.try_get("ends_at")?,
        created_by: row.try_get("created_by")?,
        created_at: row.try_get("created_at")?,
    })
}

impl Store {
    /// Store an announcement, audited in the same transaction.
    pub async fn create_announcement(
        &self,
        message: &str,
        severity: &str,
        starts_at: i64,
        ends_at: i64,
        now: i64,
        audit: &NewAuditEntry<'_>,
    ) -> Result<AnnouncementRecord> {
        let mut tx = self.write().await?;
        let row = sqlx::query(&format!(
            "INSERT INTO announcements (message, severity, starts_at, ends_at, created_by, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
        ))
        .bind(message)
        .bind(severity)
        .bind(starts_at)
        .bind(ends_at)
        .bind(audit.actor)
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        let created = record(&row)?;
        Self::audit_in(&mut tx, audit, now).await?;
        tx.commit().await?;
        Ok(created)
    }

    /// Remove an announcement, audited; the one removed.
    pub async fn delete_announcement(
        &self,
        id: i64,
        now: i64,
        audit: &NewAuditEntry<'_>,
    ) -> Result<AnnouncementRecord> {
        let mut tx = self.write().await?;
        let row = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM announcements WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(StoreError::NotFound)?;
        let gone = record(&row)?;
        sqlx::query("DELETE FROM announcements WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        Self::audit_in(&mut tx, audit, now).await?;
        tx.commit().await?;
        Ok(gone)
    }

    /// Announcements not over at `now`, soonest first; with `current`, only those
    /// shown at `now`.
    pub async fn announcements(&self, now: i64, current: bool) -> Result<Vec<AnnouncementRecord>> {
        let sql = if current {
            format!(
                "SELECT {COLUMNS} FROM announcements WHERE ends_at > $1 AND starts_at <= $1 \
                 ORDER BY starts_at, id LIMIT 100"
            )
        } else {
            format!(
                "SELECT {COLUMNS} FROM announcements WHERE ends_at > $1 \
                 ORDER BY starts_at, id LIMIT 100"
            )
        };
        sqlx::query(&sql)
            .bind(now)
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(record)
            .collect()
    }
}
