//! Authentication: who is calling, and with which rights.
//!
//! Owns: password hashing, local-account login, browser session tokens (JWT) and their
//! revocation, API tokens and scopes, the failed-login rate limit, CSRF tokens, and the
//! resolution of a request's credentials into a [`Principal`].
//! Must not touch: HTTP routing or page rendering; SQL (it calls the store).

pub mod csrf;
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
