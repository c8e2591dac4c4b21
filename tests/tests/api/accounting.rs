//! Accounting end to end: jobs really run with 1 and 2 GPUs, and what
//! `GET /api/v1/accounting` (JSON, CSV, chart), the `/accounting` page and
//! `atrium sacct --format` report matches their own start and end times.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::fixtures::cli::{client, run};
use crate::fixtures::{cluster_config, private_root, spawn_with, JobCluster, JobUser, Options};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .expect("clock")
}

fn ms(rfc3339: &str) -> i64 {
    atrium::accounting::parse_time("time", rfc3339).expect("RFC 3339")
}

/// A portal with 3 GPUs and two partitions, `gpu` (the default) and `short`.
async fn cluster() -> JobCluster {
    let root = private_root();
    let mut config = cluster_config(root.path(), 3);
    config.push_str(
        "[[cluster.partitions]]\nname = \"short\"\ncpus_per_gpu = 2\nmem_per_gpu_mb = 2048\n",
    );
    let app = spawn_with(Options {
        extra_config: config,
        ..Options::default()
    })
    .await;
    JobCluster::on(app, root)
}

/// Submit `sleep 1` with `#SBATCH` lines for `directives`; returns the job id.
async fn run_job(c: &JobCluster, user: &JobUser, directives: &[&str]) -> String {
    let lines: String = directives
        .iter()
        .map(|d| format!("#SBATCH {d}\n"))
        .collect();
    c.sbatch(user, &format!("#!/bin/bash\n{lines}sleep 1\n"))
        .await
}

/// The ids of the jobs an accounting query lists.
async fn job_ids(c: &JobCluster, token: &str, query: &str) -> Vec<String> {
    let (status, body) = c
        .app
        .api(token)
        .get(&format!("/api/v1/accounting?{query}"))
        .await;
    assert_eq!(status, 200, "{body}");
    body["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|j| j["id"].as_str().expect("id").to_string())
        .collect()
}

#[tokio::test]
async fn accounting_totals_match_the_jobs_that_ran() {
    let c = cluster().await;
    let alice = c.user_in("alice", &["ml"]).await;
    let bob = c.user_in("bob", &["cv"]).await;
    c.app.add_user("boss", "password-of-some-length", true);
    let boss_web = c.app.login("boss", "password-of-some-length").await;
    let boss = c
        .app
        .create_token(&boss_web, "acct", &["read", "admin"])
        .await;
    let range = format!(
        "from={}&to={}",
        atrium::accounting::time_text(now_ms() - 3_600_000),
        atrium::accounting::time_text(now_ms() + 3_600_000)
    );

    let one = run_job(&c, &alice, &["-J one", "--gres=gpu:1"]).await;
    let two = run_job(&c, &alice, &["-J two", "--gres=gpu:2"]).await;
    let short = run_job(&c, &bob, &["-J short", "-p short", "--gres=gpu:1"]).await;
    let mut expected = 0.0; // alice's GPU-seconds from the jobs' own times
    for (id, user, gpus) in [
        (&one, &alice, 1.0),
        (&two, &alice, 2.0),
        (&short, &bob, 1.0),
    ] {
        let job = c
            .wait_for(user, id, &["COMPLETED"], Duration::from_secs(60))
            .await;
        let run = ms(job["end_time"].as_str().expect("end"))
            - ms(job["start_time"].as_str().expect("start"));
        if user.name == "alice" {
            expected += gpus * run as f64 / 1e3;
        }
    }

    // alice's own usage: her two jobs; totals and records from their start and end.
    let (status, mine) = c
        .app
        .api(&alice.token)
        .get(&format!("/api/v1/accounting?{range}"))
        .await;
    assert_eq!(status, 200, "{mine}");
    let jobs = mine["jobs"].as_array().expect("jobs");
    let ids: Vec<&str> = jobs.iter().map(|j| j["id"].as_str().expect("id")).collect();
    assert_eq!(ids, [one.as_str(), two.as_str()], "{mine}");
    let mut from_records = 0.0;
    for (j, gpus) in jobs.iter().zip([1.0, 2.0]) {
        assert_eq!(j["gpus"], gpus, "{j}");
        assert_eq!(
            (j["kind"].as_str(), j["user"].as_str()),
            (Some("job"), Some("alice"))
        );
        let run =
            ms(j["end_time"].as_str().expect("end")) - ms(j["start_time"].as_str().expect("start"));
        let gpu_seconds = j["gpu_seconds"].as_f64().expect("gpu_seconds");
        assert!((gpu_seconds - gpus * run as f64 / 1e3).abs() < 1e-3, "{j}");
        assert_eq!(j["cpus"], 2.0 * gpus, "{j}");
        from_records += gpu_seconds;
    }
    let totals = &mine["totals"];
    let total = totals["gpu_seconds"].as_f64().expect("total");
    assert_eq!(totals["jobs"], 2, "{mine}");
    assert!((total - from_records).abs() < 1e-3, "{mine}");
    // The jobs API gives whole seconds: each job's run is known within 1 s there.
    assert!((total - expected).abs() <= 3.0, "{total} vs {expected}");
    assert!(total >= 3.0, "three GPU-seconds at least: {mine}");
    assert!((totals["gpu_hours"].as_f64().expect("hours") - total / 3600.0).abs() < 1e-3);

    // Another user's usage is refused, bad parameters are named.
    let (status, refused) = c
        .app
        .api(&alice.token)
        .get("/api/v1/accounting?user=bob")
        .await;
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .expect("message")
            .contains("bob"),
        "{refused}"
    );
    for (query, field) in [
        ("from=yesterday", "from:"),
        ("to=2025-02-30", "to:"),
        ("group_by=node", "group_by:"),
        ("limit=0", "limit:"),
        ("colour=red", "query:"),
    ] {
        let (status, body) = c
            .app
            .api(&alice.token)
            .get(&format!("/api/v1/accounting?{query}"))
            .await;
        assert_eq!(
            (status.as_u16(), body["error"].as_str()),
            (400, Some("bad_request")),
            "{query}: {body}"
        );
        let message = body["message"].as_str().expect("message");
        assert!(message.starts_with(field), "{query}: {message}");
    }

    // An administrator sees everyone, filtered by user, group or partition.
    assert_eq!(
        job_ids(&c, &boss, &range).await,
        [one.as_str(), two.as_str(), short.as_str()]
    );
    assert_eq!(
        job_ids(&c, &boss, &format!("{range}&user=bob")).await,
        [short.as_str()]
    );
    assert_eq!(
        job_ids(&c, &boss, &format!("{range}&group=ml")).await,
        [one.as_str(), two.as_str()]
    );
    assert_eq!(
        job_ids(&c, &boss, &format!("{range}&partition=short")).await,
        [short.as_str()]
    );
    assert_eq!(
        job_ids(&c, &boss, &format!("{range}&limit=2")).await,
        [one.as_str(), two.as_str()]
    );
    let (_, page) = c
        .app
        .api(&boss)
        .get(&format!("/api/v1/accounting?{range}&limit=2"))
        .await;
    assert_eq!(page["next"], 2, "{page}");
    assert_eq!(page["totals"]["jobs"], 3, "totals are never capped: {page}");
    let (_, by_user) = c
        .app
        .api(&boss)
        .get(&format!("/api/v1/accounting?{range}&group_by=user"))
        .await;
    let rows = by_user["rows"].as_array().expect("rows");
    let alice_row = rows.iter().find(|r| r["key"] == "alice").expect("alice");
    assert!(
        (alice_row["gpu_seconds"].as_f64().expect("gpu") - total).abs() < 1e-3,
        "{by_user}"
    );
    assert_eq!(alice_row["jobs"], 2);
    let (_, by_group) = c
        .app
        .api(&boss)
        .get(&format!("/api/v1/accounting?{range}&group_by=group"))
        .await;
    let groups: Vec<&str> = by_group["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["key"].as_str().expect("key"))
        .collect();
    assert_eq!(groups.len(), 2, "{by_group}");
    assert!(
        groups.contains(&"ml") && groups.contains(&"cv"),
        "{by_group}"
    );

    // CSV: a header and one line per job, as an attachment; also by Accept.
    let res = c
        .app
        .get_bearer(&format!("/api/v1/accounting?{range}&format=csv"), &boss)
        .await;
    assert_eq!(res.status(), 200);
    let disposition = res.headers()["content-disposition"]
        .to_str()
        .expect("header")
        .to_string();
    assert!(
        disposition.starts_with("attachment; filename="),
        "{disposition}"
    );
    let csv = res.text().await.expect("csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 4, "{csv}");
    assert!(
        lines[0].starts_with("job_id,kind,name,user,account,partition,state,"),
        "{csv}"
    );
    assert!(
        lines[3].starts_with(&format!("{short},job,short,bob,bob,short,COMPLETED,")),
        "{csv}"
    );
    let by_accept = reqwest::Client::new()
        .get(
            c.app
                .url(&format!("/api/v1/accounting?{range}&group_by=user")),
        )
        .bearer_auth(&boss)
        .header("accept", "text/csv")
        .send()
        .await
        .expect("csv");
    assert!(by_accept
        .text()
        .await
        .expect("csv")
        .starts_with("user,jobs,gpu_hours,"));

    // The chart and the page.
    let chart = c
        .app
        .get_bearer(
            &format!("/api/v1/accounting/chart.svg?{range}&group_by=group"),
            &boss,
        )
        .await;
    assert_eq!(chart.headers()["content-type"], "image/svg+xml");
    let svg = chart.text().await.expect("svg");
    assert!(svg.starts_with("<svg") && svg.contains(">\nml\n<"), "{svg}");
    let alice_web = c.app.login("alice", "password-of-some-length").await;
    let page = alice_web
        .get(c.app.url("/accounting"))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(
        html.contains("id=\"usage-chart\"") && html.contains("format=csv"),
        "{html}"
    );
    assert!(
        !html.contains("name=\"user\""),
        "users pick no other user: {html}"
    );

    // sacct with Slurm's columns.
    let bin = crate::fixtures::atrium_bin();
    let sacct = |args: &[&str]| {
        let mut cmd = client(&c, &alice.token, &alice.home, &bin);
        cmd.arg("sacct").args(args);
        run(cmd)
    };
    let ids = format!("{one},{two}");
    let (ok, out, err) = sacct(&[
        "-j",
        &ids,
        "-P",
        "-o",
        "JobID,JobName,State,AllocTRES,NNodes,ReqMem,ExitCode",
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "JobID|JobName|State|AllocTRES|NNodes|ReqMem|ExitCode".to_string(),
            format!("{one}|one|COMPLETED|billing=2,cpu=2,gres/gpu=1,mem=2G,node=1|1|2G|0:0"),
            format!("{one}.batch|batch|COMPLETED|cpu=2,mem=2G,node=1|1||0:0"),
            format!("{two}|two|COMPLETED|billing=4,cpu=4,gres/gpu=2,mem=4G,node=1|1|4G|0:0"),
            format!("{two}.batch|batch|COMPLETED|cpu=4,mem=4G,node=1|1||0:0"),
        ]
    );
    let (ok, out, err) = sacct(&[
        "-j",
        &one,
        "--format",
        "jobid,user,elapsed,start,end,nodelist%6",
    ]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0].split_whitespace().collect::<Vec<_>>(),
        ["JobID", "User", "Elapsed", "Start", "End", "NodeLi"],
        "a header is cut to its width"
    );
    assert!(
        lines[1].starts_with("------------ --------- ---------- "),
        "{out}"
    );
    assert!(
        lines[2].starts_with(&format!("{one:<12}     alice   00:00:0")),
        "{out}"
    );
    assert!(lines[2].ends_with("   head "), "{out}");
    let (ok, out, err) = sacct(&[
        "-j", &ids, "-X", "-A", "alice", "-r", "gpu", "-s", "CD", "-n", "-o", "JobID",
    ]);
    assert!(ok, "{err}");
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        [one.as_str(), two.as_str()]
    );
    let mut unknown = client(&c, &alice.token, &alice.home, &bin);
    let out = unknown
        .args(["sacct", "-o", "JobID,Colour"])
        .output()
        .expect("sacct");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("sacct: error: Invalid field requested: \"Colour\""),
        "{err}"
    );
}
