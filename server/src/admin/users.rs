//! Accounts as administrators change them: disable and enable, audited with the
//! account's state before and after. Disabling an account ends its browser sessions and
//! revokes its API tokens, at once (the store bumps the auth epoch; this process drops
//! its cache) and for good: enabling it again brings none of them back.

use crate::auth::Authenticator;
use crate::store::{Store, StoreError, User};

use super::quotas::Audit;

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("no such user")]
    NotFound,
    #[error("you cannot disable your own account")]
    Myself,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Disable or enable `username`'s account (an administrator may not disable their
/// own) and write the audit entry; returns the account as it is now.
pub async fn set_disabled(
    store: &Store,
    auth: &Authenticator,
    username: &str,
    disabled: bool,
    now: i64,
    audit: Audit<'_>,
) -> Result<User, UserError> {
    if disabled && username == audit.actor {
        return Err(UserError::Myself);
    }
    let user = store
        .user_by_name(username)
        .await?
        .ok_or(UserError::NotFound)?;
    let revoked = store.set_disabled(user.id, disabled, now).await?;
    auth.invalidate();
    let action = if disabled {
        "user.disable"
    } else {
        "user.enable"
    };
    let detail = serde_json::json!({
        "before": {"disabled": user.disabled},
        "after": {"disabled": disabled},
        "revoked": revoked.to_json(),
    })
    .to_string();
    store
        .audit(&audit.entry(action, username, &detail), now)
        .await?;
    Ok(User { disabled, ..user })
}
