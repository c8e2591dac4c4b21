//! TensorFlow's tf_cnn_benchmarks: the header it prints before training
//!
//! ```text
//! TensorFlow:  1.14
//! Model:       resnet50
//! Dataset:     imagenet (synthetic)
//! Batch size:  256 global
//!              64 per device
//! Devices:     ['/gpu:0', '/gpu:1', '/gpu:2', '/gpu:3']
//! ```
//!
//! and the `total images/sec: 1658.47` line it prints at the end. The last total
//! counts (a script may run several models; under Horovod every rank prints one).

use super::text::{self, count, field, leading_number, number};
use super::{names, set_metric, NoOutcome, Outcome};

pub const TOTAL: &str = "total images/sec:";

pub fn parse(output: &str) -> Result<Outcome, NoOutcome> {
    let mut outcome = Outcome {
        framework: Some("TensorFlow".into()),
        ..Outcome::default()
    };
    let mut total = None;
    let mut total_unreadable = false;
    let mut batch_line = false;
    for line in text::lines(output) {
        let after_batch_line = std::mem::take(&mut batch_line);
        if let Some(rest) = field(line, TOTAL) {
            match leading_number(rest) {
                Some(value) if value >= 0.0 => total = Some(value),
                _ => total_unreadable = true,
            }
        } else if let Some(version) = field(line, "TensorFlow:") {
            outcome.framework = Some(format!("TensorFlow {version}"));
        } else if let Some(model) = field(line, "Model:") {
            outcome.model = Some(model.to_owned());
        } else if let Some(dataset) = field(line, "Dataset:") {
            outcome.dataset = Some(dataset.to_owned());
        } else if let Some(batch) = field(line, "Batch size:") {
            // `256 global` with `64 per device` on this line or the next.
            match batch.split_once('/') {
                Some((_, per_device)) => outcome.batch_size_per_gpu = per_device_batch(per_device),
                None => batch_line = true,
            }
        } else if after_batch_line && line.trim_end().ends_with("per device") {
            outcome.batch_size_per_gpu = per_device_batch(line);
        } else if let Some(devices) = field(line, "Devices:") {
            let gpus = devices.matches("gpu:").count();
            outcome.gpus = u32::try_from(gpus).ok().filter(|&n| n > 0);
        } else if let Some(gpus) = field(line, "Num GPUs:") {
            outcome.gpus = number(gpus).and_then(count);
        } else if let Some(precision) = field(line, "Precision:") {
            outcome.precision = Some(precision.to_ascii_lowercase());
        } else if uses_fp16(line) {
            outcome.precision = Some("fp16".into());
        }
    }
    let Some(total) = total else {
        return Err(NoOutcome::new(if total_unreadable {
            format!("the `{TOTAL}` line holds no number")
        } else {
            format!("no `{TOTAL}` line in the output (the benchmark did not finish)")
        }));
    };
    set_metric(
        &mut outcome.metrics,
        names::IMAGES_PER_SEC,
        total,
        "images/s",
    );
    Ok(outcome)
}

/// `64 per device` (or `64.0 per device`) as a count.
fn per_device_batch(text: &str) -> Option<u32> {
    leading_number(text).and_then(count)
}

/// Whether `line` is a command line (echoed by the job script) that asks for fp16.
fn uses_fp16(line: &str) -> bool {
    line.split_whitespace().any(|word| {
        let word = word.trim_start_matches('-');
        word == "use_fp16" || word.eq_ignore_ascii_case("use_fp16=true")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_gpu_run() {
        let outcome = parse(include_str!("testdata/tf_cnn_benchmarks-resnet50-1gpu.txt"))
            .expect("an outcome");
        assert_eq!(outcome.metrics.len(), 1);
        assert_eq!(outcome.metrics[0].name, "images_per_sec");
        assert_eq!(outcome.metrics[0].value, 180.26);
        assert_eq!(outcome.metrics[0].unit, "images/s");
        assert_eq!(outcome.model.as_deref(), Some("resnet50"));
        assert_eq!(outcome.framework.as_deref(), Some("TensorFlow 1.14"));
        assert_eq!(outcome.dataset.as_deref(), Some("imagenet (synthetic)"));
        assert_eq!(outcome.batch_size_per_gpu, Some(32));
        assert_eq!(outcome.gpus, Some(1));
        assert_eq!(outcome.precision, None);
    }

    #[test]
    fn a_run_cut_short_says_so() {
        let err = parse(include_str!(
            "testdata/tf_cnn_benchmarks-resnet101-horovod.txt"
        ))
        .expect_err("no total");
        assert_eq!(
            err.reason(),
            "no `total images/sec:` line in the output (the benchmark did not finish)"
        );
    }

    #[test]
    fn header_variants_and_the_last_total() {
        let output = "python tf_cnn_benchmarks.py --num_gpus=4 --batch_size=64 --model=resnet50 --use_fp16\n\
                      Model:       resnet50\n\
                      Batch size:  256 global / 64.0 per device\n\
                      Num GPUs: 4\n\
                      INFO|2024-12-07T13:55:32|/opt/launcher.py|27| total images/sec: 1641.12\n\
                      INFO|2024-12-07T13:55:32|/opt/launcher.py|27| total images/sec: 1658.47\n";
        let outcome = parse(output).expect("an outcome");
        assert_eq!(outcome.metrics[0].value, 1658.47);
        assert_eq!(outcome.batch_size_per_gpu, Some(64));
        assert_eq!(outcome.gpus, Some(4));
        assert_eq!(outcome.precision.as_deref(), Some("fp16"));
        assert_eq!(outcome.framework.as_deref(), Some("TensorFlow"));
    }

    #[test]
    fn cpu_devices_and_bad_totals() {
        let outcome =
            parse("Devices:     ['/cpu:0']\ntotal images/sec: 5.26\n").expect("an outcome");
        assert_eq!(outcome.gpus, None);
        let err = parse("total images/sec: lots\n").expect_err("no number");
        assert_eq!(err.reason(), "the `total images/sec:` line holds no number");
        assert!(!uses_fp16("--use_fp16=False"));
    }
}
