//! Multifactor priority (age, fair-share, job size, partition tier, QOS, nice) and
//! fair-share usage with exponential decay.

use crate::cluster::state::{EntityKind, Job, Usage};
use crate::cluster::{Cluster, QueueKey};
use crate::model::{JobId, Time};
use std::cmp::Reverse;

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
        let hl = self.cfg.fairshare.half_life_secs;
        let (total_u, total_s) = match self.fs_totals.get() {
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
        };
        let e = &self.entities[account as usize];
        if total_u <= 0.0 || total_s <= 0.0 {
            return 1.0;
        }
        let u = usage_at(&e.usage, hl, now) / total_u;
        let s = f64::from(self.shares_of(&e.name)) / total_s;
        (-(u / s.max(1e-9))).exp2()
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

    /// A job's priority at `now`.
    pub(crate) fn compute_priority(&self, job: &Job, now: Time, fs: f64) -> i64 {
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
        let p = f64::from(w.age) * age
            + f64::from(w.fairshare) * fs
            + f64::from(w.job_size) * size.min(1.0)
            + f64::from(w.partition) * part
            + f64::from(w.qos) * qos;
        p.round() as i64 - i64::from(job.req.nice.unwrap_or(0)) - i64::from(job.admin_nice)
    }

    /// The account entity of a job's owner.
    pub(crate) fn account_entity(&self, owner: u32) -> u32 {
        let o = &self.owners[owner as usize];
        o.entities.last().copied().unwrap_or(0)
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
            let fs = match fs_cache.get(acct as usize).copied().flatten() {
                Some(f) => f,
                None => {
                    let f = self.fairshare_factor(acct, now);
                    if let Some(c) = fs_cache.get_mut(acct as usize) {
                        *c = Some(f);
                    }
                    f
                }
            };
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
