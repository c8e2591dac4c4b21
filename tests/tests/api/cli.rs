//! The command line: configuration check and local account management.

use std::time::Duration;

use crate::fixtures::{eventually, spawn_app};

#[tokio::test]
async fn config_check_reports_every_problem_with_its_key() {
    let app = spawn_app().await;
    let bad = app.data_dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "listen = \"nowhere\"\ncolour = \"blue\"\n[auth]\njwt_secret = \"short\"\n[database]\nurl = \"mysql://x\"\n",
    )
    .expect("write");
    let out = crate::fixtures::atrium_command()
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
    // Enabled again, erin logs in, but her token was revoked for good.
    app.login("erin", "erin-password-1").await;
    assert_eq!(app.get_bearer("/api/v1/me", &token).await.status(), 401);

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

    // In the audit log as the portal writes them, named by who ran the command.
    let admin = app
        .login("admin", app.admin_password.as_deref().expect("admin"))
        .await;
    let ops = app.create_token(&admin, "ops", &["read", "admin"]).await;
    let audit: serde_json::Value = app
        .get_bearer("/api/v1/admin/audit?target=erin", &ops)
        .await
        .json()
        .await
        .expect("json");
    let actions: Vec<(String, String, String)> = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (text("action"), text("actor"), text("client_addr"))
        })
        .collect();
    for action in ["user.add", "user.disable", "user.enable", "user.passwd"] {
        assert!(
            actions.iter().any(|(a, actor, from)| a == action
                && actor.contains("(command line")
                && from == "local"),
            "{action}: {actions:?}"
        );
    }
}

/// `user list` rows as (username, uid, gid, home).
fn posix_columns(list: &str) -> Vec<(String, String, String, String)> {
    list.lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            (cols.len() >= 5).then(|| {
                (
                    cols[0].to_string(),
                    cols[2].to_string(),
                    cols[3].to_string(),
                    cols[4].to_string(),
                )
            })
        })
        .collect()
}

#[tokio::test]
async fn user_add_allocates_a_posix_identity_from_the_range() {
    let app = crate::fixtures::spawn_with(crate::fixtures::Options {
        extra_config:
            "[accounts]\nuid_min = 61000\nuid_max = 61001\nhome_root = \"/shared/home\"\n".into(),
        ..Default::default()
    })
    .await;
    let out = app.cli(&["user", "add", "erin"], "erin-password-1\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = app.cli(
        &[
            "user",
            "add",
            "gina",
            "--uid",
            "5000",
            "--gid",
            "100",
            "--home",
            "/srv/gina",
        ],
        "gina-password-1\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = app.cli(&["user", "list"], "");
    let list = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        list.lines()
            .next()
            .is_some_and(|h| h.contains("UID") && h.contains("GID") && h.contains("HOME")),
        "{list}"
    );
    let rows = posix_columns(&list);
    let row = |name: &str| {
        rows.iter()
            .find(|r| r.0 == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing from\n{list}"))
    };
    // The bootstrap administrator took one uid of the range, erin the other.
    let (_, admin_uid, admin_gid, admin_home) = row("admin");
    let (_, erin_uid, erin_gid, erin_home) = row("erin");
    let mut uids = [admin_uid.clone(), erin_uid.clone()];
    uids.sort();
    assert_eq!(uids, ["61000", "61001"], "{list}");
    assert_eq!((admin_gid, erin_gid), (admin_uid, erin_uid.clone()));
    assert_eq!(admin_home, "/shared/home/admin");
    assert_eq!(erin_home, "/shared/home/erin");
    assert_eq!(
        row("gina"),
        (
            "gina".to_string(),
            "5000".to_string(),
            "100".to_string(),
            "/srv/gina".to_string()
        )
    );

    // A full range says which keys to widen; root's ids are refused.
    let out = app.cli(&["user", "add", "frank"], "frank-password-1\n");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("accounts.uid_min/uid_max"), "{err}");
    let out = app.cli(&["user", "add", "toor", "--uid", "0"], "pw\n");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("root"));
    let out = app.cli(&["user", "list"], "");
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(!list.contains("frank") && !list.contains("toor"), "{list}");
}
