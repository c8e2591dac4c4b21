//! Local accounts: username rules, password login, and the first administrator.

use crate::store::{NewUser, Store, StoreError, User};

use super::{now_ms, password};

/// Why a login failed. Unknown users and wrong passwords share one variant, so that
/// nobody learns which usernames exist.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    #[error("invalid username or password")]
    InvalidCredentials,
    /// Right password, but not in a group allowed to use the portal.
    #[error("not a member of a group allowed to use this portal")]
    NotAllowed,
    #[error("directory unavailable: {0}")]
    DirectoryUnavailable(String),
    #[error("login service unavailable: {0}")]
    Unavailable(String),
}

impl From<StoreError> for LoginError {
    fn from(e: StoreError) -> Self {
        LoginError::Unavailable(e.to_string())
    }
}

/// A username as atrium accepts it: POSIX-style, lowercase, 1–32 characters,
/// starting with a letter or underscore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Username(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "username must be 1-32 characters of a-z, 0-9, '_', '.', '-', starting with a letter or '_'"
)]
pub struct InvalidUsername;

impl Username {
    pub fn parse(raw: &str) -> Result<Self, InvalidUsername> {
        let name = raw.trim();
        let mut chars = name.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
        let rest_ok = chars
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-'));
        if first_ok && rest_ok && name.len() <= 32 {
            Ok(Self(name.to_string()))
        } else {
            Err(InvalidUsername)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Check a local account's password. Unknown, disabled and non-local accounts cost
/// the same time as a wrong password and give the same error.
pub async fn login(store: &Store, username: &str, pass: &str) -> Result<User, LoginError> {
    verify(find(store, username).await?, pass).await
}

/// The account a login name refers to, if the name is valid and the account exists.
pub async fn find(store: &Store, username: &str) -> Result<Option<User>, StoreError> {
    match Username::parse(username) {
        Ok(name) => store.user_by_name(name.as_str()).await,
        Err(_) => Ok(None),
    }
}

/// Check `pass` against a local account found by [`find`].
pub async fn verify(user: Option<User>, pass: &str) -> Result<User, LoginError> {
    let pass = pass.to_string();
    let stored = user
        .as_ref()
        .filter(|u| !u.disabled && u.source == "local")
        .and_then(|u| u.password_hash.clone());
    let ok = tokio::task::spawn_blocking(move || match stored {
        Some(hash) if !pass.is_empty() => password::verify(&hash, &pass),
        _ => {
            password::verify_dummy(&pass);
            false
        }
    })
    .await
    .map_err(|e| LoginError::Unavailable(e.to_string()))?;
    match user {
        Some(user) if ok => Ok(user),
        _ => Err(LoginError::InvalidCredentials),
    }
}

/// Create a local account with a password and groups.
pub async fn add_user(
    store: &Store,
    user: NewUser,
    pass: &str,
    groups: &[String],
) -> anyhow::Result<User> {
    let name = Username::parse(&user.username)?;
    if pass.is_empty() {
        anyhow::bail!("password must not be empty");
    }
    let pass = pass.to_string();
    let hash = tokio::task::spawn_blocking(move || password::hash(&pass)).await??;
    let now = now_ms();
    let created = store
        .create_local_user(
            &NewUser {
                username: name.as_str().to_string(),
                password_hash: Some(hash),
                ..user
            },
            now,
        )
        .await?;
    for group in groups {
        let gid = store.ensure_group(group, "local", now).await?;
        store.add_member(created.id, gid).await?;
    }
    Ok(created)
}

/// On first start with no administrator, create `admin` with a random password.
/// Returns the password to print once, or `None` when an administrator exists.
pub async fn bootstrap_admin(
    store: &Store,
    admin_groups: &[String],
) -> anyhow::Result<Option<String>> {
    if store.any_member_of(admin_groups).await? {
        return Ok(None);
    }
    let Some(group) = admin_groups.first() else {
        return Ok(None);
    };
    if let Some(existing) = store.user_by_name("admin").await? {
        anyhow::bail!(
            "no administrator exists and user 'admin' (id {}) is not in group {group:?}: \
             run `atrium user add NAME --admin` to create one",
            existing.id
        );
    }
    let pass = super::random_text(18);
    add_user(
        store,
        NewUser {
            username: "admin".into(),
            display_name: "Administrator".into(),
            ..NewUser::default()
        },
        &pass,
        std::slice::from_ref(group),
    )
    .await?;
    Ok(Some(pass))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_are_posix_style() {
        assert_eq!(Username::parse(" alice ").map(|u| u.0), Ok("alice".into()));
        for ok in ["a", "_svc", "j.doe-2", "abcdefghijklmnopqrstuvwxyz012345"] {
            assert!(Username::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "Alice",
            "1abc",
            "a b",
            "a*",
            "a)(uid=*",
            "a\0",
            "é",
            "-x",
            "abcdefghijklmnopqrstuvwxyz0123456",
        ] {
            assert!(Username::parse(bad).is_err(), "{bad:?}");
        }
    }
}
