//! Health, readiness, metrics, request ids, body limits, JSON errors, shutdown.

use serde_json::Value;

use crate::fixtures::spawn_app;

#[tokio::test]
async fn health_readiness_and_request_ids() {
    let app = spawn_app().await;
    let res = reqwest::get(app.url("/healthz")).await.expect("healthz");
    assert_eq!(res.status(), 200);
    let id = res.headers()["x-request-id"]
        .to_str()
        .expect("id")
        .to_string();
    assert!(id.len() >= 8);
    assert_eq!(
        reqwest::get(app.url("/readyz"))
            .await
            .expect("readyz")
            .status(),
        200
    );

    let res = reqwest::Client::new()
        .get(app.url("/healthz"))
        .header("x-request-id", "trace-abc-123")
        .send()
        .await
        .expect("healthz");
    assert_eq!(res.headers()["x-request-id"], "trace-abc-123");
    // A hostile id is replaced, never echoed.
    let res = reqwest::Client::new()
        .get(app.url("/healthz"))
        .header("x-request-id", "a b<script>")
        .send()
        .await
        .expect("healthz");
    assert_ne!(res.headers()["x-request-id"], "a b<script>");

    let res = reqwest::get(app.url("/api/v1/nothing-here"))
        .await
        .expect("404");
    assert_eq!(res.status(), 404);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"], "not_found");
    assert_eq!(
        reqwest::get(app.url("/static/atrium.css"))
            .await
            .expect("css")
            .status(),
        200
    );
    assert_eq!(
        reqwest::get(app.url("/static/../Cargo.toml"))
            .await
            .expect("x")
            .status(),
        404
    );
}

#[tokio::test]
async fn metrics_are_for_administrators_and_count_requests() {
    let app = spawn_app().await;
    assert_eq!(
        reqwest::get(app.url("/metrics")).await.expect("m").status(),
        401
    );
    app.add_user("dave", "dave-password-1", false);
    let dave = app.login("dave", "dave-password-1").await;
    assert_eq!(
        dave.get(app.url("/metrics"))
            .send()
            .await
            .expect("m")
            .status(),
        403
    );

    let admin = app
        .login("admin", app.admin_password.as_deref().expect("pw"))
        .await;
    let token = app.create_token(&admin, "prometheus", &["admin"]).await;
    for _ in 0..3 {
        let _ = dave.get(app.url("/api/v1/me")).send().await.expect("me");
    }
    let text = app
        .get_bearer("/metrics", &token)
        .await
        .text()
        .await
        .expect("text");
    assert!(
        text.contains(
            "atrium_http_requests_total{method=\"GET\",route=\"/api/v1/me\",status=\"200\"} 3"
        ),
        "{text}"
    );
    assert!(text.contains("atrium_http_request_duration_seconds_bucket{route=\"/api/v1/me\""));
    assert!(text.contains("atrium_logins_total{outcome=\"ok\"} 2"));
}

#[tokio::test]
async fn oversized_and_malformed_bodies_are_client_errors() {
    let app = spawn_app().await;
    let admin = app
        .login("admin", app.admin_password.as_deref().expect("pw"))
        .await;
    let token = app.create_token(&admin, "t", &["read"]).await;
    let client = reqwest::Client::new();

    let huge = format!(
        "{{\"name\":\"{}\",\"scopes\":[\"read\"]}}",
        "x".repeat(2 * 1024 * 1024)
    );
    let res = client
        .post(app.url("/api/v1/tokens"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 413);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"], "payload_too_large");

    let res = client
        .post(app.url("/api/v1/tokens"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{\"name\": \"x\", \"scopes\": [\"read\"")
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"], "bad_request");
    let message = body["message"].as_str().expect("message");
    assert!(
        message.starts_with("malformed JSON") && message.contains("line 1"),
        "{message}"
    );

    let res = client
        .post(app.url("/api/v1/tokens"))
        .bearer_auth(&token)
        .header("content-type", "text/plain")
        .body("name=x")
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 415);

    let list: Value = app
        .get_bearer("/api/v1/tokens", &token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        list.as_array().map(Vec::len),
        Some(1),
        "nothing was created"
    );
}

#[tokio::test]
async fn sigterm_stops_the_portal_cleanly() {
    let mut app = spawn_app().await;
    assert_eq!(
        reqwest::get(app.url("/healthz")).await.expect("h").status(),
        200
    );
    let status = app.terminate();
    assert!(status.success(), "{status:?}");
    assert!(reqwest::get(app.url("/healthz")).await.is_err());
}
