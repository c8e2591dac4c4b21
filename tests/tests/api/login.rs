//! Browser login: the printed admin password, cookies, logout, CSRF, rate limits and
//! session tokens that must be refused.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use serde_json::Value;

use std::time::Duration;

use crate::fixtures::{eventually, hidden_field, set_cookie, spawn_app, spawn_with, Options};

const SESSION: &str = "atrium_session";

#[tokio::test]
async fn printed_admin_password_logs_in_and_logout_revokes_the_cookie() {
    let app = spawn_app().await;
    let password = app
        .admin_password
        .clone()
        .expect("admin password printed on first start");

    let client = app.browser_like_client();
    let res = app.post_login(&client, "admin", &password).await;
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/");
    let cookie = set_cookie(res.headers(), SESSION).expect("session cookie");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(
        !cookie.contains("Secure"),
        "plain http on loopback: {cookie}"
    );
    let token = cookie_value(&cookie);

    let home = client.get(app.url("/")).send().await.expect("home");
    assert_eq!(home.status(), 200);
    let html = home.text().await.expect("html");
    assert!(html.contains("Hello, Administrator"), "{html}");
    assert!(html.contains("Nothing is running yet."));

    let me: Value = client
        .get(app.url("/api/v1/me"))
        .send()
        .await
        .expect("me")
        .json()
        .await
        .expect("json");
    assert_eq!(me["username"], "admin");
    assert_eq!(me["admin"], true);
    assert_eq!(me["auth"], "session");

    let csrf = hidden_field(&html, "csrf").expect("csrf");
    let res = client
        .post(app.url("/logout"))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .expect("logout");
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/login");

    // The old cookie, replayed by hand, is refused everywhere.
    let replay = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let res = replay
        .get(app.url("/api/v1/me"))
        .header("cookie", format!("{SESSION}={token}"))
        .send()
        .await
        .expect("me");
    assert_eq!(res.status(), 401);
    let res = replay
        .get(app.url("/"))
        .header("cookie", format!("{SESSION}={token}"))
        .send()
        .await
        .expect("home");
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/login?next=/");
}

#[tokio::test]
async fn wrong_password_and_unknown_user_get_the_same_answer() {
    let app = spawn_app().await;
    app.add_user("alice", "alice-password-1", false);
    let client = app.browser_like_client();

    let wrong = app.post_login(&client, "alice", "not-her-password").await;
    let wrong_status = wrong.status();
    let wrong_body = wrong.text().await.expect("body");
    let unknown = app.post_login(&client, "mallory", "not-her-password").await;
    let unknown_status = unknown.status();
    let unknown_body = unknown.text().await.expect("body");

    assert_eq!(wrong_status, 401);
    assert_eq!(wrong_status, unknown_status);
    let normalise = |body: &str, name: &str| {
        let csrf = hidden_field(body, "csrf").unwrap_or_default();
        body.replace(&csrf, "CSRF").replace(name, "NAME")
    };
    assert_eq!(
        normalise(&wrong_body, "alice"),
        normalise(&unknown_body, "mallory")
    );
    assert!(wrong_body.contains("Invalid username or password."));

    // Malformed usernames and empty passwords are the same failure, too.
    for (user, pass) in [("alice)(uid=*", "x"), ("alice", ""), ("", "x")] {
        let res = app.post_login(&client, user, pass).await;
        assert_eq!(res.status(), 401, "{user:?}/{pass:?}");
    }
}

#[tokio::test]
async fn failed_logins_are_rate_limited_per_user_and_per_address() {
    let app = spawn_with(Options {
        extra_config: "[http]\npublic_metrics = true\n[auth.rate_limit]\nper_user = 3\nper_address = 6\nwindow_seconds = 600\n"
            .into(),
        ..Options::default()
    })
    .await;
    app.add_user("bob", "bob-password-1", false);
    let client = app.browser_like_client();
    for _ in 0..3 {
        let res = app.post_login(&client, "bob", "guess").await;
        assert_eq!(res.status(), 401);
    }
    // Even the right password is refused while the user is limited.
    let res = app.post_login(&client, "bob", "bob-password-1").await;
    assert_eq!(res.status(), 429);
    let retry: u64 = res.headers()["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds");
    assert!(retry > 500 && retry <= 600, "{retry}");

    // The address limit catches guesses spread over usernames.
    for name in ["u1", "u2", "u3"] {
        let res = app.post_login(&client, name, "guess").await;
        assert_eq!(res.status(), 401, "{name}");
    }
    let res = app.post_login(&client, "u4", "guess").await;
    assert_eq!(res.status(), 429);

    let text = reqwest::get(app.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        text.contains("atrium_logins_total{outcome=\"rate_limited\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("atrium_logins_total{outcome=\"failed\"} 6"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_wrong_passwords_cannot_exceed_the_per_user_limit() {
    let app = spawn_with(Options {
        extra_config: "[auth.rate_limit]\nper_user = 5\nper_address = 1000\nwindow_seconds = 15\n"
            .into(),
        ..Options::default()
    })
    .await;
    app.add_user("bob", "bob-password-1", false);
    app.add_user("carol", "carol-password-1", false);

    // Thirty guesses through the login form (each client holds its form's CSRF
    // token first) and thirty through the JSON API, all sent at once.
    let mut forms = Vec::new();
    for _ in 0..30 {
        let client = app.browser_like_client();
        let csrf = app.login_form(&client).await;
        forms.push((client, csrf));
    }
    let mut guesses = tokio::task::JoinSet::new();
    for (client, csrf) in forms {
        let url = app.url("/login");
        guesses.spawn(async move {
            let form = [
                ("username", "bob"),
                ("password", "guess"),
                ("csrf", csrf.as_str()),
            ];
            let res = client.post(url).form(&form).send().await.expect("post");
            (
                res.status().as_u16(),
                res.headers().get("retry-after").cloned(),
            )
        });
    }
    for _ in 0..30 {
        let url = app.url("/api/v1/login");
        guesses.spawn(async move {
            let res = reqwest::Client::new()
                .post(url)
                .json(&serde_json::json!({"username": "bob", "password": "guess"}))
                .send()
                .await
                .expect("post");
            (
                res.status().as_u16(),
                res.headers().get("retry-after").cloned(),
            )
        });
    }
    let (mut refused, mut limited) = (0, 0);
    while let Some(answer) = guesses.join_next().await {
        match answer.expect("task") {
            (401, _) => refused += 1,
            (429, Some(_)) => limited += 1,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert!(refused <= 5, "{refused} guesses were checked, limit 5");
    assert_eq!(refused + limited, 60);

    // Another user logs in as before; bob's right password waits for the window.
    app.login("carol", "carol-password-1").await;
    let client = app.browser_like_client();
    let res = app.post_login(&client, "bob", "bob-password-1").await;
    assert_eq!(res.status(), 429);
    eventually(
        "bob's login after the window",
        Duration::from_secs(40),
        || {
            let (app, client) = (&app, &client);
            async move {
                app.post_login(client, "bob", "bob-password-1")
                    .await
                    .status()
                    == 303
            }
        },
    )
    .await;
}

#[tokio::test]
async fn login_redirects_only_to_paths_on_this_site() {
    let app = spawn_app().await;
    let password = app.admin_password.clone().expect("pw");
    let hostile = [
        "/%09/evil.example/x",
        "/%0d%0a/evil.example",
        "//evil.example",
        "/%5Cevil.example",
        "/%2509/evil.example",
        "https://evil.example/",
    ];

    // The form carries `next` from the login page to the post.
    for next in hostile {
        let client = app.browser_like_client();
        let page = client
            .get(app.url(&format!("/login?next={next}")))
            .send()
            .await
            .expect("login page")
            .text()
            .await
            .expect("body");
        assert_eq!(hidden_field(&page, "next").as_deref(), Some("/"), "{next}");
        let csrf = hidden_field(&page, "csrf").expect("csrf");
        // As the query arrives decoded, and the login page's form carries it.
        let decoded = next
            .replace("%09", "\t")
            .replace("%0d%0a", "\r\n")
            .replace("%5C", "\\")
            .replace("%25", "%");
        let res = client
            .post(app.url("/login"))
            .form(&[
                ("username", "admin"),
                ("password", password.as_str()),
                ("csrf", csrf.as_str()),
                ("next", decoded.as_str()),
            ])
            .send()
            .await
            .expect("post login");
        assert_eq!(res.status(), 303, "{next}");
        assert_eq!(res.headers()["location"], "/", "{next}");
    }

    // Already logged in, the login page redirects at once.
    let client = app.login("admin", &password).await;
    for next in hostile {
        let res = client
            .get(app.url(&format!("/login?next={next}")))
            .send()
            .await
            .expect("login page");
        assert_eq!(res.status(), 303, "{next}");
        assert_eq!(res.headers()["location"], "/", "{next}");
    }
    let res = client
        .get(app.url("/login?next=/jobs%3Fstate%3DRUNNING"))
        .send()
        .await
        .expect("login page");
    assert_eq!(res.headers()["location"], "/jobs?state=RUNNING");
}

#[tokio::test]
async fn form_posts_without_csrf_token_are_forbidden() {
    let app = spawn_app().await;
    let password = app.admin_password.clone().expect("pw");

    // Login form without the token (and without its cookie).
    let res = reqwest::Client::new()
        .post(app.url("/login"))
        .form(&[("username", "admin"), ("password", password.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 403);

    let client = app.login("admin", &password).await;
    // Logout and token forms without the token, or with a wrong one.
    for (path, form) in [
        ("/logout", vec![]),
        ("/logout", vec![("csrf", "forged")]),
        ("/tokens", vec![("name", "x"), ("scope_read", "on")]),
        ("/tokens/1/revoke", vec![]),
    ] {
        let res = client
            .post(app.url(path))
            .form(&form)
            .send()
            .await
            .expect("post");
        assert_eq!(res.status(), 403, "{path} {form:?}");
    }
    // A cookie-authenticated API call that changes state needs the header.
    let res = client
        .post(app.url("/api/v1/tokens"))
        .json(&serde_json::json!({"name": "x", "scopes": ["read"]}))
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 403);
    // Still logged in: nothing above took effect.
    let res = client.get(app.url("/api/v1/me")).send().await.expect("me");
    assert_eq!(res.status(), 200);
    let tokens: Value = client
        .get(app.url("/api/v1/tokens"))
        .send()
        .await
        .expect("tokens")
        .json()
        .await
        .expect("json");
    assert_eq!(tokens, serde_json::json!([]));
}

/// The value of a `Set-Cookie` header (`name=value; attributes`).
fn cookie_value(set_cookie: &str) -> String {
    set_cookie
        .split(';')
        .next()
        .and_then(|kv| kv.split_once('='))
        .map(|(_, v)| v.to_string())
        .expect("name=value")
}

/// The session token a response sets.
fn session_token(res: &reqwest::Response) -> String {
    cookie_value(&set_cookie(res.headers(), SESSION).expect("session cookie"))
}

/// Split a JWT into its decoded header and claims.
fn decode(token: &str) -> (Value, Value) {
    let mut parts = token.split('.');
    let header = B64.decode(parts.next().expect("header")).expect("b64");
    let claims = B64.decode(parts.next().expect("claims")).expect("b64");
    (
        serde_json::from_slice(&header).expect("json"),
        serde_json::from_slice(&claims).expect("json"),
    )
}

fn sign(claims: &Value, key: &[u8]) -> String {
    use jsonwebtoken::{encode, EncodingKey, Header};
    encode(&Header::default(), claims, &EncodingKey::from_secret(key)).expect("sign")
}

async fn me_with_cookie(app: &crate::fixtures::TestApp, token: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(app.url("/api/v1/me"))
        .header("cookie", format!("{SESSION}={token}"))
        .send()
        .await
        .expect("me")
}

#[tokio::test]
async fn expired_forged_and_unsigned_session_tokens_are_refused() {
    let app = spawn_app().await;
    let password = app.admin_password.clone().expect("pw");
    let client = app.browser_like_client();
    let res = app.post_login(&client, "admin", &password).await;
    let token = session_token(&res);
    assert_eq!(me_with_cookie(&app, &token).await.status(), 200);

    let (header, claims) = decode(&token);
    assert_eq!(header["alg"], "HS256");
    let key = std::fs::read(app.data_dir.path().join("var/jwt.key")).expect("key");
    let key = key.trim_ascii();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_secs() as i64;

    // Genuine key, same session, but expired.
    let mut expired = claims.clone();
    expired["exp"] = (now - 5).into();
    assert_eq!(
        me_with_cookie(&app, &sign(&expired, key)).await.status(),
        401
    );

    // Signed with another key.
    let forged = sign(&claims, b"some other key that is long enough!!");
    assert_eq!(me_with_cookie(&app, &forged).await.status(), 401);

    // Claims edited after signing.
    let mut parts: Vec<&str> = token.split('.').collect();
    let mut escalated = claims.clone();
    escalated["sub"] = "2".into();
    let body = B64.encode(serde_json::to_vec(&escalated).expect("json"));
    parts[1] = &body;
    assert_eq!(me_with_cookie(&app, &parts.join(".")).await.status(), 401);

    // alg: none, no signature.
    let none_header = B64.encode(br#"{"alg":"none","typ":"JWT"}"#);
    let none_body = B64.encode(serde_json::to_vec(&claims).expect("json"));
    for unsigned in [
        format!("{none_header}.{none_body}."),
        format!("{none_header}.{none_body}"),
    ] {
        assert_eq!(me_with_cookie(&app, &unsigned).await.status(), 401);
    }

    // Genuine key but a session id that was never issued.
    let mut invented = claims.clone();
    invented["jti"] = "never-issued".into();
    assert_eq!(
        me_with_cookie(&app, &sign(&invented, key)).await.status(),
        401
    );

    // The genuine token still works.
    assert_eq!(me_with_cookie(&app, &token).await.status(), 200);
}

#[tokio::test]
async fn ageing_session_is_renewed_with_a_new_cookie() {
    let app = spawn_app().await;
    let password = app.admin_password.clone().expect("pw");
    let client = app.browser_like_client();
    let res = app.post_login(&client, "admin", &password).await;
    let token = session_token(&res);
    let (_, claims) = decode(&token);

    // Fresh: no renewal.
    let res = me_with_cookie(&app, &token).await;
    assert_eq!(res.status(), 200);
    assert_eq!(set_cookie(res.headers(), SESSION), None);

    // Less than half its life left (default 30 minutes): renewed.
    let key = std::fs::read(app.data_dir.path().join("var/jwt.key")).expect("key");
    let mut ageing = claims.clone();
    ageing["exp"] = (claims["iat"].as_i64().expect("iat") + 60).into();
    let res = me_with_cookie(&app, &sign(&ageing, key.trim_ascii())).await;
    assert_eq!(res.status(), 200);
    let renewed = set_cookie(res.headers(), SESSION).expect("renewed cookie");
    let value = cookie_value(&renewed);
    let (_, new_claims) = decode(&value);
    assert_eq!(new_claims["jti"], claims["jti"]);
    assert!(new_claims["exp"].as_i64() > ageing["exp"].as_i64());
    assert_eq!(me_with_cookie(&app, &value).await.status(), 200);
}
