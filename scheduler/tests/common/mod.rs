//! Test clusters shared by the integration and property tests.
#![allow(clippy::unwrap_used)]
#![allow(dead_code)]

use scheduler::*;

pub fn gpu(index: u32, model: &str) -> GpuConfig {
    GpuConfig {
        index,
        uuid: format!("GPU-{model}-{index}"),
        model: model.into(),
        memory_mb: 81_920,
        mode: GpuMode::Whole,
    }
}

pub fn node(name: &str, gpus: u32) -> NodeConfig {
    NodeConfig {
        name: name.into(),
        cpus: 64,
        memory_mb: 512 * 1024,
        features: vec!["ib".into()],
        gpus: (0..gpus).map(|i| gpu(i, "H100-80GB")).collect(),
    }
}

/// A node whose GPU 0 is split into MIG instances and GPU 1 into 4 shards.
pub fn mig_node(name: &str) -> NodeConfig {
    let mut n = node(name, 3);
    n.gpus[0].mode = GpuMode::Mig(
        ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
            .iter()
            .enumerate()
            .map(|(i, p)| MigInstanceConfig {
                profile: (*p).into(),
                uuid: format!("MIG-{name}-{i}"),
            })
            .collect(),
    );
    n.gpus[1].mode = GpuMode::Shards(4);
    n
}

pub fn cluster(nodes: usize, gpus: u32) -> ClusterConfig {
    let ns: Vec<NodeConfig> = (0..nodes)
        .map(|i| node(&format!("n{i:02}"), gpus))
        .collect();
    let mut p = PartitionConfig::new("gpu", ns.iter().map(|n| n.name.clone()).collect());
    p.default = true;
    p.default_time_secs = Some(3600);
    p.max_time_secs = Some(86_400);
    ClusterConfig {
        nodes: ns,
        partitions: vec![p],
        ..Default::default()
    }
}

pub fn req(script: &str) -> JobRequest {
    match parse_script(script) {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    }
}

pub fn starts(d: &[Decision]) -> Vec<JobId> {
    d.iter()
        .filter_map(|d| {
            if let Decision::Start { job, .. } = d {
                Some(*job)
            } else {
                None
            }
        })
        .collect()
}
