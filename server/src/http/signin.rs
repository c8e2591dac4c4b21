//! Signing in with a password, shared by the login form and `POST /api/v1/login`:
//! rate limit, the login methods, metrics, and the new browser session.

use std::time::Duration;

use actix_web::http::header;
use actix_web::HttpRequest;

use super::{ApiError, AppState};
use crate::auth::local::LoginError;
use crate::auth::now_ms;
use crate::auth::principal::NewLogin;
use crate::metrics::LoginOutcome;
use crate::store::User;

#[derive(Debug)]
pub enum Failure {
    /// Unknown user or wrong password (one answer for both).
    Invalid,
    RateLimited(Duration),
    NotAllowed,
    DirectoryUnavailable,
    Unavailable(ApiError),
}

impl From<Failure> for ApiError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Invalid => ApiError::InvalidCredentials,
            Failure::RateLimited(retry_after) => ApiError::TooManyRequests { retry_after },
            Failure::NotAllowed => {
                ApiError::forbidden("your account is not in a group allowed to use this portal")
            }
            Failure::DirectoryUnavailable => ApiError::DirectoryUnavailable,
            Failure::Unavailable(e) => e,
        }
    }
}

/// Check the password and start a browser session.
pub async fn sign_in(
    state: &AppState,
    req: &HttpRequest,
    username: &str,
    password: &str,
) -> Result<(User, NewLogin), Failure> {
    let addr = state.client_addr(req);
    let key = state.logins.rate_limit_key(username);
    if let Err(retry_after) = state.limiter.check(&key, &addr, now_ms()) {
        state.metrics.login(LoginOutcome::RateLimited);
        tracing::warn!(user = %key, client = %addr, "login rate limited");
        return Err(Failure::RateLimited(retry_after));
    }
    let user = match state.logins.login(username, password).await {
        Ok(user) => user,
        Err(LoginError::InvalidCredentials) => {
            state.limiter.record_failure(&key, &addr, now_ms());
            state.metrics.login(LoginOutcome::Failed);
            tracing::info!(user = %key, client = %addr, "login failed");
            return Err(Failure::Invalid);
        }
        Err(LoginError::NotAllowed) => {
            state.metrics.login(LoginOutcome::Failed);
            tracing::info!(user = %key, client = %addr, "login refused: not in an allowed group");
            return Err(Failure::NotAllowed);
        }
        Err(LoginError::DirectoryUnavailable(cause)) => {
            tracing::error!(cause = %cause, "login failed: directory unavailable");
            return Err(Failure::DirectoryUnavailable);
        }
        Err(LoginError::Unavailable(cause)) => {
            return Err(Failure::Unavailable(ApiError::Unavailable(cause)));
        }
    };
    state.limiter.record_success(&key);
    state.metrics.login(LoginOutcome::Ok);
    let ua = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let login = state
        .auth
        .start_session(&user, &addr, ua)
        .await
        .map_err(|e| Failure::Unavailable(e.into()))?;
    tracing::info!(user = %user.username, client = %addr, source = %user.source, "login");
    // The home and templates in the background: a login never waits on storage.
    let (homes, store, who) = (state.homes.clone(), state.store.clone(), user.clone());
    tokio::spawn(async move { homes.prepare(&store, &who).await });
    Ok((user, login))
}
