//! `sprio`, `sshare` and `sstat` against a real portal (`GET /api/v1/priority`,
//! `GET /api/v1/shares`, a running job's samples): the factors of pending jobs,
//! the fair-share tree after a job ran, a running job's batch step; each user sees
//! only their own, an administrator everyone's.

use std::time::Duration;

use serde_json::Value;

use crate::fixtures::cli::{client, run};
use crate::fixtures::{atrium_bin, JobCluster, JobUser};

/// Run `words` (the first one the command) as `token`'s owner; (ok, stdout, stderr).
fn cli(c: &JobCluster, user: &JobUser, token: &str, words: &[&str]) -> (bool, String, String) {
    let mut cmd = client(c, token, &user.home, &atrium_bin());
    cmd.args(words);
    run(cmd)
}

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

#[tokio::test]
async fn sprio_shows_the_factors_of_pending_jobs_to_their_owner() {
    let c = JobCluster::start(1).await;
    let ann = c.user("ann").await;
    let ben = c.user("ben").await;
    let running = c
        .sbatch(&ann, "#!/bin/bash\n#SBATCH --gres=gpu:1\nsleep 60\n")
        .await;
    c.wait_for(&ann, &running, &["RUNNING"], Duration::from_secs(30))
        .await;
    // Two jobs wait for the GPU, one of them nicer; a held one has no priority.
    let waiting = c
        .sbatch(&ann, "#!/bin/bash\n#SBATCH --gres=gpu:1\ntrue\n")
        .await;
    let nice = c
        .sbatch(&ann, "#!/bin/bash\n#SBATCH --gres=gpu:1 --nice=50\ntrue\n")
        .await;
    let held = c
        .sbatch(&ann, "#!/bin/bash\n#SBATCH --gres=gpu:1\ntrue\n")
        .await;
    c.act(&ann, &held, "hold").await;

    // The API: the factors add up to the priority.
    let (status, answer) = c.app.api(&ann.token).get("/api/v1/priority").await;
    assert_eq!(status, 200, "{answer}");
    let w = &answer["weights"];
    assert_eq!(
        (
            w["age"].as_u64(),
            w["fairshare"].as_u64(),
            w["assoc"].as_u64()
        ),
        (Some(1000), Some(10_000), Some(0)),
        "{answer}"
    );
    let jobs = answer["jobs"].as_array().expect("jobs");
    let ids: Vec<&str> = jobs
        .iter()
        .map(|j| j["id"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(ids, [waiting.as_str(), nice.as_str()], "{answer}");
    for j in jobs {
        let f = &j["weighted"];
        let sum: f64 = ["age", "fairshare", "job_size", "partition", "qos"]
            .iter()
            .map(|k| f[k].as_f64().expect("factor"))
            .sum();
        let nice = j["nice"].as_i64().expect("nice");
        assert_eq!(
            j["priority"].as_i64(),
            Some(sum.round() as i64 - nice),
            "{j}"
        );
        assert_eq!(j["user"], "ann");
        assert_eq!(j["partition"], "gpu");
        let n = j["normalized"]["job_size"].as_f64().expect("normalized");
        assert_eq!(n, 1.0, "one GPU of one: {j}");
    }
    assert_eq!(jobs[1]["nice"], 50, "{answer}");

    // sprio, through a symlink named sprio: a column per non-zero weight.
    let links = tempfile::tempdir().expect("tempdir");
    let sprio = links.path().join("sprio");
    std::os::unix::fs::symlink(atrium_bin(), &sprio).expect("symlink");
    let mut cmd = client(&c, &ann.token, &ann.home, &sprio);
    cmd.arg("-S").arg("-y");
    let (ok, out, err) = run(cmd);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        words(lines[0]),
        [
            "JOBID",
            "PARTITION",
            "PRIORITY",
            "SITE",
            "AGE",
            "FAIRSHARE",
            "JOBSIZE",
            "PARTITION",
            "QOS"
        ],
        "{out}"
    );
    assert_eq!(lines.len(), 3, "{out}");
    // The nicer job is lower: sorted last by -S -y.
    assert_eq!(words(lines[2])[0], nice, "{out}");
    assert_eq!(
        words(lines[1])[..4],
        [
            waiting.as_str(),
            "gpu",
            &jobs[0]["priority"].to_string(),
            "0"
        ],
        "{out}"
    );
    let (ok, out, err) = cli(&c, &ann, &ann.token, &["sprio", "-w"]);
    assert!(ok, "{err}");
    assert_eq!(
        words(out.lines().nth(1).expect("weights")),
        ["Weights", "1", "1000", "10000", "1000", "10000", "10000"],
        "{out}"
    );
    let (ok, out, _) = cli(
        &c,
        &ann,
        &ann.token,
        &["sprio", "-h", "-o", "%i|%N|%.3r", "-j", &nice],
    );
    assert!(ok);
    assert_eq!(out, format!("{nice}|50|gpu\n"));
    // The running job has no factors: sprio says so on its standard output.
    let (ok, out, _) = cli(&c, &ann, &ann.token, &["sprio", "-j", &running]);
    assert!(ok);
    assert_eq!(out, "Unable to find jobs matching user/id(s) specified\n");
    let (ok, out, err) = cli(&c, &ann, &ann.token, &["sprio", "--bogus"]);
    assert!(!ok && out.is_empty());
    assert_eq!(
        err,
        "sprio: unrecognized option '--bogus'\nTry \"sprio --help\" for more information\n"
    );

    // Another user sees none of ann's jobs; an administrator sees them, with -u a
    // USER column.
    let (ok, out, err) = cli(&c, &ben, &ben.token, &["sprio"]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 1, "the header alone: {out}");
    let (ok, out, _) = cli(&c, &ben, &ben.token, &["sprio", "-h", "-u", "ann"]);
    assert!(ok);
    assert_eq!(out, "");
    let (status, answer) = c.app.api(&ben.token).get("/api/v1/priority?user=ann").await;
    assert_eq!(
        (status.as_u16(), &answer["jobs"]),
        (200, &serde_json::json!([]))
    );
    let admin = c.app.admin_token(&["read", "admin"]).await;
    let (ok, out, err) = cli(&c, &ann, &admin, &["sprio", "-u", "ann"]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(words(lines[0])[2], "USER", "{out}");
    assert_eq!(
        words(lines[1])[..3],
        [waiting.as_str(), "gpu", "ann"],
        "{out}"
    );

    // Query mistakes: 400, naming the field.
    let (status, body) = c.app.api(&ann.token).get("/api/v1/priority?ids=x").await;
    assert_eq!(
        (status.as_u16(), body["field"].as_str()),
        (400, Some("ids")),
        "{body}"
    );
    let (status, body) = c
        .app
        .api(&ann.token)
        .get("/api/v1/priority?colour=red")
        .await;
    assert_eq!(
        (status.as_u16(), body["field"].as_str()),
        (400, Some("colour")),
        "{body}"
    );
    let long = vec!["u"; 1001].join(",");
    let (status, body) = c
        .app
        .api(&ann.token)
        .get(&format!("/api/v1/priority?user={long}"))
        .await;
    assert_eq!(
        (status.as_u16(), body["field"].as_str()),
        (400, Some("user")),
        "{body}"
    );
}

#[tokio::test]
async fn sshare_shows_an_accounts_usage_after_a_job_ran() {
    let c = JobCluster::start(1).await;
    let ann = c.user("ann").await;
    let ben = c.user("ben").await;
    let id = c
        .sbatch(&ann, "#!/bin/bash\n#SBATCH --gres=gpu:1\nsleep 3\n")
        .await;
    let job = c.wait_ended(&ann, &id, Duration::from_secs(60)).await;
    assert_eq!(job["state"], "COMPLETED", "{job}");
    let account = job["account"].as_str().expect("account").to_string();

    // The API: the root, ann's account, ann (whose shares are the account's).
    let (status, answer) = c.app.api(&ann.token).get("/api/v1/shares").await;
    assert_eq!(status, 200, "{answer}");
    let lines = answer["lines"].as_array().expect("lines");
    assert_eq!(lines.len(), 3, "{answer}");
    assert_eq!(lines[0]["account"], "root");
    assert_eq!(
        (&lines[1]["account"], &lines[1]["user"]),
        (&Value::from(account.as_str()), &Value::Null)
    );
    assert_eq!(lines[2]["user"], "ann");
    assert_eq!(lines[2]["shares_from_parent"], true);
    let usage = lines[2]["raw_usage"].as_f64().expect("usage");
    assert!(
        (1.0..60.0).contains(&usage),
        "a GPU for about 3 s: {answer}"
    );
    let factor = lines[2]["fairshare"].as_f64().expect("factor");
    assert!(factor > 0.0 && factor < 1.0, "{answer}");

    // sshare in Slurm's layout: the tree indented, FairShare on the user's line.
    let (ok, out, err) = cli(&c, &ann, &ann.token, &["sshare"]);
    assert!(ok, "{err}");
    let rows: Vec<&str> = out.lines().collect();
    assert_eq!(
        words(rows[0]),
        [
            "Account",
            "User",
            "RawShares",
            "NormShares",
            "RawUsage",
            "EffectvUsage",
            "FairShare"
        ],
        "{out}"
    );
    assert!(rows[2].starts_with("root "), "{out}");
    assert!(rows[3].starts_with(&format!(" {account} ")), "{out}");
    assert!(rows[4].starts_with(&format!("  {account} ")), "{out}");
    assert_eq!(words(rows[4])[1..3], ["ann", "parent"], "{out}");
    assert_eq!(
        words(rows[3]).len(),
        5,
        "no FairShare on the account's line: {out}"
    );
    let (ok, out, err) = cli(
        &c,
        &ann,
        &ann.token,
        &["sshare", "-U", "-P", "-o", "acc,user,rawu,fairs"],
    );
    assert!(ok, "{err}");
    assert_eq!(
        out,
        format!(
            "Account|User|RawUsage|FairShare\n{account}|ann|{}|{factor:.6}\n",
            usage as u64
        )
    );
    let (ok, out, err) = cli(&c, &ann, &ann.token, &["sshare", "-o", "bogus"]);
    assert!(!ok && out.is_empty());
    assert_eq!(err, "sshare: error: Invalid field requested: \"bogus\"\n");

    // Ben sees neither ann's line nor her account, even asking for everyone; an
    // administrator sees both.
    let (ok, out, err) = cli(&c, &ben, &ben.token, &["sshare", "-a", "-n", "-P"]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 1, "the root alone: {out}");
    assert!(!out.contains("ann"), "{out}");
    let admin = c.app.admin_token(&["read", "admin"]).await;
    let (ok, out, err) = cli(
        &c,
        &ann,
        &admin,
        &["sshare", "-a", "-n", "-P", "-o", "a,u,raws"],
    );
    assert!(ok, "{err}");
    assert_eq!(
        out,
        format!("root||\n {account}||1\n  {account}|ann|parent\n")
    );

    let (status, body) = c
        .app
        .api(&ann.token)
        .get("/api/v1/shares?all_users=maybe")
        .await;
    assert_eq!(
        (status.as_u16(), body["field"].as_str()),
        (400, Some("all_users")),
        "{body}"
    );
}

/// Holds 100 MiB (touched, so resident) and sleeps.
const HOLD: &str = "#!/bin/bash
python3 -c \"import time; held = b'x' * (100 << 20); time.sleep(120)\"
";

/// `1692K`, `100M`, `1.50G` in bytes.
fn bytes(text: &str) -> u64 {
    let Some(unit_at) = text.len().checked_sub(1) else {
        return 0;
    };
    let (number, unit) = text.split_at(unit_at);
    let scale = match unit {
        "K" => 1u64 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return text.parse().unwrap_or(0),
    };
    (number.parse::<f64>().unwrap_or(0.0) * scale as f64) as u64
}

#[tokio::test]
async fn sstat_shows_a_running_jobs_batch_step_and_says_when_there_is_none() {
    let c = JobCluster::start_with_jobs(0, "usage_interval_seconds = 1").await;
    let ann = c.user("ann").await;
    let ben = c.user("ben").await;
    let id = c.sbatch(&ann, HOLD).await;
    c.wait_for(&ann, &id, &["RUNNING"], Duration::from_secs(30))
        .await;
    let step = format!("{id}.batch");
    let line = atrium_tests::support::until(
        "sstat to show the memory held",
        Duration::from_secs(60),
        || {
            let (ok, out, err) = cli(
                &c,
                &ann,
                &ann.token,
                &[
                    "sstat",
                    "-j",
                    &step,
                    "-P",
                    "-n",
                    "-o",
                    "jobid,ntasks,maxrss,averss,nodelist,avecpu",
                ],
            );
            assert!(ok, "{err}");
            async move {
                let fields: Vec<String> = out.trim_end().split('|').map(String::from).collect();
                (fields.len() == 6 && bytes(&fields[2]) >= 100 << 20).then_some(fields)
            }
        },
    )
    .await
    .expect("the step's figures");
    assert_eq!(line[0], step);
    assert_eq!(line[1], "1");
    assert!(bytes(&line[3]) >= 90 << 20, "{line:?}");
    assert_eq!(line[4], "head");
    assert!(line[5].starts_with("00:"), "{line:?}");

    // The default field list, in fixed width: Slurm's header and the line.
    let (ok, out, err) = cli(&c, &ann, &ann.token, &["sstat", &step]);
    assert!(ok, "{err}");
    let rows: Vec<&str> = out.lines().collect();
    assert_eq!(rows.len(), 3, "{out}");
    assert!(rows[0].starts_with("JobID         MaxVMSize  MaxVMSizeNode  MaxVMSizeTask  AveVMSize     MaxRSS MaxRSSNode MaxRSSTask     AveRSS "), "{out}");
    assert!(rows[2].starts_with(&format!("{step:<12} ")), "{out}");
    assert!(
        rows[2].contains(" Unknown       Unknown       Unknown "),
        "{out}"
    );

    // Without a step: the lowest step of srun, and there is none; -a: every step.
    let (ok, out, err) = cli(&c, &ann, &ann.token, &["sstat", &id]);
    assert!(ok && err.is_empty(), "{err}");
    assert_eq!(out.lines().count(), 2, "the header alone: {out}");
    let (ok, out, _) = cli(
        &c,
        &ann,
        &ann.token,
        &["sstat", "-a", "-j", &id, "-n", "-P", "-o", "jobid"],
    );
    assert!(ok);
    assert_eq!(out, format!("{step}\n"));
    let (ok, out, _) = cli(
        &c,
        &ann,
        &ann.token,
        &["sstat", "-i", "-j", &step, "-n", "-p"],
    );
    assert!(ok);
    assert_eq!(out, format!("{step}|head||\n"));

    // A job that is not running, a step that is not, one that does not exist, one
    // of another user: Slurm's errors, exit status 0.
    let pending = c.sbatch(&ann, "#!/bin/bash\n#SBATCH --hold\ntrue\n").await;
    let (ok, out, err) = cli(&c, &ann, &ann.token, &["sstat", "-n", "-j", &pending]);
    assert!(ok && out.is_empty());
    assert_eq!(
        err,
        format!("sstat: error: No steps running for job {pending}\n")
    );
    let (ok, _, err) = cli(
        &c,
        &ann,
        &ann.token,
        &["sstat", "-n", "-j", &format!("{id}.0")],
    );
    assert!(ok);
    assert_eq!(
        err,
        format!("sstat: error: StepId={id}.0 not found running.\n")
    );
    let (ok, _, err) = cli(&c, &ann, &ann.token, &["sstat", "-n", "-j", "999999"]);
    assert!(ok);
    assert_eq!(err, "sstat: error: couldn't get steps for job 999999\n");
    let (ok, out, err) = cli(&c, &ben, &ben.token, &["sstat", "-n", "-j", &step]);
    assert!(ok && out.is_empty());
    assert_eq!(
        err,
        format!("sstat: error: couldn't get steps for job {id}\n")
    );

    // Usage errors: exit status 1.
    let (ok, _, err) = cli(&c, &ann, &ann.token, &["sstat"]);
    assert!(!ok);
    assert_eq!(err, "sstat: error: You didn't give me any jobs to stat.\n");
    let (ok, _, err) = cli(&c, &ann, &ann.token, &["sstat", "-j", &id, "-o", "bogus"]);
    assert!(!ok);
    assert_eq!(err, "sstat: error: Invalid field requested: \"bogus\"\n");

    let (ok, _, err) = cli(&c, &ann, &ann.token, &["scancel", &id]);
    assert!(ok, "{err}");
    c.wait_ended(&ann, &id, Duration::from_secs(30)).await;
    let (ok, _, err) = cli(&c, &ann, &ann.token, &["sstat", "-n", "-j", &step]);
    assert!(ok);
    assert_eq!(
        err,
        format!("sstat: error: StepId={step} not found running.\n")
    );
}
