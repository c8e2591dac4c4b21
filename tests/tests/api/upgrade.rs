//! Upgrading: the current binary on a data directory written by the previous release
//! (tests/fixtures/upgrade/0.1.0-6741d0a, made by its make.sh with that release's
//! binary) migrates it and serves it: the accounts log in, the token works, every job
//! keeps its state, owner and name, the held job runs once released and its dependent
//! after it, sacct answers for the old jobs, and every migration is applied.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::fixtures::{atrium_command, eventually, spawn_on_config};

/// The previous release's data directory.
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/upgrade/0.1.0-6741d0a")
}

/// What make.sh recorded: passwords, tokens, job ids.
fn facts() -> Value {
    let text = std::fs::read_to_string(fixture().join("fixture.json")).expect("fixture.json");
    serde_json::from_str(&text).expect("fixture.json is JSON")
}

/// A copy of the fixture as the data directory of a configuration with the fixture's
/// own `[cluster]` (one node, `upgrade-node`, the restored jobs fit on).
fn data_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let var = dir.path().join("var");
    std::fs::create_dir(&var).expect("data dir");
    std::fs::set_permissions(&var, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    for file in ["atrium.db", "jwt.key"] {
        std::fs::copy(fixture().join(file), var.join(file)).expect("copy the fixture");
        std::fs::set_permissions(var.join(file), std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
    }
    let config = dir.path().join("atrium.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n\
             [jobs]\nruntime = \"none\"\nkill_grace_seconds = 1\n\
             [accounts]\ncreate_homes = false\ntemplates = false\n\
             [cluster]\nnode_name = \"upgrade-node\"\ncpus = 4\nmemory_mb = 4096\ndiscover_gpus = false\n",
            var.display()
        ),
    )
    .expect("write config");
    (dir, config)
}

/// `atrium doctor --json`'s database finding.
fn doctor_database(config: &Path) -> Value {
    let out = atrium_command()
        .arg("--config")
        .arg(config)
        .args(["doctor", "--json"])
        .output()
        .expect("doctor");
    let report: Value = serde_json::from_slice(&out.stdout).expect("doctor's JSON");
    report["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|f| f["check"] == "database"))
        .cloned()
        .unwrap_or_else(|| panic!("no database check: {report:#}"))
}

#[test]
fn doctor_reports_the_pending_migrations_of_the_previous_releases_database() {
    let (_dir, config) = data_dir();
    let database = doctor_database(&config);
    assert_eq!(database["status"], "warning", "{database:#}");
    let finding = database["finding"].as_str().unwrap_or_default();
    assert!(
        finding.starts_with("4 of ") && finding.contains("pending: 0006 admin"),
        "{finding}"
    );
    assert!(
        database["fix"]
            .as_str()
            .is_some_and(|f| f.starts_with("atrium migrate")),
        "{database:#}"
    );
}

#[tokio::test]
async fn the_previous_releases_data_directory_is_migrated_and_served() {
    let facts = facts();
    let (dir, config) = data_dir();
    let app = spawn_on_config(dir, config.clone()).await;
    assert_eq!(
        app.admin_password, None,
        "a first administrator was made again"
    );

    for (user, password) in facts["passwords"].as_object().expect("passwords") {
        let password = password.as_str().expect("password");
        assert_eq!(app.api_login(user, password).await.0, 200, "{user} logs in");
        assert_eq!(
            app.api_login(user, "wrong").await.0,
            401,
            "{user} with a wrong password"
        );
    }
    let alice = facts["tokens"]["alice"].as_str().expect("alice's token");
    let bob = facts["tokens"]["bob"].as_str().expect("bob's token");
    let me = app.api(alice).json("/api/v1/me").await;
    assert_eq!(me["username"], "alice", "{me}");

    // Every job as the old release left it: state, owner, name.
    let id = |name: &str| facts["jobs"][name].as_str().expect("job id").to_string();
    let expected = [
        ("completed", alice, "alice", "prepare-data", "COMPLETED"),
        ("failed", alice, "alice", "train-broken", "FAILED"),
        ("cancelled", alice, "alice", "too-long", "CANCELLED"),
        ("held", alice, "alice", "evaluate", "PENDING"),
        ("dependent", alice, "alice", "report", "PENDING"),
    ];
    let listed = app.api(alice).json("/api/v1/jobs?state=all").await;
    let listed = listed["jobs"].as_array().cloned().unwrap_or_default();
    for (which, token, user, name, state) in expected {
        let j = app.api(token).job(&id(which)).await;
        assert_eq!(
            (j["user"].as_str(), j["name"].as_str(), j["state"].as_str()),
            (Some(user), Some(name), Some(state)),
            "{which}: {j:#}"
        );
        assert!(
            listed.iter().any(|l| l["id"] == j["id"]),
            "{which} is not in the list: {listed:#?}"
        );
    }
    assert_eq!(
        app.api(alice).job(&id("held")).await["reason"],
        "JobHeldUser"
    );
    assert_eq!(
        app.api(alice).job(&id("dependent")).await["reason"],
        "Dependency"
    );
    for task in 0..3 {
        let j = app.api(bob).job(&format!("{}_{task}", id("array"))).await;
        assert_eq!(
            (j["user"].as_str(), j["name"].as_str(), j["state"].as_str()),
            (Some("bob"), Some("sweep"), Some("COMPLETED")),
            "array task {task}: {j:#}"
        );
    }

    // sacct answers for the old jobs, in Slurm's columns.
    let out = atrium_command()
        .args(["sacct", "-X", "-n", "-j"])
        .arg(format!(
            "{},{},{}",
            id("completed"),
            id("failed"),
            id("cancelled")
        ))
        .env("ATRIUM_URL", &app.base)
        .env("ATRIUM_TOKEN", alice)
        .output()
        .expect("sacct");
    let sacct = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{sacct}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (which, state) in [
        ("completed", "COMPLETED"),
        ("failed", "FAILED"),
        ("cancelled", "CANCELLED"),
    ] {
        assert!(
            sacct
                .lines()
                .any(|l| l.split_whitespace().next() == Some(id(which).as_str())
                    && l.contains(state)),
            "{which} in sacct:\n{sacct}"
        );
    }

    // The held job runs once released, on the fixture's node, and its dependent after.
    let res = reqwest::Client::new()
        .post(app.url(&format!("/api/v1/jobs/{}/release", id("held"))))
        .bearer_auth(alice)
        .send()
        .await
        .expect("release");
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    for which in ["held", "dependent"] {
        let jid = id(which);
        eventually(
            &format!("{which} completes"),
            Duration::from_secs(30),
            || {
                let app = &app;
                let jid = jid.clone();
                async move { app.api(alice).job(&jid).await["state"] == "COMPLETED" }
            },
        )
        .await;
    }

    // The migrations table now has every migration of this binary.
    let database = doctor_database(&config);
    assert_eq!(database["status"], "ok", "{database:#}");
    assert!(
        database["finding"]
            .as_str()
            .is_some_and(|f| f.starts_with("every migration applied")),
        "{database:#}"
    );
}
