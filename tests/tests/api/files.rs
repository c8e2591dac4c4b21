//! The Files app end to end: the real portal (run as root by the tests) lists, changes,
//! uploads and downloads a user's files as that user, confined to their roots.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::{eventually, JobCluster, JobUser};

/// Bytes that do not repeat in any short period (a xorshift stream).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A cluster whose storage has a data set folder (with `set.csv`) and a project space.
async fn cluster(extra: &str) -> JobCluster {
    let root = crate::fixtures::private_root();
    let datasets = root.path().join("datasets");
    let projects = root.path().join("projects");
    std::fs::create_dir(&datasets).expect("datasets");
    std::fs::write(datasets.join("set.csv"), "a,b\n1,2\n").expect("write");
    std::fs::create_dir(&projects).expect("projects");
    std::fs::set_permissions(&datasets, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&projects, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    std::fs::set_permissions(
        datasets.join("set.csv"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");
    let storage = format!(
        "[storage]\ndatasets = [{{ source = \"{}\", target = \"/datasets\" }}]\nprojects = [{{ source = \"{}\", target = \"/projects\" }}]\n{extra}",
        datasets.display(),
        projects.display()
    );
    let config = crate::fixtures::cluster_config(root.path(), 0) + &storage;
    let app = crate::fixtures::spawn_with(crate::fixtures::Options {
        extra_config: config,
        ..Default::default()
    })
    .await;
    JobCluster::on(app, root)
}

fn api(c: &JobCluster, path: &str) -> String {
    c.app.url(&format!("/api/v1/files{path}"))
}

fn q(path: &Path) -> String {
    encode(&path.display().to_string())
}

/// Percent-encode a query value.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn get(c: &JobCluster, u: &JobUser, path: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(api(c, path))
        .bearer_auth(&u.token)
        .send()
        .await
        .expect("get")
}

async fn post(c: &JobCluster, u: &JobUser, path: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(api(c, path))
        .bearer_auth(&u.token)
        .json(&body)
        .send()
        .await
        .expect("post")
}

async fn put(
    c: &JobCluster,
    u: &JobUser,
    target: &Path,
    offset: u64,
    body: Vec<u8>,
) -> reqwest::Response {
    reqwest::Client::new()
        .put(api(
            c,
            &format!("/upload?path={}&offset={offset}", q(target)),
        ))
        .bearer_auth(&u.token)
        .body(body)
        .send()
        .await
        .expect("put")
}

async fn held(c: &JobCluster, u: &JobUser, target: &Path) -> u64 {
    let res = get(c, u, &format!("/upload?path={}", q(target))).await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.expect("json");
    body["offset"].as_u64().expect("offset")
}

/// Send the head of a PUT of `declared` bytes and only `sent` of them, then hang up.
async fn interrupted_put(
    c: &JobCluster,
    u: &JobUser,
    target: &Path,
    offset: u64,
    data: &[u8],
    declared: usize,
) {
    use tokio::io::AsyncWriteExt;
    let addr = c.app.base.trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "PUT /api/v1/files/upload?path={}&offset={offset} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\nContent-Length: {declared}\r\n\r\n",
        q(target),
        u.token
    );
    s.write_all(head.as_bytes()).await.expect("head");
    s.write_all(data).await.expect("part of the body");
    s.flush().await.expect("flush");
    drop(s);
}

#[tokio::test]
async fn files_are_listed_changed_uploaded_and_downloaded_as_the_user() {
    let c = cluster("").await;
    let alice = c.user("alice").await;

    // No path: the roots, the data sets read-only.
    let res = get(&c, &alice, "").await;
    assert_eq!(res.status(), 200);
    let roots: Value = res.json().await.expect("json");
    let roots = roots["roots"].as_array().expect("roots").clone();
    assert_eq!(roots[0]["path"], alice.home.display().to_string());
    assert!(roots
        .iter()
        .any(|r| r["read_only"] == true && r["path"].as_str().unwrap_or("").ends_with("datasets")));

    // A folder, created as alice.
    let work = alice.home.join("work");
    let res = post(&c, &alice, "/mkdir", json!({"path": work})).await;
    assert_eq!(
        res.status(),
        201,
        "{}",
        res.text().await.unwrap_or_default()
    );
    assert_eq!(std::fs::metadata(&work).expect("made").uid(), alice.uid);
    let res = post(&c, &alice, "/mkdir", json!({"path": work})).await;
    assert_eq!(res.status(), 409, "exists already");

    // An upload in pieces, one of them cut off midway; it continues from what arrived.
    let data = noise(3 << 20, 7);
    let target = work.join("model weights.bin");
    assert_eq!(held(&c, &alice, &target).await, 0);
    let res = put(&c, &alice, &target, 0, data[..1 << 20].to_vec()).await;
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let answer: Value = res.json().await.expect("json");
    assert_eq!(answer["offset"], 1 << 20);
    // Past what the portal holds: refused, naming the offset.
    let res = put(&c, &alice, &target, 2 << 20, vec![0; 10]).await;
    assert_eq!(res.status(), 409);
    interrupted_put(
        &c,
        &alice,
        &target,
        1 << 20,
        &data[1 << 20..(3 << 19)],
        1 << 20,
    )
    .await;
    eventually(
        "the interrupted piece is kept",
        Duration::from_secs(20),
        || async { held(&c, &alice, &target).await == (3 << 19) },
    )
    .await;
    let offset = held(&c, &alice, &target).await as usize;
    let res = put(&c, &alice, &target, offset as u64, data[offset..].to_vec()).await;
    assert_eq!(res.status(), 200);
    let res = post(
        &c,
        &alice,
        "/upload/complete",
        json!({"path": target, "size": data.len() + 1}),
    )
    .await;
    assert_eq!(res.status(), 409, "the wrong size is refused");
    let res = post(
        &c,
        &alice,
        "/upload/complete",
        json!({"path": target, "size": data.len()}),
    )
    .await;
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let meta = std::fs::metadata(&target).expect("in place");
    assert_eq!(meta.uid(), alice.uid, "the uploaded file is the user's");
    assert_eq!(meta.len(), data.len() as u64);
    assert!(!work.join(".model weights.bin.atrium-partial").exists());

    // Downloaded whole, byte for byte, and by range.
    let res = get(&c, &alice, &format!("/download?path={}", q(&target))).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.headers()["content-length"],
        data.len().to_string().as_str()
    );
    let disposition = res.headers()["content-disposition"]
        .to_str()
        .expect("ascii")
        .to_string();
    assert!(disposition.starts_with("attachment;"), "{disposition}");
    let body = res.bytes().await.expect("body");
    assert!(body[..] == data[..], "downloaded bytes differ");
    let res = reqwest::Client::new()
        .get(api(&c, &format!("/download?path={}", q(&target))))
        .bearer_auth(&alice.token)
        .header("range", "bytes=100-199")
        .send()
        .await
        .expect("range");
    assert_eq!(res.status(), 206);
    assert_eq!(res.bytes().await.expect("body")[..], data[100..200]);

    // Listed: folders first, then files by name.
    let res = post(&c, &alice, "/mkdir", json!({"path": work.join("zz")})).await;
    assert_eq!(res.status(), 201);
    let res = get(&c, &alice, &format!("?path={}", q(&work))).await;
    let listing: Value = res.json().await.expect("json");
    let names: Vec<&str> = listing["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(names, ["zz", "model weights.bin"]);
    assert_eq!(listing["entries"][1]["size"], data.len());

    // Renamed, then deleted (a folder that is not empty needs recursive).
    let moved = work.join("zz/w.bin");
    let res = post(&c, &alice, "/rename", json!({"from": target, "to": moved})).await;
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    assert!(moved.exists() && !target.exists());
    let client = reqwest::Client::new();
    let res = client
        .delete(api(&c, &format!("?path={}", q(&work.join("zz")))))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("delete");
    assert_eq!(res.status(), 409);
    let res = client
        .delete(api(
            &c,
            &format!("?path={}&recursive=true", q(&work.join("zz"))),
        ))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("delete");
    assert_eq!(res.status(), 200);
    assert!(!work.join("zz").exists());
}

#[tokio::test]
async fn files_outside_the_roots_and_links_to_other_users_files_are_refused() {
    let c = cluster("").await;
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;
    let secret = bob.home.join("secret.txt");
    std::fs::write(&secret, "bob's").expect("write");
    std::os::unix::fs::chown(&secret, Some(bob.uid), Some(bob.uid)).expect("chown");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // bob's home is 0700; a file of his that anyone could read, in a folder anyone can.
    std::os::unix::fs::symlink(&secret, alice.home.join("to-bob")).expect("link");
    std::os::unix::fs::symlink("/etc", alice.home.join("etc")).expect("link");
    std::os::unix::fs::lchown(alice.home.join("to-bob"), Some(alice.uid), Some(alice.uid))
        .expect("chown");

    let refused = |res: reqwest::Response, what: &'static str| async move {
        let status = res.status();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        assert!(status.is_client_error(), "{what}: {status} {body}");
        assert!(
            body["field"] == "path" || body["message"].as_str().unwrap_or("").contains("path"),
            "{what}: {body}"
        );
    };
    refused(get(&c, &alice, "?path=/etc").await, "/etc").await;
    refused(get(&c, &alice, "?path=../..").await, "../..").await;
    refused(
        get(
            &c,
            &alice,
            &format!("?path={}", q(&alice.home.join("../bob"))),
        )
        .await,
        "..",
    )
    .await;
    refused(
        get(&c, &alice, &format!("?path={}", q(&bob.home))).await,
        "bob's home",
    )
    .await;
    refused(
        get(&c, &alice, &format!("?path={}", q(&alice.home.join("etc")))).await,
        "a link to /etc",
    )
    .await;
    refused(
        get(
            &c,
            &alice,
            &format!("/download?path={}", q(&alice.home.join("to-bob"))),
        )
        .await,
        "a link to bob's file",
    )
    .await;
    refused(
        get(
            &c,
            &alice,
            &format!("/download?path={}", q(&alice.home.join("etc/passwd"))),
        )
        .await,
        "/etc/passwd through a link",
    )
    .await;
    refused(
        post(
            &c,
            &alice,
            "/mkdir",
            json!({"path": "/tmp/atrium-files-escape"}),
        )
        .await,
        "mkdir in /tmp",
    )
    .await;
    refused(
        post(
            &c,
            &alice,
            "/mkdir",
            json!({"path": alice.home.join("etc/atrium-escape")}),
        )
        .await,
        "mkdir through a link",
    )
    .await;
    refused(
        put(
            &c,
            &alice,
            &alice.home.join("etc/atrium-escape"),
            0,
            b"x".to_vec(),
        )
        .await,
        "upload through a link",
    )
    .await;
    let res = post(
        &c,
        &alice,
        "/rename",
        json!({"from": alice.home.join("etc/passwd"), "to": alice.home.join("h")}),
    )
    .await;
    assert!(res.status().is_client_error(), "{}", res.status());
    assert!(!Path::new("/tmp/atrium-files-escape").exists());
    assert!(!Path::new("/etc/atrium-escape").exists());
    assert!(!Path::new("/etc/.atrium-escape.atrium-partial").exists());
    assert!(Path::new("/etc/passwd").exists());
    assert_eq!(
        std::fs::read_to_string(&secret).expect("read"),
        "bob's",
        "bob's file unchanged"
    );
    // Deleting the link removes the link, never what it leads to.
    let res = reqwest::Client::new()
        .delete(api(&c, &format!("?path={}", q(&alice.home.join("to-bob")))))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("delete");
    assert_eq!(res.status(), 200);
    assert!(secret.exists());
}

#[tokio::test]
async fn data_sets_are_read_only_and_uploads_are_bounded() {
    let c = cluster("max_upload_chunk_mb = 1\nmax_upload_mb = 2\n").await;
    let alice = c.user("alice").await;
    let datasets = c.root.path().join("datasets");

    let res = get(&c, &alice, &format!("?path={}", q(&datasets))).await;
    assert_eq!(res.status(), 200);
    let listing: Value = res.json().await.expect("json");
    assert_eq!(listing["read_only"], true);
    let res = get(
        &c,
        &alice,
        &format!("/download?path={}", q(&datasets.join("set.csv"))),
    )
    .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.expect("text"), "a,b\n1,2\n");

    for res in [
        post(&c, &alice, "/mkdir", json!({"path": datasets.join("new")})).await,
        post(
            &c,
            &alice,
            "/rename",
            json!({"from": datasets.join("set.csv"), "to": datasets.join("x.csv")}),
        )
        .await,
        put(&c, &alice, &datasets.join("up.bin"), 0, b"x".to_vec()).await,
        reqwest::Client::new()
            .delete(api(&c, &format!("?path={}", q(&datasets.join("set.csv")))))
            .bearer_auth(&alice.token)
            .send()
            .await
            .expect("delete"),
    ] {
        assert_eq!(res.status(), 403);
        let body: Value = res.json().await.expect("json");
        assert!(
            body["message"].as_str().unwrap_or("").contains("read-only"),
            "{body}"
        );
    }
    assert!(datasets.join("set.csv").exists());
    assert!(!datasets.join("new").exists());

    // A piece over storage.max_upload_chunk_mb, a file over storage.max_upload_mb.
    let target = alice.home.join("big.bin");
    let res = put(&c, &alice, &target, 0, vec![1; (1 << 20) + 1]).await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["field"], "body", "{body}");
    let res = put(&c, &alice, &target, 0, vec![1; 1 << 20]).await;
    assert_eq!(res.status(), 200);
    let res = put(&c, &alice, &target, 1 << 20, vec![1; 1 << 20]).await;
    assert_eq!(res.status(), 200);
    let res = put(&c, &alice, &target, 2 << 20, vec![1; 1]).await;
    assert_eq!(res.status(), 400, "over the largest file");

    // A browser session must send its CSRF token to change anything.
    let client = c.app.login("alice", "password-of-some-length").await;
    let res = client
        .post(api(&c, "/mkdir"))
        .json(&json!({"path": alice.home.join("c")}))
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 403);
    let csrf = c.app.session_csrf(&client).await;
    let res = client
        .post(api(&c, "/mkdir"))
        .header("x-csrf-token", csrf)
        .json(&json!({"path": alice.home.join("c")}))
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 201);
}

/// Whether the files at `a` and `b` hold the same bytes (read a block at a time).
fn same_bytes(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (mut fa, mut fb) = (
        std::fs::File::open(a).expect("open a"),
        std::fs::File::open(b).expect("open b"),
    );
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = fa.read(&mut ba).expect("read a");
        let mut m = 0;
        while m < n {
            let k = fb.read(&mut bb[m..n]).expect("read b");
            if k == 0 {
                return false;
            }
            m += k;
        }
        if ba[..n] != bb[..n] {
            return false;
        }
        if n == 0 {
            return fb.read(&mut bb).expect("read b") == 0;
        }
    }
}

#[tokio::test]
async fn chromium_uploads_200_mb_through_the_page_and_downloads_it_back() {
    use atrium_tests::support::browser;
    use fantoccini::Locator;
    let c = cluster("").await;
    let alice = c.user("alice").await;
    // The file to upload, in the test's own directory (removed with it).
    let local_dir = tempfile::tempdir().expect("tmp");
    let local = local_dir.path().join("weights-200mb.bin");
    {
        let mut f = std::fs::File::create(&local).expect("create");
        for block in 0..25u64 {
            std::io::Write::write_all(&mut f, &noise(8 << 20, 11 + block)).expect("write");
        }
    }
    let size = 200u64 << 20;
    assert_eq!(std::fs::metadata(&local).expect("stat").len(), size);

    let b = browser().await.expect("chromium");
    b.goto(&c.app.url("/login")).await.expect("login page");
    crate::fixtures::browser::submit_login(&b, "alice", "password-of-some-length").await;
    b.wait()
        .for_element(Locator::Id("logout"))
        .await
        .expect("logged in");
    b.goto(&c.app.url(&format!("/files?path={}", q(&alice.home))))
        .await
        .expect("files page");
    let input = b
        .wait()
        .for_element(Locator::Id("files-upload"))
        .await
        .expect("upload control");
    input
        .send_keys(local.to_str().expect("utf-8"))
        .await
        .expect("choose the file");
    let done = b
        .wait()
        .at_most(Duration::from_secs(300))
        .for_element(Locator::Css(".files-upload[data-state=done]"))
        .await;
    if let Err(e) = done {
        let note = b.find(Locator::Css(".files-upload-note")).await.ok();
        let note = match note {
            Some(n) => n.text().await.unwrap_or_default(),
            None => String::new(),
        };
        panic!("the upload did not complete: {e}: {note}");
    }
    let full = b
        .execute(
            "var p = document.querySelector('.files-upload progress'); return p.value === p.max && p.max > 0;",
            vec![],
        )
        .await
        .expect("progress bar");
    assert_eq!(
        full,
        serde_json::Value::Bool(true),
        "the progress bar is full"
    );

    // On disk: the whole file, the user's, byte for byte.
    let uploaded = alice.home.join("weights-200mb.bin");
    let meta = std::fs::metadata(&uploaded).expect("uploaded");
    assert_eq!(meta.len(), size);
    assert_eq!(
        meta.uid(),
        alice.uid,
        "the uploaded file belongs to the user"
    );
    assert!(same_bytes(&local, &uploaded), "the uploaded bytes differ");

    // Back through /files/download with the browser's session.
    let cookie = b
        .get_named_cookie("atrium_session")
        .await
        .expect("session cookie");
    let mut res = reqwest::Client::new()
        .get(c.app.url(&format!("/files/download?path={}", q(&uploaded))))
        .header("cookie", format!("atrium_session={}", cookie.value()))
        .send()
        .await
        .expect("download");
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-length"], size.to_string().as_str());
    assert!(res.headers()["content-disposition"]
        .to_str()
        .unwrap_or("")
        .starts_with("attachment"));
    let back = local_dir.path().join("downloaded.bin");
    {
        let mut f = std::fs::File::create(&back).expect("create");
        while let Some(chunk) = res.chunk().await.expect("chunk") {
            std::io::Write::write_all(&mut f, &chunk).expect("write");
        }
    }
    assert!(same_bytes(&local, &back), "the downloaded bytes differ");
    b.close().await.expect("close");
}

/// A watcher that stops (`SIGSTOP`) every process of `uid` as soon as it sees it, as
/// a user can do to their own `atrium files` helpers; it stops when dropped.
struct Stopper {
    uid: u32,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Stopper {
    fn start(uid: u32) -> Stopper {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        let thread = std::thread::spawn(move || {
            let mut stopped = std::collections::BTreeSet::new();
            while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                let running: Vec<String> = atrium_tests::support::process::processes_of_uid(uid)
                    .into_iter()
                    .filter(|(_, state)| *state != 'T')
                    .map(|(pid, _)| {
                        stopped.insert(pid);
                        pid.to_string()
                    })
                    .collect();
                if !running.is_empty() {
                    let _ = std::process::Command::new("kill")
                        .arg("-STOP")
                        .args(&running)
                        .stderr(std::process::Stdio::null())
                        .status();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            stopped.len()
        });
        Stopper {
            uid,
            done,
            thread: Some(thread),
        }
    }

    /// Stop watching; how many processes it stopped.
    fn finish(&mut self) -> usize {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.take().map_or(0, |t| t.join().unwrap_or(0))
    }
}

impl Drop for Stopper {
    /// Whatever it stopped and is still there (the test failed before the portal
    /// ended them) is killed: nothing is left stopped on the machine.
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let left: Vec<String> = atrium_tests::support::process::processes_of_uid(self.uid)
            .into_iter()
            .map(|(pid, _)| pid.to_string())
            .collect();
        if !left.is_empty() {
            let _ = std::process::Command::new("kill")
                .arg("-KILL")
                .args(&left)
                .status();
        }
    }
}

#[tokio::test]
async fn one_users_unread_downloads_and_stopped_helpers_stall_nobody_else() {
    let c = cluster("files_timeout_seconds = 15\n").await;
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;
    let big = alice.home.join("big.bin");
    std::fs::write(&big, noise(32 << 20, 7)).expect("write");
    std::os::unix::fs::chown(&big, Some(alice.uid), Some(alice.uid)).expect("chown");

    // 600 downloads whose client never reads a byte of the answer.
    let addr = c.app.base.trim_start_matches("http://").to_string();
    let head = format!(
        "GET /api/v1/files/download?path={} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\r\n",
        q(&big),
        alice.token
    );
    let mut unread = Vec::new();
    for _ in 0..600 {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        s.write_all(head.as_bytes()).await.expect("request");
        unread.push(s);
    }

    // 600 listings while every helper of hers is stopped as it starts.
    let mut stopper = Stopper::start(alice.uid);
    let home = q(&alice.home);
    let mut listings = Vec::new();
    for _ in 0..600 {
        let url = api(&c, &format!("?path={home}"));
        let token = alice.token.clone();
        listings.push(tokio::spawn(async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }));
    }
    // The burst is answered (beyond her share at once, with a 503); what is left are
    // her stopped helpers and her unread downloads.
    eventually(
        "all but her share of the listings are answered",
        Duration::from_secs(60),
        || {
            let waiting = listings.iter().filter(|l| !l.is_finished()).count();
            async move { waiting <= 8 }
        },
    )
    .await;
    eventually(
        "some of her helpers are stopped",
        Duration::from_secs(30),
        || {
            let stopped = atrium_tests::support::process::processes_of_uid(alice.uid)
                .iter()
                .any(|(_, s)| *s == 'T');
            async move { stopped }
        },
    )
    .await;

    // Another user logs in and lists his home as if nothing were going on.
    let started = std::time::Instant::now();
    let bob_browser = c.app.login("bob", "password-of-some-length").await;
    let login = started.elapsed();
    assert!(login < Duration::from_secs(1), "bob's login took {login:?}");
    let started = std::time::Instant::now();
    let res = get(&c, &bob, &format!("?path={}", q(&bob.home))).await;
    assert_eq!(res.status(), 200);
    let listing = started.elapsed();
    assert!(
        listing < Duration::from_secs(2),
        "bob's listing took {listing:?}"
    );
    drop(bob_browser);

    // No helper outlives its deadline (15 s): each is killed and reaped.
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for l in listings {
        *statuses.entry(l.await.unwrap_or(0)).or_default() += 1;
    }
    let stopped = stopper.finish();
    assert!(
        stopped > 0,
        "no helper was stopped: the test proves nothing"
    );
    let left = atrium_tests::support::until(
        "none of her helpers is left",
        Duration::from_secs(30),
        || {
            let left = atrium_tests::support::process::processes_of_uid(alice.uid);
            async move { left.is_empty().then_some(()) }
        },
    )
    .await;
    if let Err(e) = left {
        let left: Vec<String> = atrium_tests::support::process::processes_of_uid(alice.uid)
            .iter()
            .map(|(pid, state)| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!(
                    "{pid} {state} {}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                )
            })
            .collect();
        panic!("{e:#}: {left:?}\nstatuses {statuses:?}");
    }
    // Beyond her share, refused at once with a Retry-After; the stopped ones failed
    // at their deadline.
    assert!(
        statuses.get(&503).copied().unwrap_or(0) > 500,
        "listings by status: {statuses:?}"
    );
    assert_eq!(statuses.get(&500), None, "listings by status: {statuses:?}");
    let res = get(&c, &alice, &format!("?path={home}")).await;
    assert_eq!(res.status(), 200, "her own listing works again");
    drop(unread);
}

/// `mkfs.ext4` of a `size_mb` image at `image` with `options`, loop-mounted at `at`
/// with `mount_options`; `false` (after saying why) where this machine does not allow it.
fn loop_ext4(image: &Path, at: &Path, size_mb: u64, options: &[&str], mount_options: &str) -> bool {
    let ok = |mut cmd: std::process::Command| {
        cmd.output()
            .map(|o| {
                if !o.status.success() {
                    eprintln!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr).trim());
                }
                o.status.success()
            })
            .unwrap_or(false)
    };
    let file = std::fs::File::create(image).expect("image");
    file.set_len(size_mb << 20).expect("size");
    drop(file);
    let mut mkfs = std::process::Command::new("/sbin/mkfs.ext4");
    mkfs.args(["-q", "-F"]).args(options).arg(image);
    let mut mount = std::process::Command::new("/bin/mount");
    mount
        .args(["-o", &format!("loop,{mount_options}")])
        .arg(image)
        .arg(at);
    ok(mkfs) && ok(mount)
}

/// Unmounts the file system at its path when dropped.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("/bin/umount")
            .arg("-d")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test]
async fn an_upload_is_written_as_the_user_would_write_it() {
    // The project space is a small ext4 with half its blocks reserved for root.
    let c = cluster("").await;
    let projects = c.root.path().join("projects");
    let image = c.root.path().join("projects.img");
    if !loop_ext4(&image, &projects, 64, &["-m", "50"], "rw") {
        assert!(
            !atrium_tests::support::in_ci(),
            "a loop-mounted ext4 is needed in CI (root, /dev/loop-control)"
        );
        eprintln!("SKIPPED an_upload_is_written_as_the_user_would_write_it: no loop mount here");
        return;
    }
    let _mounted = Mounted(projects.clone());
    std::fs::set_permissions(&projects, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let alice = c.user("alice").await;

    // 40 MiB fit only in root's reserved blocks: the user's own write would stop at
    // about 29 MiB, and so does the portal's for her.
    let target = projects.join("big.bin");
    let res = put(&c, &alice, &target, 0, noise(40 << 20, 3)).await;
    assert_eq!(res.status(), 409, "an upload used root's reserved blocks");
    let body: Value = res.json().await.expect("json");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("no space left"),
        "{body}"
    );
    // What did fit is the user's, and resumable.
    let offset = held(&c, &alice, &target).await;
    assert!(offset < 40 << 20, "{offset}");

    // Disk quotas, where the kernel has them (CONFIG_QUOTA) and `setquota` is there.
    let quota_dir = c.root.path().join("quota");
    std::fs::create_dir(&quota_dir).expect("mkdir");
    let has_setquota = Path::new("/usr/sbin/setquota").exists();
    if !has_setquota
        || !loop_ext4(
            &c.root.path().join("quota.img"),
            &quota_dir,
            64,
            &["-O", "quota", "-E", "quotatype=usrquota"],
            "usrquota",
        )
    {
        eprintln!(
            "quota part skipped: {}",
            if has_setquota {
                "the kernel has no disk quotas (CONFIG_QUOTA)"
            } else {
                "setquota (Debian's quota) is not installed"
            }
        );
        return;
    }
    let _quota_mounted = Mounted(quota_dir.clone());
    std::fs::set_permissions(&quota_dir, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    // A hard limit of 8 MiB for her (blocks of 1 KiB).
    let set = std::process::Command::new("/usr/sbin/setquota")
        .args(["-u", &alice.uid.to_string(), "0", "8192", "0", "0"])
        .arg(&quota_dir)
        .status();
    assert!(set.is_ok_and(|s| s.success()), "setquota");
    let res = put(&c, &alice, &quota_dir.join("q.bin"), 0, noise(16 << 20, 4)).await;
    assert_eq!(res.status(), 409);
    let body: Value = res.json().await.expect("json");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("over quota"),
        "{body}"
    );
}
