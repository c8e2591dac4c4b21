//! Benchmark outcomes: what a benchmark run measured, parsed from a job's output or
//! posted through the API, kept beside the published reference results, and turned
//! into sizing advice; campaigns of runs planned from a template and a matrix, and
//! their reports (`campaign`).
//! Owns: the vocabulary of runs (suites, metrics and their units). Must not touch:
//! HTTP, or how jobs run.

pub mod campaign;
pub mod chart;
pub mod parse;
pub mod recorder;
pub mod reference;
pub mod run;
pub mod sizing;

use serde::{Deserialize, Serialize};

pub use crate::domain::benchmark::{is_metric_name, names, Metric, RunSetup, Suite};

/// What a parser read from a run's output: the metrics, and what the output says of
/// the run (model, batch size …) where it says it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub metrics: Vec<Metric>,
    pub model: Option<String>,
    pub framework: Option<String>,
    pub precision: Option<String>,
    pub batch_size_per_gpu: Option<u32>,
    pub gpus: Option<u32>,
    pub dataset: Option<String>,
}

impl Outcome {
    /// The metric called `name`, where the run measured it.
    pub fn metric(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_and_metric_names() {
        for s in Suite::ALL {
            assert_eq!(Suite::parse(s.name()), Some(s));
        }
        assert_eq!(Suite::parse("nccl-tests"), Some(Suite::NcclTests));
        assert_eq!(Suite::parse("hpl"), None);
        assert!(is_metric_name("images_per_sec"));
        assert!(!is_metric_name("Images"));
        assert!(!is_metric_name("9lives"));
        assert!(!is_metric_name(""));
    }
}
