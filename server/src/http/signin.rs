//! Signing in with a password, shared by the login form and `POST /api/v1/login`:
//! rate limit, the login methods, metrics, and the new browser session.

use std::time::Duration;

use actix_web::http::header;
use actix_web::HttpRequest;

use super::{ApiError, AppState};
use crate::auth::local::LoginError;
use crate::auth::principal::NewLogin;
use crate::metrics::LoginOutcome;
use crate::services::records::User;
use crate::util::now_ms;

/// How long a login waits while its address is full of other logins being checked
/// (many people behind one address at once) before it is refused.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub enum Failure {
    /// Unknown user or wrong password (one answer for both).
    Invalid,
    RateLimited(Duration),
    NotAllowed,
    DirectoryUnavailable,
    /// Too many password checks in progress.
    Busy(Duration),
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
            Failure::Busy(retry_after) => ApiError::Busy {
                what: "the portal is busy".into(),
                retry_after,
            },
            Failure::Unavailable(e) => e,
        }
    }
}

/// How long a client refused because the portal is busy checking passwords is asked
/// to wait.
const BUSY_RETRY: Duration = Duration::from_secs(1);

/// Check the password and start a browser session. The attempt is reserved with the
/// rate limiter before the password is checked, so concurrent guesses are counted.
pub async fn sign_in(
    state: &AppState,
    req: &HttpRequest,
    username: &str,
    password: &str,
) -> Result<(User, NewLogin), Failure> {
    let addr = state.client_addr(req);
    let key = state.logins.rate_limit_key(username);
    let attempt = match state
        .limiter
        .reserve_waiting(&key, &addr, now_ms, IN_FLIGHT_WAIT)
        .await
    {
        Ok(attempt) => attempt,
        Err(retry_after) => {
            state.metrics.login(LoginOutcome::RateLimited);
            tracing::warn!(user = %key, client = %addr, "login rate limited");
            return Err(Failure::RateLimited(retry_after));
        }
    };
    let user = match state.logins.login(username, password).await {
        Ok(user) => user,
        Err(LoginError::InvalidCredentials) => {
            state.limiter.failed(attempt);
            state.metrics.login(LoginOutcome::Failed);
            tracing::info!(user = %key, client = %addr, "login failed");
            return Err(Failure::Invalid);
        }
        Err(e) => {
            state.limiter.release(attempt);
            return Err(unchecked(state, &key, &addr, e));
        }
    };
    state.limiter.succeeded(attempt);
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
    let (homes, who) = (state.homes.clone(), user.clone());
    tokio::spawn(async move { homes.prepare(&who).await });
    Ok((user, login))
}

/// A login whose password was not found wrong: why, as a [`Failure`].
fn unchecked(state: &AppState, key: &str, addr: &str, e: LoginError) -> Failure {
    match e {
        LoginError::InvalidCredentials => Failure::Invalid,
        LoginError::NotAllowed => {
            state.metrics.login(LoginOutcome::Failed);
            tracing::info!(user = %key, client = %addr, "login refused: not in an allowed group");
            Failure::NotAllowed
        }
        LoginError::Busy => {
            state.metrics.login(LoginOutcome::RateLimited);
            tracing::warn!(user = %key, client = %addr, "login refused: too many password checks in progress");
            Failure::Busy(BUSY_RETRY)
        }
        LoginError::DirectoryUnavailable(cause) => {
            tracing::error!(cause = %cause, "login failed: directory unavailable");
            Failure::DirectoryUnavailable
        }
        LoginError::Unavailable(cause) => Failure::Unavailable(ApiError::Unavailable(cause)),
    }
}
