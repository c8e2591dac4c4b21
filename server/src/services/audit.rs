//! The audit log: what administrators (and users, for their own credentials) changed,
//! who, from where, and the state before and after.
//!
//! Owns: writing audit entries and reading them back, and the filter a reader asks
//! for (actor, action, target, time range), checked and bounded. Must not touch: HTTP
//! (callers give the client address and the query's pairs), the decision of what is
//! audited (each service's rule).

use serde::Serialize;
use utoipa::ToSchema;

use crate::accounting::{parse_time, FieldError};
pub use crate::store::AuditFilter;
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
        self.matching(&AuditFilter::default(), limit).await
    }

    /// The newest `limit` entries that match `filter`, newest first.
    pub async fn matching(
        &self,
        filter: &AuditFilter,
        limit: i64,
    ) -> Result<Vec<AuditInfo>, StoreError> {
        let entries = self.store.audit_entries_matching(filter, limit).await?;
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

/// Who ran a local administrator's command (`atrium user …`), for the audit log:
/// the account that ran it as its passwd entry names it (`root (command line)`),
/// and the one `sudo` was run by when it was (`ann (command line, sudo)`), never a
/// guess from `$USER`. `name` is the passwd name of the real `uid`, if it has one.
pub fn command_line_actor(sudo_user: Option<&str>, uid: u32, name: Option<&str>) -> String {
    let sudo_user = sudo_user.map(str::trim).filter(|u| !u.is_empty());
    match (sudo_user, name) {
        (Some(by), _) if uid == 0 => format!("{by} (command line, sudo)"),
        (_, Some(name)) => format!("{name} (command line)"),
        (_, None) => format!("uid {uid} (command line)"),
    }
}

/// The longest actor, action or target a filter may name.
pub const MAX_FILTER_LEN: usize = 200;

/// The filter of an audit query's parameters (`actor`, `action`, `target`, `from`,
/// `to`; empty values are no filter); other parameters are the caller's (`limit`,
/// `format`) and are left alone. The error names the parameter.
pub fn parse_filter(pairs: &[(String, String)]) -> Result<AuditFilter, FieldError> {
    let value = |name: &str| {
        pairs
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let text = |name: &'static str| -> Result<Option<String>, FieldError> {
        match value(name) {
            Some(v) if v.chars().count() > MAX_FILTER_LEN || v.contains('\0') => Err(FieldError {
                field: name,
                message: format!("must be at most {MAX_FILTER_LEN} characters of text"),
            }),
            other => Ok(other),
        }
    };
    let time = |name: &'static str| -> Result<Option<i64>, FieldError> {
        value(name).map(|v| parse_time(name, &v)).transpose()
    };
    let filter = AuditFilter {
        actor: text("actor")?,
        action: text("action")?,
        target: text("target")?,
        from: time("from")?,
        to: time("to")?,
    };
    if let (Some(from), Some(to)) = (filter.from, filter.to) {
        if to <= from {
            return Err(FieldError {
                field: "to",
                message: "must be after from".into(),
            });
        }
    }
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_command_line_actor_is_the_account_that_ran_it() {
        assert_eq!(
            command_line_actor(None, 0, Some("root")),
            "root (command line)"
        );
        assert_eq!(
            command_line_actor(Some("ann"), 0, Some("root")),
            "ann (command line, sudo)"
        );
        assert_eq!(
            command_line_actor(Some("ann"), 1000, Some("bob")),
            "bob (command line)",
            "sudo's variable counts only for root"
        );
        assert_eq!(
            command_line_actor(Some(" "), 7, None),
            "uid 7 (command line)"
        );
        assert!(!command_line_actor(None, 0, None).contains("unknown"));
    }

    #[test]
    fn a_filter_reads_its_parameters_and_names_a_bad_one() {
        let f = parse_filter(&pairs(&[
            ("actor", " admin "),
            ("action", "quota.create"),
            ("target", ""),
            ("from", "2026-01-01"),
            ("to", "2026-01-02T00:00:00Z"),
            ("limit", "5"),
        ]))
        .expect("filter");
        assert_eq!(f.actor.as_deref(), Some("admin"));
        assert_eq!(f.action.as_deref(), Some("quota.create"));
        assert_eq!(f.target, None, "empty is no filter");
        assert_eq!(f.from, Some(1_767_225_600_000));
        assert_eq!(f.to, Some(1_767_312_000_000));
        assert_eq!(parse_filter(&[]).expect("none"), AuditFilter::default());
        for (bad, field) in [
            (vec![("from", "yesterday")], "from"),
            (vec![("to", "2026-13-01")], "to"),
            (vec![("from", "2026-01-02"), ("to", "2026-01-01")], "to"),
            (vec![("actor", &"x".repeat(201) as &str)], "actor"),
        ] {
            let e = parse_filter(&pairs(&bad)).expect_err("refused");
            assert_eq!(e.field, field, "{bad:?}: {e}");
        }
    }
}
