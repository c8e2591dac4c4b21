//! Quotas and their use under Slurm, for the pages and `/api/v1/me/usage`: Slurm's
//! associations enforce the quotas (`atrium slurm apply-quotas`); atrium shows each
//! quota that applies to a user with what is in use now (from the jobs as the last
//! poll saw them) and the GPU time of the period (from the job rows).
//!
//! Must not touch: Slurm's commands, HTTP types.

use std::collections::{BTreeMap, HashMap};

use scheduler::{LimitScope, LimitUsage, LimitsConfig, Owner};

use super::parse;
use crate::store::{Store, UsageFilter, UsageKey};

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
    let each: Vec<Vec<(LimitScope, Scope)>> = owners
        .iter()
        .map(|owner| {
            let own = match limits.users.contains_key(&owner.user) {
                true => LimitScope::User(owner.user.clone()),
                false => LimitScope::DefaultUser,
            };
            std::iter::once((own, (UsageKey::User, owner.user.clone())))
                .chain(
                    owner
                        .groups
                        .iter()
                        .map(|g| (LimitScope::Group(g.clone()), (UsageKey::Group, g.clone()))),
                )
                .chain(std::iter::once((
                    LimitScope::Account(owner.account.clone()),
                    (UsageKey::Account, owner.account.clone()),
                )))
                .collect()
        })
        .collect();
    // Group quotas count the jobs of the group's members: every membership, read once.
    let mut groups_of: HashMap<String, Vec<String>> = HashMap::new();
    if owners.iter().any(|o| !o.groups.is_empty()) {
        match store.memberships().await {
            Ok(pairs) => {
                for (group, user) in pairs {
                    groups_of.entry(user).or_default().push(group);
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading group memberships for quotas failed"),
        }
    }
    let range = UsageFilter {
        from: period_start * 1000,
        to: period_end * 1000,
        now: now * 1000,
        ..UsageFilter::default()
    };
    let scopes: Vec<&Scope> = each.iter().flatten().map(|(_, s)| s).collect();
    let gpu_time = gpu_time(store, &range, &scopes, owners.len() > 1).await;
    each.into_iter()
        .map(|scopes| {
            scopes
                .into_iter()
                .map(|(scope, whose)| {
                    let quota = match &scope {
                        LimitScope::User(u) => limits.users.get(u),
                        LimitScope::DefaultUser => Some(&limits.default_user),
                        LimitScope::Group(g) => limits.groups.get(g),
                        LimitScope::Account(a) => limits.accounts.get(a),
                    };
                    let mut usage = LimitUsage {
                        scope,
                        limits: quota.cloned().unwrap_or_default(),
                        gpus_milli: 0,
                        slices: BTreeMap::new(),
                        running_jobs: 0,
                        submitted_jobs: 0,
                        gpu_milli_seconds: gpu_time.get(&whose).copied().unwrap_or(0),
                        period_start,
                        period_end,
                    };
                    for l in live.iter().filter(|l| counts(&whose, l, &groups_of)) {
                        usage.submitted_jobs += 1;
                        if l.running {
                            usage.running_jobs += 1;
                            usage.gpus_milli += l.gpus_milli;
                            for (ty, n) in &l.slices {
                                *usage.slices.entry(ty.clone()).or_default() += n;
                            }
                        }
                    }
                    usage
                })
                .collect()
        })
        .collect()
}

/// Whose jobs a quota counts: a user's, a group's members', an account's.
type Scope = (UsageKey, String);

fn counts((key, name): &Scope, l: &Live, groups_of: &HashMap<String, Vec<String>>) -> bool {
    match key {
        UsageKey::User => l.user == *name,
        UsageKey::Account => l.account == *name,
        UsageKey::Group => groups_of
            .get(&l.user)
            .is_some_and(|gs| gs.iter().any(|g| g == name)),
    }
}

/// GPU time of the period in milli-GPU-seconds by scope. For one owner (the user's own
/// page, a session start) a query per scope, each on that scope's rows; for many (the
/// admin pages) one grouped query per kind of scope instead of one per user.
async fn gpu_time(
    store: &Store,
    range: &UsageFilter,
    scopes: &[&Scope],
    grouped: bool,
) -> HashMap<Scope, u64> {
    let milli = |gpu_seconds: f64| (gpu_seconds * 1000.0).round() as u64;
    let mut out = HashMap::new();
    if grouped {
        let kinds: std::collections::HashSet<UsageKey> = scopes.iter().map(|(k, _)| *k).collect();
        for key in kinds {
            match store.usage_by(range, key).await {
                Ok(rows) => out.extend(
                    rows.into_iter()
                        .map(|r| ((key, r.key), milli(r.usage.gpu_seconds))),
                ),
                Err(e) => tracing::warn!(error = %e, "reading GPU time for quotas failed"),
            }
        }
        return out;
    }
    for &(key, name) in scopes {
        let mut filter = range.clone();
        match key {
            UsageKey::User => filter.user = Some(name.clone()),
            UsageKey::Group => filter.group = Some(name.clone()),
            UsageKey::Account => filter.account = Some(name.clone()),
        }
        match store.usage_total(&filter).await {
            Ok(u) => {
                out.insert((*key, name.clone()), milli(u.gpu_seconds));
            }
            Err(e) => tracing::warn!(error = %e, "reading GPU time for a quota failed"),
        }
    }
    out
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
