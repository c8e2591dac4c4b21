//! Interactive sessions end to end: the real portal runs real Jupyter Server (with
//! ipykernel) and TensorBoard as the user, in bubblewrap, behind its proxy.
//! The Python environment comes from `tests/install-deps.sh` (`ATRIUM_TEST_JUPYTER`).

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use atrium_tests::support::jupyter::{self, WsProtocol};
use serde_json::{json, Value};

use crate::fixtures::eventually;
use crate::fixtures::sessions::{run_code, SessionCluster, KERNEL_DEADLINE, READY_WITHIN};
use crate::fixtures::PASSWORD;

/// Whether `uid` can read `path` (a child process switched to that uid tries).
fn readable_by(path: &Path, uid: u32) -> bool {
    std::process::Command::new("/bin/cat")
        .arg(path)
        .uid(uid)
        .gid(uid)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("cat")
        .success()
}

#[tokio::test]
async fn a_notebook_runs_as_its_user_behind_the_proxy_and_outlives_a_portal_crash() {
    let Some(mut c) = SessionCluster::start(4, "").await else {
        return;
    };
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;

    // Start, following progress to ready.
    let (session, events) = c
        .ready_session(&alice, json!({"gpus": 1, "environment": "python"}))
        .await;
    assert_eq!(session["state"], "ready", "{session}");
    assert_eq!(session["name"], "default");
    assert_eq!(session["gres"], "gpu:1");
    assert_eq!(session["url"], "/user/alice/default/lab");
    let progress: Vec<i64> = events
        .iter()
        .filter_map(|e| e["progress"].as_i64())
        .collect();
    assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{events:?}");
    assert_eq!(progress.last(), Some(&100));
    let id = session["id"].as_i64().expect("id");

    // A kernel through the proxy, over its websocket, in both framings.
    let base = c.base(&session);
    let headers = alice.headers(&base);
    let kernel = jupyter::start_kernel(&alice.client, &base, &headers)
        .await
        .expect("kernel");
    for protocol in [WsProtocol::Legacy, WsProtocol::V1] {
        let out = jupyter::execute(
            &base,
            &headers,
            &kernel,
            "print(6*7)",
            protocol,
            KERNEL_DEADLINE,
        )
        .await
        .expect("execute");
        assert_eq!(out.trim(), "42", "{protocol:?}");
    }
    let who = jupyter::execute(
        &base,
        &headers,
        &kernel,
        "import os; print(os.getuid(), os.environ.get('HOME'), 'JUPYTER_TOKEN' in os.environ)",
        WsProtocol::V1,
        KERNEL_DEADLINE,
    )
    .await
    .expect("execute");
    assert_eq!(
        who.trim(),
        format!("{} {} True", alice.uid, alice.home.display()),
        "the kernel runs as alice in her home"
    );

    // The session's secret never reaches the browser: JupyterLab's page does not carry it.
    let secret = jupyter::execute(
        &base,
        &headers,
        &kernel,
        "import os; print(os.environ['JUPYTER_TOKEN'])",
        WsProtocol::V1,
        KERNEL_DEADLINE,
    )
    .await
    .expect("execute");
    let lab = alice
        .client
        .get(base.join("lab").expect("url"))
        .header("accept", "text/html")
        .send()
        .await
        .expect("lab page");
    assert_eq!(lab.status(), 200);
    let html = lab.text().await.expect("html");
    assert!(html.contains("jupyter-config-data"), "{html:.300}");
    assert!(
        !html.contains(secret.trim()),
        "the lab page leaks the session token"
    );

    // A notebook saved through the contents API lands in her home, as hers.
    let nb = jupyter::notebook(&["print('saved')"]);
    jupyter::save_notebook(&alice.client, &base, &headers, "hello.ipynb", &nb)
        .await
        .expect("save");
    let saved = alice.home.join("hello.ipynb");
    let meta = std::fs::metadata(&saved).expect("saved notebook on disk");
    assert_eq!((meta.uid(), meta.gid()), (alice.uid, alice.uid));
    let home = std::fs::metadata(&alice.home).expect("home");
    assert_eq!(home.mode() & 0o777, 0o700, "the home is private");
    assert!(readable_by(&saved, alice.uid));
    assert!(
        !readable_by(&saved, bob.uid),
        "bob cannot read alice's notebook"
    );
    eventually("~/templates is filled", Duration::from_secs(30), || {
        let dir = alice.home.join("templates");
        async move { dir.join("notebooks").is_dir() }
    })
    .await;

    // Nobody else passes the proxy: bob gets 404, a stranger must log in.
    let res = bob
        .client
        .get(base.join("api/status").expect("url"))
        .send()
        .await
        .expect("bob");
    assert_eq!(res.status(), 404);
    let res = reqwest::Client::new()
        .get(base.join("api/kernels").expect("url"))
        .send()
        .await
        .expect("anonymous");
    assert_eq!(res.status(), 401);
    // A page of another site cannot make alice's browser act on her session.
    let res = alice
        .client
        .post(base.join("api/kernels").expect("url"))
        .header("origin", "https://evil.example.net")
        .json(&json!({}))
        .send()
        .await
        .expect("cross-site post");
    assert_eq!(res.status(), 403);
    let res = bob
        .client
        .get(c.app.url(&format!("/api/v1/sessions/{id}")))
        .send()
        .await
        .expect("bob api");
    assert_eq!(res.status(), 404);

    // kill -9 the portal and start it again: the notebook and its kernel live on,
    // and the proxy finds them again.
    c.app.kill9();
    c.app.restart();
    let alice = c.login("alice").await;
    let base = c.base(&session);
    let headers = alice.headers(&base);
    let again = jupyter::execute(
        &base,
        &headers,
        &kernel,
        "print(6*7)",
        WsProtocol::V1,
        KERNEL_DEADLINE,
    )
    .await
    .expect("the same kernel answers after the restart");
    assert_eq!(again.trim(), "42");
    let after = c.session(&alice, id).await;
    assert_eq!(after["state"], "ready");

    // Stop: the session ends and its slices are free at once.
    c.stop(&alice, id).await;
    let res = alice
        .client
        .get(base.join("api/status").expect("url"))
        .send()
        .await
        .expect("after stop");
    assert_eq!(res.status(), 404);
    // The name is free again, and all four GPUs: a terminal session starts at once and
    // opens JupyterLab on a terminal, in the folder asked for ("Open a terminal here").
    let folder = alice.home.join("work").join("here");
    std::fs::create_dir_all(&folder).expect("folder");
    for dir in [alice.home.join("work"), folder.clone()] {
        std::os::unix::fs::chown(&dir, Some(alice.uid), Some(alice.uid)).expect("chown");
    }
    let (term, _) = c
        .ready_session(
            &alice,
            json!({"gpus": 4, "environment": "python", "kind": "terminal", "folder": "work/here"}),
        )
        .await;
    assert_eq!(term["url"], "/user/alice/default/lab/workspaces/terminal");
    assert_eq!(term["folder"], folder.display().to_string());
    // Terminal 1 is there before any browser asks, and its shell's working folder is
    // that one (compared by device and inode: the shell sees it inside its sandbox).
    let terminals: Value = alice
        .client
        .get(c.base(&term).join("api/terminals").expect("url"))
        .send()
        .await
        .expect("terminals")
        .json()
        .await
        .expect("json");
    assert_eq!(terminals[0]["name"], "1", "{terminals}");
    let want = std::fs::metadata(&folder).expect("folder");
    let shell_in_folder = std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::metadata(e.path().join("cwd")).ok().map(|m| (e, m)))
        .any(|(e, cwd)| {
            cwd.dev() == want.dev()
                && cwd.ino() == want.ino()
                && std::fs::metadata(e.path()).is_ok_and(|m| m.uid() == alice.uid)
        });
    assert!(
        shell_in_folder,
        "no process of alice's works in {}",
        folder.display()
    );
    let base = c.base(&term);
    let workspace: Value = alice
        .client
        .get(base.join("lab/api/workspaces/terminal").expect("url"))
        .send()
        .await
        .expect("workspace")
        .json()
        .await
        .expect("json");
    assert_eq!(
        workspace["data"]["terminal:1"]["data"]["name"], "1",
        "{workspace}"
    );
}

#[tokio::test]
async fn two_gpu_sessions_get_disjoint_devices_and_bad_requests_change_nothing() {
    let Some(c) = SessionCluster::start(4, "").await else {
        return;
    };
    let alice = c.user("alice").await;

    // Bad input: a 400 naming the field, and no session.
    for (body, field) in [
        (json!({"kind": "spreadsheet"}), "kind"),
        (json!({"environment": "nope"}), "environment"),
        (json!({"name": "../x"}), "name"),
        (json!({"hours": 0}), "hours"),
        (json!({"kind": "tensorboard", "logdir": "/etc"}), "logdir"),
        (json!({"kind": "terminal", "folder": "/etc"}), "folder"),
        (json!({"kind": "notebook", "folder": "work"}), "folder"),
        (json!({"gpus": 1, "slice": "a;b"}), "slice"),
    ] {
        let res = c.start_session(&alice, body.clone()).await;
        assert_eq!(res.status(), 400, "{body}");
        let err: Value = res.json().await.expect("json");
        assert_eq!(err["error"], "bad_request");
        assert_eq!(err["field"], field, "{body}: {err}");
    }
    let res = c.start_session(&alice, json!({"bogus": 1})).await;
    assert_eq!(res.status(), 400);
    let list: Value = alice
        .client
        .get(c.app.url("/api/v1/sessions"))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(0), "{list}");

    let (a, _) = c
        .ready_session(
            &alice,
            json!({"name": "a", "gpus": 2, "environment": "python"}),
        )
        .await;
    let (b, _) = c
        .ready_session(
            &alice,
            json!({"name": "b", "gpus": 2, "environment": "python"}),
        )
        .await;
    // Same name again while it runs: a conflict.
    let res = c.start_session(&alice, json!({"name": "a"})).await;
    assert_eq!(res.status(), 409);

    let code = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])";
    let mut seen = Vec::new();
    for s in [&a, &b] {
        let out = run_code(&alice, &c.base(s), code).await;
        let devices: BTreeSet<String> = out.trim().split(',').map(str::to_string).collect();
        assert_eq!(devices.len(), 2, "{out}");
        assert_eq!(
            s["cuda_visible_devices"]
                .as_str()
                .map(|d| d.split(',').count()),
            Some(2),
            "{s}"
        );
        seen.push(devices);
    }
    assert!(seen[0].is_disjoint(&seen[1]), "{seen:?}");
}

#[tokio::test]
async fn a_session_stops_at_its_time_limit_after_a_warning() {
    let Some(c) = SessionCluster::start(0, "time_limit_warning = \"30s\"").await else {
        return;
    };
    let alice = c.user("alice").await;
    // 40 seconds: time to start Jupyter, then the warning, then the end.
    let res = c
        .start_session(
            &alice,
            json!({"environment": "python", "hours": 40.0 / 3600.0}),
        )
        .await;
    let started: Value = res.json().await.expect("json");
    let id = started["id"].as_i64().expect("id");
    assert_eq!(started["time_limit"], 40, "{started}");
    let events = c.follow(&alice, id, |_| false).await;
    assert!(
        events.iter().any(|e| e["ready"] == true),
        "it was ready first: {events:?}"
    );
    let warned = events.iter().position(|e| {
        e["warning"]
            .as_str()
            .is_some_and(|w| w.contains("time limit"))
    });
    let ended = events.iter().position(|e| e["state"] == "ended");
    assert!(
        matches!((warned, ended), (Some(w), Some(e)) if w < e),
        "a warning, then the end: {events:?}"
    );
    let s = c.session(&alice, id).await;
    assert_eq!(s["end_reason"], "time_limit", "{s}");
}

#[tokio::test]
async fn idle_sessions_stop_but_a_busy_kernel_keeps_its_session() {
    let Some(c) = SessionCluster::start(0, "idle_timeout = \"8s\"\ncull_interval = \"1s\"").await
    else {
        return;
    };
    let alice = c.user("alice").await;
    let (busy, _) = c
        .ready_session(&alice, json!({"name": "busy", "environment": "python"}))
        .await;
    let (idle, _) = c
        .ready_session(&alice, json!({"name": "idle", "environment": "python"}))
        .await;
    // The busy one computes, with no browser attached.
    let base = c.base(&busy);
    let headers = alice.headers(&base);
    let kernel = jupyter::start_kernel(&alice.client, &base, &headers)
        .await
        .expect("kernel");
    jupyter::kernel_busy_for(
        &base,
        &headers,
        &kernel,
        Duration::from_secs(300),
        WsProtocol::V1,
        KERNEL_DEADLINE,
    )
    .await
    .expect("busy");

    let idle_id = idle["id"].as_i64().expect("id");
    let events = c.follow(&alice, idle_id, |_| false).await;
    assert_eq!(
        events.last().map(|e| e["state"].clone()),
        Some(json!("ended")),
        "{events:?}"
    );
    let idle_now = c.session(&alice, idle_id).await;
    assert_eq!(idle_now["end_reason"], "idle", "{idle_now}");
    // The idle one was idle longer than the timeout; the busy one as long: still there.
    let busy_now = c.session(&alice, busy["id"].as_i64().expect("id")).await;
    assert_eq!(busy_now["state"], "ready", "{busy_now}");
}

#[tokio::test]
async fn a_server_that_dies_before_it_is_ready_fails_with_its_log_and_the_name_is_free() {
    let Some(c) = SessionCluster::start(0, "").await else {
        return;
    };
    let alice = c.user("alice").await;
    let res = c
        .start_session(&alice, json!({"name": "nb", "environment": "broken"}))
        .await;
    assert_eq!(res.status(), 201);
    let started: Value = res.json().await.expect("json");
    let id = started["id"].as_i64().expect("id");
    let events = c.follow(&alice, id, |_| false).await;
    let last = events.last().expect("events");
    assert_eq!(last["state"], "ended", "{events:?}");
    assert_eq!(last["failed"], true, "{last}");
    let log = last["log"].as_str().unwrap_or("");
    assert!(
        log.contains("no server for"),
        "the log tail is shown: {last}"
    );
    let s = c.session(&alice, id).await;
    assert_eq!(s["end_reason"], "failed", "{s}");
    // Its card says it ended, with no time left, and offers Relaunch and Dismiss.
    let home = |client: &reqwest::Client| {
        let url = c.app.url("/");
        let client = client.clone();
        async move {
            client
                .get(url)
                .send()
                .await
                .expect("home")
                .text()
                .await
                .expect("html")
        }
    };
    let html = home(&alice.client).await;
    let card = html
        .split(&format!("id=\"session-{id}\""))
        .nth(1)
        .and_then(|r| r.split("</li>").next())
        .unwrap_or_else(|| panic!("no card: {html}"));
    assert!(
        !card.contains(" left<"),
        "no time left on a failed one: {card}"
    );
    assert!(
        card.contains(&format!("href=\"/sessions/new?relaunch={id}\"")),
        "{card}"
    );
    assert!(card.contains(&format!("id=\"dismiss-{id}\"")), "{card}");
    // Relaunch: the form with its choices.
    let form = alice
        .client
        .get(c.app.url(&format!("/sessions/new?relaunch={id}")))
        .send()
        .await
        .expect("form")
        .text()
        .await
        .expect("html");
    assert!(form.contains("<option value=\"broken\" selected"), "{form}");
    assert!(
        form.contains("id=\"session-name\" maxlength=\"64\" value=\"nb\""),
        "{form}"
    );
    // Dismiss: the card goes.
    let res = alice
        .client
        .post(c.app.url(&format!("/sessions/{id}/dismiss")))
        .form(&[("csrf", alice.csrf.as_str())])
        .send()
        .await
        .expect("dismiss");
    assert!(
        res.status().is_success() || res.status().is_redirection(),
        "{}",
        res.status()
    );
    assert!(!home(&alice.client)
        .await
        .contains(&format!("id=\"session-{id}\"")));
    // A start refused before it was queued (a GPU on a cluster without): the form
    // says why, and no failed card is left.
    let res = c
        .start_session(
            &alice,
            json!({"name": "gpu", "environment": "broken", "gpus": 1}),
        )
        .await;
    assert!(res.status().is_client_error(), "{}", res.status());
    assert!(
        !home(&alice.client).await.contains(">gpu</strong>"),
        "no card of it"
    );
    // The user can start again at once, under the same name.
    let res = c
        .start_session(&alice, json!({"name": "nb", "environment": "broken"}))
        .await;
    assert_eq!(res.status(), 201);
}

#[tokio::test]
async fn tensorboard_serves_its_page_through_the_proxy() {
    let Some(c) = SessionCluster::start(0, "").await else {
        return;
    };
    let alice = c.user("alice").await;
    let (tb, _) = c
        .ready_session(
            &alice,
            json!({"name": "tb", "kind": "tensorboard", "environment": "python", "logdir": "runs"}),
        )
        .await;
    assert_eq!(tb["logdir"], format!("{}/runs", alice.home.display()));
    assert_eq!(tb["url"], "/user/alice/tb/");
    let base = c.base(&tb);
    let page = alice.client.get(base.clone()).send().await.expect("page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(html.to_lowercase().contains("tensorboard"), "{html:.300}");
    let env = alice
        .client
        .get(base.join("data/environment").expect("url"))
        .send()
        .await
        .expect("environment");
    assert_eq!(env.status(), 200);
    let env: Value = env.json().await.expect("json");
    assert!(
        env["data_location"]
            .as_str()
            .is_some_and(|l| l.ends_with("/runs")),
        "{env}"
    );
}

#[tokio::test]
async fn chromium_starts_a_notebook_from_the_page_and_reaches_jupyterlab() {
    use atrium_tests::support::browser;
    use fantoccini::Locator;
    let Some(c) = SessionCluster::start(1, "").await else {
        return;
    };
    let _alice = c.user("alice").await;
    let b = browser().await.expect("chromium");
    b.goto(&c.app.url("/login")).await.expect("open login");
    crate::fixtures::browser::submit_login(&b, "alice", PASSWORD).await;
    b.wait()
        .for_element(Locator::Id("new-session"))
        .await
        .expect("home page")
        .click()
        .await
        .expect("click start");
    b.wait()
        .for_element(Locator::Id("start"))
        .await
        .expect("start form")
        .click()
        .await
        .expect("start");
    // The progress page opens the session once ready: JupyterLab's shell appears.
    b.wait()
        .at_most(READY_WITHIN)
        .for_element(Locator::Css(".jp-LabShell"))
        .await
        .expect("JupyterLab");
    let url = b.current_url().await.expect("url");
    assert!(url.path().starts_with("/user/alice/default/lab"), "{url}");
    if let Ok(dir) = std::env::var("SCREENSHOT_DIR") {
        b.screenshot(Path::new(&dir).join("jupyterlab.png"))
            .await
            .expect("screenshot");
    }
    b.close().await.expect("close");
}
