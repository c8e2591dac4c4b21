//! Admission: resolving a request against partitions, QOS and limits into a job
//! shape, rejecting what could never run, and recording the job.

use super::resources::Need;
use super::state::{ArrayRt, Entity, EntityKind, Hold, Job, OwnerRt, Shape, ShapeKey};
use super::Cluster;
use crate::error::SubmitError;
use crate::model::{
    GpuPer, JobId, JobRequest, JobState, MemoryRequest, Owner, PendingReason, SliceKind, Time,
    TimeLimit,
};
use crate::parse::format_duration;
use std::sync::Arc;

impl Cluster {
    /// Submits a job with the next free id of the cluster's own counter.
    pub fn submit(
        &mut self,
        req: JobRequest,
        owner: &Owner,
        now: Time,
    ) -> Result<JobId, SubmitError> {
        let mut id = self.next_id;
        while self.job_number_used(id) {
            id += 1;
        }
        self.submit_with_id(id, req, owner, now)
    }

    /// Submits a job under an id chosen by the caller (e.g. from its database).
    /// Returns the job id (for an array, the array's id; tasks are `id_task`).
    pub fn submit_with_id(
        &mut self,
        job: u64,
        req: JobRequest,
        owner: &Owner,
        now: Time,
    ) -> Result<JobId, SubmitError> {
        let id = JobId::new(job);
        if job == 0 {
            return Err(SubmitError::Invalid("job id 0 is reserved".into()));
        }
        if self.job_number_used(job) {
            return Err(SubmitError::DuplicateId(id));
        }
        let account = match &req.account {
            Some(a) if *a != owner.account && !owner.other_accounts.contains(a) => {
                return Err(SubmitError::AccountNotAllowed(a.clone()))
            }
            Some(a) => a.as_str(),
            None => owner.account.as_str(),
        };
        let qos = match &req.qos {
            Some(q) => self
                .cfg
                .qos
                .iter()
                .position(|x| x.name == *q)
                .ok_or_else(|| SubmitError::UnknownQos(q.clone()))?,
            None => self
                .cfg
                .qos
                .iter()
                .position(|x| x.name == "normal")
                .unwrap_or(0),
        } as u8;
        if let Some(n) = req.nice {
            if n < 0 {
                return Err(SubmitError::Invalid(
                    "only administrators may set a negative nice".into(),
                ));
            }
        }
        let shape_id = self.choose_partition(&req, owner)?;
        let shape = &self.shapes[shape_id as usize];
        let time = shape.key.time;
        let gpu_milli = shape.gpu_milli;
        let tasks = req.array.as_ref().map_or(1, |a| a.len());
        if tasks == 0 || tasks > u64::from(u32::MAX) {
            return Err(SubmitError::Invalid(
                "an array needs at least one task".into(),
            ));
        }
        let fmt_t = |t: Option<u64>| t.map_or("UNLIMITED".to_string(), format_duration);
        if let Some(dep) = &req.dependency {
            self.dependency_known(dep)
                .map_err(SubmitError::InvalidDependency)?;
        }
        let begin = match &req.begin {
            Some(b) => Some(b.resolve(now).map_err(SubmitError::Invalid)?),
            None => None,
        };
        if let Some(limit) = self.cfg.max_job_count {
            if self.jobs_known().saturating_add(tasks) > limit {
                return Err(SubmitError::TooManyJobs { limit });
            }
        }
        // Owner and limits that make the job impossible.
        let owner_id = self.intern_owner(owner, account);
        for &e in &self.owners[owner_id as usize].entities {
            let ent = &self.entities[e as usize];
            let scope = || format!("{} {}", ent.kind.name(), ent.name);
            let l = &ent.limits;
            if let Some(max) = l.max_wall_secs {
                if time.is_none_or(|t| t > max) {
                    return Err(SubmitError::TimeLimitTooLong {
                        requested: fmt_t(time),
                        limit: format_duration(max),
                        scope: scope(),
                    });
                }
            }
            if let Some(max) = l.max_gpus {
                if gpu_milli > u64::from(max) * 1000 {
                    return Err(SubmitError::LimitExceeded {
                        reason: "MaxGRES",
                        detail: format!(
                            "{} may use {max} GPUs at once; the job asks {}, and {} are in use",
                            scope(),
                            fmt_gpus(gpu_milli),
                            fmt_gpus(ent.usage.gpus_milli)
                        ),
                    });
                }
            }
            if let Some(max) = l.max_gpu_minutes {
                if gpu_milli > 0 && time.is_none_or(|t| gpu_milli * t > max * 60 * 1000) {
                    return Err(SubmitError::LimitExceeded {
                        reason: "GrpGRESMinutes",
                        detail: format!(
                            "{} may use {max} GPU-minutes per period; the job could use {}, \
                             and {} are used",
                            scope(),
                            time.map_or("more".to_string(), |t| (gpu_milli * t / 60_000)
                                .to_string()),
                            self.period_used(&ent.usage, now) / 60_000
                        ),
                    });
                }
            }
            let default_max = match ent.kind {
                EntityKind::User => self.cfg.default_max_submitted_jobs,
                _ => None,
            };
            if let Some(max) = l.max_submitted_jobs.or(default_max) {
                if u64::from(ent.usage.submitted) + tasks > u64::from(max) {
                    return Err(SubmitError::LimitExceeded {
                        reason: "AssocMaxSubmitJobLimit",
                        detail: format!(
                            "{} may have {max} jobs submitted; {} are",
                            scope(),
                            ent.usage.submitted
                        ),
                    });
                }
            }
        }
        self.count_submitted(owner_id, tasks as u32);
        let array = req.array.as_ref().map(|a| {
            Box::new(ArrayRt {
                pending: a.ranges.clone(),
                max_running: a.max_running,
                total: tasks as u32,
                active: 0,
                done_ok: 0,
                done_not_ok: 0,
                first_start: None,
            })
        });
        let hold = if req.hold { Hold::User } else { Hold::None };
        self.depends(id, &req);
        let record = Job {
            id,
            owner: owner_id,
            qos,
            shape: shape_id,
            req: self.shared_request(req),
            state: JobState::Pending,
            reason: PendingReason::None,
            submit_time: now,
            eligible_time: now,
            begin,
            start_time: None,
            end_time: None,
            priority: 0,
            hold,
            admin_nice: 0,
            array,
            alloc: Vec::new(),
            outcome: None,
            final_state: None,
            requeue_on_finish: false,
            restarts: 0,
            charged: 0,
            charge_period: 0,
            queued: false,
            line: None,
        };
        self.jobs.insert(id, record);
        self.next_id = self.next_id.max(job + 1);
        let mut sink = Vec::new();
        self.refresh(id, now, &mut sink);
        Ok(id)
    }

    /// Whether job number `job` (or a task of it) is taken.
    fn job_number_used(&self, job: u64) -> bool {
        if self.jobs.last_key_value().is_none_or(|(k, _)| k.job < job) {
            return false;
        }
        self.jobs
            .range(JobId::new(job)..)
            .next()
            .is_some_and(|(k, _)| k.job == job)
    }

    fn intern_owner(&mut self, owner: &Owner, account: &str) -> u32 {
        // Usual case: the owner is already its own key (default account, no other
        // accounts, groups sorted); look it up without cloning any string.
        if owner.other_accounts.is_empty()
            && owner.account == account
            && owner.groups.windows(2).all(|w| w[0] < w[1])
        {
            if let Some(&o) = self.owner_ids.get(owner) {
                return o;
            }
        }
        let mut key = owner.clone();
        key.account = account.to_string();
        key.other_accounts.clear();
        key.groups.sort();
        key.groups.dedup();
        if let Some(&o) = self.owner_ids.get(&key) {
            return o;
        }
        let mut entities = vec![self.intern_entity(EntityKind::User, &key.user)];
        // Every group counts its members' use, so that a group limit set later
        // applies at once.
        for g in &key.groups {
            entities.push(self.intern_entity(EntityKind::Group, g));
        }
        entities.push(self.intern_entity(EntityKind::Account, account));
        let id = self.owners.len() as u32;
        self.owners.push(OwnerRt {
            owner: key.clone(),
            entities,
        });
        self.owner_ids.insert(key, id);
        id
    }

    pub(crate) fn intern_entity(&mut self, kind: EntityKind, name: &str) -> u32 {
        if let Some(&e) = self.entity_ids.get(&(kind, name.to_string())) {
            return e;
        }
        let id = self.entities.len() as u32;
        let limits = self.limits_for(kind, name);
        self.fs_totals.set(None);
        self.entities.push(Entity {
            kind,
            name: name.to_string(),
            limits,
            usage: Default::default(),
        });
        self.entity_ids.insert((kind, name.to_string()), id);
        id
    }

    /// Turns a request into an interned shape; rejects what no node could hold.
    /// The partition a job runs in, and its shape there: the one it names, or the
    /// first of a comma-separated list (`-p gpu,debug`) that it may use and that can
    /// hold it within its time limit; the default partition when it names none. When
    /// none of a list will do, the first one's refusal.
    fn choose_partition(&mut self, req: &JobRequest, owner: &Owner) -> Result<u32, SubmitError> {
        let names: Vec<String> = match &req.partition {
            Some(p) => p.split(',').map(str::to_string).collect(),
            None => {
                let default = self
                    .cfg
                    .partitions
                    .iter()
                    .find(|x| x.default)
                    .ok_or(SubmitError::NoDefaultPartition)?;
                vec![default.name.clone()]
            }
        };
        let mut first_error = None;
        for name in &names {
            match self.admit_on(req, owner, name) {
                Ok(shape) => return Ok(shape),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.unwrap_or(SubmitError::NoDefaultPartition))
    }

    /// The shape of `req` in partition `name`, if the owner may use it and it can
    /// hold the job within its time limit.
    fn admit_on(
        &mut self,
        req: &JobRequest,
        owner: &Owner,
        name: &str,
    ) -> Result<u32, SubmitError> {
        let pi = self
            .cfg
            .partitions
            .iter()
            .position(|x| x.name == name)
            .ok_or_else(|| SubmitError::UnknownPartition(name.to_string()))?;
        let part = &self.cfg.partitions[pi];
        if !part.allowed_groups.is_empty()
            && !part.allowed_groups.iter().any(|g| owner.groups.contains(g))
        {
            return Err(SubmitError::PartitionNotAllowed(part.name.clone()));
        }
        let shape_id = self.resolve_shape(req, pi)?;
        let part = &self.cfg.partitions[pi];
        let time = self.shapes[shape_id as usize].key.time;
        if self.cfg.enforce_partition_limits {
            if let Some(max) = part.max_time_secs {
                if time.is_none_or(|t| t > max) {
                    return Err(SubmitError::TimeLimitTooLong {
                        requested: time.map_or("UNLIMITED".to_string(), format_duration),
                        limit: format_duration(max),
                        scope: format!("partition {}", part.name),
                    });
                }
            }
        }
        Ok(shape_id)
    }

    fn resolve_shape(&mut self, req: &JobRequest, pi: usize) -> Result<u32, SubmitError> {
        let invalid = |m: String| SubmitError::Invalid(m);
        let part = &self.cfg.partitions[pi];
        // Slices.
        let (mask, gpu_count, gpu_per) = match &req.gpus {
            None => (0u16, 0u32, GpuPer::Node),
            Some(g) => {
                let mask = match &g.kind {
                    SliceKind::Shard => {
                        if self.inv.shard_mask == 0 {
                            return Err(invalid("no shared (shard) GPUs in the cluster".into()));
                        }
                        self.inv.shard_mask
                    }
                    SliceKind::Gpu { r#type } => {
                        self.inv.gpu_mask(r#type.as_deref()).map_err(invalid)?
                    }
                };
                (mask, g.count, g.per)
            }
        };
        let mut required = Vec::new();
        for name in &req.nodelist {
            let ni = *self
                .inv
                .by_name
                .get(name)
                .ok_or_else(|| invalid(format!("no such node {name}")))?;
            if !self.inv.nodes[ni as usize]
                .partitions
                .contains(&(pi as u16))
            {
                return Err(SubmitError::Unsatisfiable(format!(
                    "node {name} is not in partition {}",
                    part.name
                )));
            }
            required.push(ni);
        }
        required.sort_unstable();
        required.dedup();
        let mut excluded = Vec::new();
        for name in &req.exclude {
            let ni = *self
                .inv
                .by_name
                .get(name)
                .ok_or_else(|| invalid(format!("no such node {name}")))?;
            excluded.push(ni);
        }
        excluded.sort_unstable();
        excluded.dedup();
        if required.iter().any(|r| excluded.binary_search(r).is_ok()) {
            return Err(invalid(
                "a node is both required (-w) and excluded (-x)".into(),
            ));
        }
        // Nodes and tasks.
        let mut nodes = req.nodes.map(|r| r.min);
        if nodes.is_none() {
            if let (Some(n), Some(tpn)) = (req.ntasks, req.ntasks_per_node) {
                nodes = Some(n.div_ceil(tpn));
            }
        }
        let per_node_gpus = match (gpu_per, nodes) {
            (GpuPer::Node, _) => gpu_count,
            (GpuPer::Job, Some(n)) => {
                if gpu_count % n != 0 {
                    return Err(invalid(format!(
                        "{gpu_count} GPUs cannot be spread evenly over {n} nodes"
                    )));
                }
                gpu_count / n
            }
            (GpuPer::Job, None) => {
                let most = part
                    .nodes
                    .iter()
                    .filter_map(|n| self.inv.by_name.get(n))
                    .map(|&ni| self.inv.nodes[ni as usize].total.in_mask(mask))
                    .max()
                    .unwrap_or(0)
                    .max(1);
                let n = (gpu_count.div_ceil(most)..=gpu_count)
                    .find(|n| gpu_count % n == 0)
                    .unwrap_or(gpu_count);
                nodes = Some(n);
                gpu_count / n
            }
        };
        let nodes = nodes.unwrap_or(1).max(required.len() as u32);
        if nodes > 100_000 {
            return Err(invalid("too many nodes".into()));
        }
        let tasks_per_node = match (req.ntasks_per_node, req.ntasks) {
            (Some(t), _) => t,
            (None, Some(n)) => n.div_ceil(nodes),
            (None, None) => 1,
        };
        if let (Some(n), Some(t)) = (req.ntasks, req.ntasks_per_node) {
            if u64::from(t) * u64::from(nodes) < u64::from(n) {
                return Err(invalid(format!(
                    "{n} tasks do not fit in {nodes} nodes × {t} tasks per node"
                )));
            }
        }
        let max_weight = (0..16)
            .filter(|c| mask & (1 << c) != 0)
            .map(|c| self.inv.classes[c].weight_milli)
            .max()
            .unwrap_or(0);
        let gpu_units = u64::from(per_node_gpus) * u64::from(max_weight); // milli-GPUs per node
        let task_cpus = u64::from(tasks_per_node) * u64::from(req.cpus_per_task.unwrap_or(1));
        let gpu_cpus = match req.cpus_per_gpu {
            Some(c) => u64::from(per_node_gpus) * u64::from(c),
            None => (gpu_units * u64::from(part.default_cpus_per_gpu)).div_ceil(1000),
        };
        let cpus = task_cpus.max(gpu_cpus).max(1);
        let mem = match req.memory {
            // `--mem=0`: all of a node's memory (of the partition's smallest node,
            // so that the same need fits every node; a partition's nodes are alike).
            Some(MemoryRequest::PerNode(0)) => part
                .nodes
                .iter()
                .filter_map(|n| self.inv.by_name.get(n))
                .map(|&ni| self.inv.nodes[ni as usize].total.mem)
                .min()
                .unwrap_or(0),
            Some(MemoryRequest::PerNode(m)) => m,
            Some(MemoryRequest::PerCpu(m)) => m * cpus,
            Some(MemoryRequest::PerGpu(m)) => {
                if per_node_gpus == 0 {
                    return Err(invalid("--mem-per-gpu needs a GPU request".into()));
                }
                m * u64::from(per_node_gpus)
            }
            None if per_node_gpus > 0 => (gpu_units * part.default_mem_per_gpu_mb).div_ceil(1000),
            None => cpus * part.default_mem_per_cpu_mb,
        };
        if cpus > u64::from(u32::MAX) {
            return Err(invalid("too many CPUs".into()));
        }
        let time = match req.time_limit {
            Some(TimeLimit::Seconds(s)) => Some(s),
            Some(TimeLimit::Unlimited) => None,
            None => part.default_time_secs.or(part.max_time_secs),
        };
        let key = ShapeKey {
            partition: pi as u16,
            nodes,
            need: Need {
                cpus: cpus as u32,
                mem,
                mask,
                count: per_node_gpus,
            },
            exclusive: req.exclusive,
            time,
            required,
            excluded,
            constraint: req.constraint.clone(),
            licenses: self.licenses_asked(req)?,
        };
        if let Some(&s) = self.shape_ids.get(&key) {
            return Ok(s);
        }
        // A new shape: which nodes may hold it, and can enough of them ever.
        let mut eligible: Vec<u32> = part
            .nodes
            .iter()
            .filter_map(|n| self.inv.by_name.get(n).copied())
            .filter(|&ni| {
                let n = &self.inv.nodes[ni as usize];
                key.excluded.binary_search(&ni).is_err()
                    && key
                        .constraint
                        .as_ref()
                        .is_none_or(|c| c.matches(&n.cfg.features))
            })
            .collect();
        eligible.sort_unstable();
        eligible.dedup();
        let big_enough = |ni: &u32| self.inv.nodes[*ni as usize].total.fits(&key.need);
        for r in &key.required {
            if eligible.binary_search(r).is_err() || !big_enough(r) {
                return Err(SubmitError::Unsatisfiable(format!(
                    "node {} cannot hold {} CPUs, {} MB and {} slices, or lacks the features asked",
                    self.inv.nodes[*r as usize].cfg.name,
                    key.need.cpus,
                    key.need.mem,
                    key.need.count
                )));
            }
        }
        let capable = eligible.iter().filter(|n| big_enough(n)).count();
        if (capable as u64) < u64::from(nodes) {
            return Err(SubmitError::Unsatisfiable(format!(
                "partition {} has {capable} node(s) able to hold {} CPUs, {} MB memory and {} GPU slice(s) each; the job needs {nodes}",
                part.name, key.need.cpus, key.need.mem, key.need.count
            )));
        }
        let mut type_mask = 0u16;
        for c in 0..self.inv.classes.len() {
            if mask & (1 << c) != 0 {
                type_mask |= 1 << self.class_type[c];
            }
        }
        let shape = Shape {
            gpu_milli: gpu_units * u64::from(nodes),
            key: key.clone(),
            eligible,
            type_mask,
        };
        let id = self.shapes.len() as u32;
        self.shapes.push(shape);
        self.shape_ids.insert(key, id);
        Ok(id)
    }
}

/// Milli-GPUs as GPUs: `2`, `0.143`.
fn fmt_gpus(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{:.3}", milli as f64 / 1000.0)
    }
}

/// How many distinct recent requests a submission is compared with.
const RECENT_REQUESTS: usize = 8;

impl Cluster {
    /// `req` as a job keeps it: shared with a recent job that asked exactly the same
    /// (compared field by field), else new and remembered as recent.
    fn shared_request(&mut self, req: JobRequest) -> Arc<JobRequest> {
        if let Some(same) = self.recent_requests.iter().find(|r| ***r == req) {
            return same.clone();
        }
        let req = Arc::new(req);
        if self.recent_requests.len() >= RECENT_REQUESTS {
            self.recent_requests.remove(0);
        }
        self.recent_requests.push(req.clone());
        req
    }

    /// Records that job `id` (a job, an array, or a task started from one) waits on
    /// what `req`'s dependency names, so that a change to those re-examines it. Every
    /// record with a dependency is listed, whatever its state (a requeued one waits
    /// again), alike when it is created and when a snapshot is restored.
    pub(crate) fn depends(&mut self, id: JobId, req: &JobRequest) {
        if let Some(dep) = &req.dependency {
            for item in &dep.items {
                for t in &item.targets {
                    self.dependents.entry(t.job.job).or_default().push(id);
                }
            }
        }
    }

    /// Jobs pending and running, array tasks one each: what `MaxJobCount` counts.
    fn jobs_known(&self) -> u64 {
        self.entities
            .iter()
            .filter(|e| e.kind == EntityKind::User)
            .map(|e| u64::from(e.usage.submitted))
            .sum()
    }
}

impl EntityKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            EntityKind::User => "user",
            EntityKind::Group => "group",
            EntityKind::Account => "account",
        }
    }
}
