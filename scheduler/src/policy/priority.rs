//! Multifactor priority (age, fair-share, job size, partition tier, QOS, nice) and
//! fair-share usage with exponential decay.

use crate::cluster::state::{EntityKind, Job, Usage};
use crate::cluster::{Cluster, QueueKey};
use crate::model::{JobId, Time};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;

/// One value per priority factor atrium weighs (Slurm's age, fair-share, job size,
/// partition and QOS factors; atrium has no association, site or TRES factor).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Factors {
    pub age: f64,
    pub fairshare: f64,
    pub job_size: f64,
    pub partition: f64,
    pub qos: f64,
}

impl Factors {
    /// The factors added up, in the order the priority adds them.
    pub fn sum(&self) -> f64 {
        self.age + self.fairshare + self.job_size + self.partition + self.qos
    }
}

/// What a pending job's priority is made of (Slurm's `sprio`): each factor
/// normalized (0 to 1) and multiplied by its weight, and the nice value (its own
/// `--nice` plus an administrator's, `scontrol top` included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PriorityFactors {
    pub normalized: Factors,
    pub weighted: Factors,
    pub nice: i64,
}

impl PriorityFactors {
    /// The priority these factors give: the weighted factors summed and rounded, less
    /// the nice value. The scheduler computes every priority this way.
    pub fn priority(&self) -> i64 {
        self.weighted.sum().round() as i64 - self.nice
    }
}

/// An account's fair-share figures at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
struct FairshareParts {
    /// Decayed usage (billing units × seconds).
    raw_usage: f64,
    raw_shares: u32,
    /// Its part of all accounts' usage (0 when there is none).
    usage: f64,
    /// Its part of all accounts' shares.
    shares: f64,
    factor: f64,
}

/// Decayed usage at `now` without changing the stored value.
pub(crate) fn usage_at(u: &Usage, half_life: u64, now: Time) -> f64 {
    let dt = (now - u.fs_last).max(0) as f64;
    if dt == 0.0 {
        return u.fs_usage;
    }
    let lambda = std::f64::consts::LN_2 / half_life.max(1) as f64;
    let decay = (-lambda * dt).exp();
    u.fs_usage * decay + u.fs_rate * (1.0 - decay) / lambda
}

/// Brings stored usage up to `now` (call before changing the rate).
pub(crate) fn accrue(u: &mut Usage, half_life: u64, now: Time) {
    if now > u.fs_last {
        u.fs_usage = usage_at(u, half_life, now);
        u.fs_last = now;
    }
}

impl Cluster {
    /// Fair-share factor of an account: 2^(-U/S), U its share of all usage, S its
    /// share of all shares (Slurm's classic formula).
    pub(crate) fn fairshare_factor(&self, account: u32, now: Time) -> f64 {
        self.fairshare_parts(account, now).factor
    }

    /// Usage and shares of all accounts at `now` (cached for one instant).
    fn fs_totals_at(&self, now: Time) -> (f64, f64) {
        let hl = self.cfg.fairshare.half_life_secs;
        match self.fs_totals.get() {
            Some((t, u, s)) if t == now => (u, s),
            _ => {
                let mut total_u = 0.0;
                let mut total_s = 0.0;
                for e in self
                    .entities
                    .iter()
                    .filter(|e| e.kind == EntityKind::Account)
                {
                    total_u += usage_at(&e.usage, hl, now);
                    total_s += f64::from(self.shares_of(&e.name));
                }
                self.fs_totals.set(Some((now, total_u, total_s)));
                (total_u, total_s)
            }
        }
    }

    /// What an account's fair-share factor is made of at `now`.
    fn fairshare_parts(&self, account: u32, now: Time) -> FairshareParts {
        let hl = self.cfg.fairshare.half_life_secs;
        let (total_u, total_s) = self.fs_totals_at(now);
        let e = &self.entities[account as usize];
        let raw_usage = usage_at(&e.usage, hl, now);
        let raw_shares = self.shares_of(&e.name);
        if total_u <= 0.0 || total_s <= 0.0 {
            return FairshareParts {
                raw_usage,
                raw_shares,
                usage: 0.0,
                shares: if total_s > 0.0 {
                    f64::from(raw_shares) / total_s
                } else {
                    0.0
                },
                factor: 1.0,
            };
        }
        let u = raw_usage / total_u;
        let s = f64::from(raw_shares) / total_s;
        FairshareParts {
            raw_usage,
            raw_shares,
            usage: u,
            shares: s,
            factor: (-(u / s.max(1e-9))).exp2(),
        }
    }

    fn shares_of(&self, account: &str) -> u32 {
        self.cfg
            .fairshare
            .shares
            .get(account)
            .copied()
            .unwrap_or(1)
            .max(1)
    }

    /// A job's priority at `now`: its weighted factors summed, rounded, less its
    /// nice value ([`PriorityFactors::priority`]).
    pub(crate) fn compute_priority(&self, job: &Job, now: Time, fs: f64) -> i64 {
        self.priority_factors(job, now, fs).priority()
    }

    /// The factors of a job's priority at `now`, `fs` its account's fair-share
    /// factor: each normalized (0 to 1) and weighted, and its nice value.
    pub(crate) fn priority_factors(&self, job: &Job, now: Time, fs: f64) -> PriorityFactors {
        let w = &self.cfg.priority;
        let shape = &self.shapes[job.shape as usize];
        let age = ((now - job.eligible_time).max(0) as f64 / w.max_age_secs.max(1) as f64).min(1.0);
        let total_gpu = self.total_gpu_milli;
        let size = if shape.gpu_milli > 0 && total_gpu > 0 {
            shape.gpu_milli as f64 / total_gpu as f64
        } else {
            let total_cpu = self.total_cpus;
            (u64::from(shape.key.need.cpus) * u64::from(shape.key.nodes)) as f64
                / total_cpu.max(1) as f64
        };
        let max_tier = self
            .cfg
            .partitions
            .iter()
            .map(|p| p.priority_tier)
            .max()
            .unwrap_or(0);
        let part = match self.cfg.partitions.get(shape.key.partition as usize) {
            Some(p) if max_tier > 0 => f64::from(p.priority_tier) / f64::from(max_tier),
            _ => 0.0,
        };
        let max_q = self.cfg.qos.iter().map(|q| q.priority).max().unwrap_or(0);
        let qos = match self.cfg.qos.get(job.qos as usize) {
            Some(q) if max_q > 0 => f64::from(q.priority) / f64::from(max_q),
            _ => 0.0,
        };
        let normalized = Factors {
            age,
            fairshare: fs,
            job_size: size.min(1.0),
            partition: part,
            qos,
        };
        let weighted = Factors {
            age: f64::from(w.age) * normalized.age,
            fairshare: f64::from(w.fairshare) * normalized.fairshare,
            job_size: f64::from(w.job_size) * normalized.job_size,
            partition: f64::from(w.partition) * normalized.partition,
            qos: f64::from(w.qos) * normalized.qos,
        };
        PriorityFactors {
            normalized,
            weighted,
            nice: i64::from(job.req.nice.unwrap_or(0)) + i64::from(job.admin_nice),
        }
    }

    /// The account entity of a job's owner.
    pub(crate) fn account_entity(&self, owner: u32) -> u32 {
        let o = &self.owners[owner as usize];
        o.entities.last().copied().unwrap_or(0)
    }

    /// The fair-share factor of account entity `acct` at `now`, computed once per
    /// account in `cache` (one slot per entity).
    fn fairshare_cached(&self, cache: &mut [Option<f64>], acct: u32, now: Time) -> f64 {
        if let Some(f) = cache.get(acct as usize).copied().flatten() {
            return f;
        }
        let f = self.fairshare_factor(acct, now);
        if let Some(c) = cache.get_mut(acct as usize) {
            *c = Some(f);
        }
        f
    }

    /// Recomputes every queued job's priority and rebuilds the queues.
    ///
    /// Walks the job table once in id order (cheap, sequential) instead of looking
    /// every queued job up by id, then rebuilds each queue from a sorted run in
    /// one bulk build. The set of queues (and their reasons) does not change: a
    /// queue's key does not depend on priority.
    pub(crate) fn recalc_priorities(&mut self, now: Time) {
        self.last_priority_calc = now;
        let mut fs_cache: Vec<Option<f64>> = vec![None; self.entities.len()];
        let mut prio: Vec<i64> = Vec::new();
        for job in self.jobs.values().filter(|j| j.queued) {
            let acct = self.account_entity(job.owner);
            let fs = self.fairshare_cached(&mut fs_cache, acct, now);
            prio.push(self.compute_priority(job, now, fs));
        }
        let mut entries: Vec<(QueueKey, Reverse<i64>, JobId)> = Vec::with_capacity(prio.len());
        let mut prio = prio.into_iter();
        self.jobs.for_each_keeping_lines(|job| {
            if let Some(p) = job.queued.then(|| prio.next()).flatten() {
                job.priority = p;
                entries.push((Cluster::queue_key(job), Reverse(p), job.id));
            }
        });
        entries.sort_unstable();
        let mut rest = entries.as_slice();
        while let Some(&(key, _, _)) = rest.first() {
            let n = rest.iter().take_while(|e| e.0 == key).count();
            let (run, tail) = rest.split_at(n);
            rest = tail;
            let q = self.queues.entry(key).or_default();
            q.jobs = run.iter().map(|&(_, p, id)| (p, id)).collect();
        }
        self.heads = self
            .queues
            .iter()
            .filter_map(|(k, q)| q.jobs.first().map(|&(p, id)| (p, id, *k)))
            .collect();
    }
}

/// Which pending jobs [`Cluster::priority_factors_list`] lists; empty lists match
/// everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PriorityFilter {
    /// Job numbers (an array's number lists its pending tasks).
    pub ids: Vec<u64>,
    pub users: Vec<String>,
    pub partitions: Vec<String>,
}

/// One pending job's priority and what it is made of (a `sprio` line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorityView {
    pub id: JobId,
    /// `123`, `123_4`, or `123_[5-9]` for an array's pending tasks.
    pub display_id: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    /// What the factors give now ([`PriorityFactors::priority`]): the priority the
    /// job is given at the next recomputation (`squeue`'s shows the last one).
    pub priority: i64,
    pub factors: PriorityFactors,
}

/// The weights and the pending jobs' factors (`sprio`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriorityList {
    pub weights: crate::config::PriorityWeights,
    pub jobs: Vec<PriorityView>,
}

/// One account's fair-share figures (an `sshare` account line) and its users'.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccountShares {
    pub name: String,
    /// Its shares (`[fairshare.shares]`, 1 unless set).
    pub raw_shares: u32,
    /// Its part of all accounts' shares.
    pub norm_shares: f64,
    /// Its decayed usage (billing units × seconds).
    pub raw_usage: f64,
    /// Its part of all accounts' decayed usage (0 when nothing is used).
    pub effective_usage: f64,
    /// Its fair-share factor, 2^(-effective usage / norm shares): what each of its
    /// jobs is given.
    pub fairshare: f64,
    /// The users who have submitted to it, by name.
    pub users: Vec<UserShares>,
}

/// A user of an account: atrium weighs the account, not the user (Slurm's
/// `FairShare=parent`), so a user's line has only its own usage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserShares {
    pub name: String,
    /// The user's decayed usage, over all their accounts (billing units × seconds).
    pub raw_usage: f64,
}

/// The fair-share tree at one instant (`sshare`): every account that has had a job,
/// by name, and the usage of them all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharesView {
    /// Decayed usage of all accounts.
    pub total_usage: f64,
    pub half_life_secs: u64,
    pub accounts: Vec<AccountShares>,
}

impl PriorityFilter {
    fn matches(&self, id: JobId, user: &str, partition: &str) -> bool {
        (self.ids.is_empty() || self.ids.contains(&id.job))
            && (self.users.is_empty() || self.users.iter().any(|u| u == user))
            && (self.partitions.is_empty() || self.partitions.iter().any(|p| p == partition))
    }
}

impl Cluster {
    /// The pending jobs in a ready queue (not held, dependencies met, begin time
    /// reached: those that have a priority), in id order, each with its priority's
    /// factors at `now`; and the weights.
    pub fn priority_factors_list(&self, filter: &PriorityFilter, now: Time) -> PriorityList {
        let mut fs_cache: Vec<Option<f64>> = vec![None; self.entities.len()];
        let mut jobs = Vec::new();
        for job in self.jobs.values().filter(|j| j.queued) {
            let owner = &self.owners[job.owner as usize].owner;
            let shape = &self.shapes[job.shape as usize];
            let partition = self
                .cfg
                .partitions
                .get(shape.key.partition as usize)
                .map_or("", |p| p.name.as_str());
            if !filter.matches(job.id, &owner.user, partition) {
                continue;
            }
            let acct = self.account_entity(job.owner);
            let fs = self.fairshare_cached(&mut fs_cache, acct, now);
            let factors = self.priority_factors(job, now, fs);
            let display_id = match &job.array {
                Some(a) => {
                    let spec = crate::model::ArraySpec {
                        ranges: a.pending.clone(),
                        max_running: a.max_running,
                    };
                    format!("{}_[{}]", job.id.job, spec)
                }
                None => job.id.to_string(),
            };
            jobs.push(PriorityView {
                id: job.id,
                display_id,
                user: owner.user.clone(),
                account: owner.account.clone(),
                partition: partition.to_string(),
                priority: factors.priority(),
                factors,
            });
        }
        PriorityList {
            weights: self.cfg.priority.clone(),
            jobs,
        }
    }

    /// The fair-share figures of every account with a job so far, and of their
    /// users, at `now`: the figures the jobs' fair-share factors are computed from.
    pub fn shares(&self, now: Time) -> SharesView {
        let hl = self.cfg.fairshare.half_life_secs;
        let (total_usage, _) = self.fs_totals_at(now);
        let mut users: std::collections::BTreeMap<&str, std::collections::BTreeSet<&str>> =
            std::collections::BTreeMap::new();
        for o in &self.owners {
            users
                .entry(o.owner.account.as_str())
                .or_default()
                .insert(o.owner.user.as_str());
        }
        let mut accounts: Vec<AccountShares> = self
            .entity_ids
            .iter()
            .filter(|((kind, _), _)| *kind == EntityKind::Account)
            .map(|((_, name), &e)| {
                let parts = self.fairshare_parts(e, now);
                let users = users
                    .get(name.as_str())
                    .into_iter()
                    .flatten()
                    .map(|user| UserShares {
                        name: (*user).to_string(),
                        raw_usage: self
                            .entity_ids
                            .get(&(EntityKind::User, (*user).to_string()))
                            .map_or(0.0, |&u| {
                                usage_at(&self.entities[u as usize].usage, hl, now)
                            }),
                    })
                    .collect();
                AccountShares {
                    name: name.clone(),
                    raw_shares: parts.raw_shares,
                    norm_shares: parts.shares,
                    raw_usage: parts.raw_usage,
                    effective_usage: parts.usage,
                    fairshare: parts.factor,
                    users,
                }
            })
            .collect();
        accounts.sort_by(|a, b| a.name.cmp(&b.name));
        SharesView {
            total_usage,
            half_life_secs: hl,
            accounts,
        }
    }
}
