//! Priority and fair share as Slurm's `sprio` and `sshare` show them, for
//! `GET /api/v1/priority` and `GET /api/v1/shares`: the weights and each pending
//! job's priority factors (normalized and weighted), and the fair-share tree (the
//! root, each account, each of its users) with shares, usage and factors.
//!
//! Owns: who sees what (a user: their own pending jobs, their own user lines and
//! the lines of their accounts; an administrator: all), the query's bounds, and
//! the answer's shape. The figures are the scheduler's (`scheduler::Cluster::
//! priority_factors_list`, `shares`), computed as its priorities are.
//! Must not touch: HTTP types, SQL, the scheduler's internals.

use scheduler::{PriorityFilter, PriorityView, SharesView};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::jobs::{query_ids, query_list, MAX_QUERY_NAMES};
use super::{Jobs, ServiceError};
use crate::auth::Principal;

/// A comma-separated list of a query, bounded (as the job listing's are).
fn bounded_list(field: &'static str, text: Option<&str>) -> Result<Vec<String>, ServiceError> {
    query_list(field, text, MAX_QUERY_NAMES)
}

/// `GET /priority`'s filters; without them every pending job the caller may see.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct PriorityQuery {
    /// Only these jobs, comma-separated job numbers (an array's number lists its
    /// pending tasks); at most 1,000.
    pub ids: Option<String>,
    /// Only these users' jobs, comma-separated (administrators; others see only
    /// their own).
    pub user: Option<String>,
    /// Only jobs in these partitions, comma-separated.
    pub partition: Option<String>,
}

/// The weights of the priority factors (Slurm's `PriorityWeight*`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PriorityWeights {
    /// The site factor's weight: 1, as Slurm's (atrium sets no site factor).
    pub site: u32,
    pub age: u32,
    /// Slurm's association factor: atrium has none (0).
    pub assoc: u32,
    pub fairshare: u32,
    pub job_size: u32,
    pub partition: u32,
    pub qos: u32,
    /// Slurm's `PriorityWeightTRES`: atrium has none (null).
    pub tres: Option<String>,
    /// Age at which the age factor reaches 1 (`PriorityMaxAge`), seconds.
    pub max_age_secs: u64,
    /// How often the pending jobs' priorities are recomputed
    /// (`PriorityCalcPeriod`), seconds.
    pub calc_period_secs: u64,
}

/// One value per factor: normalized (0 to 1) or weighted.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct FactorValues {
    pub age: f64,
    /// Always 0: atrium has no association factor.
    pub assoc: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub partition: f64,
    pub qos: f64,
    /// Always 0: atrium has no site factor.
    pub site: f64,
}

impl From<scheduler::Factors> for FactorValues {
    fn from(f: scheduler::Factors) -> Self {
        FactorValues {
            age: f.age,
            assoc: 0.0,
            fairshare: f.fairshare,
            job_size: f.job_size,
            partition: f.partition,
            qos: f.qos,
            site: 0.0,
        }
    }
}

/// One pending job's priority and its factors (a `sprio` line).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobPriority {
    /// `123`, `123_4`, or `123_[5-9]` for an array's pending tasks.
    pub id: String,
    pub job_id: u64,
    pub user: String,
    pub account: String,
    pub partition: String,
    /// The weighted factors summed and rounded, less `nice`: the priority the job
    /// gets at the scheduler's next recomputation (the job list's `priority` is
    /// the last one's, at most `calc_period_secs` old).
    pub priority: i64,
    /// Its `--nice` plus an administrator's adjustment (`scontrol top`).
    pub nice: i64,
    pub normalized: FactorValues,
    pub weighted: FactorValues,
}

/// `GET /priority`: the weights and the pending jobs' factors, in id order.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PriorityAnswer {
    pub weights: PriorityWeights,
    /// The jobs waiting in a queue (not held, dependencies met, begin time
    /// reached), those the caller may see.
    pub jobs: Vec<JobPriority>,
}

/// `GET /shares`' filters.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct SharesQuery {
    /// Only these accounts' lines (any case), comma-separated.
    pub accounts: Option<String>,
    /// Only these users' lines (any case), comma-separated; without it and without
    /// `all_users`, the caller's. Account lines are listed either way.
    pub users: Option<String>,
    /// `true`: every user's lines (administrators; others see only their own).
    pub all_users: Option<String>,
}

/// One line of the fair-share tree: the root, an account, or a user of an account.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ShareLine {
    /// The account (`root` for the root).
    pub account: String,
    /// The user, on a user's line.
    pub user: Option<String>,
    /// The account above: `root` for an account, the account for a user; none for
    /// the root.
    pub parent: Option<String>,
    /// Its shares; none for the root and for a user, whose account's shares apply
    /// (Slurm's `FairShare=parent`, `shares_from_parent`).
    pub raw_shares: Option<u32>,
    pub shares_from_parent: bool,
    /// Its part of its level's shares (a user: its account's; the root: 0, as
    /// Slurm reports it).
    pub norm_shares: f64,
    /// Decayed usage (billing units × seconds; `fairshare.half_life_secs`). A
    /// user's is over all their accounts.
    pub raw_usage: f64,
    /// Its part of all the usage.
    pub norm_usage: f64,
    /// The usage the factor weighs against the shares (a user: its account's).
    pub effective_usage: f64,
    /// The fair-share factor its jobs get, 2^(-effective_usage / norm_shares); none
    /// for the root.
    pub fairshare: Option<f64>,
}

/// `GET /shares`: the lines the caller may see, root first, then each account
/// (by name) followed by its users (by name).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SharesAnswer {
    /// The cluster's name (`jobs.cluster_name`).
    pub cluster: String,
    /// Usage decays by half every so many seconds (Slurm's
    /// `PriorityDecayHalfLife`).
    pub half_life_secs: u64,
    pub lines: Vec<ShareLine>,
}

fn job_priority(v: PriorityView) -> JobPriority {
    JobPriority {
        id: v.display_id,
        job_id: v.id.job,
        user: v.user,
        account: v.account,
        partition: v.partition,
        priority: v.priority,
        nice: v.factors.nice,
        normalized: v.factors.normalized.into(),
        weighted: v.factors.weighted.into(),
    }
}

fn weights(w: &scheduler::PriorityWeights) -> PriorityWeights {
    PriorityWeights {
        site: 1,
        age: w.age,
        assoc: 0,
        fairshare: w.fairshare,
        job_size: w.job_size,
        partition: w.partition,
        qos: w.qos,
        tres: None,
        max_age_secs: w.max_age_secs,
        calc_period_secs: w.calc_period_secs,
    }
}

/// Which lines of the tree are asked for and may be seen.
struct Visible<'a> {
    /// Lower-cased; empty: all.
    accounts: Vec<String>,
    /// Lower-cased; `None`: all.
    users: Option<Vec<String>>,
    /// A user who is not acting as administrator: only their own lines.
    only: Option<&'a str>,
}

impl Visible<'_> {
    fn account(&self, name: &str) -> bool {
        self.accounts.is_empty() || self.accounts.iter().any(|a| a.eq_ignore_ascii_case(name))
    }

    fn user(&self, name: &str) -> bool {
        self.only.is_none_or(|me| me == name)
            && self
                .users
                .as_ref()
                .is_none_or(|us| us.iter().any(|u| u.eq_ignore_ascii_case(name)))
    }
}

/// The lines of `view` that `visible` lets through, in sshare's order.
fn share_lines(view: &SharesView, visible: &Visible<'_>) -> Vec<ShareLine> {
    let total = view.total_usage;
    let part = |usage: f64| if total > 0.0 { usage / total } else { 0.0 };
    let mut lines = Vec::new();
    if visible.account("root") {
        lines.push(ShareLine {
            account: "root".into(),
            user: None,
            parent: None,
            raw_shares: None,
            shares_from_parent: false,
            norm_shares: 0.0,
            raw_usage: total,
            norm_usage: if total > 0.0 { 1.0 } else { 0.0 },
            effective_usage: 1.0,
            fairshare: None,
        });
    }
    for a in &view.accounts {
        if !visible.account(&a.name) {
            continue;
        }
        // A user sees the accounts they charge, not the others'.
        if let Some(me) = visible.only {
            if !a.users.iter().any(|u| u.name == me) {
                continue;
            }
        }
        lines.push(ShareLine {
            account: a.name.clone(),
            user: None,
            parent: Some("root".into()),
            raw_shares: Some(a.raw_shares),
            shares_from_parent: false,
            norm_shares: a.norm_shares,
            raw_usage: a.raw_usage,
            norm_usage: part(a.raw_usage),
            effective_usage: a.effective_usage,
            fairshare: Some(a.fairshare),
        });
        for u in a.users.iter().filter(|u| visible.user(&u.name)) {
            lines.push(ShareLine {
                account: a.name.clone(),
                user: Some(u.name.clone()),
                parent: Some(a.name.clone()),
                raw_shares: None,
                shares_from_parent: true,
                norm_shares: a.norm_shares,
                raw_usage: u.raw_usage,
                norm_usage: part(u.raw_usage),
                effective_usage: a.effective_usage,
                fairshare: Some(a.fairshare),
            });
        }
    }
    lines
}

impl Jobs {
    /// The weights and the factors of the pending jobs `caller` may see that match
    /// `q` (`sprio`): a user's own jobs; asking for another user's gives none.
    pub async fn priority(
        &self,
        caller: &Principal,
        q: PriorityQuery,
    ) -> Result<PriorityAnswer, ServiceError> {
        let ids = query_ids("ids", q.ids.as_deref(), MAX_QUERY_NAMES)?;
        let mut users = bounded_list("user", q.user.as_deref())?;
        let partitions = bounded_list("partition", q.partition.as_deref())?;
        let mut none = false;
        if !caller.acts_as_admin() {
            none = users.iter().any(|u| *u != caller.username);
            users = vec![caller.username.clone()];
        }
        let list = self
            .scheduler()
            .priority(PriorityFilter {
                ids,
                users,
                partitions,
            })
            .await?;
        Ok(PriorityAnswer {
            weights: weights(&list.weights),
            jobs: if none {
                Vec::new()
            } else {
                list.jobs.into_iter().map(job_priority).collect()
            },
        })
    }

    /// The fair-share tree as `caller` may see it (`sshare`): an administrator all
    /// of it; a user the root, the accounts they charge and their own lines.
    pub async fn shares(
        &self,
        caller: &Principal,
        q: SharesQuery,
    ) -> Result<SharesAnswer, ServiceError> {
        let accounts = bounded_list("accounts", q.accounts.as_deref())?;
        let users = bounded_list("users", q.users.as_deref())?;
        let all_users = match q.all_users.as_deref() {
            None | Some("false") | Some("0") => false,
            Some("true") | Some("1") => true,
            Some(other) => {
                return Err(ServiceError::Invalid {
                    field: "all_users",
                    message: format!(
                        "all_users: \"{}\" is not true or false",
                        &other[..other.floor_char_boundary(32)]
                    ),
                })
            }
        };
        let users = if all_users {
            None
        } else if users.is_empty() {
            Some(vec![caller.username.clone()])
        } else {
            Some(users)
        };
        let view = self.scheduler().shares().await?;
        let visible = Visible {
            accounts,
            users,
            only: (!caller.acts_as_admin()).then_some(caller.username.as_str()),
        };
        Ok(SharesAnswer {
            cluster: self.cluster_name().to_string(),
            half_life_secs: view.half_life_secs,
            lines: share_lines(&view, &visible),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler::{AccountShares, UserShares};

    fn view() -> SharesView {
        let account = |name: &str, usage: f64, users: &[(&str, f64)]| AccountShares {
            name: name.into(),
            raw_shares: 1,
            norm_shares: 0.5,
            raw_usage: usage,
            effective_usage: usage / 100.0,
            fairshare: (-(usage / 100.0) / 0.5).exp2(),
            users: users
                .iter()
                .map(|(n, u)| UserShares {
                    name: (*n).into(),
                    raw_usage: *u,
                })
                .collect(),
        };
        SharesView {
            total_usage: 100.0,
            half_life_secs: 604_800,
            accounts: vec![
                account("chem", 0.0, &[("bob", 0.0)]),
                account("phys", 100.0, &[("ann", 60.0), ("bob", 40.0)]),
            ],
        }
    }

    fn names(lines: &[ShareLine]) -> Vec<String> {
        lines
            .iter()
            .map(|l| match &l.user {
                Some(u) => format!("{}/{u}", l.account),
                None => l.account.clone(),
            })
            .collect()
    }

    #[test]
    fn an_administrator_sees_the_tree_a_user_their_own_lines_and_accounts() {
        let all = Visible {
            accounts: Vec::new(),
            users: None,
            only: None,
        };
        let lines = share_lines(&view(), &all);
        assert_eq!(
            names(&lines),
            ["root", "chem", "chem/bob", "phys", "phys/ann", "phys/bob"]
        );
        let ann = &lines[4];
        assert_eq!(ann.raw_shares, None);
        assert!(ann.shares_from_parent);
        assert_eq!((ann.norm_usage, ann.effective_usage), (0.6, 1.0));
        assert_eq!(ann.fairshare, Some(0.25));
        // A user asking for everyone still sees only their own lines and accounts.
        let ann_only = Visible {
            accounts: Vec::new(),
            users: None,
            only: Some("ann"),
        };
        assert_eq!(
            names(&share_lines(&view(), &ann_only)),
            ["root", "phys", "phys/ann"]
        );
        // Accounts (any case) and users narrow; the account lines stay.
        let chem = Visible {
            accounts: vec!["CHEM".into()],
            users: Some(vec!["nobody".into()]),
            only: None,
        };
        assert_eq!(names(&share_lines(&view(), &chem)), ["chem"]);
    }

    #[test]
    fn lists_in_a_query_are_bounded() {
        let many = vec!["u"; MAX_QUERY_NAMES + 1].join(",");
        assert!(matches!(
            bounded_list("user", Some(&many)),
            Err(ServiceError::Invalid { field: "user", .. })
        ));
        let long = "x".repeat(257);
        assert!(bounded_list("partition", Some(&long)).is_err());
        assert_eq!(
            bounded_list("ids", Some(" 1, ,2,")).expect("list"),
            ["1", "2"]
        );
    }
}
