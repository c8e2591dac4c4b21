//! The audit log: what administrators (and users, for their own credentials) changed,
//! who, from where, and the state before and after.
//!
//! Owns: writing audit entries and reading them back. Must not touch: HTTP (callers
//! give the client address), the decision of what is audited (each service's rule).

use crate::store::{AuditEntry, NewAuditEntry, Store, StoreError};

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
    pub async fn recent(&self, limit: i64) -> Result<Vec<AuditEntry>, StoreError> {
        self.store.audit_entries(limit).await
    }
}
