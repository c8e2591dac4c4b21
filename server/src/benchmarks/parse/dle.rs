//! NVIDIA DeepLearningExamples and other PyTorch/TensorFlow training scripts that
//! log through DLLogger, in either of its two forms:
//!
//! ```text
//! DLLL {"timestamp": "1570716934.289014", …, "type": "LOG", "step": [], "data": {"train.total_ips": 661.98, …}}
//! DLL 2020-09-15 14:29:18.553769 - Epoch: 0 Iteration: 12  train.loss : 6.67351  train.total_ips : 10393.54 img/s
//! DLL 2021-01-05 10:21:53.954734 - Summary: train.loss : 6.78549  train.compute_ips : 2393.30 img/s …
//! ```
//!
//! and plain summary lines such as `Throughput: 1234.5 img/s` or
//! `throughput_train : 1234.5 images/s`.
//!
//! The throughput recorded is the run's summary (DLLogger's empty step, `Summary:`)
//! when there is one, else the last epoch's, else the median of the iterations (which
//! leaves out the slow warm-up steps). Every number of the summary is kept as a
//! metric of its own (`train.loss` → `train_loss`). The `PARAMETER` step gives the
//! model (`arch`), the batch size per GPU, the GPUs (`world_size`) and the precision.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::text::{self, count, number};
use super::{metric_name, set_metric, text_value, throughput_metric, Metric, NoOutcome, Outcome};

/// The keys that hold training throughput, the preferred first.
const THROUGHPUT_KEYS: [&str; 10] = [
    "train.total_ips",
    "train.compute_ips",
    "total_ips",
    "train.throughput",
    "throughput_train",
    "total_throughput_train",
    "train_throughput",
    "training_sequences_per_second",
    "train_items_per_sec",
    "throughput",
];

/// The most iteration throughputs kept for the median, and the most units kept.
const MAX_ITERATIONS: usize = 100_000;
const MAX_UNITS: usize = 1024;

/// How much of the run a logged value sums up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Iteration,
    Epoch,
    Summary,
}

/// What a DLLogger step is.
enum Step {
    Parameters,
    Values(Level),
    /// Validation iterations and anything else that is not training throughput.
    Other,
}

#[derive(Deserialize)]
struct JsonLine {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    step: Value,
    #[serde(default)]
    data: Value,
    #[serde(default)]
    metric: String,
    #[serde(default)]
    metadata: Value,
}

/// The throughput found so far: its level, how preferred its key is, its values
/// (one, or every iteration's) and its unit.
struct Throughput {
    level: Level,
    rank: usize,
    values: Vec<f64>,
    unit: Option<String>,
}

#[derive(Default)]
struct Reading {
    outcome: Outcome,
    throughput: Option<Throughput>,
    summary: Vec<Metric>,
    /// Units that DLLogger's METADATA lines give per key.
    units: HashMap<String, String>,
    amp: Option<bool>,
    fp16: Option<bool>,
}

pub fn looks_like(output: &str) -> bool {
    text::lines(output).any(|line| {
        let line = line.trim_start();
        line.starts_with("DLLL {")
            || line
                .strip_prefix("DLL ")
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    })
}

pub fn parse(output: &str) -> Result<Outcome, NoOutcome> {
    let mut reading = Reading::default();
    for line in text::lines(output) {
        let line = line.trim_start();
        if let Some(json) = line.strip_prefix("DLLL ") {
            if let Ok(record) = serde_json::from_str::<JsonLine>(json) {
                reading.json_line(record);
            }
        } else if let Some((_, body)) = line.strip_prefix("DLL ").and_then(|l| l.split_once(" - "))
        {
            reading.text_line(step_of_text(body), body);
        } else if line.to_ascii_lowercase().contains("throughput") {
            // A plain summary line: counts as much as an epoch's.
            reading.text_line(Step::Values(Level::Epoch), line);
        }
    }
    reading.finish()
}

impl Reading {
    fn json_line(&mut self, record: JsonLine) {
        if record.kind == "METADATA" {
            if let Some(unit) = record.metadata["unit"].as_str() {
                if self.units.len() < MAX_UNITS {
                    self.units.insert(record.metric, unit.to_owned());
                }
            }
            return;
        }
        let Value::Object(data) = record.data else {
            return;
        };
        match step_of_json(&record.step) {
            Step::Parameters => {
                for (key, value) in &data {
                    match value {
                        Value::String(text) => self.parameter(key, text),
                        Value::Bool(flag) => {
                            self.parameter(key, if *flag { "true" } else { "false" })
                        }
                        Value::Number(n) => self.parameter(key, &n.to_string()),
                        _ => {}
                    }
                }
            }
            Step::Values(level) => {
                for (key, value) in &data {
                    if let Some(value) = value.as_f64() {
                        let unit = self.units.get(key.as_str()).cloned();
                        self.value(level, key, value, unit.as_deref());
                    }
                }
            }
            Step::Other => {}
        }
    }

    fn text_line(&mut self, step: Step, body: &str) {
        for pair in pairs(body) {
            match step {
                Step::Parameters => self.parameter(pair.key, pair.value),
                Step::Values(level) => {
                    if let Some(value) = number(pair.value) {
                        self.value(level, pair.key, value, pair.unit);
                    }
                }
                Step::Other => {}
            }
        }
    }

    fn parameter(&mut self, key: &str, value: &str) {
        let flag = || match value.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        };
        match key {
            "arch" | "model" | "model_name" => self.outcome.model = text_value(value),
            "batch_size" => self.outcome.batch_size_per_gpu = number(value).and_then(count),
            "world_size" | "num_gpus" | "gpus" => self.outcome.gpus = number(value).and_then(count),
            "dataset" => self.outcome.dataset = text_value(value),
            "precision" => self.outcome.precision = text_value(&value.to_ascii_lowercase()),
            "amp" => self.amp = flag(),
            "fp16" => self.fp16 = flag(),
            _ => {}
        }
    }

    fn value(&mut self, level: Level, key: &str, value: f64, unit: Option<&str>) {
        if level == Level::Summary {
            if let Some(name) = metric_name(key, 64) {
                set_metric(&mut self.summary, &name, value, unit.unwrap_or(""));
            }
        }
        let lower = key.to_ascii_lowercase();
        let Some(rank) = THROUGHPUT_KEYS.iter().position(|k| *k == lower) else {
            return;
        };
        if value < 0.0 {
            return;
        }
        let unit = unit.map(str::to_owned).or_else(|| {
            (lower.ends_with("_ips") || lower.ends_with(".ips")).then(|| "img/s".to_owned())
        });
        match &mut self.throughput {
            Some(best) if best.level == level && best.rank == rank => {
                if level != Level::Iteration {
                    best.values.clear();
                }
                if best.values.len() < MAX_ITERATIONS {
                    best.values.push(value);
                }
                best.unit = unit;
            }
            Some(best)
                if (best.level, std::cmp::Reverse(best.rank))
                    > (level, std::cmp::Reverse(rank)) => {}
            _ => {
                self.throughput = Some(Throughput {
                    level,
                    rank,
                    values: vec![value],
                    unit,
                })
            }
        }
    }

    fn finish(self) -> Result<Outcome, NoOutcome> {
        let Some(throughput) = self.throughput else {
            return Err(NoOutcome::new(
                "no throughput in the output (no DLLogger `train.total_ips` or `throughput_train`, no `Throughput:` line)",
            ));
        };
        let mut outcome = self.outcome;
        if outcome.precision.is_none() {
            outcome.precision = match (self.amp, self.fp16) {
                (Some(true), _) => Some("amp".into()),
                (_, Some(true)) => Some("fp16".into()),
                _ => None,
            };
        }
        let value = if throughput.level == Level::Iteration {
            median(throughput.values)
        } else {
            throughput.values.last().copied()
        };
        if let Some(value) = value {
            throughput_metric(&mut outcome.metrics, value, throughput.unit.as_deref());
        }
        for metric in self.summary {
            set_metric(
                &mut outcome.metrics,
                &metric.name,
                metric.value,
                &metric.unit,
            );
        }
        Ok(outcome)
    }
}

/// The step of a DLLL line: `"PARAMETER"`, `[]` (the run), `[epoch]`, `[epoch,
/// iteration]`, `[epoch, iteration, validation iteration]`.
fn step_of_json(step: &Value) -> Step {
    match step {
        Value::String(name) if name == "PARAMETER" => Step::Parameters,
        Value::Array(parts) => match parts.len() {
            0 => Step::Values(Level::Summary),
            1 => Step::Values(Level::Epoch),
            2 => Step::Values(Level::Iteration),
            _ => Step::Other,
        },
        _ => Step::Other,
    }
}

/// The step of a DLL line from the text after ` - `: `PARAMETER`, `Summary:`,
/// `Epoch: 0 Iteration: 12`, `Epoch: 0`, `Iteration: 41`, `(0, 5)`, `()`, or none
/// (the script's final line).
fn step_of_text(body: &str) -> Step {
    let body = body.trim_start();
    if body.starts_with("PARAMETER") {
        Step::Parameters
    } else if body.contains("Summary:") {
        Step::Values(Level::Summary)
    } else if body.contains("Validation") {
        Step::Other
    } else if body.contains("Iteration:") {
        Step::Values(Level::Iteration)
    } else if body.contains("Epoch:") {
        Step::Values(Level::Epoch)
    } else if let Some(tuple) = body.strip_prefix('(') {
        let inside = tuple.split(')').next().unwrap_or("");
        match inside
            .split(',')
            .filter(|part| !part.trim().is_empty())
            .count()
        {
            0 => Step::Values(Level::Summary),
            1 => Step::Values(Level::Epoch),
            2 => Step::Values(Level::Iteration),
            _ => Step::Other,
        }
    } else {
        Step::Values(Level::Summary)
    }
}

/// One `key : value unit` of a DLLogger line.
struct Pair<'a> {
    key: &'a str,
    value: &'a str,
    unit: Option<&'a str>,
}

/// The most words of one line read for pairs.
const MAX_WORDS: usize = 4096;

/// The `key : value [unit]` pairs of a DLLogger line (also `Key: value unit`); a key
/// with no value before the next key has the value `""`.
fn pairs(body: &str) -> Vec<Pair<'_>> {
    let words: Vec<&str> = body.split_whitespace().take(MAX_WORDS).collect();
    // Where a key starts, and where its value is.
    let key_at = |i: usize| -> Option<(&str, usize)> {
        let word = *words.get(i)?;
        if words.get(i + 1) == Some(&":") && word != ":" {
            Some((word, i + 2))
        } else {
            let key = word.strip_suffix(':')?;
            (!key.is_empty()).then_some((key, i + 1))
        }
    };
    let starts_pair = |i: usize| key_at(i).is_some() || words.get(i) == Some(&":");
    let mut pairs = Vec::new();
    for i in 0..words.len() {
        let Some((key, at)) = key_at(i) else {
            continue;
        };
        let (value, unit) = match words.get(at) {
            Some(value) if !starts_pair(at) => {
                let unit = words.get(at + 1).filter(|_| !starts_pair(at + 1)).copied();
                (*value, unit)
            }
            _ => ("", None),
        };
        pairs.push(Pair { key, value, unit });
    }
    pairs
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => values.get(mid).copied(),
        _ => Some((values.get(mid - 1)? + values.get(mid)?) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmarks::names;

    #[test]
    fn dllogger_json_summary() {
        let outcome =
            parse(include_str!("testdata/dle-resnet50-dllogger.json")).expect("an outcome");
        assert_eq!(
            outcome.figure(names::IMAGES_PER_SEC),
            Some((661.9801574510492, "images/s"))
        );
        assert_eq!(
            outcome.figure("train_compute_ips"),
            Some((663.9765207522363, "img/s"))
        );
        assert_eq!(outcome.figure("val_top5"), Some((0.28125, "%")));
        assert_eq!(outcome.model.as_deref(), Some("resnet50"));
        assert_eq!(outcome.batch_size_per_gpu, Some(128));
        assert_eq!(outcome.gpus, Some(1));
        assert_eq!(outcome.precision.as_deref(), Some("amp"));
    }

    #[test]
    fn dllogger_stdout_iterations_take_the_median() {
        let outcome =
            parse(include_str!("testdata/dle-resnet50-4x8gpu-stdout.txt")).expect("an outcome");
        let images = outcome.value(names::IMAGES_PER_SEC).expect("measured");
        // The 12 iterations' median: (10044.52 + 10131.38) / 2.
        assert!((images - 10087.95).abs() < 1e-9);
        assert_eq!(outcome.model.as_deref(), Some("resnet50"));
        assert_eq!(outcome.batch_size_per_gpu, Some(128));
        assert_eq!(outcome.gpus, Some(32));
        assert_eq!(outcome.precision, None);
        // No summary: only the throughput is recorded.
        assert_eq!(outcome.metrics.len(), 1);
    }

    #[test]
    fn stdout_summary_beats_later_iterations_and_keeps_every_number() {
        let output = "DLL 2019-10-10 14:15:34.053365 - Epoch: 1  train.loss : 7.09438  train.total_ips : 675.03 img/s\n\
                      DLL 2019-10-10 14:15:34.289014 - Summary: train.loss : 8.34141  train.total_ips : 661.98 img/s val.top1 : 0.00 %\n\
                      DLL 2019-10-10 14:15:34.289168 - Summary: lr : 0.10000  train.compute_ips : 663.98 img/s train.data_time : 0.00075 s\n\
                      DLL 2019-10-10 14:15:35.000000 - Epoch: 2 Iteration: 5  train.total_ips : 999.00 img/s\n";
        let outcome = parse(output).expect("an outcome");
        assert_eq!(outcome.value(names::IMAGES_PER_SEC), Some(661.98));
        assert_eq!(outcome.figure("train_loss"), Some((8.34141, "")));
        assert_eq!(outcome.figure("train_data_time"), Some((0.00075, "s")));
        assert_eq!(outcome.value("lr"), Some(0.1));
    }

    #[test]
    fn plain_and_stepless_throughput_lines() {
        let outcome =
            parse("train performance 21.90 fps\nThroughput: 21.897 fps\n").expect("an outcome");
        assert_eq!(outcome.value(names::IMAGES_PER_SEC), Some(21.897));

        let outcome = parse(
            "DLL 2023-09-07 03:06:10.520066 -  throughput_train : 99.048 sequences/s\n\
             DLL 2023-09-07 03:06:10.520158 -  total_loss : 10.3896 \n",
        )
        .expect("an outcome");
        assert_eq!(
            outcome.figure(names::SAMPLES_PER_SEC),
            Some((99.048, "sequences/s"))
        );
        assert_eq!(outcome.value("total_loss"), Some(10.3896));

        let outcome = parse(
            "1: DLL 2022-05-12 14:09:13.825000 - () throughput_train : 37.348  latency_train_mean : 53.551  latency_train_90 : 53.683\n",
        )
        .expect("an outcome");
        assert_eq!(outcome.value(names::SAMPLES_PER_SEC), Some(37.348));
        assert_eq!(outcome.value("latency_train_90"), Some(53.683));

        let outcome = parse(
            "DLLL {\"type\": \"LOG\", \"step\": [], \"data\": {\"train.throughput\": 2345.6}}\n",
        )
        .expect("an outcome");
        assert_eq!(outcome.value(names::SAMPLES_PER_SEC), Some(2345.6));
    }

    #[test]
    fn nothing_found_says_what_was_looked_for() {
        let err =
            parse("DLL 2020-09-15 14:29:13.473765 - Epoch: 0 Iteration: 1  train.loss : 7.09304\n")
                .expect_err("no throughput");
        assert!(err.reason().starts_with("no throughput in the output"));
        assert!(parse("DLLL {broken\nThroughput: none\n").is_err());
    }

    #[test]
    fn pairs_with_empty_values_and_units() {
        let got: Vec<_> = pairs("data : /data/image  pretrained_weights :   fp16 : False  Epoch: 0 Iteration: 1  train.total_ips : 267.44 img/s")
            .into_iter()
            .map(|p| (p.key, p.value, p.unit))
            .collect();
        assert_eq!(
            got,
            [
                ("data", "/data/image", None),
                ("pretrained_weights", "", None),
                ("fp16", "False", None),
                ("Epoch", "0", None),
                ("Iteration", "1", None),
                ("train.total_ips", "267.44", Some("img/s")),
            ]
        );
        assert!(pairs(": : :").is_empty());
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(Vec::new()), None);
    }
}
