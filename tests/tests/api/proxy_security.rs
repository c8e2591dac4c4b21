//! The proxy between browsers and users' servers: the portal's cookies never cross it
//! in either direction, and an administrator (with `sessions.admin_access`) sees
//! another user's server sandboxed, in an opaque origin, with none of its cookies.

use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{eventually, spawn_with, Options, TestApp};
use crate::jobs::{cluster_config, private_root, JobCluster};

const PASSWORD: &str = "password-of-some-length";
const SANDBOX: &str = "sandbox allow-scripts allow-forms allow-popups allow-downloads";

/// A user's server that tries to set the portal's cookies, and answers with the
/// cookies it received.
const COOKIE_SERVER: &str = r#"
import http.server, socketserver, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = ("cookies received: " + self.headers.get("Cookie", "")).encode()
        self.send_response(200)
        self.send_header("Set-Cookie", "atrium_session=forged; Path=/; HttpOnly")
        self.send_header("Set-Cookie", "atrium_login_csrf=forged; Path=/login")
        self.send_header("Set-Cookie", "Atrium_Session=forged; Path=/")
        self.send_header("Set-Cookie", "app=1; Path=/user/")
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def address_string(self):
        return "unix"
    def log_message(self, *args):
        pass
socketserver.ThreadingUnixStreamServer(sys.argv[1], Handler).serve_forever()
"#;

async fn cookie_cluster() -> JobCluster {
    let root = private_root();
    let mut config = cluster_config(root.path(), 1);
    config.push_str(&format!(
        "[[environments]]\nname = \"cookies\"\nruntime = \"none\"\n\
         command = [\"/usr/bin/python3\", \"-c\", {COOKIE_SERVER:?}, \"{{socket}}\"]\n\
         [sessions]\nadmin_access = true\n"
    ));
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    JobCluster { app, root }
}

fn set_cookies(res: &reqwest::Response) -> Vec<String> {
    res.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect()
}

fn policies(res: &reqwest::Response) -> Vec<String> {
    res.headers()
        .get_all("content-security-policy")
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect()
}

async fn session_state(app: &TestApp, client: &reqwest::Client, id: i64) -> Value {
    client
        .get(app.url(&format!("/api/v1/sessions/{id}")))
        .send()
        .await
        .expect("session")
        .json()
        .await
        .expect("json")
}

#[tokio::test]
async fn a_users_server_cannot_set_the_portals_cookies_and_administrators_see_it_sandboxed() {
    let c = cookie_cluster().await;
    let app = &c.app;
    c.user("alice", 20611).await;
    let alice = app.login("alice", PASSWORD).await;
    let csrf = app.session_csrf(&alice).await;
    let res = alice
        .post(app.url("/api/v1/sessions"))
        .header("x-csrf-token", &csrf)
        .json(&json!({"gpus": 1, "environment": "cookies"}))
        .send()
        .await
        .expect("start");
    let started: Value = res.json().await.expect("json");
    let id = started["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{started}"));
    eventually("the session is ready", Duration::from_secs(60), || async {
        session_state(app, &alice, id).await["state"] == "ready"
    })
    .await;
    let page = app.url("/user/alice/default/");

    // The owner: the session's own cookie passes, the portal's never do, either way.
    let res = alice
        .get(&page)
        .header("accept", "text/html")
        .send()
        .await
        .expect("page");
    assert_eq!(res.status(), 200);
    assert_eq!(set_cookies(&res), ["app=1; Path=/user/"]);
    assert!(
        policies(&res).iter().all(|p| !p.contains("sandbox")),
        "{:?}",
        policies(&res)
    );
    let body = res.text().await.expect("body");
    assert!(body.starts_with("cookies received: "), "{body}");
    assert!(!body.to_lowercase().contains("atrium_"), "{body}");
    // Still alice's own session cookie in her browser: the forged one was dropped.
    assert_eq!(
        alice
            .get(app.url("/api/v1/me"))
            .send()
            .await
            .expect("me")
            .status(),
        200
    );

    // An administrator: sandboxed, and no cookie of the session is stored.
    let admin_password = app.admin_password.clone().expect("admin password");
    let admin = app.login("admin", &admin_password).await;
    let res = admin
        .get(&page)
        .header("accept", "text/html")
        .send()
        .await
        .expect("page");
    assert_eq!(res.status(), 200);
    assert_eq!(set_cookies(&res), Vec::<String>::new());
    assert!(
        policies(&res).iter().any(|p| p == SANDBOX),
        "{:?}",
        policies(&res)
    );
    let body = res.text().await.expect("body");
    assert!(!body.to_lowercase().contains("atrium_"), "{body}");

    let res = alice
        .delete(app.url(&format!("/api/v1/sessions/{id}")))
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .expect("stop");
    assert_eq!(res.status(), 202);
    eventually("the session ends", Duration::from_secs(60), || async {
        session_state(app, &alice, id).await["state"] == "ended"
    })
    .await;
}
