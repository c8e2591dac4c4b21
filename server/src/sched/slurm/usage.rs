//! Quotas and their use under Slurm, for the pages and `/api/v1/me/usage`: Slurm's
//! associations enforce the quotas (`atrium slurm apply-quotas`); atrium shows each
//! quota that applies to a user with what is in use now (from the jobs as the last
//! poll saw them) and the GPU time of the period (from the job rows).
//!
//! Must not touch: Slurm's commands, HTTP types.

use std::collections::{BTreeMap, HashMap};

use scheduler::{LimitScope, LimitUsage, LimitsConfig, Owner};

use super::parse;
use crate::store::{Store, UsageFilter};

/// What one job holds now, as counted against quotas.
#[derive(Debug, Clone)]
pub(super) struct Live {
    pub user: String,
    pub account: String,
    pub running: bool,
    /// GPUs in thousandths (running jobs only).
    pub gpus_milli: u64,
    /// Slices by type (running jobs only).
    pub slices: Vec<(String, u32)>,
}

impl Live {
    /// A job row's hold: running and completing jobs hold their GPUs, pending ones
    /// count as submitted only. `gpu_milli` is Slurm's `AllocTRES` where it has
    /// `gres/gpu`, else the requested gres.
    pub fn of(user: &str, account: &str, state: &str, gres: &str, gpu_milli: u64) -> Option<Live> {
        let running = match state {
            "RUNNING" | "COMPLETING" => true,
            "PENDING" => false,
            _ => return None,
        };
        let slices = if running {
            parse::gres_counts(gres)
        } else {
            Vec::new()
        };
        let gpus_milli = match (running, gpu_milli) {
            (false, _) => 0,
            (true, 0) => slices
                .iter()
                .map(|(ty, n)| u64::from(*n) * parse::slice_milli(ty))
                .sum(),
            (true, m) => m,
        };
        Some(Live {
            user: user.to_string(),
            account: account.to_string(),
            running,
            gpus_milli,
            slices,
        })
    }
}

/// The quotas that apply to each owner (their own or the default, their groups', their
/// account's) with the use of each.
pub(super) async fn limit_usages(
    store: &Store,
    limits: &LimitsConfig,
    live: &[Live],
    owners: &[Owner],
    now: i64,
) -> Vec<Vec<LimitUsage>> {
    let (period_start, period_end) = limits.period.bounds(now);
    // Group quotas count the jobs of the group's members.
    let mut groups_of: HashMap<&str, Vec<String>> = HashMap::new();
    if owners.iter().any(|o| !o.groups.is_empty()) {
        for l in live {
            if groups_of.contains_key(l.user.as_str()) {
                continue;
            }
            let groups = match store.posix_identity(&l.user).await {
                Ok(Some(id)) => id.groups.into_iter().map(|(name, _)| name).collect(),
                _ => Vec::new(),
            };
            groups_of.insert(&l.user, groups);
        }
    }
    let mut out = Vec::with_capacity(owners.len());
    for owner in owners {
        let mut scopes = vec![match limits.users.contains_key(&owner.user) {
            true => LimitScope::User(owner.user.clone()),
            false => LimitScope::DefaultUser,
        }];
        scopes.extend(owner.groups.iter().cloned().map(LimitScope::Group));
        scopes.push(LimitScope::Account(owner.account.clone()));
        let mut each = Vec::with_capacity(scopes.len());
        for scope in scopes {
            let (quota, filter) = match &scope {
                LimitScope::User(u) => (limits.users.get(u), Filter::User(&owner.user)),
                LimitScope::DefaultUser => (Some(&limits.default_user), Filter::User(&owner.user)),
                LimitScope::Group(g) => (limits.groups.get(g), Filter::Group(g)),
                LimitScope::Account(a) => (limits.accounts.get(a), Filter::Account(a)),
            };
            let mut usage = LimitUsage {
                scope: scope.clone(),
                limits: quota.cloned().unwrap_or_default(),
                gpus_milli: 0,
                slices: BTreeMap::new(),
                running_jobs: 0,
                submitted_jobs: 0,
                gpu_milli_seconds: 0,
                period_start,
                period_end,
            };
            for l in live.iter().filter(|l| filter.holds(l, &groups_of)) {
                usage.submitted_jobs += 1;
                if l.running {
                    usage.running_jobs += 1;
                    usage.gpus_milli += l.gpus_milli;
                    for (ty, n) in &l.slices {
                        *usage.slices.entry(ty.clone()).or_default() += n;
                    }
                }
            }
            let rows = UsageFilter {
                from: period_start * 1000,
                to: period_end * 1000,
                now: now * 1000,
                user: filter.user(),
                group: filter.group(),
                account: filter.account(),
                partition: None,
            };
            match store.usage_total(&rows).await {
                Ok(u) => usage.gpu_milli_seconds = (u.gpu_seconds * 1000.0).round() as u64,
                Err(e) => tracing::warn!(error = %e, "reading GPU time for a quota failed"),
            }
            each.push(usage);
        }
        out.push(each);
    }
    out
}

/// Whose jobs a scope counts.
enum Filter<'a> {
    User(&'a str),
    Group(&'a str),
    Account(&'a str),
}

impl Filter<'_> {
    fn holds(&self, l: &Live, groups_of: &HashMap<&str, Vec<String>>) -> bool {
        match self {
            Filter::User(u) => l.user == *u,
            Filter::Account(a) => l.account == *a,
            Filter::Group(g) => groups_of
                .get(l.user.as_str())
                .is_some_and(|gs| gs.iter().any(|x| x == g)),
        }
    }

    fn user(&self) -> Option<String> {
        match self {
            Filter::User(u) => Some(u.to_string()),
            _ => None,
        }
    }

    fn group(&self) -> Option<String> {
        match self {
            Filter::Group(g) => Some(g.to_string()),
            _ => None,
        }
    }

    fn account(&self) -> Option<String> {
        match self {
            Filter::Account(a) => Some(a.to_string()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_jobs_hold_their_slices_and_pending_ones_are_only_submitted() {
        let mig = Live::of("ann", "lab", "RUNNING", "gpu:1g.10gb:2", 0).expect("running");
        assert!(mig.running);
        assert_eq!(mig.gpus_milli, 2 * 142);
        assert_eq!(mig.slices, vec![("1g.10gb".to_string(), 2)]);
        let alloc = Live::of("ann", "lab", "RUNNING", "gpu:2", 1500).expect("running");
        assert_eq!(alloc.gpus_milli, 1500, "AllocTRES wins where Slurm has it");
        let pending = Live::of("ann", "lab", "PENDING", "gpu:a100:4", 0).expect("pending");
        assert!(!pending.running);
        assert_eq!(pending.gpus_milli, 0);
        assert!(Live::of("ann", "lab", "COMPLETED", "gpu:1", 0).is_none());
    }
}
