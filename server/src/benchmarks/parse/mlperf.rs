//! MLPerf logs: one JSON event after each `:::MLLOG` marker,
//!
//! ```text
//! :::MLLOG {"namespace": "", "time_ms": 1652231815449, "event_type": "INTERVAL_START", "key": "run_start", "value": null, "metadata": {…}}
//! ```
//!
//! Training logs give the benchmark (`submission_benchmark`), the batch sizes, the
//! throughput of each epoch (`throughput`), the accuracy at each evaluation
//! (`eval_accuracy`) and the run's start and stop (`run_start`, `run_stop` with its
//! `status`); inference logs (LoadGen's detail log) give the samples per second of
//! the scenario that ran. Lines whose JSON does not parse are skipped.

use serde::Deserialize;
use serde_json::Value;

use super::text::{self, count};
use super::{set_metric, throughput_metric, NoOutcome, Outcome};

pub const MARKER: &str = ":::MLLOG";

/// The longest event read; longer lines are skipped.
const MAX_EVENT_BYTES: usize = 64 << 10;

#[derive(Deserialize)]
struct Event {
    key: String,
    #[serde(default)]
    value: Value,
    #[serde(default)]
    time_ms: Option<f64>,
    #[serde(default)]
    metadata: Value,
}

/// What the events of one run said.
#[derive(Default)]
struct Run {
    benchmark: Option<String>,
    global_batch: Option<f64>,
    local_batch: Option<f64>,
    run_start_ms: Option<f64>,
    run_stop_ms: Option<f64>,
    status: Option<String>,
    /// The sum and number of the `throughput` events (samples/s of each epoch).
    throughput: (f64, u32),
    /// Samples per second LoadGen measured (Offline or Server scenario).
    inference_samples_per_sec: Option<f64>,
    eval_accuracy: Option<f64>,
    /// Samples trained, as `run_stop` or a later `train_samples` reports them.
    samples_trained: Option<f64>,
}

pub fn parse(output: &str) -> Result<Outcome, NoOutcome> {
    let mut run = Run::default();
    let (mut marked, mut read) = (0usize, 0usize);
    for line in text::lines(output) {
        let Some(at) = line.find(MARKER) else {
            continue;
        };
        marked += 1;
        let json = line[at + MARKER.len()..].trim();
        if json.len() > MAX_EVENT_BYTES {
            continue;
        }
        if let Ok(event) = serde_json::from_str::<Event>(json) {
            read += 1;
            run.take(event);
        }
    }
    if marked == 0 {
        return Err(NoOutcome::new(format!("no `{MARKER}` line in the output")));
    }
    if read == 0 {
        return Err(NoOutcome::new(format!(
            "none of the {marked} `{MARKER}` lines holds a readable JSON event"
        )));
    }
    run.outcome()
}

impl Run {
    fn take(&mut self, event: Event) {
        let number = event.value.as_f64().filter(|v| v.is_finite());
        match event.key.as_str() {
            "submission_benchmark" => self.benchmark = event.value.as_str().map(str::to_owned),
            "global_batch_size" => self.global_batch = number,
            "local_batch_size" | "d_batch_size" => self.local_batch = number,
            "run_start" => {
                // Every rank may log it: the first one starts the run.
                self.run_start_ms = self.run_start_ms.or(event.time_ms);
            }
            "run_stop" => {
                self.run_stop_ms = event.time_ms;
                self.status = event.metadata["status"].as_str().map(str::to_owned);
                if let Some(samples) = event.metadata["samples_count"].as_f64() {
                    self.samples_trained = Some(samples);
                }
            }
            "train_samples" => {
                // Logged at run_start it counts the data set; logged later, the
                // samples the run trained on.
                if let (Some(samples), Some(start), Some(at)) =
                    (number, self.run_start_ms, event.time_ms)
                {
                    if at > start {
                        self.samples_trained = Some(samples);
                    }
                }
            }
            "throughput" => {
                if let Some(value) = number.filter(|v| *v >= 0.0) {
                    self.throughput.0 += value;
                    self.throughput.1 += 1;
                }
            }
            "result_samples_per_second" | "result_completed_samples_per_sec" => {
                self.inference_samples_per_sec = number.or(self.inference_samples_per_sec)
            }
            "eval_accuracy" => self.eval_accuracy = number.or(self.eval_accuracy),
            _ => {}
        }
    }

    fn run_seconds(&self) -> Option<f64> {
        let seconds = (self.run_stop_ms? - self.run_start_ms?) / 1000.0;
        (seconds > 0.0).then_some(seconds)
    }

    fn outcome(self) -> Result<Outcome, NoOutcome> {
        let mut outcome = Outcome {
            model: self.benchmark.clone(),
            batch_size_per_gpu: self.local_batch.and_then(count),
            ..Outcome::default()
        };
        if let (Some(global), Some(local)) = (self.global_batch, self.local_batch) {
            if local > 0.0 {
                outcome.gpus = count(global / local);
            }
        }
        let succeeded = self.status.as_deref().is_none_or(|s| s == "success");
        let throughput = if self.throughput.1 > 0 {
            Some(self.throughput.0 / f64::from(self.throughput.1))
        } else if let (Some(samples), Some(seconds)) = (self.samples_trained, self.run_seconds()) {
            Some(samples / seconds)
        } else {
            self.inference_samples_per_sec
        };
        let metrics = &mut outcome.metrics;
        if let Some(throughput) = throughput {
            let images = self.benchmark.as_deref().is_some_and(counts_images);
            throughput_metric(
                metrics,
                throughput,
                Some(if images { "images/s" } else { "" }),
            );
        }
        if let Some(seconds) = self.run_seconds().filter(|_| succeeded) {
            set_metric(metrics, "run_time_s", seconds, "s");
        }
        if let Some(accuracy) = self.eval_accuracy {
            set_metric(metrics, "eval_accuracy", accuracy, "");
        }
        if let Some(global) = self.global_batch {
            set_metric(metrics, "global_batch_size", global, "samples");
        }
        let measured = metrics.iter().any(|m| m.name != "global_batch_size");
        if measured {
            return Ok(outcome);
        }
        Err(NoOutcome::new(match self.status {
            Some(status) if !succeeded => format!(
                "the MLPerf run stopped with status `{status}` before it logged a throughput"
            ),
            _ => {
                "the MLPerf log has no throughput, no run_start and run_stop, and no eval_accuracy"
                    .to_owned()
            }
        }))
    }
}

/// Whether an MLPerf benchmark's samples are images (`resnet`, `ssd`, …), so that
/// its throughput compares with images/s of other suites.
fn counts_images(benchmark: &str) -> bool {
    let benchmark = benchmark.to_ascii_lowercase();
    ["resnet", "ssd", "retinanet", "maskrcnn", "mask_rcnn"]
        .iter()
        .any(|name| benchmark.starts_with(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::benchmarks::names;

    #[test]
    fn resnet_training_log() {
        let outcome =
            parse(include_str!("testdata/mlperf-resnet-excerpt.txt")).expect("an outcome");
        assert_eq!(outcome.model.as_deref(), Some("resnet"));
        assert_eq!(outcome.batch_size_per_gpu, Some(408));
        assert_eq!(outcome.gpus, Some(8));
        let (images, unit) = outcome.figure(names::IMAGES_PER_SEC).expect("images/s");
        // The mean of the six epochs' `throughput` events in the excerpt.
        assert!((images - 23913.270619627012).abs() < 1e-6);
        assert_eq!(unit, "images/s");
        assert_eq!(outcome.value("run_time_s"), Some(1827.116));
        assert_eq!(outcome.value("eval_accuracy"), Some(0.75952));
        assert_eq!(outcome.value("global_batch_size"), Some(3264.0));
    }

    #[test]
    fn samples_per_second_from_the_samples_trained() {
        let output = r#":::MLLOG {"namespace": "", "time_ms": 1778651800896, "event_type": "POINT_IN_TIME", "key": "submission_benchmark", "value": "llama31_8b", "metadata": {"file": "/opt/venv/lib/python3.12/site-packages/primus_mllog/mlperf_pre_training.py", "lineno": 66}}
:::MLLOG {"namespace": "", "time_ms": 1778651870949, "event_type": "INTERVAL_START", "key": "run_start", "value": null, "metadata": {"file": "/opt/venv/lib/python3.12/site-packages/primus_mllog/mlperf_pre_training.py", "lineno": 193}}
:::MLLOG {"namespace": "", "time_ms": 1778657049081, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", "value": 3.2914416790008545, "metadata": {"file": "/opt/venv/lib/python3.12/site-packages/primus_mllog/mlperf_pre_training.py", "lineno": 156, "samples_count": 184320}}
:::MLLOG {"namespace": "", "time_ms": 1778657049089, "event_type": "INTERVAL_END", "key": "run_stop", "value": null, "metadata": {"file": "/opt/venv/lib/python3.12/site-packages/primus_mllog/mlperf_pre_training.py", "lineno": 224, "samples_count": 184320, "status": "success"}}
"#;
        let outcome = parse(output).expect("an outcome");
        let (samples, unit) = outcome.figure(names::SAMPLES_PER_SEC).expect("samples/s");
        assert!((samples - 35.595793084003134).abs() < 1e-9);
        assert_eq!(unit, "samples/s");
        assert_eq!(outcome.value("run_time_s"), Some(5178.14));
        assert_eq!(outcome.model.as_deref(), Some("llama31_8b"));
    }

    #[test]
    fn an_aborted_run_has_no_time_to_train() {
        let output = "0: :::MLLOG {\"time_ms\": 1000, \"key\": \"run_start\", \"value\": null}\n\
                      0: :::MLLOG {\"time_ms\": 5000, \"key\": \"run_stop\", \"value\": null, \"metadata\": {\"status\": \"aborted\"}}\n";
        let err = parse(output).expect_err("nothing measured");
        assert_eq!(
            err.reason(),
            "the MLPerf run stopped with status `aborted` before it logged a throughput"
        );
        let with_accuracy = format!(
            "{output}:::MLLOG {{\"time_ms\": 4000, \"key\": \"eval_accuracy\", \"value\": 0.5}}\n"
        );
        let outcome = parse(&with_accuracy).expect("an outcome");
        assert_eq!(outcome.value("run_time_s"), None);
        assert_eq!(outcome.value("eval_accuracy"), Some(0.5));
    }

    #[test]
    fn inference_detail_log() {
        let output = ":::MLLOG {\"key\": \"effective_scenario\", \"value\": \"Offline\", \"time_ms\": 0.009, \"namespace\": \"mlperf::logging\", \"event_type\": \"POINT_IN_TIME\", \"metadata\": {\"is_error\": false, \"is_warning\": false, \"file\": \"test_settings_internal.cc\", \"line_no\": 265, \"pid\": 1, \"tid\": 1}}\n\
                      :::MLLOG {\"key\": \"result_validity\", \"value\": \"VALID\", \"time_ms\": 600000.1}\n\
                      :::MLLOG {\"key\": \"result_samples_per_second\", \"value\": 25405.6, \"time_ms\": 600000.2}\n";
        let outcome = parse(output).expect("an outcome");
        assert_eq!(outcome.value(names::SAMPLES_PER_SEC), Some(25405.6));
    }

    #[test]
    fn invalid_json_is_skipped_and_said() {
        let err = parse(":::MLLOG {\"key\": \"run_start\"\n:::MLLOG not json\n")
            .expect_err("none readable");
        assert_eq!(
            err.reason(),
            "none of the 2 `:::MLLOG` lines holds a readable JSON event"
        );
        let err = parse("hello\n").expect_err("no marker");
        assert_eq!(err.reason(), "no `:::MLLOG` line in the output");
        let err =
            parse(":::MLLOG {\"key\": \"seed\", \"value\": 1}\n").expect_err("nothing measured");
        assert!(err.reason().starts_with("the MLPerf log has no throughput"));
        let outcome = parse(
            ":::MLLOG {\"key\": \"eval_accuracy\", \"value\": 0.7}\n:::MLLOG {\"key\": \"eval_accuracy\", \"value\": \"x\"}\n:::MLLOG {broken\n",
        )
        .expect("an outcome");
        assert_eq!(outcome.value("eval_accuracy"), Some(0.7));
    }
}
