use scheduler::{Cluster, Decision, Owner, SliceId};

use super::nvidia_smi::tests::{A100_LIST, A100_QUERY};
use super::*;

fn host() -> HostFacts {
    HostFacts {
        hostname: Some("gpu01".into()),
        cpus: Some(64),
        memory_total_mb: Some(515_000),
    }
}

fn section(toml_text: &str) -> ClusterSection {
    toml::from_str(toml_text).expect("cluster section")
}

fn a100_node() -> Vec<DiscoveredGpu> {
    with_mig(
        parse_gpu_query(A100_QUERY).expect("query"),
        &parse_gpu_list(A100_LIST).expect("list"),
    )
}

/// Submit `args` as alice at time 0 and return the slices of the job's start.
fn start(cluster: &mut Cluster, args: &[&str]) -> Vec<SliceId> {
    let req = scheduler::parse_args(args).expect("request");
    let job = cluster
        .submit(req, &Owner::user("alice"), 0)
        .expect("submit");
    let decisions = cluster.schedule(0);
    for decision in decisions {
        if let Decision::Start {
            job: started,
            allocation,
        } = decision
        {
            if started == job {
                return allocation.nodes[0].slices.clone();
            }
        }
    }
    panic!("{args:?} did not start");
}

#[test]
fn host_files_parse() {
    assert_eq!(
        short_hostname("gpu01.cluster.example.org\n").as_deref(),
        Some("gpu01")
    );
    assert_eq!(short_hostname("head\n").as_deref(), Some("head"));
    assert_eq!(short_hostname("\n"), None);
    let meminfo = "MemTotal:       527362048 kB\nMemFree:        1000 kB\n";
    assert_eq!(meminfo_total_mb(meminfo), Some(515_002));
    assert_eq!(meminfo_total_mb("MemFree: 1 kB\n"), None);
    let cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\n\nprocessor\t: 1\nmodel name\t: x\n";
    assert_eq!(cpuinfo_processors(cpuinfo), Some(2));
    assert_eq!(cpuinfo_processors(""), None);
    let here = HostFacts::detect();
    assert!(here.hostname.is_some() && here.cpus.is_some() && here.memory_total_mb.is_some());
}

#[test]
fn defaults_give_one_node_in_partition_main() {
    let inv = build(&ClusterSection::default(), host(), None).expect("inventory");
    let node = &inv.cluster.nodes[0];
    assert_eq!(inv.cluster.nodes.len(), 1);
    assert_eq!(node.name, "gpu01");
    assert_eq!(node.cpus, 64);
    assert_eq!(
        node.memory_mb,
        515_000 - 1024,
        "reserved memory is left out"
    );
    assert!(node.gpus.is_empty() && inv.gpus.is_empty());
    let mut main = PartitionConfig::new("main", vec!["gpu01".into()]);
    main.default = true;
    assert_eq!(inv.cluster.partitions, [main]);
    let mut cluster = Cluster::new(inv.cluster.clone()).expect("the scheduler accepts it");
    assert!(start(&mut cluster, &["-c", "4"]).is_empty());
}

#[test]
fn configured_values_win_over_detected_ones() {
    let cfg = section("node_name = \"head\"\ncpus = 8\nmemory_mb = 30000\nfeatures = [\"nvme\"]\n");
    let inv = build(&cfg, HostFacts::default(), None).expect("nothing to detect");
    let node = &inv.cluster.nodes[0];
    assert_eq!(
        (node.name.as_str(), node.cpus, node.memory_mb),
        ("head", 8, 30000)
    );
    assert_eq!(node.features, ["nvme"]);
    assert_eq!(inv.cluster.partitions[0].nodes, ["head"]);

    let cfg = section("reserved_memory_mb = 2048\n");
    let inv = build(&cfg, host(), None).expect("inventory");
    assert_eq!(inv.cluster.nodes[0].memory_mb, 515_000 - 2048);
}

#[test]
fn what_cannot_be_detected_names_its_key() {
    for (missing, key) in [
        (
            HostFacts {
                hostname: None,
                ..host()
            },
            "cluster.node_name",
        ),
        (
            HostFacts {
                cpus: None,
                ..host()
            },
            "cluster.cpus",
        ),
        (
            HostFacts {
                memory_total_mb: None,
                ..host()
            },
            "cluster.memory_mb",
        ),
    ] {
        let err = build(&ClusterSection::default(), missing, None).expect_err(key);
        assert!(err.contains(key), "{err}");
    }
    let cfg = section("reserved_memory_mb = 515000\n");
    let err = build(&cfg, host(), None).expect_err("nothing left");
    assert!(err.contains("cluster.reserved_memory_mb"), "{err}");
}

#[test]
fn declared_gpus_are_scheduled_without_nvidia_smi() {
    let cfg = section(
        r#"
[[gpus]]
index = 0
model = "A100-80GB"
memory_mb = 81920
mig = [{ profile = "3g.40gb", uuid = "MIG-aaaa" }, { profile = "4g.40gb" }]
[[gpus]]
index = 1
uuid = "GPU-1111"
model = "A100-80GB"
memory_mb = 81920
[[gpus]]
index = 2
model = "V100-SXM2-32GB"
memory_mb = 32768
shards = 4
"#,
    );
    let inv = build(&cfg, host(), None).expect("inventory");
    let gpus = &inv.cluster.nodes[0].gpus;
    assert_eq!(gpus.len(), 3);
    assert_eq!(gpus[0].uuid, "GPU-declared-gpu01-0");
    assert_eq!(
        gpus[0].mode,
        GpuMode::Mig(vec![
            MigInstanceConfig {
                profile: "3g.40gb".into(),
                uuid: "MIG-aaaa".into()
            },
            MigInstanceConfig {
                profile: "4g.40gb".into(),
                uuid: "MIG-declared-gpu01-0-1".into()
            },
        ])
    );
    assert_eq!(gpus[1].uuid, "GPU-1111");
    assert_eq!(gpus[1].mode, GpuMode::Whole);
    assert_eq!(gpus[2].mode, GpuMode::Shards(4));
    assert!(inv
        .gpus
        .iter()
        .all(|g| g.source == GpuSource::Declared && !g.present && g.node == "gpu01"));
    assert_eq!(inv.gpus[0].mig.len(), 2);

    let mut cluster = Cluster::new(inv.cluster.clone()).expect("the scheduler accepts it");
    assert_eq!(
        start(&mut cluster, &["--gres=gpu:a100:1"]),
        [SliceId::Gpu { index: 1 }]
    );
    assert!(matches!(
        start(&mut cluster, &["--gres=gpu:3g.40gb:1"]).as_slice(),
        [SliceId::Mig { gpu: 0, uuid, .. }] if uuid == "MIG-aaaa"
    ));
    assert!(matches!(
        start(&mut cluster, &["--gres=shard:1"]).as_slice(),
        [SliceId::Shard { gpu: 2, .. }]
    ));
}

#[test]
fn discovered_gpus_are_scheduled_with_their_mig_instances() {
    let inv = build(&ClusterSection::default(), host(), Some(a100_node())).expect("inventory");
    let gpus = &inv.cluster.nodes[0].gpus;
    assert_eq!(gpus.len(), 4);
    assert_eq!(gpus[1].model, "A100-SXM4-80GB");
    assert_eq!(gpus[1].uuid, "GPU-1f5b2c4e-8a3d-4c1e-9b7a-2e6f0d3c5a91");
    assert_eq!(gpus[1].memory_mb, 81920);
    assert_eq!(gpus[1].mode, GpuMode::Whole);
    let GpuMode::Mig(instances) = &gpus[0].mode else {
        panic!("GPU 0 is in MIG mode: {:?}", gpus[0].mode);
    };
    assert_eq!(instances.len(), 3);
    assert!(inv
        .gpus
        .iter()
        .all(|g| g.source == GpuSource::Discovered && g.present));
    assert_eq!(
        inv.gpus[0].mig[0],
        (
            "3g.40gb".to_string(),
            "MIG-c6d4f1ef-42e4-5de3-91c7-45d71585b3bf".to_string()
        )
    );

    let mut cluster = Cluster::new(inv.cluster.clone()).expect("the scheduler accepts it");
    assert!(matches!(
        start(&mut cluster, &["--gres=gpu:a100:2"]).as_slice(),
        [SliceId::Gpu { .. }, SliceId::Gpu { .. }]
    ));
    assert!(matches!(
        start(&mut cluster, &["--gres=gpu:2g.20gb:1"]).as_slice(),
        [SliceId::Mig { gpu: 0, uuid, .. }] if uuid == "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb"
    ));
}

#[test]
fn declared_layout_applies_to_the_discovered_gpu_and_missing_ones_are_flagged() {
    let cfg = section(
        r#"
[[gpus]]
index = 0
model = "A100-80GB"
memory_mb = 81920
mig = [{ profile = "2g.20gb" }, { profile = "3g.40gb" }]
[[gpus]]
index = 1
model = "A100-80GB"
memory_mb = 81920
shards = 4
[[gpus]]
index = 7
model = "A100-80GB"
memory_mb = 81920
"#,
    );
    let inv = build(&cfg, host(), Some(a100_node())).expect("inventory");
    let gpus = &inv.cluster.nodes[0].gpus;
    assert_eq!(
        gpus.iter().map(|g| g.index).collect::<Vec<_>>(),
        [0, 1, 2, 3, 7]
    );
    assert_eq!(
        gpus[0].mode,
        GpuMode::Mig(vec![
            MigInstanceConfig {
                profile: "2g.20gb".into(),
                uuid: "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb".into()
            },
            MigInstanceConfig {
                profile: "3g.40gb".into(),
                uuid: "MIG-c6d4f1ef-42e4-5de3-91c7-45d71585b3bf".into()
            },
        ]),
        "declared instances take the UUIDs nvidia-smi lists for their profile"
    );
    assert_eq!(gpus[1].mode, GpuMode::Shards(4));
    assert_eq!(
        gpus[1].model, "A100-SXM4-80GB",
        "the discovered model is kept"
    );
    let missing = &inv.gpus[4];
    assert_eq!(
        (missing.index, missing.source, missing.present),
        (7, GpuSource::Declared, false)
    );
    assert_eq!(missing.uuid, "GPU-declared-gpu01-7");
    assert!(inv.gpus[..4].iter().all(|g| g.present));
    Cluster::new(inv.cluster.clone()).expect("the scheduler accepts it");
}

#[test]
fn unknown_mig_profiles_are_left_out() {
    let mut gpus = a100_node();
    gpus[0].mig.push(("1g.10gb+me".into(), "MIG-media".into()));
    let inv = build(&ClusterSection::default(), host(), Some(gpus)).expect("inventory");
    let GpuMode::Mig(instances) = &inv.cluster.nodes[0].gpus[0].mode else {
        panic!("MIG mode expected");
    };
    assert_eq!(instances.len(), 3);
    assert!(instances.iter().all(|m| m.uuid != "MIG-media"));

    let in_mig_mode = DiscoveredGpu {
        index: 0,
        uuid: "GPU-b200".into(),
        name: "NVIDIA B200".into(),
        memory_mb: 183_359,
        mig: vec![("1g.23gb".into(), "MIG-b200".into())],
    };
    let inv =
        build(&ClusterSection::default(), host(), Some(vec![in_mig_mode])).expect("inventory");
    assert!(inv.cluster.nodes[0].gpus.is_empty(), "not schedulable");
    assert_eq!(inv.gpus.len(), 1, "but listed");
}

#[test]
fn partitions_carry_their_limits() {
    let cfg = section(
        r#"
[[partitions]]
name = "gpu"
default = true
default_time = "1:00:00"
max_time = "7-00:00:00"
cpus_per_gpu = 16
mem_per_gpu_mb = 65536
allowed_groups = ["ml"]
priority_tier = 2
[[partitions]]
name = "debug"
max_time = "UNLIMITED"
"#,
    );
    let inv = build(&cfg, host(), None).expect("inventory");
    let gpu = &inv.cluster.partitions[0];
    assert_eq!(gpu.name, "gpu");
    assert_eq!(gpu.nodes, ["gpu01"]);
    assert!(gpu.default);
    assert_eq!(gpu.default_time_secs, Some(3600));
    assert_eq!(gpu.max_time_secs, Some(7 * 86_400));
    assert_eq!(
        (gpu.default_cpus_per_gpu, gpu.default_mem_per_gpu_mb),
        (16, 65536)
    );
    assert_eq!(gpu.allowed_groups, ["ml"]);
    assert_eq!(gpu.priority_tier, 2);
    let debug = &inv.cluster.partitions[1];
    assert!(!debug.default);
    assert_eq!((debug.default_time_secs, debug.max_time_secs), (None, None));
    assert_eq!(debug.default_cpus_per_gpu, 8);

    let bad = section("[[partitions]]\nname = \"gpu\"\ndefault = true\nmax_time = \"soon\"\n");
    let err = build(&bad, host(), None).expect_err("bad time");
    assert!(err.starts_with("cluster.partitions[0].max_time:"), "{err}");
    let two = section(
        "[[partitions]]\nname = \"a\"\ndefault = true\n[[partitions]]\nname = \"b\"\ndefault = true\n",
    );
    let err = build(&two, host(), None).expect_err("two defaults");
    assert!(err.contains("default partition"), "{err}");
}

#[test]
fn inventory_serializes_for_the_api() {
    let inv = build(&ClusterSection::default(), host(), Some(a100_node())).expect("inventory");
    let json = serde_json::to_value(&inv).expect("json");
    assert_eq!(json["cluster"]["nodes"][0]["name"], "gpu01");
    let gpu0 = &json["gpus"][0];
    assert_eq!(gpu0["source"], "discovered");
    assert_eq!(gpu0["present"], true);
    assert_eq!(gpu0["model"], "A100-SXM4-80GB");
    assert_eq!(gpu0["mig"][0]["profile"], "3g.40gb");
    assert_eq!(
        gpu0["mig"][0]["uuid"],
        "MIG-c6d4f1ef-42e4-5de3-91c7-45d71585b3bf"
    );
    assert_eq!(json["gpus"][1]["mig"], serde_json::json!([]));
}
