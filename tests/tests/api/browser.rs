//! A real browser: headless Chromium logs in, sees the home page and logs out.

use fantoccini::Locator;

use crate::fixtures::browser::submit_login;
use crate::fixtures::spawn_app;
use atrium_tests::support::{browser, Browser};

#[tokio::test]
async fn chromium_logs_in_sees_home_and_logs_out() {
    let app = spawn_app().await;
    let password = app.admin_password.clone().expect("admin password");
    let b = browser().await.expect("chromium");

    b.goto(&app.url("/")).await.expect("open portal");
    // Not logged in: sent to the login page.
    let url = b.current_url().await.expect("url");
    assert_eq!(url.path(), "/login");

    // A wrong password first: the page says so and nothing else.
    submit_login(&b, "admin", "wrong").await;
    let error = b
        .wait()
        .for_element(Locator::Id("login-error"))
        .await
        .expect("error shown");
    assert_eq!(
        error.text().await.expect("text"),
        "Invalid username or password."
    );

    submit_login(&b, "admin", &password).await;
    let greeting = b
        .wait()
        .for_element(Locator::Id("greeting"))
        .await
        .expect("home page");
    assert_eq!(greeting.text().await.expect("text"), "Hello, Administrator");
    let who = b
        .find(Locator::Id("who"))
        .await
        .expect("who")
        .text()
        .await
        .expect("text");
    assert!(who.starts_with("admin"), "{who}");
    // The session cookie is invisible to scripts (HttpOnly).
    let visible = b
        .execute("return document.cookie", vec![])
        .await
        .expect("script");
    assert!(
        !visible.as_str().unwrap_or("").contains("atrium_session"),
        "{visible}"
    );

    if let Ok(dir) = std::env::var("SCREENSHOT_DIR") {
        b.screenshot(std::path::Path::new(&dir).join("home.png"))
            .await
            .expect("screenshot");
    }

    b.find(Locator::Id("logout"))
        .await
        .expect("logout")
        .click()
        .await
        .expect("click");
    b.wait()
        .for_element(Locator::Id("login-form"))
        .await
        .expect("back to login");
    b.goto(&app.url("/")).await.expect("open portal");
    let url = b.current_url().await.expect("url");
    assert_eq!(url.path(), "/login", "logged out for good");
    b.close().await.expect("close");
}

#[tokio::test]
async fn chromium_logs_in_through_ldap() {
    use atrium_tests::support::ldap::{Slapd, SlapdOptions, BASE_DN};
    let slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    let app = crate::fixtures::spawn_with(crate::fixtures::Options {
        extra_config: format!(
            "[auth.ldap]\nurl = \"{}\"\nbind_dn_templates = [\"uid={{username}},ou=people,{BASE_DN}\"]\nallowed_groups = [\"gpu-users\"]\n",
            slapd.url()
        ),
        ..Default::default()
    })
    .await;
    let b = browser().await.expect("chromium");
    b.goto(&app.url("/login")).await.expect("open login");
    submit_login(&b, "bob", "bob-secret").await;
    let greeting = b
        .wait()
        .for_element(Locator::Id("greeting"))
        .await
        .expect("home page");
    assert_eq!(greeting.text().await.expect("text"), "Hello, Bob Builder");
    let who = b
        .find(Locator::Id("who"))
        .await
        .expect("who")
        .text()
        .await
        .expect("text");
    assert_eq!(who, "bob");
    b.close().await.expect("close");
}

/// Text of the element with id `id`, or empty when it is not there.
async fn text_of(b: &Browser, id: &str) -> String {
    match b.find(Locator::Id(id)).await {
        Ok(e) => e.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

#[tokio::test]
async fn chromium_submits_a_job_from_the_page_and_watches_its_output() {
    let c = crate::fixtures::JobCluster::start(0).await;
    let _alice = c.user("alice").await;
    let b = browser().await.expect("chromium");
    b.goto(&c.app.url("/login")).await.expect("login page");
    submit_login(&b, "alice", "password-of-some-length").await;
    b.wait()
        .for_element(Locator::Id("greeting"))
        .await
        .expect("home");

    // Pick the hello starter (filled server-side without JS too) and submit it.
    b.goto(&c.app.url("/jobs/new?starter=hello"))
        .await
        .expect("form");
    let script = b.find(Locator::Id("script")).await.expect("script");
    let prefilled = script
        .prop("value")
        .await
        .expect("value")
        .unwrap_or_default();
    assert!(
        prefilled.contains("#SBATCH --job-name=hello"),
        "{prefilled}"
    );
    b.find(Locator::Id("job-submit"))
        .await
        .expect("submit")
        .click()
        .await
        .expect("click");
    b.wait()
        .for_element(Locator::Id("job-output"))
        .await
        .expect("job page");
    let url = b.current_url().await.expect("url");
    assert!(url.path().starts_with("/jobs/"), "{url}");

    // The output appears on the page (streamed by the page's script) and the job ends.
    atrium_tests::support::until(
        "the output on the page",
        std::time::Duration::from_secs(60),
        || async {
            let out = text_of(&b, "job-output").await;
            out.contains("Hello from").then_some(())
        },
    )
    .await
    .expect("output shown");
    atrium_tests::support::until(
        "the job to finish on the page",
        std::time::Duration::from_secs(60),
        || async { (text_of(&b, "output-status").await == "finished").then_some(()) },
    )
    .await
    .expect("finished");
    b.goto(url.as_str()).await.expect("reload");
    assert_eq!(text_of(&b, "job-state").await, "COMPLETED");
    assert_eq!(text_of(&b, "job-exit-code").await, "0");

    // The cluster page shows the partitions.
    b.goto(&c.app.url("/cluster")).await.expect("cluster");
    b.wait()
        .for_element(Locator::Id("partitions"))
        .await
        .expect("partitions table");
}
