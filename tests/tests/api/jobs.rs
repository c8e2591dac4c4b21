//! Batch jobs end to end: the real portal runs real steps as the submitting user
//! (the tests run as root), in bubblewrap when it is installed.

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::{eventually, JobCluster, JobUser};

const PRINT_ID: &str =
    "#!/bin/bash\n#SBATCH -J whoami\nid\nenv | sort\necho \"fds: $(ls /proc/self/fd | tr '\\n' ' ')\"\n";

#[tokio::test]
async fn a_job_runs_as_its_user_with_slurm_variables_and_owns_its_output() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let id = c.sbatch(&alice, PRINT_ID).await;
    let job = c
        .wait_for(
            &alice,
            &id,
            &["COMPLETED", "FAILED"],
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(job["state"], "COMPLETED", "{job}");
    assert_eq!(job["exit_code"], 0);
    let out_path = alice.home.join(format!("slurm-{id}.out"));
    let out = std::fs::read_to_string(&out_path).expect("output file");
    assert!(out.contains(&format!("uid={}", alice.uid)), "{out}");
    assert!(out.contains(&format!("gid={}", alice.uid)), "{out}");
    for expected in [
        format!("SLURM_JOB_ID={id}"),
        "SLURM_JOB_NAME=whoami".to_string(),
        "SLURM_JOB_USER=alice".to_string(),
        "SLURM_NTASKS=1".to_string(),
        "SLURM_JOB_NODELIST=head".to_string(),
        format!("SLURM_SUBMIT_DIR={}", alice.home.display()),
        format!("HOME={}", alice.home.display()),
    ] {
        assert!(out.contains(&expected), "missing {expected} in\n{out}");
    }
    assert!(out.contains("SLURM_CPUS_ON_NODE="), "{out}");
    // Standard input, output, error and `ls`'s own directory: nothing of the portal's
    // (its helper started it with descriptor 9 open).
    assert!(out.contains("fds: 0 1 2 3 \n"), "{out}");
    let meta = std::fs::metadata(&out_path).expect("stat");
    assert_eq!(meta.uid(), alice.uid, "the output belongs to the user");
    assert_eq!(job["stdout"], out_path.display().to_string());

    // The output through the API, plain and followed.
    let text = c
        .app
        .get_bearer(&format!("/api/v1/jobs/{id}/output"), &alice.token)
        .await
        .text()
        .await
        .expect("text");
    assert!(text.contains(&format!("uid={}", alice.uid)), "{text}");
    let events = c
        .app
        .get_bearer(
            &format!("/api/v1/jobs/{id}/output?follow=true"),
            &alice.token,
        )
        .await;
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    let body = events.text().await.expect("events");
    assert!(body.contains(&format!("data: uid={}", alice.uid)), "{body}");
    assert!(body.contains("event: end"), "{body}");
}

#[tokio::test]
async fn two_gpu_jobs_get_disjoint_gpus() {
    let c = JobCluster::start(4).await;
    let alice = c.user("alice").await;
    let script = "#!/bin/bash\n#SBATCH --gres=gpu:2\necho \"GPUS=$CUDA_VISIBLE_DEVICES JOBGPUS=$SLURM_JOB_GPUS\"\nsleep 2\n";
    let a = c.sbatch(&alice, script).await;
    let b = c.sbatch(&alice, script).await;
    // Both run at the same time: 4 GPUs hold both.
    eventually("both jobs running", Duration::from_secs(30), || async {
        let ja = c.job(&alice, &a).await;
        let jb = c.job(&alice, &b).await;
        ja["state"] == "RUNNING" && jb["state"] == "RUNNING"
    })
    .await;
    let mut sets = Vec::new();
    for id in [&a, &b] {
        let job = c
            .wait_for(
                &alice,
                id,
                &["COMPLETED", "FAILED"],
                Duration::from_secs(60),
            )
            .await;
        assert_eq!(job["state"], "COMPLETED", "{job}");
        let out = c.output(&alice, id);
        let line = out
            .lines()
            .find(|l| l.starts_with("GPUS="))
            .expect("gpu line")
            .to_string();
        let gpus: BTreeSet<String> = line
            .trim_start_matches("GPUS=")
            .split_whitespace()
            .next()
            .expect("devices")
            .split(',')
            .map(str::to_string)
            .collect();
        assert_eq!(gpus.len(), 2, "{line}");
        assert!(
            line.ends_with(&format!(
                "JOBGPUS={}",
                gpus.iter().cloned().collect::<Vec<_>>().join(",")
            )) || line.contains("JOBGPUS="),
            "{line}"
        );
        assert_eq!(
            job["cuda_visible_devices"]
                .as_str()
                .map(|s| s.split(',').count()),
            Some(2),
            "{job}"
        );
        sets.push(gpus);
    }
    assert!(sets[0].is_disjoint(&sets[1]), "{sets:?}");
}

/// Start and end (ns) of every task of an array, from their outputs.
fn intervals(c: &JobCluster, user: &JobUser, id: &str, tasks: u32) -> Vec<(u128, u128)> {
    (0..tasks)
        .map(|t| {
            let out = std::fs::read_to_string(user.home.join(format!("slurm-{id}_{t}.out")))
                .unwrap_or_else(|e| panic!("output of task {t}: {e}\n{}", c.app.log().join("\n")));
            let nums: Vec<u128> = out.lines().filter_map(|l| l.trim().parse().ok()).collect();
            assert_eq!(nums.len(), 2, "task {t}: {out}");
            (nums[0], nums[1])
        })
        .collect()
}

#[tokio::test]
async fn an_array_with_a_limit_of_two_never_runs_more_than_two_tasks() {
    let c = JobCluster::start(4).await;
    let alice = c.user("alice").await;
    let id = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --array=0-5%2\n#SBATCH --gres=gpu:1\ndate +%s%N\nsleep 1\ndate +%s%N\n")
        .await;
    for t in 0..6 {
        c.wait_for(
            &alice,
            &format!("{id}_{t}"),
            &["COMPLETED"],
            Duration::from_secs(90),
        )
        .await;
    }
    let spans = intervals(&c, &alice, &id, 6);
    for &(start, _) in &spans {
        let running = spans
            .iter()
            .filter(|(s, e)| *s <= start && start < *e)
            .count();
        assert!(running <= 2, "{running} tasks ran at once: {spans:?}");
    }
}

#[tokio::test]
async fn afterok_runs_in_order_and_afternotok_of_a_success_is_cancelled() {
    let c = JobCluster::start(2).await;
    let alice = c.user("alice").await;
    let step = "#!/bin/bash\ndate +%s%N\nsleep 1\ndate +%s%N\n";
    let a = c.sbatch(&alice, step).await;
    let b = c
        .sbatch(
            &alice,
            &format!(
                "#!/bin/bash\n#SBATCH --dependency=afterok:{a}\ndate +%s%N\nsleep 1\ndate +%s%N\n"
            ),
        )
        .await;
    let cc = c
        .sbatch(
            &alice,
            &format!(
                "#!/bin/bash\n#SBATCH --dependency=afterok:{b}\ndate +%s%N\nsleep 1\ndate +%s%N\n"
            ),
        )
        .await;
    let never = c
        .sbatch(
            &alice,
            &format!("#!/bin/bash\n#SBATCH --dependency=afternotok:{a}\necho should not run\n"),
        )
        .await;
    let pending = c.job(&alice, &b).await;
    assert_eq!(pending["state"], "PENDING");
    assert_eq!(pending["reason"], "Dependency");
    for id in [&a, &b, &cc] {
        c.wait_for(&alice, id, &["COMPLETED"], Duration::from_secs(60))
            .await;
    }
    let span = |id: &str| {
        let nums: Vec<u128> = c
            .output(&alice, id)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        assert_eq!(nums.len(), 2, "{id}");
        (nums[0], nums[1])
    };
    let (sa, sb, sc) = (span(&a), span(&b), span(&cc));
    assert!(sb.0 >= sa.1, "b started before a ended");
    assert!(sc.0 >= sb.1, "c started before b ended");
    let cancelled = c
        .wait_for(&alice, &never, &["CANCELLED"], Duration::from_secs(30))
        .await;
    assert_eq!(
        cancelled["reason"], "DependencyNeverSatisfied",
        "{cancelled}"
    );
    assert!(!alice.home.join(format!("slurm-{never}.out")).exists());
}

#[tokio::test]
async fn cancel_stops_a_running_job_and_time_limits_are_enforced() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let long = c
        .sbatch(&alice, "#!/bin/bash\necho started\nsleep 300\n")
        .await;
    let limited = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH --time=0:03\necho started\nsleep 300\n",
        )
        .await;
    c.wait_for(&alice, &long, &["RUNNING"], Duration::from_secs(30))
        .await;
    eventually("the job printed", Duration::from_secs(30), || async {
        c.output(&alice, &long).contains("started")
    })
    .await;
    let res = reqwest::Client::new()
        .delete(c.app.url(&format!("/api/v1/jobs/{long}")))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("cancel");
    assert_eq!(res.status(), 200);
    c.wait_for(&alice, &long, &["CANCELLED"], Duration::from_secs(30))
        .await;
    let timed_out = c
        .wait_for(&alice, &limited, &["TIMEOUT"], Duration::from_secs(40))
        .await;
    assert_eq!(timed_out["state"], "TIMEOUT");
    eventually(
        "no sleep of the user is left",
        Duration::from_secs(20),
        || async {
            let out = std::process::Command::new("pgrep")
                .args(["-u", &alice.uid.to_string(), "sleep"])
                .output()
                .expect("pgrep");
            out.stdout.is_empty()
        },
    )
    .await;
}

#[tokio::test]
async fn a_job_over_its_memory_is_ended_as_out_of_memory() {
    // `tail` keeps a line whole, and /dev/zero has none: it grows until it is stopped.
    // With a cgroup v2 memory controller the kernel stops it; on cgroup v1 hosts the
    // supervisor's sampling does. Either way: OUT_OF_MEMORY, and a job under its limit
    // with the same script shape completes.
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let hog = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH --mem=64M --time=2:00\nhead -c 2G /dev/zero | tail >/dev/null\n",
        )
        .await;
    let small = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH --mem=64M\nhead -c 1M /dev/zero | tail >/dev/null\n",
        )
        .await;
    let ended = c
        .wait_for(
            &alice,
            &hog,
            &["OUT_OF_MEMORY", "COMPLETED", "FAILED", "TIMEOUT"],
            Duration::from_secs(90),
        )
        .await;
    assert_eq!(ended["state"], "OUT_OF_MEMORY", "{ended}");
    let fine = c
        .wait_for(
            &alice,
            &small,
            &["COMPLETED", "FAILED", "OUT_OF_MEMORY"],
            Duration::from_secs(60),
        )
        .await;
    assert_eq!(fine["state"], "COMPLETED", "{fine}");
    assert_eq!(ended["memory_mb"], 64, "{ended}");
}

#[tokio::test]
async fn bad_submissions_are_refused_with_the_reason_and_change_nothing() {
    let c = JobCluster::start(4).await;
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;

    let res = c
        .submit(
            &alice,
            json!({"script": "#!/bin/bash\n#SBATCH --gres=gpu:8\ntrue\n"}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    let message = body["message"].as_str().expect("message");
    assert!(
        message.contains('4') && message.to_lowercase().contains("gpu"),
        "{message}"
    );

    let res = c
        .submit(
            &alice,
            json!({"script": "#!/bin/bash\n#SBATCH -J ok\n#SBATCH --time=soon\ntrue\n"}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"], "bad_request");
    assert!(
        body["message"]
            .as_str()
            .expect("message")
            .contains("line 3"),
        "{body}"
    );

    for bad in [
        json!({"wrap": "true", "environment": {"1X": "y"}}),
        json!({"wrap": "true", "working_directory": "relative/dir"}),
        json!({"script": ""}),
        json!({"wrap": "true", "unknown": 1}),
        json!({"wrap": "true", "options": {"partition": "nope"}}),
    ] {
        let res = c.submit(&alice, bad.clone()).await;
        assert_eq!(res.status(), 400, "{bad}");
    }
    let list: Value = c
        .app
        .get_bearer("/api/v1/jobs?state=all", &alice.token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(list["total"], 0, "nothing was stored: {list}");

    // Another user's job does not exist for bob.
    let id = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --hold\ntrue\n")
        .await;
    assert_eq!(
        c.app
            .get_bearer(&format!("/api/v1/jobs/{id}"), &bob.token)
            .await
            .status(),
        404
    );
    assert_eq!(
        c.app
            .get_bearer(&format!("/api/v1/jobs/{id}/output"), &bob.token)
            .await
            .status(),
        404
    );
    let res = reqwest::Client::new()
        .delete(c.app.url(&format!("/api/v1/jobs/{id}")))
        .bearer_auth(&bob.token)
        .send()
        .await
        .expect("cancel");
    assert_eq!(res.status(), 404);
    let bobs: Value = c
        .app
        .get_bearer("/api/v1/jobs", &bob.token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(bobs["total"], 0);
    let held = c.job(&alice, &id).await;
    assert_eq!(held["reason"], "JobHeldUser");
    // Release runs it.
    let res = reqwest::Client::new()
        .post(c.app.url(&format!("/api/v1/jobs/{id}/release")))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("release");
    assert_eq!(res.status(), 200);
    c.wait_for(&alice, &id, &["COMPLETED"], Duration::from_secs(30))
        .await;
}

#[tokio::test]
async fn the_openapi_document_describes_the_job_api() {
    let c = JobCluster::start(2).await;
    let doc: Value = reqwest::get(c.app.url("/api/v1/openapi.json"))
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert!(doc["openapi"].as_str().expect("version").starts_with("3."));
    for path in [
        "/api/v1/jobs",
        "/api/v1/jobs/{id}",
        "/api/v1/jobs/{id}/output",
        "/api/v1/nodes",
        "/api/v1/partitions",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} missing");
    }
    let alice = c.user("alice").await;
    let nodes: Value = c
        .app
        .get_bearer("/api/v1/nodes", &alice.token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(nodes["gpus"].as_array().expect("gpus").len(), 2);
    assert_eq!(
        nodes["gpus"][0]["present"], false,
        "declared GPUs are not on this machine"
    );
    let parts: Value = c
        .app
        .get_bearer("/api/v1/partitions", &alice.token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(parts["partitions"][0]["name"], "gpu");
}

#[tokio::test]
async fn the_history_is_listed_by_id_and_paged_with_its_total() {
    let c = JobCluster::start(1).await;
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;
    let mut mine = Vec::new();
    for _ in 0..3 {
        mine.push(
            c.sbatch(&alice, "#!/bin/bash\n#SBATCH --hold\ntrue\n")
                .await,
        );
    }
    let bobs = c.sbatch(&bob, "#!/bin/bash\n#SBATCH --hold\ntrue\n").await;
    let list = |query: String| {
        let c = &c;
        let token = alice.token.clone();
        async move {
            let v: Value = c
                .app
                .get_bearer(&format!("/api/v1/jobs?state=all&{query}"), &token)
                .await
                .json()
                .await
                .expect("json");
            let ids: Vec<String> = v["jobs"]
                .as_array()
                .expect("jobs")
                .iter()
                .map(|j| j["id"].as_str().expect("id").to_string())
                .collect();
            (v["total"].as_u64().expect("total"), ids)
        }
    };
    // Named ids, as `sacct -j` asks: only those, only the caller's.
    let (total, ids) = list(format!("me=true&ids={},{},{bobs}", mine[0], mine[2])).await;
    assert_eq!(total, 2);
    assert_eq!(ids, vec![mine[2].clone(), mine[0].clone()], "newest first");
    assert_eq!(list(format!("ids={bobs}")).await, (0, vec![]));
    // A page that is full or not first still counts them all.
    let (total, ids) = list("per_page=2".into()).await;
    assert_eq!((total, ids.len()), (3, 2));
    let (total, ids) = list("per_page=2&page=2".into()).await;
    assert_eq!((total, ids), (3, vec![mine[0].clone()]));
    let (total, ids) = list("per_page=5".into()).await;
    assert_eq!((total, ids.len()), (3, 3));
}
