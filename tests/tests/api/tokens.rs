//! Personal API tokens: created once, used as bearer, scoped, revoked.

use std::time::Duration;

use serde_json::Value;

use crate::fixtures::{eventually, spawn_app};

#[tokio::test]
async fn token_is_shown_once_works_as_bearer_and_is_refused_after_revocation() {
    let app = spawn_app().await;
    let password = app.admin_password.clone().expect("pw");
    let client = app.login("admin", &password).await;
    let csrf = app.session_csrf(&client).await;

    let res = client
        .post(app.url("/api/v1/tokens"))
        .header("x-csrf-token", &csrf)
        .json(&serde_json::json!({"name": "laptop", "scopes": ["read", "jobs"], "expires_in_days": 7}))
        .send()
        .await
        .expect("create");
    assert_eq!(res.status(), 201);
    let created: Value = res.json().await.expect("json");
    let secret = created["secret"].as_str().expect("secret").to_string();
    assert!(secret.starts_with("atr_"));
    assert_eq!(created["scopes"], serde_json::json!(["read", "jobs"]));
    let id = created["id"].as_i64().expect("id");

    let me: Value = app
        .get_bearer("/api/v1/me", &secret)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(me["username"], "admin");
    assert_eq!(me["auth"], "token");
    assert_eq!(me["scopes"], serde_json::json!(["read", "jobs"]));

    // Listed without its secret, with its last use.
    let list: Value = app
        .get_bearer("/api/v1/tokens", &secret)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    assert_eq!(list[0]["name"], "laptop");
    assert!(list[0].get("secret").is_none());
    assert!(list[0]["last_used_at"].is_string());
    assert!(
        !app.log().join("\n").contains(&secret),
        "secret must never be logged"
    );

    // Only the token's hash is stored.
    let db = std::fs::read(app.data_dir.path().join("var/atrium.db")).expect("db");
    let wal = std::fs::read(app.data_dir.path().join("var/atrium.db-wal")).unwrap_or_default();
    let needle = secret.as_bytes();
    for bytes in [&db, &wal] {
        assert!(!bytes.windows(needle.len()).any(|w| w == needle));
    }

    // Revoke with the bearer token itself (no CSRF needed for bearer calls).
    let res = reqwest::Client::new()
        .delete(app.url(&format!("/api/v1/tokens/{id}")))
        .bearer_auth(&secret)
        .send()
        .await
        .expect("revoke");
    assert_eq!(res.status(), 204);
    let res = app.get_bearer("/api/v1/me", &secret).await;
    assert_eq!(res.status(), 401);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"], "unauthorized");

    // Unknown and malformed tokens are refused the same way.
    for bogus in ["atr_nope", "nope", ""] {
        assert_eq!(app.get_bearer("/api/v1/me", bogus).await.status(), 401);
    }
}

#[tokio::test]
async fn scopes_limit_tokens_and_cannot_be_widened() {
    let app = spawn_app().await;
    app.add_user("carol", "carol-password-1", false);
    let carol = app.login("carol", "carol-password-1").await;

    let jobs_only = app.create_token(&carol, "ci", &["jobs"]).await;
    let res = app.get_bearer("/api/v1/me", &jobs_only).await;
    assert_eq!(res.status(), 403);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["message"], "this token lacks the read scope");

    // A non-admin cannot mint an admin token; a token cannot mint a wider one.
    let csrf = app.session_csrf(&carol).await;
    let res = carol
        .post(app.url("/api/v1/tokens"))
        .header("x-csrf-token", &csrf)
        .json(&serde_json::json!({"name": "root", "scopes": ["admin"]}))
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 403);
    let res = reqwest::Client::new()
        .post(app.url("/api/v1/tokens"))
        .bearer_auth(&jobs_only)
        .json(&serde_json::json!({"name": "wider", "scopes": ["jobs", "read"]}))
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 403);

    // Bad requests change nothing.
    for (body, needle) in [
        (serde_json::json!({"name": "", "scopes": ["read"]}), "name"),
        (serde_json::json!({"name": "x", "scopes": []}), "scope"),
        (
            serde_json::json!({"name": "x", "scopes": ["root"]}),
            "unknown variant",
        ),
        (
            serde_json::json!({"name": "x", "scopes": ["read"], "expires_in_days": 0}),
            "expires_in_days",
        ),
        (
            serde_json::json!({"name": "x", "scopes": ["read"], "expires_in_days": 100000}),
            "expires_in_days",
        ),
        (
            serde_json::json!({"scopes": ["read"]}),
            "missing field `name`",
        ),
        (
            serde_json::json!({"name": "x", "scopes": ["read"], "admin": true}),
            "unknown field `admin`",
        ),
    ] {
        let res = carol
            .post(app.url("/api/v1/tokens"))
            .header("x-csrf-token", &csrf)
            .json(&body)
            .send()
            .await
            .expect("post");
        assert_eq!(res.status(), 400, "{body}");
        let err: Value = res.json().await.expect("json");
        assert_eq!(err["error"], "bad_request");
        let message = err["message"].as_str().expect("message");
        assert!(
            message.contains(needle),
            "{message:?} should mention {needle:?}"
        );
    }
    let list: Value = carol
        .get(app.url("/api/v1/tokens"))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(
        list.as_array().map(Vec::len),
        Some(1),
        "only the ci token exists"
    );

    // Another user's token id is simply not found.
    let admin = app
        .login("admin", app.admin_password.as_deref().expect("pw"))
        .await;
    let admin_token = app.create_token(&admin, "a", &["read"]).await;
    let theirs: Value = app
        .get_bearer("/api/v1/tokens", &admin_token)
        .await
        .json()
        .await
        .expect("json");
    let id = theirs[0]["id"].as_i64().expect("id");
    let res = carol
        .delete(app.url(&format!("/api/v1/tokens/{id}")))
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .expect("delete");
    assert_eq!(res.status(), 404);
    assert_eq!(
        app.get_bearer("/api/v1/me", &admin_token).await.status(),
        200
    );
}

#[tokio::test]
async fn tokens_page_creates_shows_once_and_revokes() {
    let app = spawn_app().await;
    let password = app.admin_password.clone().expect("pw");
    let client = app.login("admin", &password).await;
    let csrf = app.session_csrf(&client).await;
    let res = client
        .post(app.url("/tokens"))
        .form(&[
            ("csrf", csrf.as_str()),
            ("name", "notebook"),
            ("scope_read", "on"),
            ("expires_in_days", "30"),
        ])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 201);
    let html = res.text().await.expect("html");
    let start = html.find("id=\"new-token-secret\">").expect("secret shown") + 22;
    let secret = &html[start..start + html[start..].find('<').expect("end")];
    assert_eq!(app.get_bearer("/api/v1/me", secret).await.status(), 200);

    let profile = client
        .get(app.url("/profile"))
        .send()
        .await
        .expect("profile")
        .text()
        .await
        .expect("html");
    assert!(profile.contains("notebook"));
    assert!(!profile.contains(secret), "the secret is shown only once");
    let home = client
        .get(app.url("/"))
        .send()
        .await
        .expect("home")
        .text()
        .await
        .expect("html");
    assert!(
        !home.contains("token-form"),
        "tokens live on the profile page"
    );

    let list: Value = app
        .get_bearer("/api/v1/tokens", secret)
        .await
        .json()
        .await
        .expect("json");
    let id = list[0]["id"].as_i64().expect("id");
    let res = client
        .post(app.url(&format!("/tokens/{id}/revoke")))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("revoke");
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/profile#tokens");
    assert_eq!(app.get_bearer("/api/v1/me", secret).await.status(), 401);
}

#[tokio::test]
async fn only_a_session_or_a_tokens_scoped_token_mints_and_never_wider_or_longer() {
    let app = spawn_app().await;
    app.add_user("dan", "dan-password-1", false);
    let dan = app.login("dan", "dan-password-1").await;
    let read = app.create_token(&dan, "read", &["read"]).await;
    let jobs = app.create_token(&dan, "jobs", &["read", "jobs"]).await;

    // Neither a read token nor a jobs token may mint, not even a token as narrow.
    for (token, scopes) in [(&read, vec!["read"]), (&jobs, vec!["read", "jobs"])] {
        let (status, body) = app
            .api(token)
            .post(
                "/api/v1/tokens",
                serde_json::json!({"name": "x", "scopes": scopes}),
            )
            .await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(body["error"], "forbidden");
        assert!(
            body["message"]
                .as_str()
                .unwrap_or("")
                .contains("tokens scope"),
            "{body}"
        );
    }
    // Nor revoke another (a token may always revoke itself).
    let list: Value = app
        .get_bearer("/api/v1/tokens", &read)
        .await
        .json()
        .await
        .expect("json");
    let jobs_id = list
        .as_array()
        .and_then(|l| l.iter().find(|t| t["name"] == "jobs"))
        .and_then(|t| t["id"].as_i64())
        .expect("jobs token");
    let res = reqwest::Client::new()
        .delete(app.url(&format!("/api/v1/tokens/{jobs_id}")))
        .bearer_auth(&read)
        .send()
        .await
        .expect("delete");
    assert_eq!(res.status(), 403);
    assert_eq!(app.get_bearer("/api/v1/me", &jobs).await.status(), 200);

    // A session mints a tokens-scoped token; it mints within its scopes and lifetime.
    let csrf = app.session_csrf(&dan).await;
    let res = dan
        .post(app.url("/api/v1/tokens"))
        .header("x-csrf-token", &csrf)
        .json(&serde_json::json!({"name": "minter", "scopes": ["read", "tokens"], "expires_in_days": 2}))
        .send()
        .await
        .expect("create");
    assert_eq!(res.status(), 201);
    let minter: Value = res.json().await.expect("json");
    let minter_secret = minter["secret"].as_str().expect("secret");
    let (status, body) = app
        .api(minter_secret)
        .post(
            "/api/v1/tokens",
            serde_json::json!({"name": "wider", "scopes": ["read", "jobs"]}),
        )
        .await;
    assert_eq!(status, 403, "{body}");
    let (status, child) = app
        .api(minter_secret)
        .post(
            "/api/v1/tokens",
            serde_json::json!({"name": "child", "scopes": ["read"], "expires_in_days": 300}),
        )
        .await;
    assert_eq!(status, 201, "{child}");
    assert_eq!(child["scopes"], serde_json::json!(["read"]));
    assert!(
        child["expires_at"].as_str() <= minter["expires_at"].as_str(),
        "the child outlives its parent: {child} {minter}"
    );
    let child_secret = child["secret"].as_str().expect("secret");
    assert_eq!(
        app.get_bearer("/api/v1/me", child_secret).await.status(),
        200
    );
}

#[tokio::test]
async fn a_new_password_or_disabling_revokes_tokens_and_sessions_and_is_audited() {
    let app = spawn_app().await;
    app.add_user("erin", "erin-password-1", false);
    app.add_user("fred", "fred-password-1", false);
    let erin = app.login("erin", "erin-password-1").await;
    let erin_token = app.create_token(&erin, "laptop", &["read", "jobs"]).await;
    let fred = app.login("fred", "fred-password-1").await;
    let fred_token = app.create_token(&fred, "ci", &["read"]).await;
    assert_eq!(
        app.get_bearer("/api/v1/me", &erin_token).await.status(),
        200
    );

    let out = app.cli(&["user", "passwd", "erin"], "erin-password-2\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("1 API token(s) revoked"), "{said}");
    eventually("the old token refused", Duration::from_secs(10), || async {
        app.get_bearer("/api/v1/me", &erin_token).await.status() == 401
    })
    .await;
    let res = erin.get(app.url("/api/v1/me")).send().await.expect("me");
    assert_eq!(res.status(), 401, "the old browser session is over too");
    // The new password gives a new session, and new tokens work.
    let erin = app.login("erin", "erin-password-2").await;
    let fresh = app.create_token(&erin, "laptop", &["read"]).await;
    assert_eq!(app.get_bearer("/api/v1/me", &fresh).await.status(), 200);

    // Disabling revokes for good: enabled again, fred's token stays refused.
    let out = app.cli(&["user", "disable", "fred"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = app.cli(&["user", "disable", "fred", "--enable"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually("fred's token refused", Duration::from_secs(10), || async {
        app.get_bearer("/api/v1/me", &fred_token).await.status() == 401
    })
    .await;
    app.login("fred", "fred-password-1").await;
    assert_eq!(
        app.get_bearer("/api/v1/me", &fred_token).await.status(),
        401
    );

    // The audit log says what was revoked.
    let admin = app
        .login("admin", app.admin_password.as_deref().expect("pw"))
        .await;
    let audit: Value = admin
        .get(app.url("/api/v1/admin/audit"))
        .send()
        .await
        .expect("audit")
        .json()
        .await
        .expect("json");
    let entries = audit["entries"].as_array().cloned().unwrap_or_default();
    let find = |action: &str, target: &str| {
        entries
            .iter()
            .find(|e| e["action"] == action && e["target"] == target)
            .cloned()
            .unwrap_or_else(|| panic!("no {action} of {target}: {audit}"))
    };
    let passwd = find("user.passwd", "erin");
    assert_eq!(
        passwd["detail"]["revoked"],
        serde_json::json!({"sessions_ended": 1, "tokens_revoked": 1}),
        "{passwd}"
    );
    let disable = find("user.disable", "fred");
    assert_eq!(
        disable["detail"]["revoked"],
        serde_json::json!({"sessions_ended": 1, "tokens_revoked": 1}),
        "{disable}"
    );
}

#[tokio::test]
async fn an_administrators_token_without_the_admin_scope_acts_as_its_user() {
    let c = crate::fixtures::JobCluster::start(0).await;
    let app = &c.app;
    let alice = c.user("alice").await;
    let id = c.sbatch(&alice, "#!/bin/bash\nsleep 600\n").await;
    let admin = app
        .login("admin", app.admin_password.as_deref().expect("pw"))
        .await;
    let scripting = app
        .create_token(&admin, "scripts", &["read", "jobs", "sessions"])
        .await;
    let client = reqwest::Client::new();
    // Administration itself: refused, as before.
    assert_eq!(
        app.get_bearer("/api/v1/admin/users", &scripting)
            .await
            .status(),
        403
    );
    // Another user's job is not this token's to see or to end.
    assert_eq!(
        app.get_bearer(&format!("/api/v1/jobs/{id}"), &scripting)
            .await
            .status(),
        404
    );
    let res = client
        .delete(app.url(&format!("/api/v1/jobs/{id}")))
        .bearer_auth(&scripting)
        .send()
        .await
        .expect("cancel");
    assert_eq!(res.status(), 404);
    let res = client
        .post(app.url(&format!("/api/v1/jobs/{id}/hold")))
        .bearer_auth(&scripting)
        .send()
        .await
        .expect("hold");
    assert_eq!(res.status(), 404);
    let listed: Value = app
        .get_bearer("/api/v1/jobs?user=alice", &scripting)
        .await
        .json()
        .await
        .expect("json");
    assert!(
        !listed.to_string().contains(&format!("\"{id}\"")),
        "{listed}"
    );
    let state = c.job(&alice, &id).await["state"].clone();
    assert!(state == "RUNNING" || state == "PENDING", "{state}");

    // With the admin scope, the same administrator acts as one.
    let admin_token = app
        .create_token(&admin, "admin", &["read", "jobs", "admin"])
        .await;
    let res = client
        .delete(app.url(&format!("/api/v1/jobs/{id}")))
        .bearer_auth(&admin_token)
        .send()
        .await
        .expect("cancel");
    assert!(res.status().is_success(), "{}", res.status());
    c.wait_for(&alice, &id, &["CANCELLED"], Duration::from_secs(60))
        .await;
}
