//! Resource vectors: CPUs, memory and free slices per slice class on one node, and
//! the per-node need of a job. Owns the arithmetic; knows nothing of jobs.

use serde::{Deserialize, Serialize};

/// Most slice classes (GPU models, MIG profiles, shard kinds) one cluster may have.
pub(crate) const MAX_CLASSES: usize = 16;

/// CPUs, memory (MB) and slices per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub(crate) struct Res {
    pub cpus: u32,
    pub mem: u64,
    pub slices: [u16; MAX_CLASSES],
}

impl Res {
    pub fn in_mask(&self, mask: u16) -> u32 {
        let mut m = mask;
        let mut n = 0u32;
        while m != 0 {
            let c = m.trailing_zeros() as usize;
            n += u32::from(self.slices[c]);
            m &= m - 1;
        }
        n
    }
    pub fn fits(&self, need: &Need) -> bool {
        self.cpus >= need.cpus && self.mem >= need.mem && self.in_mask(need.mask) >= need.count
    }
    pub fn add(&mut self, o: &Res) {
        self.cpus += o.cpus;
        self.mem += o.mem;
        for (a, b) in self.slices.iter_mut().zip(o.slices.iter()) {
            *a += *b;
        }
    }
    pub fn sub_saturating(&mut self, o: &Res) {
        self.cpus = self.cpus.saturating_sub(o.cpus);
        self.mem = self.mem.saturating_sub(o.mem);
        for (a, b) in self.slices.iter_mut().zip(o.slices.iter()) {
            *a = a.saturating_sub(*b);
        }
    }
    /// Concrete resources for `need` taken from `self` (classes in mask order).
    pub fn take(&self, need: &Need) -> Res {
        let mut r = Res {
            cpus: need.cpus,
            mem: need.mem,
            slices: [0; MAX_CLASSES],
        };
        let mut left = need.count;
        let mut m = need.mask;
        while m != 0 && left > 0 {
            let c = m.trailing_zeros() as usize;
            let t = u32::from(self.slices[c]).min(left);
            r.slices[c] = t as u16;
            left -= t;
            m &= m - 1;
        }
        r
    }
}

/// What a job needs on each of its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Need {
    pub cpus: u32,
    pub mem: u64,
    /// Slice classes that may serve the request.
    pub mask: u16,
    /// Slices per node.
    pub count: u32,
}
