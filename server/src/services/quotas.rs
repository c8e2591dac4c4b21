//! Quotas: per user, group, account, and a default for every user. The most specific
//! applies to a user (their own, else the default); a group's and an account's cap
//! the total of their members. The scheduler enforces GPUs, GPU-hours, jobs and wall
//! time on every pass; sessions are checked here before they start, so that a
//! session over quota is refused with the reason rather than left waiting.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use scheduler::{LimitScope, LimitUsage, LimitsConfig, Owner, UsagePeriod};

use crate::sched::Scheduler;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::domain::numbers::{plural, plural_f, short};
use crate::store::{QuotaRecord, Store, StoreError};
use crate::util::rfc3339;

pub use crate::domain::quota::{
    scope_label, scope_of, scope_parts, scope_target, Quota, QuotaLimits,
};

/// A stored quota with its limits read; `None` for an unknown scope kind or limits
/// that do not parse.
pub fn quota_from_record(r: &QuotaRecord) -> Option<Quota> {
    Some(Quota {
        id: r.id,
        scope: scope_of(&r.scope_kind, &r.scope_name)?,
        limits: serde_json::from_str(&r.limits).ok()?,
        updated_at: r.updated_at,
        updated_by: r.updated_by.clone(),
    })
}

/// The quotas in force, read from the database at startup and after each change.
#[derive(Debug, Clone)]
pub struct Quotas {
    store: Store,
    scheduler: Scheduler,
    period: UsagePeriod,
    current: Arc<RwLock<Vec<Quota>>>,
}

impl Quotas {
    /// Read the quotas and hand them to the scheduler.
    pub async fn load(
        store: Store,
        scheduler: Scheduler,
        period: UsagePeriod,
    ) -> anyhow::Result<Quotas> {
        let quotas = Quotas {
            store,
            scheduler,
            period,
            current: Arc::default(),
        };
        // At startup the scheduler may still be restoring its queue: the quotas go
        // into its queue first, and the portal does not wait for them to be durable.
        let (stored, limits) = quotas.read().await?;
        let durable = quotas
            .scheduler
            .set_limits_first(limits)
            .map_err(|e| anyhow::anyhow!("the scheduler did not take the quotas: {e}"))?;
        tokio::spawn(async move {
            match durable.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "the scheduler did not take the quotas"),
                Err(_) => tracing::error!("the scheduler stopped before taking the quotas"),
            }
        });
        *quotas.current.write().unwrap_or_else(|p| p.into_inner()) = stored;
        Ok(quotas)
    }

    /// How GPU-hours are counted: `month`, `rolling` or `fixed`.
    pub fn period_name(&self) -> String {
        match self.period() {
            UsagePeriod::Month => "month",
            UsagePeriod::Rolling { .. } => "rolling",
            UsagePeriod::Fixed { .. } => "fixed",
        }
        .into()
    }

    /// `user`'s quotas (`owner`: the user as the scheduler knows owners) and their use now.
    pub async fn my_usage(&self, user: &str, owner: &Owner) -> Result<MyUsage, QuotaError> {
        let stored = self.applying(owner);
        let usage = self.usage(owner).await?;
        let quotas = usage
            .into_iter()
            .filter_map(|u| {
                let q = stored.iter().find(|q| q.scope == u.scope)?;
                let (kind, name) = scope_parts(&u.scope);
                Some(QuotaUsage {
                    scope: kind.into(),
                    name: name.into(),
                    limits: q.limits.clone(),
                    gpus_in_use: u.gpus_milli as f64 / 1000.0,
                    slices_in_use: u.slices,
                    running_jobs: u.running_jobs,
                    submitted_jobs: u.submitted_jobs,
                    gpu_hours_used: u.gpu_milli_seconds as f64 / 3_600_000.0,
                    period_start: rfc3339(u.period_start * 1000),
                    period_end: rfc3339(u.period_end * 1000),
                })
            })
            .collect();
        Ok(MyUsage {
            user: user.to_string(),
            period: self.period_name(),
            quotas,
        })
    }

    pub fn period(&self) -> UsagePeriod {
        self.period
    }

    /// Read the database again and apply it (after every change).
    pub async fn reload(&self) -> anyhow::Result<()> {
        let (quotas, limits) = self.read().await?;
        self.scheduler
            .set_limits(limits)
            .await
            .map_err(|e| anyhow::anyhow!("the scheduler did not take the quotas: {e}"))?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = quotas;
        Ok(())
    }

    /// The stored quotas, and the same as the scheduler's limits.
    async fn read(&self) -> anyhow::Result<(Vec<Quota>, LimitsConfig)> {
        let records = self.store.quotas().await?;
        let mut quotas = Vec::with_capacity(records.len());
        for r in &records {
            match quota_from_record(r) {
                Some(q) => quotas.push(q),
                None => tracing::warn!(id = r.id, "a stored quota cannot be read; it is ignored"),
            }
        }
        let mut limits = LimitsConfig {
            period: self.period,
            ..LimitsConfig::default()
        };
        for q in &quotas {
            let l = q.limits.to_limits();
            match &q.scope {
                LimitScope::DefaultUser => limits.default_user = l,
                LimitScope::User(n) => {
                    limits.users.insert(n.clone(), l);
                }
                LimitScope::Group(n) => {
                    limits.groups.insert(n.clone(), l);
                }
                LimitScope::Account(n) => {
                    limits.accounts.insert(n.clone(), l);
                }
            }
        }
        Ok((quotas, limits))
    }

    /// Every quota in force.
    pub fn all(&self) -> Vec<Quota> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The quotas that apply to `owner`: its user's own (else the default), then its
    /// groups' and its account's that exist.
    pub fn applying(&self, owner: &Owner) -> Vec<Quota> {
        let all = self.current.read().unwrap_or_else(|p| p.into_inner());
        let find = |scope: &LimitScope| all.iter().find(|q| &q.scope == scope).cloned();
        let mut out = Vec::new();
        if let Some(q) =
            find(&LimitScope::User(owner.user.clone())).or_else(|| find(&LimitScope::DefaultUser))
        {
            out.push(q);
        }
        for g in &owner.groups {
            out.extend(find(&LimitScope::Group(g.clone())));
        }
        out.extend(find(&LimitScope::Account(owner.account.clone())));
        out
    }

    /// Whether a session of `gpus` GPUs (of `slice` type, if named) for `hours` may
    /// start for `owner` now; the error names the quota, its value and the use now.
    pub async fn check_session(
        &self,
        owner: &Owner,
        gpus: u32,
        slice: Option<&str>,
        hours: f64,
    ) -> Result<(), QuotaError> {
        let applying = self.applying(owner);
        let counted: Vec<String> = applying
            .iter()
            .filter(|q| q.limits.max_sessions.is_some())
            .filter_map(|q| match &q.scope {
                LimitScope::Group(g) => Some(g.clone()),
                _ => None,
            })
            .collect();
        let running_sessions = self.store.running_sessions(&owner.user, &counted).await?;
        for q in applying {
            let label = scope_label(&q.scope);
            let l = &q.limits;
            if let Some(max) = l.max_session_hours {
                if hours > max {
                    return Err(QuotaError::Exceeded(format!(
                        "{label} allows sessions of at most {}; this one asks for {}",
                        plural_f(max, "hour", "hours"),
                        plural_f(hours, "hour", "hours")
                    )));
                }
            }
            if let Some(max) = l.max_sessions {
                let key = match &q.scope {
                    LimitScope::Group(g) => format!("group:{g}"),
                    LimitScope::Account(a) => format!("account:{a}"),
                    _ => format!("user:{}", owner.user),
                };
                let running = running_sessions.get(&key).copied().unwrap_or(0);
                if running >= max {
                    return Err(QuotaError::Exceeded(format!(
                        "{label} allows {}; {} running",
                        plural(u64::from(max), "running session", "running sessions"),
                        is_are(u64::from(running))
                    )));
                }
            }
        }
        let usage = self
            .scheduler
            .limit_usage(owner.clone())
            .await
            .map_err(|e| QuotaError::Unavailable(e.to_string()))?;
        let asked_milli = u64::from(gpus) * 1000;
        for u in &usage {
            if let Some(msg) = over_for_session(u, asked_milli, gpus, slice, hours) {
                return Err(QuotaError::Exceeded(msg));
            }
        }
        Ok(())
    }

    /// What applies to `owner` and its use now, for the user's own pages.
    pub async fn usage(&self, owner: &Owner) -> Result<Vec<LimitUsage>, QuotaError> {
        self.scheduler
            .limit_usage(owner.clone())
            .await
            .map_err(|e| QuotaError::Unavailable(e.to_string()))
    }

    /// Each user's own use now (GPUs, jobs, GPU time this period) by name, asked of
    /// the scheduler at once.
    pub async fn users_usage(
        &self,
        users: &[String],
    ) -> Result<BTreeMap<String, LimitUsage>, QuotaError> {
        let owners = users.iter().map(|u| Owner::user(u)).collect();
        let each = self
            .scheduler
            .limit_usages(owners)
            .await
            .map_err(|e| QuotaError::Unavailable(e.to_string()))?;
        // The user's own entry comes first (`Cluster::limit_usage`).
        Ok(users
            .iter()
            .cloned()
            .zip(each)
            .filter_map(|(user, usage)| Some((user, usage.into_iter().next()?)))
            .collect())
    }

    /// Create a quota for `kind` (`default`, `user`, `group`, `account`) and `name`
    /// (audited with the change) and apply it: the scope and the limits are checked
    /// here, whoever asks (the API, the page).
    pub async fn create(
        &self,
        kind: &str,
        name: &str,
        limits: &QuotaLimits,
        now: i64,
        audit: ChangedBy<'_>,
    ) -> Result<Quota, QuotaError> {
        let scope = &requested_scope(kind, name)?;
        checked_limits(limits)?;
        self.check_exists(scope).await?;
        let (kind, name) = scope_parts(scope);
        let json =
            serde_json::to_string(limits).map_err(|e| QuotaError::Internal(e.to_string()))?;
        let detail = serde_json::json!({"before": null, "after": limits}).to_string();
        let target = scope_target(scope);
        let record = self
            .store
            .create_quota(
                kind,
                name,
                &json,
                now,
                &audit.entry("quota.create", &target, &detail),
            )
            .await?;
        self.reload()
            .await
            .map_err(|e| QuotaError::Internal(e.to_string()))?;
        quota_from_record(&record).ok_or_else(|| QuotaError::Internal("unreadable quota".into()))
    }

    /// Refuse a quota for a user or group the portal does not know: a local account,
    /// or an LDAP user or group (both recorded at the user's login). An account is
    /// Slurm's and need not be known here; the default names no one.
    async fn check_exists(&self, scope: &LimitScope) -> Result<(), QuotaError> {
        match scope {
            LimitScope::User(name) => {
                if self.store.user_by_name(name).await?.is_none() {
                    return Err(QuotaError::UnknownName(format!(
                        "name: there is no user {name:?} (a local account, or an LDAP \
                         user who has logged in once)"
                    )));
                }
            }
            LimitScope::Group(name) => {
                if !self
                    .store
                    .list_groups()
                    .await?
                    .iter()
                    .any(|g| &g.name == name)
                {
                    return Err(QuotaError::UnknownName(format!(
                        "name: there is no group {name:?} (a local group, or an LDAP \
                         group of a user who has logged in)"
                    )));
                }
            }
            LimitScope::Account(_) | LimitScope::DefaultUser => {}
        }
        Ok(())
    }

    async fn stored(&self, id: i64) -> Result<Quota, QuotaError> {
        self.store
            .quota(id)
            .await?
            .and_then(|r| quota_from_record(&r))
            .ok_or(QuotaError::NotFound)
    }

    /// Replace a quota's limits (audited, before and after) and apply them.
    pub async fn update(
        &self,
        id: i64,
        limits: &QuotaLimits,
        now: i64,
        audit: ChangedBy<'_>,
    ) -> Result<Quota, QuotaError> {
        checked_limits(limits)?;
        let before = self.stored(id).await?;
        let json =
            serde_json::to_string(limits).map_err(|e| QuotaError::Internal(e.to_string()))?;
        let detail = serde_json::json!({"before": before.limits, "after": limits}).to_string();
        let target = scope_target(&before.scope);
        let (_, after) = self
            .store
            .update_quota(
                id,
                &json,
                now,
                &audit.entry("quota.update", &target, &detail),
            )
            .await?;
        self.reload()
            .await
            .map_err(|e| QuotaError::Internal(e.to_string()))?;
        quota_from_record(&after).ok_or_else(|| QuotaError::Internal("unreadable quota".into()))
    }

    /// Delete a quota (audited, with what it was); its scope falls back to the default.
    pub async fn delete(
        &self,
        id: i64,
        now: i64,
        audit: ChangedBy<'_>,
    ) -> Result<Quota, QuotaError> {
        let before = self.stored(id).await?;
        let detail = serde_json::json!({"before": before.limits, "after": null}).to_string();
        let target = scope_target(&before.scope);
        self.store
            .delete_quota(id, now, &audit.entry("quota.delete", &target, &detail))
            .await?;
        self.reload()
            .await
            .map_err(|e| QuotaError::Internal(e.to_string()))?;
        Ok(before)
    }
}

/// Who changes a quota, from where: for the audit entry written with the change.
#[derive(Debug, Clone, Copy)]
pub struct ChangedBy<'a> {
    pub actor: &'a str,
    pub client_addr: &'a str,
}

impl<'a> ChangedBy<'a> {
    /// `caller`, calling from `client_addr`.
    pub fn new(caller: &'a Principal, client_addr: &'a str) -> ChangedBy<'a> {
        ChangedBy {
            actor: &caller.username,
            client_addr,
        }
    }

    pub(crate) fn entry(
        &self,
        action: &'a str,
        target: &'a str,
        detail: &'a str,
    ) -> crate::store::NewAuditEntry<'a> {
        crate::store::NewAuditEntry {
            actor: self.actor,
            action,
            target,
            detail,
            client_addr: self.client_addr,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    /// The request names a bad scope or limit: `field` (`scope`, `name`,
    /// `limits.gpus` …) and why (the message names it too).
    #[error("{message}")]
    Invalid { field: String, message: String },
    /// The request names a user or group that does not exist (field `name`).
    #[error("{0}")]
    UnknownName(String),
    #[error("{0}")]
    Exceeded(String),
    #[error("no such quota")]
    NotFound,
    #[error("a quota for this user, group or account exists already")]
    Conflict,
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Internal(String),
}

impl From<StoreError> for QuotaError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => QuotaError::NotFound,
            StoreError::Conflict(_) => QuotaError::Conflict,
            other => QuotaError::Internal(other.to_string()),
        }
    }
}

fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-@".contains(&b))
}

/// The scope a request names, checked.
pub fn requested_scope(kind: &str, name: &str) -> Result<LimitScope, QuotaError> {
    let scope = scope_of(kind, name).ok_or_else(|| QuotaError::Invalid {
        field: "scope".into(),
        message: format!("scope: {kind:?} is not one of default, user, group, account"),
    })?;
    match &scope {
        LimitScope::DefaultUser if !name.is_empty() => Err(QuotaError::Invalid {
            field: "name".into(),
            message: "name: the default quota names no one; leave it empty".into(),
        }),
        LimitScope::DefaultUser => Ok(scope),
        _ if !is_name(name) => Err(QuotaError::Invalid {
            field: "name".into(),
            message: format!("name: {name:?} is not a user, group or account name"),
        }),
        _ => Ok(scope),
    }
}

/// The limits a request carries, checked.
pub fn checked_limits(limits: &QuotaLimits) -> Result<(), QuotaError> {
    limits
        .check()
        .map_err(|(field, message)| QuotaError::Invalid {
            field: format!("limits.{field}"),
            message: format!("limits.{field}: {message}"),
        })
}

/// One quota that applies to the caller, and its use now.
#[derive(Debug, Serialize, ToSchema)]
pub struct QuotaUsage {
    /// `default`, `user`, `group` or `account`.
    pub scope: String,
    pub name: String,
    pub limits: QuotaLimits,
    /// GPUs in use now by everyone the quota covers (MIG instances and shards count
    /// their fraction).
    pub gpus_in_use: f64,
    #[schema(value_type = Object)]
    pub slices_in_use: std::collections::BTreeMap<String, u32>,
    pub running_jobs: u32,
    pub submitted_jobs: u32,
    /// GPU-hours counted this period: what ended jobs used, and what running jobs
    /// reserve (GPUs × time limit) until they end.
    pub gpu_hours_used: f64,
    pub period_start: String,
    pub period_end: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MyUsage {
    pub user: String,
    /// How GPU-hours are counted: `month`, `rolling` or `fixed`.
    pub period: String,
    /// The quotas that apply: the caller's own (or the default), then their groups'
    /// and their account's. Without any, usage is unlimited and the list is empty.
    pub quotas: Vec<QuotaUsage>,
}

/// Why a session would go over `u`'s limits, if it would.
fn over_for_session(
    u: &LimitUsage,
    asked_milli: u64,
    gpus: u32,
    slice: Option<&str>,
    hours: f64,
) -> Option<String> {
    let label = scope_label(&u.scope);
    let l = &u.limits;
    if let Some(max) = l.max_gpus {
        if u.gpus_milli + asked_milli > u64::from(max) * 1000 {
            return Some(format!(
                "{label} allows {} at once; {} in use and this session asks for {}",
                plural(u64::from(max), "GPU", "GPUs"),
                is_are_f(u.gpus_milli as f64 / 1000.0),
                plural(u64::from(gpus), "GPU", "GPUs")
            ));
        }
    }
    if let Some(slice) = slice {
        if let Some(&max) = l.max_slices.get(slice) {
            let used = u.slices.get(slice).copied().unwrap_or(0);
            if used + gpus > max {
                return Some(format!(
                    "{label} allows {} at once; {} in use and this session asks for {}",
                    plural(
                        u64::from(max),
                        &format!("{slice} slice"),
                        &format!("{slice} slices")
                    ),
                    is_are(u64::from(used)),
                    plural(u64::from(gpus), "slice", "slices")
                ));
            }
        }
    }
    if let Some(max) = l.max_running_jobs {
        if u.running_jobs >= max {
            return Some(format!(
                "{label} allows {} at once; {} running",
                plural(
                    u64::from(max),
                    "running job or session",
                    "running jobs and sessions"
                ),
                is_are(u64::from(u.running_jobs))
            ));
        }
    }
    if let Some(max) = l.max_gpu_minutes {
        let used = u.gpu_milli_seconds as f64 / 3_600_000.0;
        let asks = asked_milli as f64 / 1000.0 * hours;
        if gpus > 0 && used + asks > max as f64 / 60.0 {
            return Some(format!(
                "{label} allows {} this period; {} used or reserved and this session \
                 could use {}",
                plural_f(max as f64 / 60.0, "GPU-hour", "GPU-hours"),
                if short(used) == "1" {
                    "1 is".to_string()
                } else {
                    format!("{} are", short(used))
                },
                short(asks)
            ));
        }
    }
    if let Some(max) = l.max_wall_secs {
        if hours * 3600.0 > max as f64 {
            return Some(format!(
                "{label} allows a time limit of at most {}; this session asks for {}",
                plural_f(max as f64 / 3600.0, "hour", "hours"),
                plural_f(hours, "hour", "hours")
            ));
        }
    }
    None
}

/// `2`, `1.5`, `0.25`: at most two decimals, none when whole.
pub fn fmt_num(x: f64) -> String {
    short(x)
}

/// `none is`, `1 is`, `2 are`: a count of things in use or running.
fn is_are(n: u64) -> String {
    match n {
        0 => "none is".to_string(),
        1 => "1 is".to_string(),
        n => format!("{n} are"),
    }
}

/// As [`is_are`], for GPUs that may be fractions (MIG instances, shards).
fn is_are_f(x: f64) -> String {
    match short(x).as_str() {
        "0" => "none is".to_string(),
        "1" => "1 is".to_string(),
        n => format!("{n} are"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler::Limits;

    fn usage(limits: Limits, gpus_milli: u64, used_hours: f64) -> LimitUsage {
        LimitUsage {
            scope: LimitScope::User("ann".into()),
            limits,
            gpus_milli,
            slices: BTreeMap::new(),
            running_jobs: 1,
            submitted_jobs: 1,
            gpu_milli_seconds: (used_hours * 3_600_000.0) as u64,
            period_start: 0,
            period_end: 0,
        }
    }

    #[test]
    fn a_session_over_a_quota_is_explained() {
        let two = Limits {
            max_gpus: Some(2),
            ..Default::default()
        };
        let msg = over_for_session(&usage(two.clone(), 2000, 0.0), 1000, 1, None, 8.0)
            .expect("over the GPUs");
        assert_eq!(
            msg,
            "user ann's quota allows 2 GPUs at once; 2 are in use and this session asks for 1 GPU"
        );
        let one = Limits {
            max_gpus: Some(1),
            ..Default::default()
        };
        assert_eq!(
            over_for_session(&usage(one, 1000, 0.0), 1000, 1, None, 8.0).expect("over"),
            "user ann's quota allows 1 GPU at once; 1 is in use and this session asks for 1 GPU"
        );
        let jobs = Limits {
            max_running_jobs: Some(1),
            ..Default::default()
        };
        assert_eq!(
            over_for_session(&usage(jobs, 0, 0.0), 0, 0, None, 8.0).expect("over"),
            "user ann's quota allows 1 running job or session at once; 1 is running"
        );
        let wall = Limits {
            max_wall_secs: Some(3600),
            ..Default::default()
        };
        assert_eq!(
            over_for_session(&usage(wall, 0, 0.0), 0, 0, None, 2.0).expect("over"),
            "user ann's quota allows a time limit of at most 1 hour; this session asks for 2 hours"
        );
        assert!(over_for_session(&usage(two, 1000, 0.0), 1000, 1, None, 8.0).is_none());
        let hours = Limits {
            max_gpu_minutes: Some(600),
            ..Default::default()
        };
        let msg = over_for_session(&usage(hours, 0, 9.5), 1000, 1, None, 1.0)
            .expect("over the GPU-hours");
        assert!(
            msg.contains("allows 10 GPU-hours this period; 9.5 are used"),
            "{msg}"
        );
        let one_hour = Limits {
            max_gpu_minutes: Some(60),
            ..Default::default()
        };
        let msg = over_for_session(&usage(one_hour, 0, 1.0), 1000, 1, None, 1.0)
            .expect("over the GPU-hours");
        assert!(
            msg.contains("allows 1 GPU-hour this period; 1 is used or reserved"),
            "{msg}"
        );
    }

    #[test]
    fn quota_limits_map_to_the_schedulers() {
        let q: QuotaLimits = serde_json::from_str(
            r#"{"max_gpus": 2, "max_gpu_hours": 1.5, "max_job_hours": 0.5,
                "max_gpus_per_type": {"1g.10gb": 3}}"#,
        )
        .expect("quota limits");
        let l = q.to_limits();
        assert_eq!(l.max_gpus, Some(2));
        assert_eq!(l.max_gpu_minutes, Some(90));
        assert_eq!(l.max_wall_secs, Some(1800));
        assert_eq!(l.max_slices["1g.10gb"], 3);
        assert!(serde_json::from_str::<QuotaLimits>(r#"{"max_gpu": 2}"#).is_err());
        let bad = QuotaLimits {
            max_gpu_hours: Some(-1.0),
            ..Default::default()
        };
        assert_eq!(bad.check().expect_err("negative").0, "max_gpu_hours");
        assert_eq!(fmt_num(2.0), "2");
        assert_eq!(fmt_num(1.25), "1.25");
    }
}
