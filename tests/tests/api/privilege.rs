//! The privilege boundary, attacked as a user would (the tests run as root, the jobs
//! as unprivileged users): a job's variables never reach a process running as root,
//! a job gets a session of its own, cannot read the portal's files, and owns its
//! output alone; session tokens are not in the database.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::{cluster_config, private_root, spawn_with, JobCluster, Options};

const RUN: Duration = Duration::from_secs(60);

/// A world-writable folder holding what an attacker prepares: a program named like
/// each one the portal runs (found first on the `PATH` it sets), a library that notes
/// the uid of every process that loads it, and the loader's debug output. Returns the
/// folder and the variables that point at them.
fn booby_trap(root: &Path) -> (PathBuf, Vec<(String, String)>) {
    let dir = root.join("trap");
    std::fs::create_dir(&dir).expect("trap dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    for program in ["setpriv", "sbatch", "env", "sh", "bwrap", "atrium"] {
        let path = dir.join(program);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ntouch \"{}/ran-{program}-$(id -u)\"\n",
                dir.display()
            ),
        )
        .expect("fake program");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let source = dir.join("note.c");
    std::fs::write(
        &source,
        format!(
            "#include <stdio.h>\n#include <unistd.h>\n\
             __attribute__((constructor)) static void note(void) {{\n\
               char p[512]; snprintf(p, sizeof p, \"{}/loaded-%u\", (unsigned) getuid());\n\
               char exe[256] = {{0}}; readlink(\"/proc/self/exe\", exe, sizeof exe - 1);\n\
               FILE *f = fopen(p, \"a\"); if (f) {{ fprintf(f, \"%s\\n\", exe); fclose(f); }}\n}}\n",
            dir.display()
        ),
    )
    .expect("library source");
    let library = dir.join("note.so");
    let built = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(&source)
        .status()
        .expect("cc (the C compiler the Rust build uses)");
    assert!(built.success(), "building the preloaded library");
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let vars = vec![
        (
            "PATH".to_string(),
            format!("{}:/usr/bin:/bin", dir.display()),
        ),
        ("LD_PRELOAD".to_string(), library.display().to_string()),
        ("LD_LIBRARY_PATH".to_string(), dir.display().to_string()),
        ("LD_DEBUG".to_string(), "files".to_string()),
        (
            "LD_DEBUG_OUTPUT".to_string(),
            dir.join("ld-debug").display().to_string(),
        ),
    ];
    (dir, vars)
}

/// Files in the trap folder that a process running as root made (the root-owned
/// sources the test wrote itself aside).
fn made_by_root(dir: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .expect("read trap")
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == 0))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !matches!(
                n.as_str(),
                "setpriv" | "sbatch" | "env" | "sh" | "bwrap" | "atrium" | "note.c" | "note.so"
            )
        })
        .collect();
    found.sort();
    found
}

/// Fail, saying what, if a process running as root honoured the trap.
fn assert_nothing_made_by_root(trap: &Path) {
    let by_root = made_by_root(trap);
    let what: Vec<String> = by_root
        .iter()
        .map(|n| {
            let text = std::fs::read_to_string(trap.join(n)).unwrap_or_default();
            format!(
                "{n}: {}",
                text.lines().take(3).collect::<Vec<_>>().join(" | ")
            )
        })
        .collect();
    assert!(
        by_root.is_empty(),
        "a process running as root honoured a job's variables: {what:#?}"
    );
}

#[tokio::test]
async fn a_slurm_jobs_variables_never_reach_a_process_running_as_root() {
    let (c, slurm) = crate::fixtures::slurm::start().await;
    let eve = crate::fixtures::slurm::user(&c, &slurm, "eve").await;
    let (trap, vars) = booby_trap(c.root.path());
    let environment: serde_json::Map<String, Value> = vars
        .iter()
        .map(|(k, v)| (k.clone(), Value::from(v.clone())))
        .collect();

    // Through the API: the job's environment names the trap.
    let res = c
        .submit(
            &eve,
            json!({
                "script": "#!/bin/sh\n/usr/bin/id -u\n",
                "working_directory": eve.home,
                "environment": environment,
            }),
        )
        .await;
    let status = res.status();
    let body: Value = res.json().await.expect("json");
    assert_nothing_made_by_root(&trap);
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_string();
    let job = c.wait_for(&eve, &id, &["COMPLETED"], RUN).await;
    assert_eq!(job["exit_code"], 0, "{job}");

    // Through `atrium sbatch`, run by eve with the trap in her own environment
    // (the client forwards her whole environment, as sbatch's --export=ALL does).
    let script = eve.home.join("job.sh");
    std::fs::write(&script, "#!/bin/sh\n/usr/bin/id -u\n").expect("script");
    std::os::unix::fs::chown(&script, Some(eve.uid), Some(eve.uid)).expect("chown");
    // setpriv runs as root: the trap's variables are set only after it, by env as eve.
    let mut client = tokio::process::Command::new("/usr/bin/setpriv");
    client
        .arg(format!("--reuid={}", eve.uid))
        .arg(format!("--regid={}", eve.uid))
        .args(["--clear-groups", "--"])
        .arg("/usr/bin/env")
        .args(vars.iter().map(|(k, v)| format!("{k}={v}")))
        .arg(crate::fixtures::atrium_bin())
        .args(["sbatch", "--parsable"])
        .arg(&script)
        .current_dir(&eve.home)
        .env_clear()
        .env("HOME", &eve.home)
        .env("ATRIUM_URL", &c.app.base)
        .env("ATRIUM_TOKEN", &eve.token);
    let out = client.output().await.expect("atrium sbatch");
    assert!(
        out.status.success(),
        "atrium sbatch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The loader's debug lines (LD_DEBUG) may come with the id.
    let printed = String::from_utf8_lossy(&out.stdout).into_owned();
    let id = printed
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_digit()))
        .unwrap_or_else(|| panic!("no job id in {printed:?}"))
        .to_string();
    c.wait_for(&eve, &id, &["COMPLETED"], RUN).await;

    // The variables did reach eve's own processes (sbatch ran as eve)...
    let names: Vec<String> = std::fs::read_dir(&trap)
        .expect("trap")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| *n == format!("loaded-{}", eve.uid)),
        "the job's variables reach the user's sbatch: {names:?}"
    );
    // ...and nothing running as root loaded, ran or wrote anything of the trap.
    assert_nothing_made_by_root(&trap);
    assert!(
        !names.iter().any(|n| n.starts_with("ran-")),
        "a program was found on the job's PATH: {names:?}"
    );
}

/// A job that reports its session, its terminal and what it can read of the portal.
fn snoop_script(data_dir: &Path, spool: &Path) -> String {
    format!(
        "#!/bin/sh\n\
         set -- $(cut -d' ' -f6,7 /proc/self/stat)\n\
         echo \"session=$1 tty=$2\"\n\
         if (exec 3</dev/tty) 2>/dev/null; then echo tty-open; else echo no-tty; fi\n\
         for f in {data}/atrium.db {data}/atrium.db-wal {data}/jwt.key; do\n\
           if cat \"$f\" >/dev/null 2>&1; then echo \"read $f\"; fi\n\
         done\n\
         ls {data} 2>/dev/null | sed 's/^/listed /'\n\
         ls {spool} 2>/dev/null | sed 's/^/spool /'\n\
         for f in {spool}/*/spec.json; do\n\
           if cat \"$f\" >/dev/null 2>&1; then echo \"read $f\"; fi\n\
         done\n\
         echo done\n",
        data = data_dir.display(),
        spool = spool.display(),
    )
}

/// The session id of `pid` (field 6 of its stat).
fn session_of(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    rest.split_whitespace().nth(3).expect("session").to_string()
}

async fn snoop(runtime: &str) {
    let root = private_root();
    let mut config = cluster_config(root.path(), 0);
    config = config.replace("[jobs]\n", &format!("[jobs]\nruntime = \"{runtime}\"\n"));
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    let c = JobCluster::on(app, root);
    let mallory = c.user("mallory").await;
    let data_dir = c.app.data_dir.path().join("var");
    let spool = c.root.path().join("spool");
    // As on a real head node, the directory above the data directory is open to all:
    // only the portal's own modes protect it.
    std::fs::set_permissions(
        c.app.data_dir.path(),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");

    // Another job of another user is in the spool, with its environment.
    let other = c.user("trent").await;
    let res = c
        .submit(
            &other,
            json!({"script": "#!/bin/sh\nsleep 60\n", "working_directory": other.home,
                   "environment": {"API_KEY": "trents-secret"}}),
        )
        .await;
    let body: Value = res.json().await.expect("json");
    let trents = body["id"].as_str().expect("id").to_string();
    c.wait_for(&other, &trents, &["RUNNING"], RUN).await;

    let id = c.sbatch(&mallory, &snoop_script(&data_dir, &spool)).await;
    let job = c.wait_for(&mallory, &id, &["COMPLETED"], RUN).await;
    assert_eq!(job["exit_code"], 0, "{job}");
    let out = c.output(&mallory, &id);
    c.cancel(&other, &trents).await;
    c.wait_for(&other, &trents, &["CANCELLED"], RUN).await;
    assert!(out.contains("done"), "{out}");

    // Its own session, no terminal: nothing it does reaches the portal's terminal.
    let portal_session = session_of(c.app.pid().expect("the portal runs"));
    let line = out
        .lines()
        .find(|l| l.starts_with("session="))
        .expect("session line");
    assert!(
        !line.starts_with(&format!("session={portal_session} ")),
        "the job shares the portal's session {portal_session}: {line}"
    );
    assert!(line.ends_with(" tty=0"), "the job has a terminal: {line}");
    assert!(out.contains("no-tty"), "{out}");

    // Nothing of the portal's is readable; with bubblewrap not even listed.
    assert!(
        !out.contains("read "),
        "the job read the portal's files:\n{out}"
    );
    assert!(
        !out.contains("listed "),
        "the job listed the data dir:\n{out}"
    );
    if runtime == "bubblewrap" {
        // Only its own step's directory is there, for its script, and the step
        // commands (`srun`, `scontrol`: links to the portal's binary).
        let seen: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("spool "))
            .collect();
        assert_eq!(seen, [id.as_str(), "bin"], "the job saw the spool:\n{out}");
    }

    // The portal's files are its own: the data directory 0700, the database 0600.
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode() & 0o777);
    assert_eq!(mode(&data_dir).expect("data dir"), 0o700);
    for name in ["atrium.db", "jwt.key"] {
        assert_eq!(mode(&data_dir.join(name)).expect(name), 0o600, "{name}");
    }

    // Its output is the user's alone.
    let meta = std::fs::metadata(mallory.home.join(format!("slurm-{id}.out"))).expect("output");
    assert_eq!(meta.uid(), mallory.uid);
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
}

#[tokio::test]
async fn a_job_in_bubblewrap_sees_no_terminal_and_nothing_of_the_portal() {
    snoop("bubblewrap").await;
}

#[tokio::test]
async fn a_plain_job_sees_no_terminal_and_cannot_read_the_portal() {
    snoop("none").await;
}

#[tokio::test]
async fn the_data_directory_is_made_private_again_at_start() {
    let root = private_root();
    let mut app = spawn_with(Options {
        extra_config: cluster_config(root.path(), 0),
        database_url: None,
    })
    .await;
    let data_dir = app.data_dir.path().join("var");
    app.terminate();
    std::fs::set_permissions(&data_dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(
        data_dir.join("atrium.db"),
        std::fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");
    app.restart();
    let mode = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.permissions().mode() & 0o777)
            .expect("mode")
    };
    assert_eq!(mode(&data_dir), 0o700);
    assert_eq!(mode(&data_dir.join("atrium.db")), 0o600);
    let log = app.log().join("\n");
    assert!(log.contains("made private"), "{log}");
}
