//! `/metrics` as Prometheus reads it: the queue, the GPUs and the scheduler's work,
//! from a portal that ran jobs.

use std::time::Duration;

use crate::fixtures::JobCluster;

/// The value of the sample of `name` whose labels include every one of `labels`
/// (summed over the samples that match).
fn value(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, v)) = line.rsplit_once(' ') else {
            continue;
        };
        let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
        if metric != name
            || !labels
                .iter()
                .all(|(k, want)| rest.contains(&format!("{k}=\"{want}\"")))
        {
            continue;
        }
        let v: f64 = v.parse().expect("a sample's value");
        found = Some(found.unwrap_or(0.0) + v);
    }
    found
}

fn at_least(text: &str, name: &str, labels: &[(&str, &str)], n: f64) {
    let v = value(text, name, labels).unwrap_or(0.0);
    assert!(v >= n, "{name} {labels:?} is {v}, not at least {n}: {text}");
}

#[tokio::test]
async fn metrics_show_the_queue_the_gpus_and_the_scheduler_at_work() {
    let c = JobCluster::start(2).await;
    let alice = c.user("alice").await;
    let done = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --gres=gpu:1\ntrue\n")
        .await;
    c.wait_for(&alice, &done, &["COMPLETED"], Duration::from_secs(60))
        .await;
    let long = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --gres=gpu:1\nsleep 120\n")
        .await;
    c.wait_for(&alice, &long, &["RUNNING"], Duration::from_secs(60))
        .await;
    c.sbatch(
        &alice,
        "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --hold\ntrue\n",
    )
    .await;

    let admin = c
        .app
        .login("admin", c.app.admin_password.as_deref().expect("pw"))
        .await;
    let token = c.app.create_token(&admin, "prometheus", &["admin"]).await;
    let text = c.app.api(&token).text("/metrics").await.1;

    let jobs = |state| {
        value(
            &text,
            "atrium_jobs",
            &[("partition", "gpu"), ("state", state)],
        )
    };
    assert_eq!(jobs("RUNNING"), Some(1.0), "{text}");
    assert_eq!(jobs("PENDING"), Some(1.0), "{text}");
    assert_eq!(
        jobs("COMPLETED"),
        None,
        "jobs that are over are not in the queue"
    );
    assert_eq!(
        value(&text, "atrium_pending_jobs", &[("reason", "JobHeldUser")]),
        Some(1.0),
        "{text}"
    );
    let slices = |state| {
        value(
            &text,
            "atrium_gpu_slices",
            &[("node", "head"), ("state", state)],
        )
    };
    assert_eq!(slices("allocated"), Some(1.0), "{text}");
    assert_eq!(slices("free"), Some(1.0), "{text}");
    at_least(
        &text,
        "atrium_scheduler_pass_duration_seconds_count",
        &[],
        1.0,
    );
    at_least(
        &text,
        "atrium_scheduler_decisions_total",
        &[("decision", "start")],
        2.0,
    );
    at_least(&text, "atrium_job_queue_wait_seconds_count", &[], 2.0);
    at_least(
        &text,
        "atrium_store_commit_duration_seconds_count",
        &[],
        3.0,
    );
    // What this portal did not do is there, at zero: LDAP, Slurm, the proxy, sessions.
    for family in [
        "atrium_ldap_bind_duration_seconds_count",
        "atrium_ldap_binds_total",
        "atrium_slurm_poll_duration_seconds_count",
        "atrium_slurm_poll_failures_total",
        "atrium_proxy_requests_total",
        "atrium_proxy_websocket_messages_total",
        "atrium_session_ready_seconds_count",
        "atrium_job_gpus_sampled",
        "atrium_job_gpus_idle",
    ] {
        assert_eq!(value(&text, family, &[]), Some(0.0), "{family}: {text}");
    }

    // Every metric the dashboard and the alert rules in deploy/ ask for is there.
    let families: std::collections::BTreeSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(deploy.join("grafana/atrium.json")).expect("the dashboard"),
    )
    .expect("the dashboard's JSON");
    let mut queries: Vec<String> = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            queries.push(target["expr"].as_str().expect("expr").to_string());
        }
    }
    assert!(queries.len() >= 15, "{queries:?}");
    queries.push(
        std::fs::read_to_string(deploy.join("prometheus/atrium-alerts.yml")).expect("the alerts"),
    );
    let mut asked = std::collections::BTreeSet::new();
    for query in &queries {
        let mut rest = query.as_str();
        while let Some(at) = rest.find("atrium_") {
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[at + name.len()..];
            asked.insert(name);
        }
    }
    assert!(asked.len() >= 15, "{asked:?}");
    for name in &asked {
        let family = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .filter(|base| families.contains(base))
            .unwrap_or(name);
        assert!(
            families.contains(family),
            "{name} is asked for in deploy/ but not in /metrics: {families:?}"
        );
    }

    // Prometheus's own tools: the exposition follows its naming conventions, and the
    // alert rules load.
    promtool_checks(&text, &deploy.join("prometheus/atrium-alerts.yml"));

    // The queue moves: what the next scrape says follows it.
    let cancelled = reqwest::Client::new()
        .delete(c.app.url(&format!("/api/v1/jobs/{long}")))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("cancel");
    assert!(cancelled.status().is_success(), "{}", cancelled.status());
    c.wait_for(&alice, &long, &["CANCELLED"], Duration::from_secs(60))
        .await;
    let text = c.app.api(&token).text("/metrics").await.1;
    assert_eq!(
        value(&text, "atrium_jobs", &[("state", "RUNNING")]),
        None,
        "{text}"
    );
    assert_eq!(
        value(&text, "atrium_gpu_slices", &[("state", "allocated")]),
        Some(0.0),
        "{text}"
    );
    at_least(
        &text,
        "atrium_scheduler_decisions_total",
        &[("decision", "signal")],
        1.0,
    );
}

/// `promtool check metrics` on a scrape (its lint: units in names, `_total` counters,
/// help text …) and `promtool check rules` on the alert rules. promtool comes with
/// Debian's `prometheus` (tests/install-deps.sh); without it the checks are skipped,
/// except in CI.
fn promtool_checks(scrape: &str, rules: &std::path::Path) {
    use std::io::Write;
    let promtool = std::path::Path::new("/usr/bin/promtool");
    if !promtool.exists() {
        assert!(
            !atrium_tests::support::in_ci(),
            "promtool is missing (tests/install-deps.sh installs prometheus)"
        );
        eprintln!("promtool is not installed: the exposition and the rules are not linted");
        return;
    }
    let mut lint = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool check metrics");
    lint.stdin
        .take()
        .expect("stdin")
        .write_all(scrape.as_bytes())
        .expect("write the scrape");
    let out = lint.wait_with_output().expect("promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}"
    );
    let out = std::process::Command::new(promtool)
        .args(["check", "rules"])
        .arg(rules)
        .output()
        .expect("promtool check rules");
    assert!(
        out.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
