//! A real browser: headless Chromium logs in, sees the home page and logs out.

use fantoccini::Locator;

use crate::helpers::spawn_app;
use atrium_tests::support::{browser, Browser};

/// Replace the text of the input with id `id` by `text`.
async fn fill(b: &Browser, id: &str, text: &str) {
    let input = b.find(Locator::Id(id)).await.expect(id);
    input.clear().await.expect("clear");
    input.send_keys(text).await.expect("type");
}

async fn submit_login(b: &Browser, username: &str, password: &str) {
    fill(b, "username", username).await;
    fill(b, "password", password).await;
    b.find(Locator::Id("login-submit"))
        .await
        .expect("submit")
        .click()
        .await
        .expect("click");
}

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
    let app = crate::helpers::spawn_with(crate::helpers::Options {
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
