//! Large and stalled transfers of the Files app: 200 MB through the page in Chromium,
//! one user's unread downloads and stopped helpers that stall nobody else, and an
//! upload written as the user would write it (their quota, the root reserve).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::fixtures::eventually;
use crate::fixtures::files::{noise, q, storage_cluster};

/// Whether the files at `a` and `b` hold the same bytes (read a block at a time).
fn same_bytes(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (mut fa, mut fb) = (
        std::fs::File::open(a).expect("open a"),
        std::fs::File::open(b).expect("open b"),
    );
    let (mut ba, mut bb) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    loop {
        let n = fa.read(&mut ba).expect("read a");
        let mut m = 0;
        while m < n {
            let k = fb.read(&mut bb[m..n]).expect("read b");
            if k == 0 {
                return false;
            }
            m += k;
        }
        if ba[..n] != bb[..n] {
            return false;
        }
        if n == 0 {
            return fb.read(&mut bb).expect("read b") == 0;
        }
    }
}

#[tokio::test]
async fn chromium_uploads_200_mb_through_the_page_and_downloads_it_back() {
    use atrium_tests::support::browser;
    use fantoccini::Locator;
    let c = storage_cluster("").await;
    let alice = c.user("alice").await;
    // The file to upload, in the test's own directory (removed with it).
    let local_dir = tempfile::tempdir().expect("tmp");
    let local = local_dir.path().join("weights-200mb.bin");
    {
        let mut f = std::fs::File::create(&local).expect("create");
        for block in 0..25u64 {
            std::io::Write::write_all(&mut f, &noise(8 << 20, 11 + block)).expect("write");
        }
    }
    let size = 200u64 << 20;
    assert_eq!(std::fs::metadata(&local).expect("stat").len(), size);

    let b = browser().await.expect("chromium");
    b.goto(&c.app.url("/login")).await.expect("login page");
    crate::fixtures::browser::submit_login(&b, "alice", "password-of-some-length").await;
    b.wait()
        .for_element(Locator::Id("logout"))
        .await
        .expect("logged in");
    b.goto(&c.app.url(&format!("/files?path={}", q(&alice.home))))
        .await
        .expect("files page");
    let input = b
        .wait()
        .for_element(Locator::Id("files-upload"))
        .await
        .expect("upload control");
    input
        .send_keys(local.to_str().expect("utf-8"))
        .await
        .expect("choose the file");
    let done = b
        .wait()
        .at_most(Duration::from_secs(300))
        .for_element(Locator::Css(".files-upload[data-state=done]"))
        .await;
    if let Err(e) = done {
        let note = b.find(Locator::Css(".files-upload-note")).await.ok();
        let note = match note {
            Some(n) => n.text().await.unwrap_or_default(),
            None => String::new(),
        };
        panic!("the upload did not complete: {e}: {note}");
    }
    let full = b
        .execute(
            "var p = document.querySelector('.files-upload progress'); return p.value === p.max && p.max > 0;",
            vec![],
        )
        .await
        .expect("progress bar");
    assert_eq!(
        full,
        serde_json::Value::Bool(true),
        "the progress bar is full"
    );

    // On disk: the whole file, the user's, byte for byte.
    let uploaded = alice.home.join("weights-200mb.bin");
    let meta = std::fs::metadata(&uploaded).expect("uploaded");
    assert_eq!(meta.len(), size);
    assert_eq!(
        meta.uid(),
        alice.uid,
        "the uploaded file belongs to the user"
    );
    assert!(same_bytes(&local, &uploaded), "the uploaded bytes differ");

    // Back through /files/download with the browser's session.
    let cookie = b
        .get_named_cookie("atrium_session")
        .await
        .expect("session cookie");
    let mut res = reqwest::Client::new()
        .get(c.app.url(&format!("/files/download?path={}", q(&uploaded))))
        .header("cookie", format!("atrium_session={}", cookie.value()))
        .send()
        .await
        .expect("download");
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-length"], size.to_string().as_str());
    assert!(res.headers()["content-disposition"]
        .to_str()
        .unwrap_or("")
        .starts_with("attachment"));
    let back = local_dir.path().join("downloaded.bin");
    {
        let mut f = std::fs::File::create(&back).expect("create");
        while let Some(chunk) = res.chunk().await.expect("chunk") {
            std::io::Write::write_all(&mut f, &chunk).expect("write");
        }
    }
    assert!(same_bytes(&local, &back), "the downloaded bytes differ");
    b.close().await.expect("close");
}

/// A watcher that stops (`SIGSTOP`) every process of `uid` as soon as it sees it, as
/// a user can do to their own `atrium files` helpers; it stops when dropped.
struct Stopper {
    uid: u32,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// How many processes it has stopped so far.
    count: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Stopper {
    fn start(uid: u32) -> Stopper {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = done.clone();
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = count.clone();
        let thread = std::thread::spawn(move || {
            let mut stopped = std::collections::BTreeSet::new();
            while !flag.load(std::sync::atomic::Ordering::SeqCst) {
                let running: Vec<String> = atrium_tests::support::process::processes_of_uid(uid)
                    .into_iter()
                    .filter(|(_, state)| *state != 'T')
                    .map(|(pid, _)| {
                        stopped.insert(pid);
                        pid.to_string()
                    })
                    .collect();
                if !running.is_empty() {
                    let _ = std::process::Command::new("kill")
                        .arg("-STOP")
                        .args(&running)
                        .stderr(std::process::Stdio::null())
                        .status();
                    counted.store(stopped.len(), std::sync::atomic::Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            stopped.len()
        });
        Stopper {
            uid,
            done,
            count,
            thread: Some(thread),
        }
    }

    /// How many processes it has stopped so far.
    fn stopped(&self) -> usize {
        self.count.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Stop watching; how many processes it stopped.
    fn finish(&mut self) -> usize {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.take().map_or(0, |t| t.join().unwrap_or(0))
    }
}

impl Drop for Stopper {
    /// Whatever it stopped and is still there (the test failed before the portal
    /// ended them) is killed: nothing is left stopped on the machine.
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let left: Vec<String> = atrium_tests::support::process::processes_of_uid(self.uid)
            .into_iter()
            .map(|(pid, _)| pid.to_string())
            .collect();
        if !left.is_empty() {
            let _ = std::process::Command::new("kill")
                .arg("-KILL")
                .args(&left)
                .status();
        }
    }
}

#[tokio::test]
async fn one_users_unread_downloads_and_stopped_helpers_stall_nobody_else() {
    let c = storage_cluster("files_timeout_seconds = 15\n").await;
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;
    let big = alice.home.join("big.bin");
    std::fs::write(&big, noise(32 << 20, 7)).expect("write");
    std::os::unix::fs::chown(&big, Some(alice.uid), Some(alice.uid)).expect("chown");

    // 600 downloads whose client never reads a byte of the answer.
    let addr = c.app.base.trim_start_matches("http://").to_string();
    let head = format!(
        "GET /api/v1/files/download?path={} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {}\r\n\r\n",
        q(&big),
        alice.token
    );
    let mut unread = Vec::new();
    for _ in 0..600 {
        use tokio::io::AsyncWriteExt;
        let mut s = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        s.write_all(head.as_bytes()).await.expect("request");
        unread.push(s);
    }

    // 600 listings while every helper of hers is stopped as it starts.
    let mut stopper = Stopper::start(alice.uid);
    let home = q(&alice.home);
    let mut listings = Vec::new();
    for _ in 0..600 {
        let url = c.files_url(&format!("?path={home}"));
        let token = alice.token.clone();
        listings.push(tokio::spawn(async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(token)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }));
    }
    // The burst is answered (beyond her share at once, with a 503); what is left are
    // her stopped helpers and her unread downloads.
    eventually(
        "all but her share of the listings are answered",
        Duration::from_secs(60),
        || {
            let waiting = listings.iter().filter(|l| !l.is_finished()).count();
            async move { waiting <= 8 }
        },
    )
    .await;
    // Some of her helpers were stopped (the portal may already have ended those whose
    // time was up: under load the burst above can take longer than her helpers'
    // 15 s).
    eventually(
        "some of her helpers are stopped",
        Duration::from_secs(30),
        || {
            let stopped = stopper.stopped() > 0;
            async move { stopped }
        },
    )
    .await;

    // Another user logs in and lists his home as if nothing were going on.
    let started = std::time::Instant::now();
    let bob_browser = c.app.login("bob", "password-of-some-length").await;
    let login = started.elapsed();
    assert!(login < Duration::from_secs(1), "bob's login took {login:?}");
    let started = std::time::Instant::now();
    let res = c.files(&bob).get(&format!("?path={}", q(&bob.home))).await;
    assert_eq!(res.status(), 200);
    let listing = started.elapsed();
    assert!(
        listing < Duration::from_secs(2),
        "bob's listing took {listing:?}"
    );
    drop(bob_browser);

    // No helper outlives its deadline (15 s): each is killed and reaped.
    let mut statuses = std::collections::BTreeMap::<u16, usize>::new();
    for l in listings {
        *statuses.entry(l.await.unwrap_or(0)).or_default() += 1;
    }
    let stopped = stopper.finish();
    assert!(
        stopped > 0,
        "no helper was stopped: the test proves nothing"
    );
    let left = atrium_tests::support::until(
        "none of her helpers is left",
        Duration::from_secs(30),
        || {
            let left = atrium_tests::support::process::processes_of_uid(alice.uid);
            async move { left.is_empty().then_some(()) }
        },
    )
    .await;
    if let Err(e) = left {
        let left: Vec<String> = atrium_tests::support::process::processes_of_uid(alice.uid)
            .iter()
            .map(|(pid, state)| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!(
                    "{pid} {state} {}",
                    String::from_utf8_lossy(&cmd).replace('\0', " ")
                )
            })
            .collect();
        panic!("{e:#}: {left:?}\nstatuses {statuses:?}");
    }
    // Beyond her share, refused at once with a Retry-After; the stopped ones failed
    // at their deadline.
    assert!(
        statuses.get(&503).copied().unwrap_or(0) > 500,
        "listings by status: {statuses:?}"
    );
    assert_eq!(statuses.get(&500), None, "listings by status: {statuses:?}");
    let res = c.files(&alice).get(&format!("?path={home}")).await;
    assert_eq!(res.status(), 200, "her own listing works again");
    drop(unread);
}

/// `mkfs.ext4` of a `size_mb` image at `image` with `options`, loop-mounted at `at`
/// with `mount_options`; `false` (after saying why) where this machine does not allow it.
fn loop_ext4(image: &Path, at: &Path, size_mb: u64, options: &[&str], mount_options: &str) -> bool {
    let ok = |mut cmd: std::process::Command| {
        cmd.output()
            .map(|o| {
                if !o.status.success() {
                    eprintln!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr).trim());
                }
                o.status.success()
            })
            .unwrap_or(false)
    };
    let file = std::fs::File::create(image).expect("image");
    file.set_len(size_mb << 20).expect("size");
    drop(file);
    let mut mkfs = std::process::Command::new("/sbin/mkfs.ext4");
    mkfs.args(["-q", "-F"]).args(options).arg(image);
    let mut mount = std::process::Command::new("/bin/mount");
    mount
        .args(["-o", &format!("loop,{mount_options}")])
        .arg(image)
        .arg(at);
    ok(mkfs) && ok(mount)
}

/// Unmounts the file system at its path when dropped.
struct Mounted(std::path::PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("/bin/umount")
            .arg("-d")
            .arg(&self.0)
            .status();
    }
}

#[tokio::test]
async fn an_upload_is_written_as_the_user_would_write_it() {
    // The project space is a small ext4 with half its blocks reserved for root.
    let c = storage_cluster("").await;
    let projects = c.root.path().join("projects");
    let image = c.root.path().join("projects.img");
    if !loop_ext4(&image, &projects, 64, &["-m", "50"], "rw") {
        assert!(
            !atrium_tests::support::in_ci(),
            "a loop-mounted ext4 is needed in CI (root, /dev/loop-control)"
        );
        eprintln!("SKIPPED an_upload_is_written_as_the_user_would_write_it: no loop mount here");
        return;
    }
    let _mounted = Mounted(projects.clone());
    std::fs::set_permissions(&projects, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let alice = c.user("alice").await;

    // 40 MiB fit only in root's reserved blocks: the user's own write would stop at
    // about 29 MiB, and so does the portal's for her.
    let target = projects.join("big.bin");
    let res = c.files(&alice).put(&target, 0, noise(40 << 20, 3)).await;
    assert_eq!(res.status(), 409, "an upload used root's reserved blocks");
    let body: Value = res.json().await.expect("json");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("no space left"),
        "{body}"
    );
    // What did fit is the user's, and resumable.
    let offset = c.files(&alice).held(&target).await;
    assert!(offset < 40 << 20, "{offset}");

    // Disk quotas, where the kernel has them (CONFIG_QUOTA) and `setquota` is there.
    let quota_dir = c.root.path().join("quota");
    std::fs::create_dir(&quota_dir).expect("mkdir");
    let has_setquota = Path::new("/usr/sbin/setquota").exists();
    if !has_setquota
        || !loop_ext4(
            &c.root.path().join("quota.img"),
            &quota_dir,
            64,
            &["-O", "quota", "-E", "quotatype=usrquota"],
            "usrquota",
        )
    {
        eprintln!(
            "quota part skipped: {}",
            if has_setquota {
                "the kernel has no disk quotas (CONFIG_QUOTA)"
            } else {
                "setquota (Debian's quota) is not installed"
            }
        );
        return;
    }
    let _quota_mounted = Mounted(quota_dir.clone());
    std::fs::set_permissions(&quota_dir, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    // A hard limit of 8 MiB for her (blocks of 1 KiB).
    let set = std::process::Command::new("/usr/sbin/setquota")
        .args(["-u", &alice.uid.to_string(), "0", "8192", "0", "0"])
        .arg(&quota_dir)
        .status();
    assert!(set.is_ok_and(|s| s.success()), "setquota");
    let res = c
        .files(&alice)
        .put(&quota_dir.join("q.bin"), 0, noise(16 << 20, 4))
        .await;
    assert_eq!(res.status(), 409);
    let body: Value = res.json().await.expect("json");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("over quota"),
        "{body}"
    );
}
