//! The administrators' views and the GPU map end to end (issue 25): a quota for a
//! user or group that does not exist is refused naming the field, by the API and the
//! page, and nothing is stored; the audit log's filters round-trip through the
//! address and a bad one is a 400 naming it, its changes read as fields before and
//! after; the actor of a command-line or token action is who did it; the user search
//! and detail page; the GPU map's legend and states, with GPU discovery on and off.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::fixtures::quotas::admin_token;
use crate::fixtures::{
    atrium_command, cluster_config, private_root, spawn_with, JobCluster, Options,
};

const RUN: Duration = Duration::from_secs(60);

async fn quota_count(c: &JobCluster, admin: &str) -> usize {
    let (status, list) = c.app.api(admin).get("/api/v1/admin/quotas").await;
    assert_eq!(status, 200, "{list}");
    list["quotas"].as_array().map_or(0, Vec::len)
}

#[tokio::test]
async fn a_quota_for_someone_who_does_not_exist_is_refused_naming_the_field() {
    let c = JobCluster::start(0).await;
    let admin = admin_token(&c).await;
    c.user_in("ann", &["vision"]).await;
    for (scope, name) in [("user", "nobody"), ("group", "nogroup")] {
        let (status, answer) = c
            .app
            .api(&admin)
            .post(
                "/api/v1/admin/quotas",
                json!({"scope": scope, "name": name, "limits": {"max_gpus": 1}}),
            )
            .await;
        assert_eq!(status, 400, "{scope} {name}: {answer}");
        assert_eq!(answer["field"], "name", "{answer}");
        let message = answer["message"].as_str().unwrap_or("");
        assert!(
            message.starts_with("name: ") && message.contains(name),
            "{message}"
        );
    }
    assert_eq!(quota_count(&c, &admin).await, 0, "nothing stored");
    // The page: the form again, with the error in words and what was typed.
    let (client, csrf) = c.app.admin_browser().await;
    let res = client
        .post(c.app.url("/admin/quotas"))
        .form(&[
            ("csrf", csrf.as_str()),
            ("scope", "user"),
            ("name", "nobody"),
            ("max_gpus", "1"),
        ])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let html = res.text().await.expect("html");
    assert!(
        html.contains("User, group or account: there is no user &#34;nobody&#34;"),
        "{html}"
    );
    assert!(html.contains("name=\"name\" value=\"nobody\""), "{html}");
    assert_eq!(
        quota_count(&c, &admin).await,
        0,
        "nothing stored by the page"
    );
    // Who exists gets a quota, through either.
    for (scope, name) in [("user", "ann"), ("group", "vision")] {
        let (status, answer) = c
            .app
            .api(&admin)
            .post(
                "/api/v1/admin/quotas",
                json!({"scope": scope, "name": name, "limits": {"max_gpus": 1}}),
            )
            .await;
        assert_eq!(status, 201, "{scope} {name}: {answer}");
    }
    assert_eq!(quota_count(&c, &admin).await, 2);
}

#[tokio::test]
async fn audit_filters_round_trip_and_a_bad_value_is_a_400_naming_it() {
    let c = JobCluster::start(0).await;
    let admin = admin_token(&c).await;
    c.user("ann").await;
    c.user("cy").await;
    let mut ids = Vec::new();
    for name in ["ann", "cy"] {
        let (status, body) = c
            .app
            .api(&admin)
            .post(
                "/api/v1/admin/quotas",
                json!({"scope": "user", "name": name, "limits": {"max_gpus": 2}}),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        ids.push(body["id"].as_i64().expect("id"));
    }
    let (status, body) = c
        .app
        .api(&admin)
        .send(
            reqwest::Method::PUT,
            &format!("/api/v1/admin/quotas/{}", ids[0]),
            Some(json!({"limits": {"max_gpus": 4, "max_sessions": 1}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (client, _) = c.app.admin_browser().await;
    let (status, html) = c
        .app
        .page(
            &client,
            "/admin/audit?action=quota.update&target=user+ann&from=2020-01-01",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(
        html.contains("name=\"action\" value=\"quota.update\""),
        "{html}"
    );
    assert!(
        html.contains("name=\"target\" value=\"user ann\""),
        "{html}"
    );
    assert!(
        html.contains("name=\"from\" type=\"date\" value=\"2020-01-01\""),
        "{html}"
    );
    assert!(
        html.contains("format=csv&#38;limit=100000&#38;action=quota.update&#38;target=user%20ann&#38;from=2020-01-01"),
        "the CSV link keeps the filter: {html}"
    );
    assert_eq!(html.matches("<tr id=\"audit-").count(), 1, "{html}");
    assert!(!html.contains("user cy"), "{html}");
    // The change as fields before and after, not JSON.
    assert!(html.contains("<dt>Most GPUs at once</dt>"), "{html}");
    assert!(
        html.contains("<span class=\"was\">2</span> → <span class=\"now\">4</span>"),
        "{html}"
    );
    assert!(!html.contains("{&#34;max_gpus"), "{html}");
    // The API reads the same filter.
    let (status, answer) = c
        .app
        .api(&admin)
        .get("/api/v1/admin/audit?target=user%20cy")
        .await;
    assert_eq!(status, 200, "{answer}");
    let entries = answer["entries"].as_array().cloned().unwrap_or_default();
    assert_eq!(entries.len(), 1, "{answer}");
    assert_eq!(entries[0]["action"], "quota.create", "{answer}");
    // A bad value: 400, naming the parameter, on the page and in the API.
    let (status, html) = c.app.page(&client, "/admin/audit?from=yesterday").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{html}");
    assert!(
        html.contains("The filter&#39;s from is not valid")
            || html.contains("The filter's from is not valid"),
        "{html}"
    );
    let (status, answer) = c
        .app
        .api(&admin)
        .get("/api/v1/admin/audit?to=2026-13-40")
        .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["field"], "to", "{answer}");
}

/// The account this test runs as, and whoever ran it through sudo, as the command
/// line's audit entries name them.
fn command_line_actor() -> String {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .expect("id -un");
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let uid = std::process::Command::new("id")
        .arg("-u")
        .output()
        .expect("id -u");
    let root = String::from_utf8_lossy(&uid.stdout).trim() == "0";
    match std::env::var("SUDO_USER") {
        Ok(by) if root && !by.trim().is_empty() => format!("{} (command line, sudo)", by.trim()),
        _ => format!("{name} (command line)"),
    }
}

#[tokio::test]
async fn the_audit_actor_of_a_command_line_or_token_action_is_who_did_it() {
    let c = JobCluster::start(0).await;
    let admin = admin_token(&c).await;
    // `atrium user add` from the command line, run without $USER (as from a unit or
    // a cron job), where the log used to say `cli:unknown`.
    let out = {
        use std::io::Write;
        let mut child = atrium_command()
            .arg("--config")
            .arg(&c.app.config_path)
            .args(["user", "add", "dee"])
            .env_remove("USER")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("atrium user add");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(b"password-of-some-length\n")
            .expect("password");
        child.wait_with_output().expect("output")
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A token's action.
    let (status, body) = c
        .app
        .api(&admin)
        .post(
            "/api/v1/admin/quotas",
            json!({"scope": "user", "name": "dee", "limits": {"max_gpus": 1}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (_, answer) = c.app.api(&admin).get("/api/v1/admin/audit").await;
    let entries = answer["entries"].as_array().cloned().unwrap_or_default();
    let actor_of = |action: &str| -> Vec<String> {
        entries
            .iter()
            .filter(|e| {
                e["action"] == action && e["target"].as_str().is_some_and(|t| t.contains("dee"))
            })
            .map(|e| e["actor"].as_str().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(actor_of("user.add"), [command_line_actor()], "{answer}");
    assert_eq!(actor_of("quota.create"), ["admin"], "{answer}");
    for e in &entries {
        let actor = e["actor"].as_str().unwrap_or("");
        assert!(
            !actor.contains("unknown") && !actor.starts_with("cli:"),
            "{e}"
        );
    }
}

#[tokio::test]
async fn the_user_search_and_detail_page_show_the_account_and_its_job() {
    let c = JobCluster::start(1).await;
    let ann = c.user_in("ann", &["vision"]).await;
    c.user("bob").await;
    let job = c
        .sbatch(
            &ann,
            "#!/bin/bash\n#SBATCH --job-name=detail-probe\nsleep 300\n",
        )
        .await;
    c.wait_for(&ann, &job, &["RUNNING"], RUN).await;
    let (client, _) = c.app.admin_browser().await;
    let (status, html) = c.app.page(&client, "/admin/users?q=AN").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("href=\"/admin/users/ann\""), "{html}");
    assert!(!html.contains("href=\"/admin/users/bob\""), "{html}");
    assert!(html.contains("name=\"q\" value=\"AN\""), "{html}");
    let (status, html) = c.app.page(&client, "/admin/users/ann").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains("<h1>ann</h1>"), "{html}");
    assert!(html.contains(&format!("uid {}", ann.uid)), "{html}");
    assert!(html.contains("vision"), "{html}");
    assert!(html.contains(&format!("href=\"/jobs/{job}\"")), "{html}");
    assert!(html.contains("detail-probe"), "{html}");
    assert!(html.contains("id=\"user-month\""), "{html}");
    let (status, _) = c.app.page(&client, "/admin/users/nobody").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    c.cancel(&ann, &job).await;
}

async fn gpu_map(c: &JobCluster, token: &str) -> Value {
    let (status, map) = c.app.api(token).get("/api/v1/cluster/gpus").await;
    assert_eq!(status, 200, "{map}");
    map
}

fn states(map: &Value) -> Vec<String> {
    map["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["gpus"].as_array().cloned().unwrap_or_default())
        .flat_map(|g| g["slices"].as_array().cloned().unwrap_or_default())
        .map(|s| s["state"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn the_gpu_map_shows_its_legend_and_each_state_with_discovery_off() {
    let c = JobCluster::start(2).await;
    let admin = admin_token(&c).await;
    let ann = c.user("ann").await;
    let (client, _) = c.app.admin_browser().await;
    let (_, html) = c.app.page(&client, "/cluster").await;
    assert!(html.contains("id=\"gpu-legend\""), "{html}");
    assert!(html.contains(">F</span> free"), "{html}");
    assert!(html.contains(">U</span> in use"), "{html}");
    assert!(
        !html.contains("absent"),
        "discovery is off: nothing is absent: {html}"
    );
    assert!(html.contains("2 of 2 A100-80GB free"), "{html}");
    assert!(
        html.contains("gpu: 2 CPU cores and 2 GiB of memory per GPU"),
        "{html}"
    );
    assert!(html.contains("/static/js/gpu-map.js"), "{html}");
    assert_eq!(states(&gpu_map(&c, &ann.token).await), ["free", "free"]);
    let job = c
        .sbatch(
            &ann,
            "#!/bin/bash\n#SBATCH --gres=gpu:1 --job-name=on-the-map\nsleep 300\n",
        )
        .await;
    c.wait_for(&ann, &job, &["RUNNING"], RUN).await;
    let map = gpu_map(&c, &ann.token).await;
    assert_eq!(states(&map), ["used", "free"], "{map}");
    let held = &map["nodes"][0]["gpus"][0]["slices"][0];
    assert_eq!(held["holder"]["user"], "ann", "{map}");
    assert_eq!(
        held["describe"],
        format!("GPU 0: in use by job {job} (on-the-map) of ann"),
        "{map}"
    );
    assert_eq!(map["types"][0]["free"], 1, "{map}");
    // The page says the same on hover and focus.
    let (_, html) = c.app.page(&client, "/cluster").await;
    assert!(
        html.contains(&format!(
            "title=\"GPU 0: in use by job {job} (on-the-map) of ann\""
        )),
        "{html}"
    );
    // A drained node: its free GPU is drained, its busy one still in use.
    let (status, body) = c
        .app
        .api(&admin)
        .post("/api/v1/admin/nodes/head/drain", json!({"reason": "fan"}))
        .await;
    assert!(status.as_u16() < 300, "{body}");
    assert_eq!(states(&gpu_map(&c, &ann.token).await), ["used", "drained"]);
    c.cancel(&ann, &job).await;
}

#[tokio::test]
async fn a_declared_gpu_that_discovery_did_not_find_is_absent() {
    let root = private_root();
    // Discovery on, and a GPU at an index no machine here has.
    let config = cluster_config(root.path(), 0)
        .replace("discover_gpus = false", "discover_gpus = true")
        + "[[cluster.gpus]]\nindex = 63\nmodel = \"A100-80GB\"\nmemory_mb = 81920\n";
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    let c = JobCluster::on(app, root);
    let ann = c.user("ann").await;
    let map = gpu_map(&c, &ann.token).await;
    let cells: Vec<(String, String)> = map["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["gpus"].as_array().cloned().unwrap_or_default())
        .flat_map(|g| g["slices"].as_array().cloned().unwrap_or_default())
        .map(|s| {
            (
                s["label"].as_str().unwrap_or("").to_string(),
                s["state"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        cells.contains(&("GPU 63".to_string(), "absent".to_string())),
        "{map}"
    );
    let client = c.app.login("ann", "password-of-some-length").await;
    let (_, html) = c.app.page(&client, "/cluster").await;
    assert!(
        html.contains(">A</span> absent (declared, not found by nvidia-smi)"),
        "{html}"
    );
    assert!(html.contains("class=\"slice absent\""), "{html}");
}
