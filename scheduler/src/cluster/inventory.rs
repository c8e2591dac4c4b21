//! The runtime node inventory: slice classes, per-node slices and free resources,
//! and the per-partition best-fit index. Owns allocation and release of slices.

use super::resources::{Need, Res, MAX_CLASSES};
use crate::config::ClusterConfig;
use crate::error::ConfigError;
use crate::model::gpu_internal::{mig_compute_slices, model_matches};
use crate::model::{GpuMode, NodeConfig, NodeState, SliceId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// What kind of slice a class is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum ClassKind {
    Whole { model: String },
    Mig { profile: String },
    Shard { per_gpu: u32 },
}

/// A slice class: interchangeable slices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SliceClass {
    pub kind: ClassKind,
    /// Name used by per-slice-type limits and `sinfo`: model (lower case), MIG
    /// profile or `shard`.
    pub type_name: String,
    /// Size in thousandths of a GPU.
    pub weight_milli: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct SliceRt {
    pub class: u8,
    pub gpu: u32,
    pub id: SliceId,
}

/// Administrative state of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Admin {
    Up,
    Drain(String),
    Down(String),
}

#[derive(Debug, Clone)]
pub(crate) struct NodeRt {
    pub cfg: NodeConfig,
    pub total: Res,
    pub free: Res,
    pub slices: Vec<SliceRt>,
    pub used: Vec<bool>,
    pub admin: Admin,
    pub partitions: Vec<u16>,
    /// Jobs with resources on the node.
    pub jobs: u32,
}

impl NodeRt {
    pub fn usable(&self) -> bool {
        self.admin == Admin::Up
    }
    pub fn state(&self) -> NodeState {
        match &self.admin {
            Admin::Drain(r) => NodeState::Drain { reason: r.clone() },
            Admin::Down(r) => NodeState::Down { reason: r.clone() },
            Admin::Up if self.jobs == 0 => NodeState::Idle,
            Admin::Up => {
                let no_slices = self.total.slices.iter().any(|&t| t > 0)
                    && self.free.slices.iter().all(|&f| f == 0);
                if self.free.cpus == 0 || self.free.mem == 0 || no_slices {
                    NodeState::Allocated
                } else {
                    NodeState::Mixed
                }
            }
        }
    }
}

/// Index keys: one per class, then "any whole GPU", then "any shard".
pub(crate) fn key_count(classes: usize) -> usize {
    classes + 2
}

#[derive(Debug, Clone)]
pub(crate) struct Inventory {
    pub classes: Vec<SliceClass>,
    pub nodes: Vec<NodeRt>,
    pub by_name: BTreeMap<String, u32>,
    pub whole_mask: u16,
    pub shard_mask: u16,
    /// `index[partition][key]`: usable nodes by free slices of that key.
    pub index: Vec<Vec<BTreeSet<(u16, u32)>>>,
}

impl Inventory {
    pub fn build(cfg: &ClusterConfig) -> Result<Inventory, ConfigError> {
        let err = |m: String| ConfigError(m);
        let mut classes: Vec<SliceClass> = Vec::new();
        let class_of =
            |kind: ClassKind, classes: &mut Vec<SliceClass>| -> Result<u8, ConfigError> {
                if let Some(i) = classes.iter().position(|c| c.kind == kind) {
                    return Ok(i as u8);
                }
                if classes.len() == MAX_CLASSES {
                    return Err(err(format!("more than {MAX_CLASSES} slice types")));
                }
                let (type_name, weight_milli) = match &kind {
                    ClassKind::Whole { model } => (model.clone(), 1000),
                    ClassKind::Mig { profile } => {
                        let g = mig_compute_slices(profile).unwrap_or(7);
                        (profile.clone(), g * 1000 / 7)
                    }
                    ClassKind::Shard { per_gpu } => ("shard".to_string(), 1000 / per_gpu),
                };
                classes.push(SliceClass {
                    kind,
                    type_name,
                    weight_milli,
                });
                Ok((classes.len() - 1) as u8)
            };
        let mut nodes = Vec::with_capacity(cfg.nodes.len());
        let mut by_name = BTreeMap::new();
        for (ni, n) in cfg.nodes.iter().enumerate() {
            if n.name.is_empty() || by_name.insert(n.name.clone(), ni as u32).is_some() {
                return Err(err(format!(
                    "node name \"{}\" is empty or repeated",
                    n.name
                )));
            }
            let mut slices = Vec::new();
            let mut seen_idx = BTreeSet::new();
            for g in &n.gpus {
                if !seen_idx.insert(g.index) {
                    return Err(err(format!(
                        "node {}: GPU index {} repeated",
                        n.name, g.index
                    )));
                }
                match &g.mode {
                    GpuMode::Whole => {
                        let c = class_of(
                            ClassKind::Whole {
                                model: g.model.to_ascii_lowercase(),
                            },
                            &mut classes,
                        )?;
                        slices.push(SliceRt {
                            class: c,
                            gpu: g.index,
                            id: SliceId::Gpu { index: g.index },
                        });
                    }
                    GpuMode::Mig(instances) => {
                        let profiles = crate::model::mig_profiles(&g.model).ok_or_else(|| {
                            err(format!(
                                "node {}: GPU {} ({}) does not support MIG",
                                n.name, g.index, g.model
                            ))
                        })?;
                        let mut used = 0;
                        for m in instances {
                            let Some(&(_, gs)) = profiles.iter().find(|(p, _)| *p == m.profile)
                            else {
                                return Err(err(format!(
                                    "node {}: MIG profile {} is not valid for {}",
                                    n.name, m.profile, g.model
                                )));
                            };
                            used += gs;
                            let c = class_of(
                                ClassKind::Mig {
                                    profile: m.profile.clone(),
                                },
                                &mut classes,
                            )?;
                            slices.push(SliceRt {
                                class: c,
                                gpu: g.index,
                                id: SliceId::Mig {
                                    gpu: g.index,
                                    profile: m.profile.clone(),
                                    uuid: m.uuid.clone(),
                                },
                            });
                        }
                        if used > 7 {
                            return Err(err(format!(
                                "node {}: GPU {} has MIG instances using {used} of 7 compute slices",
                                n.name, g.index
                            )));
                        }
                    }
                    GpuMode::Shards(k) => {
                        if *k == 0 || *k > 1000 {
                            return Err(err(format!(
                                "node {}: GPU {} shard count must be 1..=1000",
                                n.name, g.index
                            )));
                        }
                        let c = class_of(ClassKind::Shard { per_gpu: *k }, &mut classes)?;
                        for s in 0..*k {
                            slices.push(SliceRt {
                                class: c,
                                gpu: g.index,
                                id: SliceId::Shard {
                                    gpu: g.index,
                                    shard: s,
                                },
                            });
                        }
                    }
                }
            }
            let mut total = Res {
                cpus: n.cpus,
                mem: n.memory_mb,
                slices: [0; MAX_CLASSES],
            };
            for s in &slices {
                total.slices[s.class as usize] += 1;
            }
            nodes.push(NodeRt {
                cfg: n.clone(),
                total,
                free: total,
                used: vec![false; slices.len()],
                slices,
                admin: Admin::Up,
                partitions: Vec::new(),
                jobs: 0,
            });
        }
        let mut whole_mask = 0u16;
        let mut shard_mask = 0u16;
        for (i, c) in classes.iter().enumerate() {
            match c.kind {
                ClassKind::Whole { .. } => whole_mask |= 1 << i,
                ClassKind::Shard { .. } => shard_mask |= 1 << i,
                ClassKind::Mig { .. } => {}
            }
        }
        let mut inv = Inventory {
            index: vec![vec![BTreeSet::new(); key_count(classes.len())]; cfg.partitions.len()],
            classes,
            nodes,
            by_name,
            whole_mask,
            shard_mask,
        };
        for (pi, p) in cfg.partitions.iter().enumerate() {
            for name in &p.nodes {
                let ni = *inv.by_name.get(name).ok_or_else(|| {
                    err(format!("partition {} names unknown node {name}", p.name))
                })?;
                if !inv.nodes[ni as usize].partitions.contains(&(pi as u16)) {
                    inv.nodes[ni as usize].partitions.push(pi as u16);
                }
            }
        }
        for ni in 0..inv.nodes.len() {
            inv.index_insert(ni as u32);
        }
        Ok(inv)
    }

    /// Key value of node `n` for index key `k`.
    fn key_value(&self, n: &NodeRt, k: usize) -> Option<u16> {
        let nc = self.classes.len();
        let (mask, total) = if k < nc {
            (1u16 << k, n.total.slices[k])
        } else if k == nc {
            (self.whole_mask, n.total.in_mask(self.whole_mask) as u16)
        } else {
            (self.shard_mask, n.total.in_mask(self.shard_mask) as u16)
        };
        (total > 0).then(|| n.free.in_mask(mask) as u16)
    }

    pub fn index_remove(&mut self, ni: u32) {
        let n = &self.nodes[ni as usize];
        if !n.usable() {
            return;
        }
        for k in 0..key_count(self.classes.len()) {
            if let Some(v) = self.key_value(n, k) {
                for &p in &n.partitions {
                    self.index[p as usize][k].remove(&(v, ni));
                }
            }
        }
    }

    pub fn index_insert(&mut self, ni: u32) {
        let n = &self.nodes[ni as usize];
        if !n.usable() {
            return;
        }
        for k in 0..key_count(self.classes.len()) {
            if let Some(v) = self.key_value(n, k) {
                for &p in &n.partitions {
                    self.index[p as usize][k].insert((v, ni));
                }
            }
        }
    }

    /// The index key serving a slice mask, if any.
    pub fn key_for_mask(&self, mask: u16) -> Option<usize> {
        let nc = self.classes.len();
        if mask == 0 {
            None
        } else if mask.count_ones() == 1 {
            Some(mask.trailing_zeros() as usize)
        } else if mask == self.whole_mask {
            Some(nc)
        } else if mask == self.shard_mask {
            Some(nc + 1)
        } else {
            None
        }
    }

    /// Slice mask for a typed or untyped GPU request; `Err` names the problem.
    pub fn gpu_mask(&self, ty: Option<&str>) -> Result<u16, String> {
        let mut mask = 0u16;
        for (i, c) in self.classes.iter().enumerate() {
            let ok = match (&c.kind, ty) {
                (ClassKind::Whole { .. }, None) => true,
                (ClassKind::Whole { model }, Some(t)) => model_matches(model, t),
                (ClassKind::Mig { profile }, Some(t)) => profile.eq_ignore_ascii_case(t),
                _ => false,
            };
            if ok {
                mask |= 1 << i;
            }
        }
        if mask == 0 {
            return Err(match ty {
                Some(t) => format!("no GPU of type \"{t}\" in the cluster"),
                None => "no whole GPUs in the cluster".to_string(),
            });
        }
        Ok(mask)
    }

    /// Picks slices on node `ni` for `need` (MIG instances and shards packed onto
    /// the GPUs that already have most slices in use) and allocates them with the
    /// CPUs and memory. Returns the slice indices.
    pub fn allocate(&mut self, ni: u32, need: &Need, whole_node: bool) -> (Res, Vec<u16>) {
        self.index_remove(ni);
        let n = &mut self.nodes[ni as usize];
        let mut gpu_used: BTreeMap<u32, u32> = BTreeMap::new();
        for (i, s) in n.slices.iter().enumerate() {
            if n.used[i] {
                *gpu_used.entry(s.gpu).or_default() += 1;
            }
        }
        let mut cands: Vec<u16> = (0..n.slices.len() as u16)
            .filter(|&i| {
                !n.used[i as usize]
                    && (whole_node || need.mask & (1 << n.slices[i as usize].class) != 0)
            })
            .collect();
        cands.sort_by_key(|&i| {
            let s = &n.slices[i as usize];
            (
                std::cmp::Reverse(gpu_used.get(&s.gpu).copied().unwrap_or(0)),
                s.gpu,
                i,
            )
        });
        if !whole_node {
            cands.truncate(need.count as usize);
        }
        let mut res = Res {
            cpus: if whole_node { n.free.cpus } else { need.cpus },
            mem: if whole_node { n.free.mem } else { need.mem },
            slices: [0; MAX_CLASSES],
        };
        for &i in &cands {
            n.used[i as usize] = true;
            res.slices[n.slices[i as usize].class as usize] += 1;
        }
        cands.sort_unstable();
        n.free.sub_saturating(&res);
        n.jobs += 1;
        self.index_insert(ni);
        (res, cands)
    }

    /// Returns resources of one job on node `ni`.
    pub fn release(&mut self, ni: u32, res: &Res, slices: &[u16]) {
        self.index_remove(ni);
        let n = &mut self.nodes[ni as usize];
        for &i in slices {
            if let Some(u) = n.used.get_mut(i as usize) {
                *u = false;
            }
        }
        n.free.add(res);
        n.jobs = n.jobs.saturating_sub(1);
        self.index_insert(ni);
    }

    pub fn set_admin(&mut self, ni: u32, admin: Admin) {
        self.index_remove(ni);
        self.nodes[ni as usize].admin = admin;
        self.index_insert(ni);
    }
}
