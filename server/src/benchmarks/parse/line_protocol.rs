//! The line protocol any script can print, in any suite, to record what it measured:
//!
//! ```text
//! ATRIUM_METRIC images_per_sec=1234.5 unit=images/s
//! ATRIUM_METRIC read_mb_per_s=812 write_mb_per_s=95.5 unit=MB/s
//! ATRIUM_RUN model=resnet50 framework=PyTorch precision=amp batch_size=256 gpus=8 dataset="ImageNet 2012"
//! ```
//!
//! A line starts with its marker (after any launcher tag). `unit=` applies to every
//! metric on its line; without it a well-known name gets its usual unit
//! ([`default_unit`]). Values with blanks are written in double quotes. A later line
//! overrides an earlier one, and what the lines declare overrides what a suite's
//! parser read.

use super::text::{self, count, number};
use super::{is_metric_name, names, set_metric, text_value, NoOutcome, Outcome, MAX_METRICS};

pub const METRIC_MARKER: &str = "ATRIUM_METRIC";
pub const RUN_MARKER: &str = "ATRIUM_RUN";

/// The most `key=value` pairs read from one line.
const MAX_PAIRS: usize = 64;

/// What the output declares on `ATRIUM_METRIC` and `ATRIUM_RUN` lines.
#[derive(Debug, Default)]
pub struct Declared {
    run: Outcome,
    /// The first line that declared something unreadable, said as a reason.
    problem: Option<String>,
}

impl Declared {
    pub fn has_metrics(&self) -> bool {
        !self.run.metrics.is_empty()
    }

    /// Why the declarations alone record nothing.
    pub fn no_outcome(&self) -> NoOutcome {
        NoOutcome::new(
            self.problem
                .clone()
                .unwrap_or_else(|| format!("no `{METRIC_MARKER} name=value` line in the output")),
        )
    }

    /// `outcome` with the declared metrics and run fields laid over it.
    pub fn lay_over(self, mut outcome: Outcome) -> Outcome {
        let run = self.run;
        for metric in &run.metrics {
            set_metric(
                &mut outcome.metrics,
                &metric.name,
                metric.value,
                &metric.unit,
            );
        }
        outcome.model = run.model.or(outcome.model);
        outcome.framework = run.framework.or(outcome.framework);
        outcome.precision = run.precision.or(outcome.precision);
        outcome.dataset = run.dataset.or(outcome.dataset);
        outcome.batch_size_per_gpu = run.batch_size_per_gpu.or(outcome.batch_size_per_gpu);
        outcome.gpus = run.gpus.or(outcome.gpus);
        outcome
    }

    fn problem(&mut self, reason: String) {
        self.problem.get_or_insert(reason);
    }
}

/// Whether some line of `output` starts with `ATRIUM_METRIC`.
pub fn looks_like(output: &str) -> bool {
    text::lines(output).any(|line| after_marker(line, METRIC_MARKER).is_some())
}

/// Reads every `ATRIUM_METRIC` and `ATRIUM_RUN` line of `output`.
pub fn read(output: &str) -> Declared {
    let mut declared = Declared::default();
    // Most output has no marker at all: skip the line-by-line walk then.
    if !output.contains(METRIC_MARKER) && !output.contains(RUN_MARKER) {
        return declared;
    }
    for line in text::lines(output) {
        if let Some(rest) = after_marker(line, METRIC_MARKER) {
            read_metrics(rest, &mut declared);
        } else if let Some(rest) = after_marker(line, RUN_MARKER) {
            read_run(rest, &mut declared);
        }
    }
    declared
}

/// The usual unit of a well-known metric name (`images_per_sec` → `images/s`,
/// `…_mb_per_s` → `MB/s`, `…_iops` → `IOPS`).
pub fn default_unit(name: &str) -> Option<&'static str> {
    match name {
        names::IMAGES_PER_SEC => Some("images/s"),
        names::SAMPLES_PER_SEC => Some("samples/s"),
        _ if name.ends_with("_mb_per_s") => Some("MB/s"),
        _ if name.ends_with("_gb_per_s") => Some("GB/s"),
        _ if name.ends_with("_iops") => Some("IOPS"),
        _ if name.ends_with("_percent") => Some("%"),
        _ if name.ends_with("_seconds") || name.ends_with("_time_s") => Some("s"),
        _ => None,
    }
}

fn after_marker<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let rest = line.trim_start().strip_prefix(marker)?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then_some(rest)
}

fn read_metrics(rest: &str, declared: &mut Declared) {
    let pairs = pairs(rest);
    let unit = pairs
        .iter()
        .find(|(key, _)| *key == "unit")
        .map(|(_, unit)| *unit);
    for (key, value) in pairs.into_iter().filter(|(key, _)| *key != "unit") {
        let name = key.to_ascii_lowercase();
        if !is_metric_name(&name) {
            declared.problem(format!(
                "`{METRIC_MARKER}` name `{}` is not a metric name (lower-case letters, digits and `_`, at most 64)",
                shorten(key)
            ));
            continue;
        }
        let Some(value) = number(value) else {
            declared.problem(format!(
                "`{METRIC_MARKER} {name}=…`: `{}` is not a number",
                shorten(value)
            ));
            continue;
        };
        if declared.run.metrics.len() >= MAX_METRICS {
            return;
        }
        let unit = unit.or_else(|| default_unit(&name)).unwrap_or("");
        set_metric(&mut declared.run.metrics, &name, value, unit);
    }
}

fn read_run(rest: &str, declared: &mut Declared) {
    let run = &mut declared.run;
    for (key, value) in pairs(rest) {
        let name = match key {
            "model" => Some(&mut run.model),
            "framework" => Some(&mut run.framework),
            "precision" => Some(&mut run.precision),
            "dataset" => Some(&mut run.dataset),
            _ => None,
        };
        if let (Some(slot), Some(value)) = (name, text_value(value)) {
            *slot = Some(value);
            continue;
        }
        let count_of = match key {
            "batch_size" | "batch_size_per_gpu" => Some(&mut run.batch_size_per_gpu),
            "gpus" => Some(&mut run.gpus),
            _ => None,
        };
        if let (Some(slot), Some(value)) = (count_of, number(value).and_then(count)) {
            *slot = Some(value);
        }
    }
}

/// The `key=value` pairs of `text`, a value in double quotes where it holds blanks;
/// words without `=` are skipped.
fn pairs(text: &str) -> Vec<(&str, &str)> {
    let mut pairs = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() && pairs.len() < MAX_PAIRS {
        let key_end = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = &rest[..key_end];
        rest = &rest[key_end..];
        if let Some(after) = rest.strip_prefix('=') {
            let (value, remaining) = match after.strip_prefix('"') {
                Some(quoted) => match quoted.find('"') {
                    Some(close) => (&quoted[..close], &quoted[close + 1..]),
                    None => (quoted, ""),
                },
                None => {
                    let end = after.find(char::is_whitespace).unwrap_or(after.len());
                    after.split_at(end)
                }
            };
            pairs.push((key, value));
            rest = remaining;
        }
        rest = rest.trim_start();
    }
    pairs
}

/// At most 40 characters of `text`, for quoting it in a reason.
fn shorten(text: &str) -> String {
    text.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_with_and_without_units() {
        let declared = read(
            "warming up\n\
             ATRIUM_METRIC images_per_sec=1234.5 unit=images/s\n\
             ATRIUM_METRIC read_mb_per_s=812 write_mb_per_s=95.5 unit=MB/s\n\
             ATRIUM_METRIC gpu_util_percent=97 bus_gb_per_s=87.1 loss=0.25\n\
             [1,0]<stdout>:ATRIUM_METRIC read_iops=20000\n",
        );
        let outcome = declared.lay_over(Outcome::default());
        assert_eq!(outcome.figure("images_per_sec"), Some((1234.5, "images/s")));
        assert_eq!(outcome.figure("read_mb_per_s"), Some((812.0, "MB/s")));
        assert_eq!(outcome.figure("write_mb_per_s"), Some((95.5, "MB/s")));
        assert_eq!(outcome.figure("gpu_util_percent"), Some((97.0, "%")));
        assert_eq!(outcome.figure("bus_gb_per_s"), Some((87.1, "GB/s")));
        assert_eq!(outcome.figure("loss"), Some((0.25, "")));
        assert_eq!(outcome.figure("read_iops"), Some((20000.0, "IOPS")));
    }

    #[test]
    fn run_fields_with_quotes_and_later_lines_win() {
        let declared = read(
            "ATRIUM_RUN model=resnet50 framework=PyTorch precision=amp batch_size=256 gpus=8 dataset=\"ImageNet 2012\"\n\
             ATRIUM_METRIC images_per_sec=100\n\
             ATRIUM_METRIC images_per_sec=200\n\
             ATRIUM_RUN gpus=4 batch_size=-3 colour=blue\n",
        );
        let outcome = declared.lay_over(Outcome {
            model: Some("parsed".into()),
            ..Outcome::default()
        });
        assert_eq!(outcome.model.as_deref(), Some("resnet50"));
        assert_eq!(outcome.framework.as_deref(), Some("PyTorch"));
        assert_eq!(outcome.precision.as_deref(), Some("amp"));
        assert_eq!(outcome.dataset.as_deref(), Some("ImageNet 2012"));
        assert_eq!(outcome.gpus, Some(4));
        // A value that is no count leaves the one declared before.
        assert_eq!(outcome.batch_size_per_gpu, Some(256));
        assert_eq!(outcome.figure("images_per_sec"), Some((200.0, "images/s")));
    }

    #[test]
    fn unreadable_declarations_say_why() {
        let declared = read("ATRIUM_METRIC Images-Per-Sec=12\n");
        assert!(!declared.has_metrics());
        assert!(declared.no_outcome().reason().contains("`Images-Per-Sec`"));
        let declared = read("ATRIUM_METRIC images_per_sec=fast\n");
        assert!(declared
            .no_outcome()
            .reason()
            .contains("`fast` is not a number"));
        let declared = read("ATRIUM_METRICS images_per_sec=1\nsay ATRIUM_METRIC x=1\n");
        assert_eq!(
            declared.no_outcome().reason(),
            "no `ATRIUM_METRIC name=value` line in the output"
        );
        assert!(!looks_like("ATRIUM_METRICS x=1"));
        assert!(looks_like("  ATRIUM_METRIC x=1"));
    }

    #[test]
    fn pairs_survive_odd_text() {
        assert_eq!(
            pairs("a=1 b c=\"x y\" =2 d="),
            [("a", "1"), ("c", "x y"), ("", "2"), ("d", "")]
        );
        assert_eq!(pairs("e=\"open"), [("e", "open")]);
        assert!(pairs("").is_empty());
        let many = "k=1 ".repeat(1000);
        assert_eq!(pairs(&many).len(), MAX_PAIRS);
    }
}
