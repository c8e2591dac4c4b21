//! Password login across the enabled methods: a local account of that name first
//! (local accounts are the break-glass administrators), else the LDAP directory.

use crate::store::{NewUser, Store, StoreError, User};

use super::ldap::{Directory, DirectoryError};
use super::local::{self, LoginError};
use super::now_ms;

#[derive(Debug)]
pub struct Logins {
    store: Store,
    local_accounts: bool,
    directory: Option<Directory>,
}

impl Logins {
    pub fn new(store: Store, local_accounts: bool, directory: Option<Directory>) -> Self {
        Self {
            store,
            local_accounts,
            directory,
        }
    }

    /// The key failed attempts are counted under for this username.
    pub fn rate_limit_key(&self, raw: &str) -> String {
        match &self.directory {
            Some(directory) => directory
                .normalise(raw)
                .unwrap_or_else(|| raw.trim().to_lowercase()),
            None => raw.trim().to_lowercase(),
        }
    }

    pub async fn login(&self, username: &str, password: &str) -> Result<User, LoginError> {
        let Some(directory) = &self.directory else {
            return local::login(&self.store, username, password).await;
        };
        if self.local_accounts {
            let existing = local::find(&self.store, username).await?;
            if existing.as_ref().is_some_and(|u| u.source == "local") {
                return local::verify(existing, password).await;
            }
        }
        let found = directory
            .login(username, password)
            .await
            .map_err(|e| match e {
                DirectoryError::InvalidCredentials => LoginError::InvalidCredentials,
                DirectoryError::NotAllowed => LoginError::NotAllowed,
                DirectoryError::Unavailable(cause) => LoginError::DirectoryUnavailable(cause),
            })?;
        let now = now_ms();
        let user = self
            .store
            .upsert_directory_user(
                &NewUser {
                    username: found.username.clone(),
                    display_name: found.display_name,
                    email: found.email,
                    password_hash: None,
                    uid_number: found.uid_number,
                    gid_number: found.gid_number,
                    home: found.home,
                },
                found.login_shell.as_deref(),
                now,
            )
            .await
            .map_err(|e| match e {
                // A local account holds the name while local logins are off.
                StoreError::Conflict(_) => LoginError::InvalidCredentials,
                other => other.into(),
            })?;
        if user.disabled {
            return Err(LoginError::InvalidCredentials);
        }
        self.store
            .set_memberships(user.id, &found.groups, "ldap", now)
            .await?;
        Ok(user)
    }
}
