//! Placement that fights fragmentation: best fit. A job goes to the nodes with the
//! fewest free slices of the kind it asks that still hold it, so small jobs fill
//! partly used nodes and whole nodes stay free for large jobs; within a node MIG
//! instances and shards are packed onto GPUs already in use (see
//! `Inventory::allocate`). Honours reservations made by backfill.

use crate::cluster::inventory::Inventory;
use crate::cluster::resources::{Need, Res};
use crate::cluster::state::Shape;
use crate::model::Time;

/// Reservations held for higher-priority jobs, per node: `(start, end, resources)`.
/// Indexed by node number (grown on demand) so that a lookup is one index.
#[derive(Debug, Default, Clone)]
pub(crate) struct ReservedTable {
    per_node: Vec<Vec<(Time, Time, Res)>>,
    /// Nodes holding a reservation, each once, in the order first reserved.
    nodes: Vec<u32>,
}

impl ReservedTable {
    /// Reserves `res` of node `n` for `[start, end)`.
    pub fn add(&mut self, n: u32, start: Time, end: Time, res: Res) {
        let i = n as usize;
        if self.per_node.len() <= i {
            self.per_node.resize_with(i + 1, Vec::new);
        }
        if self.per_node[i].is_empty() {
            self.nodes.push(n);
        }
        self.per_node[i].push((start, end, res));
    }

    /// Nodes holding a reservation.
    pub fn nodes(&self) -> &[u32] {
        &self.nodes
    }

    /// Resources of node `n` reserved at some time in `[from, to)`.
    pub fn overlapping(&self, n: u32, from: Time, to: Time) -> Option<Res> {
        let v = self.per_node.get(n as usize)?;
        let mut r = Res::default();
        let mut any = false;
        for (s, e, res) in v {
            if *s < to && *e > from {
                r.add(res);
                any = true;
            }
        }
        any.then_some(r)
    }
}

/// Free resources of node `n` usable by a job running in `[now, end)`.
pub(crate) fn usable_free(
    inv: &Inventory,
    resv: &ReservedTable,
    n: u32,
    now: Time,
    end: Time,
) -> Res {
    let mut f = inv.nodes[n as usize].free;
    if let Some(r) = resv.overlapping(n, now, end) {
        f.sub_saturating(&r);
    }
    f
}

fn node_fits(
    inv: &Inventory,
    resv: &ReservedTable,
    shape: &Shape,
    n: u32,
    now: Time,
    end: Time,
) -> bool {
    let node = &inv.nodes[n as usize];
    if !node.usable() {
        return false;
    }
    if shape.key.exclusive {
        return node.jobs == 0
            && resv.overlapping(n, now, end).is_none()
            && node.total.fits(&shape.key.need);
    }
    usable_free(inv, resv, n, now, end).fits(&shape.key.need)
}

/// Best-fit score: fewer free slices of the asked kind, then fewer free CPUs.
fn score(inv: &Inventory, need: &Need, n: u32) -> (u32, u32, u32) {
    let f = &inv.nodes[n as usize].free;
    (f.in_mask(need.mask), f.cpus, n)
}

/// Nodes for a job starting at `now`, or `None` if it cannot start now.
pub(crate) fn place(
    inv: &Inventory,
    resv: &ReservedTable,
    shape: &Shape,
    now: Time,
) -> Option<Vec<u32>> {
    let key = &shape.key;
    let end = key.time.map_or(Time::MAX, |t| now.saturating_add(t as i64));
    let fits = |n: u32| node_fits(inv, resv, shape, n, now, end);
    let mut chosen: Vec<u32> = Vec::with_capacity(key.nodes as usize);
    for &r in &key.required {
        if !fits(r) {
            return None;
        }
        chosen.push(r);
    }
    let want = key.nodes as usize;
    if chosen.len() >= want {
        return Some(chosen);
    }
    let eligible = |n: u32| {
        shape.eligible.binary_search(&n).is_ok() && key.required.binary_search(&n).is_err()
    };
    let index_key = if key.exclusive {
        None
    } else {
        inv.key_for_mask(key.need.mask)
    };
    match index_key {
        Some(k) => {
            let idx = &inv.index[key.partition as usize][k];
            for &(_, n) in idx.range((key.need.count.min(u32::from(u16::MAX)) as u16, 0)..) {
                if eligible(n) && fits(n) {
                    chosen.push(n);
                    if chosen.len() == want {
                        return Some(chosen);
                    }
                }
            }
            None
        }
        None => {
            let mut c: Vec<u32> = shape
                .eligible
                .iter()
                .copied()
                .filter(|&n| eligible(n) && fits(n))
                .collect();
            if chosen.len() + c.len() < want {
                return None;
            }
            c.sort_by_key(|&n| score(inv, &key.need, n));
            chosen.extend(c.into_iter().take(want - key.required.len()));
            Some(chosen)
        }
    }
}
