//! The internal scheduler's restart: its queue comes back intact from the log, from
//! the snapshot a restart writes, and after a clean stop; and the portal serves (the
//! sessions' proxy) while the queue is still being rebuilt, with requests to the
//! scheduler waiting for it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use atrium_tests::support::fresh_database;
use atrium_tests::support::pg::pg_bin_dir;
use serde_json::{json, Value};

use crate::fixtures::{
    cluster_config, eventually, private_root, spawn_with, JobCluster, JobUser, Options, TestApp,
    PASSWORD,
};

/// The log without terminal colours.
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A numeric field (`name=value`) of a log line.
fn field(line: &str, name: &str) -> Option<u64> {
    let at = line.find(&format!(" {name}="))? + name.len() + 2;
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Wait for a log line containing `needle` (lines read are kept in `seen`).
async fn log_line(app: &TestApp, seen: &mut Vec<String>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        seen.extend(app.log().iter().map(|l| plain(l)));
        if let Some(at) = seen.iter().position(|l| l.contains(needle)) {
            return seen.remove(at);
        }
        assert!(
            Instant::now() < deadline,
            "no log line with {needle:?}:\n{}",
            seen.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The user's queue as the API lists it: id, name, state and reason of each job.
async fn queue(app: &TestApp, user: &JobUser) -> Vec<(String, String, String, String)> {
    let list = app
        .api(&user.token)
        .json("/api/v1/jobs?per_page=10000")
        .await;
    list["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| {
            (
                j["id"].as_str().unwrap_or_default().to_string(),
                j["name"].as_str().unwrap_or_default().to_string(),
                j["state"].as_str().unwrap_or_default().to_string(),
                j["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

const REBUILT: &str = "the scheduler's state is rebuilt";
const SNAPSHOT_WRITTEN: &str = "the scheduler snapshot is written";

#[tokio::test]
async fn a_queue_comes_back_intact_from_its_log_then_from_its_snapshot() {
    let mut c = JobCluster::start(1).await;
    let alice = c.user("alice").await;
    let mut ids = Vec::new();
    for i in 0..40 {
        let script = format!(
            "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --hold\n#SBATCH -J queued-{i}\n\
             #SBATCH -o out-%x-%j.txt\necho ran {i}\n"
        );
        ids.push(c.sbatch(&alice, &script).await);
    }
    let before = queue(&c.app, &alice).await;
    assert_eq!(before.len(), 40, "{before:?}");
    let mut seen = Vec::new();

    // A crash: the queue is in the log only (the first start's snapshot was empty).
    c.app.kill9();
    c.app.restart();
    let rebuilt = log_line(&c.app, &mut seen, REBUILT).await;
    assert!(
        field(&rebuilt, "entries").is_some_and(|n| n >= 40),
        "{rebuilt}"
    );
    assert_eq!(field(&rebuilt, "meta_rows"), Some(40), "{rebuilt}");
    assert_eq!(queue(&c.app, &alice).await, before);

    // The restart wrote a snapshot of what it replayed; a crash now reads it alone.
    log_line(&c.app, &mut seen, SNAPSHOT_WRITTEN).await;
    c.app.kill9();
    c.app.restart();
    let rebuilt = log_line(&c.app, &mut seen, REBUILT).await;
    // (What the portal logged since, a scheduling pass or two, is replayed.)
    assert!(
        field(&rebuilt, "entries").is_some_and(|n| n < 40),
        "{rebuilt}"
    );
    assert_eq!(field(&rebuilt, "meta_rows"), Some(0), "{rebuilt}");
    assert_eq!(field(&rebuilt, "open_jobs"), Some(40), "{rebuilt}");
    assert_eq!(queue(&c.app, &alice).await, before);

    // What the steps need came back with it: a released job writes where its
    // pattern says.
    let released = &ids[7];
    c.act(&alice, released, "release").await;
    let job = c
        .wait_for(
            &alice,
            released,
            &["COMPLETED", "FAILED"],
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(job["state"], "COMPLETED", "{job}");
    let out = alice.home.join(format!("out-queued-7-{released}.txt"));
    eventually("the job's output", Duration::from_secs(10), || async {
        std::fs::read_to_string(&out).is_ok_and(|t| t == "ran 7\n")
    })
    .await;

    // A clean stop writes a last snapshot: nothing is replayed after it.
    let status = c.app.terminate();
    assert!(status.success(), "{status}");
    c.app.restart();
    let rebuilt = log_line(&c.app, &mut seen, REBUILT).await;
    assert_eq!(field(&rebuilt, "entries"), Some(0), "{rebuilt}");
    let after = queue(&c.app, &alice).await;
    let expected: Vec<_> = before.into_iter().filter(|j| &j.0 != released).collect();
    assert_eq!(after, expected);
}

/// A unix-socket server answering every GET with a fixed text, as a session.
const HELLO_SERVER: &str = r#"
import http.server, socketserver, sys
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b"hello from the session"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def address_string(self):
        return "unix"
    def log_message(self, *args):
        pass
socketserver.ThreadingUnixStreamServer(sys.argv[1], Handler).serve_forever()
"#;

/// Holds PostgreSQL's exclusive lock on the scheduler's snapshot table (a `psql` in
/// an open transaction) until dropped: a restore cannot read its snapshot meanwhile.
struct SnapshotLock {
    psql: std::process::Child,
}

impl SnapshotLock {
    fn take(url: &str) -> SnapshotLock {
        let psql = pg_bin_dir().expect("PostgreSQL").join("psql");
        let mut child = Command::new(psql)
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", url])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("psql");
        let stdin = child.stdin.as_mut().expect("stdin");
        stdin
            .write_all(
                b"BEGIN;\nLOCK TABLE sched_snapshot IN ACCESS EXCLUSIVE MODE;\n\\echo locked\n",
            )
            .expect("write");
        stdin.flush().expect("flush");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line.trim(), "locked");
        SnapshotLock { psql: child }
    }
}

impl Drop for SnapshotLock {
    fn drop(&mut self) {
        if let Some(stdin) = self.psql.stdin.as_mut() {
            let _ = stdin.write_all(b"ROLLBACK;\n");
        }
        drop(self.psql.stdin.take());
        let _ = self.psql.wait();
    }
}

#[tokio::test]
async fn the_proxy_serves_a_session_while_the_queue_is_restored_and_requests_wait() {
    let db = fresh_database().await.expect("postgres database");
    let root = private_root();
    let mut config = cluster_config(root.path(), 2);
    config.push_str(&format!(
        "[[environments]]\nname = \"hello\"\nruntime = \"none\"\n\
         command = [\"/usr/bin/python3\", \"-c\", {HELLO_SERVER:?}, \"{{socket}}\"]\n"
    ));
    let app = spawn_with(Options {
        extra_config: config,
        database_url: Some(db.url.clone()),
    })
    .await;
    let mut c = JobCluster::on(app, root);
    let alice = c.user("alice").await;
    let browser = c.app.login("alice", PASSWORD).await;
    let csrf = c.app.session_csrf(&browser).await;
    let started: Value = browser
        .post(c.app.url("/api/v1/sessions"))
        .header("x-csrf-token", &csrf)
        .json(&json!({"gpus": 1, "environment": "hello"}))
        .send()
        .await
        .expect("start")
        .json()
        .await
        .expect("json");
    let id = started["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{started}"));
    eventually("the session is ready", Duration::from_secs(60), || {
        let (app, browser) = (&c.app, &browser);
        async move {
            let s: Value = browser
                .get(app.url(&format!("/api/v1/sessions/{id}")))
                .send()
                .await
                .expect("session")
                .json()
                .await
                .expect("json");
            s["state"] == "ready"
        }
    })
    .await;
    for i in 0..5 {
        c.sbatch(
            &alice,
            &format!(
                "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --hold\n#SBATCH -J held-{i}\ntrue\n"
            ),
        )
        .await;
    }
    let before = queue(&c.app, &alice).await;

    c.app.kill9();
    let lock = SnapshotLock::take(&db.url);
    c.app.restart();
    // The session is proxied although the scheduler cannot have read its snapshot.
    let browser = c.app.login("alice", PASSWORD).await;
    let res = browser
        .get(c.app.url("/user/alice/default/"))
        .send()
        .await
        .expect("proxied");
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.expect("body"), "hello from the session");
    // A request to the scheduler waits for the restore …
    let listing = tokio::spawn({
        let (url, token) = (
            c.app.url("/api/v1/jobs?per_page=10000"),
            alice.token.clone(),
        );
        async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .expect("jobs")
        }
    });
    let res = browser
        .get(c.app.url("/user/alice/default/again"))
        .send()
        .await
        .expect("proxied");
    assert_eq!(res.status(), 200);
    assert!(
        !listing.is_finished(),
        "the queue was listed before it was restored"
    );
    // … and is answered, with the queue intact, once the restore could go on.
    drop(lock);
    let res = listing.await.expect("task");
    assert_eq!(res.status(), 200);
    assert_eq!(queue(&c.app, &alice).await, before);
}
