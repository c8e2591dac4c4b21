//! The published configuration closest to a campaign's point, and why it is the
//! closest: the reference runs of the point's workload are ranked by the same model
//! (required for training; `resnet50` is `ResNet-50`, `ResNet-50 v1.5` a variant of
//! it), the same precision, the nearest GPU count, the nearest batch size per GPU,
//! and the same GPU model, in that order. Must not touch: where the reference runs
//! come from.

use std::cmp::Ordering;

use serde::Serialize;

use super::super::names;
use crate::store::BenchmarkRun;

/// What a campaign measures, which says what it compares with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// Images (or samples) per second of a training run, all GPUs together.
    Training,
    /// Storage read throughput (fio).
    Storage,
    /// Bus bandwidth between GPUs (nccl-tests).
    Interconnect,
}

impl Workload {
    /// The metrics a reference run of this workload may carry, best first.
    fn reference_metrics(self, metric: &str) -> Vec<&str> {
        match self {
            Workload::Training => vec![metric],
            Workload::Storage => vec![names::READ_MB_PER_S, names::STORAGE_MB_PER_S],
            Workload::Interconnect => vec![names::BUS_GB_PER_S],
        }
    }

    /// Whether `run` is a reference of this workload.
    fn covers(self, run: &BenchmarkRun) -> bool {
        match self {
            Workload::Training => true,
            Workload::Storage => run.setup.suite == "fio",
            Workload::Interconnect => run.setup.suite == "nccl_tests",
        }
    }
}

/// A point as it is compared: its median and what it ran.
#[derive(Debug, Clone, Copy)]
pub(super) struct Measured<'a> {
    pub workload: Workload,
    pub metric: &'a str,
    pub value: f64,
    pub gpus: u32,
    pub model: Option<&'a str>,
    pub precision: Option<&'a str>,
    pub batch_size_per_gpu: Option<u32>,
    pub gpu_model: Option<&'a str>,
}

/// The closest published configuration of a point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Closest {
    /// The published study.
    pub source: String,
    pub suite: String,
    pub model: Option<String>,
    pub precision: Option<String>,
    pub gpus: i64,
    pub batch_size_per_gpu: Option<i64>,
    pub gpu_model: Option<String>,
    pub storage: Option<String>,
    /// The reference's figure of the compared metric, as published.
    pub value: f64,
    /// The reference's figure as the point's median is compared with it: scaled to
    /// the point's GPUs when compared per GPU.
    pub compared_value: f64,
    /// The point's median ÷ `compared_value`.
    pub ratio: f64,
    /// GPU counts differ: compared per GPU.
    pub per_gpu: bool,
    /// In words: `same model and precision, 1 GPU against 1, batch 64 against 256 per
    /// GPU, H100 against V100`.
    pub why: String,
}

/// `ResNet-50` → `resnet50`.
fn model_key(model: &str) -> String {
    model
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// How a reference's model matches: 0 the same, 1 a variant (`ResNet-50 v1.5` of
/// `resnet50`), `None` another model.
fn model_rank(point: &str, reference: &str) -> Option<u8> {
    let (a, b) = (model_key(point), model_key(reference));
    if a.is_empty() || b.is_empty() {
        None
    } else if a == b {
        Some(0)
    } else if a.starts_with(&b) || b.starts_with(&a) {
        Some(1)
    } else {
        None
    }
}

/// The GPU's family as people say it: `NVIDIA H100 80GB HBM3` → `H100`,
/// `V100-PCIE-32GB` → `V100`, `L40S` → `L40S`; else the name as given.
pub(super) fn gpu_family(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .find(|word| {
            let letters = word.chars().take_while(char::is_ascii_alphabetic).count();
            let digits = word[letters..]
                .chars()
                .take_while(char::is_ascii_digit)
                .count();
            let rest = &word[letters + digits..];
            (1..=2).contains(&letters)
                && (1..=4).contains(&digits)
                && rest.chars().all(|c| c.is_ascii_alphabetic())
                && rest.len() <= 2
        })
        .map_or_else(|| name.trim().to_string(), str::to_ascii_uppercase)
}

/// A precision as compared: mixed precision (`amp`, `fp16`, `float16`, `half`) is
/// `fp16`; `float32`, `single` are `fp32`.
fn precision_key(precision: &str) -> String {
    let p = precision.trim().to_ascii_lowercase();
    match p.as_str() {
        "amp" | "mixed" | "float16" | "half" => "fp16".to_string(),
        "float32" | "single" => "fp32".to_string(),
        _ => p,
    }
}

/// 0 same, 1 not known, 2 different.
fn same_rank(a: Option<&str>, b: Option<&str>, eq: impl Fn(&str, &str) -> bool) -> u8 {
    match (a, b) {
        (Some(a), Some(b)) if eq(a, b) => 0,
        (Some(_), Some(_)) => 2,
        _ => 1,
    }
}

/// How far apart two counts are, as a ratio (8 is as far from 4 as 2 is).
fn distance(a: f64, b: f64) -> f64 {
    (a.max(1.0) / b.max(1.0)).ln().abs()
}

/// A candidate, ranked: lower is closer.
struct Ranked<'r> {
    run: &'r BenchmarkRun,
    value: f64,
    model: u8,
    precision: u8,
    gpus: f64,
    batch: f64,
    gpu_model: u8,
}

impl Ranked<'_> {
    fn rank(&self, other: &Self) -> Ordering {
        self.model
            .cmp(&other.model)
            .then(self.precision.cmp(&other.precision))
            .then(self.gpus.total_cmp(&other.gpus))
            .then(self.batch.total_cmp(&other.batch))
            .then(self.gpu_model.cmp(&other.gpu_model))
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 {
        "GPU"
    } else {
        "GPUs"
    }
}

/// The closest reference of `point` among `reference`, or `None` when none is of its
/// workload (and, for training, of its model).
pub(super) fn closest(point: &Measured<'_>, reference: &[BenchmarkRun]) -> Option<Closest> {
    let metrics = point.workload.reference_metrics(point.metric);
    let best = reference
        .iter()
        .filter(|r| point.workload.covers(r))
        .filter_map(|run| {
            let value = metrics.iter().find_map(|name| {
                run.metrics
                    .iter()
                    .find(|m| m.name == *name)
                    .map(|m| m.value)
            })?;
            if !(value.is_finite() && value > 0.0) {
                return None;
            }
            let model = match point.workload {
                Workload::Training => model_rank(point.model?, run.setup.model.as_deref()?)?,
                _ => 0,
            };
            Some(Ranked {
                run,
                value,
                model,
                precision: same_rank(point.precision, run.setup.precision.as_deref(), |a, b| {
                    precision_key(a) == precision_key(b)
                }),
                gpus: distance(f64::from(point.gpus), run.setup.gpus as f64),
                batch: match (point.batch_size_per_gpu, run.setup.batch_size_per_gpu) {
                    (Some(a), Some(b)) => distance(f64::from(a), b as f64),
                    _ => f64::MAX,
                },
                gpu_model: same_rank(point.gpu_model, run.setup.gpu_model.as_deref(), |a, b| {
                    gpu_family(a) == gpu_family(b)
                }),
            })
        })
        .min_by(Ranked::rank)?;
    let setup = &best.run.setup;
    let ref_gpus = u32::try_from(setup.gpus).unwrap_or(0);
    let per_gpu = point.workload == Workload::Training
        && point.gpus > 0
        && ref_gpus > 0
        && ref_gpus != point.gpus;
    let compared_value = if per_gpu {
        best.value / f64::from(ref_gpus) * f64::from(point.gpus)
    } else {
        best.value
    };
    Some(Closest {
        source: best.run.source.clone(),
        suite: setup.suite.clone(),
        model: setup.model.clone(),
        precision: setup.precision.clone(),
        gpus: setup.gpus,
        batch_size_per_gpu: setup.batch_size_per_gpu,
        gpu_model: setup.gpu_model.clone(),
        storage: setup.storage.clone(),
        value: best.value,
        compared_value,
        ratio: point.value / compared_value,
        per_gpu,
        why: why(point, &best, per_gpu),
    })
}

/// Why `best` is the closest, in words.
fn why(point: &Measured<'_>, best: &Ranked<'_>, per_gpu: bool) -> String {
    let setup = &best.run.setup;
    let mut parts = Vec::new();
    if point.workload == Workload::Training {
        let model = match (best.model, setup.model.as_deref()) {
            (0, _) | (_, None) => "same model".to_string(),
            (_, Some(m)) => format!("{m} for {}", point.model.unwrap_or("the model")),
        };
        match (best.precision, point.precision, setup.precision.as_deref()) {
            (0, _, _) => parts.push(format!("{model} and precision")),
            (2, Some(a), Some(b)) => parts.push(format!("{model}, {a} against {b}")),
            _ => parts.push(format!("{model}, precision not known")),
        }
    } else if let Some(storage) = &setup.storage {
        parts.push(format!("{} on {storage}", setup.suite));
    }
    let mut gpus = format!(
        "{} {} against {}",
        point.gpus,
        plural(point.gpus),
        setup.gpus
    );
    if per_gpu {
        gpus.push_str(", compared per GPU");
    } else if point.workload != Workload::Training && i64::from(point.gpus) != setup.gpus {
        gpus.push_str(", totals compared");
    }
    parts.push(gpus);
    if let (Some(a), Some(b)) = (point.batch_size_per_gpu, setup.batch_size_per_gpu) {
        parts.push(if i64::from(a) == b {
            format!("same batch per GPU ({a})")
        } else {
            format!("batch {a} against {b} per GPU")
        });
    }
    if let (Some(a), Some(b)) = (point.gpu_model, setup.gpu_model.as_deref()) {
        let (a, b) = (gpu_family(a), gpu_family(b));
        parts.push(if a == b {
            format!("same GPU ({a})")
        } else {
            format!("{a} against {b}")
        });
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmarks::reference::parse_runs;

    fn shipped() -> Vec<BenchmarkRun> {
        parse_runs(include_str!("../../../reference/benchmarks.csv")).expect("reference")
    }

    fn training(gpus: u32, batch: u32, precision: &'static str, value: f64) -> Measured<'static> {
        Measured {
            workload: Workload::Training,
            metric: names::IMAGES_PER_SEC,
            value,
            gpus,
            model: Some("resnet50"),
            precision: Some(precision),
            batch_size_per_gpu: Some(batch),
            gpu_model: Some("NVIDIA H100 80GB HBM3"),
        }
    }

    #[test]
    fn resnet50_on_one_gpu_is_compared_with_the_published_one_gpu_run() {
        let c = closest(&training(1, 64, "fp16", 1602.0), &shipped()).expect("closest");
        // ResNet-50 fp16 on 1 GPU: batch 256 (801 images/s) is nearer 64 than 512.
        assert_eq!(
            (
                c.source.as_str(),
                c.model.as_deref(),
                c.gpus,
                c.batch_size_per_gpu
            ),
            ("isilon-dss8440-2019", Some("ResNet-50"), 1, Some(256))
        );
        assert_eq!(c.value, 801.0);
        assert!((c.ratio - 2.0).abs() < 1e-9);
        assert!(!c.per_gpu);
        assert_eq!(
            c.why,
            "same model and precision, 1 GPU against 1, batch 64 against 256 per GPU, H100 against V100"
        );
    }

    #[test]
    fn other_gpu_counts_are_compared_per_gpu() {
        // 2 GPUs: 1 is as near as 4 (a factor of 2 either way), and both have a
        // batch of 256 per GPU: the first of equals is kept.
        let c = closest(&training(2, 256, "fp32", 1000.0), &shipped()).expect("closest");
        assert!(c.per_gpu, "{c:?}");
        assert!(c.why.contains("fp32 against fp16"), "{}", c.why);
        assert!(c.why.contains("2 GPUs against"), "{}", c.why);
        assert!(c.why.contains("compared per GPU"), "{}", c.why);
        let per_gpu_ref = c.value / c.gpus as f64;
        assert!((c.ratio - 500.0 / per_gpu_ref).abs() < 1e-9);
        assert!((c.compared_value - per_gpu_ref * 2.0).abs() < 1e-9);
    }

    #[test]
    fn models_must_match_for_training_and_variants_come_after() {
        let mut m = training(8, 256, "fp16", 6000.0);
        m.model = Some("bert-large");
        assert_eq!(closest(&m, &shipped()), None);
        m.model = None;
        assert_eq!(closest(&m, &shipped()), None);
        let mut runs = shipped();
        runs.retain(|r| r.setup.model.as_deref() != Some("ResNet-50"));
        let variant = closest(&training(8, 256, "fp16", 6000.0), &runs).expect("variant");
        assert_eq!(variant.model.as_deref(), Some("ResNet-50 v1.5"));
        assert!(
            variant
                .why
                .starts_with("ResNet-50 v1.5 for resnet50 and precision"),
            "{}",
            variant.why
        );
    }

    #[test]
    fn storage_compares_with_fio_runs_only() {
        let m = Measured {
            workload: Workload::Storage,
            metric: names::READ_MB_PER_S,
            value: 2479.5,
            gpus: 0,
            model: None,
            precision: None,
            batch_size_per_gpu: None,
            gpu_model: None,
        };
        let c = closest(&m, &shipped()).expect("fio");
        assert_eq!((c.suite.as_str(), c.gpus, c.value), ("fio", 8, 4959.0));
        assert!((c.ratio - 0.5).abs() < 1e-9);
        assert!(!c.per_gpu);
        assert!(c.why.contains("totals compared"), "{}", c.why);
        let nccl = Measured {
            workload: Workload::Interconnect,
            metric: names::BUS_GB_PER_S,
            ..m
        };
        assert_eq!(closest(&nccl, &shipped()), None, "nothing published");
    }

    #[test]
    fn gpu_families() {
        assert_eq!(gpu_family("NVIDIA H100 80GB HBM3"), "H100");
        assert_eq!(gpu_family("V100-PCIE-32GB"), "V100");
        assert_eq!(gpu_family("V100-SXM2-16GB"), "V100");
        assert_eq!(gpu_family("NVIDIA A100-SXM4-80GB"), "A100");
        assert_eq!(gpu_family("NVIDIA L40S"), "L40S");
        assert_eq!(gpu_family("Tesla T4"), "T4");
        assert_eq!(gpu_family("cpu"), "cpu");
        assert_eq!(precision_key("AMP"), precision_key("fp16"));
        assert_ne!(precision_key("fp32"), precision_key("fp16"));
    }
}
