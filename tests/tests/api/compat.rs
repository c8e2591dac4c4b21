//! Scripts written for Slurm run unchanged: options real scripts use are accepted,
//! those that mean nothing here are recorded as ignored, dry runs answer without
//! storing, and a refusal names its line and option once.

use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::cli::{client, run};
use crate::fixtures::{atrium_bin, JobCluster};

/// A script in the style of public training repositories, with the options the
/// issue found refused.
const TRAINING_SCRIPT: &str = "#!/bin/bash
#SBATCH --job-name=resnet
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=alice@example.org
#SBATCH --signal=B:USR1@120
#SBATCH --open-mode=append
#SBATCH --mem=2000MB
#SBATCH --out=train-%J.out --err=train-%J.err
#SBATCH --cores-per-socket=4 --threads-per-core=1
#SBATCH --no-reque
#SBATCH --gres=gpu:1 --ntasks-per-gpu=1 -t 5
echo started
";

#[tokio::test]
async fn scripts_written_for_slurm_run_and_ignored_options_are_shown() {
    let c = JobCluster::start(1).await;
    let alice = c.user("alice").await;
    let id = c.sbatch(&alice, TRAINING_SCRIPT).await;
    let job = c
        .wait_for(&alice, &id, &["COMPLETED"], Duration::from_secs(60))
        .await;
    let ignored: Vec<&str> = job["ignored"]
        .as_array()
        .expect("ignored options")
        .iter()
        .filter_map(|i| i["option"].as_str())
        .collect();
    assert_eq!(
        ignored,
        ["--cores-per-socket=4", "--threads-per-core=1"],
        "{job}"
    );
    assert_eq!(job["name"], "resnet");
    let out =
        std::fs::read_to_string(alice.home.join(format!("train-{id}.out"))).unwrap_or_default();
    assert!(out.contains("started"), "{out:?}");

    // The job page says what was ignored, and why.
    let browser = c.app.login("alice", "password-of-some-length").await;
    let page = browser
        .get(c.app.url(&format!("/jobs/{id}")))
        .send()
        .await
        .expect("page");
    let html = page.text().await.expect("html");
    assert!(html.contains("<code>--threads-per-core=1</code>"), "{html}");
}

#[tokio::test]
async fn a_dry_run_answers_what_would_happen_and_stores_nothing() {
    let c = JobCluster::start(2).await;
    let alice = c.user("alice").await;
    let busy = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH --gres=gpu:2 -t 30\nsleep 60\n",
        )
        .await;
    c.wait_for(&alice, &busy, &["RUNNING"], Duration::from_secs(30))
        .await;
    let before = c.job_count(&alice).await;

    let dry = |script: &str| {
        reqwest::Client::new()
            .post(c.app.url("/api/v1/jobs?dry_run=true"))
            .bearer_auth(&alice.token)
            .json(&json!({"script": script, "working_directory": alice.home}))
            .send()
    };
    // CPUs are free: it would start now, on the node.
    let res = dry("#!/bin/bash\n#SBATCH -n 1 -t 5 --threads-per-core=1\ntrue\n")
        .await
        .expect("dry");
    assert_eq!(res.status(), 200);
    let now: Value = res.json().await.expect("json");
    assert_eq!(now["dry_run"], true);
    assert_eq!(now["nodes"], json!(["head"]), "{now}");
    assert_eq!(now["judged_by"], "atrium");
    assert_eq!(now["ignored"][0]["option"], "--threads-per-core=1", "{now}");
    assert_eq!(now["request"]["time_limit"], "00:05:00", "{now}");
    // Both GPUs are busy for 30 minutes: a start in the future.
    let later: Value = dry("#!/bin/bash\n#SBATCH --gres=gpu:1 -t 5\ntrue\n")
        .await
        .expect("dry")
        .json()
        .await
        .expect("json");
    let start = later["expected_start"].as_str().expect("a planned start");
    assert!(
        start > now["expected_start"].as_str().expect("now"),
        "{later}"
    );
    // Refused as a submission would be.
    let res = dry("#!/bin/bash\n#SBATCH -p nowhere\ntrue\n")
        .await
        .expect("dry");
    assert_eq!(res.status(), 400);
    assert_eq!(c.job_count(&alice).await, before, "a dry run stored a job");

    // `sbatch --test-only` says the same in Slurm's words.
    std::fs::write(
        alice.home.join("t.sh"),
        "#!/bin/bash\n#SBATCH -n 1 -t 5\ntrue\n",
    )
    .expect("script");
    let mut cmd = client(&c, &alice.token, &alice.home, &atrium_bin());
    cmd.args(["sbatch", "--test-only", "t.sh"]);
    let (ok, out, err) = run(cmd);
    assert!(ok, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.starts_with("sbatch: Job would start at "), "{err}");
    assert!(err.contains(" on nodes head in partition gpu"), "{err}");
    assert_eq!(c.job_count(&alice).await, before);
}

#[tokio::test]
async fn a_bad_directive_is_refused_naming_its_line_and_option_once() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let res = c
        .submit(
            &alice,
            json!({"script": "#!/bin/bash\n#SBATCH -J x\n#SBATCH --mem=lots\ntrue\n"}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["field"], "mem", "{body}");
    let message = body["message"].as_str().expect("message");
    assert_eq!(message.matches("line 3").count(), 1, "{message}");
    assert!(message.contains("--mem"), "{message}");

    // The command line: the same, once, in sbatch's words.
    std::fs::write(
        alice.home.join("bad.sh"),
        "#!/bin/bash\n#SBATCH -J x\n#SBATCH --mem=lots\ntrue\n",
    )
    .expect("script");
    let mut cmd = client(&c, &alice.token, &alice.home, &atrium_bin());
    cmd.args(["sbatch", "bad.sh"]);
    let (ok, _, err) = run(cmd);
    assert!(!ok);
    assert_eq!(err.matches("line 3").count(), 1, "{err}");
    assert!(err.starts_with("sbatch: error: mem: "), "{err}");

    // Unknown options and getopt's own refusals, before anything is sent.
    let mut cmd = client(&c, &alice.token, &alice.home, &atrium_bin());
    cmd.args(["sbatch", "--frobnicate", "bad.sh"]);
    let (ok, _, err) = run(cmd);
    assert!(!ok);
    assert_eq!(
        err.trim(),
        "sbatch: error: unrecognized option '--frobnicate'"
    );
}

#[tokio::test]
async fn sbatch_wait_exits_with_the_jobs_exit_code_and_reads_input_variables() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    std::fs::write(alice.home.join("fail.sh"), "#!/bin/bash\nexit 3\n").expect("script");
    let mut cmd = client(&c, &alice.token, &alice.home, &atrium_bin());
    cmd.args(["sbatch", "-W", "fail.sh"])
        .env("SBATCH_JOB_NAME", "from-env");
    let out = cmd.output().expect("sbatch --wait");
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let id = stdout
        .trim()
        .strip_prefix("Submitted batch job ")
        .expect("announced");
    let job = c.job(&alice, id).await;
    assert_eq!(job["name"], "from-env");
    assert_eq!(job["state"], "FAILED");
}

#[tokio::test]
async fn get_user_env_starts_the_job_from_the_login_environment() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let profile = alice.home.join(".bash_profile");
    std::fs::write(&profile, "export FROM_LOGIN=yes\nexport BOTH=login\n").expect("profile");
    std::os::unix::fs::chown(&profile, Some(alice.uid), Some(alice.uid)).expect("chown");
    let script = "#!/bin/bash\n#SBATCH --get-user-env\necho \"login=$FROM_LOGIN both=$BOTH\"\n";
    let res = c
        .submit(
            &alice,
            json!({"script": script, "working_directory": alice.home,
                   "environment": {"BOTH": "submitted"}}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let id = res.json::<Value>().await.expect("json")["id"]
        .as_str()
        .expect("id")
        .to_string();
    c.wait_for(&alice, &id, &["COMPLETED"], Duration::from_secs(60))
        .await;
    assert_eq!(c.output(&alice, &id).trim(), "login=yes both=submitted");

    // Without it the login shell is not read.
    let plain = c
        .sbatch(&alice, "#!/bin/bash\necho \"login=$FROM_LOGIN\"\n")
        .await;
    c.wait_for(&alice, &plain, &["COMPLETED"], Duration::from_secs(60))
        .await;
    assert_eq!(c.output(&alice, &plain).trim(), "login=");
}

#[tokio::test]
async fn the_script_gets_the_arguments_given_after_it() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    std::fs::write(
        alice.home.join("args.sh"),
        "#!/bin/bash\necho \"$# [$1] [$2]\"\n",
    )
    .expect("script");
    let mut cmd = client(&c, &alice.token, &alice.home, &atrium_bin());
    cmd.args([
        "sbatch",
        "--parsable",
        "args.sh",
        "config.yaml",
        "two words",
    ]);
    let (ok, id, err) = run(cmd);
    assert!(ok, "{err}");
    let id = id.trim().to_string();
    c.wait_for(&alice, &id, &["COMPLETED"], Duration::from_secs(60))
        .await;
    assert_eq!(c.output(&alice, &id).trim(), "2 [config.yaml] [two words]");
    let res = c
        .submit(
            &alice,
            json!({"script": "#!/bin/sh\ntrue\n", "arguments": ["a\u{0}b"]}),
        )
        .await;
    assert_eq!(res.status(), 400);
    assert_eq!(
        res.json::<Value>().await.expect("json")["field"],
        "arguments"
    );
}

#[tokio::test]
async fn licenses_are_counted_site_resources_jobs_wait_for() {
    let c = JobCluster::start_with(0, "[cluster.licenses]\nscratch = 1\n").await;
    let alice = c.user("alice").await;
    let first = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH -L scratch\nsleep 60\n")
        .await;
    c.wait_for(&alice, &first, &["RUNNING"], Duration::from_secs(30))
        .await;
    let second = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --licenses=scratch:1\ntrue\n")
        .await;
    let waiting = c
        .wait_for(&alice, &second, &["PENDING"], Duration::from_secs(10))
        .await;
    crate::fixtures::eventually(
        "the second job waits for the license",
        Duration::from_secs(10),
        || async { c.job(&alice, &second).await["reason"] == "Licenses" },
    )
    .await;
    assert_eq!(waiting["state"], "PENDING");
    let res = c
        .submit(
            &alice,
            json!({"script": "#!/bin/sh\n#SBATCH -L matlab\ntrue\n"}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .contains("no such license \"matlab\""),
        "{body}"
    );
    let res = reqwest::Client::new()
        .delete(c.app.url(&format!("/api/v1/jobs/{first}")))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("cancel");
    assert!(res.status().is_success());
    c.wait_for(&alice, &second, &["COMPLETED"], Duration::from_secs(30))
        .await;
}

#[tokio::test]
async fn mem_0_gets_all_of_the_nodes_memory() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let id = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH --mem=0\necho \"mem=$SLURM_MEM_PER_NODE\"\n",
        )
        .await;
    let job = c
        .wait_for(&alice, &id, &["COMPLETED"], Duration::from_secs(60))
        .await;
    // The test node has 64000 MB (cluster_config).
    assert_eq!(c.output(&alice, &id).trim(), "mem=64000");
    assert_eq!(job["memory_mb"], 64000, "{job}");
}
