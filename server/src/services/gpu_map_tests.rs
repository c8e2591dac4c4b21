use super::*;
use crate::services::cluster::GpuSource;
use scheduler::model::{GpuConfig, MigInstanceConfig, NodeConfig, PartitionConfig};
use scheduler::{
    Allocation, JobId, JobState, NodeAllocation, PendingReason, SliceUsage, TimeLimit,
};

fn gpu(index: u32, mode: GpuMode) -> GpuConfig {
    GpuConfig {
        index,
        uuid: format!("GPU-{index}"),
        model: "A100-80GB".into(),
        memory_mb: 81920,
        mode,
    }
}

pub fn cluster() -> ClusterConfig {
    ClusterConfig {
        nodes: vec![
            NodeConfig {
                name: "node1".into(),
                cpus: 32,
                memory_mb: 256_000,
                features: vec![],
                gpus: vec![
                    gpu(0, GpuMode::Whole),
                    gpu(
                        1,
                        GpuMode::Mig(vec![
                            MigInstanceConfig {
                                profile: "3g.40gb".into(),
                                uuid: "MIG-a".into(),
                            },
                            MigInstanceConfig {
                                profile: "3g.40gb".into(),
                                uuid: "MIG-b".into(),
                            },
                        ]),
                    ),
                    gpu(2, GpuMode::Shards(2)),
                ],
            },
            NodeConfig {
                name: "cpu1".into(),
                cpus: 8,
                memory_mb: 16_000,
                features: vec![],
                gpus: vec![],
            },
        ],
        partitions: vec![PartitionConfig::new("gpu", vec!["node1".into()])],
        ..ClusterConfig::default()
    }
}

pub fn status(index: u32, present: bool) -> GpuStatus {
    GpuStatus {
        node: "node1".into(),
        index,
        uuid: format!("GPU-{index}"),
        model: "A100-80GB".into(),
        memory_mb: 81920,
        source: GpuSource::Declared,
        present,
        mig: vec![],
    }
}

pub fn job(id: u64, user: &str, name: &str, slices: Vec<SliceId>) -> JobView {
    JobView {
        id: JobId::new(id),
        display_id: id.to_string(),
        name: name.into(),
        user: user.into(),
        account: user.into(),
        partition: "gpu".into(),
        state: if slices.is_empty() {
            JobState::Pending
        } else {
            JobState::Running
        },
        reason: slices.is_empty().then_some(PendingReason::Resources),
        priority: 1,
        admin_nice: 0,
        submit_time: 0,
        start_time: None,
        expected_start: None,
        eligible_time: None,
        end_time: None,
        time_limit: TimeLimit::Unlimited,
        time_used: 0,
        nodes: 1,
        nodelist: String::new(),
        gres: "gpu:1".into(),
        gpu_milli: 1000,
        allocation: (!slices.is_empty()).then(|| Allocation {
            nodes: vec![NodeAllocation {
                node: "node1".into(),
                cpus: 1,
                memory_mb: 1000,
                slices,
            }],
        }),
        exit: None,
        restarts: 0,
        request: None,
    }
}

pub fn jobs() -> Vec<JobView> {
    vec![
        job(5, "alice", "train", vec![SliceId::Gpu { index: 0 }]),
        job(
            6,
            "bob",
            "mig",
            vec![SliceId::Mig {
                gpu: 1,
                profile: "3g.40gb".into(),
                uuid: "MIG-b".into(),
            }],
        ),
        job(7, "bob", "<script>x</script>", vec![]),
    ]
}

fn states(node: &GpuNode) -> Vec<Vec<SliceState>> {
    node.gpus
        .iter()
        .map(|g| g.slices.iter().map(|s| s.state).collect())
        .collect()
}

#[test]
fn map_has_a_cell_per_slice_with_holders_and_absent_gpus() {
    let map = gpu_map(
        &cluster(),
        &[status(0, true), status(1, true), status(2, false)],
        true,
        &[],
        &jobs(),
        &|u| u == "alice",
    );
    assert_eq!(map.len(), 1, "nodes without GPUs are left out");
    let gpus = &map[0].gpus;
    assert_eq!(
        gpus.iter().map(|g| g.slices.len()).collect::<Vec<_>>(),
        [1, 2, 2]
    );
    let whole = gpus[0].slices[0].holder.as_ref().expect("held");
    assert_eq!(
        (whole.id.as_str(), whole.user.as_str(), whole.link),
        ("5", "alice", true)
    );
    assert_eq!(
        gpus[0].slices[0].describe,
        "GPU 0: in use by job 5 (train) of alice"
    );
    assert!(gpus[1].slices[0].holder.is_none());
    let mig = gpus[1].slices[1].holder.as_ref().expect("held");
    assert_eq!(
        (mig.id.as_str(), mig.user.as_str(), mig.link),
        ("6", "bob", false)
    );
    assert_eq!(gpus[2].slices[1].label, "shard 1");
    assert_eq!(gpus[2].slices[1].key, "node1/2/1");
    assert!(!gpus[0].absent && gpus[2].absent);
    use SliceState::*;
    assert_eq!(
        states(&map[0]),
        [vec![Used], vec![Free, Used], vec![Absent, Absent]]
    );
    assert_eq!(gpus[0].title, "GPU 0 · A100-80GB · 80 GiB");
}

#[test]
fn with_discovery_off_a_declared_gpu_is_not_absent() {
    // Discovery off: the inventory marks every declared GPU not present, and that
    // says nothing about the machine.
    let map = gpu_map(
        &cluster(),
        &[status(0, false), status(1, false), status(2, false)],
        false,
        &[],
        &[],
        &|_| true,
    );
    assert!(map[0].gpus.iter().all(|g| !g.absent));
    assert!(map[0]
        .gpus
        .iter()
        .flat_map(|g| &g.slices)
        .all(|s| s.state == SliceState::Free && !s.describe.contains("absent")));
}

#[test]
fn a_drained_node_shows_its_free_slices_drained_and_keeps_its_holders() {
    let node = NodeView {
        name: "node1".into(),
        state: NodeState::Drain {
            reason: "fan".into(),
        },
        partitions: vec!["gpu".into()],
        cpus_total: 32,
        cpus_free: 31,
        memory_mb_total: 1000,
        memory_mb_free: 1000,
        features: Vec::new(),
        slices: Vec::new(),
    };
    let map = gpu_map(&cluster(), &[], true, &[node], &jobs(), &|_| true);
    use SliceState::*;
    assert_eq!(
        states(&map[0]),
        [vec![Used], vec![Drained, Used], vec![Drained, Drained]]
    );
    assert_eq!(
        map[0].gpus[1].slices[0].describe,
        "3g.40gb: free, but node1 is DRAIN (fan)"
    );
    let counts = type_counts(&map);
    assert_eq!(
        counts
            .iter()
            .map(|c| (c.name.as_str(), c.free, c.total))
            .collect::<Vec<_>>(),
        [("3g.40gb", 0, 2), ("A100-80GB", 0, 1), ("shard", 0, 2)],
        "drained slices are not free"
    );
}

#[test]
fn free_slices_are_counted_per_type_and_a_gpu_brings_its_share() {
    let map = gpu_map(&cluster(), &[], true, &[], &jobs(), &|_| true);
    let counts: Vec<String> = type_counts(&map).iter().map(TypeCount::text).collect();
    assert_eq!(
        counts,
        [
            "1 of 2 3g.40gb free",
            "0 of 1 A100-80GB free",
            "2 of 2 shard free"
        ]
    );
    let shares = shares(&cluster());
    assert_eq!(
        shares[0].text(),
        "gpu: 8 CPU cores and 48 GiB of memory per GPU"
    );
    assert_eq!(memory_text(1536), "1.5 GiB");
    assert_eq!(memory_text(512), "512 MiB");
}

fn slurm_node(name: &str, state: NodeState, slices: &[(&str, u32, u32)]) -> NodeView {
    NodeView {
        name: name.into(),
        state,
        partitions: vec!["gpu".into()],
        cpus_total: 4,
        cpus_free: 4,
        memory_mb_total: 1000,
        memory_mb_free: 1000,
        features: Vec::new(),
        slices: slices
            .iter()
            .map(|(t, total, used)| SliceUsage {
                r#type: (*t).into(),
                total: *total,
                used: *used,
            })
            .collect(),
    }
}

pub fn slurm_nodes() -> Vec<NodeView> {
    vec![
        slurm_node("node1", NodeState::Mixed, &[("a100", 2, 1)]),
        slurm_node(
            "node2",
            NodeState::Drain {
                reason: "fan <broken>".into(),
            },
            &[("a100", 2, 0), ("1g.10gb", 2, 2)],
        ),
        slurm_node("node3", NodeState::Idle, &[]),
    ]
}

#[test]
fn slurm_map_has_a_cell_per_gpu_of_each_type_and_says_which_nodes_take_no_jobs() {
    let map = slurm_gpu_map(&slurm_nodes());
    assert_eq!(
        map.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        ["node1", "node2"],
        "a node without GPUs is left out"
    );
    use SliceState::*;
    assert_eq!(states(&map[0]), [vec![Used, Free]]);
    assert_eq!(states(&map[1]), [vec![Drained, Drained], vec![Used, Used]]);
    assert_eq!(map[1].gpus[1].title, "1g.10gb ×2");
    assert_eq!(
        (map[0].unavailable.as_str(), map[1].unavailable.as_str()),
        ("", "DRAIN")
    );
    let counts = type_counts(&map);
    assert_eq!(
        counts
            .iter()
            .map(|c| (c.name.as_str(), c.free))
            .collect::<Vec<_>>(),
        [("1g.10gb", 0), ("a100", 1)]
    );
}
