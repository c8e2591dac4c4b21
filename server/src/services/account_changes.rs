//! The changes to accounts that the portal (administrators' pages and API, through
//! [`super::Accounts`]) and the command line (`atrium user add|passwd|disable`) both
//! make: one place that writes them and their audit entries, whoever asks.
//!
//! Owns: adding a local account, setting a local account's password, disabling and
//! enabling an account (both end its browser sessions and revoke its API tokens), and
//! the audit entry of each, named by the actor the caller gives (a signed-in
//! administrator, or `services::audit::command_line_actor`'s words for the command
//! line). Must not touch: HTTP types, SQL (the store), the scheduler, the
//! authenticator's caches (the portal's caller invalidates them; the command line
//! runs beside a portal that notices the store's change).

use super::{Audit, ServiceError};
use crate::config::AccountsConfig;
use crate::store::{NewUser, Revoked, Store, User};
use crate::util::now_ms;

/// Who made a change, for its audit entry.
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    /// The administrator's username, or the command line's words for its caller.
    pub name: &'a str,
    /// Where the request came from (`local` for the command line).
    pub client_addr: &'a str,
}

/// Writes account changes with their audit entries. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AccountChanges {
    store: Store,
    audit: Audit,
}

impl AccountChanges {
    pub fn new(store: Store, audit: Audit) -> AccountChanges {
        AccountChanges { store, audit }
    }

    /// Add local account `new` with `password`, a member of `groups` (checked as
    /// `auth::local::add_user` checks them: the name, the ids, the home).
    pub async fn add(
        &self,
        actor: Actor<'_>,
        accounts: &AccountsConfig,
        new: NewUser,
        password: &str,
        groups: &[String],
    ) -> Result<User, ServiceError> {
        let user = crate::auth::local::add_user(&self.store, accounts, new, password, groups)
            .await
            .map_err(|e| match e.downcast_ref::<crate::store::StoreError>() {
                // The database out of reach is not the request's fault.
                Some(s) if s.is_unavailable() => ServiceError::Unavailable(format!("{e:#}")),
                _ => ServiceError::invalid("user", format!("{e:#}")),
            })?;
        let detail = serde_json::json!({
            "groups": groups,
            "uid": user.uid_number,
            "gid": user.gid_number,
            "home": user.home,
        });
        self.record(actor, "user.add", &user.username, detail)
            .await?;
        Ok(user)
    }

    /// Set local account `username`'s password: its browser sessions end and its API
    /// tokens are revoked. A directory account's password is the directory's.
    pub async fn set_password(
        &self,
        actor: Actor<'_>,
        username: &str,
        password: String,
    ) -> Result<Revoked, ServiceError> {
        let user = self.user(username).await?;
        if user.source != "local" {
            return Err(ServiceError::Conflict(format!(
                "{username} is not a local account; change its password in the directory"
            )));
        }
        if password.is_empty() {
            return Err(ServiceError::Invalid {
                field: "password",
                message: "password must not be empty".into(),
            });
        }
        let hash = tokio::task::spawn_blocking(move || crate::auth::password::hash(&password))
            .await
            .map_err(|e| ServiceError::Internal(e.to_string()))?
            .map_err(|e| ServiceError::Internal(e.to_string()))?;
        let revoked = self
            .store
            .set_password_hash(user.id, &hash, now_ms())
            .await?;
        let detail = serde_json::json!({ "revoked": revoked.to_json() });
        self.record(actor, "user.passwd", username, detail).await?;
        Ok(revoked)
    }

    /// Disable (or enable) `username`'s account: disabling ends its browser sessions
    /// and revokes its API tokens at once and for good. Returns the account as it was
    /// and what was revoked.
    pub async fn set_disabled(
        &self,
        actor: Actor<'_>,
        username: &str,
        disabled: bool,
    ) -> Result<(User, Revoked), ServiceError> {
        let user = self.user(username).await?;
        let revoked = self.store.set_disabled(user.id, disabled, now_ms()).await?;
        let action = if disabled {
            "user.disable"
        } else {
            "user.enable"
        };
        let detail = serde_json::json!({
            "before": {"disabled": user.disabled},
            "after": {"disabled": disabled},
            "revoked": revoked.to_json(),
        });
        self.record(actor, action, username, detail).await?;
        Ok((user, revoked))
    }

    async fn user(&self, username: &str) -> Result<User, ServiceError> {
        self.store
            .user_by_name(username)
            .await?
            .ok_or(ServiceError::NotFound)
    }

    async fn record(
        &self,
        actor: Actor<'_>,
        action: &str,
        target: &str,
        detail: serde_json::Value,
    ) -> Result<(), ServiceError> {
        self.audit
            .record(actor.name, actor.client_addr, action, target, detail)
            .await?;
        Ok(())
    }
}
