//! The whole portal on PostgreSQL instead of SQLite.

use std::time::Duration;

use atrium_tests::support::fresh_database;
use serde_json::json;

use crate::fixtures::{spawn_with, JobCluster, Options};

#[tokio::test]
async fn portal_runs_on_postgres() {
    let db = fresh_database().await.expect("postgres database");
    let app = spawn_with(Options {
        database_url: Some(db.url.clone()),
        ..Options::default()
    })
    .await;
    let password = app
        .admin_password
        .clone()
        .expect("admin created on first start");
    assert_eq!(
        reqwest::get(app.url("/readyz"))
            .await
            .expect("ready")
            .status(),
        200
    );
    let client = app.login("admin", &password).await;
    let token = app.create_token(&client, "pg", &["read"]).await;
    let me: serde_json::Value = app
        .get_bearer("/api/v1/me", &token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(me["username"], "admin");
    assert_eq!(me["admin"], true);
    assert!(!std::path::Path::new(&app.data_dir.path().join("var/atrium.db")).exists());
}

/// Jobs on PostgreSQL: they run, their queue and log survive a `kill -9` of the portal,
/// a job running across it is re-adopted with its real exit code, a held job stays held,
/// and job ids keep increasing.
#[tokio::test]
async fn jobs_run_and_survive_a_kill_9_on_postgres() {
    let db = fresh_database().await.expect("postgres database");
    let mut c = JobCluster::start_on(2, Some(db.url.clone())).await;
    let alice = c.user("alice").await;
    let done = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --gres=gpu:1\necho first\n")
        .await;
    let across = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH --gres=gpu:1\nsleep 3\nexit 7\n",
        )
        .await;
    let res = c
        .submit(
            &alice,
            json!({"wrap": "true", "options": {"hold": true}, "working_directory": alice.home}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let held: serde_json::Value = res.json().await.expect("json");
    let held = held["id"].as_str().expect("id").to_string();
    let first = c
        .wait_for(
            &alice,
            &done,
            &["COMPLETED", "FAILED"],
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(first["state"], "COMPLETED", "{first}");
    c.wait_for(&alice, &across, &["RUNNING"], Duration::from_secs(60))
        .await;

    c.app.kill9();
    c.app.restart();

    let ended = c
        .wait_for(
            &alice,
            &across,
            &["FAILED", "COMPLETED"],
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(ended["exit_code"], 7, "{ended}");
    assert_eq!(c.job(&alice, &done).await["state"], "COMPLETED");
    let still = c.job(&alice, &held).await;
    assert_eq!(still["state"], "PENDING", "{still}");
    assert_eq!(still["reason"], "JobHeldUser", "{still}");
    let next = c.sbatch(&alice, "#!/bin/bash\ntrue\n").await;
    let n = |id: &str| id.parse::<u64>().expect("numeric id");
    assert!(
        n(&next) > n(&held) && n(&held) > n(&across),
        "{next} after {held}"
    );
    assert!(
        !std::path::Path::new(&c.app.data_dir.path().join("var/atrium.db")).exists(),
        "nothing went to SQLite"
    );
}

#[tokio::test]
async fn readiness_without_its_database_says_so_and_nothing_of_the_cause() {
    let db = fresh_database().await.expect("postgres database");
    let app = spawn_with(Options {
        database_url: Some(db.url.clone()),
        ..Options::default()
    })
    .await;
    assert_eq!(
        reqwest::get(app.url("/readyz"))
            .await
            .expect("ready")
            .status(),
        200
    );
    // The database refuses the portal from now on.
    db.psql_admin(&format!(
        "ALTER DATABASE \"{0}\" ALLOW_CONNECTIONS false; \
         SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = '{0}' AND pid <> pg_backend_pid()",
        db.name
    ))
    .await
    .expect("psql");
    let body = atrium_tests::support::until("readiness fails", Duration::from_secs(30), || async {
        let res = reqwest::get(app.url("/readyz")).await.ok()?;
        if res.status() != 503 {
            return None;
        }
        res.text().await.ok()
    })
    .await
    .expect("readiness fails");
    // An anonymous caller learns that a service is unavailable, not what it said.
    for secret in [db.name.as_str(), "connection", "terminat", "postgres"] {
        assert!(!body.contains(secret), "{secret}: {body}");
    }
}
