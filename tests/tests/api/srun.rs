//! `srun` inside batch jobs of the internal scheduler: the real portal runs a real
//! job (in bubblewrap when it is installed, as the submitting user) whose script
//! calls the `srun` on its `PATH`; the steps are recorded with the job's token and
//! listed by `sacct`.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::cli::{client, run};
use crate::fixtures::{atrium_bin, JobCluster, JobUser};

const ENDED: &[&str] = &["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"];

/// Lines of `out` that start with `tag `, split into words after it.
fn tagged(out: &str, tag: &str) -> Vec<Vec<String>> {
    out.lines()
        .filter_map(|l| l.strip_prefix(tag)?.strip_prefix(' '))
        .map(|rest| rest.split_whitespace().map(String::from).collect())
        .collect()
}

/// A job's steps as (id, state, exit code, tasks).
fn steps_of(job: &Value) -> Vec<(String, String, i64, i64)> {
    job["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().unwrap_or("").to_string(),
                s["state"].as_str().unwrap_or("").to_string(),
                s["exit_code"].as_i64().unwrap_or(-1),
                s["ntasks"].as_i64().unwrap_or(-1),
            )
        })
        .collect()
}

async fn finished(c: &JobCluster, user: &JobUser, id: &str) -> (Value, String) {
    let job = c.wait_for(user, id, ENDED, Duration::from_secs(90)).await;
    (job, c.output(user, id))
}

const FOUR_TASKS: &str = r#"#!/bin/bash
#SBATCH -n 4
#SBATCH --gres=gpu:4
echo "JOB_GPUS $CUDA_VISIBLE_DEVICES"
srun -n 4 python3 -c 'import os; e = os.environ; print("RANK", e["SLURM_PROCID"], e["SLURM_LOCALID"], e["SLURM_NODEID"], e["SLURM_STEP_ID"], e["SLURM_NTASKS"], e["SLURM_TASK_PID"] == str(os.getpid()), flush=True)'
echo "STEP0 $?"
srun -n 4 --gpus-per-task=1 python3 -c 'import os; e = os.environ; print("GPU", e["SLURM_PROCID"], e["CUDA_VISIBLE_DEVICES"], e["SLURM_STEP_GPUS"], flush=True)'
echo "STEP1 $?"
srun -l -n 3 bash -c 'echo "hello from $SLURM_PROCID"; exit $((SLURM_PROCID * 2))'
echo "STEP2 $?"
echo "HOSTS $(scontrol show hostnames)"
"#;

#[tokio::test]
async fn srun_runs_tasks_with_their_ranks_and_gpus_and_sacct_shows_the_steps() {
    let c = JobCluster::start(4).await;
    let alice = c.user("alice").await;
    let id = c.sbatch(&alice, FOUR_TASKS).await;
    let (job, out) = finished(&c, &alice, &id).await;
    assert_eq!(job["state"], "COMPLETED", "{job}\n{out}");

    // Four tasks, four distinct ranks, in step 0, each knowing its own pid.
    let ranks = tagged(&out, "RANK");
    assert_eq!(ranks.len(), 4, "{out}");
    let procids: BTreeSet<&str> = ranks.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(procids, BTreeSet::from(["0", "1", "2", "3"]), "{out}");
    for r in &ranks {
        assert_eq!(r[1], r[0], "SLURM_LOCALID on one node: {out}");
        assert_eq!(r[2..], ["0", "0", "4", "True"], "{out}");
    }
    assert!(out.contains("STEP0 0"), "{out}");

    // With --gpus-per-task=1 each task sees exactly one GPU, each a different one,
    // all of them the job's.
    let job_gpus: BTreeSet<String> = tagged(&out, "JOB_GPUS")
        .first()
        .and_then(|w| w.first())
        .expect("the job's GPUs")
        .split(',')
        .map(String::from)
        .collect();
    assert_eq!(job_gpus.len(), 4, "{out}");
    let gpus = tagged(&out, "GPU");
    assert_eq!(gpus.len(), 4, "{out}");
    let seen: BTreeSet<String> = gpus.iter().map(|g| g[1].clone()).collect();
    assert_eq!(seen, job_gpus, "one different GPU per task: {out}");
    for g in &gpus {
        assert!(!g[1].contains(','), "exactly one GPU: {out}");
        assert_eq!(g[2].split(',').count(), 4, "SLURM_STEP_GPUS: {out}");
    }

    // A failing task fails the step with its exit code (the highest: task 2's 4),
    // each line labelled with its task.
    assert!(out.contains("STEP2 4"), "{out}");
    for t in 0..3 {
        assert!(out.contains(&format!("{t}: hello from {t}")), "{out}");
    }
    assert!(
        out.contains("srun: error: head: task 2: Exited with exit code 4"),
        "{out}"
    );
    assert!(out.contains("HOSTS head"), "{out}");

    // The steps, through the API and sacct.
    let steps = job["steps"].as_array().expect("steps");
    assert_eq!(
        steps_of(&job),
        [
            (format!("{id}.0"), "COMPLETED".to_string(), 0, 4),
            (format!("{id}.1"), "COMPLETED".to_string(), 0, 4),
            (format!("{id}.2"), "FAILED".to_string(), 4, 3),
        ],
        "{job}"
    );
    assert_eq!(
        steps[1]["gpus"].as_str().map(|g| g.split(',').count()),
        Some(4)
    );

    let mut cmd = client(&c, &alice.token, &alice.home, &atrium_bin());
    cmd.args([
        "sacct",
        "-j",
        &id,
        "-P",
        "-o",
        "JobID,JobName,State,ExitCode",
    ]);
    let (ok, sacct, err) = run(cmd);
    assert!(ok, "{err}");
    let lines: Vec<&str> = sacct.lines().collect();
    assert!(
        lines.contains(&format!("{id}.0|python3|COMPLETED|0:0").as_str()),
        "{sacct}"
    );
    assert!(
        lines.contains(&format!("{id}.2|bash|FAILED|4:0").as_str()),
        "{sacct}"
    );
    let mut cmd = client(&c, &alice.token, &alice.home, &atrium_bin());
    cmd.args(["sacct", "-X", "-j", &id, "-P", "-n", "-o", "JobID"]);
    let (ok, sacct, err) = run(cmd);
    assert!(ok, "{err}");
    assert_eq!(sacct.trim(), id, "-X: allocations only");
}

/// The job waits for `$HOME/go` so that the test acts while it runs.
const WAITS: &str = r#"#!/bin/bash
echo "TOKEN $ATRIUM_JOB_TOKEN"
touch "$HOME/started-$SLURM_JOB_ID"
while [ ! -e "$HOME/go" ]; do sleep 0.1; done
"#;

async fn post_step(
    c: &JobCluster,
    job: &str,
    token: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(c.app.url(&format!("/api/v1/jobs/{job}/steps")))
        .json(&body);
    if let Some(token) = token {
        req = req.header("Atrium-Job-Token", token);
    }
    req.send().await.expect("post step")
}

#[tokio::test]
async fn srun_job_tokens_reach_only_their_own_running_job() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let a = c.sbatch(&alice, WAITS).await;
    let b = c.sbatch(&alice, WAITS).await;
    for id in [&a, &b] {
        let started = alice.home.join(format!("started-{id}"));
        atrium_tests::support::until(
            &format!("job {id} to start"),
            Duration::from_secs(60),
            || {
                let exists = started.exists();
                async move { exists.then_some(()) }
            },
        )
        .await
        .expect("the jobs run");
    }
    let token = tagged(&c.output(&alice, &a), "TOKEN")
        .first()
        .and_then(|w| w.first().cloned())
        .expect("job a's token");
    let step = json!({"name": "x", "ntasks": 1});

    // Another job's token, none, or a user's: refused, naming the header.
    for (job, t) in [
        (&b, Some(token.as_str())),
        (&a, None),
        (&a, Some(alice.token.as_str())),
    ] {
        let res = post_step(&c, job, t, step.clone()).await;
        assert_eq!(res.status(), 403, "job {job}");
        let body: Value = res.json().await.expect("json");
        assert!(
            body["message"]
                .as_str()
                .unwrap_or("")
                .contains("Atrium-Job-Token"),
            "{body}"
        );
    }
    // Nor can it requeue another job.
    let res = reqwest::Client::new()
        .post(c.app.url(&format!("/api/v1/jobs/{b}/self/requeue")))
        .header("Atrium-Job-Token", &token)
        .send()
        .await
        .expect("requeue");
    assert_eq!(res.status(), 403);
    assert_eq!(c.job(&alice, &b).await["state"], "RUNNING");
    // Out of bounds: a 400 naming the field.
    for (body, field) in [
        (json!({"name": "x", "ntasks": 0}), "ntasks"),
        (json!({"name": "x".repeat(300), "ntasks": 1}), "name"),
        (
            json!({"name": "x", "ntasks": 1, "gpus": "0;rm -rf /"}),
            "gpus",
        ),
    ] {
        let res = post_step(&c, &a, Some(&token), body).await;
        assert_eq!(res.status(), 400);
        let body: Value = res.json().await.expect("json");
        assert_eq!(body["field"], field, "{body}");
    }
    let res = reqwest::Client::new()
        .put(c.app.url(&format!("/api/v1/jobs/{a}/steps/0")))
        .header("Atrium-Job-Token", &token)
        .json(&json!({"state": "COMPLETED", "exit_code": 0}))
        .send()
        .await
        .expect("put");
    assert_eq!(res.status(), 404, "no such step");
    // None of it was recorded.
    assert!(c.job(&alice, &a).await.get("steps").is_none());

    // Its own job, while it runs: recorded.
    let res = post_step(&c, &a, Some(&token), step.clone()).await;
    assert_eq!(res.status(), 201);
    let created: Value = res.json().await.expect("json");
    assert_eq!(created["id"], format!("{a}.0"));

    std::fs::write(alice.home.join("go"), "").expect("go");
    c.wait_for(&alice, &a, ENDED, Duration::from_secs(60)).await;
    c.wait_for(&alice, &b, ENDED, Duration::from_secs(60)).await;
    // Once the job is over, its token does nothing; the step that never said it
    // ended, ended with its job.
    let res = post_step(&c, &a, Some(&token), step).await;
    assert_eq!(res.status(), 409);
    let job = c.job(&alice, &a).await;
    assert_eq!(job["steps"][0]["state"], "CANCELLED", "{job}");
    assert_eq!(job["steps"].as_array().map(Vec::len), Some(1), "{job}");
}

const FORWARDS: &str = r#"#!/bin/bash
#SBATCH -n 2
srun bash -c 'trap "echo got-term-$SLURM_PROCID; exit 0" TERM; touch "$HOME/ready-$SLURM_PROCID"; while :; do sleep 0.1; done' &
pid=$!
while [ ! -e "$HOME/ready-0" ] || [ ! -e "$HOME/ready-1" ]; do sleep 0.1; done
kill -TERM $pid
wait $pid
echo "SRUN $?"
srun -n 2 --kill-on-bad-exit bash -c 'if [ $SLURM_PROCID = 1 ]; then exit 7; fi; exec sleep 600'
echo "KILLED $?"
srun no-such-command-anywhere
echo "MISSING $?"
"#;

#[tokio::test]
async fn srun_forwards_signals_to_its_tasks_and_kills_the_rest_on_a_bad_exit() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let id = c.sbatch(&alice, FORWARDS).await;
    let (job, out) = finished(&c, &alice, &id).await;
    assert_eq!(job["state"], "COMPLETED", "{job}\n{out}");
    assert!(
        out.contains("got-term-0") && out.contains("got-term-1"),
        "{out}"
    );
    assert!(out.contains("SRUN 0"), "{out}");
    // Task 1 exits 7: task 0 (sleeping for ten minutes) is killed, srun says 7.
    assert!(out.contains("KILLED 7"), "{out}");
    assert!(out.contains("MISSING 2"), "{out}");
    let states: Vec<&str> = job["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["state"].as_str())
        .collect();
    assert_eq!(states, ["CANCELLED", "FAILED"], "{job}");
    assert_eq!(job["steps"][1]["exit_code"], 7, "{job}");
}

#[tokio::test]
async fn srun_steps_are_numbered_and_recorded_on_postgres_too() {
    let db = atrium_tests::support::fresh_database()
        .await
        .expect("postgres database");
    let c = JobCluster::start_on(0, Some(db.url.clone())).await;
    let alice = c.user("alice").await;
    let script = "#!/bin/bash\n#SBATCH -n 2\nsrun true\nsrun -n 1 bash -c 'exit 5'\nexit 0\n";
    let id = c.sbatch(&alice, script).await;
    let (job, out) = finished(&c, &alice, &id).await;
    assert_eq!(job["state"], "COMPLETED", "{job}\n{out}");
    assert_eq!(
        steps_of(&job),
        [
            (format!("{id}.0"), "COMPLETED".to_string(), 0, 2),
            (format!("{id}.1"), "FAILED".to_string(), 5, 1),
        ],
        "{job}"
    );
}

const REQUEUES_ITSELF: &str = r#"#!/bin/bash
if [ ! -e "$HOME/requeued" ]; then
    touch "$HOME/requeued"
    scontrol requeue "$SLURM_JOB_ID" || echo "REQUEUE FAILED $?"
    sleep 60
fi
echo "FINISHED"
"#;

#[tokio::test]
async fn srun_scontrol_requeue_of_its_own_job_runs_it_again() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let id = c.sbatch(&alice, REQUEUES_ITSELF).await;
    let (job, out) = finished(&c, &alice, &id).await;
    assert_eq!(job["state"], "COMPLETED", "{job}\n{out}");
    assert!(alice.home.join("requeued").exists());
    assert!(!out.contains("REQUEUE FAILED"), "{out}");
    assert!(out.contains("FINISHED"), "{out}");
}

/// Prints its token at each run (`--open-mode=append` keeps both runs' lines).
const TOKEN_EACH_RUN: &str = r#"#!/bin/bash
#SBATCH --open-mode=append --requeue
echo "TOKEN $ATRIUM_JOB_TOKEN"
while [ ! -e "$HOME/go" ]; do sleep 0.1; done
"#;

#[tokio::test]
async fn a_job_token_is_its_runs_and_does_nothing_for_a_later_run_of_the_same_id() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let id = c.sbatch(&alice, TOKEN_EACH_RUN).await;
    let tokens = |n: usize| {
        let out = c.output(&alice, &id);
        let found: Vec<String> = tagged(&out, "TOKEN")
            .into_iter()
            .filter_map(|w| w.first().cloned())
            .collect();
        async move { (found.len() >= n).then_some(found) }
    };
    let first =
        atrium_tests::support::until("the first run's token", Duration::from_secs(60), || {
            tokens(1)
        })
        .await
        .expect("the job runs");
    // The id runs again: a requeue, as an id comes back after an older backup is
    // restored. What is left of the first run holds a token for that id.
    c.act(&alice, &id, "requeue").await;
    let both =
        atrium_tests::support::until("the second run's token", Duration::from_secs(60), || {
            tokens(2)
        })
        .await
        .expect("the job runs again");
    c.wait_for(&alice, &id, &["RUNNING"], Duration::from_secs(60))
        .await;
    assert_ne!(both[0], both[1], "the two runs got the same token");
    let step = json!({"name": "x", "ntasks": 1});
    let res = post_step(&c, &id, Some(&first[0]), step.clone()).await;
    assert_eq!(
        res.status(),
        403,
        "the first run's token acted on the second run"
    );
    let res = post_step(&c, &id, Some(&both[1]), step).await;
    assert_eq!(res.status(), 201, "the current run's token");
    std::fs::write(alice.home.join("go"), "").expect("go");
    c.wait_for(&alice, &id, ENDED, Duration::from_secs(60))
        .await;
}
