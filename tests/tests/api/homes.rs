//! Shared storage at login: a missing home is created for the user (theirs, 0700, not
//! readable by another user), `~/templates` is filled from the starters as the user,
//! and a starter the user edited survives a later sync.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use atrium::config::DatabaseUrl;
use atrium::store::Store;
use atrium_tests::support::until;

use crate::fixtures::JobCluster;

async fn appears(path: &Path) {
    until(
        &format!("{} to appear", path.display()),
        Duration::from_secs(30),
        || async { path.exists().then_some(()) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
}

#[tokio::test]
async fn the_first_login_creates_the_home_and_its_templates_and_edits_survive() {
    let mut c = JobCluster::start(0).await;
    let home = c.root.path().join("home/bob");
    let bob = c.uid();
    let uid = bob.to_string();
    let out = c.app.cli(
        &[
            "user",
            "add",
            "bob",
            "--uid",
            &uid,
            "--gid",
            &uid,
            "--home",
            home.to_str().expect("utf-8"),
        ],
        "password-of-some-length\n",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!home.exists());

    c.app.login("bob", "password-of-some-length").await;
    let hello = home.join("templates/jobs/hello.sh");
    appears(&hello).await;
    let meta = std::fs::metadata(&home).expect("home");
    assert_eq!((meta.uid(), meta.gid()), (bob, bob));
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    let file = std::fs::metadata(&hello).expect("starter");
    assert_eq!(file.uid(), bob, "copied as the user");
    // Another user cannot look inside.
    let stranger = c.uid();
    let other = std::process::Command::new("setpriv")
        .arg(format!("--reuid={stranger}"))
        .arg(format!("--regid={stranger}"))
        .args(["--clear-groups", "ls"])
        .arg(&home)
        .output()
        .expect("setpriv");
    assert!(!other.status.success(), "another user listed the home");
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );

    // Bob edits a starter and removes another; a later sync (the starters changed:
    // here, the recorded version is made stale) keeps both of his choices.
    std::fs::write(&hello, "#!/bin/bash\necho mine\n").expect("edit");
    let jobs_dir = home.join("templates/jobs");
    let removed = std::fs::read_dir(&jobs_dir)
        .expect("list")
        .flatten()
        .map(|e| e.path())
        .find(|p| *p != hello)
        .expect("a second starter");
    std::fs::remove_file(&removed).expect("remove");
    let url = DatabaseUrl::new(format!(
        "sqlite://{}",
        c.app.data_dir.path().join("var/atrium.db").display()
    ));
    let store = Store::connect(&url, 1).await.expect("store");
    let bob = store
        .user_by_name("bob")
        .await
        .expect("query")
        .expect("bob");
    // The sync is recorded once every starter is copied, which may be a little after
    // the first one appears.
    until("the sync to be recorded", Duration::from_secs(30), || {
        let store = &store;
        async move {
            store
                .templates_digest(bob.id)
                .await
                .expect("digest")
                .map(|_| ())
        }
    })
    .await
    .expect("the sync was recorded");
    store
        .set_templates_digest(bob.id, "stale")
        .await
        .expect("stale");
    c.app.kill9();
    c.app.restart();
    c.app.login("bob", "password-of-some-length").await;
    until(
        "the templates to be synced again",
        Duration::from_secs(30),
        || {
            let store = store.clone();
            async move {
                let now = store.templates_digest(bob.id).await.ok().flatten();
                (now.as_deref() != Some("stale")).then_some(())
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
    assert_eq!(
        std::fs::read_to_string(&hello).expect("read"),
        "#!/bin/bash\necho mine\n"
    );
    assert!(
        !removed.exists(),
        "a starter the user removed stays removed"
    );
}
