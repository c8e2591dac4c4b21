//! The vocabulary of benchmark runs: the suites atrium reads, the metrics they
//! report, and what a run is (its [`RunSetup`]), shared by the submission parser
//! (`#ATRIUM --benchmark`), the store, the benchmark records (`benchmarks`) and the
//! services' view of a run.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The benchmark suites atrium knows how to read.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Suite {
    /// TensorFlow's tf_cnn_benchmarks (`total images/sec:`).
    TfCnnBenchmarks,
    /// NVIDIA DeepLearningExamples (PyTorch or TensorFlow throughput lines).
    DeepLearningExamples,
    /// MLPerf Training or Inference (`:::MLLOG` lines).
    Mlperf,
    /// `fio --output-format=json`.
    Fio,
    /// NVIDIA nccl-tests (`Avg bus bandwidth`).
    NcclTests,
    /// Anything that prints `ATRIUM_METRIC name=value unit=…` lines.
    Custom,
}

impl Suite {
    pub const ALL: [Suite; 6] = [
        Suite::TfCnnBenchmarks,
        Suite::DeepLearningExamples,
        Suite::Mlperf,
        Suite::Fio,
        Suite::NcclTests,
        Suite::Custom,
    ];

    /// The name used in the API, directives and CSV (`tf_cnn_benchmarks`, `fio` …).
    pub fn name(self) -> &'static str {
        match self {
            Suite::TfCnnBenchmarks => "tf_cnn_benchmarks",
            Suite::DeepLearningExamples => "deep_learning_examples",
            Suite::Mlperf => "mlperf",
            Suite::Fio => "fio",
            Suite::NcclTests => "nccl_tests",
            Suite::Custom => "custom",
        }
    }

    /// The suite a name (or a common spelling of it) means.
    pub fn parse(name: &str) -> Option<Suite> {
        let n = name.trim().to_ascii_lowercase().replace('-', "_");
        match n.as_str() {
            "tf_cnn_benchmarks" | "tf_cnn" => Some(Suite::TfCnnBenchmarks),
            "deep_learning_examples" | "deeplearningexamples" | "dle" => {
                Some(Suite::DeepLearningExamples)
            }
            "mlperf" => Some(Suite::Mlperf),
            "fio" => Some(Suite::Fio),
            "nccl_tests" | "nccl" => Some(Suite::NcclTests),
            "custom" => Some(Suite::Custom),
            _ => None,
        }
    }
}

// The stored row (`store::BenchmarkRun`) and the API's and pages' view of a run
// (`services::benchmarks::RunInfo`, its fields inline) both carry one; a run as posted
// (`benchmarks::run::NewRun`, which refuses unknown fields and so keeps its own) is
// checked into one.
/// What a benchmark run is: the suite, what it trained or read, and on what (GPUs,
/// nodes, storage). Text a run does not say is absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, ToSchema)]
pub struct RunSetup {
    /// A suite's name (`tf_cnn_benchmarks`, `fio` …).
    pub suite: String,
    pub model: Option<String>,
    pub framework: Option<String>,
    /// `fp16`, `fp32`, `amp` …
    pub precision: Option<String>,
    pub batch_size_per_gpu: Option<i64>,
    /// 0 for a storage or CPU benchmark.
    pub gpus: i64,
    /// 1 or more.
    pub nodes: i64,
    /// `A100`, `V100-SXM2-16GB` …
    pub gpu_model: Option<String>,
    /// The storage system the data was read from.
    pub storage: Option<String>,
    pub dataset: Option<String>,
}

/// One measured figure: `images_per_sec`, `storage_mb_per_s`, `read_iops`,
/// `bus_gb_per_s`, `gpu_util_percent`, or any other name with its unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Metric {
    /// Lower-case letters, digits and `_`, at most 64 characters.
    pub name: String,
    pub value: f64,
    /// `images/s`, `MB/s` (10^6 bytes), `IOPS`, `GB/s`, `%`, `s` …
    pub unit: String,
}

/// Well-known metric names, so that runs of different suites compare.
pub mod names {
    /// Training or inference throughput, all GPUs together.
    pub const IMAGES_PER_SEC: &str = "images_per_sec";
    /// Throughput of a workload that does not count images (sequences, tokens,
    /// samples), all GPUs together, in the unit its program printed.
    pub const SAMPLES_PER_SEC: &str = "samples_per_sec";
    /// Storage read throughput while the run lasted (MB/s, 10^6 bytes).
    pub const STORAGE_MB_PER_S: &str = "storage_mb_per_s";
    pub const READ_MB_PER_S: &str = "read_mb_per_s";
    pub const WRITE_MB_PER_S: &str = "write_mb_per_s";
    pub const READ_IOPS: &str = "read_iops";
    pub const WRITE_IOPS: &str = "write_iops";
    /// nccl-tests' average bus bandwidth.
    pub const BUS_GB_PER_S: &str = "bus_gb_per_s";
    pub const GPU_UTIL_PERCENT: &str = "gpu_util_percent";
    pub const CPU_UTIL_PERCENT: &str = "cpu_util_percent";
}

/// Whether `name` may name a metric.
pub fn is_metric_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.starts_with(|c: char| c.is_ascii_digit())
}
