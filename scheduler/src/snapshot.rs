//! Snapshot and restore of the whole scheduler state (serde). A restored cluster
//! makes the same decisions as the original given the same inputs: derived indexes
//! (free resources, queues, dependency maps) are rebuilt from the recorded state.

use crate::cluster::inventory::Admin;
use crate::cluster::state::{Entity, Job, OwnerRt, Shape};
use crate::cluster::{Cluster, HeadKey};
use crate::config::ClusterConfig;
use crate::error::ConfigError;
use crate::model::{JobId, JobState, Time};
use serde::{Deserialize, Serialize};

/// Everything needed to rebuild a cluster. Serialize it with any serde format.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    version: u32,
    config: ClusterConfig,
    node_admin: Vec<Admin>,
    jobs: Vec<Job>,
    next_id: u64,
    owners: Vec<OwnerRt>,
    entities: Vec<Entity>,
    shapes: Vec<Shape>,
    wakeups: Vec<(Time, JobId)>,
    dirty: Vec<JobId>,
    last_priority_calc: Time,
    last_time: Time,
    /// Where the last capped pass's rotating window stopped (absent in older
    /// snapshots: the window starts below the top one).
    #[serde(default)]
    resume_after: Option<HeadKey>,
}

impl Cluster {
    /// The whole state, for persisting.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            version: 1,
            config: self.cfg.clone(),
            node_admin: self.inv.nodes.iter().map(|n| n.admin.clone()).collect(),
            jobs: self.jobs.values().cloned().collect(),
            next_id: self.next_id,
            owners: self.owners.clone(),
            entities: self.entities.clone(),
            shapes: self.shapes.clone(),
            wakeups: self.wakeups.iter().copied().collect(),
            dirty: self.dirty.iter().copied().collect(),
            last_priority_calc: self.last_priority_calc,
            last_time: self.last_time,
            resume_after: self.resume_after,
        }
    }

    /// Rebuilds a cluster from a snapshot.
    pub fn restore(s: Snapshot) -> Result<Cluster, ConfigError> {
        if s.version != 1 {
            return Err(ConfigError(format!(
                "unknown snapshot version {}",
                s.version
            )));
        }
        let mut cl = Cluster::new(s.config)?;
        if s.node_admin.len() != cl.inv.nodes.len() {
            return Err(ConfigError("snapshot does not match its node list".into()));
        }
        for (i, a) in s.node_admin.into_iter().enumerate() {
            cl.inv.set_admin(i as u32, a);
        }
        cl.next_id = s.next_id;
        cl.owners = s.owners;
        cl.owner_ids = cl
            .owners
            .iter()
            .enumerate()
            .map(|(i, o)| (o.owner.clone(), i as u32))
            .collect();
        cl.entities = s.entities;
        cl.fs_totals.set(None);
        cl.entity_ids = cl
            .entities
            .iter()
            .enumerate()
            .map(|(i, e)| ((e.kind, e.name.clone()), i as u32))
            .collect();
        cl.shapes = s.shapes;
        cl.shape_ids = cl
            .shapes
            .iter()
            .enumerate()
            .map(|(i, sh)| (sh.key.clone(), i as u32))
            .collect();
        cl.wakeups = s.wakeups.into_iter().collect();
        cl.dirty = s.dirty.into_iter().collect();
        cl.last_priority_calc = s.last_priority_calc;
        cl.last_time = s.last_time;
        cl.resume_after = s.resume_after;
        for job in s.jobs {
            let id = job.id;
            let queued = job.queued;
            for a in &job.alloc {
                let node = cl.inv.nodes.get(a.node as usize).ok_or_else(|| {
                    ConfigError("snapshot allocation names an unknown node".into())
                })?;
                if a.slices.iter().any(|&x| x as usize >= node.slices.len()) {
                    return Err(ConfigError(
                        "snapshot allocation names an unknown slice".into(),
                    ));
                }
                cl.inv.index_remove(a.node);
                let n = &mut cl.inv.nodes[a.node as usize];
                for &x in &a.slices {
                    n.used[x as usize] = true;
                }
                n.free.sub_saturating(&a.res);
                n.jobs += 1;
                cl.inv.index_insert(a.node);
            }
            if !job.alloc.is_empty() {
                cl.take_licenses(job.shape);
            }
            if matches!(job.state, JobState::Running | JobState::Completing)
                && !job.is_array_parent()
            {
                cl.running_by_end
                    .insert((job.end_time.unwrap_or(Time::MAX), id));
            }
            if job.state == JobState::Pending {
                if let Some(dep) = &job.req.dependency {
                    for item in &dep.items {
                        for t in &item.targets {
                            cl.dependents.entry(t.job.job).or_default().push(id);
                        }
                    }
                }
            }
            cl.jobs.insert(id, job);
            if queued {
                cl.enqueue(id);
            }
        }
        Ok(cl)
    }
}
