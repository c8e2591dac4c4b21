//! A new user's first hour in Chromium: the start form offers what is free and
//! starts on it by default.

use std::time::Duration;

use fantoccini::Locator;

use crate::fixtures::browser::submit_login;
use crate::fixtures::{JobCluster, PASSWORD};
use atrium_tests::support::{browser, Browser};

/// The strings the script `js` returns in the browser `b`.
async fn strings(b: &Browser, js: &str) -> Vec<String> {
    b.execute(js, vec![])
        .await
        .expect(js)
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect()
}

/// Log `name` in through the login form of the browser `b`.
async fn log_in(b: &Browser, c: &JobCluster, name: &str, password: &str) {
    b.goto(&c.app.url("/login")).await.expect("login page");
    submit_login(b, name, password).await;
    b.wait()
        .for_element(Locator::Css("nav"))
        .await
        .expect("signed in");
}

/// A browser with `name` signed in.
async fn signed_in(c: &JobCluster, name: &str, password: &str) -> Browser {
    let b = browser().await.expect("chromium");
    log_in(&b, c, name, password).await;
    b
}

/// The start form's GPU kind as it opens: the value chosen and every option's text.
async fn gpu_choice(b: &Browser, url: String) -> (String, String) {
    b.goto(&url).await.expect("form");
    let select = b.find(Locator::Id("slice")).await.expect("the GPU kinds");
    let value = select
        .prop("value")
        .await
        .expect("value")
        .unwrap_or_default();
    let text = select.text().await.expect("text");
    (value, text)
}

/// One whole A100 and one cut into two MIG slices, in the default partition.
const WHOLE_AND_MIG: &str =
    "[[cluster.gpus]]\nindex = 0\nmodel = \"A100-80GB\"\nmemory_mb = 81920\n\
     [[cluster.gpus]]\nindex = 1\nmodel = \"A100-80GB\"\nmemory_mb = 81920\n\
     mig = [{ profile = \"1g.10gb\" }, { profile = \"1g.10gb\" }]\n";

#[tokio::test]
async fn chromium_the_start_form_defaults_to_a_free_slice_while_whole_gpus_are_taken() {
    let c = JobCluster::start_with(0, WHOLE_AND_MIG).await;
    let alice = c.user("alice").await;
    let b = signed_in(&c, "alice", PASSWORD).await;
    // The whole GPU free: it is the default.
    let (value, text) = gpu_choice(&b, c.app.url("/sessions/new")).await;
    assert_eq!(value, "", "{text}");
    assert!(
        text.contains("Whole GPU (A100-80GB) — 1 of 1 free now"),
        "{text}"
    );
    assert!(
        text.contains("1g.10gb: 1/7 of an A100-80GB — 2 of 2 free now"),
        "{text}"
    );

    // Taken by a job: the slice that starts now is the default, and the counts say so.
    let job = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH --gres=gpu:A100-80GB:1 --time=30\nsleep 300\n",
        )
        .await;
    let running = c
        .wait_for(&alice, &job, &["RUNNING"], Duration::from_secs(30))
        .await;
    assert_eq!(
        running["cuda_visible_devices"], "0",
        "the whole GPU: {running}"
    );
    let (value, text) = gpu_choice(&b, c.app.url("/sessions/new")).await;
    assert_eq!(value, "1g.10gb", "{text}");
    assert!(
        text.contains("Whole GPU (A100-80GB) — none of 1 free now; one expected in 30 min"),
        "{text}"
    );
    let free = b
        .find(Locator::Id("gpus-free"))
        .await
        .expect("free")
        .text()
        .await
        .expect("text");
    assert_eq!(
        free, "0 of 1 whole GPUs are free now.",
        "slices are not GPUs"
    );
    let gpus = b.find(Locator::Id("gpus")).await.expect("gpus");
    assert_eq!(
        gpus.prop("value").await.expect("value").as_deref(),
        Some("1")
    );
    // What that default asks for starts at once; a whole GPU would wait.
    for (gres, now) in [("gpu:1g.10gb:1", true), ("gpu:1", false)] {
        let res = reqwest::Client::new()
            .post(c.app.url("/api/v1/jobs?dry_run=true"))
            .bearer_auth(&alice.token)
            .json(&serde_json::json!({"wrap": "true", "options": {"gres": gres}}))
            .send()
            .await
            .expect("dry run");
        let plan: serde_json::Value = res.json().await.expect("json");
        assert_eq!(plan["reason"].is_null(), now, "{gres}: {plan}");
    }
    // The dashboard names a slice as a part of its GPU.
    b.goto(&c.app.url("/")).await.expect("dashboard");
    let free = b
        .find(Locator::Id("free-1g.10gb"))
        .await
        .expect("the slices' line")
        .text()
        .await
        .expect("text");
    assert!(free.contains("each 1/7 of an A100-80GB"), "{free}");
    b.goto(&c.app.url("/sessions/new")).await.expect("form");
    // Only the chosen app's fields: no log folder for JupyterLab.
    let logdir = b.find(Locator::Id("logdir")).await.expect("log folder");
    assert!(!logdir.is_displayed().await.expect("shown"));
    // Number fields are not the page's width.
    let width: f64 = b
        .execute(
            "return document.getElementById('gpus').getBoundingClientRect().width",
            vec![],
        )
        .await
        .expect("width")
        .as_f64()
        .expect("number");
    assert!(width <= 12.0 * 16.0 + 1.0, "{width}");
    reqwest::Client::new()
        .delete(c.app.url(&format!("/api/v1/jobs/{job}")))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("cancel");
}

#[tokio::test]
async fn chromium_a_job_failing_on_a_missing_mount_says_first_that_the_site_failed() {
    let missing = tempfile::tempdir()
        .expect("tempdir")
        .path()
        .join("datasets");
    let c = JobCluster::start_with(
        0,
        &format!(
            "[storage]\ndatasets = [{{ source = \"{}\", target = \"/datasets\" }}]\n",
            missing.display()
        ),
    )
    .await;
    let alice = c.user("alice").await;
    let failing = c.sbatch(&alice, "#!/bin/bash\necho started\n").await;
    let b = signed_in(&c, "alice", PASSWORD).await;
    let job = c
        .wait_ended(&alice, &failing, Duration::from_secs(30))
        .await;
    assert_eq!(job["state"], "FAILED", "{job}");
    b.goto(&c.app.url(&format!("/jobs/{failing}")))
        .await
        .expect("job page");
    let story = b
        .find(Locator::Id("job-happened"))
        .await
        .expect("the story");
    let text = story.text().await.expect("text");
    assert!(text.contains("The cluster's failure, not yours"), "{text}");
    assert!(
        text.contains(&format!(
            "{} (bound at /datasets) does not exist",
            missing.display()
        )),
        "{text}"
    );
    assert!(text.contains("Tell your administrator"), "{text}");
    // Before the facts, the charts and the output.
    let order: Vec<String> = strings(&b, "return [...document.querySelectorAll('#job-happened, dl.facts, #efficiency, #output')].map(e => e.id || e.tagName)").await;
    assert_eq!(
        order.first().map(String::as_str),
        Some("job-happened"),
        "{order:?}"
    );
    assert!(
        !order.iter().any(|o| o == "efficiency"),
        "no chart of nothing: {order:?}"
    );
    // The administrator's overview says so first.
    let admin = c
        .app
        .login("admin", c.app.admin_password.as_deref().expect("admin"))
        .await;
    let html = admin
        .get(c.app.url("/admin"))
        .send()
        .await
        .expect("overview")
        .text()
        .await
        .expect("html");
    let attention = html
        .split("id=\"attention\"")
        .nth(1)
        .and_then(|r| r.split("</section>").next())
        .expect("the attention list");
    assert!(
        attention.contains("1 job of alice could not start in the last hour")
            && attention.contains("does not exist")
            && attention.contains(&format!("href=\"/jobs/{failing}\"")),
        "{attention}"
    );
    drop(c);

    // On a cluster whose storage is there, the script's own failure: its exit and
    // its last lines, first.
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let own = c
        .sbatch(
            &alice,
            "#!/bin/bash\necho 'epoch 1'\necho 'loss: nan' >&2\nexit 3\n",
        )
        .await;
    c.wait_ended(&alice, &own, Duration::from_secs(30)).await;
    log_in(&b, &c, "alice", PASSWORD).await;
    b.goto(&c.app.url(&format!("/jobs/{own}")))
        .await
        .expect("job page");
    let text = b
        .find(Locator::Id("job-happened"))
        .await
        .expect("the story")
        .text()
        .await
        .expect("text");
    assert!(text.starts_with("What happened"), "{text}");
    assert!(text.contains("Your script exited with 3 after"), "{text}");
    assert!(
        text.contains("epoch 1\nloss: nan"),
        "its last lines: {text}"
    );
}

/// The texts of the cells of column `col` (from 1) of the array's task table.
async fn column(b: &Browser, col: usize) -> Vec<String> {
    let cells = b
        .find_all(Locator::Css(&format!(
            "#array-tasks tbody td:nth-child({col})"
        )))
        .await
        .expect("cells");
    let mut out = Vec::new();
    for c in cells {
        out.push(c.text().await.expect("text"));
    }
    out
}

#[tokio::test]
async fn chromium_an_array_has_a_page_with_its_tasks_and_both_cancels() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let array = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --array=0-7%2\nsleep 120\n")
        .await;
    c.wait_for(
        &alice,
        &format!("{array}_1"),
        &["RUNNING"],
        Duration::from_secs(30),
    )
    .await;
    let b = signed_in(&c, "alice", PASSWORD).await;
    // A task's page leads to its array.
    b.goto(&c.app.url(&format!("/jobs/{array}_0")))
        .await
        .expect("task page");
    b.find(Locator::Id("job-array-link"))
        .await
        .expect("the link to the array")
        .click()
        .await
        .expect("click");
    b.wait()
        .for_element(Locator::Id("array-tasks"))
        .await
        .expect("the array's page");
    let ids = column(&b, 1).await;
    let want: Vec<String> = (0..8).map(|t| format!("{array}_{t}")).collect();
    assert_eq!(ids, want);
    let states = column(&b, 2).await;
    assert_eq!(
        states.iter().filter(|s| s.starts_with("RUNNING")).count(),
        2,
        "{states:?}"
    );
    assert_eq!(
        states.iter().filter(|s| s.starts_with("PENDING")).count(),
        6,
        "{states:?}"
    );
    let counts = b
        .find(Locator::Id("array-counts"))
        .await
        .expect("counts")
        .text()
        .await
        .expect("text");
    assert!(
        counts.starts_with("8 tasks") && counts.contains("PENDING 6"),
        "{counts}"
    );

    // Cancel the waiting ones: asked first, and the running two go on.
    b.find(Locator::Id("array-cancel-waiting-open"))
        .await
        .expect("open")
        .click()
        .await
        .expect("click");
    b.find(Locator::Id("array-cancel-waiting"))
        .await
        .expect("confirm")
        .click()
        .await
        .expect("click");
    // The page drawn again after the post (the old one has the same table: its states
    // are read in one script, until none waits).
    let states = atrium_tests::support::until("the page again", Duration::from_secs(30), || async {
        let cells = b
            .execute(
                "return [...document.querySelectorAll('#array-tasks tbody td:nth-child(2)')].map(td => td.textContent)",
                vec![],
            )
            .await
            .ok()?;
        let states: Vec<String> = cells
            .as_array()?
            .iter()
            .map(|v| v.as_str().unwrap_or_default().trim().to_string())
            .collect();
        (states.len() == 8 && !states.iter().any(|s| s.starts_with("PENDING"))).then_some(states)
    })
    .await
    .expect("the array's page without waiting tasks");
    assert_eq!(
        states.iter().filter(|s| s.starts_with("RUNNING")).count(),
        2,
        "{states:?}"
    );
    assert_eq!(
        states.iter().filter(|s| s.starts_with("CANCELLED")).count(),
        6,
        "{states:?}"
    );
    for t in [0, 1] {
        let job = c.job(&alice, &format!("{array}_{t}")).await;
        assert_eq!(job["state"], "RUNNING", "{job}");
    }
    assert!(
        b.find(Locator::Id("array-cancel-waiting-open"))
            .await
            .is_err(),
        "none waits"
    );

    // Cancel all: the running ones end too.
    b.find(Locator::Id("array-cancel-all-open"))
        .await
        .expect("open")
        .click()
        .await
        .expect("click");
    b.find(Locator::Id("array-cancel-all"))
        .await
        .expect("confirm")
        .click()
        .await
        .expect("click");
    for t in [0, 1] {
        let job = c
            .wait_ended(&alice, &format!("{array}_{t}"), Duration::from_secs(30))
            .await;
        assert_eq!(job["state"], "CANCELLED", "{job}");
    }
}

#[tokio::test]
async fn chromium_an_admin_cancel_asks_first_keeps_still_while_open_and_the_owner_reads_why() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let job = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH -J train\nsleep 300\n")
        .await;
    c.wait_for(&alice, &job, &["RUNNING"], Duration::from_secs(30))
        .await;
    let password = c.app.admin_password.clone().expect("admin password");
    let b = signed_in(&c, "admin", &password).await;
    b.goto(&c.app.url("/admin/jobs")).await.expect("admin jobs");
    // One click opens the question; it names the job, its owner and its run time.
    b.find(Locator::Css(&format!("#cancel-{job} summary")))
        .await
        .expect("the cancel")
        .click()
        .await
        .expect("open");
    let question = b
        .find(Locator::Css(&format!("#cancel-{job} form p")))
        .await
        .expect("the question")
        .text()
        .await
        .expect("text");
    assert!(
        question.contains(&format!("Cancel job {job} (train) of alice, running for")),
        "{question}"
    );
    let reason = b
        .find(Locator::Css(&format!("#cancel-{job} input[name=reason]")))
        .await
        .expect("reason");
    reason
        .send_keys("node maintenance at 14:00")
        .await
        .expect("type");
    // The list's refresh (every 5 s) leaves it alone while it is open.
    tokio::time::sleep(Duration::from_secs(7)).await;
    let still = b
        .find(Locator::Css(&format!("#cancel-{job} input[name=reason]")))
        .await
        .expect("reason")
        .prop("value")
        .await
        .expect("value");
    assert_eq!(still.as_deref(), Some("node maintenance at 14:00"));
    b.find(Locator::Id(&format!("admin-cancel-{job}")))
        .await
        .expect("confirm")
        .click()
        .await
        .expect("click");
    let ended = c.wait_ended(&alice, &job, Duration::from_secs(30)).await;
    assert_eq!(ended["state"], "CANCELLED", "{ended}");
    // Its owner reads who and why on the job's page.
    let owner = c.app.login("alice", PASSWORD).await;
    let html = owner
        .get(c.app.url(&format!("/jobs/{job}")))
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(
        html.contains("It was cancelled by the administrator admin after"),
        "{html}"
    );
    assert!(
        html.contains("Their reason: node maintenance at 14:00"),
        "{html}"
    );
}

#[tokio::test]
async fn chromium_files_show_edit_and_submit_a_script_as_its_owner() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let own = |p: &std::path::Path| {
        std::os::unix::fs::chown(p, Some(alice.uid), Some(alice.uid)).expect("chown");
    };
    std::fs::create_dir_all(&alice.home).expect("home");
    own(&alice.home);
    let script = alice.home.join("train.sh");
    std::fs::write(&script, "#!/bin/bash\necho epoch 1\n").expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    own(&script);
    for name in ["slurm-10.out", "slurm-2.out", ".bashrc"] {
        let p = alice.home.join(name);
        std::fs::write(&p, "x\n").expect("file");
        own(&p);
    }
    let b = signed_in(&c, "alice", PASSWORD).await;
    let home = alice.home.display().to_string();
    b.goto(&c.app.url(&format!("/files?path={home}")))
        .await
        .expect("files");
    let names: Vec<String> = strings(&b, "return [...document.querySelectorAll('#files-table tr[data-kind=file]')].map(r => r.dataset.name)").await;
    assert_eq!(
        names,
        ["slurm-2.out", "slurm-10.out", "train.sh"],
        "natural order, no dot files"
    );
    b.find(Locator::Id("files-hidden-toggle"))
        .await
        .expect("the hidden files' link")
        .click()
        .await
        .expect("show hidden");
    b.wait()
        .for_element(Locator::Css("tr[data-name='.bashrc']"))
        .await
        .expect("dot files on request");

    // "Open a terminal here": the start form, on the terminal, opening in this folder.
    b.find(Locator::Id("files-terminal"))
        .await
        .expect("the terminal link")
        .click()
        .await
        .expect("open a terminal here");
    b.wait()
        .for_element(Locator::Id("folder"))
        .await
        .expect("the start form");
    let form = strings(&b, "return [document.querySelector('input[name=kind]:checked').value, document.getElementById('folder').value, String(document.getElementById('folder').closest('label').hidden), String(document.getElementById('logdir').closest('label').hidden)]").await;
    assert_eq!(form, ["terminal", home.as_str(), "false", "true"]);

    // The script opens in the page, is edited and saved as hers, keeping its mode.
    b.goto(&c.app.url(&format!("/files/view?path={}", script.display())))
        .await
        .expect("view");
    let text = b.find(Locator::Id("file-text")).await.expect("editor");
    text.clear().await.expect("clear");
    text.send_keys("#!/bin/bash\necho epoch 2\n")
        .await
        .expect("type");
    b.find(Locator::Id("file-save"))
        .await
        .expect("save")
        .click()
        .await
        .expect("click");
    b.wait()
        .for_element(Locator::Id("file-saved"))
        .await
        .expect("saved");
    assert_eq!(
        std::fs::read_to_string(&script).expect("read"),
        "#!/bin/bash\necho epoch 2\n"
    );
    let meta = std::fs::metadata(&script).expect("stat");
    assert_eq!((meta.uid(), meta.mode() & 0o777), (alice.uid, 0o750));

    // Changed behind the page's back: nothing is written over it, the text stays.
    let text = b.find(Locator::Id("file-text")).await.expect("editor");
    text.send_keys("echo mine\n").await.expect("type");
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(&script, "#!/bin/bash\necho theirs\n").expect("changed");
    b.find(Locator::Id("file-save"))
        .await
        .expect("save")
        .click()
        .await
        .expect("click");
    let error = b
        .wait()
        .for_element(Locator::Id("file-error"))
        .await
        .expect("refused")
        .text()
        .await
        .expect("text");
    assert!(error.contains("changed since you opened it"), "{error}");
    assert_eq!(
        std::fs::read_to_string(&script).expect("read"),
        "#!/bin/bash\necho theirs\n"
    );
    let kept = b
        .find(Locator::Id("file-text"))
        .await
        .expect("editor")
        .prop("value")
        .await
        .expect("value")
        .unwrap_or_default();
    assert!(kept.contains("echo mine"), "{kept}");

    // Submit as a job: the form with the script, run in its folder.
    b.goto(&c.app.url(&format!("/files/view?path={}", script.display())))
        .await
        .expect("view");
    b.find(Locator::Id("file-submit"))
        .await
        .expect("submit as a job")
        .click()
        .await
        .expect("click");
    let form_script = b
        .wait()
        .for_element(Locator::Id("script"))
        .await
        .expect("the form")
        .prop("value")
        .await
        .expect("value")
        .unwrap_or_default();
    assert!(form_script.contains("echo theirs"), "{form_script}");
    let dir = b
        .find(Locator::Id("working-directory"))
        .await
        .expect("dir")
        .prop("value")
        .await
        .expect("value");
    assert_eq!(dir.as_deref(), Some(home.as_str()));
}

#[tokio::test]
async fn chromium_an_announcement_shows_on_every_page_in_its_window_and_is_audited() {
    use serde_json::{json, Value};
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let admin = c
        .app
        .login("admin", c.app.admin_password.as_deref().expect("admin"))
        .await;
    let token = c.app.create_token(&admin, "ops", &["read", "admin"]).await;
    let post = |body: Value, token: String| {
        let url = c.app.url("/api/v1/admin/announcements");
        async move {
            reqwest::Client::new()
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .expect("announce")
        }
    };
    let until = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(2)).to_string();
    // Refusals name their field; a user may not announce.
    for (body, field) in [
        (
            json!({"message": "x", "severity": "urgent", "ends_at": until}),
            "severity",
        ),
        (
            json!({"message": "x", "ends_at": "next tuesday"}),
            "ends_at",
        ),
        (json!({"message": "", "ends_at": until}), "message"),
        (
            json!({"message": "x", "ends_at": "2020-01-01T00:00:00Z"}),
            "ends_at",
        ),
    ] {
        let res = post(body.clone(), token.clone()).await;
        assert_eq!(res.status(), 400, "{body}");
        let answer: Value = res.json().await.expect("json");
        assert_eq!(answer["field"], field, "{answer}");
    }
    let res = post(
        json!({"message": "x", "ends_at": until}),
        alice.token.clone(),
    )
    .await;
    assert_eq!(res.status(), 403);
    let res = post(
        json!({"message": "Maintenance on Tuesday 08:00-12:00: jobs that would run into it wait.",
               "severity": "warning", "ends_at": until}),
        token.clone(),
    )
    .await;
    assert_eq!(res.status(), 201);
    let made: Value = res.json().await.expect("json");
    // One to come is not shown yet.
    let later = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24)).to_string();
    let later_end = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(26)).to_string();
    let res = post(
        json!({"message": "Tomorrow's note", "starts_at": later, "ends_at": later_end}),
        token.clone(),
    )
    .await;
    assert_eq!(res.status(), 201);
    let shown: Value = c
        .app
        .get_bearer("/api/v1/announcements", &alice.token)
        .await
        .json()
        .await
        .expect("json");
    let messages: Vec<&str> = shown["announcements"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|a| a["message"].as_str())
        .collect();
    assert_eq!(messages.len(), 1, "{shown}");
    assert!(messages[0].starts_with("Maintenance on Tuesday"));

    // In the browser: atop the dashboard and any other page.
    let b = signed_in(&c, "alice", PASSWORD).await;
    for path in ["/", "/jobs", "/files"] {
        b.goto(&c.app.url(path)).await.expect("page");
        let banner = b
            .wait()
            .for_element(Locator::Css("#announcements .announcement-warning"))
            .await
            .unwrap_or_else(|e| panic!("{path}: no banner: {e}"))
            .text()
            .await
            .expect("text");
        assert!(
            banner.starts_with("Maintenance on Tuesday"),
            "{path}: {banner}"
        );
    }
    // Withdrawn: gone; both changes are in the audit log.
    let res = reqwest::Client::new()
        .delete(
            c.app
                .url(&format!("/api/v1/admin/announcements/{}", made["id"])),
        )
        .bearer_auth(&token)
        .send()
        .await
        .expect("withdraw");
    assert_eq!(res.status(), 200);
    let shown: Value = c
        .app
        .get_bearer("/api/v1/announcements", &alice.token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(shown["announcements"], json!([]));
    let audit: Value = c
        .app
        .get_bearer("/api/v1/admin/audit?action=announcement.create", &token)
        .await
        .json()
        .await
        .expect("json");
    assert!(
        audit.to_string().contains("Maintenance on Tuesday"),
        "{audit}"
    );
    let audit: Value = c
        .app
        .get_bearer("/api/v1/admin/audit?action=announcement.delete", &token)
        .await
        .json()
        .await
        .expect("json");
    assert!(audit.to_string().contains("announcement.delete"), "{audit}");
}

#[tokio::test]
async fn chromium_keyboard_focus_survives_the_job_lists_refresh() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let first = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --hold\ntrue\n")
        .await;
    c.sbatch(&alice, "#!/bin/bash\n#SBATCH --hold\ntrue\n")
        .await;
    let b = signed_in(&c, "alice", PASSWORD).await;
    b.goto(&c.app.url("/jobs")).await.expect("jobs");
    let link = format!("/jobs/{first}");
    b.execute(
        "document.querySelector('#queue a[href=\"' + arguments[0] + '\"]').focus();",
        vec![serde_json::json!(link)],
    )
    .await
    .expect("focus");
    // Two refreshes (every 5 s) later, the same link has the focus.
    let refreshed =
        atrium_tests::support::until("two refreshes", Duration::from_secs(20), || async {
            let n = b
                .execute(
                    "const box = document.getElementById('job-lists');
                 const seen = window.__refreshes || [];
                 const at = box.getAttribute('data-refreshed');
                 if (at && !seen.includes(at)) seen.push(at);
                 window.__refreshes = seen;
                 return seen.length;",
                    vec![],
                )
                .await
                .ok()?
                .as_u64()?;
            (n >= 2).then_some(())
        })
        .await;
    refreshed.expect("the lists refreshed");
    let focused = b
        .execute(
            "return document.activeElement && document.activeElement.getAttribute('href')",
            vec![],
        )
        .await
        .expect("focused");
    assert_eq!(focused.as_str(), Some(link.as_str()));
    // The output of a job is reachable by keyboard (it scrolls).
    b.goto(&c.app.url(&link)).await.expect("job page");
    let tabindex = b
        .find(Locator::Id("job-output"))
        .await
        .expect("output")
        .attr("tabindex")
        .await
        .expect("attr");
    assert_eq!(tabindex.as_deref(), Some("0"));
    // A held job of hers is released from its page, and runs.
    b.find(Locator::Id("job-release"))
        .await
        .expect("release")
        .click()
        .await
        .expect("click");
    let ended = c.wait_ended(&alice, &first, Duration::from_secs(30)).await;
    assert_eq!(ended["state"], "COMPLETED", "{ended}");
}
