//! The Slurm backend on a real cluster of three compute nodes (each its own slurmd,
//! hostname and address, in namespaces of its own: `support::slurm::CLUSTER_NODES`):
//! a job whose step spans two nodes through the API and the command line, accounted
//! on both; an array spread over the nodes; a drained node on the GPU map; a notebook
//! session placed on the second node, reached there by the proxy (websockets
//! included); a node killed under running jobs (`NODE_FAIL`, or requeued).

use std::collections::BTreeSet;

use atrium_tests::support::{Slurm, SlurmOptions};
use serde_json::{json, Value};

use crate::fixtures::cli::{client, run};
use crate::fixtures::sessions::{run_code, SessionCluster};
use crate::fixtures::slurm::{output_with, python_environment, slurm_config, user, RUN};
use crate::fixtures::{atrium_bin, private_root, spawn_with, JobCluster, JobUser, Options};

/// CPUs of each node: a task of `-c 4` takes a node whole.
const NODE_CPUS: u32 = 4;

async fn three_nodes(accounting: bool) -> Slurm {
    Slurm::start(SlurmOptions {
        cpus: NODE_CPUS,
        accounting,
        multi_node: true,
    })
    .await
    .expect("a three-node Slurm")
}

/// The job's output lines, sorted.
async fn sorted_lines(job: &Value, expected: usize) -> Vec<String> {
    let path = job["stdout"].as_str().expect("stdout path").to_string();
    atrium_tests::support::until(&format!("{path} to hold {expected} lines"), RUN, || {
        let path = path.clone();
        async move {
            let out = std::fs::read_to_string(&path).unwrap_or_default();
            let mut lines: Vec<String> = out.lines().map(|l| l.trim().to_string()).collect();
            lines.sort();
            (lines.len() >= expected).then_some(lines)
        }
    })
    .await
    .expect("output")
}

/// An array task, once Slurm has started it (the portal knows it from then on) and
/// it has completed.
async fn completed_task(c: &JobCluster, user: &JobUser, id: &str) -> Value {
    atrium_tests::support::until(&format!("task {id} to complete"), RUN, || async {
        let res = c
            .app
            .get_bearer(&format!("/api/v1/jobs/{id}"), &user.token)
            .await;
        let job: Value = res.json().await.ok()?;
        (job["state"] == "COMPLETED").then_some(job)
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", c.app.log().join("\n")))
}

#[tokio::test]
async fn a_step_spans_two_nodes_an_array_spreads_and_a_drained_node_shows_on_the_map() {
    let slurm = three_nodes(true).await;
    let root = private_root();
    let app = spawn_with(Options {
        extra_config: slurm_config(root.path(), &slurm),
        database_url: None,
    })
    .await;
    let c = JobCluster::on(app, root);
    let ann = user(&c, &slurm, "ann").await;
    let script = "#!/bin/bash\n#SBATCH -N 2 --ntasks-per-node=2 --gres=gpu:2\nsrun hostname\n";
    let both = ["node1", "node1", "node2", "node2"];

    // Through the API: four tasks, two on each node, each node's two GPUs.
    let id = c.sbatch(&ann, script).await;
    let job = c.wait_for(&ann, &id, &["COMPLETED"], RUN).await;
    assert_eq!(sorted_lines(&job, 4).await, both, "{job}");
    assert_eq!(job["nodes"], 2, "{job}");
    assert_eq!(job["nodelist"], "node[1-2]", "{job}");

    // Through the command line, the same; its accounting names both nodes and
    // counts the GPUs of both.
    std::fs::write(ann.home.join("span.sh"), script).expect("script");
    let mut cmd = client(&c, &ann.token, &ann.home, &atrium_bin());
    cmd.args(["sbatch", "--parsable", "span.sh"]);
    let (ok, cli_id, err) = run(cmd);
    assert!(ok, "{err}");
    let cli_id = cli_id.trim().to_string();
    let cli_job = c.wait_for(&ann, &cli_id, &["COMPLETED"], RUN).await;
    assert_eq!(sorted_lines(&cli_job, 4).await, both, "{cli_job}");
    let mut cmd = client(&c, &ann.token, &ann.home, &atrium_bin());
    cmd.args([
        "sacct",
        "-X",
        "-n",
        "-P",
        "-j",
        &cli_id,
        "-o",
        "JobID,State,NNodes,NodeList,AllocTRES",
    ]);
    let (ok, sacct, err) = run(cmd);
    assert!(ok, "{err}");
    let fields: Vec<&str> = sacct.trim().split('|').collect();
    assert_eq!(
        fields[..4],
        [cli_id.as_str(), "COMPLETED", "2", "node[1-2]"],
        "{sacct}"
    );
    assert!(fields[4].contains("gres/gpu=4"), "{sacct}");

    // An array whose tasks each take a node whole: one task on each node.
    let array = c
        .sbatch(
            &ann,
            &format!(
                "#!/bin/bash\n#SBATCH --array=0-2 -c {NODE_CPUS} --output=spread-%a.out\nhostname\nsleep 3\n"
            ),
        )
        .await;
    let mut placed = BTreeSet::new();
    for t in 0..3 {
        let task = completed_task(&c, &ann, &format!("{array}_{t}")).await;
        let out = output_with(&task, "node").await;
        assert_eq!(task["nodelist"], out.trim(), "{task}");
        placed.insert(out.trim().to_string());
    }
    assert_eq!(
        placed.into_iter().collect::<Vec<_>>(),
        ["node1", "node2", "node3"]
    );

    // node2 drained: the API and the GPU map say so, with Slurm's reason.
    slurm
        .run(
            "scontrol",
            &[
                "update",
                "nodename=node2",
                "state=drain",
                "reason=replacing a GPU fan",
            ],
        )
        .await
        .expect("drain node2");
    let page = c.app.login("ann", "password-of-some-length").await;
    let html = atrium_tests::support::until("the GPU map to show node2 drained", RUN, || {
        let (page, url) = (page.clone(), c.app.url("/cluster"));
        async move {
            let html = page.get(url).send().await.ok()?.text().await.ok()?;
            html.contains("node2 · <strong>DRAIN</strong> (replacing a GPU fan)")
                .then_some(html)
        }
    })
    .await
    .expect("drained node on the map");
    assert!(html.contains("1g.10gb ×2"), "{html}");
    let nodes: Value = c
        .app
        .get_bearer("/api/v1/nodes", &ann.token)
        .await
        .json()
        .await
        .expect("json");
    let node2 = nodes["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["name"] == "node2")
        .expect("node2");
    assert!(node2.to_string().contains("replacing a GPU fan"), "{node2}");

    // node1 dies under two jobs: the one that asked to be requeued waits again, the
    // other ends NODE_FAIL; both say what Slurm says, and so does node1.
    let requeued = c
        .sbatch(
            &ann,
            "#!/bin/bash\n#SBATCH -w node1 --requeue -c 1\nsleep 300\n",
        )
        .await;
    let failed = c
        .sbatch(
            &ann,
            "#!/bin/bash\n#SBATCH -w node1 --no-requeue -c 1\nsleep 300\n",
        )
        .await;
    c.wait_for(&ann, &requeued, &["RUNNING"], RUN).await;
    c.wait_for(&ann, &failed, &["RUNNING"], RUN).await;
    let killed = slurm.kill_node("node1").expect("kill node1");
    assert!(killed >= 3, "slurmd and two jobs at least: {killed}");
    let gone = c.wait_for(&ann, &failed, &["NODE_FAIL"], RUN).await;
    assert_eq!(gone["state_code"], "NF", "{gone}");
    let again = c.wait_for(&ann, &requeued, &["PENDING"], RUN).await;
    assert!(
        again["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "Slurm's reason: {again}"
    );
    let node1 = atrium_tests::support::until("node1 to show Slurm's reason", RUN, || async {
        let nodes: Value = c
            .app
            .get_bearer("/api/v1/nodes", &ann.token)
            .await
            .json()
            .await
            .ok()?;
        let node1 = nodes["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["name"] == "node1")?
            .to_string();
        node1.contains("Not responding").then_some(node1)
    })
    .await;
    assert!(node1.is_ok(), "{node1:?}\n{}", c.app.log().join("\n"));
}

#[tokio::test]
async fn a_session_runs_on_the_second_node_where_the_proxy_reaches_it() {
    let Some(venv) =
        atrium_tests::support::jupyter::venv_or_skip("multi-node sessions").expect("jupyter")
    else {
        return;
    };
    let slurm = three_nodes(false).await;
    let root = private_root();
    // The session server listens on every address of its node (its namespace's).
    let mut config = slurm_config(root.path(), &slurm).replace(
        "session_listen = \"127.0.0.1\"",
        "session_listen = \"0.0.0.0\"",
    );
    config.push_str(&python_environment(&venv));
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    let c = SessionCluster::new(app, root);
    let dee = c.user("dee").await;
    slurm
        .add_user("dee", dee.uid, dee.uid, &dee.home)
        .expect("slurm user");

    // A MIG slice only node2 has: the session runs there and the proxy reaches it
    // at node2's address, kernel websockets included.
    let (session, _) = c
        .ready_session(
            &dee,
            json!({"environment": "python", "gpus": 1, "slice": "1g.10gb"}),
        )
        .await;
    assert_eq!(session["nodelist"], "node2", "{session}");
    let base = c.base(&session);
    let out = run_code(
        &dee,
        &base,
        "import socket, os; print(socket.gethostname(), os.environ.get('SLURM_JOB_GPUS'))",
    )
    .await;
    // node2's MIG devices are its third and fourth (gres.conf).
    assert_eq!(out.trim(), "node2 2", "{out}");
    let id = session["id"].as_i64().expect("id");
    let connection: Value = serde_json::from_slice(
        &std::fs::read(
            dee.home
                .join(format!(".atrium/sessions/{id}/connection.json")),
        )
        .expect("connection"),
    )
    .expect("connection json");
    let node2 = slurm.node_addr("node2").expect("node2's address");
    assert_eq!(connection["host"], "node2", "{connection}");
    let port = connection["port"].as_u64().expect("port");
    // The server is on node2's address, not on this host's.
    let there = tokio::net::TcpStream::connect((node2, port as u16)).await;
    assert!(there.is_ok(), "node2 {node2}:{port}: {there:?}");
    let here = tokio::net::TcpStream::connect(("127.0.0.1", port as u16)).await;
    assert!(
        here.is_err(),
        "nothing listens on this host's loopback at {port}"
    );
}
