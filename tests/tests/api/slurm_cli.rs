//! The Slurm-style command line against a real portal: `sbatch`, `squeue`,
//! `scancel` and `sacct`, also through a symlink named like the Slurm command.

use std::time::Duration;

use crate::fixtures::cli::{client, run};
use crate::fixtures::{atrium_bin, JobCluster};

#[tokio::test]
async fn sbatch_squeue_scancel_and_sacct_talk_to_the_portal() {
    let c = JobCluster::start(1).await;
    let alice = c.user("alice").await;
    let script = alice.home.join("job.sh");
    std::fs::write(&script, "#!/bin/bash\n#SBATCH -J cli\nsleep 30\n").expect("script");
    let bin = atrium_bin();

    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["sbatch", "--parsable", "job.sh"]);
    let (ok, id, err) = run(cmd);
    assert!(ok, "{err}");
    let id = id.trim().to_string();
    assert!(
        id.chars().all(|ch| ch.is_ascii_digit()) && !id.is_empty(),
        "{id}"
    );

    // Through a symlink named sbatch: Slurm's message.
    let links = tempfile::tempdir().expect("tempdir");
    let sbatch = links.path().join("sbatch");
    std::os::unix::fs::symlink(&bin, &sbatch).expect("symlink");
    let mut cmd = client(&c, &alice.token, &alice.home, &sbatch);
    cmd.args(["--hold", "job.sh"]);
    let (ok, out, err) = run(cmd);
    assert!(ok, "{err}");
    assert!(out.starts_with("Submitted batch job "), "{out}");

    c.wait_for(&alice, &id, &["RUNNING"], Duration::from_secs(30))
        .await;
    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["squeue", "--me"]);
    let (ok, out, err) = run(cmd);
    assert!(ok, "{err}");
    let mut lines = out.lines();
    assert_eq!(
        lines
            .next()
            .expect("header")
            .split_whitespace()
            .collect::<Vec<_>>(),
        [
            "JOBID",
            "PARTITION",
            "NAME",
            "USER",
            "ST",
            "TIME",
            "NODES",
            "NODELIST(REASON)"
        ]
    );
    assert!(
        out.lines()
            .any(|l| l.split_whitespace().next() == Some(id.as_str())
                && l.contains("cli")
                && l.contains(" R ")),
        "{out}"
    );
    assert!(out.contains("(JobHeldUser)"), "{out}");

    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["scancel", &id]);
    let (ok, _, err) = run(cmd);
    assert!(ok, "{err}");
    c.wait_for(&alice, &id, &["CANCELLED"], Duration::from_secs(30))
        .await;

    // As Slurm's: a job that is not there is no error for a plain cancel, and is
    // for a signal.
    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["scancel", "999999"]);
    let (ok, _, err) = run(cmd);
    assert!(ok, "{err}");
    assert_eq!(err, "");
    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["scancel", "--signal=USR1", "999999"]);
    let (ok, _, err) = run(cmd);
    assert!(!ok);
    assert!(
        err.contains("scancel: error: Kill job error on job id 999999: Invalid job id specified"),
        "{err}"
    );

    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["sacct", "-j", &id]);
    let (ok, out, err) = run(cmd);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l.starts_with(&id) && l.contains("CANCELLED")),
        "{out}"
    );

    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["sinfo"]);
    let (ok, out, err) = run(cmd);
    assert!(ok, "{err}");
    assert!(out.contains("gpu*"), "{out}");
}

#[tokio::test]
async fn scancel_of_pending_jobs_leaves_an_arrays_running_tasks_alone() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let bin = atrium_bin();
    let array = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --array=0-5%2\nsleep 120\n")
        .await;
    let other = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --array=0-3%1\nsleep 120\n")
        .await;
    for t in [
        format!("{array}_0"),
        format!("{array}_1"),
        format!("{other}_0"),
    ] {
        c.wait_for(&alice, &t, &["RUNNING"], Duration::from_secs(30))
            .await;
    }
    // By state for one array named (the other keeps its waiting tasks), then by
    // state for all of hers.
    for args in [
        vec!["scancel", "-t", "PD", other.as_str()],
        vec!["scancel", "--state=PENDING", "--me"],
    ] {
        let mut cmd = client(&c, &alice.token, &alice.home, &bin);
        cmd.args(&args);
        let (ok, _, err) = run(cmd);
        assert!(ok, "{args:?}: {err}");
        if args.contains(&"-t") {
            let waiting = c.job(&alice, &array).await;
            assert_eq!(
                waiting["state"], "PENDING",
                "the other array waits on: {waiting}"
            );
        }
    }
    for t in [
        format!("{array}_0"),
        format!("{array}_1"),
        format!("{other}_0"),
    ] {
        assert_eq!(c.job(&alice, &t).await["state"], "RUNNING", "{t}");
    }
    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["squeue", "-h", "-t", "PD", "-o", "%i"]);
    let (ok, out, err) = run(cmd);
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "", "nothing waits: {out}");
    // One waiting task by its id: taken out of its array, which goes on without it.
    let third = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --array=0-5%1\nsleep 120\n")
        .await;
    c.wait_for(
        &alice,
        &format!("{third}_0"),
        &["RUNNING"],
        Duration::from_secs(30),
    )
    .await;
    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["scancel", &format!("{third}_4")]);
    let (ok, _, err) = run(cmd);
    assert!(ok, "{err}");
    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["squeue", "-h", "-j", &third, "-t", "PD", "-o", "%i"]);
    let (_, out, _) = run(cmd);
    assert_eq!(out.trim(), format!("{third}_[1-3,5%1]"), "{out}");
    assert_eq!(
        c.job(&alice, &format!("{third}_4")).await["state"],
        "CANCELLED"
    );
    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args([
        "sacct",
        "-X",
        "-n",
        "-P",
        "-o",
        "JobID,State",
        "-j",
        &format!("{third}_4"),
    ]);
    let (_, out, _) = run(cmd);
    assert!(out.contains(&format!("{third}_4|CANCELLED")), "{out}");
    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["scancel", &third]);
    let (ok, _, err) = run(cmd);
    assert!(ok, "{err}");

    let mut cmd = client(&c, &alice.token, &alice.home, &bin);
    cmd.args(["scancel", &array, &other]);
    let (ok, _, err) = run(cmd);
    assert!(ok, "{err}");
    for t in [format!("{array}_0"), format!("{other}_0")] {
        c.wait_ended(&alice, &t, Duration::from_secs(30)).await;
    }
}
