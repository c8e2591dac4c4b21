//! The storage a campaign's points read, and the storage it would take: from the
//! largest MB/s per GPU of the training points, the MB/s that 8, 64 and 256 GPUs
//! need and the storage nodes that feed them (`benchmarks::sizing`'s arithmetic), at
//! a node's throughput measured by a fio campaign or else the published F800 figure,
//! beside the published rule (90 MB/s per GPU training ResNet-50 on small images).
//! Must not touch: where the figures come from (`report`).

use serde::Serialize;

use super::super::reference::SizingRow;
use super::super::sizing::{figure, nodes_needed, workload_row, NodesNeeded};
use super::point::PointReport;

/// The GPU counts the sizing answers for.
pub const SIZING_GPUS: [u32; 3] = [8, 64, 256];
/// The published rule the sizing stands beside.
pub const SIZING_WORKLOAD: &str = "training small images (115 KB) ResNet-50";

/// The storage nodes a number of GPUs needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizingNeed {
    pub gpus: u32,
    /// What they read at the campaign's MB/s per GPU.
    pub demand_mb_per_s: f64,
    /// At the node throughput of the sizing.
    pub nodes: Option<NodesNeeded>,
    /// By the published rule (MB/s per GPU, on F800 nodes).
    pub published: Option<NodesNeeded>,
}

/// Storage sizing from the campaign's training points.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sizing {
    /// The largest median per GPU of the campaign's training points.
    pub mb_per_s_per_gpu: f64,
    /// The point it comes from.
    pub from_point: String,
    /// One storage node's read throughput, and where that comes from.
    pub node_mb_per_s: Option<f64>,
    pub node: String,
    pub node_from: String,
    pub needs: Vec<SizingNeed>,
    /// The published rule (`training small images (115 KB) ResNet-50`: 90 MB/s per
    /// GPU).
    pub rule: Option<SizingRow>,
}

/// Storage sizing from the largest MB/s per GPU of the training points.
pub(super) fn sizing(
    points: &[PointReport],
    rows: &[SizingRow],
    node_mb_per_s: Option<f64>,
) -> Option<Sizing> {
    let (per_gpu, from) = points
        .iter()
        .filter_map(|p| Some((p.storage.as_ref()?.mb_per_s_per_gpu?, p)))
        .filter(|(v, _)| v.is_finite() && *v > 0.0)
        .max_by(|a, b| a.0.total_cmp(&b.0))?;
    let rule = workload_row(rows, SIZING_WORKLOAD).cloned();
    // The published rule: MB/s per GPU, and GPUs one F800 node feeds.
    let published = rule.as_ref().and_then(|r| {
        Some((
            r.mb_per_s_per_gpu?,
            r.gpus_per_f800_node?,
            r.source.as_str(),
        ))
    });
    let (node_mb, node, node_from) = match (
        node_mb_per_s.filter(|v| v.is_finite() && *v > 0.0),
        published,
    ) {
        (Some(v), _) => (
            Some(v),
            "storage node",
            "measured by a fio campaign".to_string(),
        ),
        (None, Some((per_gpu, gpus, source))) => (
            Some(per_gpu * gpus),
            "F800 node",
            format!(
                "published: {} GPUs per F800 node × {} MB/s per GPU ({source})",
                figure(gpus),
                figure(per_gpu),
            ),
        ),
        (None, None) => (None, "storage node", "not known".to_string()),
    };
    let needs = SIZING_GPUS
        .iter()
        .map(|&gpus| SizingNeed {
            gpus,
            demand_mb_per_s: f64::from(gpus) * per_gpu,
            nodes: node_mb.map(|n| nodes_needed(gpus, per_gpu, n, 0.0, node)),
            published: published.map(|(rule_per_gpu, per_node, _)| {
                nodes_needed(
                    gpus,
                    rule_per_gpu,
                    rule_per_gpu * per_node,
                    0.0,
                    "F800 node",
                )
            }),
        })
        .collect();
    Some(Sizing {
        mb_per_s_per_gpu: per_gpu,
        from_point: from.key.clone(),
        node_mb_per_s: node_mb,
        node: node.to_string(),
        node_from,
        needs,
        rule,
    })
}

#[cfg(test)]
mod tests {
    use crate::benchmarks::campaign::report::tests::{input, point, run};
    use crate::benchmarks::campaign::report::{report, ReportInput};
    use crate::benchmarks::names;
    use crate::domain::benchmark::Metric;

    #[test]
    fn sizing_from_the_storage_each_gpu_read() {
        let points = [point(0, 1, "64"), point(1, 4, "64")];
        let mut runs = vec![run(0, 1, 1000.0), run(1, 1, 3800.0), run(1, 2, 3900.0)];
        runs[0].read_mb_per_s = Some(100.0);
        runs[0].read_source = Some("node counters".into());
        // 4 GPUs: 480 and 520 MB/s, median 500: 125 MB/s per GPU, the largest.
        runs[1].read_mb_per_s = Some(480.0);
        runs[2].metrics.push(Metric {
            name: names::STORAGE_MB_PER_S.into(),
            value: 520.0,
            unit: "MB/s".into(),
        });
        let r = report(&input(&points, &runs, &[]));
        let storage = r.points[0].storage.as_ref().expect("storage");
        assert_eq!(
            (storage.mb_per_s_per_gpu, storage.source.as_str()),
            (Some(100.0), "node counters")
        );
        assert_eq!(
            r.points[1]
                .storage
                .as_ref()
                .and_then(|s| s.mb_per_s_per_gpu),
            Some(125.0)
        );
        let s = r.sizing.expect("sizing");
        assert_eq!(s.mb_per_s_per_gpu, 125.0);
        assert_eq!(s.from_point, points[1].key());
        // The published F800 node: 27 GPUs × 90 MB/s = 2,430 MB/s.
        assert_eq!(
            (s.node_mb_per_s, s.node.as_str()),
            (Some(2430.0), "F800 node")
        );
        assert_eq!(s.rule.as_ref().and_then(|r| r.mb_per_s_per_gpu), Some(90.0));
        let by_gpus: Vec<(u32, f64, u64, u64)> = s
            .needs
            .iter()
            .map(|n| {
                (
                    n.gpus,
                    n.demand_mb_per_s,
                    n.nodes.as_ref().map_or(0, |x| x.nodes_to_provision),
                    n.published.as_ref().map_or(0, |x| x.nodes_to_provision),
                )
            })
            .collect();
        // 8 × 125 = 1,000 MB/s: 1 node (the rule: 720 MB/s, 1); 64: 8,000 MB/s, 4
        // nodes (5,760, 3); 256: 32,000 MB/s, 14 nodes (23,040, 10).
        assert_eq!(
            by_gpus,
            [
                (8, 1000.0, 1, 1),
                (64, 8000.0, 4, 3),
                (256, 32000.0, 14, 10)
            ]
        );
        // A node measured by a fio campaign replaces the published one.
        let r = report(&ReportInput {
            node_mb_per_s: Some(4000.0),
            ..input(&points, &runs, &[])
        });
        let s = r.sizing.expect("sizing");
        assert_eq!(s.node, "storage node");
        assert_eq!(
            s.needs[2].nodes.as_ref().map(|n| n.nodes_to_provision),
            Some(8)
        );
        // Nothing read: no sizing.
        let quiet = [run(0, 1, 1000.0)];
        assert_eq!(report(&input(&points, &quiet, &[])).sizing, None);
    }
}
