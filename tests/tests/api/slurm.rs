//! The Slurm backend against a real Slurm (munged, slurmctld and slurmd started here
//! on loopback): jobs run under Slurm as the user, arrays and dependencies pass
//! through, cancel, a controller outage shows UNKNOWN and loses nothing, a portal
//! restart follows the jobs it had, and a notebook session runs as a Slurm job that
//! the proxy reaches over TCP.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use atrium_tests::support::jupyter::{self, WsProtocol};
use atrium_tests::support::{Slurm, SlurmOptions};
use serde_json::{json, Value};

use crate::fixtures::quotas::{admin_token, set_quota};
use crate::fixtures::sessions::{run_code, SessionCluster, KERNEL_DEADLINE};
use crate::fixtures::slurm::{
    output_with, python_environment, sbatch_as, slurm_config, start, user, RUN,
};
use crate::fixtures::{private_root, spawn_with, JobCluster, JobUser, Options};

/// `sbatch` run by `user` outside the portal (a job of 60 s, its output discarded):
/// its id.
async fn sbatch_by_hand(slurm: &Slurm, user: &JobUser, args: &[&str]) -> String {
    let out = sbatch_as(slurm, user)
        .args(["--parsable", "--output=/dev/null", "--wrap=sleep 60"])
        .args(args)
        .output()
        .await
        .expect("sbatch by hand");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test]
async fn jobs_run_under_slurm_as_the_user_with_arrays_dependencies_and_cancel() {
    let (c, slurm) = start().await;
    let ann = user(&c, &slurm, "ann").await;

    // A plain job: Slurm runs it as ann; the exit code and the output are recorded.
    let id = c
        .sbatch(
            &ann,
            "#!/bin/bash\n#SBATCH --job-name=hello --gres=gpu:1\nid -un\necho \"slurm job $SLURM_JOB_ID\"\nexit 3\n",
        )
        .await;
    let job = c.wait_for(&ann, &id, &["FAILED"], RUN).await;
    assert_eq!(job["exit_code"], 3, "{job}");
    assert_eq!(job["name"], "hello", "{job}");
    assert_eq!(job["gres"], "gpu:1", "{job}");
    let out = output_with(&job, "slurm job").await;
    assert!(
        out.contains(&format!("ann\nslurm job {id}\n")),
        "runs as ann under Slurm's id {id}: {out:?}"
    );
    assert!(job["stdout"]
        .as_str()
        .expect("stdout")
        .ends_with(&format!("slurm-{id}.out")));

    // An array and a job that depends on it pass through as written.
    let array = c
        .sbatch(
            &ann,
            "#!/bin/bash\n#SBATCH --array=0-2 --output=task-%A_%a.out\necho \"task $SLURM_ARRAY_TASK_ID\"\n",
        )
        .await;
    let after = c
        .sbatch(
            &ann,
            &format!("#!/bin/bash\n#SBATCH --dependency=afterok:{array}\necho after\n"),
        )
        .await;
    let done = c.wait_for(&ann, &after, &["COMPLETED"], RUN).await;
    output_with(&done, "after").await;
    for t in 0..3 {
        let task = c
            .wait_for(&ann, &format!("{array}_{t}"), &["COMPLETED"], RUN)
            .await;
        let out = output_with(&task, &format!("task {t}")).await;
        assert_eq!(out, format!("task {t}\n"));
        assert!(task["stdout"]
            .as_str()
            .expect("stdout")
            .ends_with(&format!("task-{array}_{t}.out")));
    }

    // Cancel: Slurm's state follows. Meanwhile ann's quota is shown with its use.
    let admin = admin_token(&c).await;
    set_quota(&c, &admin, "user", "ann", json!({"max_gpus": 2})).await;
    let sleeper = c
        .sbatch(
            &ann,
            "#!/bin/bash\n#SBATCH --gres=gpu:1g.10gb:1\nsleep 300\n",
        )
        .await;
    c.wait_for(&ann, &sleeper, &["RUNNING"], RUN).await;
    let (_, usage) = c.app.api(&ann.token).get("/api/v1/me/usage").await;
    let quota = &usage["quotas"][0];
    assert_eq!(quota["scope"], "user", "{usage}");
    assert_eq!(quota["limits"]["max_gpus"], 2, "{usage}");
    assert_eq!(quota["running_jobs"], 1, "{usage}");
    assert_eq!(
        quota["gpus_in_use"], 0.142,
        "a 1g slice is 1/7 of a GPU: {usage}"
    );
    // A job with atrium's comment but no row (sbatch answered, the portal never
    // recorded it): adopted, so ann sees it and can cancel it. The poll lists ann's
    // jobs while it follows one of them (the sleeper); others' only on a sweep.
    let orphan = sbatch_by_hand(&slurm, &ann, &["--comment=atrium", "--job-name=orphan"]).await;
    atrium_tests::support::until("the portal to adopt the job", RUN, || {
        let (c, ann, orphan) = (&c, &ann, &orphan);
        async move {
            let res = c
                .app
                .get_bearer(&format!("/api/v1/jobs/{orphan}"), &ann.token)
                .await;
            (res.status() == 200).then_some(())
        }
    })
    .await
    .expect("adopted");
    let adopted = c.wait_for(&ann, &orphan, &["RUNNING"], RUN).await;
    assert_eq!(adopted["name"], "orphan", "{adopted}");
    c.cancel(&ann, &orphan).await;
    c.wait_for(&ann, &orphan, &["CANCELLED"], RUN).await;
    c.cancel(&ann, &sleeper).await;
    c.wait_for(&ann, &sleeper, &["CANCELLED"], RUN).await;

    // Without the comment a job is not atrium's.
    let other = sbatch_by_hand(&slurm, &ann, &["--job-name=other"]).await;
    let res = c
        .app
        .get_bearer(&format!("/api/v1/jobs/{other}"), &ann.token)
        .await;
    assert_eq!(res.status(), 404);
    slurm.run("scancel", &[&other]).await.expect("scancel");

    // A script Slurm refuses: its message, 400, nothing recorded.
    let res = c
        .submit(
            &ann,
            serde_json::json!({"script": "#!/bin/bash\n#SBATCH --partition=nowhere\ntrue\n", "working_directory": ann.home}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert!(
        body["message"].as_str().unwrap_or("").contains("partition"),
        "{body}"
    );

    // Nodes and GPU slices come from Slurm.
    let nodes: Value = c
        .app
        .get_bearer("/api/v1/nodes", &ann.token)
        .await
        .json()
        .await
        .expect("json");
    let node = &nodes["nodes"][0];
    assert_eq!(node["name"], slurm.node_name(), "{nodes}");
    let slices: Vec<&str> = node["slices"]
        .as_array()
        .expect("slices")
        .iter()
        .filter_map(|s| s["type"].as_str())
        .collect();
    assert!(
        slices.contains(&"a100") && slices.contains(&"1g.10gb"),
        "{nodes}"
    );
}

#[tokio::test]
async fn a_controller_outage_shows_unknown_and_a_restart_loses_nothing() {
    let (mut c, mut slurm) = start().await;
    let bea = user(&c, &slurm, "bea").await;
    let running = c.sbatch(&bea, "#!/bin/bash\nsleep 300\n").await;
    let held = c.sbatch(&bea, "#!/bin/bash\n#SBATCH --hold\ntrue\n").await;
    c.wait_for(&bea, &running, &["RUNNING"], RUN).await;
    let pending = c.wait_for(&bea, &held, &["PENDING"], RUN).await;
    assert_eq!(pending["reason"], "JobHeldUser", "{pending}");
    // An administrator's nice goes to Slurm (as root: a negative nice is an
    // operator's); the owner's is refused before Slurm is asked.
    let nice = |token: String| {
        let url = c.app.url(&format!("/api/v1/jobs/{held}"));
        async move {
            reqwest::Client::new()
                .patch(url)
                .bearer_auth(token)
                .json(&serde_json::json!({"nice": -100}))
                .send()
                .await
                .expect("patch")
        }
    };
    assert_eq!(nice(bea.token.clone()).await.status(), 403);
    let admin = c
        .app
        .login("admin", c.app.admin_password.as_deref().expect("admin"))
        .await;
    let ops = c.app.create_token(&admin, "ops", &["jobs", "admin"]).await;
    let res = nice(ops).await;
    let status = res.status();
    assert_eq!(status, 200, "{}", res.text().await.unwrap_or_default());

    // slurmctld away: the states are unknown, nothing is ended or cancelled.
    slurm.stop_controller().await.expect("stop slurmctld");
    c.wait_for(&bea, &running, &["UNKNOWN"], RUN).await;
    c.wait_for(&bea, &held, &["UNKNOWN"], RUN).await;
    let list: Value = c
        .app
        .get_bearer("/api/v1/jobs", &bea.token)
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(list["total"], 2, "both still listed: {list}");

    // … and the portal restarts meanwhile.
    c.app.terminate();
    c.app.restart();

    // Back: the same jobs, as Slurm has them.
    slurm.start_controller().await.expect("start slurmctld");
    c.wait_for(&bea, &running, &["RUNNING"], RUN).await;
    c.wait_for(&bea, &held, &["PENDING"], RUN).await;

    // Another restart with a job pending and one running, then both go on to the end.
    c.app.terminate();
    c.app.restart();
    c.cancel(&bea, &running).await;
    c.wait_for(&bea, &running, &["CANCELLED"], RUN).await;
    let release = reqwest::Client::new()
        .post(c.app.url(&format!("/api/v1/jobs/{held}/release")))
        .bearer_auth(&bea.token)
        .send()
        .await
        .expect("release");
    assert!(release.status().is_success(), "{}", release.status());
    let done = c.wait_for(&bea, &held, &["COMPLETED"], RUN).await;
    assert_eq!(done["exit_code"], 0, "{done}");
}

#[tokio::test]
async fn apply_quotas_prints_the_sacctmgr_commands_of_the_quotas() {
    let c = JobCluster::start(1).await;
    let admin = admin_token(&c).await;
    let _cy = c.user("cy").await;
    set_quota(
        &c,
        &admin,
        "user",
        "cy",
        json!({"max_gpus": 2, "max_gpu_hours": 10}),
    )
    .await;
    set_quota(
        &c,
        &admin,
        "default",
        "",
        json!({"max_gpus": 1, "max_sessions": 1}),
    )
    .await;
    let out = c.app.cli(&["slurm", "apply-quotas", "--dry-run"], "");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(
            "sacctmgr -i modify user where name=cy set GrpTRES=gres/gpu=2 \
             GrpTRESMins=gres/gpu=600 MaxJobs=-1 MaxSubmitJobs=-1 MaxWall=-1\n"
        ),
        "{text}"
    );
    // The default quota goes to every other user (here the administrator), not to cy,
    // and what Slurm cannot enforce is said.
    assert!(
        text.contains("modify user where name=admin set GrpTRES=gres/gpu=1 "),
        "{text}"
    );
    assert_eq!(text.matches("name=cy").count(), 1, "{text}");
    assert!(text.contains("# default: max_sessions = 1"), "{text}");
}

#[tokio::test]
async fn sessions_run_as_slurm_jobs_that_the_proxy_reaches_over_tcp() {
    let Some(venv) = jupyter::venv_or_skip("slurm sessions").expect("jupyter environment") else {
        return;
    };
    let mut slurm = Slurm::start(SlurmOptions::default()).await.expect("slurm");
    let root = private_root();
    let mut config = slurm_config(root.path(), &slurm);
    config.push_str(&python_environment(&venv));
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    let mut c = SessionCluster::new(app, root);
    let dee = c.user("dee").await;
    slurm
        .add_user("dee", dee.uid, dee.uid, &dee.home)
        .expect("slurm user");

    // The node is taken whole: the session waits, and its progress says what Slurm says.
    let busy = slurm
        .run(
            "sbatch",
            &[
                "--parsable",
                "--exclusive",
                "--output=/dev/null",
                "--chdir=/tmp",
                "--wrap=sleep 300",
            ],
        )
        .await
        .expect("sbatch a job that takes the node");
    let busy = busy.trim().to_string();
    let res = c
        .start_session(&dee, json!({"environment": "python"}))
        .await;
    let started: Value = res.json().await.expect("json");
    assert!(started["id"].is_i64(), "start: {started}\n{}", c.log_tail());
    let id = started["id"].as_i64().expect("id");
    let waiting = c
        .follow(&dee, id, |e| {
            e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Queued in Slurm: PENDING (Resources)"))
        })
        .await;
    assert!(
        waiting.last().is_some_and(|e| e["state"] == "pending"),
        "{waiting:?}\n{}",
        c.log_tail()
    );
    slurm
        .run("scancel", &[&busy])
        .await
        .expect("scancel the job that took the node");

    // Ready: the server runs as dee in a Slurm job, on a TCP port of the node.
    let events = c.follow(&dee, id, |e| e["ready"] == true).await;
    assert_eq!(
        events.last().map(|e| e["ready"].clone()),
        Some(Value::Bool(true)),
        "{events:?}\n{}",
        c.log_tail()
    );
    assert!(
        events.iter().any(|e| e["message"]
            .as_str()
            .is_some_and(|m| m.contains("starting the server"))),
        "{events:?}"
    );
    let session = c.session(&dee, id).await;
    let job = session["job_id"].as_i64().expect("job id");
    let dir = dee.home.join(format!(".atrium/sessions/{id}"));
    let token = std::fs::metadata(dir.join("token")).expect("token file");
    assert_eq!(token.permissions().mode() & 0o777, 0o600);
    assert_eq!(token.uid(), dee.uid);
    let connection: Value =
        serde_json::from_slice(&std::fs::read(dir.join("connection.json")).expect("connection"))
            .expect("connection json");
    assert!(
        connection["port"].as_u64().is_some_and(|p| p > 1023),
        "{connection}"
    );
    let squeue = slurm
        .run("squeue", &["-h", "-j", &job.to_string(), "-o", "%T %u"])
        .await
        .expect("squeue");
    assert_eq!(squeue.trim(), "RUNNING dee", "a Slurm job of dee's");

    // Code runs through the proxy, as dee, inside the Slurm job.
    let base = c.base(&session);
    let out = run_code(
        &dee,
        &base,
        "import os; print(os.getuid(), os.environ.get('SLURM_JOB_ID'), 'JUPYTER_TOKEN' in os.environ)",
    )
    .await;
    assert_eq!(out.trim(), format!("{} {job} True", dee.uid));

    // The portal restarts: the session is found again where it listens.
    c.app.terminate();
    c.app.restart();
    let dee = c.login("dee").await;
    let base = c.base(&session);
    let headers = dee.headers(&base);
    let kernel = atrium_tests::support::until("the proxy to reach the session again", RUN, || {
        let (client, base, headers) = (dee.client.clone(), base.clone(), headers.clone());
        async move { jupyter::start_kernel(&client, &base, &headers).await.ok() }
    })
    .await
    .expect("kernel after the restart");
    let again = jupyter::execute(
        &base,
        &headers,
        &kernel,
        "print(6*7)",
        WsProtocol::V1,
        KERNEL_DEADLINE,
    )
    .await
    .expect("execute after the restart");
    assert_eq!(again.trim(), "42");

    // slurmctld away: the session's state is unknown and said so, yet the notebook
    // answers (the proxy goes to the node, not through Slurm) and nothing is stopped.
    slurm.stop_controller().await.expect("stop slurmctld");
    let warned = c
        .follow(&dee, id, |e| {
            e["warning"]
                .as_str()
                .is_some_and(|w| w.starts_with("Slurm is not answering"))
        })
        .await;
    assert_eq!(
        warned.last().map(|e| e["ready"].clone()),
        Some(Value::Bool(true)),
        "{warned:?}"
    );
    assert_eq!(run_code(&dee, &base, "print(7*6)").await.trim(), "42");
    slurm.start_controller().await.expect("start slurmctld");
    let back = c
        .follow(&dee, id, |e| e["ready"] == true && e["warning"].is_null())
        .await;
    assert!(
        back.last().is_some_and(|e| e["warning"].is_null()),
        "{back:?}"
    );
    assert_eq!(c.session(&dee, id).await["state"], "ready");

    // Stop: the Slurm job is cancelled and the session's directory removed.
    c.stop(&dee, id).await;
    atrium_tests::support::until("the session's directory to go", RUN, || {
        let gone = !dir.exists();
        async move { gone.then_some(()) }
    })
    .await
    .expect("directory removed");
    let state = slurm
        .run(
            "squeue",
            &["-h", "-j", &job.to_string(), "-t", "all", "-o", "%T"],
        )
        .await
        .unwrap_or_default();
    assert!(
        state.trim().is_empty() || state.trim() == "CANCELLED",
        "{state}"
    );

    // TensorBoard on the node: through the proxy it answers; at its port without the
    // session's token it refuses.
    let (tb, _) = c
        .ready_session(
            &dee,
            json!({"name": "tb", "kind": "tensorboard", "environment": "python", "logdir": "runs"}),
        )
        .await;
    let base = c.base(&tb);
    let env = dee
        .client
        .get(base.join("data/environment").expect("url"))
        .send()
        .await
        .expect("environment");
    assert_eq!(env.status(), 200);
    let tb_dir = dee.home.join(format!(
        ".atrium/sessions/{}",
        tb["id"].as_i64().expect("id")
    ));
    let connection: Value =
        serde_json::from_slice(&std::fs::read(tb_dir.join("connection.json")).expect("connection"))
            .expect("connection json");
    let direct = reqwest::get(format!(
        "http://127.0.0.1:{}/user/dee/tb/data/environment",
        connection["port"]
    ))
    .await
    .expect("direct");
    assert_eq!(direct.status(), 403, "no token, no TensorBoard");
}

#[tokio::test]
async fn with_accounting_a_job_that_ended_while_the_portal_was_down_comes_from_sacct_and_quotas_become_limits(
) {
    let slurm = Slurm::start(SlurmOptions {
        accounting: true,
        ..SlurmOptions::default()
    })
    .await
    .expect("slurm with slurmdbd");
    let root = private_root();
    let app = spawn_with(Options {
        extra_config: slurm_config(root.path(), &slurm),
        database_url: None,
    })
    .await;
    let mut c = JobCluster::on(app, root);
    let eve = user(&c, &slurm, "eve").await;

    // The portal is down while the job ends and leaves slurmctld (MinJobAge=2): only
    // sacct knows how it ended.
    let id = c
        .sbatch(
            &eve,
            "#!/bin/bash\n#SBATCH --gres=gpu:a100:1\n\
             end=$((SECONDS + 3)); while [ $SECONDS -lt $end ]; do :; done\nexit 4\n",
        )
        .await;
    c.wait_for(&eve, &id, &["RUNNING"], RUN).await;
    c.app.terminate();
    atrium_tests::support::until("the job to leave slurmctld", RUN, || async {
        let listed = slurm
            .run("squeue", &["-h", "-t", "all", "-j", &id, "-o", "%T"])
            .await;
        listed.map_or(true, |l| l.trim().is_empty()).then_some(())
    })
    .await
    .expect("job gone from squeue");
    c.app.restart();
    let job = c.wait_for(&eve, &id, &["FAILED"], RUN).await;
    assert_eq!(job["exit_code"], 4, "{job}");
    assert!(job["time_used"].as_u64().is_some_and(|t| t < 6), "{job}");
    assert_eq!(
        job["partition"],
        atrium_tests::support::slurm::DEFAULT_PARTITION,
        "{job}"
    );
    assert_eq!(
        job["account"],
        atrium_tests::support::slurm::ACCOUNT,
        "{job}"
    );
    // What it used, from sacct (TotalCPU, MaxRSS): 2 to 3 s of one core (a bash loop to a whole second runs at least 2 s).
    let (status, e) = c
        .app
        .api(&eve.token)
        .get(&format!("/api/v1/jobs/{id}/efficiency"))
        .await;
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["source"], "slurm", "{e}");
    assert_eq!(e["complete"], true, "{e}");
    let cpu = e["cpu_seconds"].as_f64().expect("TotalCPU");
    assert!((1.0..10.0).contains(&cpu), "{e}");
    assert!(e["max_rss_bytes"].as_u64().is_some_and(|m| m > 0), "{e}");
    let (status, usage) = c.app.api(&eve.token).get("/api/v1/accounting").await;
    assert_eq!(status, 200, "{usage}");
    let record = &usage["jobs"][0];
    assert_eq!(record["id"], id.as_str(), "{usage}");
    assert_eq!(record["gpus"], 1.0, "GPUs from AllocTRES gres/gpu: {usage}");
    assert!(
        record["gpu_seconds"].as_f64().unwrap_or(0.0) >= 1.0,
        "{usage}"
    );

    // A quota applied with sacctmgr: Slurm holds the job that would exceed it.
    let admin = admin_token(&c).await;
    set_quota(&c, &admin, "user", "eve", json!({"max_gpus": 1})).await;
    let out = c.app.cli(&["slurm", "apply-quotas"], "");
    assert!(
        out.status.success(),
        "apply-quotas: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let limits = slurm
        .run(
            "sacctmgr",
            &[
                "-n",
                "-P",
                "show",
                "assoc",
                "where",
                "user=eve",
                "format=GrpTRES",
            ],
        )
        .await
        .expect("sacctmgr show assoc");
    assert_eq!(limits.trim(), "gres/gpu=1", "{limits}");
    let big = c
        .sbatch(&eve, "#!/bin/bash\n#SBATCH --gres=gpu:a100:2\ntrue\n")
        .await;
    let pending = atrium_tests::support::until("Slurm to name the association limit", RUN, || {
        let (c, eve, big) = (&c, &eve, &big);
        async move {
            let job = c.job(eve, big).await;
            (job["state"] == "PENDING"
                && job["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("AssocGrp")))
            .then_some(job)
        }
    })
    .await
    .expect("held by the association limit");
    assert_eq!(pending["state"], "PENDING");
    c.cancel(&eve, &big).await;
}
