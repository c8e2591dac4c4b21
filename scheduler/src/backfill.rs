//! EASY backfill reservations. For a high-priority job that cannot start now, find
//! the earliest time its nodes are free, assuming running jobs end at their time
//! limits and earlier reservations hold their resources; lower-priority jobs may
//! then start only where they do not touch those reserved resources before the
//! reservation ends (`placement::place` checks that).

use crate::cluster::resources::Res;
use crate::cluster::state::Shape;
use crate::cluster::Cluster;
use crate::model::Time;
use crate::placement::ReservedTable;

/// A planned start: time and resources per node.
pub(crate) struct Plan {
    pub start: Time,
    pub end: Time,
    pub nodes: Vec<(u32, Res)>,
}

impl Cluster {
    /// Plans the earliest start of a job of `shape`; `None` if it cannot be known
    /// (unlimited jobs in the way, nodes down or drained).
    pub(crate) fn plan_reservation(
        &self,
        shape: &Shape,
        now: Time,
        resv: &ReservedTable,
    ) -> Option<Plan> {
        let key = &shape.key;
        let dur = key.time.map_or(Time::MAX, |t| t as i64);
        let cands: Vec<u32> = shape
            .eligible
            .iter()
            .copied()
            .filter(|&n| self.inv.nodes[n as usize].usable())
            .collect();
        if key
            .required
            .iter()
            .any(|r| !self.inv.nodes[*r as usize].usable())
        {
            return None;
        }
        // Per node (indexed by node number): resources and jobs released by the
        // running jobs that have ended by the time examined; position in `cands`.
        let node_count = self.inv.nodes.len();
        let mut released: Vec<(Res, u32)> = vec![(Res::default(), 0); node_count];
        let mut pos: Vec<u32> = vec![u32::MAX; node_count];
        for (i, &n) in cands.iter().enumerate() {
            pos[n as usize] = i as u32;
        }
        let resv_nodes: Vec<u32> = resv
            .nodes()
            .iter()
            .copied()
            .filter(|&n| pos[n as usize] != u32::MAX)
            .collect();
        let eff = |n: u32, t: Time, released: &[(Res, u32)]| -> (Res, bool) {
            let node = &self.inv.nodes[n as usize];
            let mut f = node.free;
            let mut jobs_left = node.jobs;
            let (r, k) = &released[n as usize];
            if *k > 0 {
                f.add(r);
                jobs_left = jobs_left.saturating_sub(*k);
            }
            let mut clear = jobs_left == 0;
            if let Some(r) = resv.overlapping(n, t, t.saturating_add(dur)) {
                f.sub_saturating(&r);
                clear = false;
            }
            (f, clear)
        };
        let fits = |n: u32, t: Time, released: &[(Res, u32)]| -> bool {
            let (f, clear) = eff(n, t, released);
            if key.exclusive {
                clear && self.inv.nodes[n as usize].total.fits(&key.need)
            } else {
                f.fits(&key.need)
            }
        };
        let want_other = (key.nodes as usize).saturating_sub(key.required.len());
        let is_req = |n: &u32| key.required.binary_search(n).is_ok();
        let mut fit: Vec<bool> = Vec::with_capacity(cands.len());
        let (mut req_ok, mut other_ok) = (0usize, 0usize);
        for &n in &cands {
            let f = fits(n, now, &released);
            if f {
                if is_req(&n) {
                    req_ok += 1;
                } else {
                    other_ok += 1;
                }
            }
            fit.push(f);
        }
        let want_req = key.required.len();
        let choose = |t: Time, fit: &[bool], released: &[(Res, u32)]| -> Plan {
            let mut others: Vec<(u32, u32, u32)> = cands
                .iter()
                .zip(fit)
                .filter(|(n, f)| **f && !is_req(n))
                .map(|(&n, _)| {
                    let (f, _) = eff(n, t, released);
                    (f.in_mask(key.need.mask), f.cpus, n)
                })
                .collect();
            others.sort_unstable();
            let mut nodes: Vec<u32> = key.required.clone();
            nodes.extend(others.into_iter().take(want_other).map(|x| x.2));
            let nodes = nodes
                .into_iter()
                .map(|n| {
                    let r = if key.exclusive {
                        self.inv.nodes[n as usize].total
                    } else {
                        eff(n, t, released).0.take(&key.need)
                    };
                    (n, r)
                })
                .collect();
            Plan {
                start: t,
                end: t.saturating_add(dur),
                nodes,
            }
        };
        if req_ok == want_req && other_ok >= want_other {
            return Some(choose(now, &fit, &released));
        }
        let mut it = self.running_by_end.iter().peekable();
        while let Some(&&(end, _)) = it.peek() {
            if end == Time::MAX {
                break;
            }
            let t = end.max(now);
            let mut touched: Vec<u32> = Vec::new();
            while let Some(&&(e, id)) = it.peek() {
                if e != end {
                    break;
                }
                it.next();
                if let Some(j) = self.jobs.get(&id) {
                    for a in &j.alloc {
                        if let Some(entry) = released.get_mut(a.node as usize) {
                            entry.0.add(&a.res);
                            entry.1 += 1;
                            touched.push(a.node);
                        }
                    }
                }
            }
            for n in touched.into_iter().chain(resv_nodes.iter().copied()) {
                let p = pos[n as usize];
                if p == u32::MAX {
                    continue;
                }
                let now_fits = fits(n, t, &released);
                if let Some(f) = fit.get_mut(p as usize) {
                    if *f != now_fits {
                        let c = if is_req(&n) {
                            &mut req_ok
                        } else {
                            &mut other_ok
                        };
                        if now_fits {
                            *c += 1;
                        } else {
                            *c -= 1;
                        }
                        *f = now_fits;
                    }
                }
            }
            if req_ok == want_req && other_ok >= want_other {
                return Some(choose(t, &fit, &released));
            }
        }
        None
    }
}
