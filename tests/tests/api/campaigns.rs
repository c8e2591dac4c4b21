//! Benchmark campaigns end to end, sized for a CPU: a fio matrix (2 block sizes × 2
//! job counts) on the test's own directory, and a synthetic training program written
//! for this test that reads its data set at a known rate and prints
//! `tf_cnn_benchmarks`' lines. Real jobs run as the user; the supervisor samples what
//! they read every second. Checked: the runs are recorded and linked to their points,
//! the campaigns complete, the measured MB/s per GPU is within 20 % of the known rate,
//! the sizing uses it (and the fio campaign's node throughput), the report's HTML is
//! self-contained with SVGs that parse, the CSV has a row per point, a second
//! campaign whose program is 10 % slower is flagged, and bad matrices are refused
//! with the field named and nothing submitted. Also `atrium campaign` on the
//! command line.

use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::cli::{client, run};
use crate::fixtures::{atrium_bin, JobCluster, JobUser};
use atrium_tests::support::until;

/// The rate the synthetic program reads at, MB/s (10^6 bytes).
const RATE_MB: f64 = 8.0;
/// Bytes of one image of the data set (ImageNet's small JPEGs are about 115 KB).
const IMAGE_BYTES: f64 = 115_000.0;

/// The synthetic training program: it reads `DATA` (looping over it) at `RATE_MB`
/// MB/s, divided by `slowdown` (a slower program), for `SECONDS`, and prints
/// `tf_cnn_benchmarks`' header and total.
fn synthetic_template(slowdown: f64) -> String {
    format!(
        r#"#!/bin/bash
#SBATCH --job-name=synthetic-training
#SBATCH --gres=gpu:1
#SBATCH --time=00:10:00
#ATRIUM --benchmark=tf_cnn_benchmarks
#CAMPAIGN --title=Synthetic training that reads its data set
#CAMPAIGN --param RATE_MB={RATE_MB}
#CAMPAIGN --param SECONDS=6
#CAMPAIGN --param BATCH=64
#CAMPAIGN --param DATA=
set -euo pipefail
python3 - <<'PY'
import os, time
rate = float(os.environ["RATE_MB"]) * 1e6 / {slowdown}
seconds = float(os.environ["SECONDS"])
chunk = 1 << 16
done = 0
start = time.monotonic()
with open(os.environ["DATA"], "rb", buffering=0) as f:
    while True:
        now = time.monotonic() - start
        if now >= seconds:
            break
        if done < rate * now:
            data = f.read(chunk)
            if not data:
                f.seek(0)
                continue
            done += len(data)
        else:
            time.sleep(0.005)
elapsed = time.monotonic() - start
print("TensorFlow:  synthetic")
print("Model:       resnet50")
print("Dataset:     imagenet")
print("Batch size:  %s global" % os.environ["BATCH"])
print("             %s per device" % os.environ["BATCH"])
print("Num GPUs:    1")
print("Precision:   fp16")
print("total images/sec: %.2f" % (done / {IMAGE_BYTES} / elapsed))
PY
"#
    )
}

/// Wait until campaign `id` has recorded a run of every task; its report.
async fn finished(c: &JobCluster, user: &JobUser, id: i64, within: Duration) -> Value {
    let path = format!("/api/v1/campaigns/{id}");
    let done = until(&format!("campaign {id} to finish"), within, || async {
        let r = c.app.api(&user.token).json(&path).await;
        let p = &r["report"]["progress"];
        (p["recorded"] == p["planned"] && p["running_or_pending"] == 0).then_some(r)
    })
    .await;
    match done {
        Ok(r) => r,
        Err(e) => panic!("{e}\n{}\n{}", c.app.api(&user.token).json(&path).await, {
            let log = c.app.log();
            log[log.len().saturating_sub(40)..].join("\n")
        }),
    }
}

#[tokio::test]
async fn a_campaign_measures_training_and_storage_and_flags_a_slower_program() {
    let c = JobCluster::start_with_jobs(1, "usage_interval_seconds = 1").await;
    let user = c.user("cora").await;
    let data = user.home.join("dataset.bin");
    std::fs::write(&data, vec![7u8; 16 << 20]).expect("data set");
    let fio_dir = user.home.join("fio");
    std::fs::create_dir(&fio_dir).expect("fio dir");
    for path in [&data, &fio_dir] {
        std::os::unix::fs::chown(path, Some(user.uid), Some(user.uid)).expect("chown");
    }

    // Bad matrices: a 400 naming the field, and nothing submitted.
    let many: Vec<String> = (1..=11).map(|n| format!("{n}k")).collect();
    for (body, field) in [
        (json!({"template": "fio-seqread", "matrix": {}}), "matrix"),
        (
            json!({"template": "fio-seqread", "matrix": {"params": {"BS": many, "FIO_JOBS": (1..=10).map(|n| n.to_string()).collect::<Vec<_>>(), "FIO_SIZE": (1..=10).map(|n| format!("{n}M")).collect::<Vec<_>>()}}}),
            "matrix.points",
        ),
        (
            json!({"template": "fio-seqread", "matrix": {"params": {"NOPE": ["1"]}}}),
            "matrix.params.NOPE",
        ),
        (
            json!({"template": "fio-seqread", "matrix": {"params": {"BS": ["1M; reboot"]}}}),
            "matrix.params.BS",
        ),
        (
            json!({"template": "no-such-template", "matrix": {"gpus": [1]}}),
            "template",
        ),
    ] {
        let (status, answer) = c
            .app
            .api(&user.token)
            .post("/api/v1/campaigns", body.clone())
            .await;
        assert_eq!(status, 400, "{body} → {answer}");
        assert_eq!(answer["field"], field, "{answer}");
        assert!(
            !answer["message"].as_str().unwrap_or("").is_empty(),
            "{answer}"
        );
    }
    assert_eq!(c.job_count(&user).await, 0, "nothing was submitted");
    let list = c.app.api(&user.token).json("/api/v1/campaigns").await;
    assert_eq!(list["campaigns"], json!([]), "{list}");

    // The storage: fio's sequential read, 2 block sizes × 2 job counts, one at a time.
    let fio = json!({
        "template": "fio-seqread",
        "name": "storage here",
        "matrix": {"gpus": [0], "params": {
            "BS": ["64k", "1M"], "FIO_JOBS": ["1", "2"], "FIO_SIZE": ["8M"],
            "FIO_RUNTIME": ["1"], "DIR": [fio_dir.display().to_string()]}},
    });
    let (status, estimate) = c
        .app
        .api(&user.token)
        .post("/api/v1/campaigns/estimate", fio.clone())
        .await;
    assert_eq!(status, 200, "{estimate}");
    assert_eq!(
        (estimate["points"].as_u64(), estimate["jobs"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(c.job_count(&user).await, 0, "an estimate submits nothing");
    let (status, fio_campaign) = c
        .app
        .api(&user.token)
        .post("/api/v1/campaigns", fio.clone())
        .await;
    assert_eq!(status, 201, "{fio_campaign}");
    let fio_id = fio_campaign["id"].as_i64().expect("id");
    let fio_report = finished(&c, &user, fio_id, Duration::from_secs(240)).await;
    let points = fio_report["report"]["points"].as_array().expect("points");
    assert_eq!(points.len(), 4, "{fio_report}");
    for p in points {
        assert!(p["median"].as_f64().unwrap_or(0.0) > 0.0, "{p}");
        assert_eq!(p["values"].as_array().map(Vec::len), Some(1), "{p}");
    }

    // Training, twice each point: the rate it read, per GPU, within 20 % of the known one.
    let training = |slowdown: f64| {
        json!({
            "template": "synthetic-training",
            "script": synthetic_template(slowdown),
            "matrix": {"gpus": [1], "repetitions": 2,
                       "params": {"DATA": [data.display().to_string()]}},
        })
    };
    let (status, first) = c
        .app
        .api(&user.token)
        .post("/api/v1/campaigns", training(1.0))
        .await;
    assert_eq!(status, 201, "{first}");
    let first_id = first["id"].as_i64().expect("id");
    let report = finished(&c, &user, first_id, Duration::from_secs(240)).await;
    let point = &report["report"]["points"][0];
    assert_eq!(point["values"].as_array().map(Vec::len), Some(2), "{point}");
    let images = point["median"].as_f64().expect("median images/s");
    let expected_images = RATE_MB * 1e6 / IMAGE_BYTES;
    assert!(
        (images - expected_images).abs() / expected_images < 0.1,
        "{images} images/s against {expected_images}: {point}"
    );
    assert!(point["spread_percent"].as_f64().is_some(), "{point}");
    let per_gpu = point["storage"]["mb_per_s_per_gpu"]
        .as_f64()
        .unwrap_or_else(|| panic!("no storage read measured: {point}"));
    assert!(
        (per_gpu - RATE_MB).abs() / RATE_MB <= 0.2,
        "measured {per_gpu} MB/s per GPU against {RATE_MB}: {point}"
    );
    assert!(
        point["storage"]["source"]
            .as_str()
            .is_some_and(|s| s.contains("/proc/PID/io")),
        "{point}"
    );
    // The sizing answers from the measured figure and the fio campaign's node.
    let sizing = &report["report"]["sizing"];
    let measured = sizing["mb_per_s_per_gpu"].as_f64().expect("sizing");
    assert!((measured - per_gpu).abs() < 1e-6, "{sizing}");
    let best_fio = points
        .iter()
        .filter_map(|p| p["median"].as_f64())
        .fold(0.0, f64::max);
    assert_eq!(sizing["node_mb_per_s"].as_f64(), Some(best_fio), "{sizing}");
    let need = sizing["needs"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["gpus"] == 64))
        .unwrap_or_else(|| panic!("no need for 64 GPUs: {sizing}"));
    assert!(
        (need["demand_mb_per_s"].as_f64().unwrap_or(0.0) - 64.0 * measured).abs() < 1e-6,
        "{need}"
    );
    // The run carries the measured demand, so the sizing page can answer from it.
    let runs = c
        .app
        .api(&user.token)
        .json("/api/v1/benchmarks?source=local&suite=tf_cnn_benchmarks")
        .await;
    let recorded = &runs["runs"][0];
    let demand = recorded["metrics"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["name"] == "storage_mb_per_s"))
        .unwrap_or_else(|| panic!("no storage_mb_per_s: {recorded}"));
    assert!(
        (demand["value"].as_f64().unwrap_or(0.0) - RATE_MB).abs() / RATE_MB <= 0.2,
        "{recorded}"
    );
    let advice = c
        .app
        .api(&user.token)
        .json(&format!(
            "/api/v1/sizing?from_run={}&gpus=64&node_mb_per_s={best_fio}",
            recorded["id"]
        ))
        .await;
    let from = format!("run {}:", recorded["id"]);
    assert!(
        advice["mb_per_s_per_gpu"]["from"]
            .as_str()
            .is_some_and(|f| f.starts_with(&from)),
        "{advice}"
    );
    assert_eq!(advice["nodes_needed"]["nodes_to_provision"], 1, "{advice}");

    // The exports: one self-contained HTML file whose SVGs parse, and CSV.
    let (status, html) = c
        .app
        .api(&user.token)
        .text(&format!("/api/v1/campaigns/{first_id}/report.html"))
        .await;
    assert_eq!(status, 200, "{html}");
    assert!(html.starts_with("<!DOCTYPE html>") || html.starts_with("<!doctype html>"));
    for outside in ["http://", "https://", "src=", "<script", "<link", "url("] {
        assert!(
            !html.contains(outside),
            "the report reaches outside: {outside}"
        );
    }
    let mut svgs = 0;
    let mut rest = html.as_str();
    while let Some(start) = rest.find("<svg") {
        let end = rest[start..].find("</svg>").expect("closed svg") + start + "</svg>".len();
        roxmltree::Document::parse(&rest[start..end])
            .unwrap_or_else(|e| panic!("an SVG does not parse: {e}\n{}", &rest[start..end]));
        svgs += 1;
        rest = &rest[end..];
    }
    assert!(svgs >= 1, "no chart in the report");
    let (status, csv) = c
        .app
        .api(&user.token)
        .text(&format!("/api/v1/campaigns/{first_id}/report.csv"))
        .await;
    assert_eq!(status, 200, "{csv}");
    assert_eq!(csv.trim_end().lines().count(), 2, "{csv}");

    // Another user sees none of it.
    let other = c.user("otto").await;
    let (status, _) = c
        .app
        .api(&other.token)
        .text(&format!("/api/v1/campaigns/{first_id}"))
        .await;
    assert_eq!(status, 404);

    // The same template, its program 10 % slower: the point is flagged.
    let (status, second) = c
        .app
        .api(&user.token)
        .post("/api/v1/campaigns", training(1.1))
        .await;
    assert_eq!(status, 201, "{second}");
    let second_id = second["id"].as_i64().expect("id");
    let report = finished(&c, &user, second_id, Duration::from_secs(240)).await;
    assert_eq!(report["previous"].as_i64(), Some(first_id), "{report}");
    let point = &report["report"]["points"][0];
    assert_eq!(point["previous"]["slower"], true, "{point}");
    let change = point["previous"]["change_percent"]
        .as_f64()
        .expect("change");
    assert!((-14.0..=-6.0).contains(&change), "{change}: {point}");
    assert_eq!(report["report"]["slower"], 1, "{report}");
    // And the first, against nothing before it, flags nothing.
    let again = c
        .app
        .api(&user.token)
        .json(&format!("/api/v1/campaigns/{first_id}"))
        .await;
    assert_eq!(again["report"]["slower"], 0, "{again}");

    // The command line shows it.
    let mut show = client(&c, &user.token, &user.home, &atrium_bin());
    show.args(["campaign", "show", &second_id.to_string()]);
    let (ok, out, err) = run(show);
    assert!(ok, "{err}");
    assert!(out.contains("SLOWER"), "{out}");
    assert!(out.contains("1 points are more than 5% slower"), "{out}");
    let mut show = client(&c, &other.token, &other.home, &atrium_bin());
    show.args(["campaign", "show", &second_id.to_string()]);
    let (ok, _, err) = run(show);
    assert!(!ok);
    assert!(
        err.contains(&format!("no campaign {second_id} of yours")),
        "{err}"
    );
}
