//! Crash safety: `kill -9` of the portal during a burst of concurrent submissions
//! and while jobs run. After a restart every acknowledged job exists, running jobs
//! kept running and are recorded with their real exit codes, and no job ran twice.

use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::JobCluster;

/// Each run appends a line to a marker named after the job: a job that ran twice
/// leaves two lines.
const MARKED: &str =
    "#!/bin/bash\n#SBATCH --gres=gpu:1\necho ran >> \"$HOME/marker-$SLURM_JOB_ID\"\n";

#[tokio::test]
async fn nothing_acknowledged_is_lost_and_nothing_runs_twice_across_a_kill_9() {
    let mut c = JobCluster::start(4).await;
    let alice = c.user("alice").await;
    // Two long jobs that will be running when the portal dies.
    let long_script = "#!/bin/bash\n#SBATCH --gres=gpu:1\necho ran >> \"$HOME/marker-$SLURM_JOB_ID\"\nsleep 6\nexit 7\n";
    let long_a = c.sbatch(&alice, long_script).await;
    let long_b = c.sbatch(&alice, long_script).await;
    c.wait_for(&alice, &long_a, &["RUNNING"], Duration::from_secs(30))
        .await;
    c.wait_for(&alice, &long_b, &["RUNNING"], Duration::from_secs(30))
        .await;

    // A burst of concurrent submissions; the portal is killed in the middle of it.
    let url = c.app.url("/api/v1/jobs");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut clients = Vec::new();
    for _ in 0..8 {
        let (url, token, tx, home) = (
            url.clone(),
            alice.token.clone(),
            tx.clone(),
            alice.home.clone(),
        );
        clients.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            for _ in 0..40 {
                let res = client
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&json!({"script": MARKED, "working_directory": home}))
                    .send()
                    .await;
                match res {
                    Ok(r) if r.status() == 201 => {
                        let body: Value = r.json().await.expect("json");
                        let _ = tx.send(body["id"].as_str().expect("id").to_string());
                    }
                    _ => break,
                }
            }
        }));
    }
    drop(tx);
    let mut acked = Vec::new();
    while acked.len() < 60 {
        match rx.recv().await {
            Some(id) => acked.push(id),
            None => break,
        }
    }
    c.app.kill9();
    for client in clients {
        let _ = client.await;
    }
    while let Ok(id) = rx.try_recv() {
        acked.push(id);
    }
    assert!(
        acked.len() >= 60,
        "the burst was acknowledged before the kill"
    );

    c.app.restart();
    // Every acknowledged job exists and runs to the end exactly once.
    for id in &acked {
        let job = c
            .wait_for(
                &alice,
                id,
                &["COMPLETED", "FAILED"],
                Duration::from_secs(120),
            )
            .await;
        assert_eq!(job["state"], "COMPLETED", "{job}");
    }
    // The long jobs were re-adopted and recorded with their real exit codes.
    for id in [&long_a, &long_b] {
        let job = c
            .wait_for(
                &alice,
                id,
                &["FAILED", "COMPLETED"],
                Duration::from_secs(60),
            )
            .await;
        assert_eq!(job["state"], "FAILED", "{job}");
        assert_eq!(job["exit_code"], 7, "{job}");
    }
    for id in acked.iter().chain([&long_a, &long_b]) {
        let marker = std::fs::read_to_string(alice.home.join(format!("marker-{id}")))
            .unwrap_or_else(|e| panic!("job {id} never ran: {e}"));
        assert_eq!(
            marker.lines().count(),
            1,
            "job {id} ran {} times",
            marker.lines().count()
        );
    }
    let all: Value = c
        .app
        .get_bearer("/api/v1/jobs?state=all&per_page=10000", &alice.token)
        .await
        .json()
        .await
        .expect("json");
    let total = all["total"].as_u64().expect("total") as usize;
    assert!(
        total >= acked.len() + 2,
        "{total} jobs recorded for {} acknowledged",
        acked.len() + 2
    );
}
