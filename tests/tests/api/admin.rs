//! Administration end to end: every admin route, API and page, refuses whoever is not
//! an administrator and changes nothing; an administrator's pages show the cluster
//! and change it through their forms, each change in the audit log (page and CSV)
//! with who, what and before and after; a disabled account can neither log in nor use
//! its token until it is enabled again.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::fixtures::{
    cluster_config, eventually, private_root, spawn_app, spawn_with, JobCluster, JobUser, Options,
    TestApp, PASSWORD,
};

const RUN: Duration = Duration::from_secs(60);

/// Every admin API route, with a body that would change something were it accepted.
fn api_routes() -> Vec<(Method, &'static str, Option<Value>)> {
    let quota = json!({"scope": "user", "name": "gus", "limits": {"max_gpus": 9}});
    let reason = json!({"reason": "mine"});
    vec![
        (Method::GET, "/api/v1/admin/users", None),
        (Method::POST, "/api/v1/admin/users/admin/disable", None),
        (Method::POST, "/api/v1/admin/users/gus/enable", None),
        (Method::GET, "/api/v1/admin/groups", None),
        (Method::GET, "/api/v1/admin/sessions", None),
        (Method::GET, "/api/v1/admin/idle-gpus", None),
        (Method::GET, "/api/v1/admin/audit", None),
        (Method::GET, "/api/v1/admin/audit?format=csv", None),
        (Method::GET, "/api/v1/admin/quotas", None),
        (Method::POST, "/api/v1/admin/quotas", Some(quota)),
        (Method::GET, "/api/v1/admin/quotas/1", None),
        (
            Method::PUT,
            "/api/v1/admin/quotas/1",
            Some(json!({"limits": {"max_gpus": 9}})),
        ),
        (Method::DELETE, "/api/v1/admin/quotas/1", None),
        (Method::GET, "/api/v1/admin/announcements", None),
        (
            Method::POST,
            "/api/v1/admin/announcements",
            Some(json!({"message": "mine", "ends_at": "2099-01-01T00:00:00Z"})),
        ),
        (Method::DELETE, "/api/v1/admin/announcements/1", None),
        (
            Method::POST,
            "/api/v1/admin/nodes/head/drain",
            Some(reason.clone()),
        ),
        (Method::POST, "/api/v1/admin/nodes/head/resume", None),
        (Method::POST, "/api/v1/admin/nodes/head/down", Some(reason)),
    ]
}

/// Every admin page and form post; posts carry fields that would change something.
fn page_routes() -> Vec<(Method, &'static str)> {
    vec![
        (Method::GET, "/admin"),
        (Method::GET, "/admin/users"),
        (Method::GET, "/admin/groups"),
        (Method::GET, "/admin/quotas"),
        (Method::GET, "/admin/quotas/1"),
        (Method::GET, "/admin/jobs"),
        (Method::GET, "/admin/sessions"),
        (Method::GET, "/admin/idle-gpus"),
        (Method::GET, "/admin/nodes"),
        (Method::GET, "/admin/audit"),
        (Method::GET, "/admin/announcements"),
        (Method::POST, "/admin/users/admin/disable"),
        (Method::POST, "/admin/users/gus/enable"),
        (Method::POST, "/admin/quotas"),
        (Method::POST, "/admin/quotas/1"),
        (Method::POST, "/admin/quotas/1/delete"),
        (Method::POST, "/admin/jobs/1/cancel"),
        (Method::POST, "/admin/sessions/1/stop"),
        (Method::POST, "/admin/nodes/head/drain"),
        (Method::POST, "/admin/nodes/head/resume"),
        (Method::POST, "/admin/nodes/head/down"),
        (Method::POST, "/admin/announcements"),
        (Method::POST, "/admin/announcements/1/delete"),
    ]
}

fn page_form(csrf: &str) -> Vec<(&'static str, String)> {
    vec![
        ("csrf", csrf.to_string()),
        ("scope", "user".into()),
        ("name", "gus".into()),
        ("max_gpus", "9".into()),
        ("reason", "mine".into()),
        ("message", "mine".into()),
        ("ends_at", "2099-01-01T00:00".into()),
    ]
}

/// Whether `path` (no query) is an instance of the OpenAPI template (`{name}` is any
/// one segment).
fn instance_of(path: &str, template: &str) -> bool {
    let path: Vec<&str> = path.split('?').next().unwrap_or("").split('/').collect();
    let template: Vec<&str> = template.split('/').collect();
    path.len() == template.len()
        && path
            .iter()
            .zip(&template)
            .all(|(p, t)| p == t || (t.starts_with('{') && !p.is_empty()))
}

async fn json_of(res: reqwest::Response) -> (StatusCode, Value) {
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn call(
    app: &TestApp,
    client: &reqwest::Client,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> reqwest::Response {
    let mut req = client.request(method, app.url(path));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    req.send().await.expect("request")
}

#[tokio::test]
async fn every_admin_route_refuses_anyone_but_an_administrator_and_changes_nothing() {
    let app = spawn_app().await;
    app.add_user("gus", PASSWORD, false);
    let (gus, gus_csrf) = app.login_csrf("gus", PASSWORD).await;
    let gus_token = app
        .create_token(&gus, "all", &["read", "jobs", "sessions"])
        .await;
    let (admin, _) = app.admin_browser().await;
    let admin_no_scope = app
        .create_token(&admin, "no-admin", &["read", "jobs", "sessions"])
        .await;
    let admin_token = app.create_token(&admin, "admin", &["read", "admin"]).await;
    let anonymous = app.browser_like_client();
    let audited_before = audit_ids(&app, &admin_token).await;

    // The table covers every admin route the API documents.
    let (_, doc) = json_of(
        reqwest::get(app.url("/api/v1/openapi.json"))
            .await
            .expect("doc"),
    )
    .await;
    let routes = api_routes();
    let documented = doc["paths"].as_object().expect("paths");
    let mut admin_paths = 0;
    for (template, methods) in documented {
        if !template.starts_with("/api/v1/admin") {
            continue;
        }
        for method in methods.as_object().expect("methods").keys() {
            admin_paths += 1;
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            assert!(
                routes
                    .iter()
                    .any(|(m, p, _)| *m == method && instance_of(p, template)),
                "{method} {template} is not in the table"
            );
        }
    }
    assert!(admin_paths >= 9, "{documented:?}");

    for (method, path, body) in routes {
        let what = format!("{method} {path}");
        for (who, token) in [
            ("gus", &gus_token),
            ("admin without the scope", &admin_no_scope),
        ] {
            let res = call(
                &app,
                &anonymous,
                method.clone(),
                path,
                Some(token),
                body.clone(),
            )
            .await;
            let (status, answer) = json_of(res).await;
            assert_eq!(status, 403, "{what} by {who}'s token: {answer}");
            assert_eq!(answer["error"], "forbidden", "{what}");
        }
        let res = gus
            .request(method.clone(), app.url(path))
            .header("x-csrf-token", &gus_csrf)
            .json(&body.clone().unwrap_or(json!({})))
            .send()
            .await
            .expect("request");
        let (status, answer) = json_of(res).await;
        assert_eq!(status, 403, "{what} by gus's browser: {answer}");
        assert_eq!(answer["message"], "administrators only", "{what}");
        let res = call(&app, &anonymous, method.clone(), path, None, body).await;
        assert_eq!(res.status(), 401, "{what} anonymously");
    }

    for (method, path) in page_routes() {
        let what = format!("{method} {path}");
        let form = page_form(&gus_csrf);
        let res = gus
            .request(method.clone(), app.url(path))
            .form(&form)
            .send()
            .await
            .expect("request");
        assert_eq!(res.status(), 403, "{what} by gus's browser");
        let page = res.text().await.expect("page");
        assert!(page.contains("Administrators only"), "{what}: {page}");
        let res = call(
            &app,
            &anonymous,
            method.clone(),
            path,
            Some(&gus_token),
            None,
        )
        .await;
        assert_eq!(res.status(), 403, "{what} by gus's token");
        let res = anonymous
            .request(method.clone(), app.url(path))
            .form(&page_form(""))
            .send()
            .await
            .expect("request");
        assert_eq!(res.status(), 303, "{what} anonymously");
        let location = res.headers()["location"].to_str().expect("location");
        assert!(location.starts_with("/login?next="), "{what}: {location}");
    }

    // The administrator's nav leads to pages of the table; gus sees no Admin link.
    let home = gus.get(app.url("/")).send().await.expect("home");
    assert!(!home
        .text()
        .await
        .expect("page")
        .contains("id=\"nav-admin\""));
    let overview = admin.get(app.url("/admin")).send().await.expect("overview");
    assert_eq!(overview.status(), 200);
    let overview = overview.text().await.expect("page");
    assert!(overview.contains("id=\"nav-admin\""), "{overview}");
    let pages = page_routes();
    for link in overview.split("href=\"/admin").skip(1) {
        let path = format!("/admin{}", link.split('"').next().unwrap_or(""));
        assert!(
            pages.iter().any(|(m, p)| *m == Method::GET && *p == path),
            "{path} is not in the table"
        );
    }

    // Nothing was changed: the audit log is as it was.
    let client = reqwest::Client::new();
    assert_eq!(audit_ids(&app, &admin_token).await, audited_before);
    let (_, quotas) = json_of(
        call(
            &app,
            &client,
            Method::GET,
            "/api/v1/admin/quotas",
            Some(&admin_token),
            None,
        )
        .await,
    )
    .await;
    assert_eq!(quotas["quotas"], json!([]), "{quotas}");
    let (_, users) = json_of(
        call(
            &app,
            &client,
            Method::GET,
            "/api/v1/admin/users",
            Some(&admin_token),
            None,
        )
        .await,
    )
    .await;
    assert!(
        users["users"]
            .as_array()
            .expect("users")
            .iter()
            .all(|u| u["disabled"] == false),
        "{users}"
    );
    let (_, nodes) = json_of(
        call(
            &app,
            &client,
            Method::GET,
            "/api/v1/nodes",
            Some(&admin_token),
            None,
        )
        .await,
    )
    .await;
    assert!(
        nodes["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .all(|n| !matches!(n["state"]["state"].as_str(), Some("DRAIN" | "DOWN"))),
        "{nodes}"
    );
    // A form post of the administrator's without the CSRF token changes nothing either.
    let res = admin
        .post(app.url("/admin/nodes/head/drain"))
        .form(&[("reason", "no token")])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 403);
}

/// The ids of the audit log's entries, newest first.
async fn audit_ids(app: &TestApp, admin_token: &str) -> Vec<i64> {
    let (status, audit) = app.api(admin_token).get("/api/v1/admin/audit").await;
    assert_eq!(status, 200, "{audit}");
    audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["id"].as_i64())
        .collect()
}

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
