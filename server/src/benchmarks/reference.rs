//! The published reference results that ship inside the binary
//! (`server/reference/benchmarks.csv` and `sizing.csv`): benchmark runs, seeded into
//! the store as read-only runs whose `source` is the study, and sizing rows (storage
//! throughput each GPU demands, GPUs one storage node feeds).
//!
//! The files are CSV with a header row; lines starting with `#` are comments and empty
//! fields were not published (absent). Must not touch: HTTP.

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::{names, Metric, RunSetup, Suite};
use crate::store::{BenchmarkRun, Store, StoreError};

const BENCHMARKS_CSV: &str = include_str!("../../reference/benchmarks.csv");
const SIZING_CSV: &str = include_str!("../../reference/sizing.csv");

/// One row of the sizing guidance.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct SizingRow {
    pub source: String,
    /// What was measured (`training small images (115 KB) ResNet-50`).
    pub workload: String,
    pub gpu_model: String,
    /// Storage throughput one GPU demands (MB/s, 10^6 bytes).
    pub mb_per_s_per_gpu: Option<f64>,
    /// GPUs one Isilon F800 node feeds.
    pub gpus_per_f800_node: Option<f64>,
    /// GPUs one Isilon H500 node feeds.
    pub gpus_per_h500_node: Option<f64>,
    pub notes: Option<String>,
}

/// A line of a reference file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file} line {line}: {message}")]
pub struct ReferenceError {
    pub file: &'static str,
    pub line: usize,
    pub message: String,
}

/// The fields of one CSV line (RFC 4180: `"` quotes a field, `""` is a quote).
fn fields(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    out.push(field);
    out
}

/// One data line of a reference file, its fields by header name.
struct Record<'a> {
    file: &'static str,
    line: usize,
    header: &'a [String],
    values: Vec<String>,
}

impl Record<'_> {
    fn error(&self, message: impl Into<String>) -> ReferenceError {
        ReferenceError {
            file: self.file,
            line: self.line,
            message: message.into(),
        }
    }

    /// The field of `column`, trimmed; `None` when empty.
    fn text(&self, column: &str) -> Result<Option<String>, ReferenceError> {
        let i = self
            .header
            .iter()
            .position(|h| h == column)
            .ok_or_else(|| self.error(format!("no column {column}")))?;
        let value = self.values.get(i).map_or("", |v| v.trim());
        Ok((!value.is_empty()).then(|| value.to_string()))
    }

    fn required(&self, column: &str) -> Result<String, ReferenceError> {
        self.text(column)?
            .ok_or_else(|| self.error(format!("{column} is empty")))
    }

    fn number(&self, column: &str) -> Result<Option<f64>, ReferenceError> {
        self.text(column)?
            .map(|v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .ok_or_else(|| self.error(format!("{column}: {v:?} is not a number")))
            })
            .transpose()
    }

    fn whole(&self, column: &str) -> Result<Option<i64>, ReferenceError> {
        self.text(column)?
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| self.error(format!("{column}: {v:?} is not a whole number")))
            })
            .transpose()
    }
}

/// The data lines of `text` (after the header), skipping comments and blank lines.
fn read<T>(
    file: &'static str,
    text: &str,
    mut each: impl FnMut(&Record<'_>) -> Result<T, ReferenceError>,
) -> Result<Vec<T>, ReferenceError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l))
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    let header = lines.next().map(|(_, l)| fields(l)).unwrap_or_default();
    lines
        .map(|(line, l)| {
            each(&Record {
                file,
                line,
                header: &header,
                values: fields(l),
            })
        })
        .collect()
}

/// The published runs, as runs to store.
pub fn parse_runs(text: &str) -> Result<Vec<BenchmarkRun>, ReferenceError> {
    read("benchmarks.csv", text, |r| {
        let suite = r.required("suite")?;
        let suite = Suite::parse(&suite)
            .ok_or_else(|| r.error(format!("suite: {suite:?} is not a known suite")))?;
        let mut metrics = Vec::new();
        for (column, unit) in [
            (names::IMAGES_PER_SEC, "images/s"),
            (names::STORAGE_MB_PER_S, "MB/s"),
        ] {
            if let Some(value) = r.number(column)? {
                metrics.push(Metric {
                    name: column.to_string(),
                    value,
                    unit: unit.to_string(),
                });
            }
        }
        metrics.sort_by(|a, b| a.name.cmp(&b.name));
        let system = r.required("system")?;
        let notes = match r.text("notes")? {
            Some(n) => format!("{system}; {n}"),
            None => system,
        };
        Ok(BenchmarkRun {
            setup: RunSetup {
                suite: suite.name().to_string(),
                model: r.text("model")?,
                framework: r.text("framework")?,
                precision: r.text("precision")?,
                batch_size_per_gpu: r.whole("batch_size_per_gpu")?,
                gpus: r.whole("gpus")?.ok_or_else(|| r.error("gpus is empty"))?,
                nodes: r.whole("nodes")?.ok_or_else(|| r.error("nodes is empty"))?,
                gpu_model: r.text("gpu_model")?,
                storage: r.text("storage")?,
                dataset: r.text("dataset")?,
            },
            source: r.required("source")?,
            notes: Some(notes),
            metrics,
            ..BenchmarkRun::default()
        })
    })
}

/// The sizing rows.
pub fn parse_sizing(text: &str) -> Result<Vec<SizingRow>, ReferenceError> {
    read("sizing.csv", text, |r| {
        Ok(SizingRow {
            source: r.required("source")?,
            workload: r.required("workload")?,
            gpu_model: r.required("gpu_model")?,
            mb_per_s_per_gpu: r.number("mb_per_s_per_gpu")?,
            gpus_per_f800_node: r.number("gpus_per_f800_node")?,
            gpus_per_h500_node: r.number("gpus_per_h500_node")?,
            notes: r.text("notes")?,
        })
    })
}

/// The sizing rows shipped with this binary (tested to parse: none when they did not).
pub fn sizing() -> &'static [SizingRow] {
    static ROWS: OnceLock<Vec<SizingRow>> = OnceLock::new();
    ROWS.get_or_init(|| {
        parse_sizing(SIZING_CSV).unwrap_or_else(|e| {
            tracing::error!(error = %e, "the shipped sizing rows cannot be read");
            Vec::new()
        })
    })
}

/// The version of the shipped runs: a hash of the file, never 0 (nothing seeded).
fn version() -> i64 {
    let digest = Sha256::digest(BENCHMARKS_CSV.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first) | 1
}

/// Why the reference runs could not be seeded.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Store the shipped reference runs, unless this version of them is there already.
pub async fn seed(store: &Store, now: i64) -> Result<bool, SeedError> {
    let runs = parse_runs(BENCHMARKS_CSV)?;
    Ok(store
        .seed_reference_benchmarks(version(), &runs, now)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_follow_rfc_4180() {
        assert_eq!(
            fields("a,,\"b,c\",\"say \"\"hi\"\"\""),
            ["a", "", "b,c", "say \"hi\""]
        );
        assert_eq!(fields(""), [""]);
    }

    #[test]
    fn the_shipped_runs_are_all_read() {
        let runs = parse_runs(BENCHMARKS_CSV).expect("reference runs");
        assert_eq!(runs.len(), 34);
        let first = &runs[0];
        assert_eq!(first.source, "isilon-dss8440-2019");
        assert_eq!(first.setup.suite, "tf_cnn_benchmarks");
        assert_eq!(first.setup.model.as_deref(), Some("GoogleNet"));
        assert_eq!((first.setup.gpus, first.setup.nodes), (1, 1));
        assert_eq!(first.setup.batch_size_per_gpu, Some(1024));
        assert_eq!(
            first.metrics,
            [Metric {
                name: "images_per_sec".into(),
                value: 1658.0,
                unit: "images/s".into()
            }]
        );
        assert_eq!(
            first.notes.as_deref(),
            Some("Dell EMC DSS 8440; container 19.03-py3")
        );
        let fio = runs.last().expect("fio row");
        assert_eq!(fio.setup.suite, "fio");
        assert_eq!(
            (
                fio.setup.framework.as_deref(),
                fio.setup.precision.as_deref()
            ),
            (None, None)
        );
        assert_eq!(fio.metrics.len(), 1);
        assert_eq!(fio.metrics[0].value, 18924.0);
        assert!(runs.iter().all(|r| !r.metrics.is_empty()));
        assert!(runs.iter().all(|r| r
            .metrics
            .iter()
            .all(|m| super::super::is_metric_name(&m.name))));
    }

    #[test]
    fn the_shipped_sizing_rows_are_all_read() {
        let rows = sizing();
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0].mb_per_s_per_gpu, Some(90.0));
        assert_eq!(rows[0].gpus_per_f800_node, Some(27.0));
        assert_eq!(rows[3].mb_per_s_per_gpu, None);
        assert_eq!(rows[1].notes, None);
    }

    #[test]
    fn bad_lines_name_their_file_line_and_field() {
        let text = "# comment\nsource,system,gpu_model,nodes,gpus,suite,framework,model,precision,batch_size_per_gpu,dataset,storage,images_per_sec,storage_mb_per_s,notes\n\
                    s,sys,g,1,x,fio,,m,,,,st,,1,\n";
        let err = parse_runs(text).expect_err("gpus");
        assert_eq!((err.line, err.file), (3, "benchmarks.csv"));
        assert!(err.message.starts_with("gpus"), "{err}");
        assert!(version() != 0);
    }
}
