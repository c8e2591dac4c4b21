//! The command line: configuration check and local account management.

use std::time::Duration;

use crate::helpers::{eventually, spawn_app};

#[tokio::test]
async fn config_check_reports_every_problem_with_its_key() {
    let app = spawn_app().await;
    let bad = app.data_dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "listen = \"nowhere\"\ncolour = \"blue\"\n[auth]\njwt_secret = \"short\"\n[database]\nurl = \"mysql://x\"\n",
    )
    .expect("write");
    let out = crate::helpers::atrium_command()
        .args(["--config", bad.to_str().expect("utf8"), "config", "check"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for key in [
        "listen:",
        "colour: unknown key",
        "auth.jwt_secret:",
        "database.url:",
    ] {
        assert!(text.contains(key), "{key} missing in:\n{text}");
    }

    let out = app.cli(&["config", "check"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("configuration OK"));
}

#[tokio::test]
async fn user_commands_manage_local_accounts_live() {
    let app = spawn_app().await;
    app.add_user("erin", "erin-password-1", false);
    let out = app.cli(&["user", "add", "erin"], "again\n");
    assert!(!out.status.success(), "duplicate user must fail");
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
    let out = app.cli(&["user", "add", "Bad Name"], "pw\n");
    assert!(!out.status.success());
    let out = app.cli(&["user", "add", "frank"], "\n");
    assert!(!out.status.success(), "empty password refused");

    let out = app.cli(&["user", "list"], "");
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(list.contains("admin") && list.contains("erin"), "{list}");
    assert!(!list.contains("frank"));

    let erin = app.login("erin", "erin-password-1").await;
    let token = app.create_token(&erin, "t", &["read"]).await;

    // Disabling takes effect on the running portal without a restart.
    let out = app.cli(&["user", "disable", "erin"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually(
        "disabled user's token refused",
        Duration::from_secs(10),
        || async { app.get_bearer("/api/v1/me", &token).await.status() == 401 },
    )
    .await;
    eventually(
        "disabled user's session refused",
        Duration::from_secs(10),
        || async {
            erin.get(app.url("/api/v1/me"))
                .send()
                .await
                .map(|r| r.status() == 401)
                .unwrap_or(false)
        },
    )
    .await;
    let client = app.browser_like_client();
    assert_eq!(
        app.post_login(&client, "erin", "erin-password-1")
            .await
            .status(),
        401
    );

    let out = app.cli(&["user", "disable", "erin", "--enable"], "");
    assert!(out.status.success());
    eventually(
        "re-enabled token accepted",
        Duration::from_secs(10),
        || async { app.get_bearer("/api/v1/me", &token).await.status() == 200 },
    )
    .await;

    // A new password ends browser sessions and replaces the old one.
    let erin = app.login("erin", "erin-password-1").await;
    let out = app.cli(&["user", "passwd", "erin"], "erin-password-2\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually("old session refused", Duration::from_secs(10), || async {
        erin.get(app.url("/api/v1/me"))
            .send()
            .await
            .map(|r| r.status() == 401)
            .unwrap_or(false)
    })
    .await;
    let client = app.browser_like_client();
    assert_eq!(
        app.post_login(&client, "erin", "erin-password-1")
            .await
            .status(),
        401
    );
    app.login("erin", "erin-password-2").await;
}
