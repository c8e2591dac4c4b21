//! The whole portal on PostgreSQL instead of SQLite.

use atrium_tests::support::fresh_database;

use crate::helpers::{spawn_with, Options};

#[tokio::test]
async fn portal_runs_on_postgres() {
    let db = fresh_database().await.expect("postgres database");
    let app = spawn_with(Options {
        database_url: Some(db.url.clone()),
        ..Options::default()
    })
    .await;
    let password = app
        .admin_password
        .clone()
        .expect("admin created on first start");
    assert_eq!(
        reqwest::get(app.url("/readyz"))
            .await
            .expect("ready")
            .status(),
        200
    );
    let client = app.login("admin", &password).await;
    let token = app.create_token(&client, "pg", &["read"]).await;
    let me: serde_json::Value = app
        .get_bearer("/api/v1/me", &token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(me["username"], "admin");
    assert_eq!(me["admin"], true);
    assert!(!std::path::Path::new(&app.data_dir.path().join("var/atrium.db")).exists());
}
