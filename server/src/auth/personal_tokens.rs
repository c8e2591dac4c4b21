//! Issuing personal API tokens: the one place that decides what token a caller may
//! create (name, scopes, lifetime). Both the API and the tokens form call it.
//!
//! A browser session (its cookie and CSRF token) may create any token its user's
//! rights allow. A token may create one only when it holds the `tokens` scope, and
//! then only within its own scopes and lifetime: a token never widens or outlives the
//! credential that made it, so a leaked `read` token cannot be turned into anything.

use crate::store::{ApiToken, NewApiToken, Store, StoreError};

use super::token::{self, Scopes};
use super::{Credential, Principal, Scope};
use crate::util::now_ms;

const DAY_MS: i64 = 24 * 3600 * 1000;

#[derive(Debug, Clone)]
pub struct TokenRequest {
    pub name: String,
    pub scopes: Vec<Scope>,
    /// Lifetime in days; `None` means the longest allowed.
    pub expires_in_days: Option<u32>,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("name must be 1-64 printable characters")]
    InvalidName,
    #[error("at least one scope is required")]
    NoScopes,
    #[error("cannot grant the {0} scope: the caller does not hold it")]
    ScopeNotHeld(Scope),
    #[error(
        "a token needs the tokens scope to create or revoke tokens; log in or use such a token"
    )]
    CannotMint,
    #[error("expires_in_days must be between 1 and {max}")]
    BadLifetime { max: u32 },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A token as created: the secret is returned this once.
#[derive(Debug)]
pub struct IssuedToken {
    pub token: ApiToken,
    pub secret: String,
}

/// Create a token for the caller. A token can only carry scopes its creator holds,
/// so no token ever widens its creator's rights.
pub async fn issue(
    store: &Store,
    caller: &Principal,
    request: &TokenRequest,
    max_days: u32,
) -> Result<IssuedToken, TokenError> {
    let name = request.name.trim();
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return Err(TokenError::InvalidName);
    }
    let scopes = Scopes::new(request.scopes.clone());
    if scopes.is_empty() {
        return Err(TokenError::NoScopes);
    }
    may_manage_tokens(caller)?;
    if let Some(missing) = scopes.iter().find(|s| !caller.has_scope(*s)) {
        return Err(TokenError::ScopeNotHeld(missing));
    }
    let days = request.expires_in_days.unwrap_or(max_days);
    if days == 0 || days > max_days {
        return Err(TokenError::BadLifetime { max: max_days });
    }
    let now = now_ms();
    let mut expires_at = now + i64::from(days) * DAY_MS;
    if let Credential::Token {
        expires_at: Some(parent),
        ..
    } = &caller.credential
    {
        expires_at = expires_at.min(*parent);
    }
    let (secret, hash) = token::generate();
    let token = store
        .create_api_token(
            &NewApiToken {
                user_id: caller.user_id,
                name,
                token_hash: &hash,
                scopes: &scopes.to_stored(),
                expires_at: Some(expires_at),
            },
            now,
        )
        .await?;
    Ok(IssuedToken { token, secret })
}

/// `Ok` when `caller` may revoke the user's token `token_id`: any token may revoke
/// itself; others take what creating one takes.
pub fn may_revoke(caller: &Principal, token_id: i64) -> Result<(), TokenError> {
    match &caller.credential {
        Credential::Token { id, .. } if *id == token_id => Ok(()),
        _ => may_manage_tokens(caller),
    }
}

/// `Ok` when `caller` may create and revoke the user's tokens: a browser session, or a
/// token with the `tokens` scope.
pub fn may_manage_tokens(caller: &Principal) -> Result<(), TokenError> {
    if caller.has_scope(Scope::Tokens) {
        Ok(())
    } else {
        Err(TokenError::CannotMint)
    }
}
