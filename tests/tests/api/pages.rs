//! Every page, in headless Chromium, as a user and as an administrator, at 1,400 px
//! and at 400 px wide: the document never scrolls sideways, the browser logs no
//! console error, and axe-core (npm, injected into the page) finds no serious or
//! critical accessibility violation.
//!
//! The pages are the GET routes the portal's page modules register
//! (`server/src/http/pages/**/*.rs`, read from the sources, so a page added later is
//! visited too); each `{parameter}` is filled with real data made first: jobs (one
//! running, one ended), a session (when the Jupyter environment is there), a
//! benchmark run, a quota, GPUs with MIG slices and shares.
//!
//! With `ATRIUM_SCREENSHOTS=<dir>`, the dashboard, the start form, a job's page and
//! the GPU map are saved there as PNGs at 1,400 px (the README's pictures).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fantoccini::wd::WebDriverCompatibleCommand;
use serde_json::{json, Value};

use crate::fixtures::sessions::SessionCluster;
use crate::fixtures::{cluster_config, private_root, spawn_with, Options, TestApp, PASSWORD};
use atrium_tests::support::{browser, jupyter, until, Browser};

/// Where `axe.min.js` is (tests/install-deps.sh puts it in the default).
const AXE_ENV: &str = "ATRIUM_TEST_AXE";
const AXE_DEFAULT: &str = "/opt/atrium-test/axe/node_modules/axe-core/axe.min.js";
/// Where the README's screenshots go when set.
const SCREENSHOTS_ENV: &str = "ATRIUM_SCREENSHOTS";
const WIDTHS: [u32; 2] = [1400, 400];

/// The GET routes of the portal's pages, from the sources of its page modules:
/// every `.route("PATH", web::get()…)`.
fn page_routes() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../server/src/http/pages");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    let mut routes = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("page source");
        routes.extend(get_routes_in(&source));
    }
    routes.sort();
    routes.dedup();
    routes
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("pages folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The paths of `.route("PATH", web::get()…)` in `source`.
fn get_routes_in(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in source.match_indices(".route(") {
        let rest = source[i + ".route(".len()..].trim_start();
        let Some(rest) = rest.strip_prefix('"') else {
            continue;
        };
        let Some(end) = rest.find('"') else { continue };
        let path = &rest[..end];
        let handler = rest[end..].split(".route(").next().unwrap_or("");
        let handler = handler.split(';').next().unwrap_or("");
        if handler.contains("web::get()") {
            out.push(path.to_string());
        }
    }
    out
}

#[test]
fn routes_are_read_from_the_sources() {
    let routes = get_routes_in(
        "cfg.route(\"/\", web::get().to(home::show))\n  .route(\n   \"/x/{id}\",\n   web::get().to(x::show),\n  )\n  .route(\"/x\", web::post().to(x::post));",
    );
    assert_eq!(routes, vec!["/", "/x/{id}"]);
    let all = page_routes();
    for page in ["/", "/jobs", "/jobs/{id}", "/cluster", "/profile", "/admin"] {
        assert!(all.iter().any(|r| r == page), "{page} in {all:?}");
    }
}

/// Real data behind the routes' parameters.
struct Data {
    job: String,
    /// A job whose script failed (exit 3), and an array of 8 with two running.
    failed: String,
    array: String,
    session: Option<i64>,
    benchmark: i64,
    quota: i64,
    user: String,
    campaign: i64,
}

/// `route` with each `{parameter}` filled from `data` by the segment before it;
/// `None` for a route that is no page to look at (the hub links redirect into a
/// session).
fn instance(route: &str, data: &Data) -> Option<String> {
    if route.starts_with("/hub/") {
        return None;
    }
    let mut out = Vec::new();
    let mut previous = "";
    for segment in route.split('/') {
        if segment.starts_with('{') {
            let value = match previous {
                "jobs" => data.job.clone(),
                "sessions" => data.session?.to_string(),
                "benchmarks" => data.benchmark.to_string(),
                "quotas" => data.quota.to_string(),
                "users" => data.user.clone(),
                "campaigns" => data.campaign.to_string(),
                "nodes" => "head".to_string(),
                _ => panic!(
                    "the page test has no value for {segment} in {route}: add one in pages.rs's instance()"
                ),
            };
            out.push(value);
        } else {
            out.push(segment.to_string());
        }
        previous = segment;
    }
    Some(out.join("/"))
}

/// chromedriver's log of the browser's console since the last read (needs
/// `goog:loggingPrefs`, which `support::browser` asks for).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &reqwest::Url,
        session_id: Option<&str>,
    ) -> Result<reqwest::Url, <reqwest::Url as std::str::FromStr>::Err> {
        base_url.join(&format!("session/{}/se/log", session_id.unwrap_or("")))
    }

    fn method_and_body(&self, _: &reqwest::Url) -> (reqwest::Method, Option<String>) {
        (
            reqwest::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

/// The console's errors since the last read.
async fn console_errors(b: &Browser) -> Vec<String> {
    let log = b.issue_cmd(BrowserLog).await.expect("browser log");
    log.as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Make the page's viewport `width` px wide (the window's frame, if any, added).
async fn set_width(b: &Browser, width: u32) {
    b.set_window_size(width, 900).await.expect("window size");
    let inner = b
        .execute("return window.innerWidth", vec![])
        .await
        .expect("innerWidth")
        .as_u64()
        .unwrap_or(u64::from(width)) as u32;
    if inner != width {
        b.set_window_size(width + (width - inner.min(width)), 900)
            .await
            .expect("window size");
    }
}

/// axe-core's serious and critical violations on the page, one line each with the
/// selectors of the nodes.
async fn axe_violations(b: &Browser, axe: &str) -> Vec<String> {
    b.execute(&format!("{axe}\nreturn true;"), vec![])
        .await
        .expect("inject axe-core");
    let result = b
        .execute_async(
            "const done = arguments[arguments.length - 1];
             axe.run(document, { resultTypes: ['violations'] })
               .then(r => done(r.violations
                 .filter(v => v.impact === 'serious' || v.impact === 'critical')
                 .map(v => ({ id: v.id, impact: v.impact, help: v.help,
                              nodes: v.nodes.map(n => n.target.join(' ') + ' :: ' + n.failureSummary.replace(/\\s+/g, ' ')) }))))
               .catch(e => done([{ id: 'axe-error', impact: 'critical', help: String(e), nodes: [] }]));",
            vec![],
        )
        .await
        .expect("axe.run");
    result
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            format!(
                "{} ({}): {} at {}",
                v["id"].as_str().unwrap_or(""),
                v["impact"].as_str().unwrap_or(""),
                v["help"].as_str().unwrap_or(""),
                v["nodes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" | ")
            )
        })
        .collect()
}

/// Log `name` in through the page's form.
async fn browser_login(b: &Browser, app: &TestApp, name: &str, password: &str) {
    b.goto(&app.url("/login")).await.expect("login page");
    crate::fixtures::browser::submit_login(b, name, password).await;
    b.wait()
        .for_element(fantoccini::Locator::Id("greeting"))
        .await
        .expect("dashboard after login");
}

/// Visit every page `paths` as the browser's user at each width; the problems found.
async fn check_pages(
    b: &Browser,
    app: &TestApp,
    client: &reqwest::Client,
    role: &str,
    paths: &[String],
    axe: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    let _ = console_errors(b).await; // what the login left
    for width in WIDTHS {
        set_width(b, width).await;
        for path in paths {
            // Look first: only HTML pages are visited (a download is not a page).
            let res = client.get(app.url(path)).send().await.expect("get");
            let status = res.status().as_u16();
            let html = res
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|t| t.starts_with("text/html"));
            let attachment = res.headers().contains_key("content-disposition");
            if status >= 500 {
                problems.push(format!("{role} {path}: status {status}"));
                continue;
            }
            if !html || attachment || (300..400).contains(&status) {
                continue;
            }
            // A fragment (rows a page's script fetches) is no document of its own.
            let body = res.text().await.unwrap_or_default();
            if !body
                .trim_start()
                .to_ascii_lowercase()
                .starts_with("<!doctype html")
            {
                continue;
            }
            // The browser reports a page that answers 4xx (a refusal page) as a failed
            // load: known from the status, not an error of the page's own.
            let own_status = format!("{} - Failed to load resource", app.url(path));
            let at = format!("{role} {path} at {width} px");
            b.goto(&app.url(path)).await.expect("visit");
            // Let the page's scripts run their first round.
            let _ = until("the page to load", Duration::from_secs(10), || async {
                let state = b.execute("return document.readyState", vec![]).await.ok()?;
                (state == "complete").then_some(())
            })
            .await;
            let widths = b
                .execute(
                    "return [document.documentElement.scrollWidth, window.innerWidth]",
                    vec![],
                )
                .await
                .expect("widths");
            let (scroll, inner) = (
                widths[0].as_u64().unwrap_or(0),
                widths[1].as_u64().unwrap_or(0),
            );
            if scroll > inner {
                let wide = b
                    .execute(
                        "const w = window.innerWidth; return Array.from(document.querySelectorAll('body *'))
                           .filter(e => e.getBoundingClientRect().right > w + 1)
                           .filter(e => !e.parentElement || e.parentElement.getBoundingClientRect().right <= w + 1)
                           .slice(0, 5).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className && typeof e.className === 'string' ? '.' + e.className.trim().replace(/\\s+/g, '.') : '') + ' ' + Math.round(e.getBoundingClientRect().right) + 'px')",
                        vec![],
                    )
                    .await
                    .unwrap_or_default();
                problems.push(format!(
                    "{at}: the document is {scroll} px wide in a {inner} px window; widest: {wide}"
                ));
            }
            // Nor inside a card: a table that scrolls sideways hides its last columns.
            let inside = b
                .execute(
                    "return Array.from(document.querySelectorAll('.card, .table-wrap'))
                       .filter(e => e.scrollWidth > e.clientWidth + 1)
                       .slice(0, 5).map(e => (e.id ? '#' + e.id : e.className) + ' ' + e.scrollWidth + '/' + e.clientWidth + 'px')",
                    vec![],
                )
                .await
                .ok()
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default();
            if width <= 600 && !inside.is_empty() {
                problems.push(format!("{at}: scrolls sideways inside: {inside:?}"));
            }
            for error in console_errors(b).await {
                if status >= 400 && error.starts_with(&own_status) {
                    continue;
                }
                problems.push(format!("{at}: console error: {error}"));
            }
            for v in axe_violations(b, axe).await {
                problems.push(format!("{at}: axe: {v}"));
            }
        }
    }
    problems
}

/// A portal with realistic data: whole GPUs, MIG slices and shares, a running and
/// an ended job, a session (with Jupyter), a quota; `None` without Chromium's axe.
struct Scene {
    c: SessionCluster,
    admin_password: String,
    data: Data,
}

async fn scene() -> Scene {
    let root = private_root();
    let mut config = cluster_config(root.path(), 0);
    config.push_str(
        "[[cluster.gpus]]\nindex = 0\nmodel = \"A100-80GB\"\nmemory_mb = 81920\n\
         [[cluster.gpus]]\nindex = 1\nmodel = \"A100-80GB\"\nmemory_mb = 81920\n\
         [[cluster.gpus]]\nindex = 2\nmodel = \"A100-80GB\"\nmemory_mb = 81920\n\
         mig = [{ profile = \"3g.40gb\" }, { profile = \"2g.20gb\" }, { profile = \"1g.10gb\" }, { profile = \"1g.10gb\" }]\n\
         [[cluster.gpus]]\nindex = 3\nmodel = \"A100-80GB\"\nmemory_mb = 81920\nshards = 4\n",
    );
    let venv = jupyter::venv_or_skip("pages (the session)").expect("jupyter environment");
    if let Some(venv) = &venv {
        config.push_str(&format!(
            "[[environments]]\nname = \"python\"\ndescription = \"Python 3 with JupyterLab\"\n\
             runtime = \"bubblewrap\"\nkernels = [\"python3\"]\n\
             env = {{ PATH = \"{}/bin:/usr/local/bin:/usr/bin:/bin\" }}\n",
            venv.display()
        ));
    }
    let app = spawn_with(Options {
        extra_config: config,
        database_url: None,
    })
    .await;
    let admin_password = app.admin_password.clone().expect("admin password");
    let c = SessionCluster::new(app, root);
    let alice = c.user("alice").await;
    let api = |method: reqwest::Method, path: &str, body: Value| {
        alice
            .client
            .request(method, c.app.url(path))
            .header("x-csrf-token", &alice.csrf)
            .json(&body)
            .send()
    };
    // An ended job, then one that runs on a GPU.
    let res = api(
        reqwest::Method::POST,
        "/api/v1/jobs",
        json!({"script": "#!/bin/bash\n#SBATCH --job-name=prepare-data\necho prepared\n"}),
    )
    .await
    .expect("submit");
    let ended: Value = res.json().await.expect("json");
    let ended = ended["id"].to_string().trim_matches('"').to_string();
    let res = api(
        reqwest::Method::POST,
        "/api/v1/jobs",
        json!({"script": "#!/bin/bash\n#SBATCH --job-name=train-resnet50 --gres=gpu:1 --time=2:00:00\nfor e in 1 2 3; do echo \"epoch $e/90: loss $((7 - e)).1, 2400 images/s\"; done\nsleep 600\n"}),
    )
    .await
    .expect("submit");
    let running: Value = res.json().await.expect("json");
    let running = running["id"].to_string().trim_matches('"').to_string();
    for (id, want) in [(&ended, "COMPLETED"), (&running, "RUNNING")] {
        until(
            &format!("job {id} {want}"),
            Duration::from_secs(60),
            || async {
                let res = alice
                    .client
                    .get(c.app.url(&format!("/api/v1/jobs/{id}")))
                    .send()
                    .await
                    .ok()?;
                let job: Value = res.json().await.ok()?;
                (job["state"] == want).then_some(())
            },
        )
        .await
        .expect("job state");
    }
    // A job that fails on its own (its last lines say why), and an array of 8.
    let mut extra = Vec::new();
    for script in [
        "#!/bin/bash\n#SBATCH --job-name=train-bert\necho 'epoch 1/3: loss 2.31'\necho 'epoch 2/3: loss nan'\necho 'error: the loss is NaN; stopping' >&2\nexit 3\n",
        "#!/bin/bash\n#SBATCH --job-name=sweep-lr --array=0-7%2\nsleep 600\n",
    ] {
        let res = api(reqwest::Method::POST, "/api/v1/jobs", json!({"script": script}))
            .await
            .expect("submit");
        let body: Value = res.json().await.expect("json");
        extra.push(body["id"].as_str().expect("id").to_string());
    }
    let (failed, array) = (extra[0].clone(), extra[1].clone());
    for (id, want) in [
        (failed.clone(), "FAILED"),
        (format!("{array}_1"), "RUNNING"),
    ] {
        until(
            &format!("job {id} {want}"),
            Duration::from_secs(60),
            || async {
                let res = alice
                    .client
                    .get(c.app.url(&format!("/api/v1/jobs/{id}")))
                    .send()
                    .await
                    .ok()?;
                let job: Value = res.json().await.ok()?;
                (job["state"] == want).then_some(())
            },
        )
        .await
        .expect("job state");
    }
    // A campaign of two points, each a job that prints its figure.
    let res = api(
        reqwest::Method::POST,
        "/api/v1/campaigns",
        json!({"template": "tiny", "name": "two points",
               "script": "#!/bin/bash\n#ATRIUM --benchmark=custom\n#CAMPAIGN --param N=1\necho \"ATRIUM_METRIC images_per_sec=$((100 * N)) unit=images/s\"\n",
               "matrix": {"gpus": [0], "params": {"N": ["1", "2"]}}}),
    )
    .await
    .expect("campaign");
    assert_eq!(res.status(), 201);
    let campaign: Value = res.json().await.expect("json");
    let campaign = campaign["id"].as_i64().expect("campaign id");
    let session = match venv {
        Some(_) => {
            let (s, _) = c
                .ready_session(
                    &alice,
                    json!({"name": "analysis", "gpus": 1, "slice": "1g.10gb", "environment": "python"}),
                )
                .await;
            s["id"].as_i64()
        }
        None => None,
    };
    let admin = c.app.login("admin", &admin_password).await;
    let token = c
        .app
        .create_token(&admin, "pages", &["read", "admin"])
        .await;
    let res = reqwest::Client::new()
        .post(c.app.url("/api/v1/admin/quotas"))
        .bearer_auth(&token)
        .json(&json!({"scope": "user", "name": "alice", "limits": {"max_gpus": 4, "max_gpu_hours": 500}}))
        .send()
        .await
        .expect("quota");
    assert_eq!(res.status(), 201);
    let quota: Value = res.json().await.expect("json");
    let runs: Value = c
        .app
        .get_bearer("/api/v1/benchmarks", &token)
        .await
        .json()
        .await
        .expect("benchmarks");
    let benchmark = runs["runs"][0]["id"].as_i64().expect("a benchmark run");
    Scene {
        data: Data {
            job: running,
            failed,
            array,
            session,
            benchmark,
            quota: quota["id"].as_i64().expect("quota id"),
            user: "alice".into(),
            campaign,
        },
        c,
        admin_password,
    }
}

/// The README's pictures: the dashboard, the start form, the job page, the GPU map.
async fn screenshots(b: &Browser, app: &TestApp, data: &Data, dir: &Path) {
    set_width(b, 1400).await;
    let job = format!("/jobs/{}", data.job);
    let failed = format!("/jobs/{}", data.failed);
    let array = format!("/jobs/{}", data.array);
    // Each page, and the element to scroll to the top of the picture.
    for (path, name, top) in [
        ("/", "dashboard.png", None),
        ("/sessions/new", "start-form.png", None),
        (job.as_str(), "job.png", None),
        (failed.as_str(), "failed-job.png", None),
        (array.as_str(), "array.png", None),
        ("/cluster", "gpu-map.png", Some("gpu-map")),
    ] {
        b.goto(&app.url(path)).await.expect("visit");
        if let Some(id) = top {
            b.execute(
                "const e = document.getElementById(arguments[0]); if (e) e.scrollIntoView();",
                vec![json!(id)],
            )
            .await
            .expect("scroll");
        }
        // Scripts that draw live data get a moment's round first (bounded poll).
        let _ = until("the page to settle", Duration::from_secs(3), || async {
            let state = b.execute("return document.readyState", vec![]).await.ok()?;
            (state == "complete").then_some(())
        })
        .await;
        b.screenshot(dir.join(name)).await.expect("screenshot");
    }
    set_width(b, 400).await;
    for (path, name) in [
        ("/", "narrow-dashboard.png"),
        ("/profile", "narrow-profile.png"),
    ] {
        b.goto(&app.url(path)).await.expect("visit");
        b.screenshot(dir.join(name)).await.expect("screenshot");
    }
}

#[tokio::test]
async fn every_page_is_usable_at_both_widths_for_a_user_and_an_administrator() {
    let axe_path = std::env::var(AXE_ENV).unwrap_or_else(|_| AXE_DEFAULT.to_string());
    let axe = std::fs::read_to_string(&axe_path)
        .unwrap_or_else(|e| panic!("axe-core at {axe_path}: {e} (run tests/install-deps.sh)"));
    let scene = scene().await;
    let app = &scene.c.app;
    let routes = page_routes();
    let mut paths: Vec<String> = routes
        .iter()
        .filter_map(|r| instance(r, &scene.data))
        .collect();
    // The other shapes of a job's page: a failure's story first, an array's tasks.
    paths.push(format!("/jobs/{}", scene.data.failed));
    paths.push(format!("/jobs/{}", scene.data.array));
    let mut problems = Vec::new();
    let mut visited = BTreeMap::new();

    // The user: every page but the administrators' (one of those: the refusal).
    let user_paths: Vec<String> = paths
        .iter()
        .filter(|p| !p.starts_with("/admin/"))
        .cloned()
        .collect();
    let b = browser().await.expect("chromium");
    browser_login(&b, app, "alice", PASSWORD).await;
    let alice = app.login("alice", PASSWORD).await;
    problems.extend(check_pages(&b, app, &alice, "alice", &user_paths, &axe).await);
    visited.insert("alice", user_paths.len());
    if let Ok(dir) = std::env::var(SCREENSHOTS_ENV) {
        screenshots(&b, app, &scene.data, Path::new(&dir)).await;
    }
    b.close().await.expect("close");

    let b = browser().await.expect("chromium");
    browser_login(&b, app, "admin", &scene.admin_password).await;
    let admin = app.login("admin", &scene.admin_password).await;
    problems.extend(check_pages(&b, app, &admin, "admin", &paths, &axe).await);
    visited.insert("admin", paths.len());
    b.close().await.expect("close");

    assert!(
        problems.is_empty(),
        "{} problems on the pages ({visited:?} paths per role, at {WIDTHS:?} px):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
