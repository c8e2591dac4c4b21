//! `atrium backup` while the portal takes submissions, and `atrium restore` into a new
//! data directory: the portal started there has every job acknowledged before the
//! backup began, and its users' tokens still work (the key came with it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::fixtures::{atrium_command, spawn_on_config, JobCluster};

const HELD: &str = "#!/bin/bash\n#SBATCH --hold\n#SBATCH --gres=gpu:1\ntrue\n";

#[tokio::test]
async fn a_backup_taken_under_load_restores_every_acknowledged_job() {
    let c = JobCluster::start(1).await;
    let alice = c.user("alice").await;
    let mut acknowledged = Vec::new();
    for _ in 0..30 {
        acknowledged.push(c.sbatch(&alice, HELD).await);
    }

    // Submissions go on while the backup is taken.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, url, token) = (stop.clone(), c.app.url("/api/v1/jobs"), alice.token.clone());
        let body = json!({"script": HELD, "working_directory": alice.home});
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let res = client
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&body)
                    .send()
                    .await
                    .expect("submit");
                assert_eq!(res.status(), 201);
                n += 1;
            }
            n
        })
    };
    // Some of them acknowledged before the backup starts.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let before: Value = c
        .app
        .get_bearer("/api/v1/jobs?per_page=10000", &alice.token)
        .await
        .json()
        .await
        .expect("jobs");
    let acknowledged: Vec<String> = before["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["id"].as_str().expect("id").to_string())
        .collect();
    assert!(acknowledged.len() > 30, "{}", acknowledged.len());

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("atrium-backup.db");
    let backup = {
        let (config, file) = (c.app.config_path.clone(), file.clone());
        tokio::task::spawn_blocking(move || {
            atrium_command()
                .arg("--config")
                .arg(&config)
                .arg("backup")
                .arg(&file)
                .output()
                .expect("atrium backup")
        })
        .await
        .expect("backup task")
    };
    stop.store(true, Ordering::Relaxed);
    let during = load.await.expect("load");
    assert!(
        backup.status.success(),
        "{}",
        String::from_utf8_lossy(&backup.stderr)
    );
    assert!(during > 0);
    for made in [file.clone(), dir.path().join("atrium-backup.db.key")] {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&made)
            .expect("the backup")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{}", made.display());
    }
    // A backup never overwrites one.
    let again = c.app.cli(&["backup", &file.display().to_string()], "");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));

    // Restored into a new data directory, the same configuration otherwise.
    let new_dir = tempfile::tempdir().expect("tempdir");
    let config = std::fs::read_to_string(&c.app.config_path).expect("config");
    let old_data = c.app.data_dir.path().join("var").display().to_string();
    let new_data = new_dir.path().join("var");
    assert!(config.contains(&old_data), "{config}");
    let new_config = new_dir.path().join("atrium.toml");
    std::fs::write(
        &new_config,
        config.replace(&old_data, &new_data.display().to_string()),
    )
    .expect("write config");
    let restore = |file: &std::path::Path| {
        atrium_command()
            .arg("--config")
            .arg(&new_config)
            .arg("restore")
            .arg(file)
            .output()
            .expect("atrium restore")
    };
    let restored = restore(&file);
    assert!(
        restored.status.success(),
        "{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    // Never over a database.
    let over = restore(&file);
    assert!(!over.status.success());
    assert!(String::from_utf8_lossy(&over.stderr).contains("exists"));

    let app = spawn_on_config(new_dir, new_config).await;
    let after: Value = app
        .get_bearer("/api/v1/jobs?per_page=100000", &alice.token)
        .await
        .json()
        .await
        .expect("jobs from the restored portal");
    let restored_ids: std::collections::BTreeSet<&str> = after["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["id"].as_str().expect("id"))
        .collect();
    for id in &acknowledged {
        assert!(restored_ids.contains(id.as_str()), "job {id} was lost");
    }
    drop(app);
}
