//! Browser session tokens: HS256 JWTs carried in an HttpOnly cookie.
//!
//! Only HS256 is accepted (so `alg: none` and algorithm confusion are refused), `exp`
//! is required and checked without leeway, and every token names its login session
//! (`jti`) so that logout can revoke it.

use std::path::Path;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    /// User id.
    pub sub: String,
    /// Username, for logs.
    pub name: String,
    /// Login session id.
    pub jti: String,
    /// Issued at (seconds).
    pub iat: i64,
    /// Expires at (seconds).
    pub exp: i64,
    /// When the user typed their password (seconds): bounds sliding renewal.
    pub auth_time: i64,
    /// The CSRF token of this login session.
    pub csrf: String,
}

pub struct Keys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(***)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read or create the session key {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("the session key in {0} is too short (at least 32 bytes)")]
    TooShort(String),
}

impl Keys {
    pub fn from_secret(secret: &[u8]) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.validate_exp = true;
        validation.set_required_spec_claims(&["exp", "sub", "jti"]);
        Self {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
        }
    }

    /// Read the key from `path`, creating a random one (mode 0600) on first start.
    pub fn load_or_create(path: &Path) -> Result<Self, KeyError> {
        Ok(Self::from_secret(&Self::read_or_create_secret(path)?))
    }

    /// The secret kept in `path` (0600), made on first use.
    pub fn read_or_create_secret(path: &Path) -> Result<Vec<u8>, KeyError> {
        let io = |source| KeyError::Io {
            path: path.display().to_string(),
            source,
        };
        if !path.exists() {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let key = crate::util::random_text(48);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(io)?;
            file.write_all(key.as_bytes()).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        let key = std::fs::read(path).map_err(io)?;
        let key = key.trim_ascii();
        if key.len() < 32 {
            return Err(KeyError::TooShort(path.display().to_string()));
        }
        Ok(key.to_vec())
    }

    pub fn issue(&self, claims: &Claims) -> Result<String, jsonwebtoken::errors::Error> {
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
    }

    /// The claims of a genuine, unexpired token.
    pub fn verify(&self, token: &str) -> Option<Claims> {
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .ok()
            .map(|data| data.claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn claims(exp: i64) -> Claims {
        Claims {
            sub: "1".into(),
            name: "alice".into(),
            jti: "j1".into(),
            iat: 0,
            exp,
            auth_time: 0,
            csrf: "c".into(),
        }
    }

    fn now() -> i64 {
        crate::util::now_secs()
    }

    #[test]
    fn genuine_tokens_verify() {
        let keys = Keys::from_secret(b"0123456789abcdef0123456789abcdef");
        let claims = claims(now() + 60);
        let token = keys.issue(&claims).expect("issue");
        assert_eq!(keys.verify(&token), Some(claims));
    }

    #[test]
    fn expired_forged_and_unsigned_tokens_are_refused() {
        let keys = Keys::from_secret(b"0123456789abcdef0123456789abcdef");
        let expired = keys.issue(&claims(now() - 1)).expect("issue");
        assert_eq!(keys.verify(&expired), None);

        let other = Keys::from_secret(b"another key, another key, another");
        let forged = other.issue(&claims(now() + 60)).expect("issue");
        assert_eq!(keys.verify(&forged), None);

        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header = b64.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let body = b64.encode(serde_json::to_vec(&claims(now() + 60)).expect("json"));
        assert_eq!(keys.verify(&format!("{header}.{body}.")), None);
    }

    #[test]
    fn key_file_is_created_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("jwt.key");
        let a = Keys::load_or_create(&path).expect("create");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = Keys::load_or_create(&path).expect("reuse");
        let token = a.issue(&claims(now() + 60)).expect("issue");
        assert!(b.verify(&token).is_some());
    }
}
