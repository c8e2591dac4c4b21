//! Admission limits like Slurm's: a cluster-wide `MaxJobCount` (429, try later) and
//! a default most jobs per user (400 naming the limit), nothing stored when refused.

use serde_json::{json, Value};

use crate::fixtures::{cluster_config, private_root, spawn_with, JobCluster, Options};

#[tokio::test]
async fn max_job_count_and_the_per_user_default_refuse_naming_the_limit() {
    let root = private_root();
    let config = cluster_config(root.path(), 0).replace(
        "[jobs]\n",
        "[jobs]\nmax_job_count = 3\nmax_submitted_jobs_per_user = 2\n",
    );
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    let c = JobCluster::on(app, root);
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;
    let held = json!({"script": "#!/bin/sh\n#SBATCH -H\ntrue\n"});
    for _ in 0..2 {
        assert_eq!(c.submit(&alice, held.clone()).await.status(), 201);
    }
    let res = c.submit(&alice, held.clone()).await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("AssocMaxSubmitJobLimit"),
        "{body}"
    );
    assert_eq!(c.submit(&bob, held.clone()).await.status(), 201);
    let res = c.submit(&bob, held.clone()).await;
    assert_eq!(res.status(), 429);
    assert_eq!(
        res.headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("60")
    );
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"], "queue_full", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("MaxJobCount"),
        "{body}"
    );
    let all: Value = c
        .app
        .get_bearer("/api/v1/jobs?state=all", &bob.token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(all["jobs"].as_array().map_or(0, Vec::len), 1, "{all}");
}
