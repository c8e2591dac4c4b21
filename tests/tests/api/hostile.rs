//! Hostile submissions: each attack that used to take the portal's memory
//! (overlapping huge arrays, `%x` patterns under a long name, host lists of enormous
//! expansion, thousands of directives, an over-size script, a huge environment) is
//! refused quickly through the JSON API and through `atrium sbatch`, with a 400
//! naming the field; the portal's peak memory stays small, nothing is stored, and
//! the portal is healthy after a restart.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::fixtures::cli::{client, run};
use crate::fixtures::{
    atrium_bin, cluster_config, eventually, private_root, spawn_with, JobCluster, Options,
};

/// The script bound the portal runs with here (the default is 4 MiB, above the
/// HTTP body limit).
const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// A hang guard, not a timing assertion: each refusal takes milliseconds.
const ANSWERED_WITHIN: Duration = Duration::from_secs(5);
/// The portal's peak resident memory after every attack.
const PEAK_RSS_LIMIT: u64 = 200 << 20;

/// One attack: the script and options it is sent with, as the API takes them and as
/// `atrium sbatch` arguments, and the field the refusal must name.
struct Attack {
    what: &'static str,
    script: String,
    options: Vec<(&'static str, String)>,
    environment: Vec<(String, String)>,
    field: &'static str,
    /// The script line the refusal names, for a directive refused as it is read.
    line: Option<usize>,
}

fn script(directives: &[String]) -> String {
    let mut s = String::from("#!/bin/bash\n");
    for d in directives {
        s.push_str("#SBATCH ");
        s.push_str(d);
        s.push('\n');
    }
    s.push_str("true\n");
    s
}

fn attacks() -> Vec<Attack> {
    let overlapping = vec!["0-999999"; 100].join(",");
    let name = "j".repeat(255);
    let pattern = "%x".repeat(2000);
    let long_hosts = format!("{}[0-60000]", "n".repeat(3000));
    let many_hosts = "gpu[0-9999999]".to_string();
    let plain = || script(&["-J hostile".to_string()]);
    let many_vars: Vec<(String, String)> =
        (0..5000).map(|i| (format!("V{i}"), "x".into())).collect();
    let big_vars: Vec<(String, String)> = (0..5)
        .map(|i| (format!("BIG{i}"), "y".repeat(120 * 1024)))
        .collect();
    let attack = |what, script, options, field| Attack {
        what,
        script,
        options,
        environment: Vec::new(),
        field,
        line: None,
    };
    vec![
        Attack {
            line: Some(2),
            ..attack(
                "overlapping huge arrays in a directive",
                script(&[format!("--array={overlapping}")]),
                vec![],
                "array",
            )
        },
        attack(
            "overlapping huge arrays as an option",
            plain(),
            vec![("array", overlapping.clone())],
            "array",
        ),
        attack(
            "%x many times under a long name",
            script(&[format!("-J {name} -o {pattern}")]),
            vec![],
            "output",
        ),
        attack(
            "%x many times as options",
            plain(),
            vec![("job-name", name.clone()), ("error", pattern.clone())],
            "error",
        ),
        Attack {
            line: Some(2),
            ..attack(
                "a host list of long names",
                script(&[format!("--nodelist={long_hosts}")]),
                vec![],
                "nodelist",
            )
        },
        attack(
            "a host list of enormous expansion as an option",
            plain(),
            vec![("exclude", many_hosts)],
            "exclude",
        ),
        Attack {
            // The 257th directive, after the `#!` line.
            line: Some(258),
            ..attack(
                "a thousand directives",
                script(&vec!["--hold".to_string(); 1000]),
                vec![],
                "script",
            )
        },
        attack(
            "an over-size script",
            format!(
                "#!/bin/bash\n{}true\n",
                "# padding\n".repeat(MAX_SCRIPT_BYTES / 10 + 1)
            ),
            vec![],
            "script",
        ),
        Attack {
            environment: many_vars,
            ..attack("a huge environment (count)", plain(), vec![], "environment")
        },
        Attack {
            environment: big_vars,
            ..attack("a huge environment (size)", plain(), vec![], "environment")
        },
    ]
}

/// The portal's peak resident set (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

#[tokio::test]
async fn hostile_submissions_are_refused_quickly_naming_the_field() {
    let root = private_root();
    let config = cluster_config(root.path(), 0).replace(
        "[jobs]\n",
        &format!("[jobs]\nmax_script_bytes = {MAX_SCRIPT_BYTES}\n"),
    );
    let app = spawn_with(Options {
        extra_config: config,
        ..Default::default()
    })
    .await;
    let mut c = JobCluster::on(app, root);
    let mallory = c.user("mallory").await;
    let pid = c.app.pid().expect("running");

    for a in attacks() {
        let options: serde_json::Map<String, Value> = a
            .options
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.clone())))
            .collect();
        let environment: serde_json::Map<String, Value> = a
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let started = Instant::now();
        let res = c
            .submit(
                &mallory,
                json!({"script": a.script, "options": options, "environment": environment,
                       "working_directory": mallory.home}),
            )
            .await;
        let took = started.elapsed();
        let status = res.status();
        let body: Value = res.json().await.expect("json body");
        assert_eq!(status, 400, "{}: {body}", a.what);
        assert_eq!(body["error"], "bad_request", "{}: {body}", a.what);
        assert_eq!(body["field"], a.field, "{}: {body}", a.what);
        let message = body["message"].as_str().expect("message");
        assert!(message.starts_with(a.field), "{}: {message}", a.what);
        if let Some(line) = a.line {
            assert!(message.contains(&format!(": line {line}: ")), "{message}");
        }
        assert!(took < ANSWERED_WITHIN, "{}: answered in {took:?}", a.what);

        // The same through `atrium sbatch`: a script file, options as flags, the
        // environment of the command.
        let file = mallory.home.join("hostile.sh");
        std::fs::write(&file, &a.script).expect("script");
        let mut cmd = client(&c, &mallory.token, &mallory.home, &atrium_bin());
        cmd.arg("sbatch");
        for (k, v) in &a.options {
            cmd.arg(format!("--{k}={v}"));
        }
        cmd.arg("hostile.sh");
        cmd.envs(a.environment.iter().map(|(k, v)| (k, v)));
        let started = Instant::now();
        let (ok, _, err) = run(cmd);
        let took = started.elapsed();
        assert!(!ok, "{}: the CLI submission was accepted", a.what);
        assert!(
            err.starts_with(&format!("sbatch: error: {}: ", a.field)),
            "{}: {err}",
            a.what
        );
        if let Some(line) = a.line {
            assert!(
                err.contains(&format!(": line {line}: ")),
                "{}: {err}",
                a.what
            );
        }
        assert!(
            took < ANSWERED_WITHIN,
            "{}: CLI answered in {took:?}",
            a.what
        );
    }

    let peak = peak_rss(pid);
    assert!(
        peak < PEAK_RSS_LIMIT,
        "the portal's peak RSS was {} MB",
        peak >> 20
    );
    assert_eq!(c.job_count(&mallory).await, 0, "nothing was stored");

    let status = c.app.terminate();
    assert!(status.success(), "{status:?}");
    c.app.restart();
    let url = c.app.url("/readyz");
    eventually("ready after a restart", Duration::from_secs(30), || {
        let url = url.clone();
        async move {
            reqwest::get(url)
                .await
                .is_ok_and(|r| r.status().is_success())
        }
    })
    .await;
    assert_eq!(c.job_count(&mallory).await, 0, "nothing after a restart");
    let pid = c.app.pid().expect("running");
    assert!(peak_rss(pid) < PEAK_RSS_LIMIT);
}
