//! The Files app end to end: the real portal (run as root by the tests) lists, changes,
//! uploads and downloads a user's files as that user, confined to their roots.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::files::{noise, q, storage_cluster};
use crate::fixtures::{eventually, JobCluster, JobUser};

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
    let c = storage_cluster("").await;
    let alice = c.user("alice").await;

    // No path: the roots, the data sets read-only.
    let res = c.files(&alice).get("").await;
    assert_eq!(res.status(), 200);
    let roots: Value = res.json().await.expect("json");
    let roots = roots["roots"].as_array().expect("roots").clone();
    assert_eq!(roots[0]["path"], alice.home.display().to_string());
    assert!(roots
        .iter()
        .any(|r| r["read_only"] == true && r["path"].as_str().unwrap_or("").ends_with("datasets")));

    // A folder, created as alice.
    let work = alice.home.join("work");
    let res = c.files(&alice).post("/mkdir", json!({"path": work})).await;
    assert_eq!(
        res.status(),
        201,
        "{}",
        res.text().await.unwrap_or_default()
    );
    assert_eq!(std::fs::metadata(&work).expect("made").uid(), alice.uid);
    let res = c.files(&alice).post("/mkdir", json!({"path": work})).await;
    assert_eq!(res.status(), 409, "exists already");

    // An upload in pieces, one of them cut off midway; it continues from what arrived.
    let data = noise(3 << 20, 7);
    let target = work.join("model weights.bin");
    assert_eq!(c.files(&alice).held(&target).await, 0);
    let res = c
        .files(&alice)
        .put(&target, 0, data[..1 << 20].to_vec())
        .await;
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    let answer: Value = res.json().await.expect("json");
    assert_eq!(answer["offset"], 1 << 20);
    // Past what the portal holds: refused, naming the offset.
    let res = c.files(&alice).put(&target, 2 << 20, vec![0; 10]).await;
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
        || async { c.files(&alice).held(&target).await == (3 << 19) },
    )
    .await;
    let offset = c.files(&alice).held(&target).await as usize;
    let res = c
        .files(&alice)
        .put(&target, offset as u64, data[offset..].to_vec())
        .await;
    assert_eq!(res.status(), 200);
    let res = c
        .files(&alice)
        .post(
            "/upload/complete",
            json!({"path": target, "size": data.len() + 1}),
        )
        .await;
    assert_eq!(res.status(), 409, "the wrong size is refused");
    let res = c
        .files(&alice)
        .post(
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
    let res = c
        .files(&alice)
        .get(&format!("/download?path={}", q(&target)))
        .await;
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
        .get(c.files_url(&format!("/download?path={}", q(&target))))
        .bearer_auth(&alice.token)
        .header("range", "bytes=100-199")
        .send()
        .await
        .expect("range");
    assert_eq!(res.status(), 206);
    assert_eq!(res.bytes().await.expect("body")[..], data[100..200]);

    // Listed: folders first, then files by name.
    let res = c
        .files(&alice)
        .post("/mkdir", json!({"path": work.join("zz")}))
        .await;
    assert_eq!(res.status(), 201);
    let res = c.files(&alice).get(&format!("?path={}", q(&work))).await;
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
    let res = c
        .files(&alice)
        .post("/rename", json!({"from": target, "to": moved}))
        .await;
    assert_eq!(
        res.status(),
        200,
        "{}",
        res.text().await.unwrap_or_default()
    );
    assert!(moved.exists() && !target.exists());
    let client = reqwest::Client::new();
    let res = client
        .delete(c.files_url(&format!("?path={}", q(&work.join("zz")))))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("delete");
    assert_eq!(res.status(), 409);
    let res = client
        .delete(c.files_url(&format!("?path={}&recursive=true", q(&work.join("zz")))))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("delete");
    assert_eq!(res.status(), 200);
    assert!(!work.join("zz").exists());
}

#[tokio::test]
async fn files_outside_the_roots_and_links_to_other_users_files_are_refused() {
    let c = storage_cluster("").await;
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
    refused(c.files(&alice).get("?path=/etc").await, "/etc").await;
    refused(c.files(&alice).get("?path=../..").await, "../..").await;
    refused(
        c.files(&alice)
            .get(&format!("?path={}", q(&alice.home.join("../bob"))))
            .await,
        "..",
    )
    .await;
    refused(
        c.files(&alice)
            .get(&format!("?path={}", q(&bob.home)))
            .await,
        "bob's home",
    )
    .await;
    refused(
        c.files(&alice)
            .get(&format!("?path={}", q(&alice.home.join("etc"))))
            .await,
        "a link to /etc",
    )
    .await;
    refused(
        c.files(&alice)
            .get(&format!("/download?path={}", q(&alice.home.join("to-bob"))))
            .await,
        "a link to bob's file",
    )
    .await;
    refused(
        c.files(&alice)
            .get(&format!(
                "/download?path={}",
                q(&alice.home.join("etc/passwd"))
            ))
            .await,
        "/etc/passwd through a link",
    )
    .await;
    refused(
        c.files(&alice)
            .post("/mkdir", json!({"path": "/tmp/atrium-files-escape"}))
            .await,
        "mkdir in /tmp",
    )
    .await;
    refused(
        c.files(&alice)
            .post(
                "/mkdir",
                json!({"path": alice.home.join("etc/atrium-escape")}),
            )
            .await,
        "mkdir through a link",
    )
    .await;
    refused(
        c.files(&alice)
            .put(&alice.home.join("etc/atrium-escape"), 0, b"x".to_vec())
            .await,
        "upload through a link",
    )
    .await;
    let res = c
        .files(&alice)
        .post(
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
        .delete(c.files_url(&format!("?path={}", q(&alice.home.join("to-bob")))))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("delete");
    assert_eq!(res.status(), 200);
    assert!(secret.exists());
}

#[tokio::test]
async fn data_sets_are_read_only_and_uploads_are_bounded() {
    let c = storage_cluster("max_upload_chunk_mb = 1\nmax_upload_mb = 2\n").await;
    let alice = c.user("alice").await;
    let datasets = c.root.path().join("datasets");

    let res = c
        .files(&alice)
        .get(&format!("?path={}", q(&datasets)))
        .await;
    assert_eq!(res.status(), 200);
    let listing: Value = res.json().await.expect("json");
    assert_eq!(listing["read_only"], true);
    let res = c
        .files(&alice)
        .get(&format!("/download?path={}", q(&datasets.join("set.csv"))))
        .await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.text().await.expect("text"), "a,b\n1,2\n");

    for res in [
        c.files(&alice)
            .post("/mkdir", json!({"path": datasets.join("new")}))
            .await,
        c.files(&alice)
            .post(
                "/rename",
                json!({"from": datasets.join("set.csv"), "to": datasets.join("x.csv")}),
            )
            .await,
        c.files(&alice)
            .put(&datasets.join("up.bin"), 0, b"x".to_vec())
            .await,
        reqwest::Client::new()
            .delete(c.files_url(&format!("?path={}", q(&datasets.join("set.csv")))))
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
    let res = c
        .files(&alice)
        .put(&target, 0, vec![1; (1 << 20) + 1])
        .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["field"], "body", "{body}");
    let res = c.files(&alice).put(&target, 0, vec![1; 1 << 20]).await;
    assert_eq!(res.status(), 200);
    let res = c
        .files(&alice)
        .put(&target, 1 << 20, vec![1; 1 << 20])
        .await;
    assert_eq!(res.status(), 200);
    let res = c.files(&alice).put(&target, 2 << 20, vec![1; 1]).await;
    assert_eq!(res.status(), 400, "over the largest file");

    // A browser session must send its CSRF token to change anything.
    let client = c.app.login("alice", "password-of-some-length").await;
    let res = client
        .post(c.files_url("/mkdir"))
        .json(&json!({"path": alice.home.join("c")}))
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 403);
    let csrf = c.app.session_csrf(&client).await;
    let res = client
        .post(c.files_url("/mkdir"))
        .header("x-csrf-token", csrf)
        .json(&json!({"path": alice.home.join("c")}))
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 201);
}
