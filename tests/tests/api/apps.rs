//! Session apps end to end: VS Code (code-server from npm) started from the start form's
//! tile and loaded through the proxy in Chromium, its websocket included; JupyterLab's R
//! kernel (Debian's IRkernel) evaluating `1+1` through the proxy; the progress page's
//! event log; an app whose server exits at once shown as an error with its log, a hostile
//! field value staying data. code-server comes from `tests/install-deps.sh`
//! (`ATRIUM_TEST_CODE_SERVER`), the R kernel is registered in the Jupyter environment.

use std::path::PathBuf;
use std::time::Duration;

use atrium_tests::support::jupyter::{self, WsProtocol};
use atrium_tests::support::{browser, wait, Browser};
use fantoccini::Locator;
use serde_json::{json, Value};

use crate::fixtures::browser::log_in;
use crate::fixtures::sessions::{SessionCluster, KERNEL_DEADLINE};
use crate::fixtures::{cluster_config, private_root, spawn_with, Options, PASSWORD};

/// code-server's first start (it writes its user data), on two busy cores.
const EDITOR_WITHIN: Duration = Duration::from_secs(120);

/// code-server's installation, or `None` (after saying why) outside CI.
fn code_server_or_skip(test: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("ATRIUM_TEST_CODE_SERVER")
        .filter(|v| !v.is_empty())
        .map_or_else(
            || PathBuf::from("/opt/atrium-test/code-server"),
            PathBuf::from,
        );
    if dir.join("bin/code-server").exists() {
        return Some(dir);
    }
    assert!(
        !atrium_tests::support::in_ci(),
        "{test}: code-server is missing at {} (CI is set); run tests/install-deps.sh",
        dir.display()
    );
    eprintln!(
        "SKIPPED {test}: no code-server at {} (run tests/install-deps.sh)",
        dir.display()
    );
    None
}

/// A portal with the built-in apps and an environment that has JupyterLab (Python and
/// R kernels) and code-server on its `PATH`, in bubblewrap; `extra` is appended.
async fn cluster(test: &str, gpus: u32, extra: &str) -> Option<SessionCluster> {
    let venv = jupyter::venv_or_skip(test).expect("jupyter environment")?;
    let code_server = code_server_or_skip(test)?;
    let root = private_root();
    let mut config = cluster_config(root.path(), gpus);
    config.push_str(&format!(
        "[[environments]]\nname = \"python-r\"\ndescription = \"Python and R\"\n\
         runtime = \"bubblewrap\"\nkernels = [\"python3\", \"ir\"]\n\
         env = {{ PATH = \"{}/bin:{}/bin:/usr/local/bin:/usr/bin:/bin\" }}\n{extra}",
        venv.display(),
        code_server.display()
    ));
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    Some(SessionCluster::new(app, root))
}

/// The text of the element `css`, once it is there.
async fn text_of(b: &Browser, css: &str) -> String {
    b.wait()
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("{css}: {e}"))
        .text()
        .await
        .expect("text")
}

#[tokio::test]
async fn vscode_starts_from_its_tile_and_its_editor_loads_through_the_proxy() {
    let test = "vscode_starts_from_its_tile_and_its_editor_loads_through_the_proxy";
    let Some(c) = cluster(test, 2, "").await else {
        return;
    };
    let alice = c.user("alice").await;
    // A file of hers that the editor's explorer lists: read over its websocket.
    std::fs::create_dir_all(&alice.home).expect("home");
    let hello = alice.home.join("atrium-hello.txt");
    std::fs::write(&hello, "hello\n").expect("file");
    for path in [&alice.home, &hello] {
        std::os::unix::fs::chown(path, Some(alice.uid), Some(alice.uid)).expect("chown");
    }

    let apps: Value = alice
        .client
        .get(c.app.url("/api/v1/apps"))
        .send()
        .await
        .expect("apps")
        .json()
        .await
        .expect("json");
    let ids: Vec<&str> = apps["apps"]
        .as_array()
        .expect("apps")
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(
        ids,
        ["notebook", "terminal", "tensorboard", "vscode"],
        "{apps}"
    );

    let b = browser().await.expect("chromium");
    log_in(&b, &c.app, "alice", PASSWORD).await;
    b.goto(&c.app.url("/sessions/new"))
        .await
        .expect("start form");
    // What one GPU brings in this partition, and how many are free.
    let offer = text_of(&b, "#gpu-offer").await;
    assert_eq!(
        offer,
        "Each GPU brings 2 CPU cores and 2 GiB of memory; a slice or share its part of them. 2 of 2 whole GPUs are free now."
    );
    b.find(Locator::Css(
        "#app-vscode img[src='/static/icons/apps/vscode.svg']",
    ))
    .await
    .expect("the VS Code tile has its icon");
    b.find(Locator::Id("app-vscode"))
        .await
        .expect("tile")
        .click()
        .await
        .expect("choose VS Code");
    crate::fixtures::browser::fill(&b, "session-name", "code").await;
    b.find(Locator::Id("start"))
        .await
        .expect("start")
        .click()
        .await
        .expect("start");
    // The progress page opens the editor once ready: VS Code's workbench appears under
    // the session's prefix, and its explorer lists her home, which the browser reads
    // through the remote connection: the websocket through the proxy.
    let workbench = b
        .wait()
        .at_most(EDITOR_WITHIN)
        .for_element(Locator::Css(".monaco-workbench"))
        .await;
    if let Err(e) = workbench {
        panic!(
            "no workbench: {e}; at {:?}\n{}",
            b.current_url().await.map(|u| u.to_string()),
            c.log_tail()
        );
    }
    let url = b.current_url().await.expect("url");
    assert!(url.path().starts_with("/user/alice/code/"), "{url}");
    let listed = wait::until("the explorer to list her file", EDITOR_WITHIN, || async {
        let source = b.source().await?;
        anyhow::ensure!(
            source.contains("atrium-hello.txt"),
            "not listed yet ({} bytes of page)",
            source.len()
        );
        anyhow::Ok(())
    })
    .await;
    let source = b.source().await.unwrap_or_default();
    if let Err(e) = listed {
        panic!("{e}\n{}", &source[..source.len().min(3000)]);
    }
    // A websocket that failed shows VS Code's reconnection dialog instead.
    for broken in [
        "Cannot reconnect",
        "Attempting to reconnect",
        "WebSocket close",
    ] {
        assert!(!source.contains(broken), "{broken}");
    }
    if let Ok(dir) = std::env::var("SCREENSHOT_DIR") {
        b.screenshot(std::path::Path::new(&dir).join("vscode.png"))
            .await
            .expect("screenshot");
    }

    // The session's event log, in order, with times.
    let list: Value = alice
        .client
        .get(c.app.url("/api/v1/sessions"))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    let session = &list["sessions"][0];
    assert_eq!(session["kind"], "vscode", "{session}");
    assert_eq!(session["app_title"], "VS Code", "{session}");
    let events: Vec<&str> = session["progress"]["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert_eq!(events.first(), Some(&"Queued"), "{events:?}");
    assert_eq!(events.last(), Some(&"Ready"), "{events:?}");
    assert!(
        events.iter().any(|e| e.starts_with("Placed on head")),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.starts_with("The server started; waiting for VS Code")),
        "{events:?}"
    );
    // The progress page lists them too.
    let id = session["id"].as_i64().expect("id");
    // Without the session's token (which only the proxy sends, in code-server's
    // cookie), code-server gives nothing: a connection that reached its socket by
    // another way gets its login page, not the editor.
    let socket = c
        .root
        .path()
        .join(format!("spool/sessions/{id}/server.sock"));
    let head = {
        use std::io::{Read, Write};
        let mut direct = std::os::unix::net::UnixStream::connect(&socket).expect("its socket");
        direct
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .expect("request");
        let mut answer = String::new();
        let _ = direct.read_to_string(&mut answer);
        answer.lines().next().unwrap_or_default().to_string()
    };
    assert!(
        head.starts_with("HTTP/1.1 302") || head.starts_with("HTTP/1.1 401"),
        "code-server answered a request without the token: {head}"
    );
    b.goto(&c.app.url(&format!("/sessions/{id}")))
        .await
        .expect("progress page");
    let shown = text_of(&b, "#session-events").await;
    assert!(shown.contains("Queued"), "{shown}");
    assert!(shown.contains("Ready"), "{shown}");
    b.close().await.expect("close");
    c.stop(&alice, id).await;
}

#[tokio::test]
async fn jupyterlab_offers_r_beside_python_and_the_r_kernel_evaluates() {
    let test = "jupyterlab_offers_r_beside_python_and_the_r_kernel_evaluates";
    let Some(c) = cluster(test, 0, "").await else {
        return;
    };
    let alice = c.user("alice").await;
    let (session, _) = c
        .ready_session(
            &alice,
            json!({"kind": "notebook", "environment": "python-r"}),
        )
        .await;
    let base = c.base(&session);
    let headers = alice.headers(&base);
    let specs: Value = alice
        .client
        .get(base.join("api/kernelspecs").expect("url"))
        .send()
        .await
        .expect("kernelspecs")
        .json()
        .await
        .expect("json");
    let names: Vec<&String> = specs["kernelspecs"]
        .as_object()
        .expect("kernelspecs")
        .keys()
        .collect();
    assert_eq!(names, ["ir", "python3"], "{specs}");
    let res = alice
        .client
        .post(base.join("api/kernels").expect("url"))
        .headers(headers.clone())
        .json(&json!({"name": "ir"}))
        .send()
        .await
        .expect("start the R kernel");
    let status = res.status();
    let kernel: Value = res.json().await.expect("json");
    assert_eq!(status, 201, "{kernel}");
    assert_eq!(kernel["name"], "ir", "{kernel}");
    let kernel = kernel["id"].as_str().expect("id");
    let out = jupyter::execute(
        &base,
        &headers,
        kernel,
        "print(1+1)",
        WsProtocol::V1,
        KERNEL_DEADLINE,
    )
    .await
    .expect("R evaluates");
    assert_eq!(out.trim(), "[1] 2");
    let who = jupyter::execute(
        &base,
        &headers,
        kernel,
        "cat(Sys.getenv('HOME'), R.version$major, '\\n')",
        WsProtocol::V1,
        KERNEL_DEADLINE,
    )
    .await
    .expect("R answers");
    assert!(
        who.starts_with(&format!("{} 4", alice.home.display())),
        "R runs in her home: {who}"
    );
}

/// An app whose server prints what it was given and exits at once.
const CRASHING_APP: &str = r#"
[[apps]]
id = "crashes"
title = "Crashes"
description = "Prints its note and exits."
icon = "app"
protocol = "http"
ready = "socket"
command = ["/bin/sh", "-c", "echo \"no server here, note: $0\"; exit 3", "{field.note}", "{socket}"]
[[apps.fields]]
name = "note"
label = "A note"
kind = "text"
max_length = 200
[[apps.fields]]
name = "cores"
kind = "number"
min = 1
max = 4
integer = true
default = 1
"#;

#[tokio::test]
async fn an_app_that_exits_at_once_is_an_error_with_its_log_and_its_values_stay_data() {
    let test = "an_app_that_exits_at_once_is_an_error_with_its_log_and_its_values_stay_data";
    let Some(c) = cluster(test, 0, CRASHING_APP).await else {
        return;
    };
    let alice = c.user("alice").await;
    // Only the configured apps are offered; fields are checked before anything starts.
    for (body, field) in [
        (json!({"kind": "notebook"}), "kind"),
        (json!({"kind": "crashes", "fields": {"cores": 9}}), "fields"),
        (
            json!({"kind": "crashes", "fields": {"bogus": "1"}}),
            "fields",
        ),
        (
            json!({"kind": "crashes", "fields": {"note": [1]}}),
            "fields",
        ),
        (
            json!({"kind": "crashes", "fields": {"note": "x".repeat(201)}}),
            "fields",
        ),
    ] {
        let res = c.start_session(&alice, body.clone()).await;
        assert_eq!(res.status(), 400, "{body}");
        let err: Value = res.json().await.expect("json");
        assert!(
            err["message"].as_str().unwrap_or("").starts_with(field),
            "{body}: {err}"
        );
    }
    // Somewhere her server could write, were the value run.
    let marker = alice.home.join("pwned");
    let hostile = format!("$(touch {}) `id` '\"; exit 0", marker.display());
    let res = c
        .start_session(
            &alice,
            json!({"kind": "crashes", "name": "bad", "fields": {"note": hostile, "cores": 2}}),
        )
        .await;
    let started: Value = res.json().await.expect("json");
    let id = started["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("{started}"));
    let events = c.follow(&alice, id, |_| false).await;
    let last = events.last().expect("events");
    assert_eq!(last["state"], "ended", "{events:?}");
    assert_eq!(last["failed"], true, "{last}");
    let log = last["log"].as_str().unwrap_or("");
    assert!(
        log.contains(&format!("no server here, note: {hostile}")),
        "the log tail shows the value as it was given: {last}"
    );
    assert!(!marker.exists(), "a field's value ran as a command");

    // The progress page shows the failure as an error, with its log and its events.
    let b = browser().await.expect("chromium");
    log_in(&b, &c.app, "alice", PASSWORD).await;
    b.goto(&c.app.url(&format!("/sessions/{id}")))
        .await
        .expect("progress page");
    let failure = b
        .find(Locator::Id("session-failure"))
        .await
        .expect("failure");
    assert!(failure.is_displayed().await.expect("shown"));
    assert_eq!(
        failure.attr("role").await.expect("role").as_deref(),
        Some("alert")
    );
    let text = failure.text().await.expect("text");
    assert!(text.contains("The session failed."), "{text}");
    assert!(text.contains("no server here, note: $(touch"), "{text}");
    let shown = text_of(&b, "#session-events").await;
    assert!(shown.contains("Queued"), "{shown}");
    assert!(shown.contains("Placed on head"), "{shown}");
    assert!(shown.contains("Failed"), "{shown}");
    // An ended session offers no Stop.
    assert!(b.find(Locator::Id("session-stop")).await.is_err());

    // A second start, watched on the progress page as it happens: the error and its
    // log appear there without a reload.
    b.goto(&c.app.url("/sessions/new"))
        .await
        .expect("start form");
    b.find(Locator::Id("app-crashes"))
        .await
        .expect("tile")
        .click()
        .await
        .expect("choose");
    crate::fixtures::browser::fill(&b, "session-name", "again").await;
    let note = b
        .find(Locator::Css("input[name='f.crashes.note']"))
        .await
        .expect("the app's field");
    note.send_keys("from the form").await.expect("type");
    b.find(Locator::Id("start"))
        .await
        .expect("start")
        .click()
        .await
        .expect("start");
    let live = wait::until(
        "the failure on the page",
        Duration::from_secs(60),
        || async {
            let f = b.find(Locator::Id("session-failure")).await?;
            anyhow::ensure!(f.is_displayed().await?, "not shown yet");
            let text = f.text().await?;
            anyhow::ensure!(text.contains("note: from the form"), "{text}");
            anyhow::Ok(())
        },
    )
    .await;
    if let Err(e) = live {
        let source = b.source().await.unwrap_or_default();
        panic!(
            "the failure is not shown live: {e}; at {:?}\n{}\n{}",
            b.current_url().await.map(|u| u.to_string()),
            &source[..source.len().min(4000)],
            c.log_tail()
        );
    }
    b.close().await.expect("close");
}

#[tokio::test]
async fn stop_asks_for_a_confirmation_and_a_queued_session_says_queued() {
    let Some(c) = cluster(
        "stop_asks_for_a_confirmation_and_a_queued_session_says_queued",
        1,
        "",
    )
    .await
    else {
        return;
    };
    let alice = c.user("alice").await;
    // The only GPU is held by a long job: the session waits in the queue.
    let holder = c
        .start_session(
            &alice,
            json!({"name": "holder", "kind": "terminal", "environment": "python-r", "gpus": 1}),
        )
        .await;
    assert_eq!(holder.status(), 201);
    let holder: Value = holder.json().await.expect("json");
    let res = c
        .start_session(
            &alice,
            json!({"name": "waits", "environment": "python-r", "gpus": 1}),
        )
        .await;
    let waits: Value = res.json().await.expect("json");
    let id = waits["id"].as_i64().expect("id");

    let b = browser().await.expect("chromium");
    log_in(&b, &c.app, "alice", PASSWORD).await;
    b.goto(&c.app.url(&format!("/sessions/{id}")))
        .await
        .expect("progress page");
    let queued = text_of(&b, "#session-queued").await;
    assert!(!queued.is_empty());
    assert!(b.find(Locator::Id("session-started")).await.is_err());
    // Stop: a first click only asks.
    b.find(Locator::Id("session-stop"))
        .await
        .expect("stop")
        .click()
        .await
        .expect("click");
    let confirm = b
        .wait()
        .for_element(Locator::Id("session-stop-confirm"))
        .await
        .expect("confirmation");
    assert!(confirm.is_displayed().await.expect("shown"));
    let still: Value = c.session(&alice, id).await;
    assert_ne!(still["state"], "ended", "{still}");
    confirm.click().await.expect("confirm");
    let ended = c.follow(&alice, id, |_| false).await;
    assert_eq!(
        ended.last().map(|e| e["state"].clone()),
        Some(json!("ended"))
    );
    assert_eq!(c.session(&alice, id).await["end_reason"], "stopped");
    b.close().await.expect("close");
    c.stop(&alice, holder["id"].as_i64().expect("id")).await;
}
