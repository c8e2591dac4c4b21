//! Accounts, groups and personal API tokens as administrators and their owners
//! change them.
//!
//! Owns: the administrators' view of every account (what it runs and uses now, a
//! search by name, one account's detail) and of every group; disabling and
//! enabling an account (an administrator may not disable their own; disabling ends
//! its browser sessions and revokes its API tokens at once and for good); issuing
//! and revoking a user's own tokens; the audit entries of all of these.
//! Must not touch: HTTP types, SQL (the store), how logins are checked (`auth`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use scheduler::{JobState, SqueueFilter};
use serde::Serialize;
use utoipa::ToSchema;

use super::account_changes::{AccountChanges, Actor};
use super::{Audit, ServiceError};
use crate::auth::personal_tokens::{self, IssuedToken, TokenError, TokenRequest};
use crate::auth::{Authenticator, Principal};
use crate::sched::Scheduler;
use crate::services::Quotas;
use crate::store::{ApiToken, Store, User};
use crate::util::{now_ms, rfc3339};

/// An account as administrators see it.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserInfo {
    pub username: String,
    pub display_name: String,
    /// `local` or `ldap`.
    pub source: String,
    /// A member of an administrators' group.
    pub admin: bool,
    pub disabled: bool,
    pub last_login: Option<String>,
    pub running_sessions: u32,
    /// Batch jobs (sessions are counted on their own).
    pub running_jobs: u32,
    pub pending_jobs: u32,
    /// GPUs in use now (MIG instances and shards count their fraction).
    pub gpus_in_use: f64,
    /// GPU-hours counted this period: what ended jobs used, and what running jobs
    /// reserve (GPUs × time limit) until they end.
    pub gpu_hours: f64,
}

/// A page of the accounts, by name.
#[derive(Debug)]
pub struct UsersPage {
    pub users: Vec<UserInfo>,
    /// How many accounts there are.
    pub total: u64,
}

/// The administrators' overview of the accounts.
#[derive(Debug, Clone, PartialEq)]
pub struct AccountsSummary {
    pub users: u64,
    /// Members of an administrators' group (disabled ones too).
    pub admins: usize,
    pub disabled: u64,
    pub groups: usize,
    pub running_jobs: u32,
    pub pending_jobs: u32,
    pub running_sessions: u32,
    pub gpus_in_use: f64,
}

/// What runs now, per user.
struct Activity {
    /// Sessions running.
    sessions: BTreeMap<String, u32>,
    /// Batch jobs: (running or completing, pending).
    jobs: BTreeMap<String, (u32, u32)>,
}

/// An account after a change.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserChanged {
    pub username: String,
    pub disabled: bool,
}

/// A group.
#[derive(Debug, Serialize, ToSchema)]
pub struct GroupInfo {
    pub name: String,
    /// The POSIX gid, where known.
    pub gid: Option<i64>,
    /// `local` or `ldap`.
    pub source: String,
    /// Usernames, sorted.
    pub members: Vec<String>,
}

impl From<TokenError> for ServiceError {
    fn from(e: TokenError) -> Self {
        match e {
            TokenError::Store(e) => e.into(),
            TokenError::ScopeNotHeld(_) | TokenError::CannotMint => Self::Forbidden(e.to_string()),
            TokenError::InvalidName => Self::invalid("name", e.to_string()),
            TokenError::NoScopes => Self::invalid("scopes", e.to_string()),
            TokenError::BadLifetime { .. } => Self::invalid("expires_in_days", e.to_string()),
        }
    }
}

/// The longest text a search of the accounts may hold.
pub const MAX_SEARCH: usize = 100;

/// One account as its administrators' page shows it: the account, its groups, the
/// quotas that apply with their use now, and its sessions that have not ended.
#[derive(Debug)]
pub struct UserDetail {
    pub user: User,
    pub admin: bool,
    pub groups: Vec<String>,
    pub quotas: super::quotas::MyUsage,
    pub sessions: Vec<crate::store::SessionRecord>,
}

/// The accounts service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Accounts {
    store: Store,
    auth: Arc<Authenticator>,
    scheduler: Scheduler,
    quotas: Quotas,
    audit: Audit,
    changes: AccountChanges,
    /// Longest life of a personal token (`auth.token_max_days`).
    token_max_days: u32,
}

impl Accounts {
    pub fn new(
        store: Store,
        auth: Arc<Authenticator>,
        scheduler: Scheduler,
        quotas: Quotas,
        audit: Audit,
        token_max_days: u32,
    ) -> Accounts {
        Accounts {
            changes: AccountChanges::new(store.clone(), audit.clone()),
            store,
            auth,
            scheduler,
            quotas,
            audit,
            token_max_days,
        }
    }

    /// A page of the accounts by name, `per_page` from the `offset`th, each with what it
    /// runs and uses now; the usage is asked for the page's accounts only.
    pub async fn users(&self, offset: usize, per_page: usize) -> Result<UsersPage, ServiceError> {
        self.users_matching(None, offset, per_page).await
    }

    /// As [`Accounts::users`], the accounts whose name or display name contains
    /// `search` (any case; at most [`MAX_SEARCH`] characters) when one is given.
    pub async fn users_matching(
        &self,
        search: Option<&str>,
        offset: usize,
        per_page: usize,
    ) -> Result<UsersPage, ServiceError> {
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let limit = i64::try_from(per_page).unwrap_or(i64::MAX);
        let search = search.map(str::trim).filter(|s| !s.is_empty());
        let (users, total) = match search {
            Some(text) if text.chars().count() > MAX_SEARCH => {
                return Err(ServiceError::Invalid {
                    field: "q",
                    message: format!("q: at most {MAX_SEARCH} characters"),
                })
            }
            Some(text) => self.store.search_users_page(text, offset, limit).await?,
            None => self.store.list_users_page(offset, limit).await?,
        };
        let admins: BTreeSet<String> = self.auth.administrators().await?;
        let Activity { sessions, jobs } = self.activity().await?;
        let names: Vec<String> = users.iter().map(|u| u.username.clone()).collect();
        let usage = self.quotas.users_usage(&names).await?;
        let users = users
            .into_iter()
            .map(|u| {
                let (running_jobs, pending_jobs) =
                    jobs.get(&u.username).copied().unwrap_or_default();
                let used = usage.get(&u.username);
                UserInfo {
                    admin: admins.contains(&u.username),
                    running_sessions: sessions.get(&u.username).copied().unwrap_or(0),
                    running_jobs,
                    pending_jobs,
                    gpus_in_use: used.map_or(0.0, |x| x.gpus_milli as f64 / 1000.0),
                    gpu_hours: used.map_or(0.0, |x| x.gpu_milli_seconds as f64 / 3_600_000.0),
                    last_login: u.last_login_at.map(rfc3339),
                    username: u.username,
                    display_name: u.display_name,
                    source: u.source,
                    disabled: u.disabled,
                }
            })
            .collect();
        Ok(UsersPage {
            users,
            total: u64::try_from(total).unwrap_or(0),
        })
    }

    /// The accounts, groups and what runs, counted for the administrators' overview: the
    /// usage is asked for the accounts that run something only.
    pub async fn summary(&self) -> Result<AccountsSummary, ServiceError> {
        let (users, disabled) = self.store.count_users().await?;
        let admins = self.auth.administrators().await?.len();
        let groups = self.store.list_groups().await?.len();
        let Activity { sessions, jobs } = self.activity().await?;
        let busy: BTreeSet<&String> = sessions
            .keys()
            .chain(jobs.iter().filter(|(_, c)| c.0 > 0).map(|(u, _)| u))
            .collect();
        let busy: Vec<String> = busy.into_iter().cloned().collect();
        let usage = self.quotas.users_usage(&busy).await?;
        Ok(AccountsSummary {
            users: u64::try_from(users).unwrap_or(0),
            admins,
            disabled: u64::try_from(disabled).unwrap_or(0),
            groups,
            running_jobs: jobs.values().map(|c| c.0).sum(),
            pending_jobs: jobs.values().map(|c| c.1).sum(),
            running_sessions: sessions.values().sum(),
            gpus_in_use: usage.values().map(|u| u.gpus_milli).sum::<u64>() as f64 / 1000.0,
        })
    }

    /// Sessions per user, and batch jobs (running, pending) per user, whoever runs them.
    /// A session's job counts as the session only.
    async fn activity(&self) -> Result<Activity, ServiceError> {
        let active = self.store.active_sessions().await?;
        let session_jobs: BTreeSet<u64> = active
            .iter()
            .filter_map(|s| s.job_id)
            .map(|j| j as u64)
            .collect();
        let mut sessions: BTreeMap<String, u32> = BTreeMap::new();
        for s in active {
            *sessions.entry(s.user_name).or_default() += 1;
        }
        let mut jobs: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        for job in self.scheduler.squeue(SqueueFilter::default()).await? {
            if session_jobs.contains(&job.id.job) {
                continue;
            }
            let counts = jobs.entry(job.user).or_default();
            match job.state {
                JobState::Pending => counts.1 += 1,
                JobState::Running | JobState::Completing => counts.0 += 1,
                _ => {}
            }
        }
        Ok(Activity { sessions, jobs })
    }

    /// Disable or enable `username`'s account for `caller` (calling from
    /// `client_addr`) and write the audit entry; returns the account as it is now.
    pub async fn set_disabled(
        &self,
        caller: &Principal,
        client_addr: &str,
        username: &str,
        disabled: bool,
    ) -> Result<UserChanged, ServiceError> {
        if disabled && username == caller.username {
            return Err(ServiceError::Conflict(
                "you cannot disable your own account".into(),
            ));
        }
        let actor = Actor {
            name: &caller.username,
            client_addr,
        };
        let (user, _) = self.changes.set_disabled(actor, username, disabled).await?;
        self.auth.invalidate();
        Ok(UserChanged {
            username: user.username,
            disabled,
        })
    }

    /// Every group by name, with its members (two queries whatever their number).
    pub async fn groups(&self) -> Result<Vec<GroupInfo>, ServiceError> {
        let mut groups: Vec<GroupInfo> = self
            .store
            .list_groups()
            .await?
            .into_iter()
            .map(|g| GroupInfo {
                name: g.name,
                gid: g.gid_number,
                source: g.source,
                members: Vec::new(),
            })
            .collect();
        let index: HashMap<String, usize> = groups
            .iter()
            .enumerate()
            .map(|(i, g)| (g.name.clone(), i))
            .collect();
        for (group, user) in self.store.memberships().await? {
            if let Some(&i) = index.get(&group) {
                groups[i].members.push(user);
            }
        }
        Ok(groups)
    }

    /// The account `user_id` and the names of its groups; `None` once it is gone.
    pub async fn profile(&self, user_id: i64) -> Result<Option<(User, Vec<String>)>, ServiceError> {
        let Some(user) = self.store.user_by_id(user_id).await? else {
            return Ok(None);
        };
        let groups = self.store.groups_of(user.id).await?;
        Ok(Some((user, groups)))
    }

    /// The account `username` for its administrators' page; `NotFound` when there is
    /// none.
    pub async fn detail(&self, username: &str) -> Result<UserDetail, ServiceError> {
        let user = self
            .store
            .user_by_name(username)
            .await?
            .ok_or(ServiceError::NotFound)?;
        let groups = self.store.groups_of(user.id).await?;
        let admin = self.auth.administrators().await?.contains(&user.username);
        let owner = scheduler::Owner {
            user: user.username.clone(),
            groups: groups.clone(),
            account: user.username.clone(),
            other_accounts: Vec::new(),
        };
        let quotas = self.quotas.my_usage(&user.username, &owner).await?;
        let sessions = self
            .store
            .active_sessions()
            .await?
            .into_iter()
            .filter(|s| s.user_name == user.username)
            .collect();
        Ok(UserDetail {
            user,
            admin,
            groups,
            quotas,
            sessions,
        })
    }

    /// The names of the groups of the account `user_id`.
    pub async fn groups_of(&self, user_id: i64) -> Result<Vec<String>, ServiceError> {
        Ok(self.store.groups_of(user_id).await?)
    }

    /// The caller's tokens that have not expired.
    pub async fn tokens(&self, caller: &Principal) -> Result<Vec<ApiToken>, ServiceError> {
        Ok(self.store.list_api_tokens(caller.user_id, now_ms()).await?)
    }

    /// Issue a token for the caller and audit it (a failure to audit is logged: the
    /// token exists and its secret is shown once).
    pub async fn issue_token(
        &self,
        caller: &Principal,
        client_addr: &str,
        request: &TokenRequest,
    ) -> Result<IssuedToken, TokenError> {
        let issued =
            personal_tokens::issue(&self.store, caller, request, self.token_max_days).await?;
        let detail = serde_json::json!({
            "token_id": issued.token.id,
            "name": issued.token.name,
            "scopes": issued.token.scopes,
            "expires_at": issued.token.expires_at,
        });
        if let Err(e) = self
            .audit
            .record(
                &caller.username,
                client_addr,
                "token.create",
                &caller.username,
                detail,
            )
            .await
        {
            tracing::error!(error = %e, "cannot audit token creation");
        }
        Ok(issued)
    }

    /// Revoke one of the caller's tokens and audit it.
    pub async fn revoke_token(
        &self,
        caller: &Principal,
        client_addr: &str,
        token_id: i64,
    ) -> Result<(), ServiceError> {
        personal_tokens::may_revoke(caller, token_id)?;
        self.auth.revoke_token(caller.user_id, token_id).await?;
        let detail = serde_json::json!({ "token_id": token_id });
        self.audit
            .record(
                &caller.username,
                client_addr,
                "token.revoke",
                &caller.username,
                detail,
            )
            .await?;
        Ok(())
    }
}
