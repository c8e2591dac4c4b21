//! fio's JSON report (`fio --output-format=json`, also `json+`), which may follow
//! text that fio or the job script printed first (fio's `note: …` warnings).
//!
//! Per job and in total: read and write bandwidth in MB/s (fio's `bw_bytes`, bytes
//! per second, over 10^6; where a report has only `bw`, that is KiB/s) and IOPS.
//! Jobs of one report ran at the same time, so their bandwidths add up; separate
//! reports (a script that runs fio once for sequential and once for random reads) did
//! not, so each total is the best report's.

use serde::Deserialize;

use super::{metric_name, names, set_metric, Metric, NoOutcome, Outcome};

/// What every fio JSON report holds near its start.
const VERSION_KEY: &str = "\"fio version\"";
/// The most reports read from one output, and the most jobs given metrics of their own.
const MAX_REPORTS: usize = 16;
const MAX_JOBS_LISTED: usize = 32;
/// The longest job name kept in a metric name (`job_<name>_write_mb_per_s` ≤ 64).
const MAX_JOB_NAME: usize = 40;

#[derive(Deserialize)]
struct Report {
    #[serde(default)]
    jobs: Vec<Job>,
}

#[derive(Deserialize)]
struct Job {
    #[serde(default)]
    jobname: String,
    #[serde(default)]
    read: Option<Direction>,
    #[serde(default)]
    write: Option<Direction>,
}

/// One direction (`read` or `write`) of a job.
#[derive(Deserialize, Default)]
struct Direction {
    bw_bytes: Option<f64>,
    /// KiB/s, in reports of fio versions without `bw_bytes`.
    bw: Option<f64>,
    iops: Option<f64>,
    io_bytes: Option<f64>,
    total_ios: Option<f64>,
}

impl Direction {
    fn mb_per_s(&self) -> f64 {
        let bytes_per_s = self.bw_bytes.or(self.bw.map(|kib| kib * 1024.0));
        bytes_per_s
            .filter(|b| b.is_finite() && *b >= 0.0)
            .unwrap_or(0.0)
            / 1e6
    }

    fn iops(&self) -> f64 {
        self.iops
            .filter(|i| i.is_finite() && *i >= 0.0)
            .unwrap_or(0.0)
    }

    fn moved_data(&self) -> bool {
        self.io_bytes.unwrap_or(0.0) > 0.0
            || self.total_ios.unwrap_or(0.0) > 0.0
            || self.mb_per_s() > 0.0
    }
}

/// Bandwidth and IOPS of reads and writes.
#[derive(Default, Clone, Copy)]
struct Figures {
    read_mb_per_s: f64,
    write_mb_per_s: f64,
    read_iops: f64,
    write_iops: f64,
    reads: bool,
    writes: bool,
}

impl Figures {
    fn of(job: &Job) -> Figures {
        let none = Direction::default();
        let (read, write) = (
            job.read.as_ref().unwrap_or(&none),
            job.write.as_ref().unwrap_or(&none),
        );
        Figures {
            read_mb_per_s: read.mb_per_s(),
            write_mb_per_s: write.mb_per_s(),
            read_iops: read.iops(),
            write_iops: write.iops(),
            reads: read.moved_data(),
            writes: write.moved_data(),
        }
    }

    /// The figures of `self` and `other` combined by `op` (adding up, or the best).
    fn merge(self, other: Figures, op: fn(f64, f64) -> f64) -> Figures {
        Figures {
            read_mb_per_s: op(self.read_mb_per_s, other.read_mb_per_s),
            write_mb_per_s: op(self.write_mb_per_s, other.write_mb_per_s),
            read_iops: op(self.read_iops, other.read_iops),
            write_iops: op(self.write_iops, other.write_iops),
            reads: self.reads || other.reads,
            writes: self.writes || other.writes,
        }
    }

    /// Sets `<prefix>read_mb_per_s` and the others, for the directions that moved data.
    fn record(&self, metrics: &mut Vec<Metric>, prefix: &str) {
        let figures = [
            (self.reads, names::READ_MB_PER_S, self.read_mb_per_s, "MB/s"),
            (self.reads, names::READ_IOPS, self.read_iops, "IOPS"),
            (
                self.writes,
                names::WRITE_MB_PER_S,
                self.write_mb_per_s,
                "MB/s",
            ),
            (self.writes, names::WRITE_IOPS, self.write_iops, "IOPS"),
        ];
        for (moved_data, name, value, unit) in figures {
            if moved_data {
                set_metric(metrics, &format!("{prefix}{name}"), value, unit);
            }
        }
    }
}

/// Whether `output` holds a fio JSON report.
pub fn has_report(output: &str) -> bool {
    output.contains(VERSION_KEY)
}

pub fn parse(output: &str) -> Result<Outcome, NoOutcome> {
    let mut reports = Vec::new();
    let mut problem = None;
    for (at, _) in output.match_indices(VERSION_KEY).take(MAX_REPORTS) {
        // The report's `{` is the last one before its version, with only blanks between.
        let Some(open) = output[..at].rfind('{') else {
            continue;
        };
        if !output[open + 1..at].trim().is_empty() {
            continue;
        }
        let mut stream = serde_json::Deserializer::from_str(&output[open..]).into_iter::<Report>();
        match stream.next() {
            Some(Ok(report)) => reports.push(report),
            Some(Err(e)) => {
                problem.get_or_insert(format!(
                    "the fio JSON report is cut short or malformed ({e})"
                ));
            }
            None => {}
        }
    }
    if reports.is_empty() {
        return Err(NoOutcome::new(problem.unwrap_or_else(|| {
            "no fio JSON report in the output (run fio with `--output-format=json`)".to_owned()
        })));
    }

    let jobs: Vec<&Job> = reports.iter().flat_map(|r| &r.jobs).collect();
    let total = reports
        .iter()
        .map(|report| {
            let jobs = report.jobs.iter().map(Figures::of);
            jobs.fold(Figures::default(), |sum, job| sum.merge(job, |a, b| a + b))
        })
        .fold(Figures::default(), |best, report| {
            best.merge(report, f64::max)
        });
    if jobs.is_empty() {
        return Err(NoOutcome::new("the fio JSON report lists no jobs"));
    }
    if !total.reads && !total.writes {
        return Err(NoOutcome::new("the fio jobs read and wrote nothing"));
    }

    let mut outcome = Outcome::default();
    let metrics = &mut outcome.metrics;
    total.record(metrics, "");
    set_metric(
        metrics,
        names::STORAGE_MB_PER_S,
        total.read_mb_per_s + total.write_mb_per_s,
        "MB/s",
    );
    for (job, name) in jobs.iter().zip(job_names(&jobs)).take(MAX_JOBS_LISTED) {
        Figures::of(job).record(metrics, &format!("job_{name}_"));
    }
    Ok(outcome)
}

/// A metric-name part for each job: its name in the metric charset, with `_1`, `_2` …
/// where several jobs share it (`--numjobs=4` runs four jobs of one name).
fn job_names(jobs: &[&Job]) -> Vec<String> {
    let base: Vec<String> = jobs
        .iter()
        .map(|job| metric_name(&job.jobname, MAX_JOB_NAME).unwrap_or_else(|| "unnamed".into()))
        .collect();
    let mut seen = std::collections::HashMap::<&str, usize>::new();
    base.iter()
        .map(|name| {
            if base.iter().filter(|other| *other == name).count() == 1 {
                return name.clone();
            }
            let n = seen.entry(name).or_insert(0);
            *n += 1;
            format!("{name}_{n}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_read() {
        let outcome = parse(include_str!("testdata/fio-seqread.json")).expect("an outcome");
        assert_eq!(outcome.value("read_mb_per_s"), Some(699.050666));
        assert_eq!(outcome.value("read_iops"), Some(666.666667));
        assert_eq!(outcome.value("storage_mb_per_s"), Some(699.050666));
        assert_eq!(outcome.value("write_mb_per_s"), None);
        assert_eq!(outcome.value("job_seqread_read_mb_per_s"), Some(699.050666));
        assert_eq!(outcome.figure("read_mb_per_s"), Some((699.050666, "MB/s")));
        assert_eq!(outcome.figure("read_iops"), Some((666.666667, "IOPS")));
    }

    #[test]
    fn random_read_of_two_jobs_after_fio_notes() {
        let output = include_str!("testdata/fio-randread.txt");
        assert!(output.starts_with("note: "));
        let outcome = parse(output).expect("an outcome");
        let (first, second) = (38.479853, 27.147598);
        assert_eq!(outcome.value("job_randread_1_read_mb_per_s"), Some(first));
        assert_eq!(outcome.value("job_randread_2_read_mb_per_s"), Some(second));
        assert_eq!(outcome.value("read_mb_per_s"), Some(first + second));
        assert_eq!(outcome.value("read_iops"), Some(9394.495413 + 6627.831715));
    }

    #[test]
    fn mixed_reads_and_writes() {
        let outcome = parse(include_str!("testdata/fio-randrw.json")).expect("an outcome");
        assert_eq!(outcome.value("read_mb_per_s"), Some(274.627047));
        assert_eq!(outcome.value("write_mb_per_s"), Some(124.830476));
        assert_eq!(outcome.value("write_iops"), Some(1904.761905));
        assert_eq!(
            outcome.value("storage_mb_per_s"),
            Some(274.627047 + 124.830476)
        );
    }

    #[test]
    fn separate_reports_keep_the_best_total_and_every_job() {
        let output = [
            include_str!("testdata/fio-seqread.json"),
            include_str!("testdata/fio-randread.txt"),
        ]
        .join("\n");
        let outcome = parse(&output).expect("an outcome");
        assert_eq!(outcome.value("read_mb_per_s"), Some(699.050666));
        assert_eq!(outcome.value("read_iops"), Some(9394.495413 + 6627.831715));
        assert!(outcome.value("job_seqread_read_mb_per_s").is_some());
        assert!(outcome.value("job_randread_2_read_iops").is_some());
    }

    #[test]
    fn kib_bandwidth_without_bw_bytes() {
        let output = r#"{"fio version": "fio-2.2.10", "jobs": [{"jobname": "Old Job #1", "read": {"io_bytes": 8192, "bw": 1000, "iops": 250.0}}]}"#;
        let outcome = parse(output).expect("an outcome");
        assert_eq!(outcome.value("read_mb_per_s"), Some(1.024));
        assert_eq!(outcome.value("job_old_job_1_read_mb_per_s"), Some(1.024));
    }

    #[test]
    fn reports_that_record_nothing_say_why() {
        let cut = &include_str!("testdata/fio-seqread.json")[..2000];
        let err = parse(cut).expect_err("cut short");
        assert!(
            err.reason()
                .starts_with("the fio JSON report is cut short or malformed"),
            "{err}"
        );
        let err = parse("fio: pid=0, err=2/file:filesetup.c:1 error=No such file\n")
            .expect_err("no report");
        assert_eq!(
            err.reason(),
            "no fio JSON report in the output (run fio with `--output-format=json`)"
        );
        let err = parse(r#"{"fio version": "fio-3.33", "jobs": []}"#).expect_err("no jobs");
        assert_eq!(err.reason(), "the fio JSON report lists no jobs");
        let err = parse(
            r#"{"fio version": "fio-3.33", "jobs": [{"jobname": "x", "read": {"bw_bytes": 0}}]}"#,
        )
        .expect_err("no data");
        assert_eq!(err.reason(), "the fio jobs read and wrote nothing");
    }

    /// fio as Debian ships it, run here on a small file (the test dependencies install it).
    #[test]
    fn live_fio_sequential_read() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let run = std::process::Command::new("fio")
            .args([
                "--name=live-seq",
                "--rw=read",
                "--bs=1M",
                "--size=8M",
                "--runtime=1",
                "--time_based=0",
                "--output-format=json",
            ])
            .arg(format!("--directory={}", dir.path().display()))
            .output()
            .expect("fio runs (tests/install-deps.sh installs it)");
        assert!(
            run.status.success(),
            "fio failed: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let output = String::from_utf8_lossy(&run.stdout);
        let outcome = parse(&output).expect("an outcome");
        assert!(outcome.value("read_mb_per_s").is_some_and(|mb| mb > 0.0));
        assert!(outcome
            .value("job_live_seq_read_mb_per_s")
            .is_some_and(|mb| mb > 0.0));
    }
}
