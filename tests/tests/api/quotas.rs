//! Quotas end to end: administrators set them through the API, the scheduler
//! enforces them on real jobs, sessions over quota are refused with the reason, and
//! every change is in the audit log.

use std::time::Duration;

use serde_json::{json, Value};

use crate::fixtures::quotas::{admin_token, set_quota};
use crate::fixtures::{JobCluster, JobUser};

const RUN: Duration = Duration::from_secs(60);

async fn audit_entries(c: &JobCluster, admin: &str) -> Vec<Value> {
    let (status, audit) = c.app.api(admin).get("/api/v1/admin/audit").await;
    assert_eq!(status, 200, "{audit}");
    audit["entries"].as_array().cloned().expect("entries")
}

async fn sleeper(c: &JobCluster, user: &JobUser, gpus: u32, time: &str) -> String {
    c.sbatch(
        user,
        &format!("#!/bin/bash\n#SBATCH --gres=gpu:{gpus} --time={time}\nsleep 300\n"),
    )
    .await
}

#[tokio::test]
async fn a_gpu_quota_makes_work_wait_refuses_what_never_fits_and_changes_live() {
    let c = JobCluster::start(4).await;
    let admin = admin_token(&c).await;
    let ann = c.user("ann").await;
    let id = set_quota(&c, &admin, "user", "ann", json!({"max_gpus": 2})).await;

    let a = sleeper(&c, &ann, 1, "10").await;
    let b = sleeper(&c, &ann, 1, "10").await;
    let third = sleeper(&c, &ann, 1, "10").await;
    c.wait_for(&ann, &a, &["RUNNING"], RUN).await;
    c.wait_for(&ann, &b, &["RUNNING"], RUN).await;
    let waiting = c.job(&ann, &third).await;
    assert_eq!(waiting["state"], "PENDING", "{waiting}");
    assert_eq!(waiting["reason"], "QOSMaxGRESPerUser", "{waiting}");

    // A job larger than the quota can never run: refused, naming the quota, its value
    // and the use.
    let res = c
        .submit(
            &ann,
            json!({"script": "#!/bin/bash\n#SBATCH --gres=gpu:3\ntrue\n", "working_directory": ann.home}),
        )
        .await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    let message = body["message"].as_str().expect("message");
    assert!(
        message.contains("may use 2 GPUs at once") && message.contains("2 are in use"),
        "{message}"
    );

    // What ann sees of her quota.
    let (status, usage) = c.app.api(&ann.token).get("/api/v1/me/usage").await;
    assert_eq!(status, 200, "{usage}");
    assert_eq!(usage["quotas"][0]["scope"], "user", "{usage}");
    assert_eq!(usage["quotas"][0]["limits"]["max_gpus"], 2, "{usage}");
    assert_eq!(usage["quotas"][0]["gpus_in_use"], 2.0, "{usage}");
    assert_eq!(usage["quotas"][0]["running_jobs"], 2, "{usage}");

    // One ends: the waiting job starts.
    c.cancel(&ann, &a).await;
    c.wait_for(&ann, &third, &["RUNNING"], RUN).await;

    // The quota raised: a further job starts at the next pass, no restart.
    let fourth = sleeper(&c, &ann, 1, "10").await;
    assert_eq!(c.job(&ann, &fourth).await["state"], "PENDING");
    let (status, body) = c
        .app
        .api(&admin)
        .send(
            reqwest::Method::PUT,
            &format!("/api/v1/admin/quotas/{id}"),
            Some(json!({"limits": {"max_gpus": 3}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    c.wait_for(&ann, &fourth, &["RUNNING"], RUN).await;

    // Every change is in the audit log, before and after.
    let entries = audit_entries(&c, &admin).await;
    let update = entries
        .iter()
        .find(|e| e["action"] == "quota.update")
        .expect("quota.update audited");
    assert_eq!(update["actor"], "admin");
    assert_eq!(update["target"], "user ann");
    assert_eq!(update["detail"]["before"]["max_gpus"], 2);
    assert_eq!(update["detail"]["after"]["max_gpus"], 3);
    assert!(entries.iter().any(|e| e["action"] == "quota.create"));
    let csv = reqwest::Client::new()
        .get(c.app.url("/api/v1/admin/audit?format=csv"))
        .bearer_auth(&admin)
        .send()
        .await
        .expect("csv")
        .text()
        .await
        .expect("text");
    assert!(
        csv.starts_with("id,at,actor,action,target,detail,client_addr\n"),
        "{csv}"
    );
    assert!(csv.contains(",admin,quota.update,user ann,"), "{csv}");

    for j in [&b, &third, &fourth] {
        c.cancel(&ann, j).await;
    }
}

#[tokio::test]
async fn spent_gpu_hours_hold_new_work_without_killing_running_work() {
    let c = JobCluster::start(2).await;
    let admin = admin_token(&c).await;
    let bo = c.user("bo").await;
    // 1.2 GPU-minutes (counted in whole minutes: 1): one 1-minute, 1-GPU job fits; a
    // second does not.
    set_quota(&c, &admin, "default", "", json!({"max_gpu_hours": 0.02})).await;
    let first = sleeper(&c, &bo, 1, "1").await;
    c.wait_for(&bo, &first, &["RUNNING"], RUN).await;
    let second = sleeper(&c, &bo, 1, "1").await;
    let waiting = c.job(&bo, &second).await;
    assert_eq!(waiting["state"], "PENDING", "{waiting}");
    assert_eq!(waiting["reason"], "AssocGrpGRESMinutes", "{waiting}");
    // The running job goes on.
    assert_eq!(c.job(&bo, &first).await["state"], "RUNNING");
    let (_, usage) = c.app.api(&bo.token).get("/api/v1/me/usage").await;
    assert_eq!(usage["quotas"][0]["scope"], "default", "{usage}");
    assert!(
        usage["quotas"][0]["gpu_hours_used"].as_f64().unwrap_or(0.0) > 0.0,
        "{usage}"
    );
    c.cancel(&bo, &first).await;
    c.cancel(&bo, &second).await;
}

#[tokio::test]
async fn a_group_quota_caps_the_sum_over_its_members() {
    let c = JobCluster::start(4).await;
    let admin = admin_token(&c).await;
    let cy = c.user_in("cy", &["vision"]).await;
    let di = c.user_in("di", &["vision"]).await;
    let ed = c.user("ed").await;
    set_quota(&c, &admin, "group", "vision", json!({"max_gpus": 2})).await;
    let a = sleeper(&c, &cy, 1, "10").await;
    let b = sleeper(&c, &di, 1, "10").await;
    c.wait_for(&cy, &a, &["RUNNING"], RUN).await;
    c.wait_for(&di, &b, &["RUNNING"], RUN).await;
    let third = sleeper(&c, &di, 1, "10").await;
    let waiting = c.job(&di, &third).await;
    assert_eq!(waiting["state"], "PENDING", "{waiting}");
    assert_eq!(waiting["reason"], "AssocGrpGRES", "{waiting}");
    // Someone outside the group is not held.
    let other = sleeper(&c, &ed, 1, "10").await;
    c.wait_for(&ed, &other, &["RUNNING"], RUN).await;
    c.cancel(&cy, &a).await;
    c.wait_for(&di, &third, &["RUNNING"], RUN).await;
    for (u, j) in [(&di, &b), (&di, &third), (&ed, &other)] {
        c.cancel(u, j).await;
    }
}

#[tokio::test]
async fn a_session_over_quota_is_refused_with_the_reason() {
    let c = JobCluster::start(2).await;
    let admin = admin_token(&c).await;
    let fay = c.user("fay").await;
    let client = c.app.login("fay", "password-of-some-length").await;
    let token = c
        .app
        .create_token(&client, "sessions", &["read", "sessions"])
        .await;
    set_quota(
        &c,
        &admin,
        "user",
        "fay",
        json!({"max_gpus": 1, "max_session_hours": 2}),
    )
    .await;
    let running = sleeper(&c, &fay, 1, "10").await;
    c.wait_for(&fay, &running, &["RUNNING"], RUN).await;
    for (body, expect) in [
        (
            json!({"name": "nb", "gpus": 1, "hours": 1}),
            "user fay's quota allows 1 GPU at once; 1 is in use and this session asks for 1 GPU",
        ),
        (
            json!({"name": "nb", "gpus": 0, "hours": 4}),
            "user fay's quota allows sessions of at most 2 hours; this one asks for 4 hours",
        ),
    ] {
        let (status, answer) = c.app.api(&token).post("/api/v1/sessions", body).await;
        assert_eq!(status, 403, "{answer}");
        assert_eq!(answer["error"], "quota_exceeded", "{answer}");
        assert_eq!(answer["message"], expect, "{answer}");
    }
    let (_, list) = c.app.api(&token).get("/api/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(0), "{list}");
    c.cancel(&fay, &running).await;
}

#[tokio::test]
async fn quota_routes_are_for_administrators_and_check_their_input() {
    let c = JobCluster::start(0).await;
    let admin = admin_token(&c).await;
    let gus = c.user("gus").await;
    for (method, path, body) in [
        (reqwest::Method::GET, "/api/v1/admin/quotas", None),
        (
            reqwest::Method::POST,
            "/api/v1/admin/quotas",
            Some(json!({"scope": "user", "name": "gus", "limits": {"max_gpus": 9}})),
        ),
        (reqwest::Method::GET, "/api/v1/admin/quotas/1", None),
        (
            reqwest::Method::PUT,
            "/api/v1/admin/quotas/1",
            Some(json!({"limits": {}})),
        ),
        (reqwest::Method::DELETE, "/api/v1/admin/quotas/1", None),
        (reqwest::Method::GET, "/api/v1/admin/audit", None),
    ] {
        let (status, answer) = c.app.api(&gus.token).send(method.clone(), path, body).await;
        assert_eq!(status, 403, "{method} {path}: {answer}");
        assert_eq!(answer["error"], "forbidden", "{method} {path}");
    }
    for (body, field) in [
        (json!({"scope": "team", "name": "x"}), "scope"),
        (json!({"scope": "default", "name": "x"}), "name"),
        (json!({"scope": "user", "name": "a b"}), "name"),
        (
            json!({"scope": "user", "name": "gus", "limits": {"max_gpu_hours": -1}}),
            "limits.max_gpu_hours",
        ),
        (
            json!({"scope": "user", "name": "gus", "limits": {"max_gpu": 1}}),
            "max_gpu",
        ),
    ] {
        let (status, answer) = c
            .app
            .api(&admin)
            .post("/api/v1/admin/quotas", body.clone())
            .await;
        assert_eq!(status, 400, "{body}: {answer}");
        let message = answer["message"].as_str().unwrap_or("");
        assert!(message.contains(field), "{body}: {message}");
    }
    let (_, list) = c.app.api(&admin).get("/api/v1/admin/quotas").await;
    assert_eq!(list["quotas"].as_array().map(Vec::len), Some(0), "{list}");
    let id = set_quota(&c, &admin, "user", "gus", json!({"max_gpus": 1})).await;
    let (status, _) = c
        .app
        .api(&admin)
        .post(
            "/api/v1/admin/quotas",
            json!({"scope": "user", "name": "gus"}),
        )
        .await;
    assert_eq!(status, 409);
    let (status, _) = c
        .app
        .api(&admin)
        .delete(&format!("/api/v1/admin/quotas/{id}"))
        .await;
    assert_eq!(status, 204);
    let (status, _) = c
        .app
        .api(&admin)
        .get(&format!("/api/v1/admin/quotas/{id}"))
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_drained_node_takes_no_new_work_and_its_running_work_finishes() {
    let c = JobCluster::start(2).await;
    let admin = admin_token(&c).await;
    let hal = c.user("hal").await;
    let running = sleeper(&c, &hal, 1, "10").await;
    c.wait_for(&hal, &running, &["RUNNING"], RUN).await;
    let drain = |action: &'static str, body: Option<Value>| {
        let token = admin.clone();
        let c = &c;
        async move {
            c.app
                .api(&token)
                .send(
                    reqwest::Method::POST,
                    &format!("/api/v1/admin/nodes/head/{action}"),
                    body,
                )
                .await
        }
    };
    let (status, answer) = drain("drain", None).await;
    assert_eq!(status, 400, "a drain needs a reason: {answer}");
    let (status, answer) = c
        .app
        .api(&hal.token)
        .post("/api/v1/admin/nodes/head/drain", json!({"reason": "mine"}))
        .await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = drain("drain", Some(json!({"reason": "new driver"}))).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["state"], "DRAIN", "{answer}");

    let waiting = sleeper(&c, &hal, 1, "10").await;
    let (_, nodes) = c.app.api(&hal.token).get("/api/v1/nodes").await;
    assert_eq!(
        nodes["nodes"][0]["state"]["reason"], "new driver",
        "{nodes}"
    );
    assert_eq!(c.job(&hal, &waiting).await["state"], "PENDING");
    assert_eq!(c.job(&hal, &running).await["state"], "RUNNING");

    let (status, answer) = drain("resume", None).await;
    assert_eq!(status, 200, "{answer}");
    c.wait_for(&hal, &waiting, &["RUNNING"], RUN).await;
    let entries = audit_entries(&c, &admin).await;
    let actions: Vec<&str> = entries
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert!(
        actions.contains(&"node.drain") && actions.contains(&"node.resume"),
        "{actions:?}"
    );
    let (status, _) = drain("reboot", None).await;
    assert_eq!(status, 400);
    let (status, _) = c
        .app
        .api(&admin)
        .send(
            reqwest::Method::POST,
            "/api/v1/admin/nodes/nowhere/resume",
            None,
        )
        .await;
    assert_eq!(status, 404);
    c.cancel(&hal, &running).await;
    c.cancel(&hal, &waiting).await;
}

#[tokio::test]
async fn chromium_shows_why_a_session_over_quota_cannot_start_and_the_quotas_on_the_profile() {
    use atrium_tests::support::browser;
    use fantoccini::Locator;
    let c = JobCluster::start(2).await;
    let admin = admin_token(&c).await;
    let ida = c.user("ida").await;
    set_quota(
        &c,
        &admin,
        "user",
        "ida",
        json!({"max_gpus": 1, "max_gpu_hours": 100}),
    )
    .await;
    let running = sleeper(&c, &ida, 1, "10").await;
    c.wait_for(&ida, &running, &["RUNNING"], RUN).await;

    let b = browser().await.expect("chromium");
    b.goto(&c.app.url("/login")).await.expect("open login");
    crate::fixtures::browser::submit_login(&b, "ida", "password-of-some-length").await;
    b.wait()
        .for_element(Locator::Id("greeting"))
        .await
        .expect("dashboard");
    b.goto(&c.app.url("/profile")).await.expect("profile");
    let quotas = match b.wait().for_element(Locator::Id("quotas")).await {
        Ok(e) => e.text().await.expect("text"),
        Err(e) => panic!(
            "quotas on the profile page: {e}; at {:?}: {}",
            b.current_url().await.map(|u| u.to_string()),
            b.source().await.unwrap_or_default()
        ),
    };
    assert!(quotas.contains("Your quota"), "{quotas}");
    assert!(quotas.contains("GPUs in use 1 of 1"), "{quotas}");
    assert!(quotas.contains("GPU-hours this month"), "{quotas}");

    b.goto(&c.app.url("/sessions/new"))
        .await
        .expect("start form");
    crate::fixtures::browser::fill(&b, "gpus", "1").await;
    crate::fixtures::browser::fill(&b, "hours", "2").await;
    b.find(Locator::Id("start"))
        .await
        .expect("start button")
        .click()
        .await
        .expect("start");
    let error = b
        .wait()
        .for_element(Locator::Id("start-error"))
        .await
        .expect("the refusal is shown")
        .text()
        .await
        .expect("text");
    assert_eq!(
        error,
        "user ida's quota allows 1 GPU at once; 1 is in use and this session asks for 1 GPU"
    );
    b.close().await.expect("close");
    let (_, list) = c.app.api(&ida.token).get("/api/v1/sessions").await;
    assert_eq!(list["sessions"].as_array().map(Vec::len), Some(0), "{list}");
    c.cancel(&ida, &running).await;
}
