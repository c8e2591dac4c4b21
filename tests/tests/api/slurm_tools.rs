//! Programs that drive Slurm's commands run unchanged against atrium's (issue 37):
//! submitit and snakemake with its Slurm executor, at the versions
//! `tests/install-deps.sh` pins, run as an unprivileged user whose `PATH` has
//! atrium's commands under Slurm's names (symlinks to the binary) and nothing of
//! Slurm's. Also the start race: a program that makes a job's output folder just
//! after `sbatch` returns.
//!
//! The tools' environment is `$ATRIUM_TEST_SLURM_TOOLS` (default
//! `/opt/atrium-test/slurm-tools`); outside CI a missing one skips with a note.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::fixtures::cli::{client, run};
use crate::fixtures::{atrium_bin, JobCluster, JobUser};

/// Where the tools' Python environment is, by default.
const DEFAULT_VENV: &str = "/opt/atrium-test/slurm-tools";
const VENV_ENV: &str = "ATRIUM_TEST_SLURM_TOOLS";
/// The commands put on the tools' `PATH` under Slurm's names.
const COMMANDS: &[&str] = &[
    "sbatch", "squeue", "sacct", "sinfo", "scancel", "scontrol", "srun", "salloc", "sprio",
    "sshare", "sstat",
];
/// How long one tool's whole run may take before the test fails (and kills it).
const TOOL_DEADLINE: Duration = Duration::from_secs(240);

/// The tools' environment, or `None` after saying why `test` is skipped (only outside CI).
fn venv_or_skip(test: &str) -> Option<PathBuf> {
    let venv = std::env::var_os(VENV_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_VENV), PathBuf::from);
    if ["python", "snakemake"]
        .iter()
        .all(|b| venv.join("bin").join(b).is_file())
    {
        return Some(venv);
    }
    assert!(
        !atrium_tests::support::in_ci(),
        "{test}: the Slurm tools' environment {} is missing (CI is set, so this fails instead of \
         skipping); run tests/install-deps.sh",
        venv.display()
    );
    eprintln!(
        "SKIPPED {test}: no Slurm tools' environment at {} (set {VENV_ENV}, or run tests/install-deps.sh)",
        venv.display()
    );
    None
}

/// A folder (readable by everyone) of symlinks to atrium named as Slurm's commands.
fn slurm_named_commands(root: &Path) -> PathBuf {
    let dir = root.join("slurm-bin");
    std::fs::create_dir(&dir).expect("bin dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for name in COMMANDS {
        std::os::unix::fs::symlink(atrium_bin(), dir.join(name)).expect("symlink");
    }
    dir
}

/// A portal with two GPUs, a user, the tools' environment and the `PATH` they run with.
struct Tools {
    c: JobCluster,
    alice: JobUser,
    venv: PathBuf,
    path: String,
}

impl Tools {
    async fn start(test: &str) -> Option<Tools> {
        let venv = venv_or_skip(test)?;
        let c = JobCluster::start(2).await;
        let alice = c.user("alice").await;
        let bin = slurm_named_commands(c.root.path());
        let path = format!("{}:{}/bin:/usr/bin:/bin", bin.display(), venv.display());
        Some(Tools {
            c,
            alice,
            venv,
            path,
        })
    }
}

/// Run `program args` as `user` in `cwd`, with only the variables a login shell on a
/// cluster gives (and the portal's address and token), `PATH` first naming atrium's
/// commands. Returns (succeeded, standard output and error together).
fn as_user(
    c: &JobCluster,
    user: &JobUser,
    path: &str,
    cwd: &Path,
    program: &Path,
    args: &[&str],
) -> (bool, String) {
    let log = tempfile::NamedTempFile::new().expect("log");
    let out = log.reopen().expect("reopen");
    let err = out.try_clone().expect("clone");
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &user.home)
        .env("USER", &user.name)
        .env("LOGNAME", &user.name)
        .env("LANG", "C.UTF-8")
        .env("ATRIUM_URL", &c.app.base)
        .env("ATRIUM_TOKEN", &user.token)
        .current_dir(cwd)
        .uid(user.uid)
        .gid(user.uid)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
        .expect("spawn the tool");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if started.elapsed() > TOOL_DEADLINE {
            // The tool and whatever it started (its own process group).
            let _ = Command::new("/bin/kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(log.path()).unwrap_or_default();
    match status {
        Some(s) => (s.success(), text),
        None => (false, format!("{text}\n(killed after {TOOL_DEADLINE:?})")),
    }
}

/// Write `text` to `path` as `user`'s file.
fn write_as(user: &JobUser, path: &Path, text: &str) {
    std::fs::write(path, text).expect("write");
    std::os::unix::fs::chown(path, Some(user.uid), Some(user.uid)).expect("chown");
}

/// The submitit program: a function's result, an array's results and each task's
/// own log, a failure raised as one, and a cancel seen as CANCELLED (sacct polled
/// by submitit itself).
const SUBMITIT_PROGRAM: &str = r#"
import os, sys, time
import submitit

def add(a, b):
    return a + b

def square(x):
    return x * x

def boom():
    raise ValueError("boom from the job")

def nap():
    time.sleep(600)

ex = submitit.AutoExecutor(folder="sj/%j")
assert ex.cluster == "slurm", ex.cluster
ex.update_parameters(timeout_min=5)

job = ex.submit(add, 2, 3)
assert job.result() == 5
print("result", job.job_id, flush=True)

jobs = ex.map_array(square, [1, 2, 3])
assert [j.result() for j in jobs] == [1, 4, 9], [j.job_id for j in jobs]
for j in jobs:
    assert "_" in j.job_id, j.job_id
    with open(j.paths.stdout) as f:
        log = f.read()
    assert j.job_id in str(j.paths.stdout), j.paths.stdout
    assert "Job completed successfully" in log or "completed" in log.lower(), log
print("array", [j.job_id for j in jobs], flush=True)

bad = ex.submit(boom)
try:
    bad.result()
    sys.exit("a failing function gave a result")
except submitit.core.utils.FailedJobError as e:
    assert "boom from the job" in str(e), e
print("failure", bad.job_id, flush=True)

slow = ex.submit(nap)
deadline = time.time() + 60
while slow.state != "RUNNING":
    assert time.time() < deadline, slow.state
    time.sleep(0.2)
slow.cancel()
while not slow.state.startswith("CANCELLED"):
    assert time.time() < deadline + 60, slow.state
    time.sleep(0.5)
print("cancelled", slow.job_id, slow.state, flush=True)
print("SUBMITIT OK")
"#;

#[tokio::test]
async fn submitit_runs_functions_arrays_failures_and_cancels_unchanged() {
    let test = "submitit_runs_functions_arrays_failures_and_cancels_unchanged";
    let Some(Tools {
        c,
        alice,
        venv,
        path,
    }) = Tools::start(test).await
    else {
        return;
    };
    let program = alice.home.join("drive.py");
    write_as(&alice, &program, SUBMITIT_PROGRAM);
    // Blocking is fine: the portal is a process of its own.
    let (ok, out) = as_user(
        &c,
        &alice,
        &path,
        &alice.home,
        &venv.join("bin/python"),
        &["drive.py"],
    );
    assert!(ok && out.contains("SUBMITIT OK"), "submitit failed:\n{out}");
    // The array tasks wrote their own logs, named by srun's %A_%a_%t.
    let logs: Vec<String> = std::fs::read_dir(alice.home.join("sj"))
        .expect("sj")
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("_0_log.out"))
        .collect();
    assert!(
        logs.iter().filter(|n| n.matches('_').count() == 3).count() >= 3,
        "{logs:?}"
    );
}

/// A two-rule workflow; `b` reads what `a` wrote. No partition or account named:
/// the executor finds the default partition with `sinfo -o %P` and gives up guessing
/// an account (its `sacct ... | tail -1` is refused by getopt, as Slurm's is).
const SNAKEFILE: &str = r#"
rule all:
    input: "b.txt"

rule a:
    output: "a.txt"
    shell: "echo hello from job $SLURM_JOB_ID > {output}"

rule b:
    input: "a.txt"
    output: "b.txt"
    shell: "tr a-z A-Z < {input} > {output}"
"#;

#[tokio::test]
async fn snakemake_with_its_slurm_executor_runs_a_two_rule_workflow_unchanged() {
    let test = "snakemake_with_its_slurm_executor_runs_a_two_rule_workflow_unchanged";
    let Some(Tools {
        c,
        alice,
        venv,
        path,
    }) = Tools::start(test).await
    else {
        return;
    };
    let work = alice.home.join("flow");
    std::fs::create_dir(&work).expect("workflow dir");
    std::os::unix::fs::chown(&work, Some(alice.uid), Some(alice.uid)).expect("chown");
    write_as(&alice, &work.join("Snakefile"), SNAKEFILE);
    // The executor's own setting shortens its first status check from 40 s.
    let (ok, out) = as_user(
        &c,
        &alice,
        &path,
        &work,
        &venv.join("bin/snakemake"),
        &[
            "--executor",
            "slurm",
            "--jobs",
            "2",
            "--slurm-init-seconds-before-status-checks",
            "1",
        ],
    );
    assert!(ok, "snakemake failed:\n{out}");
    let b = std::fs::read_to_string(work.join("b.txt")).expect("b.txt");
    assert!(b.starts_with("HELLO FROM JOB "), "{b}");
    // Both rules ran as jobs of the portal's, named by the run's id.
    let mut cmd = client(&c, &alice.token, &alice.home, &atrium_bin());
    cmd.args(["sacct", "-X", "-P", "-n", "-o", "JobName,State,Comment"]);
    let (ok, listed, err) = run(cmd);
    assert!(ok, "{err}");
    let done: Vec<&str> = listed
        .lines()
        .filter(|l| l.contains("|COMPLETED|rule_"))
        .collect();
    assert_eq!(done.len(), 2, "{listed}");
}

/// The start race: folder-per-job logs (`logs/N/%j.out`), each folder made just after
/// `sbatch` returns, as a program that learns the id from sbatch does. Every job
/// runs; a folder never made fails its job after the wait, saying why.
#[tokio::test]
async fn a_job_waits_for_the_folder_of_its_output_made_after_sbatch_returns() {
    let c = JobCluster::start_with_jobs(2, "output_folder_wait_seconds = 3").await;
    let alice = c.user("alice").await;
    let bin = atrium_bin();
    let mut ids = Vec::new();
    for i in 0..4 {
        let mut cmd = client(&c, &alice.token, &alice.home, &bin);
        let output = format!("logs/{i}/%j.out");
        cmd.args(["sbatch", "--parsable", "-o", &output, "--wrap=echo ran"]);
        let (ok, id, err) = run(cmd);
        assert!(ok, "{err}");
        let id = id.trim().to_string();
        let dir = alice.home.join(format!("logs/{i}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for d in [alice.home.join("logs"), dir] {
            std::os::unix::fs::chown(&d, Some(alice.uid), Some(alice.uid)).expect("chown");
        }
        ids.push((i, id));
    }
    for (i, id) in &ids {
        c.wait_for(&alice, id, &["COMPLETED"], Duration::from_secs(30))
            .await;
        let out = std::fs::read_to_string(alice.home.join(format!("logs/{i}/{id}.out")))
            .expect("the job's output");
        assert_eq!(out, "ran\n");
    }
    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args([
        "sbatch",
        "--parsable",
        "-o",
        "never/%j.out",
        "--wrap=echo ran",
    ]);
    let (ok, id, err) = run(cmd);
    assert!(ok, "{err}");
    let job = c
        .wait_for(&alice, id.trim(), &["FAILED"], Duration::from_secs(30))
        .await;
    let message = job["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("never/") && message.contains("No such file"),
        "{job}"
    );
}
