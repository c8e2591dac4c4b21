//! Benchmark runs end to end: recorded through the API, listed with filters, exported
//! as CSV, charted as SVG, deleted by their owner or an administrator only; bad input
//! stores nothing; the reference runs ship read-only; the sizing examples.

use serde_json::{json, Value};

use crate::fixtures::{spawn_app, TestApp, PASSWORD};

/// A portal with alice and bob (users) and boss (an administrator), each with a
/// `read jobs` token (boss's also `admin`).
struct Portal {
    app: TestApp,
    alice: String,
    bob: String,
    boss: String,
}

async fn portal() -> Portal {
    let app = spawn_app().await;
    let mut tokens = Vec::new();
    for (name, admin) in [("alice", false), ("bob", false), ("boss", true)] {
        app.add_user(name, PASSWORD, admin);
        let web = app.login(name, PASSWORD).await;
        let scopes: &[&str] = if admin {
            &["read", "jobs", "admin"]
        } else {
            &["read", "jobs"]
        };
        tokens.push(app.create_token(&web, "bench", scopes).await);
    }
    let [alice, bob, boss] = <[String; 3]>::try_from(tokens).expect("three tokens");
    Portal {
        app,
        alice,
        bob,
        boss,
    }
}

impl Portal {
    async fn send(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let client = reqwest::Client::new();
        let url = self.app.url(path);
        let request = match method {
            "POST" => client.post(url),
            "DELETE" => client.delete(url),
            _ => client.get(url),
        };
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        let res = request.bearer_auth(token).send().await.expect("request");
        let status = res.status().as_u16();
        let text = res.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str, token: &str) -> Value {
        let (status, body) = self.send("GET", path, token, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    async fn record(&self, token: &str, run: Value) -> Value {
        let (status, body) = self
            .send("POST", "/api/v1/benchmarks", token, Some(run))
            .await;
        assert_eq!(status, 201, "{body}");
        body
    }

    /// The ids of the runs a listing returns.
    async fn ids(&self, query: &str) -> Vec<i64> {
        let body = self
            .get(&format!("/api/v1/benchmarks?{query}"), &self.alice)
            .await;
        body["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .map(|r| r["id"].as_i64().expect("id"))
            .collect()
    }

    async fn text(&self, path: &str) -> (u16, String, String) {
        let res = self.app.get_bearer(path, &self.alice).await;
        let status = res.status().as_u16();
        let kind = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        (status, kind, res.text().await.expect("body"))
    }
}

/// A training run of `model` on `gpus` A100s.
fn training(model: &str, gpus: i64, images_per_sec: f64) -> Value {
    json!({
        "suite": "tf_cnn_benchmarks",
        "model": model,
        "framework": "PyTorch",
        "precision": "amp",
        "batch_size_per_gpu": 256,
        "gpus": gpus,
        "gpu_model": "A100-SXM4-40GB",
        "storage": "lab-nfs",
        "tags": ["nightly", "Lab_1"],
        "started_at": "2025-03-01T10:00:00Z",
        "ended_at": "2025-03-01T10:20:00Z",
        "metrics": [
            {"name": "images_per_sec", "value": images_per_sec, "unit": "images/s"},
            {"name": "storage_mb_per_s", "value": images_per_sec * 0.11, "unit": "MB/s"}
        ]
    })
}

fn fio() -> Value {
    json!({
        "suite": "fio",
        "model": "sequential read",
        "gpus": 1,
        "storage": "ceph",
        "notes": "bs=1M, 4 jobs",
        "metrics": [
            {"name": "read_mb_per_s", "value": 1830.5, "unit": "MB/s"},
            {"name": "read_iops", "value": 1830.0, "unit": "IOPS"}
        ]
    })
}

#[tokio::test]
async fn runs_are_recorded_listed_filtered_and_deleted_by_their_owner_or_an_administrator() {
    let p = portal().await;
    let mut alice_runs = Vec::new();
    for (gpus, images) in [(1, 1000.0), (2, 1900.0), (4, 3600.0)] {
        alice_runs.push(p.record(&p.alice, training("TinyNet", gpus, images)).await);
    }
    let first = &alice_runs[0];
    assert_eq!(first["source"], "local");
    assert_eq!(first["reference"], false);
    assert_eq!(first["user"], "alice");
    assert_eq!(first["nodes"], 1);
    assert_eq!(first["tags"], json!(["nightly", "lab_1"]));
    assert_eq!(first["started_at"], "2025-03-01T10:00:00Z");
    assert_eq!(first["metrics"][0]["name"], "images_per_sec");
    let fio_run = p.record(&p.bob, fio()).await;
    let fio_id = fio_run["id"].as_i64().expect("id");

    let got = p
        .get(&format!("/api/v1/benchmarks/{fio_id}"), &p.alice)
        .await;
    assert_eq!(got["user"], "bob", "everyone sees every run");
    assert_eq!(got["metrics"].as_array().map(Vec::len), Some(2));

    let id = |v: &Value| v["id"].as_i64().expect("id");
    let newest_first: Vec<i64> = alice_runs.iter().rev().map(id).collect();
    assert_eq!(p.ids("model=TinyNet").await, newest_first);
    assert_eq!(p.ids("storage=ceph").await, [fio_id]);
    assert_eq!(p.ids("user=bob").await, [fio_id]);
    assert_eq!(
        p.ids("tag=Lab_1").await.len(),
        3,
        "tags match in any case, `_` literally"
    );
    assert_eq!(p.ids("tag=lab").await, Vec::<i64>::new());
    assert_eq!(p.ids("suite=fio&source=local").await, [fio_id]);
    assert_eq!(p.ids("source=local").await.len(), 4);
    assert_eq!(
        p.ids("source=local&from=2025-03-01&to=2025-03-02")
            .await
            .len(),
        3
    );
    assert_eq!(
        p.ids("source=local&metric=images_per_sec&sort=metric")
            .await,
        [id(&alice_runs[2]), id(&alice_runs[1]), id(&alice_runs[0])]
    );
    assert_eq!(
        p.ids("source=local&sort=gpus&limit=1&offset=1").await.len(),
        1
    );
    let page = p
        .get("/api/v1/benchmarks?source=local&limit=2", &p.alice)
        .await;
    assert_eq!(page["next_offset"], 2);

    // Deleting: not another user's run, but an administrator's, audited; one's own.
    let (status, body) = p
        .send(
            "DELETE",
            &format!("/api/v1/benchmarks/{fio_id}"),
            &p.alice,
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
    let (status, _) = p
        .send(
            "DELETE",
            &format!("/api/v1/benchmarks/{fio_id}"),
            &p.boss,
            None,
        )
        .await;
    assert_eq!(status, 204);
    let (status, _) = p
        .send(
            "GET",
            &format!("/api/v1/benchmarks/{fio_id}"),
            &p.alice,
            None,
        )
        .await;
    assert_eq!(status, 404);
    let audit = p.get("/api/v1/admin/audit", &p.boss).await;
    let entry = audit["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["action"] == "benchmark.delete")
        .expect("the administrator's delete is audited");
    assert_eq!(entry["actor"], "boss");
    assert_eq!(entry["detail"]["before"]["user"], "bob");
    let own = id(&alice_runs[0]);
    let (status, _) = p
        .send(
            "DELETE",
            &format!("/api/v1/benchmarks/{own}"),
            &p.alice,
            None,
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(p.ids("source=local").await.len(), 2);

    // A read-only token may look but not record.
    let web = p.app.login("alice", PASSWORD).await;
    let reader = p.app.create_token(&web, "reader", &["read"]).await;
    let (status, _) = p
        .send("POST", "/api/v1/benchmarks", &reader, Some(fio()))
        .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn reference_runs_ship_read_only() {
    let p = portal().await;
    let reference = p.get("/api/v1/benchmarks?source=reference", &p.alice).await;
    let runs = reference["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 34, "every published row");
    assert!(runs
        .iter()
        .all(|r| r["reference"] == true && r["user"] == ""));
    let dgx = p
        .get("/api/v1/benchmarks?source=reference&model=ResNet-50&gpu_model=V100-PCIE-32GB&storage=Isilon%20F800&sort=gpus", &p.alice)
        .await;
    let dgx = dgx["runs"].as_array().expect("runs");
    assert_eq!(dgx.len(), 6);
    assert_eq!(dgx[0]["source"], "isilon-dss8440-2019");
    assert_eq!(dgx[0]["gpus"], 1);
    let sustained = dgx
        .iter()
        .find(|r| r["metrics"].as_array().is_some_and(|m| m.len() == 2))
        .expect("the run with its storage throughput");
    assert_eq!(sustained["metrics"][1]["name"], "storage_mb_per_s");
    assert_eq!(sustained["metrics"][1]["value"], 831.0);

    let some = runs[0]["id"].as_i64().expect("id");
    for token in [&p.alice, &p.boss] {
        let (status, body) = p
            .send("DELETE", &format!("/api/v1/benchmarks/{some}"), token, None)
            .await;
        assert_eq!(status, 403, "{body}");
        assert!(
            body["message"].as_str().unwrap_or("").contains("reference"),
            "{body}"
        );
    }
    assert_eq!(p.ids("source=reference").await.len(), 34);

    let sizing = p.get("/api/v1/benchmarks/reference/sizing", &p.alice).await;
    let rows = sizing["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0]["mb_per_s_per_gpu"], 90.0);
    assert_eq!(rows[0]["gpus_per_f800_node"], 27.0);
    assert_eq!(
        rows[3]["mb_per_s_per_gpu"],
        Value::Null,
        "empty fields are absent"
    );
}

#[tokio::test]
async fn bad_runs_get_400_or_413_and_store_nothing() {
    let p = portal().await;
    let too_many: Vec<Value> = (0..65)
        .map(|i| json!({"name": format!("m{i}"), "value": 1.0, "unit": ""}))
        .collect();
    let bad = |edit: &dyn Fn(&mut Value)| {
        let mut run = training("TinyNet", 2, 1900.0);
        edit(&mut run);
        run
    };
    let cases: Vec<(&str, Value)> = vec![
        ("gpus", bad(&|r| r["gpus"] = json!(-4))),
        ("gpus", bad(&|r| r["gpus"] = json!(100_001))),
        ("nodes", bad(&|r| r["nodes"] = json!(0))),
        ("suite", bad(&|r| r["suite"] = json!("linpack"))),
        (
            "metrics",
            bad(&|r| r["metrics"][0]["name"] = json!("Images/s")),
        ),
        ("metrics", bad(&|r| r["metrics"] = json!(too_many.clone()))),
        ("model", bad(&|r| r["model"] = json!("x".repeat(201)))),
        ("notes", bad(&|r| r["notes"] = json!("n".repeat(4001)))),
        ("tags", bad(&|r| r["tags"] = json!(["two words"]))),
        (
            "ended_at",
            bad(&|r| r["ended_at"] = json!("2025-02-01T00:00:00Z")),
        ),
        ("job_id", bad(&|r| r["job_id"] = json!(424242))),
        ("unknown field", bad(&|r| r["colour"] = json!("red"))),
    ];
    for (field, run) in cases {
        let (status, body) = p
            .send("POST", "/api/v1/benchmarks", &p.alice, Some(run))
            .await;
        assert_eq!(status, 400, "{field}: {body}");
        assert_eq!(body["error"], "bad_request", "{body}");
        let message = body["message"].as_str().unwrap_or("");
        assert!(
            message.contains(field.split(' ').next().unwrap_or(field)),
            "{field}: {message}"
        );
    }
    // JSON has no NaN and no infinite numbers: such bodies are malformed.
    let client = reqwest::Client::new();
    let raw = |body: String| {
        client
            .post(p.app.url("/api/v1/benchmarks"))
            .bearer_auth(&p.alice)
            .header("content-type", "application/json")
            .body(body)
    };
    for value in ["NaN", "1e999", "-Infinity"] {
        let body = format!(
            r#"{{"suite":"custom","gpus":1,"metrics":[{{"name":"x","value":{value},"unit":""}}]}}"#
        );
        let res = raw(body).send().await.expect("post");
        assert_eq!(res.status(), 400, "{value}");
    }
    // Over the body limit (1 MiB by default).
    let huge = format!(
        r#"{{"suite":"custom","gpus":1,"notes":"{}"}}"#,
        "x".repeat(2 * 1024 * 1024)
    );
    let res = raw(huge).send().await.expect("post");
    assert_eq!(res.status(), 413);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"], "payload_too_large");

    assert_eq!(
        p.ids("source=local").await,
        Vec::<i64>::new(),
        "nothing was stored"
    );
    let (status, body) = p
        .send("GET", "/api/v1/benchmarks?source=mine", &p.alice, None)
        .await;
    assert_eq!(status, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("source:"),
        "{body}"
    );
}

#[tokio::test]
async fn the_csv_export_has_a_line_per_run_and_a_column_per_metric() {
    let p = portal().await;
    p.record(&p.alice, training("TinyNet", 1, 1000.0)).await;
    p.record(&p.bob, fio()).await;
    let (status, kind, csv) = p
        .text("/api/v1/benchmarks?source=local&format=csv&sort=gpus")
        .await;
    assert_eq!(status, 200);
    assert!(kind.starts_with("text/csv"), "{kind}");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    let header: Vec<&str> = lines[0].split(',').collect();
    assert_eq!(&header[..3], ["id", "source", "suite"]);
    for column in [
        "metric:images_per_sec [images/s]",
        "metric:read_iops [IOPS]",
        "metric:read_mb_per_s [MB/s]",
        "metric:storage_mb_per_s [MB/s]",
    ] {
        assert!(header.contains(&column), "{column} in {}", lines[0]);
    }
    let iops = header
        .iter()
        .position(|c| *c == "metric:read_iops [IOPS]")
        .expect("column");
    assert!(csv.contains("\"bs=1M, 4 jobs\""), "quoted: {csv}");
    let fio_line = lines
        .iter()
        .find(|l| l.contains(",fio,"))
        .expect("fio line");
    // The notes field holds a comma: count columns from the end.
    let from_end = header.len() - iops;
    let fields: Vec<&str> = fio_line.rsplit(',').collect();
    assert_eq!(fields[from_end - 1], "1830", "{fio_line}");
}

/// The SVG at `path`, checked to be well-formed XML; the number of its points.
async fn chart_points(p: &Portal, path: &str) -> usize {
    let (status, kind, svg) = p.text(path).await;
    assert_eq!(status, 200, "{svg}");
    assert_eq!(kind, "image/svg+xml");
    let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{e}: {svg}"));
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.tag_name().name() == "circle")
        .count()
}

#[tokio::test]
async fn charts_are_svg_with_a_point_per_gpu_count() {
    let p = portal().await;
    for (gpus, images) in [(1, 1000.0), (2, 1900.0), (4, 3600.0), (4, 3500.0)] {
        p.record(&p.alice, training("TinyNet", gpus, images)).await;
    }
    let scaling = "/api/v1/benchmarks/chart/scaling.svg";
    assert_eq!(
        chart_points(&p, &format!("{scaling}?model=TinyNet&source=local")).await,
        3
    );
    let (_, _, svg) = p.text(&format!("{scaling}?model=TinyNet")).await;
    assert!(svg.contains("90%"), "3600 of 4000 ideal: {svg}");

    // Local against reference: ResNet-50 on the DSS 8440's GPUs and storage.
    let mut local = training("ResNet-50", 1, 800.0);
    local["gpu_model"] = json!("V100-PCIE-32GB");
    local["storage"] = json!("Isilon F800");
    p.record(&p.alice, local.clone()).await;
    local["gpus"] = json!(8);
    local["metrics"][0]["value"] = json!(6000.0);
    p.record(&p.alice, local).await;
    let both = format!("{scaling}?model=ResNet-50&gpu_model=V100-PCIE-32GB&storage=Isilon%20F800");
    assert_eq!(
        chart_points(&p, &both).await,
        2 + 3,
        "local 1 and 8 GPUs; reference 1, 8, 10"
    );
    let (_, _, svg) = p.text(&both).await;
    assert!(
        svg.contains("isilon-dss8440-2019") && svg.contains(">\nlocal\n<"),
        "{svg}"
    );

    let storage = "/api/v1/benchmarks/chart/storage.svg?model=ResNet-50&gpu_model=V100-PCIE-32GB";
    assert!(chart_points(&p, storage).await >= 5);
    let (status, body) = p
        .send("GET", &format!("{scaling}?metric=Images"), &p.alice, None)
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        chart_points(&p, &format!("{scaling}?model=NoSuchNet")).await,
        0
    );
}

#[tokio::test]
async fn sizing_reproduces_the_published_examples() {
    let p = portal().await;
    let small = p
        .get(
            "/api/v1/sizing?workload=training%20small%20images%20(115%20KB)%20ResNet-50&gpus=80",
            &p.alice,
        )
        .await;
    let n = &small["nodes_needed"];
    assert_eq!(n["demand_mb_per_s"], 7200.0);
    assert_eq!(n["nodes_approx"], 2.9);
    assert_eq!(n["nodes_to_provision"], 3);
    assert_eq!(small["node_mb_per_s"]["value"], 2430.0);
    assert_eq!(small["node"], "F800 node");
    assert_eq!(
        n["formula"],
        "80 GPUs × 90 MB/s = 7,200 MB/s; 7,200 MB/s ÷ 2,430 MB/s per F800 node = 2.96 ≈ 2.9 F800 nodes (provision 3)"
    );
    let large = p
        .get("/api/v1/sizing?workload=training%20large%20images%20(1.3%20MB)%20Inception-v4&gpus=72&storage_nodes=8", &p.alice)
        .await;
    assert_eq!(large["nodes_needed"]["demand_mb_per_s"], 21600.0);
    assert_eq!(large["nodes_needed"]["nodes_approx"], 8.0);
    assert_eq!(large["nodes_needed"]["nodes_to_provision"], 8);
    assert_eq!(large["gpus_fed"]["gpus"], 72);

    // From a recorded run: 360 MB/s on 4 GPUs is 90 MB/s per GPU.
    let mut run = training("ResNet-50", 4, 2900.0);
    run["metrics"][1]["value"] = json!(360.0);
    let run = p.record(&p.alice, run).await;
    let from_run = p
        .get(
            &format!(
                "/api/v1/sizing?from_run={}&node_mb_per_s=2430&gpus=80&headroom=10",
                run["id"]
            ),
            &p.alice,
        )
        .await;
    assert_eq!(from_run["mb_per_s_per_gpu"]["value"], 90.0);
    assert_eq!(
        from_run["nodes_needed"]["nodes_to_provision"], 4,
        "7920 / 2430 = 3.26"
    );
    for (query, field) in [
        ("gpus=0&mb_per_s_per_gpu=90&node_mb_per_s=1", "gpus"),
        ("gpus=8&mb_per_s_per_gpu=90", "node_mb_per_s"),
        ("gpus=8&from_run=999999&node_mb_per_s=1", "from_run"),
        ("gpus=8&workload=baking", "workload"),
    ] {
        let (status, body) = p
            .send("GET", &format!("/api/v1/sizing?{query}"), &p.alice, None)
            .await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["message"].as_str().unwrap_or("").starts_with(field),
            "{body}"
        );
    }
}

#[tokio::test]
async fn the_pages_show_runs_charts_and_sizing() {
    let p = portal().await;
    let run = p.record(&p.alice, training("TinyNet", 2, 1900.0)).await;
    let web = p.app.login("alice", PASSWORD).await;
    let page = |path: String| {
        let web = web.clone();
        let url = p.app.url(&path);
        async move {
            let res = web.get(url).send().await.expect("page");
            (res.status().as_u16(), res.text().await.expect("html"))
        }
    };
    let (status, html) = page("/benchmarks?model=TinyNet".into()).await;
    assert_eq!(status, 200);
    assert!(html.contains("id=\"nav-benchmarks\""), "{html}");
    assert!(
        html.contains("id=\"benchmark-runs\"") && html.contains("1,900"),
        "{html}"
    );
    assert!(
        html.contains("/api/v1/benchmarks/chart/scaling.svg?model=TinyNet"),
        "{html}"
    );
    assert!(
        html.contains("/api/v1/benchmarks?model=TinyNet&#38;format=csv"),
        "{html}"
    );
    let (status, html) = page(format!("/benchmarks/{}", run["id"])).await;
    assert_eq!(status, 200);
    assert!(html.contains("id=\"delete-run\""), "{html}");
    let (status, html) =
        page("/sizing?workload=training+small+images+%28115+KB%29+ResNet-50&gpus=80".into()).await;
    assert_eq!(status, 200);
    assert!(html.contains("≈ 2.9 F800 nodes"), "{html}");
    let doc: Value = reqwest::get(p.app.url("/api/v1/openapi.json"))
        .await
        .expect("openapi")
        .json()
        .await
        .expect("json");
    for path in [
        "/api/v1/benchmarks",
        "/api/v1/benchmarks/{id}",
        "/api/v1/benchmarks/chart/scaling.svg",
        "/api/v1/sizing",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is documented");
    }
    let (status, html) = page("/sizing?gpus=-1".into()).await;
    assert_eq!(status, 400);
    assert!(html.contains("id=\"sizing-error\""), "{html}");
}

#[tokio::test]
async fn the_fio_starter_job_records_its_outcome_linked_to_the_job() {
    let c = crate::fixtures::JobCluster::start(0).await;
    let user = c.user("fiona").await;
    let script = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../templates/starters/jobs/fio-seqread.sh"),
    )
    .expect("the fio starter");
    let res = c
        .submit(
            &user,
            serde_json::json!({
                "script": script,
                "working_directory": user.home,
                "environment": {"FIO_SIZE": "8M", "FIO_JOBS": "1", "FIO_RUNTIME": "1"},
                "options": {"cpus-per-task": 1},
            }),
        )
        .await;
    let status = res.status();
    let body: serde_json::Value = res.json().await.expect("json");
    assert_eq!(status, 201, "{body}");
    let id = body["id"].as_str().expect("id").to_string();
    let job = c
        .wait_for(
            &user,
            &id,
            &["COMPLETED", "FAILED"],
            std::time::Duration::from_secs(120),
        )
        .await;
    assert_eq!(job["state"], "COMPLETED", "{job}\n{}", c.output(&user, &id));
    assert_eq!(job["benchmark"], "fio", "{job}");
    let note = atrium_tests::support::until(
        "the benchmark to be read",
        std::time::Duration::from_secs(60),
        || {
            let fut = c.job(&user, &id);
            async move { fut.await["benchmark_note"].as_str().map(str::to_string) }
        },
    )
    .await
    .expect("a note");
    let run_id: i64 = note
        .strip_prefix("recorded as benchmark run ")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("not recorded: {note}"));
    let run: serde_json::Value = c
        .app
        .get_bearer(&format!("/api/v1/benchmarks/{run_id}"), &user.token)
        .await
        .json()
        .await
        .expect("run");
    assert_eq!(run["suite"], "fio", "{run}");
    assert_eq!(run["job_id"].as_i64(), id.parse::<i64>().ok(), "{run}");
    let read = run["metrics"]
        .as_array()
        .expect("metrics")
        .iter()
        .find(|m| m["name"] == "read_mb_per_s")
        .unwrap_or_else(|| panic!("no read_mb_per_s: {run}"));
    assert!(read["value"].as_f64().unwrap_or(0.0) > 0.0, "{run}");
    assert_eq!(read["unit"], "MB/s", "{run}");
}

#[tokio::test]
async fn chromium_opens_the_benchmarks_page_and_its_charts() {
    use atrium_tests::support::browser;
    use fantoccini::Locator;
    let app = crate::fixtures::spawn_app().await;
    let password = app.admin_password.clone().expect("admin password");
    let b = browser().await.expect("chromium");
    b.goto(&app.url("/login")).await.expect("open login");
    crate::fixtures::browser::submit_login(&b, "admin", &password).await;
    // Logged in (the home page is there) before going on: a navigation started while
    // the login is still answered would cancel it.
    b.wait()
        .for_element(Locator::Id("greeting"))
        .await
        .expect("home page");
    b.goto(&app.url("/benchmarks?model=ResNet-50"))
        .await
        .expect("benchmarks page");
    let runs = b
        .wait()
        .for_element(Locator::Id("benchmark-runs"))
        .await
        .expect("the runs table")
        .text()
        .await
        .expect("text");
    assert!(runs.contains("ResNet-50"), "{runs}");
    // The charts are SVG drawn by the server: the browser decodes them as images.
    for chart in ["scaling-chart", "storage-chart"] {
        let decoded = atrium_tests::support::until(
            &format!("{chart} to load"),
            std::time::Duration::from_secs(20),
            || {
                let b = b.clone();
                async move {
                    let width = b
                        .execute(
                            &format!(
                                "const i = document.getElementById('{chart}'); \
                                 return i && i.complete ? i.naturalWidth : 0;"
                            ),
                            vec![],
                        )
                        .await
                        .ok()?;
                    width.as_u64().filter(|w| *w > 0)
                }
            },
        )
        .await;
        assert!(decoded.is_ok(), "{chart} did not load as an image");
    }
    b.find(Locator::Id("sizing-link"))
        .await
        .expect("sizing link")
        .click()
        .await
        .expect("open sizing");
    let url = b.current_url().await.expect("url");
    assert_eq!(url.path(), "/sizing");
    b.close().await.expect("close");
}
