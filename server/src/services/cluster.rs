//! The cluster as the pages and the API show it: its nodes and partitions as the
//! scheduler has them now, the jobs on them, the queue's counts, and the GPUs the
//! portal declared or found.
//!
//! Owns: the one door from the HTTP layer to the scheduler's view of the cluster and
//! to the GPU inventory (so that no handler holds the scheduler or the inventory),
//! and which backend it is (the GPU map differs under Slurm).
//! Must not touch: HTTP types, SQL, node control (`nodes`: with its reason and audit).

use std::sync::Arc;

use scheduler::{ClusterConfig, JobView, NodeView, PartitionView, QueueCounts, SqueueFilter};

use super::ServiceError;
use crate::sched::inventory::Inventory;
pub use crate::sched::inventory::{GpuSource, GpuStatus, HostNow};
use crate::sched::Scheduler;

/// The cluster's state for the pages and the API. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Cluster {
    scheduler: Scheduler,
    inventory: Arc<Inventory>,
    slurm: bool,
}

impl Cluster {
    pub fn new(scheduler: Scheduler, inventory: Arc<Inventory>, slurm: bool) -> Cluster {
        Cluster {
            scheduler,
            inventory,
            slurm,
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
