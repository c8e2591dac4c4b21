//! NVIDIA nccl-tests (`all_reduce_perf` and the other collectives): the table of
//! sizes with their algorithm and bus bandwidth, and the lines that close each test,
//!
//! ```text
//! #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
//!   8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0
//! # Out of bounds values : 0 OK
//! # Avg bus bandwidth    : 70.742
//! ```
//!
//! The columns are found by the table's header, so older tables (an `error` column,
//! no `root`) read as well. The last test of the output is the run's headline
//! (`bus_gb_per_s`, and the out-of-place bandwidths of its largest size); where the
//! output holds several tests, each named collective gets its own average.

use std::collections::BTreeSet;

use super::text::{self, field};
use super::{names, set_metric, NoOutcome, Outcome};

pub const AVG_BUS_BANDWIDTH: &str = "Avg bus bandwidth";
const OUT_OF_BOUNDS: &str = "Out of bounds values";

/// nccl-tests' collectives, each a `<name>_perf` binary; longer names first, so that
/// `reduce_scatter_perf` is not taken for `scatter_perf`.
const COLLECTIVES: [&str; 10] = [
    "reduce_scatter",
    "all_reduce",
    "all_gather",
    "alltoall",
    "broadcast",
    "sendrecv",
    "hypercube",
    "scatter",
    "gather",
    "reduce",
];

/// The most ranks counted and tests kept.
const MAX_RANKS: usize = 1 << 16;
const MAX_TESTS: usize = 256;

/// Where a table's bandwidths are: the number of columns, and the first (out-of-place)
/// `algbw` and `busbw`.
#[derive(Clone, Copy)]
struct Columns {
    width: usize,
    algbw: usize,
    busbw: usize,
}

#[derive(Clone, Copy)]
struct Row {
    size: u64,
    algbw: f64,
    busbw: f64,
}

/// One test: one collective's table and its closing lines.
#[derive(Default)]
struct Test {
    collective: Option<&'static str>,
    ranks: BTreeSet<u64>,
    columns: Option<Columns>,
    largest: Option<Row>,
    out_of_bounds: Option<f64>,
    avg_bus_gb_per_s: Option<f64>,
}

pub fn parse(output: &str) -> Result<Outcome, NoOutcome> {
    let mut finished: Vec<Test> = Vec::new();
    let mut test = Test::default();
    let mut named: Option<&'static str> = None;
    let mut saw_rows = false;
    for line in text::lines(output) {
        if let Some(collective) = collective_in(line) {
            named = Some(collective);
        }
        if let Some(rest) = field(line, AVG_BUS_BANDWIDTH) {
            test.avg_bus_gb_per_s = leading_figure(rest);
            test.collective = test.collective.or(named.take());
            if finished.len() < MAX_TESTS {
                finished.push(std::mem::take(&mut test));
            }
            continue;
        }
        let trimmed = line.trim_start();
        let Some(comment) = trimmed.strip_prefix('#') else {
            if let Some(row) = test.columns.and_then(|columns| row(trimmed, columns)) {
                saw_rows = true;
                if test.largest.is_none_or(|largest| row.size >= largest.size) {
                    test.largest = Some(row);
                }
            }
            continue;
        };
        let comment = comment.trim_start();
        if comment.starts_with("nThread") {
            test = Test {
                collective: named.take(),
                ..Test::default()
            };
        } else if let Some(rest) = field(comment, OUT_OF_BOUNDS) {
            test.out_of_bounds = leading_figure(rest);
        } else if let Some(rank) = comment.strip_prefix("Rank") {
            let rank = rank.split_whitespace().next().and_then(|r| r.parse().ok());
            if let Some(rank) = rank.filter(|_| test.ranks.len() < MAX_RANKS) {
                test.ranks.insert(rank);
            }
        } else if let Some(columns) = header(comment) {
            test.columns = Some(columns);
        }
    }

    let Some(last) = finished.last() else {
        return Err(NoOutcome::new(if saw_rows {
            format!(
                "no `# {AVG_BUS_BANDWIDTH}` line in the output (the nccl-tests run did not finish)"
            )
        } else {
            format!("no nccl-tests `# {AVG_BUS_BANDWIDTH}` line in the output")
        }));
    };
    let Some(bus) = last.avg_bus_gb_per_s else {
        return Err(NoOutcome::new(format!(
            "the `# {AVG_BUS_BANDWIDTH}` line holds no number"
        )));
    };
    let mut outcome = Outcome {
        model: last.collective.map(str::to_owned),
        gpus: u32::try_from(last.ranks.len()).ok().filter(|n| *n > 0),
        ..Outcome::default()
    };
    let metrics = &mut outcome.metrics;
    set_metric(metrics, names::BUS_GB_PER_S, bus, "GB/s");
    if let Some(row) = last.largest {
        set_metric(metrics, "largest_size_bytes", row.size as f64, "B");
        set_metric(metrics, "largest_algbw_gb_per_s", row.algbw, "GB/s");
        set_metric(metrics, "largest_busbw_gb_per_s", row.busbw, "GB/s");
    }
    let out_of_bounds: Vec<f64> = finished.iter().filter_map(|t| t.out_of_bounds).collect();
    if !out_of_bounds.is_empty() {
        set_metric(
            metrics,
            "out_of_bounds_values",
            out_of_bounds.iter().sum(),
            "values",
        );
    }
    if finished.len() > 1 {
        for test in &finished {
            if let (Some(collective), Some(bus)) = (test.collective, test.avg_bus_gb_per_s) {
                set_metric(metrics, &format!("{collective}_bus_gb_per_s"), bus, "GB/s");
            }
        }
    }
    Ok(outcome)
}

/// The collective a line names by its binary (`./build/all_reduce_perf -b 8`,
/// `# Collective test starting: all_reduce_perf_mpi`).
fn collective_in(line: &str) -> Option<&'static str> {
    if !line.contains("_perf") {
        return None;
    }
    line.split(|c: char| c.is_whitespace() || c == '/')
        .find_map(|word| {
            COLLECTIVES
                .iter()
                .find(|name| {
                    word.strip_prefix(**name)
                        .is_some_and(|rest| rest.starts_with("_perf"))
                })
                .copied()
        })
}

/// The columns of a table header (`size count type redop root time algbw busbw …`).
fn header(comment: &str) -> Option<Columns> {
    let words: Vec<&str> = comment.split_whitespace().take(64).collect();
    if words.first() != Some(&"size") {
        return None;
    }
    Some(Columns {
        width: words.len(),
        algbw: words.iter().position(|w| *w == "algbw")?,
        busbw: words.iter().position(|w| *w == "busbw")?,
    })
}

/// A table row, when it has the header's columns.
fn row(line: &str, columns: Columns) -> Option<Row> {
    let words: Vec<&str> = line.split_whitespace().take(columns.width + 1).collect();
    if words.len() != columns.width {
        return None;
    }
    let figure = |i: usize| words.get(i).and_then(|w| text::number(w));
    Some(Row {
        size: words.first()?.parse().ok()?,
        algbw: figure(columns.algbw)?,
        busbw: figure(columns.busbw)?,
    })
}

/// The number after `:` in `: 70.742 OK` (or `: 40.69GB/s`).
fn leading_figure(rest: &str) -> Option<f64> {
    let rest = rest.trim_start_matches(':').trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .unwrap_or(rest.len());
    text::number(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_reduce_on_sixteen_gpus() {
        let outcome =
            parse(include_str!("testdata/nccl-all_reduce-16xh100.txt")).expect("an outcome");
        assert_eq!(outcome.figure("bus_gb_per_s"), Some((70.742, "GB/s")));
        assert_eq!(outcome.value("largest_size_bytes"), Some(8589934592.0));
        assert_eq!(outcome.value("largest_algbw_gb_per_s"), Some(180.71));
        assert_eq!(outcome.value("largest_busbw_gb_per_s"), Some(338.82));
        assert_eq!(outcome.value("out_of_bounds_values"), Some(0.0));
        assert_eq!(outcome.gpus, Some(16));
        assert_eq!(outcome.model, None);
    }

    #[test]
    fn two_collectives_in_the_older_table_format() {
        let outcome = parse(include_str!(
            "testdata/nccl-dgx2-v100-all_gather-all_reduce.txt"
        ))
        .expect("an outcome");
        assert_eq!(outcome.value("bus_gb_per_s"), Some(42.5578));
        assert_eq!(outcome.value("largest_algbw_gb_per_s"), Some(67.40));
        assert_eq!(outcome.value("largest_busbw_gb_per_s"), Some(123.56));
        assert_eq!(outcome.value("all_gather_bus_gb_per_s"), Some(30.2993));
        assert_eq!(outcome.value("all_reduce_bus_gb_per_s"), Some(42.5578));
        // all_gather's data check failed on four values.
        assert_eq!(outcome.value("out_of_bounds_values"), Some(4.0));
        assert_eq!(outcome.model.as_deref(), Some("all_reduce"));
        assert_eq!(outcome.gpus, Some(12));
    }

    #[test]
    fn tagged_output_of_a_two_node_run() {
        let output = "[1,0]<stdout>:# nccl-tests version 2.18.0 nccl-headers=22907 nccl-library=22907\n\
            [1,0]<stdout>:# Collective test starting: all_reduce_perf_mpi\n\
            [1,0]<stdout>:# nThread 1 nGpus 1 minBytes 1048576 maxBytes 134217728 step: 2(factor) warmup iters: 10 iters: 50 agg iters: 1 validation: 1 graph: 0\n\
            [1,0]<stdout>:#  Rank  0 Group  0 Pid 2994729 on        lab device  0 [0000:01:00] NVIDIA GeForce RTX 3090\n\
            [1,1]<stdout>:#  Rank  1 Group  0 Pid  120533 on       lab2 device  0 [0000:01:00] NVIDIA GeForce RTX 3090\n\
            [1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
            [1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n\
            [1,0]<stdout>:    67108864      16777216     float     sum      -1  29341.4    2.29    2.29       0  29337.0    2.29    2.29       0\n\
            [1,0]<stdout>:   134217728      33554432     float     sum      -1  58479.5    2.30    2.30       0  58055.4    2.31    2.31       0\n\
            [1,1]<stdout>:test-nccl-efa-worker-1:21:21 [0] NCCL INFO comm 0x7f9c0c000f60 rank 1 nranks 2 cudaDev 0 busId f5000 - Destroy COMPLETE\n\
            [1,0]<stdout>:# Out of bounds values : 0 OK\n\
            [1,0]<stdout>:# Avg bus bandwidth    : 1.57614 \n\
            [1,0]<stdout>:#\n\
            [1,0]<stdout>:# Collective test concluded: all_reduce_perf_mpi\n";
        let outcome = parse(output).expect("an outcome");
        assert_eq!(outcome.value("bus_gb_per_s"), Some(1.57614));
        assert_eq!(outcome.value("largest_size_bytes"), Some(134217728.0));
        assert_eq!(outcome.value("largest_busbw_gb_per_s"), Some(2.30));
        assert_eq!(outcome.model.as_deref(), Some("all_reduce"));
        assert_eq!(outcome.gpus, Some(2));
    }

    #[test]
    fn unfinished_and_foreign_output_say_why() {
        let unfinished = include_str!("testdata/nccl-all_reduce-16xh100.txt")
            .split("# Out of bounds")
            .next()
            .expect("a first part");
        let err = parse(unfinished).expect_err("no average");
        assert_eq!(
            err.reason(),
            "no `# Avg bus bandwidth` line in the output (the nccl-tests run did not finish)"
        );
        let err = parse("hello\n").expect_err("not nccl-tests");
        assert_eq!(
            err.reason(),
            "no nccl-tests `# Avg bus bandwidth` line in the output"
        );
        let err = parse("# Avg bus bandwidth    : nan\n").expect_err("no number");
        assert_eq!(
            err.reason(),
            "the `# Avg bus bandwidth` line holds no number"
        );
        assert_eq!(leading_figure(":      40.6901GB/s"), Some(40.6901));
        assert_eq!(
            collective_in("./build/reduce_scatter_perf -b 8"),
            Some("reduce_scatter")
        );
        assert_eq!(
            collective_in("mpirun /opt/nccl-tests/build/reduce_perf"),
            Some("reduce")
        );
        assert_eq!(collective_in("my_perf_tool"), None);
    }
}
