//! The proxy between browsers and users' servers: the portal's cookies never cross it
//! in either direction, an administrator (with `sessions.admin_access`) sees another
//! user's server sandboxed, in an opaque origin, with none of its cookies, and the
//! proxy reaches only a listener of the session's user, whatever the socket's name
//! leads to.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::{
    cluster_config, eventually, private_root, spawn_with, JobCluster, Options, TestApp, PASSWORD,
};

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
    JobCluster::on(app, root)
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
    c.user("alice").await;
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

/// A session server that only sleeps: it never listens on its socket.
const SLEEPER: &str = "import time; time.sleep(600)";

/// A session server that answers `USER` to every request, closing each connection (so
/// that every proxied request connects anew), and, once asked, keeps swapping its
/// socket's name with a link to the socket named in its second argument.
const SWAPPER: &str = r#"
import http.server, os, socketserver, sys, threading
sock, bait_target = sys.argv[1], sys.argv[2]
folder = os.path.dirname(sock)
real, bait = os.path.join(folder, "real"), os.path.join(folder, "bait")
go = threading.Event()
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if self.path.endswith("/start-swapping"):
            go.set()
        self.send_response(200)
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"USER")
    do_GET = answer
    do_POST = answer
    def address_string(self):
        return "unix"
    def log_message(self, *args):
        pass
server = socketserver.ThreadingUnixStreamServer(sock, Handler)
threading.Thread(target=server.serve_forever, daemon=True).start()
os.symlink(bait_target, bait)
go.wait()
while True:
    try:
        os.rename(sock, real); os.rename(bait, sock)
        os.rename(sock, bait); os.rename(real, sock)
    except OSError:
        pass
"#;

/// What a root-owned listener saw: connections, and bytes of requests.
#[derive(Default)]
struct Seen {
    connections: std::sync::atomic::AtomicUsize,
    bytes: std::sync::atomic::AtomicUsize,
}

/// A listener of root's at `path`: it answers `ROOT` to whatever it is sent and
/// counts what reaches it.
fn root_listener(path: &std::path::Path) -> (Arc<Seen>, std::os::unix::net::UnixListener) {
    use std::io::{Read, Write};
    let listener = std::os::unix::net::UnixListener::bind(path).expect("bind root's socket");
    let seen = Arc::new(Seen::default());
    let serving = listener.try_clone().expect("listener");
    let counts = seen.clone();
    std::thread::spawn(move || {
        for conn in serving.incoming() {
            let Ok(mut conn) = conn else { return };
            counts
                .connections
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let counts = counts.clone();
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                let mut buf = [0u8; 4096];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    counts
                        .bytes
                        .fetch_add(n, std::sync::atomic::Ordering::SeqCst);
                    let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nROOT");
                }
            });
        }
    });
    (seen, listener)
}

/// A portal whose `idle` environment runs [`SLEEPER`] and whose `swapper` environment
/// runs [`SWAPPER`] with a link to `bait`.
async fn listener_cluster(bait: &std::path::Path) -> JobCluster {
    let root = private_root();
    let mut config = cluster_config(root.path(), 1);
    config.push_str(&format!(
        "[[environments]]\nname = \"idle\"\nruntime = \"none\"\n\
         command = [\"/usr/bin/python3\", \"-c\", {SLEEPER:?}, \"{{socket}}\"]\n\
         [[environments]]\nname = \"swapper\"\nruntime = \"none\"\n\
         command = [\"/usr/bin/python3\", \"-c\", {SWAPPER:?}, \"{{socket}}\", {:?}]\n",
        bait.display().to_string()
    ));
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    JobCluster::on(app, root)
}

async fn start_session(app: &TestApp, client: &reqwest::Client, csrf: &str, env: &str) -> i64 {
    let res = client
        .post(app.url("/api/v1/sessions"))
        .header("x-csrf-token", csrf)
        .json(&json!({"gpus": 1, "environment": env}))
        .send()
        .await
        .expect("start");
    let started: Value = res.json().await.expect("json");
    started["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{started}"))
}

async fn stop_session(app: &TestApp, client: &reqwest::Client, csrf: &str, id: i64) {
    let res = client
        .delete(app.url(&format!("/api/v1/sessions/{id}")))
        .header("x-csrf-token", csrf)
        .send()
        .await
        .expect("stop");
    assert_eq!(res.status(), 202);
    eventually("the session ends", Duration::from_secs(60), || async {
        session_state(app, client, id).await["state"] == "ended"
    })
    .await;
}

#[tokio::test]
async fn a_socket_that_root_listens_on_is_refused_though_its_file_is_the_users() {
    let bait_dir = tempfile::tempdir().expect("tempdir");
    let c = listener_cluster(&bait_dir.path().join("unused.sock")).await;
    let app = &c.app;
    let alice_user = c.user("alice").await;
    let alice = app.login("alice", PASSWORD).await;
    let csrf = app.session_csrf(&alice).await;
    let id = start_session(app, &alice, &csrf, "idle").await;
    let dir = c.root.path().join("spool/sessions").join(id.to_string());
    eventually("the session's folder", Duration::from_secs(60), || {
        let there = dir.is_dir();
        async move { there }
    })
    .await;
    // Root listens where the session's server would, and gives the file to the user:
    // the file passes any look at its owner; the listener is root's.
    let sock = dir.join("server.sock");
    let (seen, _listener) = root_listener(&sock);
    std::os::unix::fs::chown(&sock, Some(alice_user.uid), Some(alice_user.uid)).expect("chown");
    eventually(
        "the portal's readiness probe connects",
        Duration::from_secs(60),
        || {
            let n = seen.connections.load(std::sync::atomic::Ordering::SeqCst);
            async move { n >= 3 }
        },
    )
    .await;
    let state = session_state(app, &alice, id).await;
    assert_ne!(state["state"], "ready", "{state}");
    assert_eq!(
        seen.bytes.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "root's listener was sent a request"
    );
    let res = alice
        .get(app.url("/user/alice/default/api/status"))
        .send()
        .await
        .expect("proxied");
    assert_ne!(res.status(), 200);
    assert_ne!(res.text().await.unwrap_or_default(), "ROOT");
    stop_session(app, &alice, &csrf, id).await;
}

#[tokio::test]
async fn a_socket_name_swapped_under_the_proxy_never_reaches_roots_listener() {
    // Root's socket, 0600 in a folder of root's: what the user points a link at.
    let bait_dir = tempfile::tempdir().expect("tempdir");
    let bait = bait_dir.path().join("root.sock");
    let (seen, _listener) = root_listener(&bait);
    let c = listener_cluster(&bait).await;
    let app = &c.app;
    c.user("alice").await;
    let alice = app.login("alice", PASSWORD).await;
    let csrf = app.session_csrf(&alice).await;
    let id = start_session(app, &alice, &csrf, "swapper").await;
    eventually("the session is ready", Duration::from_secs(60), || async {
        session_state(app, &alice, id).await["state"] == "ready"
    })
    .await;
    let res = alice
        .get(app.url("/user/alice/default/start-swapping"))
        .send()
        .await
        .expect("start swapping");
    assert_eq!(res.status(), 200);
    let (mut user, mut refused) = (0, 0);
    // At least 400 requests, and on until a swap has led the proxy to root's socket at
    // least once (a loaded machine may need more tries to lose the race), within a
    // deadline.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let mut i = 0;
    while (i < 400 || seen.connections.load(std::sync::atomic::Ordering::SeqCst) == 0)
        && std::time::Instant::now() < deadline
    {
        i += 1;
        let res = alice
            .post(app.url(&format!("/user/alice/default/post-{i}")))
            .header("origin", app.url("").trim_end_matches('/'))
            .body("x=1")
            .send()
            .await
            .expect("proxied");
        let status = res.status();
        let body = res.text().await.unwrap_or_default();
        assert_ne!(body, "ROOT", "request {i} reached root's listener");
        match status.as_u16() {
            200 => user += 1,
            _ => refused += 1,
        }
    }
    assert_eq!(
        seen.bytes.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "root's listener was sent a request"
    );
    assert!(
        seen.connections.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "the swaps never led the proxy to root's socket: the test proves nothing"
    );
    assert!(
        user > 0,
        "no request reached the user's own server ({refused} refused)"
    );
    stop_session(app, &alice, &csrf, id).await;
}
