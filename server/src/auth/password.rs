//! Password hashing with argon2id (the `argon2` crate's defaults: 19 MiB, 2 passes).
//! These functions are CPU-heavy: call them from a blocking thread.

use std::sync::OnceLock;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

#[derive(Debug, thiserror::Error)]
#[error("cannot hash password: {0}")]
pub struct HashError(String);

pub fn hash(password: &str) -> Result<String, HashError> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
        .map_err(|e| HashError(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| HashError(e.to_string()))
}

/// Whether `password` matches `stored`. A malformed stored hash never matches.
pub fn verify(stored: &str, password: &str) -> bool {
    match PasswordHash::new(stored) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

/// Spend the same work as a real verification, for unknown users, so that response
/// times do not tell which usernames exist.
pub fn verify_dummy(password: &str) {
    static DUMMY: OnceLock<Option<String>> = OnceLock::new();
    if let Some(stored) = DUMMY.get_or_init(|| hash("atrium-dummy-password").ok()) {
        let _ = verify(stored, password);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_differ() {
        let a = hash("correct horse").expect("hash");
        let b = hash("correct horse").expect("hash");
        assert_ne!(a, b, "salted");
        assert!(a.starts_with("$argon2id$"));
        assert!(verify(&a, "correct horse"));
        assert!(!verify(&a, "correct horse "));
        assert!(!verify("not a hash", "x"));
    }
}
