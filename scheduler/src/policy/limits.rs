//! Limits per user, group and account: what blocks a job from starting, and the
//! usage charged when it starts and refunded when it ends.

use super::priority::accrue;
use crate::cluster::state::{EntityKind, Job, Shape};
use crate::cluster::Cluster;
use crate::config::{LimitScope, Limits};
use crate::model::{PendingReason, Time};

impl Cluster {
    pub(crate) fn period_of(&self, now: Time) -> i64 {
        now.div_euclid(self.cfg.limits.period_secs.max(1) as i64)
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
        let period = self.period_of(now);
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
                    let used = if u.period == period {
                        u.period_charged
                    } else {
                        0
                    };
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
            if u.period == job.charge_period {
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

    pub(crate) fn limits_for(&self, kind: EntityKind, name: &str) -> Limits {
        let l = &self.cfg.limits;
        match kind {
            EntityKind::User => l.users.get(name).unwrap_or(&l.default_user).clone(),
            EntityKind::Group => l.groups.get(name).cloned().unwrap_or_default(),
            EntityKind::Account => l.accounts.get(name).cloned().unwrap_or_default(),
        }
    }
}
