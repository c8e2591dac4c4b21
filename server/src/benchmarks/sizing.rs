//! Sizing advice: how many storage nodes a number of GPUs needs, and how many GPUs a
//! number of storage nodes can feed, from the storage throughput one GPU demands.
//!
//! ```text
//! storage nodes = GPUs × MB/s per GPU × (1 + headroom) ÷ MB/s per node
//! GPUs fed      = ⌊storage nodes × MB/s per node ÷ (MB/s per GPU × (1 + headroom))⌋
//! ```
//!
//! MB/s per GPU comes from `mb_per_s_per_gpu`, else from a recorded run
//! (`storage_mb_per_s` ÷ its GPUs), else from a reference workload. A node's throughput
//! comes from `node_mb_per_s`, else from the workload's reference row: GPUs one node
//! feeds × MB/s per GPU (an F800 node: 27 × 90 = 2,430 MB/s training on small images,
//! 9 × 300 = 2,700 MB/s on large ones).
//!
//! The node count is answered exactly, to one decimal rounded down as the published
//! examples write it (80 GPUs × 90 MB/s = 7,200 MB/s ÷ 2,430 = 2.96, "≈ 2.9 F800
//! nodes"; 72 × 300 = 21,600 MB/s ÷ 2,700 = 8, "≈ 8"), and as the whole number of nodes
//! to provision (rounded up: 3 and 8). Must not touch: HTTP or SQL.

use serde::Serialize;
use utoipa::ToSchema;

use super::names;
use super::reference::SizingRow;
use crate::accounting::{bad, FieldError};
use crate::store::BenchmarkRecord;

/// The most GPUs or storage nodes one question may be about.
pub const MAX_COUNT: u32 = 1_000_000;

/// Rounding slack: figures a division leaves a hair under a whole tenth stay on it.
const SLACK: f64 = 1e-9;

/// The kinds of storage node the reference rows give a throughput for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeKind {
    #[default]
    F800,
    H500,
}

impl NodeKind {
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::F800 => "F800",
            NodeKind::H500 => "H500",
        }
    }

    fn gpus_per_node(self, row: &SizingRow) -> Option<f64> {
        match self {
            NodeKind::F800 => row.gpus_per_f800_node,
            NodeKind::H500 => row.gpus_per_h500_node,
        }
    }
}

/// A sizing question, checked. Where the figures come from is settled by [`advise`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SizingQuery {
    pub mb_per_s_per_gpu: Option<f64>,
    /// A reference workload, by its text (any case).
    pub workload: Option<String>,
    /// A recorded run whose `storage_mb_per_s` per GPU is the demand.
    pub from_run: Option<i64>,
    /// How many storage nodes these GPUs need.
    pub gpus: Option<u32>,
    /// How many GPUs these storage nodes feed.
    pub storage_nodes: Option<u32>,
    pub node: NodeKind,
    pub node_mb_per_s: Option<f64>,
    /// Extra throughput to plan for, in percent of the demand.
    pub headroom_percent: f64,
}

const PARAMS: [&str; 8] = [
    "mb_per_s_per_gpu",
    "workload",
    "from_run",
    "gpus",
    "storage_nodes",
    "node",
    "node_mb_per_s",
    "headroom",
];

fn positive(field: &'static str, text: &str, max: f64) -> Result<f64, FieldError> {
    text.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0 && *v <= max)
        .ok_or_else(|| {
            bad(
                field,
                format!("{text:?} is not a number above 0 and at most {max}"),
            )
        })
}

fn count(field: &'static str, text: &str) -> Result<u32, FieldError> {
    text.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_COUNT).contains(n))
        .ok_or_else(|| {
            bad(
                field,
                format!("{text:?} is not a whole number from 1 to {MAX_COUNT}"),
            )
        })
}

impl SizingQuery {
    /// Read URL query parameters; empty values count as absent.
    pub fn parse(pairs: &[(String, String)]) -> Result<SizingQuery, FieldError> {
        let mut q = SizingQuery::default();
        for (name, value) in pairs {
            let Some(field) = PARAMS.iter().copied().find(|p| *p == name.as_str()) else {
                return Err(bad("query", format!("unknown parameter \"{name}\"")));
            };
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            match field {
                "mb_per_s_per_gpu" => q.mb_per_s_per_gpu = Some(positive(field, value, 1e6)?),
                "workload" => q.workload = Some(value.to_string()),
                "from_run" => {
                    q.from_run = Some(
                        value
                            .parse()
                            .ok()
                            .filter(|id| *id > 0)
                            .ok_or_else(|| bad(field, format!("{value:?} is not a run id")))?,
                    )
                }
                "gpus" => q.gpus = Some(count(field, value)?),
                "storage_nodes" => q.storage_nodes = Some(count(field, value)?),
                "node" => {
                    q.node = match value.to_ascii_lowercase().as_str() {
                        "f800" => NodeKind::F800,
                        "h500" => NodeKind::H500,
                        _ => return Err(bad(field, format!("{value:?} is not f800 or h500"))),
                    }
                }
                "node_mb_per_s" => q.node_mb_per_s = Some(positive(field, value, 1e9)?),
                _ => {
                    q.headroom_percent = value
                        .parse::<f64>()
                        .ok()
                        .filter(|v| (0.0..=1000.0).contains(v))
                        .ok_or_else(|| {
                            bad(
                                "headroom",
                                format!("{value:?} is not a percentage from 0 to 1000"),
                            )
                        })?
                }
            }
        }
        if q.mb_per_s_per_gpu.is_some() && q.from_run.is_some() {
            return Err(bad(
                "from_run",
                "give mb_per_s_per_gpu or from_run, not both",
            ));
        }
        if q.gpus.is_none() && q.storage_nodes.is_none() {
            return Err(bad(
                "gpus",
                "give gpus (the storage nodes they need) or storage_nodes (the GPUs they feed)",
            ));
        }
        Ok(q)
    }
}

/// A figure the advice used, and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Figure {
    pub value: f64,
    /// `as given`, a reference row, or a run.
    pub from: String,
}

/// How many storage nodes the GPUs need.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct NodesNeeded {
    pub gpus: u32,
    /// What the GPUs read, headroom included (MB/s).
    pub demand_mb_per_s: f64,
    /// Exactly.
    pub nodes: f64,
    /// To one decimal, rounded down, as published examples write it.
    pub nodes_approx: f64,
    /// Whole nodes, rounded up.
    pub nodes_to_provision: u64,
    pub formula: String,
}

/// How many GPUs the storage nodes feed.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct GpusFed {
    pub storage_nodes: u32,
    /// What the nodes deliver together (MB/s).
    pub supply_mb_per_s: f64,
    /// Whole GPUs, rounded down.
    pub gpus: u64,
    pub formula: String,
}

/// The answer, with the data it used.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Advice {
    pub mb_per_s_per_gpu: Figure,
    pub node_mb_per_s: Figure,
    /// What a node is: `F800 node`, `H500 node` or `storage node`.
    pub node: String,
    pub headroom_percent: f64,
    /// The reference workload used, when one was.
    pub workload: Option<SizingRow>,
    pub nodes_needed: Option<NodesNeeded>,
    pub gpus_fed: Option<GpusFed>,
}

/// A number as the advice writes it: at most two decimals, thousands separated
/// (`7,200`, `2.96`).
pub fn figure(value: f64) -> String {
    let text = format!("{:.2}", (value * 100.0).round() / 100.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits: Vec<char> = whole.chars().collect();
    let mut out = String::new();
    for (i, c) in digits.iter().enumerate() {
        if i > 0
            && (digits.len() - i).is_multiple_of(3)
            && c.is_ascii_digit()
            && digits[i - 1].is_ascii_digit()
        {
            out.push(',');
        }
        out.push(*c);
    }
    if !fraction.is_empty() {
        out.push('.');
        out.push_str(fraction);
    }
    out
}

/// ` × 1.2 (20 % headroom)`, or nothing without headroom.
fn headroom_text(percent: f64) -> String {
    if percent == 0.0 {
        String::new()
    } else {
        format!(
            " × {} ({} % headroom)",
            figure(1.0 + percent / 100.0),
            figure(percent)
        )
    }
}

/// The storage nodes `gpus` need.
pub fn nodes_needed(
    gpus: u32,
    mb_per_s_per_gpu: f64,
    node_mb_per_s: f64,
    headroom_percent: f64,
    node: &str,
) -> NodesNeeded {
    let demand = f64::from(gpus) * mb_per_s_per_gpu * (1.0 + headroom_percent / 100.0);
    let nodes = demand / node_mb_per_s;
    let nodes_approx = ((nodes * 10.0) + SLACK).floor() / 10.0;
    let nodes_to_provision = (nodes - SLACK).ceil().max(0.0) as u64;
    let formula = format!(
        "{gpus} GPUs × {} MB/s{} = {} MB/s; {} MB/s ÷ {} MB/s per {node} = {} ≈ {} {node}s (provision {nodes_to_provision})",
        figure(mb_per_s_per_gpu),
        headroom_text(headroom_percent),
        figure(demand),
        figure(demand),
        figure(node_mb_per_s),
        figure(nodes),
        figure(nodes_approx),
    );
    NodesNeeded {
        gpus,
        demand_mb_per_s: demand,
        nodes,
        nodes_approx,
        nodes_to_provision,
        formula,
    }
}

/// The GPUs `storage_nodes` feed.
pub fn gpus_fed(
    storage_nodes: u32,
    mb_per_s_per_gpu: f64,
    node_mb_per_s: f64,
    headroom_percent: f64,
    node: &str,
) -> GpusFed {
    let supply = f64::from(storage_nodes) * node_mb_per_s;
    let per_gpu = mb_per_s_per_gpu * (1.0 + headroom_percent / 100.0);
    let exact = supply / per_gpu;
    let gpus = (exact + SLACK).floor().max(0.0) as u64;
    let formula = format!(
        "{storage_nodes} {node}s × {} MB/s = {} MB/s; {} MB/s ÷ ({} MB/s per GPU{}) = {} → {gpus} GPUs",
        figure(node_mb_per_s),
        figure(supply),
        figure(supply),
        figure(mb_per_s_per_gpu),
        headroom_text(headroom_percent),
        figure(exact),
    );
    GpusFed {
        storage_nodes,
        supply_mb_per_s: supply,
        gpus,
        formula,
    }
}

/// The reference row of `workload` (its text, any case).
pub fn workload_row<'a>(rows: &'a [SizingRow], workload: &str) -> Option<&'a SizingRow> {
    rows.iter()
        .find(|r| r.workload.eq_ignore_ascii_case(workload.trim()))
}

/// MB/s per GPU that a recorded run read: its `storage_mb_per_s` ÷ its GPUs.
fn run_demand(run: &BenchmarkRecord) -> Result<Figure, FieldError> {
    let read = run
        .run
        .metrics
        .iter()
        .find(|m| m.name == names::STORAGE_MB_PER_S)
        .ok_or_else(|| {
            bad(
                "from_run",
                format!("run {} has no {} metric", run.id, names::STORAGE_MB_PER_S),
            )
        })?;
    Ok(Figure {
        value: read.value / run.run.setup.gpus.max(1) as f64,
        from: format!(
            "run {}: {} MB/s on {} GPUs",
            run.id,
            figure(read.value),
            run.run.setup.gpus
        ),
    })
}

/// Answer `q` from `rows` (the reference sizing rows) and `run` (the run `from_run`
/// names, read by the caller).
pub fn advise(
    q: &SizingQuery,
    run: Option<&BenchmarkRecord>,
    rows: &[SizingRow],
) -> Result<Advice, FieldError> {
    let row = match &q.workload {
        Some(w) => Some(workload_row(rows, w).ok_or_else(|| {
            bad(
                "workload",
                format!(
                    "{w:?} is not a reference workload (one of: {})",
                    rows.iter()
                        .map(|r| r.workload.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            )
        })?),
        None => None,
    };
    let row_text = |r: &SizingRow| format!("{} ({})", r.workload, r.source);
    let per_gpu = match (q.mb_per_s_per_gpu, run, row) {
        (Some(value), _, _) => Figure {
            value,
            from: "as given".into(),
        },
        (None, Some(run), _) => run_demand(run)?,
        (None, None, Some(r)) => Figure {
            value: r.mb_per_s_per_gpu.ok_or_else(|| {
                bad(
                    "mb_per_s_per_gpu",
                    format!(
                        "the workload {:?} publishes no MB/s per GPU; give it",
                        r.workload
                    ),
                )
            })?,
            from: row_text(r),
        },
        (None, None, None) => {
            return Err(bad(
                "mb_per_s_per_gpu",
                "give mb_per_s_per_gpu, from_run or a workload",
            ))
        }
    };
    let (node_figure, node) =
        match (q.node_mb_per_s, row) {
            (Some(value), _) => (
                Figure {
                    value,
                    from: "as given".into(),
                },
                "storage node".to_string(),
            ),
            (None, Some(r)) => {
                let kind = q.node;
                let per_node = kind
                    .gpus_per_node(r)
                    .zip(r.mb_per_s_per_gpu)
                    .ok_or_else(|| {
                        bad(
                            "node_mb_per_s",
                            format!(
                                "the workload {:?} gives no {} node throughput; give node_mb_per_s",
                                r.workload,
                                kind.name()
                            ),
                        )
                    })?;
                (
                    Figure {
                        value: per_node.0 * per_node.1,
                        from: format!(
                            "{} GPUs per {} node × {} MB/s per GPU: {}",
                            figure(per_node.0),
                            kind.name(),
                            figure(per_node.1),
                            row_text(r)
                        ),
                    },
                    format!("{} node", kind.name()),
                )
            }
            (None, None) => return Err(bad(
                "node_mb_per_s",
                "give node_mb_per_s, or a workload whose reference row gives a node's throughput",
            )),
        };
    Ok(Advice {
        nodes_needed: q.gpus.map(|g| {
            nodes_needed(
                g,
                per_gpu.value,
                node_figure.value,
                q.headroom_percent,
                &node,
            )
        }),
        gpus_fed: q.storage_nodes.map(|n| {
            gpus_fed(
                n,
                per_gpu.value,
                node_figure.value,
                q.headroom_percent,
                &node,
            )
        }),
        mb_per_s_per_gpu: per_gpu,
        node_mb_per_s: node_figure,
        node,
        headroom_percent: q.headroom_percent,
        workload: row.cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmarks::reference::sizing;

    fn query(pairs: &[(&str, &str)]) -> Result<SizingQuery, FieldError> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SizingQuery::parse(&pairs)
    }

    fn ask(pairs: &[(&str, &str)]) -> Advice {
        advise(&query(pairs).expect("query"), None, sizing()).expect("advice")
    }

    #[test]
    fn eighty_gpus_at_90_mb_per_s_need_2_9_f800_nodes() {
        let advice = ask(&[
            ("workload", "training small images (115 KB) ResNet-50"),
            ("gpus", "80"),
        ]);
        assert_eq!(advice.node_mb_per_s.value, 2430.0, "27 × 90");
        assert_eq!(advice.node, "F800 node");
        let n = advice.nodes_needed.expect("nodes");
        assert_eq!(n.demand_mb_per_s, 7200.0);
        assert_eq!(n.nodes_approx, 2.9);
        assert_eq!(n.nodes_to_provision, 3);
        assert_eq!(
            n.formula,
            "80 GPUs × 90 MB/s = 7,200 MB/s; 7,200 MB/s ÷ 2,430 MB/s per F800 node = 2.96 ≈ 2.9 F800 nodes (provision 3)"
        );
    }

    #[test]
    fn seventy_two_gpus_at_300_mb_per_s_need_8_f800_nodes() {
        let advice = ask(&[
            ("workload", "Training Large Images (1.3 MB) Inception-v4"),
            ("gpus", "72"),
            ("storage_nodes", "8"),
        ]);
        assert_eq!(advice.node_mb_per_s.value, 2700.0, "9 × 300");
        let n = advice.nodes_needed.expect("nodes");
        assert_eq!(n.demand_mb_per_s, 21600.0);
        assert_eq!(
            (n.nodes, n.nodes_approx, n.nodes_to_provision),
            (8.0, 8.0, 8)
        );
        assert!(
            n.formula.contains("= 21,600 MB/s")
                && n.formula.ends_with("≈ 8 F800 nodes (provision 8)"),
            "{}",
            n.formula
        );
        let back = advice.gpus_fed.expect("gpus");
        assert_eq!((back.supply_mb_per_s, back.gpus), (21600.0, 72));
    }

    #[test]
    fn one_node_feeds_the_gpus_of_its_reference_row() {
        for row in sizing() {
            let (Some(per_gpu), Some(gpus)) = (row.mb_per_s_per_gpu, row.gpus_per_f800_node) else {
                continue;
            };
            let fed = gpus_fed(1, per_gpu, gpus * per_gpu, 0.0, "F800 node");
            assert_eq!(fed.gpus as f64, gpus, "{}", row.workload);
        }
    }

    #[test]
    fn headroom_raises_the_demand_and_lowers_the_gpus_fed() {
        let advice = ask(&[
            ("mb_per_s_per_gpu", "100"),
            ("node_mb_per_s", "1000"),
            ("gpus", "10"),
            ("storage_nodes", "3"),
            ("headroom", "20"),
        ]);
        let n = advice.nodes_needed.expect("nodes");
        assert!((n.demand_mb_per_s - 1200.0).abs() < 1e-9);
        assert_eq!((n.nodes_approx, n.nodes_to_provision), (1.2, 2));
        assert!(
            n.formula
                .starts_with("10 GPUs × 100 MB/s × 1.2 (20 % headroom) = 1,200 MB/s"),
            "{}",
            n.formula
        );
        assert_eq!(advice.gpus_fed.expect("gpus").gpus, 25, "3000 / 120");
        assert_eq!(advice.node, "storage node");
        assert_eq!(advice.mb_per_s_per_gpu.from, "as given");
    }

    #[test]
    fn a_run_gives_its_storage_throughput_per_gpu() {
        let run = BenchmarkRecord {
            id: 7,
            created_at: 0,
            run: crate::store::BenchmarkRun {
                setup: crate::benchmarks::RunSetup {
                    gpus: 4,
                    ..Default::default()
                },
                metrics: vec![crate::benchmarks::Metric {
                    name: names::STORAGE_MB_PER_S.into(),
                    value: 360.0,
                    unit: "MB/s".into(),
                }],
                ..Default::default()
            },
        };
        let q =
            query(&[("from_run", "7"), ("node_mb_per_s", "2430"), ("gpus", "27")]).expect("query");
        let advice = advise(&q, Some(&run), sizing()).expect("advice");
        assert_eq!(advice.mb_per_s_per_gpu.value, 90.0);
        assert_eq!(advice.nodes_needed.expect("nodes").nodes, 1.0);
        let without = BenchmarkRecord {
            run: Default::default(),
            ..run
        };
        assert_eq!(
            advise(&q, Some(&without), sizing())
                .expect_err("no metric")
                .field,
            "from_run"
        );
    }

    #[test]
    fn bad_questions_name_their_parameter() {
        let field = |pairs: &[(&str, &str)]| query(pairs).expect_err("bad").field;
        assert_eq!(field(&[("gpus", "0")]), "gpus");
        assert_eq!(field(&[("gpus", "-3")]), "gpus");
        assert_eq!(field(&[("storage_nodes", "x")]), "storage_nodes");
        assert_eq!(
            field(&[("gpus", "8"), ("mb_per_s_per_gpu", "NaN")]),
            "mb_per_s_per_gpu"
        );
        assert_eq!(field(&[("gpus", "8"), ("headroom", "-5")]), "headroom");
        assert_eq!(field(&[("gpus", "8"), ("node", "ssd")]), "node");
        assert_eq!(field(&[("mb_per_s_per_gpu", "90")]), "gpus");
        assert_eq!(field(&[("gpus", "8"), ("colour", "red")]), "query");
        assert_eq!(
            field(&[("gpus", "8"), ("mb_per_s_per_gpu", "9"), ("from_run", "2")]),
            "from_run"
        );
        let advise_field = |pairs: &[(&str, &str)]| {
            advise(&query(pairs).expect("query"), None, sizing())
                .expect_err("bad")
                .field
        };
        assert_eq!(
            advise_field(&[("gpus", "8"), ("workload", "cooking")]),
            "workload"
        );
        assert_eq!(
            advise_field(&[("gpus", "8"), ("mb_per_s_per_gpu", "90")]),
            "node_mb_per_s"
        );
        assert_eq!(
            advise_field(&[("gpus", "8"), ("node_mb_per_s", "90")]),
            "mb_per_s_per_gpu"
        );
        assert_eq!(
            advise_field(&[
                ("gpus", "8"),
                (
                    "workload",
                    "MLPerf image classification training (MXNet ResNet-50)"
                )
            ]),
            "mb_per_s_per_gpu"
        );
    }

    #[test]
    fn figures_are_written_with_thousands_and_two_decimals() {
        assert_eq!(figure(7200.0), "7,200");
        assert_eq!(figure(2.962962), "2.96");
        assert_eq!(figure(8.0), "8");
        assert_eq!(figure(1234567.5), "1,234,567.5");
        assert_eq!(figure(90.0), "90");
        assert_eq!(figure(0.5), "0.5");
    }
}
