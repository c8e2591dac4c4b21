//! Administration's access: every admin route, API and page, refuses whoever is not
//! an administrator (a user, an administrator's token without the admin scope, no
//! login) and changes nothing; the table of routes covers every admin route the API
//! documents.

use reqwest::Method;
use serde_json::{json, Value};

use crate::fixtures::api::json_of;
use crate::fixtures::{spawn_app, TestApp, PASSWORD};

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
