//! A new user's first hour in Chromium, around their jobs: their files (a script
//! edited and submitted as its owner), an administrator's cancel that asks first and
//! whose reason the owner reads, and an announcement on every page in its window.

use std::time::Duration;

use fantoccini::Locator;

use crate::fixtures::browser::{signed_in, strings};
use crate::fixtures::{JobCluster, PASSWORD};

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
    let b = signed_in(&c.app, "admin", &password).await;
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
    let b = signed_in(&c.app, "alice", PASSWORD).await;
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
    let b = signed_in(&c.app, "alice", PASSWORD).await;
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
