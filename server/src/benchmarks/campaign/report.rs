//! A campaign's report, from the runs recorded so far: progress; per point the
//! headline metric's values, median and spread, and the closest published
//! configuration (`closest`); scaling efficiency across GPU counts; the storage each
//! GPU read and the storage nodes that would take; and the change since the previous
//! campaign of the same template.
//!
//! Figures are medians of the repetitions; nothing is rounded here (the pages and
//! exports round for display). Every headline metric is higher-is-better. Must not
//! touch: where the runs, the reference figures or the previous campaign come from.

use std::collections::BTreeMap;

use serde::Serialize;

use super::super::names;
use super::super::reference::SizingRow;
use super::closest::{closest, Measured};
use super::matrix::Point;
use super::scaling::scaling;
use super::storage::sizing;
use crate::domain::benchmark::{Metric, Suite};
use crate::store::BenchmarkRun;

pub use super::closest::{Closest, Workload};
pub use super::point::{Change, PointReport, StorageRead, UNSTEADY_PERCENT};
pub use super::scaling::{Scaling, ScalingPoint};
pub use super::storage::{Sizing, SizingNeed, SIZING_GPUS, SIZING_WORKLOAD};

/// A median this much below the previous campaign's is slower.
pub const SLOWER_PERCENT: f64 = 5.0;

/// One run of a point, as recorded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PointRun {
    /// The point's index in the plan.
    pub point: u32,
    /// From 1.
    pub repetition: u32,
    pub metrics: Vec<Metric>,
    pub gpu_model: Option<String>,
    /// Storage read while it ran (MB/s), and what measured it.
    pub read_mb_per_s: Option<f64>,
    pub read_source: Option<String>,
    pub duration_s: Option<f64>,
    /// What the run says it was (its `RunSetup`), where it says it.
    pub model: Option<String>,
    pub precision: Option<String>,
    pub batch_size_per_gpu: Option<u32>,
}

impl PointRun {
    fn metric(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|m| m.name == name && m.value.is_finite())
            .map(|m| m.value)
    }

    /// The storage it read: `read_mb_per_s`, else its own `storage_mb_per_s`.
    fn read(&self) -> Option<(f64, String)> {
        match self.read_mb_per_s.filter(|v| v.is_finite()) {
            Some(v) => Some((
                v,
                self.read_source
                    .clone()
                    .unwrap_or_else(|| "not given".to_string()),
            )),
            None => self
                .metric(names::STORAGE_MB_PER_S)
                .map(|v| (v, format!("the run's {}", names::STORAGE_MB_PER_S))),
        }
    }
}

/// The campaign's jobs (array tasks) as the scheduler sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCounts {
    pub planned: u32,
    /// Ended, failed ones included.
    pub ended: u32,
    pub failed: u32,
}

/// What a report is made from.
#[derive(Debug, Clone, Copy)]
pub struct ReportInput<'a> {
    /// The template's suite (`Template::suite`), where it names one.
    pub suite: Option<Suite>,
    pub points: &'a [Point],
    pub runs: &'a [PointRun],
    pub jobs: JobCounts,
    /// The published runs.
    pub reference: &'a [BenchmarkRun],
    /// The published sizing rows.
    pub sizing: &'a [SizingRow],
    /// A storage node's read throughput (MB/s) measured by a fio campaign; else the
    /// published F800 figure is used.
    pub node_mb_per_s: Option<f64>,
    /// The previous campaign of the template: its points' medians by key.
    pub previous: Option<&'a BTreeMap<String, f64>>,
}

/// How far the campaign is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Progress {
    pub planned: u32,
    /// Ended without failing.
    pub done: u32,
    pub failed: u32,
    /// Not ended yet.
    pub running_or_pending: u32,
    /// Runs recorded (a job that ended may not have recorded one).
    pub recorded: u32,
}

/// The report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub progress: Progress,
    pub workload: Option<Workload>,
    /// The headline metric (`images_per_sec` …) and its unit, once a run measured it.
    pub metric: Option<String>,
    pub unit: Option<String>,
    pub points: Vec<PointReport>,
    pub scaling: Vec<Scaling>,
    pub sizing: Option<Sizing>,
    /// Points more than 5 % slower than in the previous campaign.
    pub slower: usize,
    /// Points whose spread is over 5 %.
    pub unsteady: usize,
}

/// The median of `values` (not empty).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The metric a campaign is judged by, and what it measures.
struct Headline {
    workload: Workload,
    name: &'static str,
    unit: String,
}

/// The workload and its candidate headline metrics, best first.
fn headline_candidates(suite: Option<Suite>) -> Vec<(Workload, &'static str)> {
    let training = [
        (Workload::Training, names::IMAGES_PER_SEC),
        (Workload::Training, names::SAMPLES_PER_SEC),
    ];
    let storage = [
        (Workload::Storage, names::READ_MB_PER_S),
        (Workload::Storage, names::STORAGE_MB_PER_S),
    ];
    let interconnect = [(Workload::Interconnect, names::BUS_GB_PER_S)];
    match suite {
        Some(Suite::Fio) => storage.to_vec(),
        Some(Suite::NcclTests) => interconnect.to_vec(),
        Some(Suite::TfCnnBenchmarks | Suite::DeepLearningExamples | Suite::Mlperf) => {
            training.to_vec()
        }
        // What the runs measured says.
        Some(Suite::Custom) | None => [&training[..], &interconnect, &storage].concat(),
    }
}

/// The headline metric: the first candidate a run measured, with its unit.
fn headline(suite: Option<Suite>, runs: &[PointRun]) -> Option<Headline> {
    headline_candidates(suite)
        .into_iter()
        .find_map(|(workload, name)| {
            runs.iter()
                .flat_map(|r| &r.metrics)
                .find(|m| m.name == name)
                .map(|m| Headline {
                    workload,
                    name,
                    unit: m.unit.clone(),
                })
        })
}

/// The point's value of a parameter named as one of `names`.
fn param<'p>(point: &'p Point, names: &[&str]) -> Option<&'p str> {
    names
        .iter()
        .find_map(|n| point.params.get(*n))
        .map(String::as_str)
        .filter(|v| !v.is_empty())
}

/// The first `Some` of the runs' `field`.
fn first<'r>(
    runs: &[&'r PointRun],
    field: impl Fn(&'r PointRun) -> Option<&'r str>,
) -> Option<&'r str> {
    runs.iter().find_map(|r| field(r))
}

/// The report of one point, from its runs (`runs`, by repetition).
fn point_report(
    point: &Point,
    runs: &[&PointRun],
    head: Option<&Headline>,
    input: &ReportInput<'_>,
) -> PointReport {
    let values: Vec<f64> = head
        .map(|h| runs.iter().filter_map(|r| r.metric(h.name)).collect())
        .unwrap_or_default();
    let med = median(&values);
    let min = values.iter().copied().reduce(f64::min);
    let max = values.iter().copied().reduce(f64::max);
    let spread_percent = match (med, min, max) {
        (Some(m), Some(lo), Some(hi)) if m > 0.0 => Some((hi - lo) / m * 100.0),
        _ => None,
    };
    let training = head.is_some_and(|h| h.workload == Workload::Training);
    let gpu_model = first(runs, |r| r.gpu_model.as_deref());
    let closest = match (head, med) {
        (Some(h), Some(value)) => closest(
            &Measured {
                workload: h.workload,
                metric: h.name,
                value,
                gpus: point.gpus,
                model: first(runs, |r| r.model.as_deref()),
                precision: first(runs, |r| r.precision.as_deref())
                    .or_else(|| param(point, &["PRECISION"])),
                batch_size_per_gpu: runs
                    .iter()
                    .find_map(|r| r.batch_size_per_gpu)
                    .or_else(|| param(point, &["BATCH", "BATCH_SIZE"])?.parse().ok()),
                gpu_model,
            },
            input.reference,
        ),
        _ => None,
    };
    let reads: Vec<(f64, String)> = runs.iter().filter_map(|r| r.read()).collect();
    let storage =
        median(&reads.iter().map(|(v, _)| *v).collect::<Vec<_>>()).map(|mb| StorageRead {
            mb_per_s: mb,
            mb_per_s_per_gpu: (point.gpus > 0).then(|| mb / f64::from(point.gpus)),
            source: reads.first().map(|(_, s)| s.clone()).unwrap_or_default(),
        });
    let key = point.key();
    let previous = match (input.previous.and_then(|p| p.get(&key)), med) {
        (Some(&before), Some(now)) if before > 0.0 && before.is_finite() => {
            let ratio = now / before;
            Some(Change {
                before,
                ratio,
                change_percent: (ratio - 1.0) * 100.0,
                slower: ratio < 1.0 - SLOWER_PERCENT / 100.0,
            })
        }
        _ => None,
    };
    PointReport {
        index: point.index,
        key,
        gpus: point.gpus,
        params: point.params.clone(),
        unsteady: spread_percent.is_some_and(|s| s > UNSTEADY_PERCENT),
        per_gpu: med
            .filter(|_| training && point.gpus > 0)
            .map(|m| m / f64::from(point.gpus)),
        values,
        median: med,
        min,
        max,
        spread_percent,
        gpu_model: gpu_model.map(str::to_string),
        closest,
        storage,
        previous,
    }
}

/// The report of `input`.
pub fn report(input: &ReportInput<'_>) -> Report {
    let head = headline(input.suite, input.runs);
    let points: Vec<PointReport> = input
        .points
        .iter()
        .map(|point| {
            let mut runs: Vec<&PointRun> = input
                .runs
                .iter()
                .filter(|r| r.point == point.index)
                .collect();
            runs.sort_by_key(|r| r.repetition);
            point_report(point, &runs, head.as_ref(), input)
        })
        .collect();
    let training = head
        .as_ref()
        .is_some_and(|h| h.workload == Workload::Training);
    let jobs = input.jobs;
    Report {
        progress: Progress {
            planned: jobs.planned,
            done: jobs.ended.saturating_sub(jobs.failed),
            failed: jobs.failed.min(jobs.ended),
            running_or_pending: jobs.planned.saturating_sub(jobs.ended),
            recorded: u32::try_from(input.runs.len()).unwrap_or(u32::MAX),
        },
        workload: head.as_ref().map(|h| h.workload),
        metric: head.as_ref().map(|h| h.name.to_string()),
        unit: head.map(|h| h.unit),
        slower: points
            .iter()
            .filter(|p| p.previous.is_some_and(|c| c.slower))
            .count(),
        unsteady: points.iter().filter(|p| p.unsteady).count(),
        scaling: if training {
            scaling(&points)
        } else {
            Vec::new()
        },
        sizing: if training {
            sizing(&points, input.sizing, input.node_mb_per_s)
        } else {
            None
        },
        points,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::benchmarks::reference::{parse_runs, sizing as shipped_sizing};

    pub(crate) fn reference() -> Vec<BenchmarkRun> {
        parse_runs(include_str!("../../../reference/benchmarks.csv")).expect("reference")
    }

    pub(crate) fn point(index: u32, gpus: u32, batch: &str) -> Point {
        Point {
            index,
            gpus,
            params: [
                ("BATCH".to_string(), batch.to_string()),
                ("PRECISION".to_string(), "fp16".to_string()),
            ]
            .into(),
        }
    }

    pub(crate) fn run(point: u32, repetition: u32, images: f64) -> PointRun {
        PointRun {
            point,
            repetition,
            metrics: vec![Metric {
                name: names::IMAGES_PER_SEC.into(),
                value: images,
                unit: "images/s".into(),
            }],
            gpu_model: Some("NVIDIA H100 80GB HBM3".into()),
            model: Some("resnet50".into()),
            precision: Some("fp16".into()),
            ..PointRun::default()
        }
    }

    pub(crate) fn input<'a>(
        points: &'a [Point],
        runs: &'a [PointRun],
        reference: &'a [BenchmarkRun],
    ) -> ReportInput<'a> {
        ReportInput {
            suite: Some(Suite::Custom),
            points,
            runs,
            jobs: JobCounts {
                planned: 9,
                ended: 5,
                failed: 1,
            },
            reference,
            sizing: shipped_sizing(),
            node_mb_per_s: None,
            previous: None,
        }
    }

    #[test]
    fn medians_spreads_and_unsteady_points() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        let points = [point(0, 1, "64"), point(1, 2, "64")];
        let runs = [
            run(0, 2, 1000.0),
            run(0, 1, 990.0),
            run(0, 3, 1010.0),
            // 1,860 to 2,000 around 1,900: 7.4 %.
            run(1, 1, 1900.0),
            run(1, 2, 1860.0),
            run(1, 3, 2000.0),
        ];
        let r = report(&input(&points, &runs, &[]));
        let steady = &r.points[0];
        assert_eq!(steady.values, [990.0, 1000.0, 1010.0], "by repetition");
        assert_eq!(steady.median, Some(1000.0));
        assert!((steady.spread_percent.expect("spread") - 2.0).abs() < 1e-9);
        assert!(!steady.unsteady);
        assert_eq!(steady.spread_note(), None);
        assert_eq!(steady.per_gpu, Some(1000.0));
        let shaky = &r.points[1];
        assert_eq!(shaky.median, Some(1900.0));
        assert!(shaky.unsteady);
        assert_eq!(shaky.per_gpu, Some(950.0));
        assert_eq!(
            shaky.spread_note().as_deref(),
            Some("spread 7.4 % — more than 5 %: not a precise figure")
        );
        assert_eq!(r.unsteady, 1);
        assert_eq!(
            (r.metric.as_deref(), r.unit.as_deref()),
            (Some("images_per_sec"), Some("images/s"))
        );
        assert_eq!(r.workload, Some(Workload::Training));
        assert_eq!(
            r.progress,
            Progress {
                planned: 9,
                done: 4,
                failed: 1,
                running_or_pending: 4,
                recorded: 6
            }
        );
    }

    #[test]
    fn each_point_gets_its_closest_published_configuration() {
        let reference = reference();
        let points = [point(0, 1, "64"), point(1, 8, "256")];
        let runs = [run(0, 1, 1602.0), run(1, 1, 12072.0)];
        let r = report(&input(&points, &runs, &reference));
        let one = r.points[0].closest.as_ref().expect("closest");
        assert_eq!(
            (one.gpus, one.batch_size_per_gpu, one.value),
            (1, Some(256), 801.0)
        );
        assert!((one.ratio - 2.0).abs() < 1e-9);
        assert_eq!(
            one.why,
            "same model and precision, 1 GPU against 1, batch 64 against 256 per GPU, H100 against V100"
        );
        let eight = r.points[1].closest.as_ref().expect("closest");
        // ResNet-50 fp16 on 8 GPUs at batch 256: the 150x ImageNet run, 6,036 images/s.
        assert_eq!(
            (eight.gpus, eight.batch_size_per_gpu, eight.value),
            (8, Some(256), 6036.0)
        );
        assert!((eight.ratio - 2.0).abs() < 1e-9);
        assert!(
            eight.why.contains("same batch per GPU (256)"),
            "{}",
            eight.why
        );
        // No reference of the model: none.
        let mut other = runs.clone();
        other.iter_mut().for_each(|r| r.model = Some("gpt2".into()));
        let r = report(&input(&points, &other, &reference));
        assert!(r.points.iter().all(|p| p.closest.is_none()));
    }

    #[test]
    fn ten_percent_slower_is_flagged_and_three_is_not() {
        let points = [point(0, 1, "64"), point(1, 2, "64"), point(2, 4, "64")];
        let runs = [run(0, 1, 900.0), run(1, 1, 1940.0), run(2, 1, 4400.0)];
        let previous: BTreeMap<String, f64> = [
            (points[0].key(), 1000.0),
            (points[1].key(), 2000.0),
            (points[2].key(), 4000.0),
        ]
        .into();
        let r = report(&ReportInput {
            previous: Some(&previous),
            ..input(&points, &runs, &[])
        });
        let changes: Vec<(bool, f64)> = r
            .points
            .iter()
            .map(|p| {
                let c = p.previous.expect("change");
                (c.slower, (c.change_percent * 10.0).round() / 10.0)
            })
            .collect();
        assert_eq!(changes, [(true, -10.0), (false, -3.0), (false, 10.0)]);
        assert_eq!(r.slower, 1);
        // A point the previous campaign did not have: no change.
        let r = report(&ReportInput {
            previous: Some(&BTreeMap::new()),
            ..input(&points, &runs, &[])
        });
        assert!(r.points.iter().all(|p| p.previous.is_none()));
    }

    #[test]
    fn storage_campaigns_headline_their_read_throughput() {
        let points = [Point {
            index: 0,
            gpus: 0,
            params: [("BS".to_string(), "1M".to_string())].into(),
        }];
        let runs = [PointRun {
            point: 0,
            repetition: 1,
            metrics: vec![
                Metric {
                    name: names::READ_MB_PER_S.into(),
                    value: 2479.5,
                    unit: "MB/s".into(),
                },
                Metric {
                    name: names::STORAGE_MB_PER_S.into(),
                    value: 2479.5,
                    unit: "MB/s".into(),
                },
            ],
            ..PointRun::default()
        }];
        let reference = reference();
        let r = report(&ReportInput {
            suite: Some(Suite::Fio),
            ..input(&points, &runs, &reference)
        });
        assert_eq!(r.metric.as_deref(), Some(names::READ_MB_PER_S));
        assert_eq!(r.workload, Some(Workload::Storage));
        let c = r.points[0].closest.as_ref().expect("fio reference");
        assert_eq!(c.suite, "fio");
        assert!((c.ratio - 0.5).abs() < 1e-9);
        assert_eq!(r.points[0].per_gpu, None);
        assert!(r.scaling.is_empty() && r.sizing.is_none());
    }
}
