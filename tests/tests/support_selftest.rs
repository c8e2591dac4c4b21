//! Proves that the test support (tests/src/support) works against the real components.

use std::time::{Duration, Instant};

use atrium_tests::support::{self, process, wait};

#[tokio::test]
async fn fresh_databases_are_distinct_usable_and_dropped() -> anyhow::Result<()> {
    let a = support::fresh_database().await?;
    let b = support::fresh_database().await?;
    assert_ne!(a.name, b.name);
    assert_ne!(a.url, b.url);
    assert!(a.url.starts_with("postgres://"), "{}", a.url);

    a.psql("CREATE TABLE t (v text); INSERT INTO t VALUES ('from a')")
        .await?;
    b.psql("CREATE TABLE t (v text); INSERT INTO t VALUES ('from b'), ('again b')")
        .await?;
    assert_eq!(a.psql("SELECT string_agg(v, ',') FROM t").await?, "from a");
    assert_eq!(b.psql("SELECT count(*) FROM t").await?, "2");
    assert_eq!(a.psql("SELECT current_database()").await?, a.name);

    // The URL is what the server gets: it must work for a plain libpq client too.
    let psql = process::find_binary("psql", &[&support::pg::pg_bin_dir()?])?;
    let out = tokio::process::Command::new(psql)
        .args([
            "-X",
            "-A",
            "-t",
            "-d",
            &b.url,
            "-c",
            "SELECT count(*) FROM t",
        ])
        .output()
        .await?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2");

    // Dropping a database removes it from the cluster.
    let name = a.name.clone();
    drop(a);
    let exists = b
        .psql(&format!(
            "SELECT count(*) FROM pg_database WHERE datname = '{name}'"
        ))
        .await?;
    assert_eq!(exists, "0");
    Ok(())
}

#[tokio::test]
async fn private_cluster_has_no_tcp_listener() -> anyhow::Result<()> {
    if std::env::var_os(support::pg::PG_URL_ENV).is_some() {
        // An external cluster is configured; nothing private to check.
        return Ok(());
    }
    let db = support::fresh_database().await?;
    assert!(
        db.url.contains("?host=/"),
        "unix socket URL expected: {}",
        db.url
    );
    assert_eq!(db.psql("SHOW listen_addresses").await?, "");
    assert_eq!(db.psql("SHOW fsync").await?, "off");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_reads_text_from_a_data_url() -> anyhow::Result<()> {
    let b = support::browser().await?;
    b.goto("data:text/html,<title>selftest</title><h1 id=x>hi</h1>")
        .await?;
    let text = b.find(fantoccini::Locator::Css("#x")).await?.text().await?;
    assert_eq!(text, "hi");
    assert_eq!(b.title().await?, "selftest");

    let shot = b.scratch_dir().join("shot.png");
    b.screenshot(&shot).await?;
    let png = std::fs::read(&shot)?;
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");

    let dir = b.scratch_dir().to_path_buf();
    b.close().await?;
    assert!(
        !dir.exists(),
        "browser scratch dir {} not removed",
        dir.display()
    );
    Ok(())
}

#[tokio::test]
async fn dropped_browser_leaves_no_processes() -> anyhow::Result<()> {
    let b = support::browser().await?;
    let driver_pid = b.driver_pid();
    assert!(process::pid_alive(driver_pid));
    let dir = b.scratch_dir().to_path_buf();
    drop(b);
    assert!(
        !process::pid_alive(driver_pid),
        "chromedriver survived drop"
    );
    assert!(
        !dir.exists(),
        "browser scratch dir {} not removed",
        dir.display()
    );
    assert!(
        process::live_processes_in_group(driver_pid).is_empty(),
        "processes left in chromedriver's group: {:?}",
        process::live_processes_in_group(driver_pid)
    );
    // Also those that left the group (Chromium's crashpad handler daemonizes).
    let dir_str = dir.to_string_lossy().into_owned();
    assert!(
        process::live_processes_mentioning(&dir_str).is_empty(),
        "processes mentioning {dir_str} survived: {:?}",
        process::live_processes_mentioning(&dir_str)
    );
    Ok(())
}

#[tokio::test]
async fn until_times_out_naming_the_thing() {
    let start = Instant::now();
    let err = wait::until(
        "the moon to turn blue",
        Duration::from_millis(200),
        || async { None::<()> },
    )
    .await
    .expect_err("condition never holds");
    assert!(start.elapsed() >= Duration::from_millis(200));
    assert!(start.elapsed() < Duration::from_secs(5));
    let msg = format!("{err:#}");
    assert!(msg.contains("the moon to turn blue"), "{msg}");

    let err = wait::until("a flaky thing", Duration::from_millis(50), || async {
        Err::<(), _>(anyhow::anyhow!("connection refused"))
    })
    .await
    .expect_err("condition never holds");
    let msg = format!("{err:#}");
    assert!(
        msg.contains("a flaky thing") && msg.contains("connection refused"),
        "{msg}"
    );
}

#[tokio::test]
async fn until_returns_the_value_once_ready() -> anyhow::Result<()> {
    let mut calls = 0;
    let v = wait::until("the third call", Duration::from_secs(5), || {
        calls += 1;
        let n = calls;
        async move { (n >= 3).then_some(n * 10) }
    })
    .await?;
    assert_eq!(v, 30);
    Ok(())
}

#[tokio::test]
async fn child_guard_kills_on_drop() -> anyhow::Result<()> {
    let sleep = process::find_binary("sleep", &[])?;
    let std_child = std::process::Command::new(&sleep).arg("600").spawn()?;
    let tokio_child = tokio::process::Command::new(&sleep).arg("600").spawn()?;
    let a = process::ChildGuard::new("std sleep", std_child);
    let b = process::ChildGuard::new("tokio sleep", tokio_child);
    let (pa, pb) = (a.id().expect("running"), b.id().expect("running"));
    assert!(process::pid_alive(pa) && process::pid_alive(pb));
    drop(a);
    drop(b);
    assert!(!process::pid_alive(pa), "std child survived");
    assert!(!process::pid_alive(pb), "tokio child survived");
    Ok(())
}
