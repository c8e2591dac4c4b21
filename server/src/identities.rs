//! Users' POSIX identities: the one place that resolves an account to the uid, gid,
//! groups and home the portal acts as, and that caches what submissions need of it.
//!
//! Owns: looking identities up (the store's `posix_identity`), what "no identity"
//! means when the portal runs as root (no job, session or file access for that
//! account) and when it does not (everything runs as the portal's own user), and the
//! one-minute cache of submitters' homes and groups.
//! Must not touch: HTTP, the scheduler, process spawning (`privilege` does that).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use scheduler::Owner;

use crate::domain::identity::PosixIdentity;
use crate::privilege::Identity;
use crate::store::{Store, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The account has no usable POSIX identity (uid, gid above 0 and a home).
    #[error("account {0} has no POSIX identity (uid); ask an administrator")]
    Missing(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a submission needs to know of its user: the home (the default working
/// directory) and the groups (for partitions' `AllowGroups`).
#[derive(Debug)]
pub struct OwnerFacts {
    pub home: PathBuf,
    pub groups: Vec<String>,
    loaded: Instant,
}

impl OwnerFacts {
    /// The user as the scheduler knows job owners.
    pub fn owner(&self, user: &str) -> Owner {
        Owner {
            user: user.to_string(),
            groups: self.groups.clone(),
            account: user.to_string(),
            other_accounts: Vec::new(),
        }
    }
}

/// Resolves accounts to POSIX identities. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Identities {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Store,
    /// The portal runs as root and acts as each user; otherwise everything runs as
    /// the portal's own user.
    as_root: bool,
    /// [`OwnerFacts`] by user id, kept for a minute: a burst of submissions costs the
    /// database nothing but the jobs themselves. Group changes reach new submissions
    /// within that minute (Slurm's controller caches groups for ten, `GroupUpdateTime`).
    owners: Mutex<HashMap<i64, Arc<OwnerFacts>>>,
}

impl Identities {
    const TTL: Duration = Duration::from_secs(60);
    const MAX: usize = 10_000;

    pub fn new(store: Store, as_root: bool) -> Identities {
        Identities {
            inner: Arc::new(Inner {
                store,
                as_root,
                owners: Mutex::default(),
            }),
        }
    }

    /// Whether the portal acts as each user (it runs as root).
    pub fn as_root(&self) -> bool {
        self.inner.as_root
    }

    /// `user`'s POSIX identity as the store knows it; `None` when it has none.
    pub async fn posix(&self, user: &str) -> Result<Option<PosixIdentity>, StoreError> {
        self.inner.store.posix_identity(user).await
    }

    /// Who to act as for `user`; `None` when the account has no POSIX identity.
    pub async fn lookup(&self, user: &str) -> Result<Option<Identity>, StoreError> {
        Ok(self
            .posix(user)
            .await?
            .map(|id| Identity::from_posix(user, id)))
    }

    /// Who to act as for `user`, or [`IdentityError::Missing`].
    pub async fn require(&self, user: &str) -> Result<Identity, IdentityError> {
        self.lookup(user)
            .await?
            .ok_or_else(|| IdentityError::Missing(user.to_string()))
    }

    /// The uid `user`'s job files must belong to: the user's when the portal runs as
    /// root, the portal's own otherwise; `None` for an account without an identity.
    pub async fn file_owner(&self, user: &str) -> Result<Option<u32>, StoreError> {
        if !self.inner.as_root {
            return Ok(Some(crate::launch::current_ids().0));
        }
        Ok(self.posix(user).await?.map(|i| i.uid))
    }

    /// The home and groups of the account `user_id` (named `user`), cached for a
    /// minute. Without root the home is the portal's own.
    pub async fn owner_facts(
        &self,
        user_id: i64,
        user: &str,
    ) -> Result<Arc<OwnerFacts>, IdentityError> {
        if let Some(hit) = self
            .owners()
            .get(&user_id)
            .filter(|f| f.loaded.elapsed() < Self::TTL)
        {
            return Ok(hit.clone());
        }
        let home = if self.inner.as_root {
            self.posix(user)
                .await?
                .ok_or_else(|| IdentityError::Missing(user.to_string()))?
                .home
        } else {
            std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from)
        };
        let facts = Arc::new(OwnerFacts {
            home,
            groups: self.inner.store.groups_of(user_id).await?,
            loaded: Instant::now(),
        });
        let mut map = self.owners();
        if map.len() >= Self::MAX {
            map.retain(|_, f| f.loaded.elapsed() < Self::TTL);
        }
        map.insert(user_id, facts.clone());
        Ok(facts)
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<i64, Arc<OwnerFacts>>> {
        // A panic while holding the lock leaves nothing half-written: a map insert.
        self.inner
            .owners
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
