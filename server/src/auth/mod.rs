//! Authentication: who is calling, and with which rights.
//!
//! Owns: password hashing, local-account login, browser session tokens (JWT) and their
//! revocation, API tokens and scopes, the failed-login rate limit, CSRF tokens, and the
//! resolution of a request's credentials into a [`Principal`].
//! Must not touch: HTTP routing or page rendering; SQL (it calls the store).

pub mod csrf;
pub mod groups;
pub mod jwt;
pub mod ldap;
pub mod local;
pub mod login;
pub mod password;
pub mod personal_tokens;
pub mod principal;
pub mod rate_limit;
pub mod token;

pub use principal::{Authenticator, Credential, Principal};
pub use token::Scope;

/// Unix time in milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `n` random bytes as unpadded base64url text.
pub fn random_text(n: usize) -> String {
    use base64::Engine;
    use rand::RngCore;
    let mut bytes = vec![0u8; n];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
