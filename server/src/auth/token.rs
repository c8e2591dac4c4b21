//! Personal API tokens and their scopes.
//!
//! A token is `atr_` followed by 32 random bytes (base64url). Only its SHA-256 is
//! stored; the secret is shown once, when it is created.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const TOKEN_PREFIX: &str = "atr_";

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Read the caller's own data.
    Read,
    /// Submit and manage batch jobs.
    Jobs,
    /// Start and stop interactive sessions.
    Sessions,
    /// Create and revoke the user's API tokens (within the creating token's own scopes
    /// and lifetime).
    Tokens,
    /// Administer the portal (administrators only).
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 5] = [
        Scope::Read,
        Scope::Jobs,
        Scope::Sessions,
        Scope::Tokens,
        Scope::Admin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Jobs => "jobs",
            Scope::Sessions => "sessions",
            Scope::Tokens => "tokens",
            Scope::Admin => "admin",
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scope {0:?} (known: read, jobs, sessions, tokens, admin)")]
pub struct UnknownScope(pub String);

impl FromStr for Scope {
    type Err = UnknownScope;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| UnknownScope(s.to_string()))
    }
}

/// A set of scopes, stored as space-separated words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes(Vec<Scope>);

impl Scopes {
    pub fn new(mut scopes: Vec<Scope>) -> Self {
        scopes.sort();
        scopes.dedup();
        Self(scopes)
    }
    pub fn all() -> Self {
        Self(Scope::ALL.to_vec())
    }
    pub fn contains(&self, scope: Scope) -> bool {
        self.0.contains(&scope)
    }
    pub fn is_subset_of(&self, other: &Scopes) -> bool {
        self.0.iter().all(|s| other.contains(*s))
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = Scope> + '_ {
        self.0.iter().copied()
    }
    pub fn to_stored(&self) -> String {
        self.0
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }
    /// Parse the stored form; unknown words (from a newer version) are dropped.
    pub fn from_stored(text: &str) -> Self {
        Self::new(
            text.split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect(),
        )
    }
}

/// A new token secret and the hash to store.
pub fn generate() -> (String, String) {
    let secret = format!("{TOKEN_PREFIX}{}", crate::util::random_text(32));
    let hash = hash(&secret);
    (secret, hash)
}

/// The stored form of a token secret.
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_round_trip_and_compare() {
        let scopes = Scopes::new(vec![Scope::Jobs, Scope::Read, Scope::Jobs]);
        assert_eq!(scopes.to_stored(), "read jobs");
        assert_eq!(Scopes::from_stored("read jobs future"), scopes);
        assert!(scopes.is_subset_of(&Scopes::all()));
        assert!(!Scopes::all().is_subset_of(&scopes));
        assert_eq!(
            "root".parse::<Scope>(),
            Err(UnknownScope("root".to_string()))
        );
    }

    #[test]
    fn secrets_are_random_and_hashed() {
        let (a, ha) = generate();
        let (b, hb) = generate();
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() > 40);
        assert_ne!(a, b);
        assert_ne!(ha, hb);
        assert_eq!(hash(&a), ha);
        assert_eq!(ha.len(), 64);
    }
}
