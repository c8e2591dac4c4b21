//! Reading what a benchmark run measured from the output of its job: one parser per
//! suite (each in its own file), the `ATRIUM_METRIC` line protocol that any script
//! may print whatever its suite, and a guess at the suite of unnamed output.
//!
//! Job output is untrusted: the parsers read at most the last [`MAX_OUTPUT_BYTES`]
//! and [`MAX_LINES`] of it, never panic, keep at most [`MAX_METRICS`] metrics, and
//! say in one sentence why nothing was recorded when they find nothing ([`NoOutcome`]).
//!
//! Owns: turning output text into an [`Outcome`]. Must not touch: IO (the caller reads
//! the output), the store, HTTP.

mod dle;
mod fio;
mod line_protocol;
mod mlperf;
mod nccl;
mod text;
mod tf_cnn;

use super::{is_metric_name, names, Metric, Outcome, Suite};

pub use line_protocol::default_unit;

/// How much of a job's output is read: its last 16 MiB …
pub const MAX_OUTPUT_BYTES: usize = 16 << 20;
/// … and of those, its last million lines.
pub const MAX_LINES: usize = 1_000_000;
/// The most metrics one outcome keeps.
pub const MAX_METRICS: usize = 256;
/// The longest model, framework, precision or dataset name kept (in characters).
pub const MAX_TEXT_CHARS: usize = 128;

/// Why a job's output recorded no benchmark outcome, in one sentence for the job page
/// (e.g. "no `total images/sec:` line in the output").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoOutcome(String);

impl NoOutcome {
    fn new(reason: impl Into<String>) -> Self {
        NoOutcome(reason.into())
    }

    pub fn reason(&self) -> &str {
        &self.0
    }
}

/// The outcome of a run of `suite`, read from its job output, with whatever the
/// output declares on `ATRIUM_METRIC` and `ATRIUM_RUN` lines laid over it.
///
/// Reading the whole window of a huge output takes a while (seconds in a debug
/// build): call this from a blocking task, not on the async executor.
pub fn parse(suite: Suite, output: &str) -> Result<Outcome, NoOutcome> {
    let output = window(output);
    let declared = line_protocol::read(output);
    let found = match suite {
        Suite::TfCnnBenchmarks => tf_cnn::parse(output),
        Suite::DeepLearningExamples => dle::parse(output),
        Suite::Mlperf => mlperf::parse(output),
        Suite::Fio => fio::parse(output),
        Suite::NcclTests => nccl::parse(output),
        Suite::Custom => Err(declared.no_outcome()),
    };
    let outcome = match found {
        Ok(outcome) => declared.lay_over(outcome),
        Err(_) if declared.has_metrics() => declared.lay_over(Outcome::default()),
        Err(reason) => return Err(reason),
    };
    Ok(tidy(outcome))
}

/// The suite whose output `output` looks like, for a job marked as a benchmark
/// without naming one; `None` when it looks like none of them.
pub fn detect(output: &str) -> Option<Suite> {
    let output = window(output);
    if output.contains(mlperf::MARKER) {
        Some(Suite::Mlperf)
    } else if fio::has_report(output) {
        Some(Suite::Fio)
    } else if output.contains(nccl::AVG_BUS_BANDWIDTH) {
        Some(Suite::NcclTests)
    } else if output.contains(tf_cnn::TOTAL) {
        Some(Suite::TfCnnBenchmarks)
    } else if dle::looks_like(output) {
        Some(Suite::DeepLearningExamples)
    } else if line_protocol::looks_like(output) {
        Some(Suite::Custom)
    } else {
        None
    }
}

/// The part of `output` that is read: its last [`MAX_OUTPUT_BYTES`], and of those its
/// last [`MAX_LINES`] lines.
fn window(output: &str) -> &str {
    let mut start = output.len().saturating_sub(MAX_OUTPUT_BYTES);
    while !output.is_char_boundary(start) {
        start += 1;
    }
    let tail = &output[start..];
    match tail.rmatch_indices('\n').nth(MAX_LINES) {
        Some((newline, _)) => &tail[newline + 1..],
        None => tail,
    }
}

/// Sets metric `name` to `value` in `metrics`, replacing one of the same name. Names
/// outside the metric charset, values that are not finite and metrics past
/// [`MAX_METRICS`] are left out.
fn set_metric(metrics: &mut Vec<Metric>, name: &str, value: f64, unit: &str) {
    if !is_metric_name(name) || !value.is_finite() {
        return;
    }
    let unit: String = unit.trim().chars().take(32).collect();
    if let Some(existing) = metrics.iter_mut().find(|m| m.name == name) {
        existing.value = value;
        existing.unit = unit;
    } else if metrics.len() < MAX_METRICS {
        metrics.push(Metric {
            name: name.to_owned(),
            value,
            unit,
        });
    }
}

/// `raw` (a fio job name, a DLLogger key such as `train.total_ips`) as a metric name:
/// lower case, runs of other characters as one `_`, at most `max_chars` long; `None`
/// when nothing is left.
fn metric_name(raw: &str, max_chars: usize) -> Option<String> {
    let mut name = String::new();
    for c in raw.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            name.push(c);
        } else if !name.is_empty() && !name.ends_with('_') {
            name.push('_');
        }
        if name.len() >= max_chars {
            break;
        }
    }
    let name = name.trim_end_matches('_');
    match name.chars().next() {
        None => None,
        Some(first) if first.is_ascii_digit() => Some(format!("n{name}")),
        Some(_) => Some(name.to_owned()),
    }
}

/// A model, framework, precision or dataset name as kept: trimmed, without control
/// characters, at most [`MAX_TEXT_CHARS`]; `None` when empty.
fn text_value(raw: &str) -> Option<String> {
    let value: String = raw
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_TEXT_CHARS)
        .collect();
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

/// Throughput as images/s when the unit a program printed counts images (`img/s`,
/// `images/sec`, `fps`), else as samples/s in the printed unit (`sequences/s`).
fn throughput_metric(metrics: &mut Vec<Metric>, value: f64, printed_unit: Option<&str>) {
    let unit = printed_unit.map(str::trim).unwrap_or("");
    let lower = unit.to_ascii_lowercase();
    let images = matches!(
        lower.as_str(),
        "img/s" | "imgs/s" | "images/s" | "img/sec" | "images/sec" | "image/s" | "fps" | "ips"
    );
    if images {
        set_metric(metrics, names::IMAGES_PER_SEC, value, "images/s");
    } else if unit.is_empty() {
        set_metric(metrics, names::SAMPLES_PER_SEC, value, "samples/s");
    } else {
        set_metric(metrics, names::SAMPLES_PER_SEC, value, unit);
    }
}

/// The outcome with its names tidied and its metrics bounded.
fn tidy(mut outcome: Outcome) -> Outcome {
    for text in [
        &mut outcome.model,
        &mut outcome.framework,
        &mut outcome.precision,
        &mut outcome.dataset,
    ] {
        *text = text.as_deref().and_then(text_value);
    }
    outcome.metrics.truncate(MAX_METRICS);
    outcome
}

#[cfg(test)]
impl Outcome {
    /// The value of metric `name`, for the tests.
    fn value(&self, name: &str) -> Option<f64> {
        self.metric(name).map(|m| m.value)
    }

    /// The value and unit of metric `name`, for the tests.
    fn figure(&self, name: &str) -> Option<(f64, &str)> {
        self.metric(name).map(|m| (m.value, m.unit.as_str()))
    }
}

#[cfg(test)]
mod tests;
