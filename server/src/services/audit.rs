//! The audit log: what administrators (and users, for their own credentials) changed,
//! who, from where, and the state before and after.
//!
//! Owns: writing audit entries and reading them back. Must not touch: HTTP (callers
//! give the client address), the decision of what is audited (each service's rule).

use serde::Serialize;
use utoipa::ToSchema;

use crate::store::{NewAuditEntry, Store, StoreError};
use crate::util::rfc3339;

/// One audit entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditInfo {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub target: String,
    /// What changed: usually `{"before": …, "after": …}`.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
    pub client_addr: String,
}

/// Writes and reads the audit log. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Audit {
    store: Store,
}

impl Audit {
    pub fn new(store: Store) -> Audit {
        Audit { store }
    }

    /// Record that `actor`, calling from `client_addr`, did `action` to `target`.
    pub async fn record(
        &self,
        actor: &str,
        client_addr: &str,
        action: &str,
        target: &str,
        detail: serde_json::Value,
    ) -> Result<(), StoreError> {
        let entry = NewAuditEntry {
            actor,
            action,
            target,
            detail: &detail.to_string(),
            client_addr,
        };
        self.store.audit(&entry, crate::util::now_ms()).await
    }

    /// The newest `limit` entries, newest first.
    pub async fn recent(&self, limit: i64) -> Result<Vec<AuditInfo>, StoreError> {
        let entries = self.store.audit_entries(limit).await?;
        Ok(entries
            .into_iter()
            .map(|e| AuditInfo {
                id: e.id,
                at: rfc3339(e.at),
                actor: e.actor,
                action: e.action,
                target: e.target,
                detail: serde_json::from_str(&e.detail)
                    .unwrap_or(serde_json::Value::String(e.detail)),
                client_addr: e.client_addr,
            })
            .collect())
    }
}
