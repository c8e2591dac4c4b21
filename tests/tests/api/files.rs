//! The Files app end to end: the real portal (run as root by the tests) lists, changes,
//! uploads and downloads a user's files as that user, confined to their roots.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::eventually;
use crate::jobs::{JobCluster, JobUser};

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
    let root = crate::jobs::private_root();
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
    let config = crate::jobs::cluster_config(root.path(), 0) + &storage;
    let app = crate::helpers::spawn_with(crate::helpers::Options {
        extra_config: config,
        ..Default::default()
    })
    .await;
    JobCluster { app, root }
}

fn api(c: &JobCluster, path: &str) -> String {
    c.app.url(&format!("/api/v1/files{path}"))
}

fn q(path: &Path) -> String {
    crate::files::encode(&path.display().to_string())
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
    let alice = c.user("alice", 20601).await;

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
    let alice = c.user("alice", 20611).await;
    let bob = c.user("bob", 20612).await;
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
    let alice = c.user("alice", 20621).await;
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
    let alice = c.user("alice", 20631).await;
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
    crate::browser::submit_login(&b, "alice", "password-of-some-length").await;
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
