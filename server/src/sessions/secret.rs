//! Session tokens, kept so that a copy of the database does not hand them out.
//!
//! The database stores only a random nonce (`hmac:<nonce>`, not secret); the token
//! the proxy adds to every request and the server checks is HMAC-SHA256 of that nonce
//! under the portal's secret key (the one that signs browser logins:
//! `auth.jwt_secret`, or `jwt.key` in the data directory, 0600). The token is written
//! only where it is used: the session's token file (0600, the user's) and the proxy's
//! memory. Rows from before this scheme hold the token itself and keep working.
//!
//! Must not touch: the database, processes, HTTP.

use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "hmac:";

/// Derives session tokens from their stored nonces.
#[derive(Clone)]
pub struct SessionSecrets {
    key: Vec<u8>,
}

impl std::fmt::Debug for SessionSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionSecrets(..)")
    }
}

impl SessionSecrets {
    pub fn new(key: &[u8]) -> SessionSecrets {
        SessionSecrets { key: key.to_vec() }
    }

    /// A fresh value to store for a new session.
    pub fn new_nonce() -> String {
        format!("{PREFIX}{}", crate::util::random_text(32))
    }

    /// The token of the session whose stored value is `stored`.
    pub fn token(&self, stored: &str) -> String {
        if !stored.starts_with(PREFIX) {
            // Stored before tokens were derived: the value is the token.
            return stored.to_string();
        }
        // HMAC takes a key of any length.
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.key) else {
            return String::new();
        };
        mac.update(b"atrium session token\0");
        mac.update(stored.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_derived_from_the_key_and_not_stored() {
        let a = SessionSecrets::new(b"a key of the portal, long enough to sign");
        let b = SessionSecrets::new(b"another portal's key, just as long as it");
        let stored = SessionSecrets::new_nonce();
        let token = a.token(&stored);
        assert_eq!(token.len(), 64);
        assert!(!stored.contains(&token) && !token.contains(&stored[PREFIX.len()..]));
        assert_eq!(
            a.token(&stored),
            token,
            "the same nonce gives the same token"
        );
        assert_ne!(b.token(&stored), token, "another key gives another token");
        assert_ne!(a.token(&SessionSecrets::new_nonce()), token);
        assert_eq!(a.token("legacy-token"), "legacy-token");
    }
}
