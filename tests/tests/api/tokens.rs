//! Personal API tokens: created once, used as bearer, scoped, revoked.

use serde_json::Value;

use crate::helpers::spawn_app;

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

    let home = client
        .get(app.url("/"))
        .send()
        .await
        .expect("home")
        .text()
        .await
        .expect("html");
    assert!(home.contains("notebook"));
    assert!(!home.contains(secret), "the secret is shown only once");

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
    assert_eq!(app.get_bearer("/api/v1/me", secret).await.status(), 401);
}
