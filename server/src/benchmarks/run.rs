//! Benchmark runs as people post and look for them: a new run checked before anything
//! is stored ([`NewRun::check`]), the query of a listing ([`ListQuery::parse`]), and
//! who may delete a run ([`may_delete`]).
//!
//! Must not touch: HTTP or SQL (the store keeps runs, the API calls this).

use serde::Deserialize;
use utoipa::ToSchema;

use super::{is_metric_name, Metric, RunSetup, Suite};
use crate::accounting::{bad, parse_time, FieldError};
use crate::store::{BenchmarkFilter, BenchmarkRecord, BenchmarkRun, BenchmarkSort};

/// The most metrics one run may carry.
pub const MAX_METRICS: usize = 64;
/// The most GPUs one run may have used.
pub const MAX_GPUS: i64 = 100_000;
/// The most characters of a short text field (model, storage …), of notes, of a
/// metric's unit.
pub const MAX_TEXT: usize = 200;
pub const MAX_NOTES: usize = 4000;
pub const MAX_UNIT: usize = 32;
/// The most tags of a run, and characters of one.
pub const MAX_TAGS: usize = 16;
pub const MAX_TAG: usize = 32;
/// Runs per listing: by default, and at most (a CSV export asks for the most).
pub const DEFAULT_LIMIT: i64 = 1000;
pub const MAX_LIMIT: i64 = 100_000;

/// A run as posted. Absent or empty text is absent.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRun {
    /// `tf_cnn_benchmarks`, `deep_learning_examples`, `mlperf`, `fio`, `nccl_tests` or
    /// `custom`.
    pub suite: String,
    pub model: Option<String>,
    pub framework: Option<String>,
    /// `fp16`, `fp32`, `amp` …
    pub precision: Option<String>,
    pub batch_size_per_gpu: Option<i64>,
    /// 1 to 100000.
    pub gpus: i64,
    /// 1 or more; default 1.
    pub nodes: Option<i64>,
    /// `A100`, `V100-SXM2-16GB` …
    pub gpu_model: Option<String>,
    /// The storage system the data was read from.
    pub storage: Option<String>,
    pub dataset: Option<String>,
    /// RFC 3339.
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    /// The job the run came from (one of the caller's, or any for administrators).
    pub job_id: Option<i64>,
    pub notes: Option<String>,
    /// Letters, digits and `.`, `_`, `-`, `:`, `+`; at most 16, stored in lower case.
    #[serde(default)]
    pub tags: Vec<String>,
    /// At most 64, names unique (lower-case letters, digits, `_`), values finite.
    #[serde(default)]
    pub metrics: Vec<Metric>,
}

/// A short text field: trimmed, empty is absent, at most `max` characters, no
/// control characters.
fn text(
    field: &'static str,
    value: &Option<String>,
    max: usize,
) -> Result<Option<String>, FieldError> {
    let Some(v) = value.as_deref().map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if v.chars().count() > max {
        return Err(bad(field, format!("at most {max} characters")));
    }
    if v.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Err(bad(field, "control characters are not allowed"));
    }
    Ok(Some(v.to_string()))
}

fn is_tag(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= MAX_TAG
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-:+".contains(&b))
}

impl NewRun {
    /// The run to store for `user`, or the first field that is wrong.
    pub fn check(&self, user: &str) -> Result<BenchmarkRun, FieldError> {
        let suite = Suite::parse(&self.suite).ok_or_else(|| {
            bad(
                "suite",
                format!(
                    "{:?} is not one of {}",
                    self.suite,
                    Suite::ALL.map(Suite::name).join(", ")
                ),
            )
        })?;
        // 0 GPUs: a storage or CPU benchmark.
        if !(0..=MAX_GPUS).contains(&self.gpus) {
            return Err(bad(
                "gpus",
                format!("must be 0 to {MAX_GPUS}, not {}", self.gpus),
            ));
        }
        let nodes = self.nodes.unwrap_or(1);
        if !(1..=self.gpus.max(1)).contains(&nodes) {
            return Err(bad(
                "nodes",
                format!("must be 1 to gpus ({}), not {nodes}", self.gpus.max(1)),
            ));
        }
        if let Some(b) = self.batch_size_per_gpu {
            if !(1..=10_000_000).contains(&b) {
                return Err(bad("batch_size_per_gpu", "must be 1 to 10000000"));
            }
        }
        let time = |field: &'static str, value: &Option<String>| {
            text(field, value, MAX_TEXT)?
                .map(|t| parse_time(field, &t))
                .transpose()
        };
        let started_at = time("started_at", &self.started_at)?;
        let ended_at = time("ended_at", &self.ended_at)?;
        if let (Some(s), Some(e)) = (started_at, ended_at) {
            if e < s {
                return Err(bad("ended_at", "must not be before started_at"));
            }
        }
        if self.job_id.is_some_and(|j| j < 1) {
            return Err(bad("job_id", "must be a job id (1 or more)"));
        }
        if self.tags.len() > MAX_TAGS {
            return Err(bad("tags", format!("at most {MAX_TAGS}")));
        }
        let mut tags: Vec<String> = Vec::new();
        for tag in &self.tags {
            let tag = tag.trim().to_ascii_lowercase();
            if !is_tag(&tag) {
                return Err(bad(
                    "tags",
                    format!("{tag:?}: 1 to {MAX_TAG} letters, digits, '.', '_', '-', ':' or '+'"),
                ));
            }
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        }
        if self.metrics.len() > MAX_METRICS {
            return Err(bad("metrics", format!("at most {MAX_METRICS}")));
        }
        let mut metrics = self.metrics.clone();
        for m in &mut metrics {
            if !is_metric_name(&m.name) {
                return Err(bad(
                    "metrics",
                    format!(
                        "{:?} is not a metric name (lower-case letters, digits and '_', at most 64, not starting with a digit)",
                        m.name
                    ),
                ));
            }
            if !m.value.is_finite() {
                return Err(bad(
                    "metrics",
                    format!("{}: the value must be a finite number", m.name),
                ));
            }
            m.unit = m.unit.trim().to_string();
            if m.unit.chars().count() > MAX_UNIT || m.unit.chars().any(char::is_control) {
                return Err(bad(
                    "metrics",
                    format!("{}: a unit has at most {MAX_UNIT} characters", m.name),
                ));
            }
        }
        metrics.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(twice) = metrics.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(bad("metrics", format!("{} appears twice", twice[0].name)));
        }
        Ok(BenchmarkRun {
            setup: RunSetup {
                suite: suite.name().to_string(),
                model: text("model", &self.model, MAX_TEXT)?,
                framework: text("framework", &self.framework, MAX_TEXT)?,
                precision: text("precision", &self.precision, MAX_TEXT)?,
                batch_size_per_gpu: self.batch_size_per_gpu,
                gpus: self.gpus,
                nodes,
                gpu_model: text("gpu_model", &self.gpu_model, MAX_TEXT)?,
                storage: text("storage", &self.storage, MAX_TEXT)?,
                dataset: text("dataset", &self.dataset, MAX_TEXT)?,
            },
            started_at,
            ended_at,
            job_id: self.job_id,
            user_name: user.to_string(),
            notes: text("notes", &self.notes, MAX_NOTES)?,
            tags: tags.join(","),
            source: crate::store::benchmarks::LOCAL.to_string(),
            metrics,
        })
    }
}

/// A listing's query, checked.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub filter: BenchmarkFilter,
    /// `format=csv` (`Some(true)`) or `format=json`, when given.
    pub csv: Option<bool>,
    /// Whether `limit` was given.
    pub limited: bool,
}

/// Parameters a listing accepts.
pub const LIST_PARAMS: [&str; 16] = [
    "suite",
    "model",
    "gpu_model",
    "storage",
    "user",
    "tag",
    "job",
    "source",
    "from",
    "to",
    "metric",
    "sort",
    "limit",
    "offset",
    "format",
    "gpus",
];

impl ListQuery {
    /// Read URL query parameters; empty values count as absent. `gpus` is accepted
    /// (and ignored) for the pages' chart forms.
    pub fn parse(pairs: &[(String, String)]) -> Result<ListQuery, FieldError> {
        let mut q = ListQuery {
            filter: BenchmarkFilter {
                limit: DEFAULT_LIMIT,
                ..BenchmarkFilter::default()
            },
            ..ListQuery::default()
        };
        let mut sort = None;
        for (name, value) in pairs {
            let Some(field) = LIST_PARAMS.iter().copied().find(|p| *p == name.as_str()) else {
                return Err(bad("query", format!("unknown parameter \"{name}\"")));
            };
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            let f = &mut q.filter;
            match field {
                "suite" => {
                    f.suite = Some(
                        Suite::parse(value)
                            .ok_or_else(|| bad(field, format!("{value:?} is not a suite")))?
                            .name()
                            .to_string(),
                    )
                }
                "model" => f.model = Some(value.to_string()),
                "gpu_model" => f.gpu_model = Some(value.to_string()),
                "storage" => f.storage = Some(value.to_string()),
                "user" => f.user = Some(value.to_string()),
                "tag" => f.tag = Some(value.to_ascii_lowercase()),
                "job" => {
                    f.job_id = Some(
                        value
                            .parse()
                            .ok()
                            .filter(|j| *j > 0)
                            .ok_or_else(|| bad(field, format!("{value:?} is not a job id")))?,
                    )
                }
                "source" => {
                    f.reference = match value {
                        "all" => None,
                        "local" => Some(false),
                        "reference" => Some(true),
                        _ => {
                            return Err(bad(
                                field,
                                format!("{value:?} is not local, reference or all"),
                            ))
                        }
                    }
                }
                "from" => f.from = Some(parse_time("from", value)?),
                "to" => f.to = Some(parse_time("to", value)?),
                "metric" => {
                    if !is_metric_name(value) {
                        return Err(bad(field, format!("{value:?} is not a metric name")));
                    }
                    f.metric = Some(value.to_string())
                }
                "sort" => sort = Some(value.to_string()),
                "limit" => {
                    f.limit = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .ok_or_else(|| bad(field, format!("must be 1 to {MAX_LIMIT}")))?;
                    q.limited = true;
                }
                "offset" => {
                    f.offset = value
                        .parse()
                        .ok()
                        .filter(|n| *n >= 0)
                        .ok_or_else(|| bad(field, "must be a whole number, 0 or more"))?
                }
                "format" => {
                    q.csv = match value {
                        "csv" => Some(true),
                        "json" => Some(false),
                        _ => return Err(bad(field, format!("{value:?} is not csv or json"))),
                    }
                }
                _ => {}
            }
        }
        if let (Some(from), Some(to)) = (q.filter.from, q.filter.to) {
            if to <= from {
                return Err(bad("to", "must be after from"));
            }
        }
        q.filter.sort = match sort.as_deref() {
            None | Some("newest") => BenchmarkSort::Newest,
            Some("gpus") => BenchmarkSort::Gpus,
            Some("metric") => BenchmarkSort::Metric(
                q.filter
                    .metric
                    .clone()
                    .ok_or_else(|| bad("sort", "sort=metric needs metric=NAME"))?,
            ),
            Some(other) => {
                return Err(bad(
                    "sort",
                    format!("{other:?} is not newest, gpus or metric"),
                ))
            }
        };
        Ok(q)
    }
}

/// Why a run may not be deleted by someone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteRefusal {
    /// Reference runs are read-only.
    Reference,
    /// Only its owner or an administrator may.
    NotOwner,
}

/// Whether a caller may delete `run`, given whether they may see its owner's work
/// (`Principal::may_see`: its owner or an administrator): a local run, then; a
/// reference run, never.
pub fn may_delete(run: &BenchmarkRecord, sees_owner: bool) -> Result<(), DeleteRefusal> {
    if run.is_reference() {
        Err(DeleteRefusal::Reference)
    } else if sees_owner {
        Ok(())
    } else {
        Err(DeleteRefusal::NotOwner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> NewRun {
        NewRun {
            suite: "tf_cnn_benchmarks".into(),
            model: Some(" ResNet-50 ".into()),
            gpus: 8,
            tags: vec!["Nightly".into(), "nightly".into(), "a100".into()],
            metrics: vec![
                Metric {
                    name: "storage_mb_per_s".into(),
                    value: 700.0,
                    unit: "MB/s".into(),
                },
                Metric {
                    name: "images_per_sec".into(),
                    value: 6142.0,
                    unit: "images/s".into(),
                },
            ],
            started_at: Some("2025-03-01T10:00:00Z".into()),
            ..NewRun::default()
        }
    }

    #[test]
    fn a_good_run_is_stored_tidied() {
        let stored = run().check("alice").expect("good");
        assert_eq!(stored.setup.model.as_deref(), Some("ResNet-50"));
        assert_eq!((stored.setup.gpus, stored.setup.nodes), (8, 1));
        assert_eq!(stored.tags, "nightly,a100");
        assert_eq!(stored.metrics[0].name, "images_per_sec", "in name order");
        assert_eq!(stored.source, "local");
        assert_eq!(stored.user_name, "alice");
        assert_eq!(stored.setup.framework, None);
    }

    #[test]
    fn bad_runs_name_their_field() {
        let field = |edit: &dyn Fn(&mut NewRun)| {
            let mut r = run();
            edit(&mut r);
            r.check("alice").expect_err("bad").field
        };
        assert_eq!(field(&|r| r.suite = "hpl".into()), "suite");
        assert_eq!(field(&|r| r.gpus = -8), "gpus");
        assert_eq!(field(&|r| r.gpus = 100_001), "gpus");
        assert_eq!(field(&|r| r.nodes = Some(0)), "nodes");
        assert_eq!(field(&|r| r.nodes = Some(9)), "nodes");
        assert_eq!(field(&|r| r.metrics[0].name = "MB/s".into()), "metrics");
        assert_eq!(field(&|r| r.metrics[0].value = f64::NAN), "metrics");
        assert_eq!(
            field(&|r| r.metrics[1].name = "storage_mb_per_s".into()),
            "metrics"
        );
        assert_eq!(
            field(&|r| r.metrics = vec![r.metrics[0].clone(); MAX_METRICS + 1]),
            "metrics"
        );
        assert_eq!(
            field(&|r| r.model = Some("x".repeat(MAX_TEXT + 1))),
            "model"
        );
        assert_eq!(field(&|r| r.storage = Some("a\u{1b}b".into())), "storage");
        assert_eq!(field(&|r| r.tags = vec!["a b".into()]), "tags");
        assert_eq!(
            field(&|r| r.ended_at = Some("2025-02-01".into())),
            "ended_at"
        );
        assert_eq!(
            field(&|r| r.started_at = Some("yesterday".into())),
            "started_at"
        );
        assert_eq!(field(&|r| r.job_id = Some(0)), "job_id");
        assert_eq!(
            field(&|r| r.batch_size_per_gpu = Some(0)),
            "batch_size_per_gpu"
        );
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn listings_read_their_filters() {
        let q = ListQuery::parse(&pairs(&[
            ("suite", "tf-cnn"),
            ("tag", "Nightly"),
            ("source", "local"),
            ("metric", "images_per_sec"),
            ("sort", "metric"),
            ("format", "csv"),
            ("model", ""),
        ]))
        .expect("query");
        assert_eq!(q.filter.suite.as_deref(), Some("tf_cnn_benchmarks"));
        assert_eq!(q.filter.tag.as_deref(), Some("nightly"));
        assert_eq!(q.filter.reference, Some(false));
        assert_eq!(
            q.filter.sort,
            BenchmarkSort::Metric("images_per_sec".into())
        );
        assert_eq!((q.csv, q.filter.model.as_deref()), (Some(true), None));
        let field = |list: &[(&str, &str)]| ListQuery::parse(&pairs(list)).expect_err("bad").field;
        assert_eq!(field(&[("suite", "hpl")]), "suite");
        assert_eq!(field(&[("source", "mine")]), "source");
        assert_eq!(field(&[("sort", "metric")]), "sort");
        assert_eq!(field(&[("job", "x")]), "job");
        assert_eq!(field(&[("limit", "0")]), "limit");
        assert_eq!(field(&[("from", "2025-02-01"), ("to", "2025-01-01")]), "to");
        assert_eq!(field(&[("colour", "red")]), "query");
    }

    #[test]
    fn owners_and_administrators_delete_local_runs_only() {
        let mut record = BenchmarkRecord {
            id: 1,
            created_at: 0,
            run: run().check("alice").expect("good"),
        };
        assert_eq!(may_delete(&record, record.run.user_name == "alice"), Ok(()));
        assert_eq!(
            may_delete(&record, record.run.user_name == "bob"),
            Err(DeleteRefusal::NotOwner)
        );
        assert_eq!(may_delete(&record, true), Ok(()));
        record.run.source = "isilon-dss8440-2019".into();
        assert_eq!(may_delete(&record, true), Err(DeleteRefusal::Reference));
    }
}
