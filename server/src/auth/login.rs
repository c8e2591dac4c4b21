//! Password login across the enabled methods: a local account of that name first
//! (local accounts are the break-glass administrators), else the LDAP directory.
//!
//! Checking a password is the one piece of work anybody can make the portal do
//! without logging in. A local account's (argon2: tens of milliseconds of CPU and
//! 19 MiB each) runs at most one per core at once, with a short bounded queue behind
//! them; beyond that a login is refused at once with [`LoginError::Busy`]. A
//! directory's bind costs the portal no CPU to speak of (it waits on the directory)
//! and is bounded by the directory's connection pool (`ldap.pool_size`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::store::{NewUser, Store, StoreError, User};

use super::ldap::{Directory, DirectoryError};
use super::local::{self, LoginError};
use crate::util::now_ms;

/// How long a login waits in the queue for a free core before it is refused.
const QUEUE_WAIT: Duration = Duration::from_secs(5);
/// Logins admitted at once (checking or queued), per core.
const ADMITTED_PER_CORE: usize = 4;

#[derive(Debug)]
pub struct Logins {
    store: Store,
    local_accounts: bool,
    directory: Option<Directory>,
    gate: CheckGate,
}

/// Bounds the password checks in progress: `checking` permits, one per core, and
/// `admitted` permits for those checking or waiting.
#[derive(Debug)]
pub struct CheckGate {
    checking: Arc<Semaphore>,
    admitted: Arc<Semaphore>,
}

impl CheckGate {
    pub fn new(cores: usize) -> Self {
        let cores = cores.max(1);
        Self {
            checking: Arc::new(Semaphore::new(cores)),
            admitted: Arc::new(Semaphore::new(cores * ADMITTED_PER_CORE)),
        }
    }

    /// One permit per core of this machine.
    pub fn per_core() -> Self {
        Self::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
    }

    /// A turn to check a password, or `Busy` when the queue is full or does not move
    /// within `wait`.
    pub async fn enter(&self, wait: Duration) -> Result<CheckTurn, LoginError> {
        let admitted = self
            .admitted
            .clone()
            .try_acquire_owned()
            .map_err(|_| LoginError::Busy)?;
        let checking = tokio::time::timeout(wait, self.checking.clone().acquire_owned())
            .await
            .map_err(|_| LoginError::Busy)?
            .map_err(|_| LoginError::Busy)?;
        Ok(CheckTurn {
            _checking: checking,
            _admitted: admitted,
        })
    }
}

/// Held while a password is checked.
#[derive(Debug)]
pub struct CheckTurn {
    _checking: OwnedSemaphorePermit,
    _admitted: OwnedSemaphorePermit,
}

impl Logins {
    pub fn new(store: Store, local_accounts: bool, directory: Option<Directory>) -> Self {
        Self {
            store,
            local_accounts,
            directory,
            gate: CheckGate::per_core(),
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

    /// Check `password` for `username` and return the account, created or updated from
    /// the directory. A local account's hash is checked only with a turn at the gate.
    pub async fn login(&self, username: &str, password: &str) -> Result<User, LoginError> {
        let Some(directory) = &self.directory else {
            let existing = local::find(&self.store, username).await?;
            let _turn = self.gate.enter(QUEUE_WAIT).await?;
            return local::verify(existing, password).await;
        };
        if self.local_accounts {
            let existing = local::find(&self.store, username).await?;
            if existing.as_ref().is_some_and(|u| u.source == "local") {
                let _turn = self.gate.enter(QUEUE_WAIT).await?;
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
        let groups: Vec<(String, String)> =
            found.groups.into_iter().map(|g| (g.name, g.dn)).collect();
        self.store
            .set_directory_memberships(user.id, &groups, now)
            .await?;
        Ok(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_gate_admits_one_check_per_core_and_a_bounded_queue() {
        let gate = CheckGate::new(2);
        let first = gate.enter(QUEUE_WAIT).await.expect("first core");
        let _second = gate.enter(QUEUE_WAIT).await.expect("second core");
        // Both cores busy: a waiter gives up after its wait.
        let waited = gate.enter(Duration::from_millis(10)).await;
        assert!(matches!(waited, Err(LoginError::Busy)));
        // A freed core is handed to the next one.
        drop(first);
        let _third = gate.enter(Duration::from_millis(10)).await.expect("freed");
    }

    #[tokio::test]
    async fn a_full_queue_refuses_at_once() {
        let gate = Arc::new(CheckGate::new(1));
        let _running = gate.enter(QUEUE_WAIT).await.expect("running");
        let mut waiting = Vec::new();
        for _ in 1..ADMITTED_PER_CORE {
            let gate = gate.clone();
            waiting.push(tokio::spawn(async move {
                gate.enter(Duration::from_secs(30)).await.is_ok()
            }));
        }
        // Wait (polling, with a deadline) until every waiter holds a queue slot.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while gate.admitted.available_permits() > 0 {
            assert!(tokio::time::Instant::now() < deadline, "waiters not queued");
            tokio::task::yield_now().await;
        }
        // Refused without waiting for a core (it would wait an hour otherwise).
        let refused = tokio::time::timeout(
            Duration::from_secs(5),
            gate.enter(Duration::from_secs(3600)),
        )
        .await
        .expect("answered without waiting");
        assert!(matches!(refused, Err(LoginError::Busy)));
        for w in waiting {
            w.abort();
        }
    }
}
