//! Proves that the test support (tests/src/support) works against the real components.

use std::time::{Duration, Instant};

use atrium_tests::support::{self, process, slurm, wait, Slurm, SlurmOptions};

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

/// A test user of the Slurm fixture: known to the cluster through `Slurm::add_user`, with a home
/// directory of its own (removed when dropped).
struct SlurmUser {
    name: &'static str,
    uid: u32,
    home: tempfile::TempDir,
}

impl SlurmUser {
    fn add(slurm: &Slurm, name: &'static str, uid: u32) -> anyhow::Result<Self> {
        let home = tempfile::Builder::new()
            .prefix(&format!("atrium-{name}-"))
            .tempdir()?;
        std::os::unix::fs::chown(home.path(), Some(uid), Some(uid))?;
        slurm.add_user(name, uid, uid, home.path())?;
        Ok(Self { name, uid, home })
    }

    /// Runs `sbatch --parsable ARGS` as this user, from its home, with only `SLURM_CONF` and the
    /// usual login variables; returns the job id.
    async fn sbatch(&self, slurm: &Slurm, args: &[&str]) -> anyhow::Result<u32> {
        let id = self.uid.to_string();
        let out = tokio::process::Command::new(process::find_binary("setpriv", &[])?)
            .args(["--reuid", &id, "--regid", &id, "--clear-groups", "--"])
            .arg(process::find_binary("sbatch", &[])?)
            .arg("--parsable")
            .args(args)
            .current_dir(self.home.path())
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.home.path())
            .env("USER", self.name)
            .env("LOGNAME", self.name)
            .envs(slurm.env())
            .output()
            .await?;
        anyhow::ensure!(
            out.status.success(),
            "sbatch {args:?} as {} failed: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        // --parsable prints "ID" or "ID;CLUSTER".
        let stdout = String::from_utf8_lossy(&out.stdout);
        let job = stdout.trim().split(';').next().unwrap_or_default();
        job.parse()
            .map_err(|e| anyhow::anyhow!("sbatch printed {stdout:?}: {e}"))
    }

    fn read(&self, file: &str) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(self.home.path().join(file))?)
    }
}

/// State and raw exit code (`wait` status) of `job`, once it has finished.
async fn finished_job(slurm: &Slurm, job: u32) -> anyhow::Result<(String, i32)> {
    let id = job.to_string();
    let line = wait::until(
        &format!("job {job} to finish"),
        Duration::from_secs(30),
        || async {
            let line = slurm
                .run(
                    "squeue",
                    &["-h", "-t", "all", "-j", &id, "-O", "State:|,exit_code:|"],
                )
                .await
                .ok()?;
            let state = line.split('|').next()?.trim();
            (!state.is_empty()
                && !["PENDING", "CONFIGURING", "RUNNING", "COMPLETING"].contains(&state))
            .then(|| line.trim().to_owned())
        },
    )
    .await
    .map_err(|e| e.context(slurm.log("slurmctld")))?;
    let mut fields = line.split('|');
    let state = fields.next().unwrap_or_default().to_owned();
    let code = fields
        .next()
        .unwrap_or_default()
        .parse()
        .map_err(|e| anyhow::anyhow!("exit code in {line:?}: {e}"))?;
    Ok((state, code))
}

#[tokio::test]
async fn slurm_runs_jobs_of_wrapped_users_and_keeps_them_across_a_controller_restart(
) -> anyhow::Result<()> {
    let mut slurm = Slurm::start(SlurmOptions::default()).await?;
    let user = SlurmUser::add(&slurm, "slurmtest", 20391)?;
    let out = format!("{}/out-%j.txt", user.home.path().display());
    let job = user
        .sbatch(
            &slurm,
            &["--comment=atrium", "-o", &out, "--wrap", "id -un; exit 3"],
        )
        .await?;

    let (state, code) = finished_job(&slurm, job).await?;
    assert_eq!(state, "FAILED");
    assert_eq!(code, 3 << 8, "raw wait status of exit 3");
    let output = user.read(&format!("out-{job}.txt"))?;
    assert_eq!(output.trim(), "slurmtest", "{}", slurm.log("slurmd"));

    slurm.stop_controller().await?;
    let down = slurm.run("squeue", &["-h"]).await;
    assert!(down.is_err(), "squeue answered without slurmctld: {down:?}");

    slurm.start_controller().await?;
    let listed = slurm
        .run(
            "squeue",
            &[
                "-h",
                "-t",
                "all",
                "-j",
                &job.to_string(),
                "-O",
                "JobID:|,State:|,UserName:|",
            ],
        )
        .await?;
    assert_eq!(listed.trim(), format!("{job}|FAILED|slurmtest|"));
    Ok(())
}

#[tokio::test]
async fn slurm_runs_typed_gpu_jobs_and_leaves_nothing_behind() -> anyhow::Result<()> {
    let slurm = Slurm::start(SlurmOptions::default()).await?;
    let node = slurm.node_name().to_owned();
    let partitions = slurm.run("sinfo", &["-h", "-o", "%P|%l|%G|%N|%T"]).await?;
    let expected = [
        format!("gpu*|infinite|{}|{node}|idle", slurm::NODE_GRES),
        format!("debug|1:00:00|{}|{node}|idle", slurm::NODE_GRES),
    ];
    assert_eq!(partitions.lines().collect::<Vec<_>>(), expected);

    let user = SlurmUser::add(&slurm, "slurmgpu", 20392)?;
    let out = format!("{}/out-%j.txt", user.home.path().display());
    for gres in ["gpu:1g.10gb:1", "gpu:1", "gpu:a100:2"] {
        let job = user
            .sbatch(
                &slurm,
                &[
                    &format!("--gres={gres}"),
                    "-o",
                    &out,
                    "--wrap",
                    "echo $CUDA_VISIBLE_DEVICES",
                ],
            )
            .await?;
        assert_eq!(
            finished_job(&slurm, job).await?,
            ("COMPLETED".to_owned(), 0)
        );
        let devices = user.read(&format!("out-{job}.txt"))?;
        let wanted: usize = gres.rsplit(':').next().unwrap_or_default().parse()?;
        assert_eq!(
            devices.trim().split(',').filter(|d| !d.is_empty()).count(),
            wanted,
            "--gres={gres}: CUDA_VISIBLE_DEVICES={devices:?}"
        );
    }

    // A job still running when the fixture goes: its processes go too.
    let job = user
        .sbatch(
            &slurm,
            &["-p", "debug", "-o", "/dev/null", "--wrap", "sleep 600"],
        )
        .await?;
    let sleepers = wait::until(
        &format!("job {job}'s sleep to run"),
        Duration::from_secs(30),
        || async {
            let running = processes_of(user.uid);
            let sleeping = running.iter().any(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim() == "sleep")
            });
            sleeping.then_some(running)
        },
    )
    .await?;
    let dir = slurm.dir().to_path_buf();
    drop(slurm);
    assert!(!dir.exists(), "{} not removed", dir.display());
    let left = wait::until(
        "the job's processes to be gone",
        Duration::from_secs(5),
        || async {
            let left: Vec<u32> = sleepers
                .iter()
                .copied()
                .filter(|&p| process::pid_alive(p))
                .collect();
            if left.is_empty() {
                Ok(())
            } else {
                Err(anyhow::anyhow!("still running: {left:?}"))
            }
        },
    )
    .await;
    assert!(left.is_ok(), "{left:?}");
    let dir = dir.to_string_lossy().into_owned();
    assert!(process::live_processes_mentioning(&dir).is_empty());
    Ok(())
}

/// Live processes whose real uid is `uid`.
fn processes_of(uid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|status| {
                    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
                    uids.split_whitespace().next()?.parse::<u32>().ok()
                })
                == Some(uid)
                && process::pid_alive(pid)
        })
        .collect()
}

#[tokio::test]
async fn slurm_with_accounting_answers_sacct_for_jobs_squeue_forgot() -> anyhow::Result<()> {
    let slurm = Slurm::start(SlurmOptions {
        accounting: true,
        ..SlurmOptions::default()
    })
    .await?;
    let user = SlurmUser::add(&slurm, "slurmacct", 20393)?;
    let job = user
        .sbatch(
            &slurm,
            &["--gres=gpu:a100:1", "-o", "/dev/null", "--wrap", "exit 0"],
        )
        .await?;
    let id = job.to_string();
    // MinJobAge=2: the job leaves slurmctld's memory; slurmdbd still has it.
    wait::until(
        "the job to leave squeue",
        Duration::from_secs(60),
        || async {
            let line = slurm
                .run("squeue", &["-h", "-t", "all", "-j", &id, "-o", "%T"])
                .await;
            // squeue fails with "Invalid job id" once the job is gone.
            (line.is_err() || line.is_ok_and(|l| l.trim().is_empty())).then_some(())
        },
    )
    .await?;
    let line = wait::until("sacct to have the job", Duration::from_secs(60), || async {
        let out = slurm
            .run(
                "sacct",
                &[
                    "-n",
                    "-P",
                    "-X",
                    "-j",
                    &id,
                    "-o",
                    "JobID,State,User,Account,AllocTRES",
                ],
            )
            .await
            .ok()?;
        let line = out.lines().next()?.to_owned();
        line.contains("COMPLETED").then_some(line)
    })
    .await
    .map_err(|e| e.context(slurm.log("slurmdbd")))?;
    let fields: Vec<&str> = line.split('|').collect();
    assert_eq!(
        fields[..4],
        [id.as_str(), "COMPLETED", "slurmacct", slurm::ACCOUNT]
    );
    assert!(
        fields[4].contains("gres/gpu:a100=1") && fields[4].contains("gres/gpu=1"),
        "{line}"
    );
    Ok(())
}

#[tokio::test]
async fn slurm_on_three_nodes_runs_a_step_across_two_and_leaves_nothing_behind(
) -> anyhow::Result<()> {
    let slurm = Slurm::start(SlurmOptions {
        cpus: 4,
        multi_node: true,
        ..SlurmOptions::default()
    })
    .await?;
    let nodes = slurm
        .run("sinfo", &["-h", "-N", "-p", "gpu", "-o", "%N|%G|%T"])
        .await?;
    let expected: Vec<String> = slurm::CLUSTER_NODES
        .iter()
        .map(|n| match n.gres() {
            g if g.is_empty() => format!("{}|(null)|idle", n.name),
            g => format!("{}|{g}|idle", n.name),
        })
        .collect();
    assert_eq!(nodes.lines().collect::<Vec<_>>(), expected);

    // Each node is a host of its own: its name, its address.
    let user = SlurmUser::add(&slurm, "slurmnodes", 20393)?;
    let out = format!("{}/out-%j.txt", user.home.path().display());
    let job = user
        .sbatch(
            &slurm,
            &[
                "-N",
                "2",
                "--ntasks-per-node=2",
                "--gres=gpu:2",
                "-o",
                &out,
                "--wrap",
                "srun bash -c 'echo $(hostname) $(hostname -I)'",
            ],
        )
        .await?;
    assert_eq!(
        finished_job(&slurm, job).await?,
        ("COMPLETED".to_owned(), 0)
    );
    let mut lines: Vec<String> = user
        .read(&format!("out-{job}.txt"))?
        .lines()
        .map(|l| l.trim().to_owned())
        .collect();
    lines.sort();
    let on = |name: &str| {
        let addr = slurm
            .node_addr(name)
            .map(|a| a.to_string())
            .unwrap_or_default();
        format!("{name} {addr}")
    };
    assert_eq!(
        lines,
        [on("node1"), on("node1"), on("node2"), on("node2")],
        "{}",
        slurm.log("slurmd")
    );

    let bridge = slurm.bridge().map(str::to_owned).expect("a bridge");
    let dir = slurm.dir().to_path_buf();
    drop(slurm);
    assert!(!dir.exists(), "{} not removed", dir.display());
    let links = std::fs::read_dir("/sys/class/net")?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.starts_with(&bridge))
        .collect::<Vec<_>>();
    assert!(links.is_empty(), "left behind: {links:?}");
    Ok(())
}
