//! The cluster as the pages and the API show it: its nodes and partitions as the
//! scheduler has them now, the jobs on them, the queue's counts, and the GPUs the
//! portal declared or found.
//!
//! Owns: the one door from the HTTP layer to the scheduler's view of the cluster and
//! to the GPU inventory (so that no handler holds the scheduler or the inventory),
//! and which backend it is (the GPU map differs under Slurm).
//! Must not touch: HTTP types, SQL, node control (`nodes`: with its reason and audit).

use std::sync::Arc;

use scheduler::{
    ClusterConfig, JobState, JobView, NodeView, PartitionView, QueueCounts, SqueueFilter,
};

use super::gpu_map::{gpu_map, shares, slurm_gpu_map, type_counts, GpuMap};
use super::ServiceError;
use crate::auth::Principal;
use crate::sched::inventory::Inventory;
pub use crate::sched::inventory::{GpuSource, GpuStatus, HostNow};
use crate::sched::Scheduler;

/// The cluster's state for the pages and the API. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Cluster {
    scheduler: Scheduler,
    inventory: Arc<Inventory>,
    slurm: bool,
    /// Declared GPUs are checked against `nvidia-smi` (`cluster.discover_gpus`).
    discovered: bool,
}

impl Cluster {
    pub fn new(
        scheduler: Scheduler,
        inventory: Arc<Inventory>,
        slurm: bool,
        discovered: bool,
    ) -> Cluster {
        Cluster {
            scheduler,
            inventory,
            slurm,
            discovered,
        }
    }

    /// The GPU map now, as `viewer` may see it: whose jobs hold slices they may
    /// open (their own; any for an administrator).
    pub async fn gpu_map(&self, viewer: &Principal) -> Result<GpuMap, ServiceError> {
        let (nodes, _) = self.nodes().await?;
        let jobs = self
            .jobs(SqueueFilter {
                states: vec![JobState::Running, JobState::Completing],
                ..SqueueFilter::default()
            })
            .await?;
        Ok(self.gpu_map_of(&nodes, &jobs, &|owner| viewer.may_see(owner)))
    }

    /// The GPU map of `nodes` and the running `jobs` for a viewer who may open the
    /// jobs `may_open` says: atrium's own scheduler knows every slice and its holder;
    /// under Slurm the map shows Slurm's nodes.
    pub fn gpu_map_of(
        &self,
        nodes: &[NodeView],
        jobs: &[JobView],
        may_open: &dyn Fn(&str) -> bool,
    ) -> GpuMap {
        let brings = shares(self.shape());
        let nodes = if self.slurm {
            slurm_gpu_map(nodes)
        } else {
            gpu_map(
                self.shape(),
                self.gpus(),
                self.discovered,
                nodes,
                jobs,
                may_open,
            )
        };
        GpuMap {
            types: type_counts(&nodes),
            nodes,
            brings,
        }
    }

    /// The nodes and partitions now.
    pub async fn nodes(&self) -> Result<(Vec<NodeView>, Vec<PartitionView>), ServiceError> {
        Ok(self.scheduler.nodes().await?)
    }

    /// The jobs `filter` names, as the scheduler has them now (everyone's: the caller
    /// decides what of each it shows).
    pub async fn jobs(&self, filter: SqueueFilter) -> Result<Vec<JobView>, ServiceError> {
        Ok(self.scheduler.squeue(filter).await?)
    }

    /// One page of [`Cluster::jobs`] (`limit` lines from `offset`) and how many there
    /// are in all.
    pub async fn jobs_page(
        &self,
        filter: SqueueFilter,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<JobView>, u64), ServiceError> {
        Ok(self.scheduler.squeue_page(filter, offset, limit).await?)
    }

    /// How many jobs wait and run, by partition, state and reason.
    pub async fn queue_counts(&self) -> Result<QueueCounts, ServiceError> {
        Ok(self.scheduler.queue_counts().await?)
    }

    /// The GPUs declared or found, each with whether the machine has it.
    pub fn gpus(&self) -> &[GpuStatus] {
        &self.inventory.gpus
    }

    /// The cluster's shape as configured: nodes, partitions, what a GPU brings.
    pub fn shape(&self) -> &ClusterConfig {
        &self.inventory.cluster
    }

    /// Slurm holds the queue (`scheduler.backend = "slurm"`): its nodes are Slurm's.
    pub fn is_slurm(&self) -> bool {
        self.slurm
    }

    /// What the portal's own machine says of itself now (`/proc`): its kernel, boot
    /// time, load and free memory.
    pub fn this_machine(&self) -> HostNow {
        HostNow::read()
    }
}
