//! A new user's first hour in Chromium, with their jobs: the start form offers what
//! is free and starts on it by default, a job that failed for the site says so first,
//! an array has a page of its tasks with both cancels, and the job list's refresh
//! keeps the keyboard's focus.

use std::time::Duration;

use fantoccini::Locator;

use crate::fixtures::browser::{log_in, signed_in, strings};
use crate::fixtures::{JobCluster, PASSWORD};
use atrium_tests::support::Browser;

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
    let b = signed_in(&c.app, "alice", PASSWORD).await;
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
    let b = signed_in(&c.app, "alice", PASSWORD).await;
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
    log_in(&b, &c.app, "alice", PASSWORD).await;
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
    let b = signed_in(&c.app, "alice", PASSWORD).await;
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
async fn chromium_keyboard_focus_survives_the_job_lists_refresh() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let first = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --hold\ntrue\n")
        .await;
    c.sbatch(&alice, "#!/bin/bash\n#SBATCH --hold\ntrue\n")
        .await;
    let b = signed_in(&c.app, "alice", PASSWORD).await;
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
