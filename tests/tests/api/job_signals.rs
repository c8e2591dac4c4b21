//! `--signal` and `--open-mode` under the internal scheduler, end to end: real steps
//! as their user, in bubblewrap when it is installed. Times are checked only against
//! generous bounds.

use std::time::Duration;

use crate::fixtures::{JobCluster, JobUser};

/// Seconds since the job started, as the job wrote them in `file` of the user's home.
fn seconds_in(user: &JobUser, file: &str) -> Option<u64> {
    std::fs::read_to_string(user.home.join(file))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[tokio::test]
async fn signal_b_reaches_the_batch_shells_trap_before_the_time_limit() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    // The trap writes how long the job had run and ends the job cleanly: a job that
    // ends COMPLETED (not TIMEOUT) was signalled before its 20 s limit.
    let script = "#!/bin/bash\n#SBATCH -J sig -t 0:20 --signal=B:USR1@5\n\
        start=$(date +%s)\n\
        trap 'echo $(( $(date +%s) - start )) > trapped; exit 0' USR1\n\
        sleep 120 & wait\n\
        echo never\n";
    let id = c.sbatch(&alice, script).await;
    let job = c.wait_ended(&alice, &id, Duration::from_secs(90)).await;
    assert_eq!(
        job["state"],
        "COMPLETED",
        "{job}\n{}",
        c.output(&alice, &id)
    );
    let after = seconds_in(&alice, "trapped").expect("the trap ran");
    // Due at 15 s; never in the first seconds, and before the limit.
    assert!((5..20).contains(&after), "trapped after {after} s");
    assert!(!c.output(&alice, &id).contains("never"));
}

#[tokio::test]
async fn signal_without_b_reaches_what_the_shell_started_and_not_the_shell() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    // A child traps USR1; the shell (which would die of an untrapped USR1) waits for
    // it and then says it is still alive.
    let script = "#!/bin/bash\n#SBATCH -J sig2 -t 0:20 --signal=USR1@5\n\
        start=$(date +%s)\n\
        bash -c 'trap \"exit 0\" USR1; sleep 120 & wait' &\n\
        wait\n\
        echo $(( $(date +%s) - start )) > child-done\n\
        echo shell-alive\n";
    let id = c.sbatch(&alice, script).await;
    let job = c.wait_ended(&alice, &id, Duration::from_secs(90)).await;
    let out = c.output(&alice, &id);
    assert_eq!(job["state"], "COMPLETED", "{job}\n{out}");
    assert!(out.contains("shell-alive"), "{out}");
    let after = seconds_in(&alice, "child-done").expect("the child ended");
    assert!((5..20).contains(&after), "the child ended after {after} s");
}

/// A script that says which run it is (a file in the home marks the first).
const TWO_RUNS: &str = "if [ -e \"ran-$SLURM_JOB_ID\" ]; then echo second-run; \
    else touch \"ran-$SLURM_JOB_ID\"; echo first-run; fi\nsleep 120\n";

#[tokio::test]
async fn open_mode_append_keeps_the_output_of_a_requeued_job_and_truncate_does_not() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let append = c
        .sbatch(
            &alice,
            &format!("#!/bin/bash\n#SBATCH -J app --open-mode=append\n{TWO_RUNS}"),
        )
        .await;
    let truncate = c
        .sbatch(
            &alice,
            &format!("#!/bin/bash\n#SBATCH -J trunc\n{TWO_RUNS}"),
        )
        .await;
    for id in [&append, &truncate] {
        c.wait_for(&alice, id, &["RUNNING"], Duration::from_secs(60))
            .await;
        wait_output(&c, &alice, id, "first-run").await;
        c.act(&alice, id, "requeue").await;
    }
    for id in [&append, &truncate] {
        wait_output(&c, &alice, id, "second-run").await;
    }
    let kept = c.output(&alice, &append);
    assert!(
        kept.contains("first-run\n") && kept.contains("second-run\n"),
        "{kept}"
    );
    let emptied = c.output(&alice, &truncate);
    assert!(!emptied.contains("first-run"), "{emptied}");
    for id in [&append, &truncate] {
        let res = reqwest::Client::new()
            .delete(c.app.url(&format!("/api/v1/jobs/{id}")))
            .bearer_auth(&alice.token)
            .send()
            .await
            .expect("cancel");
        assert!(res.status().is_success(), "cancel {id}: {}", res.status());
    }
}

async fn wait_output(c: &JobCluster, user: &JobUser, id: &str, text: &str) {
    let found = atrium_tests::support::until(
        &format!("job {id}'s output to say {text}"),
        Duration::from_secs(60),
        || async { c.output(user, id).contains(text).then_some(()) },
    )
    .await;
    if let Err(e) = found {
        panic!(
            "{e:#}; output: {}\nportal log:\n{}",
            c.output(user, id),
            c.app.log().join("\n")
        );
    }
}

#[tokio::test]
async fn a_checkpointing_job_requeues_itself_from_its_signal_trap_and_keeps_its_output() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    // The pattern of checkpointing scripts: save on USR1, requeue, resume.
    let script = "#!/bin/bash\n\
        #SBATCH -J ckpt -t 0:20 --signal=B:USR1@5 --open-mode=append --requeue\n\
        if [ -e \"$HOME/ckpt-$SLURM_JOB_ID\" ]; then echo resumed; exit 0; fi\n\
        trap 'echo checkpoint saved; touch \"$HOME/ckpt-$SLURM_JOB_ID\"; scontrol requeue \"$SLURM_JOB_ID\"; exit 0' USR1\n\
        echo training\n\
        sleep 120 & wait\n";
    let id = c.sbatch(&alice, script).await;
    crate::fixtures::eventually(
        "the job to run a second time",
        Duration::from_secs(90),
        || async { c.output(&alice, &id).contains("resumed") },
    )
    .await;
    let job = c.wait_ended(&alice, &id, Duration::from_secs(60)).await;
    assert_eq!(job["state"], "COMPLETED", "{job}");
    let out = c.output(&alice, &id);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, ["training", "checkpoint saved", "resumed"], "{out}");
}
