//! Limits per user, group and account: what blocks a job from starting, and the
//! usage charged when it starts and refunded when it ends.

use super::priority::accrue;
use crate::cluster::state::{EntityKind, Job, Shape, Usage};
use crate::cluster::Cluster;
use crate::config::{LimitScope, Limits, LimitsConfig, UsagePeriod};
use crate::model::{JobId, Owner, PendingReason, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Days since 1970-01-01 → (year, month 1–12), proleptic Gregorian.
fn civil_from_days(days: i64) -> (i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month)
}

/// (year, month 1–12) → days since 1970-01-01 of its first day.
fn days_from_civil(year: i64, month: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// One set of limits that applies to an owner, and its use now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitUsage {
    /// Whose limits these are (`DefaultUser` for a user with no limits of their own).
    pub scope: LimitScope,
    pub limits: Limits,
    /// GPUs in use, in thousandths of a whole GPU.
    pub gpus_milli: u64,
    /// Slices in use by type.
    pub slices: BTreeMap<String, u32>,
    pub running_jobs: u32,
    pub submitted_jobs: u32,
    /// GPU time counted against `max_gpu_minutes` now, in milli-GPU-seconds (running
    /// jobs count their whole time limit until they end).
    pub gpu_milli_seconds: u64,
    /// The period it counts over.
    pub period_start: Time,
    pub period_end: Time,
}

impl UsagePeriod {
    /// The index of the period holding `now` (a rolling period has only one).
    pub fn index(self, now: Time) -> i64 {
        match self {
            UsagePeriod::Month => {
                let (y, m) = civil_from_days(now.div_euclid(86_400));
                y * 12 + m - 1
            }
            UsagePeriod::Fixed { secs } => now.div_euclid(secs.max(1) as i64),
            UsagePeriod::Rolling { .. } => 0,
        }
    }

    /// Where the period holding `now` starts and ends (a rolling one: the window
    /// ending now).
    pub fn bounds(self, now: Time) -> (Time, Time) {
        match self {
            UsagePeriod::Month => {
                let i = self.index(now);
                let (y, m) = (i.div_euclid(12), i.rem_euclid(12) + 1);
                let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                (
                    days_from_civil(y, m) * 86_400,
                    days_from_civil(ny, nm) * 86_400,
                )
            }
            UsagePeriod::Fixed { secs } => {
                let len = secs.max(1) as i64;
                let start = self.index(now) * len;
                (start, start + len)
            }
            UsagePeriod::Rolling { secs } => (now - secs as i64, now),
        }
    }
}

impl Cluster {
    pub(crate) fn period_of(&self, now: Time) -> i64 {
        self.cfg.limits.period.index(now)
    }

    /// Milli-GPU-seconds counted against GPU-minute limits at `now`: charged in this
    /// period, or (rolling) reserved by running jobs plus what ended jobs used
    /// within the window.
    pub(crate) fn period_used(&self, u: &Usage, now: Time) -> u64 {
        match self.cfg.limits.period {
            UsagePeriod::Rolling { secs } => {
                let from = now - secs as i64;
                let ended: u64 = u
                    .window
                    .iter()
                    .map(|&(start, end, milli)| {
                        milli * (end.min(now) - start.max(from)).max(0) as u64
                    })
                    .sum();
                u.period_charged + ended
            }
            _ if u.period == self.period_of(now) => u.period_charged,
            _ => 0,
        }
    }

    /// The reason a job of this shape and owner may not start now, if any.
    pub(crate) fn limit_block(
        &self,
        shape: &Shape,
        owner: u32,
        now: Time,
    ) -> Option<PendingReason> {
        let part = &self.cfg.partitions[shape.key.partition as usize];
        if let (Some(max), t) = (part.max_time_secs, shape.key.time) {
            if t.is_none_or(|t| t > max) {
                return Some(PendingReason::PartitionTimeLimit);
            }
        }
        let nodes = u64::from(shape.key.nodes);
        for &e in &self.owners[owner as usize].entities {
            let ent = &self.entities[e as usize];
            let (l, u) = (&ent.limits, &ent.usage);
            let user = ent.kind == EntityKind::User;
            if let Some(max) = l.max_wall_secs {
                if shape.key.time.is_none_or(|t| t > max) {
                    return Some(PendingReason::AssocMaxWallDurationPerJobLimit);
                }
            }
            if let Some(max) = l.max_running_jobs {
                if u.running >= max {
                    return Some(if user {
                        PendingReason::AssocMaxJobsLimit
                    } else {
                        PendingReason::AssocGrpJobsLimit
                    });
                }
            }
            let gres = if user {
                PendingReason::QosMaxGresPerUser
            } else {
                PendingReason::AssocGrpGres
            };
            if let Some(max) = l.max_gpus {
                if u.gpus_milli + shape.gpu_milli > u64::from(max) * 1000 {
                    return Some(gres);
                }
            }
            let count = u64::from(shape.key.need.count) * nodes;
            for (t, name) in self.types.iter().enumerate() {
                if shape.type_mask & (1 << t) == 0 {
                    continue;
                }
                if let Some(&max) = l.max_slices.get(name) {
                    if u64::from(u.by_type[t]) + count > u64::from(max) {
                        return Some(gres);
                    }
                }
            }
            if let Some(max) = l.max_gpu_minutes {
                if shape.gpu_milli > 0 {
                    let used = self.period_used(u, now);
                    let Some(t) = shape.key.time else {
                        return Some(PendingReason::AssocGrpGresMinutes);
                    };
                    if used + shape.gpu_milli * t > max * 60 * 1000 {
                        return Some(PendingReason::AssocGrpGresMinutes);
                    }
                }
            }
        }
        None
    }

    /// Charges a starting job to its owner's entities.
    pub(crate) fn charge_start(&mut self, job: &mut Job, now: Time) {
        let shape = &self.shapes[job.shape as usize];
        let gpu = shape.gpu_milli;
        let charge = shape.key.time.map_or(0, |t| gpu * t);
        let rate = self.billing_rate(job);
        let mut by_type = [0u32; crate::cluster::resources::MAX_CLASSES];
        for a in &job.alloc {
            for &s in &a.slices {
                let c = self.inv.nodes[a.node as usize].slices[s as usize].class;
                by_type[self.class_type[c as usize] as usize] += 1;
            }
        }
        let period = self.period_of(now);
        let rolling = self.cfg.limits.period;
        let hl = self.cfg.fairshare.half_life_secs;
        self.fs_totals.set(None);
        for &e in &self.owners[job.owner as usize].entities {
            let u = &mut self.entities[e as usize].usage;
            u.gpus_milli += gpu;
            for (a, b) in u.by_type.iter_mut().zip(by_type.iter()) {
                *a += *b;
            }
            u.running += 1;
            if u.period != period {
                u.period = period;
                u.period_charged = 0;
            }
            if let UsagePeriod::Rolling { secs } = rolling {
                u.window.retain(|&(_, end, _)| end > now - secs as i64);
            }
            u.period_charged += charge;
            accrue(u, hl, now);
            u.fs_rate += rate;
        }
        job.charged = charge;
        job.charge_period = period;
    }

    /// Undoes `charge_start` when a job stops; refunds unused GPU time.
    pub(crate) fn charge_end(&mut self, job: &Job, now: Time) {
        let shape = &self.shapes[job.shape as usize];
        let gpu = shape.gpu_milli;
        let used = gpu * (now - job.start_time.unwrap_or(now)).max(0) as u64;
        let refund = job.charged.saturating_sub(used);
        let period = self.cfg.limits.period;
        let rate = self.billing_rate(job);
        let mut by_type = [0u32; crate::cluster::resources::MAX_CLASSES];
        for a in &job.alloc {
            for &s in &a.slices {
                let c = self.inv.nodes[a.node as usize].slices[s as usize].class;
                by_type[self.class_type[c as usize] as usize] += 1;
            }
        }
        let hl = self.cfg.fairshare.half_life_secs;
        self.fs_totals.set(None);
        for &e in &self.owners[job.owner as usize].entities {
            let u = &mut self.entities[e as usize].usage;
            u.gpus_milli = u.gpus_milli.saturating_sub(gpu);
            for (a, b) in u.by_type.iter_mut().zip(by_type.iter()) {
                *a = a.saturating_sub(*b);
            }
            u.running = u.running.saturating_sub(1);
            if let UsagePeriod::Rolling { secs } = period {
                // The reservation goes; what the job used stays in the window.
                u.period_charged = u.period_charged.saturating_sub(job.charged);
                u.window.retain(|&(_, end, _)| end > now - secs as i64);
                if let Some(start) = job.start_time.filter(|_| gpu > 0) {
                    u.window.push((start, now, gpu));
                }
            } else if u.period == job.charge_period {
                u.period_charged = u.period_charged.saturating_sub(refund);
            }
            accrue(u, hl, now);
            u.fs_rate = (u.fs_rate - rate).max(0.0);
        }
    }

    /// Billing units per second of a running job.
    fn billing_rate(&self, job: &Job) -> f64 {
        let b = &self.cfg.fairshare.billing;
        let cpus: u64 = job.alloc.iter().map(|a| u64::from(a.res.cpus)).sum();
        b.gpu * self.allocated_gpu_milli(job) as f64 / 1000.0 + b.cpu * cpus as f64
    }

    /// The weights of the slices a job was given, in milli-GPUs.
    pub(crate) fn allocated_gpu_milli(&self, job: &Job) -> u64 {
        job.alloc
            .iter()
            .flat_map(|a| {
                a.slices.iter().map(|&s| {
                    let c = self.inv.nodes[a.node as usize].slices[s as usize].class;
                    u64::from(self.inv.classes[c as usize].weight_milli)
                })
            })
            .sum()
    }

    /// Changes a set of limits at run time. Pending jobs above new limits wait
    /// with the matching reason; running jobs are not touched.
    pub fn set_limits(&mut self, scope: LimitScope, limits: Limits) {
        let l = &mut self.cfg.limits;
        match &scope {
            LimitScope::DefaultUser => l.default_user = limits,
            LimitScope::User(n) => {
                l.users.insert(n.clone(), limits);
            }
            LimitScope::Group(n) => {
                l.groups.insert(n.clone(), limits);
            }
            LimitScope::Account(n) => {
                l.accounts.insert(n.clone(), limits);
            }
        }
        for i in 0..self.entities.len() {
            let lim = self.limits_for(self.entities[i].kind, &self.entities[i].name.clone());
            self.entities[i].limits = lim;
        }
    }

    /// Replaces every limit and the period at once. Pending jobs above new limits
    /// wait with the matching reason from the next pass; running jobs are not
    /// touched. A different period starts counting afresh, from the running jobs'
    /// reservations.
    pub fn set_limits_config(&mut self, limits: LimitsConfig, now: Time) {
        let new_period = limits.period != self.cfg.limits.period;
        self.cfg.limits = limits;
        let added = self.add_group_entities();
        for i in 0..self.entities.len() {
            let lim = self.limits_for(self.entities[i].kind, &self.entities[i].name.clone());
            self.entities[i].limits = lim;
        }
        if new_period || !added.is_empty() {
            self.recount_period(now, if new_period { None } else { Some(&added) });
        }
    }

    /// Gives owners interned before every group had an entity the missing ones, with
    /// their live jobs counted; returns the entities created.
    fn add_group_entities(&mut self) -> Vec<u32> {
        let mut added = Vec::new();
        for o in 0..self.owners.len() {
            for g in self.owners[o].owner.groups.clone() {
                let known = self
                    .entity_ids
                    .contains_key(&(EntityKind::Group, g.clone()));
                let e = self.intern_entity(EntityKind::Group, &g);
                if !known {
                    added.push(e);
                }
                if !self.owners[o].entities.contains(&e) {
                    self.owners[o].entities.push(e);
                    if !added.contains(&e) {
                        added.push(e);
                    }
                }
            }
        }
        if added.is_empty() {
            return added;
        }
        for e in &added {
            let u = &mut self.entities[*e as usize].usage;
            *u = Usage {
                fs_usage: u.fs_usage,
                fs_last: u.fs_last,
                ..Usage::default()
            };
        }
        let jobs: Vec<JobId> = self.jobs.keys().copied().collect();
        for id in jobs {
            let j = &self.jobs[&id];
            let entities: Vec<u32> = self.owners[j.owner as usize]
                .entities
                .iter()
                .copied()
                .filter(|e| added.contains(e))
                .collect();
            if entities.is_empty() || j.state.is_terminal() {
                continue;
            }
            let submitted = match &j.array {
                Some(a) => a.pending_count() as u32,
                None => 1,
            };
            let running = !j.alloc.is_empty();
            let gpu = self.shapes[j.shape as usize].gpu_milli;
            let mut by_type = [0u32; crate::cluster::resources::MAX_CLASSES];
            for a in &j.alloc {
                for &s in &a.slices {
                    let c = self.inv.nodes[a.node as usize].slices[s as usize].class;
                    by_type[self.class_type[c as usize] as usize] += 1;
                }
            }
            for e in entities {
                let u = &mut self.entities[e as usize].usage;
                u.submitted += submitted;
                if running {
                    u.gpus_milli += gpu;
                    u.running += 1;
                    for (a, b) in u.by_type.iter_mut().zip(by_type.iter()) {
                        *a += *b;
                    }
                }
            }
        }
        added
    }

    /// Period charges counted again from the running jobs' reservations, for every
    /// entity (`None`) or some.
    fn recount_period(&mut self, now: Time, only: Option<&[u32]>) {
        let period = self.period_of(now);
        for (i, ent) in self.entities.iter_mut().enumerate() {
            if only.is_none_or(|o| o.contains(&(i as u32))) {
                ent.usage.period = period;
                ent.usage.period_charged = 0;
                ent.usage.window.clear();
            }
        }
        let running: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| !j.alloc.is_empty() && !j.state.is_terminal())
            .map(|(id, _)| *id)
            .collect();
        for id in running {
            let Some(mut j) = self.jobs.get_mut(&id) else {
                continue;
            };
            if only.is_none() {
                j.charge_period = period;
            }
            let (charged, owner) = (j.charged, j.owner);
            for &e in &self.owners[owner as usize].entities {
                if only.is_none_or(|o| o.contains(&e)) {
                    self.entities[e as usize].usage.period_charged += charged;
                }
            }
        }
    }

    /// What limits the work of `owner` and how much of each is in use at `now`:
    /// its user's limits, then each of its groups', then its account's.
    pub fn limit_usage(&self, owner: &Owner, now: Time) -> Vec<LimitUsage> {
        let mut scopes = vec![(EntityKind::User, owner.user.clone())];
        scopes.extend(owner.groups.iter().map(|g| (EntityKind::Group, g.clone())));
        scopes.push((EntityKind::Account, owner.account.clone()));
        let (period_start, period_end) = self.cfg.limits.period.bounds(now);
        scopes
            .into_iter()
            .map(|(kind, name)| {
                let limits = self.limits_for(kind, &name);
                let usage = self
                    .entity_ids
                    .get(&(kind, name.clone()))
                    .map(|&e| &self.entities[e as usize].usage);
                let mut slices = BTreeMap::new();
                if let Some(u) = usage {
                    for (t, type_name) in self.types.iter().enumerate() {
                        if u.by_type[t] > 0 {
                            slices.insert(type_name.clone(), u.by_type[t]);
                        }
                    }
                }
                LimitUsage {
                    scope: match kind {
                        EntityKind::User if self.cfg.limits.users.contains_key(&name) => {
                            LimitScope::User(name)
                        }
                        EntityKind::User => LimitScope::DefaultUser,
                        EntityKind::Group => LimitScope::Group(name),
                        EntityKind::Account => LimitScope::Account(name),
                    },
                    limits,
                    gpus_milli: usage.map_or(0, |u| u.gpus_milli),
                    slices,
                    running_jobs: usage.map_or(0, |u| u.running),
                    submitted_jobs: usage.map_or(0, |u| u.submitted),
                    gpu_milli_seconds: usage.map_or(0, |u| self.period_used(u, now)),
                    period_start,
                    period_end,
                }
            })
            .collect()
    }

    pub(crate) fn limits_for(&self, kind: EntityKind, name: &str) -> Limits {
        let l = &self.cfg.limits;
        match kind {
            EntityKind::User => l.users.get(name).unwrap_or(&l.default_user).clone(),
            EntityKind::Group => l.groups.get(name).cloned().unwrap_or_default(),
            EntityKind::Account => l.accounts.get(name).cloned().unwrap_or_default(),
        }
    }
}
