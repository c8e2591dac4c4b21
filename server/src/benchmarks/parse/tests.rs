//! The parsers together: every fixture read as its own suite and detected as it, the
//! line protocol laid over a suite's outcome, the bounds on what is read, and no
//! panic on any input.

use proptest::prelude::*;

use super::*;

/// Real output of each suite (see `testdata/README.md`), with one figure it must give.
const FIXTURES: [(&str, Suite, &str, f64); 10] = [
    (
        include_str!("testdata/tf_cnn_benchmarks-resnet50-1gpu.txt"),
        Suite::TfCnnBenchmarks,
        names::IMAGES_PER_SEC,
        180.26,
    ),
    (
        include_str!("testdata/dle-resnet50-dllogger.json"),
        Suite::DeepLearningExamples,
        names::IMAGES_PER_SEC,
        661.9801574510492,
    ),
    (
        include_str!("testdata/dle-resnet50-4x8gpu-stdout.txt"),
        Suite::DeepLearningExamples,
        names::IMAGES_PER_SEC,
        10087.95,
    ),
    (
        include_str!("testdata/mlperf-resnet-excerpt.txt"),
        Suite::Mlperf,
        "run_time_s",
        1827.116,
    ),
    (
        include_str!("testdata/fio-seqread.json"),
        Suite::Fio,
        names::READ_MB_PER_S,
        699.050666,
    ),
    (
        include_str!("testdata/fio-randread.txt"),
        Suite::Fio,
        names::READ_IOPS,
        9394.495413 + 6627.831715,
    ),
    (
        include_str!("testdata/fio-randrw.json"),
        Suite::Fio,
        names::STORAGE_MB_PER_S,
        274.627047 + 124.830476,
    ),
    (
        include_str!("testdata/nccl-all_reduce-16xh100.txt"),
        Suite::NcclTests,
        names::BUS_GB_PER_S,
        70.742,
    ),
    (
        include_str!("testdata/nccl-dgx2-v100-all_gather-all_reduce.txt"),
        Suite::NcclTests,
        names::BUS_GB_PER_S,
        42.5578,
    ),
    (
        "step 1\nATRIUM_METRIC images_per_sec=512.5\nATRIUM_RUN model=resnet50 gpus=2\n",
        Suite::Custom,
        names::IMAGES_PER_SEC,
        512.5,
    ),
];

#[test]
fn every_fixture_parses_as_its_suite_and_is_detected_as_it() {
    for (output, suite, name, expected) in FIXTURES {
        let outcome = parse(suite, output).unwrap_or_else(|e| panic!("{suite:?}: {e}"));
        let got = outcome
            .value(name)
            .unwrap_or_else(|| panic!("{suite:?}: no {name}"));
        assert!(
            (got - expected).abs() < 1e-9,
            "{suite:?} {name}: {got} != {expected}"
        );
        for metric in &outcome.metrics {
            assert!(
                is_metric_name(&metric.name),
                "{suite:?}: bad name {}",
                metric.name
            );
            assert!(metric.value.is_finite());
        }
        assert_eq!(detect(output), Some(suite), "detecting {suite:?}");
    }
}

#[test]
fn output_of_one_suite_is_no_outcome_of_another() {
    for (output, suite, _, _) in FIXTURES {
        for other in Suite::ALL {
            if other == suite || other == Suite::Custom || suite == Suite::Custom {
                continue;
            }
            let result = parse(other, output);
            assert!(
                result.is_err(),
                "{suite:?} output read as {other:?}: {result:?}"
            );
        }
    }
}

#[test]
fn declared_lines_lay_over_a_suite_outcome() {
    let output = format!(
        "{}ATRIUM_RUN precision=fp16 dataset=\"ImageNet (synthetic)\"\nATRIUM_METRIC gpu_util_percent=93.5\n",
        include_str!("testdata/tf_cnn_benchmarks-resnet50-1gpu.txt")
    );
    let outcome = parse(Suite::TfCnnBenchmarks, &output).expect("an outcome");
    assert_eq!(outcome.value(names::IMAGES_PER_SEC), Some(180.26));
    assert_eq!(outcome.value(names::GPU_UTIL_PERCENT), Some(93.5));
    assert_eq!(outcome.precision.as_deref(), Some("fp16"));
    assert_eq!(outcome.dataset.as_deref(), Some("ImageNet (synthetic)"));
    assert_eq!(outcome.model.as_deref(), Some("resnet50"));

    // A suite that found nothing still records what the script declared.
    let outcome = parse(
        Suite::Fio,
        "fio: no such file\nATRIUM_METRIC read_mb_per_s=410\n",
    )
    .expect("an outcome");
    assert_eq!(outcome.value(names::READ_MB_PER_S), Some(410.0));
}

#[test]
fn nothing_recorded_says_why_per_suite() {
    let reasons: Vec<String> = Suite::ALL
        .iter()
        .map(|suite| {
            parse(*suite, "Hello from a job\n")
                .expect_err("nothing")
                .to_string()
        })
        .collect();
    assert_eq!(
        reasons,
        [
            "no `total images/sec:` line in the output (the benchmark did not finish)",
            "no throughput in the output (no DLLogger `train.total_ips` or `throughput_train`, no `Throughput:` line)",
            "no `:::MLLOG` line in the output",
            "no fio JSON report in the output (run fio with `--output-format=json`)",
            "no nccl-tests `# Avg bus bandwidth` line in the output",
            "no `ATRIUM_METRIC name=value` line in the output",
        ]
    );
    assert_eq!(detect("Hello from a job\n"), None);
}

#[test]
fn outcome_text_is_tidied() {
    let long = "m".repeat(500);
    let output = format!("ATRIUM_RUN model={long} framework=\"  \"\nATRIUM_METRIC x=1\n");
    let outcome = parse(Suite::Custom, &output).expect("an outcome");
    assert_eq!(
        outcome.model.map(|m| m.chars().count()),
        Some(MAX_TEXT_CHARS)
    );
    assert_eq!(outcome.framework, None);
}

#[test]
fn metrics_are_bounded() {
    let output: String = (0..MAX_METRICS + 50)
        .map(|i| format!("ATRIUM_METRIC m{i}={i}\n"))
        .collect();
    let outcome = parse(Suite::Custom, &output).expect("an outcome");
    assert_eq!(outcome.metrics.len(), MAX_METRICS);
}

#[test]
fn only_the_end_of_a_huge_output_is_read() {
    let lines = "x\n".repeat(MAX_LINES + 10);
    assert_eq!(window(&lines).matches('\n').count(), MAX_LINES);

    // 18 MiB of two-byte characters: the window starts on a character boundary.
    let mut huge = "é".repeat(9 << 20);
    huge.push_str("\ntotal images/sec: 42.5\n");
    assert!(window(&huge).len() <= MAX_OUTPUT_BYTES);
    let outcome = parse(Suite::TfCnnBenchmarks, &huge).expect("an outcome");
    assert_eq!(outcome.value(names::IMAGES_PER_SEC), Some(42.5));
}

#[test]
fn metric_names_from_foreign_names() {
    assert_eq!(
        metric_name("train.total_ips", 64).as_deref(),
        Some("train_total_ips")
    );
    assert_eq!(
        metric_name("Seq Read #1", 64).as_deref(),
        Some("seq_read_1")
    );
    assert_eq!(
        metric_name("4k-randread", 64).as_deref(),
        Some("n4k_randread")
    );
    assert_eq!(metric_name("--", 64), None);
    assert_eq!(metric_name(&"a".repeat(100), 40).map(|n| n.len()), Some(40));
}

/// Pieces of every suite's format, for building output that goes deep into the parsers.
const PIECES: [&str; 40] = [
    "\n",
    " ",
    "  ",
    ":",
    " : ",
    "#",
    "\"",
    "{",
    "}",
    "[",
    "]",
    ",",
    "=",
    "-1",
    "0",
    "1e308",
    "NaN",
    "8589934592",
    "12.5",
    "[1,0]<stdout>:",
    "ATRIUM_METRIC ",
    "ATRIUM_RUN ",
    "images_per_sec=",
    "unit=",
    "gpus=",
    "total images/sec:",
    "Batch size:",
    " per device",
    "Devices: ['/gpu:0']",
    ":::MLLOG ",
    "{\"key\": \"run_start\", \"time_ms\": 1, \"value\": null}",
    "{\"key\": \"throughput\", \"value\": 5}",
    "{\"fio version\": \"fio-3.33\", \"jobs\": [",
    "{\"jobname\": \"j\", \"read\": {\"bw_bytes\": 1e6}}",
    "#       size count type algbw busbw",
    "# Avg bus bandwidth    :",
    "# nThread 1",
    "#  Rank ",
    "DLL 2020-09-15 14:29:13.473765 - Summary: train.total_ips : ",
    "DLLL {\"type\": \"LOG\", \"step\": [], \"data\": {\"train.total_ips\": 3}}",
];

fn damaged(fixture: &str, cut: prop::sample::Index, at: prop::sample::Index, junk: &str) -> String {
    let floor = |i: usize| {
        (0..=i)
            .rev()
            .find(|&i| fixture.is_char_boundary(i))
            .unwrap_or(0)
    };
    let end = floor(cut.index(fixture.len() + 1));
    let kept = &fixture[..end];
    let at = floor(at.index(kept.len() + 1).min(kept.len()));
    format!("{}{junk}{}", &kept[..at], &kept[at..])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn no_panic_on_any_text(output in any::<String>()) {
        for suite in Suite::ALL {
            let _ = parse(suite, &output);
        }
        let _ = detect(&output);
    }

    #[test]
    fn no_panic_on_pieces_of_the_formats(pieces in prop::collection::vec(prop::sample::select(&PIECES[..]), 0..200)) {
        let output = pieces.concat();
        for suite in Suite::ALL {
            if let Ok(outcome) = parse(suite, &output) {
                prop_assert!(outcome.metrics.len() <= MAX_METRICS);
                prop_assert!(outcome.metrics.iter().all(|m| m.value.is_finite() && is_metric_name(&m.name)));
            }
        }
        let _ = detect(&output);
    }

    #[test]
    fn no_panic_on_damaged_real_output(
        which in 0..FIXTURES.len(),
        cut in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        junk in "\\PC{0,40}",
    ) {
        let output = damaged(FIXTURES[which].0, cut, at, &junk);
        for suite in Suite::ALL {
            let _ = parse(suite, &output);
        }
        let _ = detect(&output);
    }
}
