//! Turning a request's credentials (session cookie or bearer token) into a
//! [`Principal`], with revocation and a small cache.
//!
//! Credentials are checked against the database on first sight and then cached for a
//! minute. Every revocation, password change or disabled account bumps the store's
//! auth epoch; the [`Authenticator`] clears its cache at once for its own changes and
//! within a second for changes made by another process (the CLI).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::store::{Store, StoreError, User};

use super::jwt::{Claims, Keys};
use super::token::{self, Scopes};
use super::{csrf, Scope};
use crate::domain::groups::GroupList;
use crate::util::{now_ms, random_text};

const CACHE_TTL_MS: i64 = 60_000;
const CACHE_MAX: usize = 50_000;

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub user_id: i64,
    pub username: String,
    /// The account is an administrator's. This alone grants nothing: a token without
    /// the `admin` scope acts as its user (see [`Principal::acts_as_admin`]). For
    /// display (the header's badge, what the profile offers).
    pub admin_account: bool,
    pub credential: Credential,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A browser login session (cookie).
    Session {
        jti: String,
        csrf: String,
        /// A renewed session token to send back, when the current one is ageing.
        renewed: Option<String>,
    },
    /// A personal API token (bearer).
    Token {
        id: i64,
        scopes: Scopes,
        /// When the token expires (ms), if it does.
        expires_at: Option<i64>,
    },
}

impl Principal {
    /// Whether this caller may act within `scope`. Browser sessions carry every scope
    /// of their user; `admin` always requires an administrator.
    pub fn has_scope(&self, scope: Scope) -> bool {
        let granted = match &self.credential {
            Credential::Session { .. } => true,
            Credential::Token { scopes, .. } => scopes.contains(scope),
        };
        granted && (scope != Scope::Admin || self.admin_account)
    }

    /// Whether this caller acts as an administrator: the one test wherever that power
    /// is granted (another user's jobs, sessions, campaigns, usage, benchmark runs).
    /// An administrator's browser session does (it holds every scope); their token
    /// does only with the `admin` scope, so a `read`+`jobs` token made for scripts
    /// cannot cancel another user's job.
    pub fn acts_as_admin(&self) -> bool {
        self.has_scope(Scope::Admin)
    }

    /// The one rule of whose work a caller sees and acts on: their own, or anyone's
    /// when acting as an administrator ([`Principal::acts_as_admin`]). Another user's
    /// is "not found" to everyone else. (The scheduler's `Requester::may_see` is the
    /// same rule for a caller the services have already read.)
    pub fn may_see(&self, owner: &str) -> bool {
        self.acts_as_admin() || owner == self.username
    }

    /// The scopes this caller holds.
    pub fn scopes(&self) -> Scopes {
        Scopes::new(
            Scope::ALL
                .into_iter()
                .filter(|s| self.has_scope(*s))
                .collect(),
        )
    }

    /// Whether `presented` is this login session's CSRF token. Bearer-token callers
    /// need none (a browser never attaches their credential by itself).
    pub fn csrf_ok(&self, presented: Option<&str>) -> bool {
        match &self.credential {
            Credential::Session { csrf: expected, .. } => {
                presented.is_some_and(|p| csrf::matches(expected, p))
            }
            Credential::Token { .. } => true,
        }
    }

    pub fn csrf_token(&self) -> &str {
        match &self.credential {
            Credential::Session { csrf, .. } => csrf,
            Credential::Token { .. } => "",
        }
    }
}

#[derive(Debug, Clone)]
struct Cached {
    user_id: i64,
    username: String,
    is_admin: bool,
    /// Token scopes (unused for sessions).
    scopes: Scopes,
    token_id: i64,
    /// When the credential itself expires (ms), if it does.
    expires_at: Option<i64>,
    loaded_at: i64,
}

#[derive(Debug, Default)]
struct Cache {
    sessions: HashMap<String, Cached>,
    tokens: HashMap<String, Cached>,
    /// Bumped by every invalidation, so that a load that raced with a revocation is
    /// not remembered.
    generation: u64,
}

/// A new browser login.
#[derive(Debug)]
pub struct NewLogin {
    pub token: String,
    pub claims: Claims,
}

#[derive(Debug, Clone)]
pub struct SessionPolicy {
    pub ttl: Duration,
    pub max: Duration,
}

#[derive(Debug)]
pub struct Authenticator {
    store: Store,
    keys: Keys,
    admin_groups: GroupList,
    policy: SessionPolicy,
    cache: RwLock<Cache>,
    epoch: AtomicI64,
}

impl Authenticator {
    pub fn new(store: Store, keys: Keys, admin_groups: GroupList, policy: SessionPolicy) -> Self {
        Self {
            store,
            keys,
            admin_groups,
            policy,
            cache: RwLock::new(Cache::default()),
            epoch: AtomicI64::new(i64::MIN),
        }
    }

    pub fn session_ttl(&self) -> Duration {
        self.policy.ttl
    }

    /// Whether the user belongs to an administrators' group: a local one given in the
    /// portal, or a directory group named by its DN (see [`GroupList`]).
    pub async fn is_admin(&self, user_id: i64) -> Result<bool, StoreError> {
        let (local, directory) = self.store.group_refs_of(user_id).await?;
        Ok(self.admin_groups.matches(&local, &directory))
    }

    /// Usernames of every administrator, disabled accounts included.
    pub async fn administrators(&self) -> Result<std::collections::BTreeSet<String>, StoreError> {
        let groups = &self.admin_groups;
        self.store
            .members_of(groups.local(), groups.directory(), true)
            .await
    }

    /// Start a browser login session for `user` and issue its token.
    pub async fn start_session(
        &self,
        user: &User,
        client_addr: &str,
        user_agent: &str,
    ) -> Result<NewLogin, StoreError> {
        let now = now_ms();
        let jti = random_text(18);
        let exp_ms = now + self.policy.ttl.as_millis() as i64;
        let claims = Claims {
            sub: user.id.to_string(),
            name: user.username.clone(),
            jti: jti.clone(),
            iat: now / 1000,
            exp: exp_ms / 1000,
            auth_time: now / 1000,
            csrf: csrf::new_token(),
        };
        self.store
            .create_login_session(&jti, user.id, now, exp_ms, client_addr, user_agent)
            .await?;
        self.store.record_login(user.id, now).await?;
        let token = self
            .keys
            .issue(&claims)
            .map_err(|e| StoreError::other(e.to_string()))?;
        Ok(NewLogin { token, claims })
    }

    /// End a browser login session.
    pub async fn end_session(&self, jti: &str) -> Result<(), StoreError> {
        self.store.revoke_login_session(jti, now_ms()).await?;
        self.invalidate();
        Ok(())
    }

    /// Revoke one of the user's API tokens.
    pub async fn revoke_token(&self, user_id: i64, token_id: i64) -> Result<(), StoreError> {
        self.store
            .revoke_api_token(user_id, token_id, now_ms())
            .await?;
        self.invalidate();
        Ok(())
    }

    /// Resolve a session cookie's value. `None`: not a live session.
    pub async fn from_session_cookie(&self, value: &str) -> Result<Option<Principal>, StoreError> {
        let Some(claims) = self.keys.verify(value) else {
            return Ok(None);
        };
        let now = now_ms();
        let (hit, generation) = self.cached(|c| &c.sessions, &claims.jti, now);
        let cached = match hit {
            Some(hit) => hit,
            None => {
                let Some(loaded) = self.load_session(&claims, now).await? else {
                    return Ok(None);
                };
                self.remember(
                    |c| &mut c.sessions,
                    generation,
                    claims.jti.clone(),
                    loaded.clone(),
                );
                loaded
            }
        };
        let renewed = self.renew_if_ageing(&claims, now).await?;
        Ok(Some(Principal {
            user_id: cached.user_id,
            username: cached.username,
            admin_account: cached.is_admin,
            credential: Credential::Session {
                jti: claims.jti,
                csrf: claims.csrf,
                renewed,
            },
        }))
    }

    /// Resolve a bearer token. `None`: not a live token.
    pub async fn from_bearer(&self, secret: &str) -> Result<Option<Principal>, StoreError> {
        if !secret.starts_with(token::TOKEN_PREFIX) || secret.len() > 128 {
            return Ok(None);
        }
        let hash = token::hash(secret);
        let now = now_ms();
        let (hit, generation) = self.cached(|c| &c.tokens, &hash, now);
        let cached = match hit {
            Some(hit) => hit,
            None => {
                let Some(owner) = self.store.use_api_token(&hash, now).await? else {
                    return Ok(None);
                };
                if owner.disabled {
                    return Ok(None);
                }
                let loaded = Cached {
                    user_id: owner.token.user_id,
                    username: owner.username,
                    is_admin: self.is_admin(owner.token.user_id).await?,
                    scopes: Scopes::from_stored(&owner.token.scopes),
                    token_id: owner.token.id,
                    expires_at: owner.token.expires_at,
                    loaded_at: now,
                };
                self.remember(|c| &mut c.tokens, generation, hash, loaded.clone());
                loaded
            }
        };
        Ok(Some(Principal {
            user_id: cached.user_id,
            username: cached.username,
            admin_account: cached.is_admin,
            credential: Credential::Token {
                id: cached.token_id,
                scopes: cached.scopes,
                expires_at: cached.expires_at,
            },
        }))
    }

    /// Drop everything cached.
    pub fn invalidate(&self) {
        let mut cache = self.write();
        cache.sessions.clear();
        cache.tokens.clear();
        cache.generation += 1;
    }

    /// Compare the store's auth epoch with the last one seen; clear the cache when it
    /// moved. Called every second by a background task.
    pub async fn follow_epoch(&self) -> Result<(), StoreError> {
        let epoch = self.store.auth_epoch().await?;
        if self.epoch.swap(epoch, Ordering::AcqRel) != epoch {
            self.invalidate();
        }
        Ok(())
    }

    /// Run [`Self::follow_epoch`] every `period` until the task is dropped.
    pub async fn watch_epoch(self: Arc<Self>, period: Duration) {
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if let Err(e) = self.follow_epoch().await {
                // Fail closed: with the database unreachable nothing cached is trusted.
                self.invalidate();
                tracing::warn!(error = %e, "cannot read the auth epoch");
            }
        }
    }

    async fn load_session(&self, claims: &Claims, now: i64) -> Result<Option<Cached>, StoreError> {
        let Some(session) = self.store.login_session(&claims.jti).await? else {
            return Ok(None);
        };
        if session.revoked_at.is_some()
            || session.expires_at <= now
            || session.user_id.to_string() != claims.sub
        {
            return Ok(None);
        }
        let Some(user) = self.store.user_by_id(session.user_id).await? else {
            return Ok(None);
        };
        if user.disabled {
            return Ok(None);
        }
        Ok(Some(Cached {
            user_id: user.id,
            is_admin: self.is_admin(user.id).await?,
            username: user.username,
            scopes: Scopes::all(),
            token_id: 0,
            expires_at: Some(session.expires_at),
            loaded_at: now,
        }))
    }

    /// A fresh token when less than half the lifetime is left, within the absolute
    /// maximum of the login.
    async fn renew_if_ageing(
        &self,
        claims: &Claims,
        now: i64,
    ) -> Result<Option<String>, StoreError> {
        let ttl_s = self.policy.ttl.as_secs() as i64;
        let now_s = now / 1000;
        let hard_end = claims.auth_time + self.policy.max.as_secs() as i64;
        let new_exp = (now_s + ttl_s).min(hard_end);
        if claims.exp - now_s > ttl_s / 2 || new_exp <= claims.exp {
            return Ok(None);
        }
        let renewed = Claims {
            iat: now_s,
            exp: new_exp,
            ..claims.clone()
        };
        self.store
            .extend_login_session(&claims.jti, new_exp * 1000)
            .await?;
        if let Some(entry) = self.write().sessions.get_mut(&claims.jti) {
            entry.expires_at = Some(new_exp * 1000);
        }
        Ok(self.keys.issue(&renewed).ok())
    }

    /// A fresh cache entry, and the cache generation to remember a load under.
    fn cached(
        &self,
        map: impl Fn(&Cache) -> &HashMap<String, Cached>,
        key: &str,
        now: i64,
    ) -> (Option<Cached>, u64) {
        let cache = self
            .cache
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let hit = map(&cache)
            .get(key)
            .filter(|c| now - c.loaded_at < CACHE_TTL_MS && c.expires_at.is_none_or(|e| e > now))
            .cloned();
        (hit, cache.generation)
    }

    fn remember(
        &self,
        map: impl Fn(&mut Cache) -> &mut HashMap<String, Cached>,
        generation: u64,
        key: String,
        value: Cached,
    ) {
        let mut cache = self.write();
        if cache.generation != generation {
            return;
        }
        let entries = map(&mut cache);
        if entries.len() >= CACHE_MAX {
            entries.clear();
        }
        entries.insert(key, value);
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Cache> {
        self.cache
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod may_see_tests {
    use super::*;

    fn caller(name: &str, admin_account: bool, scopes: &[Scope]) -> Principal {
        Principal {
            user_id: 1,
            username: name.into(),
            admin_account,
            credential: Credential::Token {
                id: 1,
                scopes: Scopes::new(scopes.to_vec()),
                expires_at: None,
            },
        }
    }

    #[test]
    fn a_caller_sees_their_own_and_an_acting_administrator_everyones() {
        let alice = caller("alice", false, &[Scope::Read, Scope::Admin]);
        assert!(alice.may_see("alice"));
        assert!(
            !alice.may_see("bob"),
            "the admin scope grants nothing to a user"
        );
        let script = caller("root", true, &[Scope::Read, Scope::Jobs]);
        assert!(
            !script.may_see("bob"),
            "an administrator's token without admin"
        );
        let admin = caller("root", true, &[Scope::Read, Scope::Admin]);
        assert!(admin.may_see("bob"));
    }
}
