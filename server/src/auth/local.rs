//! Local accounts: username rules, password login, and the first administrator.

use anyhow::Context as _;

use crate::config::AccountsConfig;
use crate::store::{NewUser, Store, StoreError, User};

use super::password;
use crate::domain::groups::GroupList;
use crate::util::now_ms;

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
    /// Too many password checks in progress: try again in a moment.
    #[error("too many logins in progress")]
    Busy,
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

/// The account a login name refers to, if the name is valid and the account exists.
pub async fn find(store: &Store, username: &str) -> Result<Option<User>, StoreError> {
    match Username::parse(username) {
        Ok(name) => store.user_by_name(name.as_str()).await,
        Err(_) => Ok(None),
    }
}

/// Check `pass` against a local account found by [`find`]. Unknown, disabled and
/// non-local accounts cost the same time as a wrong password and give the same error.
pub async fn verify(user: Option<User>, pass: &str) -> Result<User, LoginError> {
    let pass = pass.to_string();
    let stored = user
        .as_ref()
        .filter(|u| !u.disabled && u.source == "local")
        .and_then(|u| u.password_hash.clone());
    let ok = password::off_thread(move || match stored {
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

/// Create a local account with a password and groups. Without a uid it gets the
/// lowest free one of `accounts.uid_min..=uid_max`; its gid defaults to its uid (a
/// user private group) and its home to `<accounts.home_root>/<username>`.
pub async fn add_user(
    store: &Store,
    accounts: &AccountsConfig,
    user: NewUser,
    pass: &str,
    groups: &[String],
) -> anyhow::Result<User> {
    let name = Username::parse(&user.username)?;
    if pass.is_empty() {
        anyhow::bail!("password must not be empty");
    }
    let uid = user.uid_number.map(|n| posix_id("uid", n)).transpose()?;
    let gid = user.gid_number.map(|n| posix_id("gid", n)).transpose()?;
    let home = match user.home {
        Some(home) if !home.starts_with('/') => {
            anyhow::bail!("home {home:?} must be an absolute path")
        }
        Some(home) => home,
        None => accounts
            .home_root
            .join(name.as_str())
            .to_str()
            .context("accounts.home_root is not UTF-8")?
            .to_string(),
    };
    let pass = pass.to_string();
    let hash = password::off_thread(move || password::hash(&pass)).await??;
    let now = now_ms();
    let new = NewUser {
        username: name.as_str().to_string(),
        password_hash: Some(hash),
        uid_number: uid.map(i64::from),
        gid_number: gid.or(uid).map(i64::from),
        home: Some(home),
        ..user
    };
    let created = match uid {
        Some(_) => store.create_local_user(&new, now).await?,
        None => store
            .create_local_user_allocating_uid(
                &new,
                accounts.uid_min..=accounts.uid_max,
                system_knows_id,
                now,
            )
            .await
            .map_err(|e| match e {
                StoreError::NoFreeUid { min, max } => anyhow::anyhow!(
                    "no free uid left in {min}..={max} (accounts.uid_min/uid_max): \
                     widen the range or give the account a --uid"
                ),
                other => other.into(),
            })?,
    };
    for group in groups {
        let gid = store.ensure_group(group, "local", now).await?;
        store.add_member(created.id, gid).await?;
    }
    Ok(created)
}

/// A uid or gid given by hand: a POSIX id, and never root's.
fn posix_id(what: &str, n: i64) -> anyhow::Result<u32> {
    match u32::try_from(n) {
        Ok(0) => anyhow::bail!("{what} 0 is root's: accounts never run as root"),
        Ok(id) if id < u32::MAX => Ok(id),
        _ => anyhow::bail!("{what} {n} is not a valid POSIX id"),
    }
}

/// Whether the system's user or group databases (files, LDAP through NSS…) know
/// `n` as a uid or gid. A lookup error counts as known: better skip a number than
/// hand out one that may be someone's.
pub fn system_knows_id(n: u32) -> bool {
    use nix::errno::Errno;
    use nix::unistd::{Gid, Group, Uid, User as SystemUser};
    // getpwuid_r(3): these errors also mean "not found" (NSS modules differ in which
    // they give); any other error keeps the number, as held.
    let known = |r: nix::Result<bool>| match r {
        Ok(found) => found,
        Err(Errno::ENOENT | Errno::ESRCH | Errno::EBADF | Errno::EPERM) => false,
        Err(_) => true,
    };
    known(SystemUser::from_uid(Uid::from_raw(n)).map(|u| u.is_some()))
        || known(Group::from_gid(Gid::from_raw(n)).map(|g| g.is_some()))
}

/// On first start with no administrator, create `admin` with a random password, in
/// the first local administrators' group. Returns the password to print once, or
/// `None` when an administrator exists or no local group makes administrators (then
/// they come from the directory).
pub async fn bootstrap_admin(
    store: &Store,
    admin_groups: &GroupList,
    accounts: &AccountsConfig,
) -> anyhow::Result<Option<String>> {
    let existing = store
        .members_of(admin_groups.local(), admin_groups.directory(), false)
        .await?;
    if !existing.is_empty() {
        return Ok(None);
    }
    let Some(group) = admin_groups.local().first() else {
        return Ok(None);
    };
    if let Some(existing) = store.user_by_name("admin").await? {
        anyhow::bail!(
            "no administrator exists and user 'admin' (id {}) is not in group {group:?}: \
             run `atrium user add NAME --admin` to create one",
            existing.id
        );
    }
    let pass = crate::util::random_text(18);
    add_user(
        store,
        accounts,
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
    fn hand_given_ids_are_posix_and_never_root() {
        assert_eq!(posix_id("uid", 1001).ok(), Some(1001));
        for bad in [0, -1, i64::from(u32::MAX), i64::MAX] {
            assert!(posix_id("uid", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_system_knows_root_and_not_a_far_uid() {
        assert!(system_knows_id(0));
        assert!(!system_knows_id(2_000_000_123));
    }

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
