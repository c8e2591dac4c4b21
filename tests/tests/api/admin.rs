//! Administration end to end: an administrator's pages show the cluster and change it
//! through their forms, each change in the audit log (page and CSV) with who, what
//! and before and after; a disabled account can neither log in nor use its token
//! until it is enabled again; the lists and a disable on PostgreSQL.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::fixtures::api::json_of;
use crate::fixtures::{
    cluster_config, eventually, private_root, spawn_with, JobCluster, JobUser, Options, PASSWORD,
};

const RUN: Duration = Duration::from_secs(60);

/// A cluster of 2 GPUs whose `waiting` environment starts a session that never
/// becomes ready (it does not serve its socket), so that it can be stopped.
async fn admin_cluster() -> JobCluster {
    let root = private_root();
    let mut config = cluster_config(root.path(), 2);
    config.push_str(
        "[[environments]]\nname = \"waiting\"\nruntime = \"none\"\n\
         command = [\"/bin/sh\", \"-c\", \"exec sleep 300\", \"{socket}\"]\n",
    );
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    JobCluster::on(app, root)
}

/// The audit entry of `action` on `target`, newest first.
fn entry<'a>(entries: &'a [Value], action: &str, target: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["action"] == action && e["target"] == target)
        .unwrap_or_else(|| panic!("no {action} of {target} in {entries:#?}"))
}

#[tokio::test]
async fn an_administrator_changes_the_cluster_through_the_pages_and_every_change_is_audited() {
    let c = admin_cluster().await;
    let app = &c.app;
    let (admin, csrf) = app.admin_browser().await;
    let admin_token = app.create_token(&admin, "admin", &["read", "admin"]).await;
    let ann: JobUser = c.user("ann").await;
    let (ann_browser, ann_csrf) = app.login_csrf("ann", PASSWORD).await;

    // ann runs a job and a session.
    let job = c
        .sbatch(
            &ann,
            "#!/bin/bash\n#SBATCH --gres=gpu:1 --time=10\nsleep 300\n",
        )
        .await;
    c.wait_for(&ann, &job, &["RUNNING"], RUN).await;
    let res = ann_browser
        .post(app.url("/api/v1/sessions"))
        .header("x-csrf-token", &ann_csrf)
        .json(&json!({"name": "waits", "environment": "waiting"}))
        .send()
        .await
        .expect("start session");
    let (status, session) = json_of(res).await;
    assert_eq!(status, 201, "{session}");
    let session_id = session["id"].as_i64().expect("id");

    // What the administrator sees of ann.
    let (status, users) = app.api(&admin_token).get("/api/v1/admin/users").await;
    assert_eq!(status, 200, "{users}");
    let row = users["users"]
        .as_array()
        .expect("users")
        .iter()
        .find(|u| u["username"] == "ann")
        .cloned()
        .expect("ann listed");
    assert_eq!(
        (
            &row["running_jobs"],
            &row["running_sessions"],
            &row["disabled"]
        ),
        (&json!(1), &json!(1), &json!(false)),
        "{row}"
    );
    assert_eq!(row["gpus_in_use"], 1.0, "{row}");
    assert!(row["gpu_hours"].as_f64().unwrap_or(0.0) > 0.0, "{row}");
    assert!(row["last_login"].is_string(), "{row}");
    let admin_row = users["users"]
        .as_array()
        .and_then(|u| u.iter().find(|u| u["username"] == "admin"))
        .cloned()
        .expect("admin listed");
    assert_eq!(admin_row["admin"], true, "{admin_row}");
    let (_, groups) = app.api(&admin_token).get("/api/v1/admin/groups").await;
    let admins = groups["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["name"] == "admin"))
        .cloned()
        .expect("admin group");
    assert_eq!(admins["members"], json!(["admin"]), "{groups}");
    let (_, sessions) = app.api(&admin_token).get("/api/v1/admin/sessions").await;
    assert_eq!(sessions["sessions"][0]["user"], "ann", "{sessions}");

    // Every page, with what it shows.
    for (path, expected) in [
        ("/admin", "1 running, 0 pending"),
        ("/admin/users", "id=\"user-ann\""),
        ("/admin/groups", "id=\"group-admin\""),
        ("/admin/quotas", "No quota is set"),
        (
            "/admin/jobs",
            &format!("action=\"/admin/jobs/{job}/cancel\""),
        ),
        (
            "/admin/sessions",
            &format!("action=\"/admin/sessions/{session_id}/stop\""),
        ),
        ("/admin/nodes", "action=\"/admin/nodes/head/drain\""),
        ("/admin/audit", "session.start"),
    ] {
        let html = app.html(&admin, path).await;
        assert!(html.contains(expected), "{path} lacks {expected}: {html}");
    }

    // Quotas: a refused form names its field and creates nothing; create, edit, delete.
    let create = |max_gpus: &'static str| {
        let fields = [
            ("csrf", csrf.as_str()),
            ("scope", "user"),
            ("name", "ann"),
            ("max_gpus", max_gpus),
        ];
        let admin = &admin;
        async move { app.post_form(admin, "/admin/quotas", &fields).await }
    };
    let (status, html) = create("two").await;
    assert_eq!(status, 400, "{html}");
    assert!(
        html.contains("Most GPUs at once: &#34;two&#34; is not a whole number"),
        "{html}"
    );
    assert!(html.contains("name=\"max_gpus\" value=\"two\""), "{html}");
    let (status, html) = create("2").await;
    assert_eq!(status, 303, "{html}");
    let (_, quotas) = app.api(&admin_token).get("/api/v1/admin/quotas").await;
    assert_eq!(
        quotas["quotas"].as_array().map(Vec::len),
        Some(1),
        "{quotas}"
    );
    let id = quotas["quotas"][0]["id"].as_i64().expect("id");
    assert_eq!(quotas["quotas"][0]["limits"], json!({"max_gpus": 2}));
    let edit = format!("/admin/quotas/{id}");
    assert!(app
        .html(&admin, &edit)
        .await
        .contains("name=\"max_gpus\" value=\"2\""));
    let (status, html) = app
        .post_form(
            &admin,
            &edit,
            &[("csrf", &csrf), ("max_gpus", "3"), ("max_job_hours", "-1")],
        )
        .await;
    assert_eq!(status, 400, "{html}");
    assert!(html.contains("Longest job (hours): must be"), "{html}");
    let (status, _) = app
        .post_form(&admin, &edit, &[("csrf", &csrf), ("max_gpus", "3")])
        .await;
    assert_eq!(status, 303);
    let (_, quota) = app
        .api(&admin_token)
        .get(&format!("/api/v1/admin/quotas/{id}"))
        .await;
    assert_eq!(quota["limits"], json!({"max_gpus": 3}), "{quota}");
    let (status, _) = app
        .press(&admin, &csrf, &format!("/admin/quotas/{id}/delete"))
        .await;
    assert_eq!(status, 303);
    assert!(app
        .html(&admin, "/admin/quotas")
        .await
        .contains("No quota is set"));

    // Nodes: a drain needs a reason; drain, then resume.
    let (status, html) = app
        .post_form(
            &admin,
            "/admin/nodes/head/drain",
            &[("csrf", &csrf), ("reason", " ")],
        )
        .await;
    assert_eq!(status, 400, "{html}");
    assert!(
        html.contains("reason: say why the node is drained"),
        "{html}"
    );
    let (status, _) = app
        .post_form(
            &admin,
            "/admin/nodes/head/drain",
            &[("csrf", &csrf), ("reason", "new driver")],
        )
        .await;
    assert_eq!(status, 303);
    let nodes = app.html(&admin, "/admin/nodes").await;
    assert!(
        nodes.contains("DRAIN") && nodes.contains("new driver"),
        "{nodes}"
    );
    let (status, _) = app.press(&admin, &csrf, "/admin/nodes/head/resume").await;
    assert_eq!(status, 303);

    // ann's job cancelled and her session stopped by the administrator.
    let (status, _) = app
        .press(&admin, &csrf, &format!("/admin/jobs/{job}/cancel"))
        .await;
    assert_eq!(status, 303);
    c.wait_for(&ann, &job, &["CANCELLED"], RUN).await;
    let (status, _) = app
        .press(&admin, &csrf, &format!("/admin/sessions/{session_id}/stop"))
        .await;
    assert_eq!(status, 303);
    let ended = atrium_tests::support::until("ann's session to end", RUN, || {
        let res = ann_browser
            .get(app.url(&format!("/api/v1/sessions/{session_id}")))
            .send();
        async move {
            let s: Value = res.await.ok()?.json().await.ok()?;
            (s["state"] == "ended").then_some(s)
        }
    })
    .await
    .expect("session ended");
    assert_eq!(ended["end_reason"], "cancelled", "{ended}");
    eventually("no process of ann's is left", RUN, || async {
        let out = std::process::Command::new("pgrep")
            .args(["-u", &ann.uid.to_string()])
            .output()
            .expect("pgrep");
        out.stdout.is_empty()
    })
    .await;

    // Disable ann: no login, no token, no browser session; not oneself; enable again.
    let (status, html) = app.press(&admin, &csrf, "/admin/users/admin/disable").await;
    assert_eq!(status, 409, "{html}");
    assert!(
        html.contains("you cannot disable your own account"),
        "{html}"
    );
    for (path, expected, says) in [
        (
            "/api/v1/admin/users/admin/disable",
            409,
            "you cannot disable",
        ),
        ("/api/v1/admin/users/nobody/disable", 404, "not found"),
        ("/api/v1/admin/users/ann/retire", 400, "action:"),
    ] {
        let (status, answer) = app.api(&admin_token).send(Method::POST, path, None).await;
        assert_eq!(status, expected, "{path}: {answer}");
        let message = answer["message"].as_str().unwrap_or("");
        assert!(message.starts_with(says), "{path}: {answer}");
    }
    let (status, _) = app.press(&admin, &csrf, "/admin/users/ann/disable").await;
    assert_eq!(status, 303);
    assert!(app
        .html(&admin, "/admin/users")
        .await
        .contains("action=\"/admin/users/ann/enable\""));
    assert_eq!(app.get_bearer("/api/v1/me", &ann.token).await.status(), 401);
    let me = ann_browser
        .get(app.url("/api/v1/me"))
        .send()
        .await
        .expect("me");
    assert_eq!(me.status(), 401);
    let refused = app
        .post_login(&app.browser_like_client(), "ann", PASSWORD)
        .await;
    assert_eq!(refused.status(), 401);
    let (status, _) = app.press(&admin, &csrf, "/admin/users/ann/enable").await;
    assert_eq!(status, 303);
    // Disabling revoked ann's token for good: enabling her brings it not back.
    assert_eq!(app.get_bearer("/api/v1/me", &ann.token).await.status(), 401);
    app.login("ann", PASSWORD).await;

    // Every change is in the audit log with who, what, and before and after: in the
    // API, on the page and in the CSV.
    let (_, audit) = app.api(&admin_token).get("/api/v1/admin/audit").await;
    let entries = audit["entries"].as_array().cloned().expect("entries");
    let checks = [
        (
            "quota.create",
            "user ann",
            json!(null),
            json!({"max_gpus": 2}),
        ),
        (
            "quota.update",
            "user ann",
            json!({"max_gpus": 2}),
            json!({"max_gpus": 3}),
        ),
        (
            "quota.delete",
            "user ann",
            json!({"max_gpus": 3}),
            json!(null),
        ),
        (
            "user.disable",
            "ann",
            json!({"disabled": false}),
            json!({"disabled": true}),
        ),
        (
            "user.enable",
            "ann",
            json!({"disabled": true}),
            json!({"disabled": false}),
        ),
    ];
    for (action, target, before, after) in checks {
        let e = entry(&entries, action, target);
        assert_eq!(e["actor"], "admin", "{e}");
        assert_eq!(
            (&e["detail"]["before"], &e["detail"]["after"]),
            (&before, &after),
            "{e}"
        );
    }
    let disable = entry(&entries, "user.disable", "ann");
    assert_eq!(
        disable["detail"]["revoked"]["tokens_revoked"], 1,
        "{disable}"
    );
    assert!(
        disable["detail"]["revoked"]["sessions_ended"].as_u64() >= Some(1),
        "{disable}"
    );
    let drain = entry(&entries, "node.drain", "head");
    assert_eq!(drain["detail"]["before"]["state"], "MIXED", "{drain}");
    assert_eq!(drain["detail"]["after"]["state"], "DRAIN", "{drain}");
    assert_eq!(drain["detail"]["after"]["reason"], "new driver", "{drain}");
    let resume = entry(&entries, "node.resume", "head");
    assert_eq!(resume["detail"]["before"]["state"], "DRAIN", "{resume}");
    let cancel = entry(&entries, "job.cancel", &job);
    assert_eq!(cancel["detail"]["user"], "ann", "{cancel}");
    assert_eq!(cancel["detail"]["before"]["state"], "RUNNING", "{cancel}");
    let stop = entry(&entries, "session.stop", &session_id.to_string());
    assert_eq!(stop["actor"], "admin", "{stop}");
    assert_eq!(stop["detail"]["user"], "ann", "{stop}");
    assert_eq!(stop["detail"]["after"]["end_reason"], "cancelled", "{stop}");
    assert!(
        !entries
            .iter()
            .any(|e| e["action"] == "quota.create" && e["detail"]["after"]["max_gpus"] == "two"),
        "the refused form wrote nothing"
    );

    let html = app.html(&admin, "/admin/audit").await;
    let csv_link = href_of(&html, "audit-csv").expect("CSV link");
    let csv = admin.get(app.url(&csv_link)).send().await.expect("csv");
    assert_eq!(csv.status(), 200);
    assert!(csv.headers()["content-type"]
        .to_str()
        .unwrap_or("")
        .starts_with("text/csv"));
    let csv = csv.text().await.expect("csv");
    for action in [
        "quota.create",
        "quota.update",
        "quota.delete",
        "node.drain",
        "node.resume",
        "job.cancel",
        "session.stop",
        "user.disable",
        "user.enable",
    ] {
        assert!(html.contains(action), "{action} not on the page: {html}");
        let line = csv
            .lines()
            .find(|l| l.contains(&format!(",admin,{action},")))
            .unwrap_or_else(|| panic!("{action} not in the CSV: {csv}"));
        assert!(line.contains("before"), "{line}");
    }
    // Each change as fields before and after.
    assert!(
        html.contains("<dt>disabled</dt><dd><span class=\"was\">no</span> → <span class=\"now\">yes</span></dd>"),
        "{html}"
    );
    // Newest first: ann enabled again is the first row.
    let first = html.split("<tbody>").nth(1).unwrap_or("");
    assert!(
        first.find("user.enable") < first.find("user.disable"),
        "{first}"
    );
}

/// The `href` of the element with `id`.
fn href_of(html: &str, id: &str) -> Option<String> {
    let at = html.find(&format!("id=\"{id}\""))?;
    let tag_start = html[..at].rfind('<')?;
    let tag = &html[tag_start..];
    let start = tag.find("href=\"")? + "href=\"".len();
    let end = tag[start..].find('"')?;
    Some(tag[start..start + end].replace("&amp;", "&"))
}

/// The admin lists and a disable read and write the same on PostgreSQL.
#[tokio::test]
async fn admin_lists_and_disable_work_on_postgres() {
    let db = atrium_tests::support::fresh_database()
        .await
        .expect("postgres database");
    let app = spawn_with(Options {
        database_url: Some(db.url.clone()),
        ..Options::default()
    })
    .await;
    let out = app.cli(
        &[
            "user",
            "add",
            "gus",
            "--group",
            "Vision-Team",
            "--group",
            "zeta",
        ],
        &format!("{PASSWORD}\n"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let gus = app.login("gus", PASSWORD).await;
    let gus_token = app.create_token(&gus, "read", &["read"]).await;
    let (admin, _) = app.admin_browser().await;
    let token = app.create_token(&admin, "admin", &["read", "admin"]).await;

    let (status, groups) = app.api(&token).get("/api/v1/admin/groups").await;
    assert_eq!(status, 200, "{groups}");
    let members = |name: &str| {
        groups["groups"]
            .as_array()
            .and_then(|g| g.iter().find(|g| g["name"] == name))
            .map(|g| g["members"].clone())
    };
    assert_eq!(members("Vision-Team"), Some(json!(["gus"])), "{groups}");
    assert_eq!(members("zeta"), Some(json!(["gus"])), "{groups}");
    assert_eq!(members("admin"), Some(json!(["admin"])), "{groups}");
    let (status, sessions) = app.api(&token).get("/api/v1/admin/sessions").await;
    assert_eq!(
        (status, &sessions["sessions"]),
        (StatusCode::OK, &json!([]))
    );

    let (status, _) = app
        .api(&token)
        .send(Method::POST, "/api/v1/admin/users/gus/disable", None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(app.get_bearer("/api/v1/me", &gus_token).await.status(), 401);
    let (_, users) = app.api(&token).get("/api/v1/admin/users").await;
    let names: Vec<(&str, bool, bool)> = users["users"]
        .as_array()
        .expect("users")
        .iter()
        .filter_map(|u| {
            Some((
                u["username"].as_str()?,
                u["admin"].as_bool()?,
                u["disabled"].as_bool()?,
            ))
        })
        .collect();
    assert_eq!(
        names,
        [("admin", true, false), ("gus", false, true)],
        "{users}"
    );
    let (status, _) = app
        .api(&token)
        .send(Method::POST, "/api/v1/admin/users/gus/enable", None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(app.get_bearer("/api/v1/me", &gus_token).await.status(), 401);
}
