//! Job efficiency: the step supervisor samples a job's CPU time and memory while it
//! runs; `GET /jobs/{id}/efficiency` and `atrium seff` show them, during the run and
//! once it is over; another user's job is not found; the idle-GPU list is for
//! administrators.

use std::time::Duration;

use serde_json::Value;

use crate::fixtures::cli::{client, run};
use crate::fixtures::{atrium_bin, JobCluster};

/// Keeps one core busy for about four seconds holding 200 MiB, then rests a second.
const WORK: &str = "#!/bin/bash
#SBATCH -c 2
#SBATCH --mem=1G
python3 - <<'PY'
import time
held = b'x' * (200 << 20)
end = time.time() + 4
n = 0
while time.time() < end:
    n += 1
PY
sleep 1
";

#[tokio::test]
async fn a_jobs_cpu_and_memory_are_sampled_while_it_runs_and_shown_once_it_is_over() {
    let c = JobCluster::start_with_jobs(0, "usage_interval_seconds = 1").await;
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;
    let id = c.sbatch(&alice, WORK).await;

    // While it runs: samples with CPU time, not final.
    let running = atrium_tests::support::until(
        "a sample of the running job",
        Duration::from_secs(60),
        || async {
            let (status, e) = c
                .app
                .api(&alice.token)
                .get(&format!("/api/v1/jobs/{id}/efficiency"))
                .await;
            assert_eq!(status, 200, "{e}");
            (e["source"] == "atrium" && e["cpu_seconds"].as_f64().unwrap_or(0.0) > 0.5).then_some(e)
        },
    )
    .await
    .expect("sampled while running");
    assert_eq!(running["complete"], false, "{running}");
    assert_eq!(running["state"], "RUNNING", "{running}");
    assert!(
        !running["series"]["points"]
            .as_array()
            .expect("points")
            .is_empty(),
        "{running}"
    );

    let job = c.wait_ended(&alice, &id, Duration::from_secs(60)).await;
    assert_eq!(job["state"], "COMPLETED", "{job}");
    // Its end recorded, its step directory (spec, script, state, samples) goes.
    let spool = c.root.path().join("spool");
    atrium_tests::support::until(
        "the ended step's directory to go",
        Duration::from_secs(30),
        || {
            let left: Vec<String> = std::fs::read_dir(&spool)
                .map(|d| {
                    d.flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| *n == id || n.starts_with(".ended-"))
                        .collect()
                })
                .unwrap_or_default();
            async move { left.is_empty().then_some(()) }
        },
    )
    .await
    .expect("the step directory removed");
    let (status, e) = c
        .app
        .api(&alice.token)
        .get(&format!("/api/v1/jobs/{id}/efficiency"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(e["complete"], true, "{e}");
    assert_eq!(e["cpus"], 2, "{e}");
    assert_eq!(e["memory_requested_bytes"], 1u64 << 30, "{e}");
    let cpu = e["cpu_seconds"].as_f64().expect("cpu_seconds");
    assert!((3.0..=12.0).contains(&cpu), "one core for about 4 s: {e}");
    let rss = e["max_rss_bytes"].as_u64().expect("max_rss_bytes");
    assert!(
        (200u64 << 20..1u64 << 30).contains(&rss),
        "the 200 MiB it held: {e}"
    );
    let pct = e["cpu_efficiency_percent"]
        .as_f64()
        .expect("cpu efficiency");
    assert!((10.0..=100.0).contains(&pct), "{e}");
    let mem_pct = e["memory_efficiency_percent"]
        .as_f64()
        .expect("memory efficiency");
    assert!((19.0..100.0).contains(&mem_pct), "{e}");
    assert_eq!(e["gpus"], serde_json::json!([]), "no GPU here: {e}");

    // seff prints the same figures in Slurm's layout.
    let mut seff = client(&c, &alice.token, &alice.home, &atrium_bin());
    seff.args(["seff", &id]);
    let (ok, out, err) = run(seff);
    assert!(ok, "{err}");
    assert!(out.starts_with(&format!("Job ID: {id}\n")), "{out}");
    assert!(out.contains("State: COMPLETED (exit code 0)\n"), "{out}");
    assert!(out.contains("Cores per node: 2\n"), "{out}");
    assert!(
        out.contains(&format!("CPU Efficiency: {pct:.2}% of ")),
        "{out}"
    );
    assert!(
        out.contains("Memory Efficiency: ") && out.contains("% of 1.00 GB\n"),
        "{out}"
    );
    assert!(!out.contains("WARNING"), "{out}");

    // Another user's job is not found, by the API and by seff.
    let (status, _) = c
        .app
        .api(&bob.token)
        .get(&format!("/api/v1/jobs/{id}/efficiency"))
        .await;
    assert_eq!(status, 404);
    let mut seff = client(&c, &bob.token, &bob.home, &atrium_bin());
    seff.args(["seff", &id]);
    let (ok, _, err) = run(seff);
    assert!(!ok);
    assert!(
        err.contains(&format!("seff: error: Job not found: {id}")),
        "{err}"
    );

    // The job page shows the figures and a chart per resource.
    let browser = c.app.login("alice", "password-of-some-length").await;
    let html = browser
        .get(c.app.url(&format!("/jobs/{id}")))
        .send()
        .await
        .expect("job page")
        .text()
        .await
        .expect("html");
    assert!(html.contains("id=\"efficiency\""), "{html}");
    assert!(html.contains("<dt>Peak memory</dt>"), "{html}");
    let points = html
        .split("id=\"usage-cpu\"")
        .nth(1)
        .and_then(|rest| rest.split("points=\"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .expect("the CPU chart's points");
    assert!(points.split(' ').count() >= 3, "{points}");
    assert!(html.contains("id=\"usage-memory\""), "{html}");
    assert!(
        !html.contains("id=\"usage-gpu\""),
        "no GPU readings: {html}"
    );

    // The idle-GPU list is the administrators': none held a GPU here.
    let res = c
        .app
        .get_bearer("/api/v1/admin/idle-gpus", &alice.token)
        .await;
    assert_eq!(res.status(), 403);
    let admin = c
        .app
        .login("admin", c.app.admin_password.as_deref().expect("pw"))
        .await;
    let token = c.app.create_token(&admin, "ops", &["admin"]).await;
    let res = c.app.get_bearer("/api/v1/admin/idle-gpus", &token).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.json::<Value>().await.expect("json"),
        serde_json::json!([])
    );
    let page = admin
        .get(c.app.url("/admin/idle-gpus"))
        .send()
        .await
        .expect("idle page")
        .text()
        .await
        .expect("html");
    // Declared GPUs here report no utilisation: no false all-clear.
    assert!(!page.contains("id=\"idle-gpus-empty\""), "{page}");
    assert!(
        page.contains("id=\"idle-gpus-unmeasured\"") && page.contains("not measured here"),
        "{page}"
    );
}
