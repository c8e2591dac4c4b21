//! Snapshot and restore of the whole scheduler state (serde). A restored cluster
//! makes the same decisions as the original given the same inputs: derived indexes
//! (free resources, queues, dependency maps) are rebuilt from the recorded state.
//!
//! Version 2 keeps each distinct job request once (`requests`, a job names its own by
//! index in `job_requests`): a queue of 100,000 jobs is mostly a few request shapes, so
//! the snapshot is a fraction of the size, and a restored cluster shares one request
//! among the jobs that asked the same. Version 1 (each job with its request) is still
//! read.

use crate::cluster::inventory::Admin;
use crate::cluster::state::{Entity, Job, OwnerRt, Shape};
use crate::cluster::{Cluster, HeadKey};
use crate::config::ClusterConfig;
use crate::error::ConfigError;
use crate::model::{JobId, JobRequest, JobState, Time};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

/// How many of the last distinct requests a job's request is compared with.
const RECENT_REQUESTS: usize = 8;

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
    /// Version 2: the distinct requests, and each job's (index into `requests`, in the
    /// order of `jobs`). Version 1 has neither: its jobs carry their own.
    #[serde(default)]
    requests: Vec<Arc<JobRequest>>,
    #[serde(default)]
    job_requests: Vec<u32>,
}

impl Cluster {
    /// The whole state, for persisting.
    pub fn snapshot(&self) -> Snapshot {
        let jobs: Vec<Job> = self.jobs.values().cloned().collect();
        // Requests shared by pointer (jobs submitted or restored together), else
        // compared with the last few distinct ones.
        let mut by_ptr: HashMap<*const JobRequest, u32> = HashMap::new();
        let mut requests: Vec<Arc<JobRequest>> = Vec::new();
        let mut job_requests = Vec::with_capacity(jobs.len());
        for job in &jobs {
            let ptr = Arc::as_ptr(&job.req);
            let index = match by_ptr.get(&ptr) {
                Some(&i) => i,
                None => {
                    let recent = requests.len().saturating_sub(RECENT_REQUESTS);
                    let i = match requests[recent..].iter().position(|r| *r == job.req) {
                        Some(at) => (recent + at) as u32,
                        None => {
                            requests.push(job.req.clone());
                            (requests.len() - 1) as u32
                        }
                    };
                    by_ptr.insert(ptr, i);
                    i
                }
            };
            job_requests.push(index);
        }
        Snapshot {
            version: 2,
            config: self.cfg.clone(),
            node_admin: self.inv.nodes.iter().map(|n| n.admin.clone()).collect(),
            jobs,
            requests,
            job_requests,
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
    pub fn restore(mut s: Snapshot) -> Result<Cluster, ConfigError> {
        match s.version {
            1 => {}
            2 => {
                if s.job_requests.len() != s.jobs.len() {
                    return Err(ConfigError(
                        "snapshot requests do not match its jobs".into(),
                    ));
                }
                for (job, &index) in s.jobs.iter_mut().zip(&s.job_requests) {
                    job.req = s.requests.get(index as usize).cloned().ok_or_else(|| {
                        ConfigError("snapshot job names an unknown request".into())
                    })?;
                }
            }
            v => return Err(ConfigError(format!("unknown snapshot version {v}"))),
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
            let req = job.req.clone();
            cl.depends(id, &req);
            cl.jobs.insert(id, job);
            if queued {
                cl.enqueue(id);
            }
        }
        Ok(cl)
    }
}
