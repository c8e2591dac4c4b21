//! The Slurm backend against a real Slurm (munged, slurmctld and slurmd started here
//! on loopback): jobs run under Slurm as the user, arrays and dependencies pass
//! through, cancel, a controller outage shows UNKNOWN and loses nothing, and a portal
//! restart follows the jobs it had.

use std::path::Path;
use std::time::Duration;

use atrium_tests::support::{Slurm, SlurmOptions};
use serde_json::Value;

use crate::helpers::{spawn_with, Options};
use crate::jobs::{private_root, JobCluster, JobUser};

const RUN: Duration = Duration::from_secs(60);

fn slurm_config(root: &Path, slurm: &Slurm) -> String {
    format!(
        "[scheduler]\nbackend = \"slurm\"\n\
         [slurm]\nconf = \"{}\"\npoll_interval = \"300ms\"\nnodes_interval = \"1s\"\n\
         command_timeout = \"5s\"\n\
         [jobs]\nspool_dir = \"{}\"\n\
         [cluster]\nnode_name = \"head\"\ncpus = 2\nmemory_mb = 4000\ndiscover_gpus = false\n\
         [accounts]\nhome_root = \"{}\"\n",
        slurm.conf().display(),
        root.join("spool").display(),
        root.join("home").display()
    )
}

async fn start() -> (JobCluster, Slurm) {
    let slurm = Slurm::start(SlurmOptions::default()).await.expect("slurm");
    let root = private_root();
    let app = spawn_with(Options {
        extra_config: slurm_config(root.path(), &slurm),
        database_url: None,
    })
    .await;
    (JobCluster { app, root }, slurm)
}

async fn user(c: &JobCluster, slurm: &Slurm, name: &str, uid: u32) -> JobUser {
    let u = c.user(name, uid).await;
    slurm.add_user(name, uid, uid, &u.home).expect("slurm user");
    u
}

async fn control(c: &JobCluster, user: &JobUser, id: &str, method: reqwest::Method) -> u16 {
    reqwest::Client::new()
        .request(method, c.app.url(&format!("/api/v1/jobs/{id}")))
        .bearer_auth(&user.token)
        .send()
        .await
        .expect("request")
        .status()
        .as_u16()
}

/// The output file named in the job, once it holds `text`.
async fn output_with(job: &Value, text: &str) -> String {
    let path = job["stdout"].as_str().expect("stdout path").to_string();
    atrium_tests::support::until(&format!("{path} to hold {text:?}"), RUN, || {
        let path = path.clone();
        async move {
            let out = std::fs::read_to_string(&path).unwrap_or_default();
            out.contains(text).then_some(out)
        }
    })
    .await
    .expect("output")
}

#[tokio::test]
async fn jobs_run_under_slurm_as_the_user_with_arrays_dependencies_and_cancel() {
    let (c, slurm) = start().await;
    let ann = user(&c, &slurm, "ann", 20381).await;

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

    // Cancel: Slurm's state follows.
    let sleeper = c.sbatch(&ann, "#!/bin/bash\nsleep 300\n").await;
    c.wait_for(&ann, &sleeper, &["RUNNING"], RUN).await;
    assert!(control(&c, &ann, &sleeper, reqwest::Method::DELETE).await < 300);
    c.wait_for(&ann, &sleeper, &["CANCELLED"], RUN).await;

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
    let bea = user(&c, &slurm, "bea", 20382).await;
    let running = c.sbatch(&bea, "#!/bin/bash\nsleep 300\n").await;
    let held = c.sbatch(&bea, "#!/bin/bash\n#SBATCH --hold\ntrue\n").await;
    c.wait_for(&bea, &running, &["RUNNING"], RUN).await;
    let pending = c.wait_for(&bea, &held, &["PENDING"], RUN).await;
    assert_eq!(pending["reason"], "JobHeldUser", "{pending}");

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
    assert!(control(&c, &bea, &running, reqwest::Method::DELETE).await < 300);
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
    let password = c.app.admin_password.clone().expect("admin password");
    let client = c.app.login("admin", &password).await;
    let admin = c
        .app
        .create_token(&client, "admin", &["read", "admin"])
        .await;
    let _cy = c.user("cy", 20383).await;
    for (scope, name, limits) in [
        (
            "user",
            "cy",
            serde_json::json!({"max_gpus": 2, "max_gpu_hours": 10}),
        ),
        (
            "default",
            "",
            serde_json::json!({"max_gpus": 1, "max_sessions": 1}),
        ),
    ] {
        let res = reqwest::Client::new()
            .post(c.app.url("/api/v1/admin/quotas"))
            .bearer_auth(&admin)
            .json(&serde_json::json!({"scope": scope, "name": name, "limits": limits}))
            .send()
            .await
            .expect("create quota");
        assert_eq!(res.status(), 201);
    }
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
