//! The job pages as a user meets them (issue 25): a pending job's reason in words
//! with its expected start from the backfill plan, every refused directive at once
//! (API and form), resubmitting a job, the job list's filters and their 400, and in
//! Chromium the submission form's GPU and time fields and its marked lines.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{json, Value};

use crate::fixtures::browser::{fill, submit_login};
use crate::fixtures::{hidden_field, JobCluster, PASSWORD};
use atrium_tests::support::{browser, until};

/// The CSRF token of `client`'s session, from the jobs page's forms.
async fn csrf(c: &JobCluster, client: &reqwest::Client) -> String {
    let (_, html) = c.app.page(client, "/jobs/new").await;
    hidden_field(&html, "csrf").expect("csrf on the form")
}

#[tokio::test]
async fn a_job_behind_a_running_one_expects_to_start_at_its_end_and_says_why() {
    let c = JobCluster::start(2).await;
    let alice = c.user("alice").await;
    let busy = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH -J busy --gres=gpu:2 -t 30\nsleep 120\n",
        )
        .await;
    let running = c
        .wait_for(&alice, &busy, &["RUNNING"], Duration::from_secs(30))
        .await;
    let busy_end = running["end_time"]
        .as_str()
        .expect("a planned end")
        .to_string();
    let waiting = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH -J waits --gres=gpu:1 -t 10\ntrue\n",
        )
        .await;
    let job = until(
        "the waiting job's expected start",
        Duration::from_secs(30),
        || async {
            let j = c.job(&alice, &waiting).await;
            j["expected_start"].as_str().is_some().then_some(j)
        },
    )
    .await
    .expect("an expected start");
    assert_eq!(job["state"], "PENDING", "{job}");
    assert_eq!(job["reason"], "Resources", "{job}");
    let expected = job["expected_start"].as_str().expect("expected start");
    // The plan assumes the running job ends at its time limit: it starts then.
    assert_eq!(expected, busy_end, "the running job: {running}");
    // In the list too; null for the running job.
    let list: Value = c
        .app
        .get_bearer("/api/v1/jobs", &alice.token)
        .await
        .json()
        .await
        .expect("json");
    let rows = list["jobs"].as_array().expect("jobs");
    let of = |id: &str| rows.iter().find(|j| j["id"] == id).expect("listed").clone();
    assert_eq!(of(&waiting)["expected_start"], expected);
    assert_eq!(of(&busy)["expected_start"], Value::Null);

    // The pages say it in words, with the code beside and the time as a <time>.
    let browser = c.app.login("alice", PASSWORD).await;
    let words =
        format!("Waiting for a GPU: both are in use; expected start <time datetime=\"{expected}\"");
    let (status, queue) = c.app.page(&browser, "/jobs").await;
    assert_eq!(status, 200);
    assert!(queue.contains(&words), "{queue}");
    assert!(queue.contains(">Resources</code>"), "{queue}");
    let (_, show) = c.app.page(&browser, &format!("/jobs/{waiting}")).await;
    assert!(
        show.contains("Waiting for a GPU: both are in use; expected start"),
        "{show}"
    );
    assert!(
        show.contains(&format!("<time datetime=\"{expected}\"")),
        "{show}"
    );
    // The running job has time left, not an end.
    let (_, show) = c.app.page(&browser, &format!("/jobs/{busy}")).await;
    assert!(show.contains("id=\"job-time-left\""), "{show}");
    assert!(!show.contains("id=\"job-ended\""), "{show}");
}

#[tokio::test]
async fn every_refused_directive_is_reported_at_once_by_line() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let script = "#!/bin/bash\n#SBATCH -N two\n#SBATCH -J ok\n#SBATCH --time=soon\n\
                  #SBATCH --frobnicate\ntrue\n";
    let res = c.submit(&alice, json!({"script": script})).await;
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.expect("json");
    assert_eq!(body["error"], "bad_request", "{body}");
    assert_eq!(body["field"], "nodes", "{body}");
    let lines: Vec<u64> = body["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["line"].as_u64().expect("line"))
        .collect();
    assert_eq!(lines, [2, 4, 5], "{body}");
    assert_eq!(body["errors"][1]["directive"], "--time", "{body}");
    let message = body["message"].as_str().expect("message");
    assert_eq!(message.matches("line 2:").count(), 1, "{message}");
    assert!(
        message.contains("; line 5: --frobnicate: unknown option"),
        "{message}"
    );

    // The form: every error listed, linked to its marked line.
    let browser = c.app.login("alice", PASSWORD).await;
    let token = csrf(&c, &browser).await;
    let res = browser
        .post(c.app.url("/jobs"))
        .form(&[("csrf", token.as_str()), ("script", script)])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 400);
    let html = res.text().await.expect("html");
    for line in [2, 4, 5] {
        assert!(
            html.contains(&format!("<a href=\"#script-line-{line}\">Line {line}</a>")),
            "{html}"
        );
        assert!(
            html.contains(&format!("<li id=\"script-line-{line}\" class=\"bad\"")),
            "{html}"
        );
    }
    assert!(
        html.contains("3 directives of the script are wrong"),
        "{html}"
    );
    assert!(
        !html.contains("class=\"bad\" aria-invalid=\"true\"><code>#SBATCH -J ok"),
        "{html}"
    );
}

#[tokio::test]
async fn resubmit_runs_the_same_script_again_for_its_owner_only() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let _bob = c.user("bob").await;
    let first = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH -J again -t 5\necho \"run $SLURM_JOB_ID\"\n",
        )
        .await;
    c.wait_ended(&alice, &first, Duration::from_secs(60)).await;

    // Another user cannot, and sees nothing.
    let bob = c.app.login("bob", PASSWORD).await;
    let token = csrf(&c, &bob).await;
    let res = bob
        .post(c.app.url(&format!("/jobs/{first}/resubmit")))
        .form(&[("csrf", token.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 404);
    // Nor can an administrator, who sees the job: it would run as alice.
    c.app.add_user("boss", PASSWORD, true);
    let boss = c.app.login("boss", PASSWORD).await;
    let (status, _) = c.app.page(&boss, &format!("/jobs/{first}")).await;
    assert_eq!(status, 200);
    let token = csrf(&c, &boss).await;
    let res = boss
        .post(c.app.url(&format!("/jobs/{first}/resubmit")))
        .form(&[("csrf", token.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 404);

    let alice_web = c.app.login("alice", PASSWORD).await;
    let (_, show) = c.app.page(&alice_web, &format!("/jobs/{first}")).await;
    assert!(
        show.contains(&format!("action=\"/jobs/{first}/resubmit\"")),
        "{show}"
    );
    // Without the form's token: refused, nothing submitted.
    let res = alice_web
        .post(c.app.url(&format!("/jobs/{first}/resubmit")))
        .form(&[("csrf", "wrong")])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 403);
    let token = csrf(&c, &alice_web).await;
    let res = alice_web
        .post(c.app.url(&format!("/jobs/{first}/resubmit")))
        .form(&[("csrf", token.as_str())])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 303);
    let location = res.headers()["location"].to_str().expect("location");
    let second = location.strip_prefix("/jobs/").expect("a job page");
    assert_ne!(second, first);
    let job = c.wait_ended(&alice, second, Duration::from_secs(60)).await;
    assert_eq!(job["name"], "again", "{job}");
    assert_eq!(job["state"], "COMPLETED", "{job}");
    assert_eq!(job["time_limit"], 300, "{job}");
    assert!(
        c.output(&alice, second).contains(&format!("run {second}")),
        "{}",
        c.output(&alice, second)
    );
    // Edit as new fills the form with the script.
    let (status, form) = c
        .app
        .page(&alice_web, &format!("/jobs/new?from={first}"))
        .await;
    assert_eq!(status, 200);
    assert!(form.contains("#SBATCH -J again -t 5"), "{form}");
    let (status, _) = c.app.page(&bob, &format!("/jobs/new?from={first}")).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_job_list_filters_round_trip_and_a_bad_one_is_a_400() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let train = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH -J train-big -H\ntrue\n")
        .await;
    let eval = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH -J eval-small -H\ntrue\n")
        .await;
    let done = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH -J train-done\ntrue\n")
        .await;
    c.wait_ended(&alice, &done, Duration::from_secs(60)).await;
    let browser = c.app.login("alice", PASSWORD).await;
    let link = |id: &str| format!("href=\"/jobs/{id}\"");

    let (status, all) = c.app.page(&browser, "/jobs").await;
    assert_eq!(status, 200);
    for id in [&train, &eval, &done] {
        assert!(all.contains(&link(id)), "{id}: {all}");
    }
    // Text in the name, any case: the form shows it again, the refresh keeps it.
    let (status, html) = c.app.page(&browser, "/jobs?q=TRAIN").await;
    assert_eq!(status, 200);
    assert!(
        html.contains(&link(&train)) && html.contains(&link(&done)),
        "{html}"
    );
    assert!(!html.contains(&link(&eval)), "{html}");
    assert!(
        html.contains("name=\"q\" id=\"filter-q\" value=\"TRAIN\""),
        "{html}"
    );
    assert!(
        html.contains("data-rows=\"/jobs/rows?q=TRAIN&#38;page=1\""),
        "{html}"
    );
    let (status, rows) = c.app.page(&browser, "/jobs/rows?q=TRAIN&page=1").await;
    assert_eq!(status, 200);
    assert!(
        rows.contains(&link(&train)) && !rows.contains(&link(&eval)),
        "{rows}"
    );
    assert!(!rows.contains("<html"), "a fragment: {rows}");
    // A state: pending ones only, selected in the form.
    let (_, html) = c.app.page(&browser, "/jobs?state=PENDING&q=train").await;
    assert!(html.contains(&link(&train)), "{html}");
    assert!(
        !html.contains(&link(&done)) && !html.contains(&link(&eval)),
        "{html}"
    );
    assert!(
        html.contains("<option value=\"PENDING\" selected>"),
        "{html}"
    );
    let (_, html) = c.app.page(&browser, "/jobs?state=COMPLETED").await;
    assert!(html.contains(&link(&done)), "{html}");
    assert!(!html.contains(&link(&train)), "{html}");
    // Days: nothing was submitted in 2020.
    let (status, html) = c
        .app
        .page(&browser, "/jobs?from=2020-01-01&to=2020-01-31")
        .await;
    assert_eq!(status, 200);
    for id in [&train, &eval, &done] {
        assert!(!html.contains(&link(id)), "{id}: {html}");
    }
    assert!(html.contains("value=\"2020-01-31\""), "{html}");
    // Bad values: a 400 page naming the field, on the page and its refresh.
    for (path, field) in [
        ("/jobs?state=SLEEPING", "state"),
        ("/jobs?from=yesterday", "from"),
        ("/jobs/rows?to=2026-02-30", "to"),
        ("/jobs?page=0", "page"),
    ] {
        let (status, html) = c.app.page(&browser, path).await;
        assert_eq!(status, 400, "{path}");
        assert!(
            html.contains(&format!("The filter &#34;{field}&#34; was not understood")),
            "{path}: {html}"
        );
    }
}

#[tokio::test]
async fn chromium_the_forms_fields_write_the_directives_and_errors_mark_their_lines() {
    let c = JobCluster::start(2).await;
    let _alice = c.user("alice").await;
    let b = browser().await.expect("chromium");
    b.goto(&c.app.url("/login")).await.expect("login page");
    submit_login(&b, "alice", PASSWORD).await;
    b.wait()
        .for_element(Locator::Css("main"))
        .await
        .expect("signed in");
    b.goto(&c.app.url("/jobs/new?starter=hello"))
        .await
        .expect("form");
    let script = || async {
        b.find(Locator::Id("script"))
            .await
            .expect("script")
            .prop("value")
            .await
            .expect("value")
            .unwrap_or_default()
    };
    let fields = b.find(Locator::Id("job-fields")).await.expect("fields");
    assert!(
        fields.is_displayed().await.expect("shown"),
        "the script shows the fields"
    );

    // GPUs and a type write one --gres line; the time writes --time.
    fill(&b, "field-gpus", "2").await;
    let text = script().await;
    assert_eq!(text.matches("#SBATCH --gres=gpu:2").count(), 1, "{text}");
    let types = b
        .find(Locator::Css(
            "#field-gpu-type option[value]:not([value=''])",
        ))
        .await
        .expect("a GPU type of the cluster");
    let gpu_type = types.attr("value").await.expect("attr").expect("value");
    types.click().await.expect("choose the type");
    until("the typed gres line", Duration::from_secs(5), || async {
        script()
            .await
            .contains(&format!("#SBATCH --gres=gpu:{gpu_type}:2"))
            .then_some(())
    })
    .await
    .expect("the type written");
    // Durations as people write them, never the prefix typed on the way.
    for (typed, written) in [
        ("2h", "2:00:00"),
        ("2 hours", "2:00:00"),
        ("1.5h", "1:30:00"),
        ("1d 12h", "1-12:00:00"),
        ("90", "1:30:00"),
    ] {
        fill(&b, "field-time", typed).await;
        let text = script().await;
        assert!(
            text.contains(&format!("#SBATCH --time={written}\n")),
            "{typed}: {text}"
        );
        assert_eq!(text.matches("--time").count(), 1, "{text}");
    }
    let hint = b
        .find(Locator::Id("field-time-hint"))
        .await
        .expect("hint")
        .text()
        .await
        .expect("text");
    assert!(
        hint.contains("1 hour 30 minutes") && hint.contains("minutes"),
        "{hint}"
    );
    // A value that means nothing: the error beside the field, and Submit waits.
    fill(&b, "field-time", "2 hourz").await;
    let error = b
        .find(Locator::Id("field-time-error"))
        .await
        .expect("error");
    assert!(error.is_displayed().await.expect("shown"));
    assert!(
        error.text().await.expect("text").contains("hourz"),
        "names what it could not read"
    );
    fill(&b, "field-cpus", "-1").await;
    b.find(Locator::Id("job-submit"))
        .await
        .expect("submit")
        .click()
        .await
        .expect("click");
    let summary = b.find(Locator::Id("fields-error")).await.expect("summary");
    assert!(summary.is_displayed().await.expect("shown"));
    assert!(
        summary.text().await.expect("text").starts_with("2 fields"),
        "both errors at once"
    );
    assert!(b
        .find(Locator::Id("field-cpus-error"))
        .await
        .expect("cpus error")
        .is_displayed()
        .await
        .expect("shown"));
    assert!(
        b.current_url()
            .await
            .expect("url")
            .path()
            .ends_with("/jobs/new"),
        "nothing was submitted"
    );
    fill(&b, "field-cpus", "").await;
    fill(&b, "field-time", "1:30:00").await;
    let text = script().await;
    assert!(text.contains("#SBATCH --time=1:30:00"), "{text}");
    assert!(!b
        .find(Locator::Id("field-time-error"))
        .await
        .expect("error")
        .is_displayed()
        .await
        .expect("hidden"));
    assert_eq!(text.matches("--gres").count(), 1, "{text}");
    // Directives come before the first command.
    let gres_at = text.find("#SBATCH --gres").expect("gres");
    let command_at = text
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .and_then(|l| text.find(l))
        .expect("a command");
    assert!(gres_at < command_at, "{text}");
    // Back: editing the script by hand updates the fields.
    b.execute(
        "const s = document.getElementById('script');\
         s.value = s.value.replace(/#SBATCH --gres=\\S+/, '#SBATCH --gres=gpu:3');\
         s.dispatchEvent(new Event('input'));",
        vec![],
    )
    .await
    .expect("edit");
    let gpus = b
        .find(Locator::Id("field-gpus"))
        .await
        .expect("gpus")
        .prop("value")
        .await
        .expect("value");
    assert_eq!(gpus.as_deref(), Some("3"));
    // Zero GPUs takes the line out.
    fill(&b, "field-gpus", "0").await;
    assert!(!script().await.contains("--gres"), "{}", script().await);

    // Two refused directives: both listed at once, their lines marked.
    b.execute(
        "const s = document.getElementById('script');\
         s.value = '#!/bin/bash\\n#SBATCH -N two\\n#SBATCH -J fine\\n#SBATCH --time=soon\\ntrue\\n';",
        vec![],
    )
    .await
    .expect("bad script");
    b.find(Locator::Id("job-submit"))
        .await
        .expect("submit")
        .click()
        .await
        .expect("click");
    let errors = b
        .wait()
        .for_element(Locator::Id("script-errors"))
        .await
        .expect("the errors");
    let items = errors.find_all(Locator::Css("li")).await.expect("items");
    assert_eq!(items.len(), 2);
    let marked = b
        .find_all(Locator::Css("#script-lines li.bad"))
        .await
        .expect("marked lines");
    let mut ids = Vec::new();
    for m in &marked {
        ids.push(m.attr("id").await.expect("attr").unwrap_or_default());
    }
    assert_eq!(ids, ["script-line-2", "script-line-4"]);
    // Each error links to its line.
    let first = errors
        .find(Locator::Css("a[href='#script-line-2']"))
        .await
        .expect("a link to line 2");
    assert_eq!(first.text().await.expect("text"), "Line 2");
    b.close().await.expect("close");
}

/// The page's signal form (issue 37): a running job's processes get the signal and
/// go on (a trap writes it down), the page says what was sent; a signal the page
/// does not offer, another user, or a job that is over get a refusal, not a signal.
#[tokio::test]
async fn the_job_page_sends_a_signal_to_a_running_job_without_ending_it() {
    let c = JobCluster::start(0).await;
    let alice = c.user("alice").await;
    let _bob = c.user("bob").await;
    let id = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH -J trapper -t 5\n\
             trap 'echo got USR1' USR1\n\
             echo trap set\n\
             for i in $(seq 600); do sleep 0.1; done\n",
        )
        .await;
    c.wait_for(&alice, &id, &["RUNNING"], Duration::from_secs(30))
        .await;
    // RUNNING comes as the step starts; the shell traps USR1 a moment later (under
    // load, after the signal could arrive and end it by default).
    until("the trap to be set", Duration::from_secs(30), || async {
        c.output(&alice, &id).contains("trap set").then_some(())
    })
    .await
    .expect("the trap set");
    let web = c.app.login("alice", PASSWORD).await;
    let (_, show) = c.app.page(&web, &format!("/jobs/{id}")).await;
    assert!(
        show.contains(&format!("action=\"/jobs/{id}/signal\"")),
        "{show}"
    );
    let token = csrf(&c, &web).await;
    let post = |form: Vec<(&'static str, String)>| {
        let (web, url) = (web.clone(), c.app.url(&format!("/jobs/{id}/signal")));
        async move { web.post(url).form(&form).send().await.expect("post") }
    };
    // Unknown signal: refused, named.
    let res = post(vec![("csrf", token.clone()), ("signal", "BOGUS".into())]).await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.expect("body").contains("BOGUS"));
    // To the script's shell, which traps it.
    let res = post(vec![
        ("csrf", token.clone()),
        ("signal", "USR1".into()),
        ("whom", "batch".into()),
    ])
    .await;
    assert_eq!(res.status(), 303);
    let location = res.headers()["location"].to_str().expect("location");
    assert_eq!(location, format!("/jobs/{id}?sent=USR1"));
    let (_, shown) = c.app.page(&web, location).await;
    assert!(shown.contains("Sent SIGUSR1 to the job."), "{shown}");
    until("the trap to run", Duration::from_secs(30), || async {
        c.output(&alice, &id).contains("got USR1").then_some(())
    })
    .await
    .expect("trapped");
    assert_eq!(c.job(&alice, &id).await["state"], "RUNNING");
    // Another user's job does not exist for them.
    let bob = c.app.login("bob", PASSWORD).await;
    let bob_token = csrf(&c, &bob).await;
    let res = bob
        .post(c.app.url(&format!("/jobs/{id}/signal")))
        .form(&[("csrf", bob_token.as_str()), ("signal", "TERM")])
        .send()
        .await
        .expect("post");
    assert_eq!(res.status(), 404);
    assert_eq!(c.job(&alice, &id).await["state"], "RUNNING");
    // Over: nothing to signal, said on the page.
    let mut cancel = reqwest::Client::new()
        .delete(c.app.url(&format!("/api/v1/jobs/{id}")))
        .bearer_auth(&alice.token)
        .send()
        .await
        .expect("cancel")
        .status();
    assert!(cancel.is_success(), "{cancel}");
    c.wait_ended(&alice, &id, Duration::from_secs(30)).await;
    let res = post(vec![("csrf", token.clone()), ("signal", "USR1".into())]).await;
    cancel = res.status();
    assert_eq!(cancel, 409);
    assert!(res.text().await.expect("body").contains("Not sent"));
}

/// Priority from the job page: its owner puts a waiting job first of theirs (`scontrol
/// top`); an administrator sets its nice, which moves it and which its owner sees; the
/// owner cannot set a nice, through the page or the API.
#[tokio::test]
async fn the_job_page_puts_a_job_first_and_an_administrator_sets_its_priority() {
    let c = JobCluster::start(1).await;
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;
    // Bob's job takes the GPU (so that alice's fair share, and with it her jobs'
    // priorities, stay as they are): her next two wait, with priorities.
    let busy = c
        .sbatch(&bob, "#!/bin/bash\n#SBATCH --gres=gpu:1\nsleep 300\n")
        .await;
    c.wait_for(&bob, &busy, &["RUNNING"], Duration::from_secs(30))
        .await;
    let first = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH --gres=gpu:1\ntrue\n")
        .await;
    let second = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH --gres=gpu:1 --nice=10\ntrue\n",
        )
        .await;
    let priority = |v: &Value| v["priority"].as_i64().expect("priority");
    let (p1, p2) = (
        priority(&c.job(&alice, &first).await),
        priority(&c.job(&alice, &second).await),
    );
    assert!(p2 < p1, "{p2} {p1}");

    let web = c.app.login("alice", PASSWORD).await;
    let (_, show) = c.app.page(&web, &format!("/jobs/{second}")).await;
    assert!(show.contains("id=\"job-priority\""), "{show}");
    assert!(show.contains(&format!("action=\"/jobs/{second}/top\"")));
    assert!(!show.contains("id=\"nice-form\""), "not hers to set");
    let token = csrf(&c, &web).await;
    let (status, _) = c
        .app
        .press(&web, &token, &format!("/jobs/{second}/top"))
        .await;
    assert_eq!(status, 303);
    let both = || async {
        (
            priority(&c.job(&alice, &first).await),
            priority(&c.job(&alice, &second).await),
        )
    };
    let (p1, p2) = both().await;
    assert!(p2 > p1, "{p2} {p1}");
    // Her own nice: refused, through the page and the API, and nothing changes.
    let (status, body) = c
        .app
        .post_form(
            &web,
            &format!("/jobs/{first}/nice"),
            &[("csrf", token.as_str()), ("nice", "-100")],
        )
        .await;
    assert_eq!(status, 409);
    assert!(body.contains("Priority not changed"));
    let res = reqwest::Client::new()
        .patch(c.app.url(&format!("/api/v1/jobs/{first}")))
        .bearer_auth(&alice.token)
        .json(&json!({"nice": -100}))
        .send()
        .await
        .expect("patch");
    assert_eq!(res.status(), 403);
    let (p1, p2) = both().await;
    assert!(p2 > p1, "{p2} {p1}");

    // The administrator raises the first above it again: Nice=-1000.
    let admin = c
        .app
        .login("admin", c.app.admin_password.as_deref().expect("admin"))
        .await;
    let (_, shown) = c.app.page(&admin, &format!("/jobs/{first}")).await;
    assert!(shown.contains("id=\"nice-form\""), "{shown}");
    let admin_token = csrf(&c, &admin).await;
    let (status, body) = c
        .app
        .post_form(
            &admin,
            &format!("/jobs/{first}/nice"),
            &[("csrf", admin_token.as_str()), ("nice", "a lot")],
        )
        .await;
    assert_eq!(status, 400);
    assert!(body.contains("is not a whole number"));
    let (status, _) = c
        .app
        .post_form(
            &admin,
            &format!("/jobs/{first}/nice"),
            &[("csrf", admin_token.as_str()), ("nice", "-1000")],
        )
        .await;
    assert_eq!(status, 303);
    let now = c.job(&alice, &first).await;
    assert_eq!(now["nice"], -1000);
    let (p1, p2) = both().await;
    assert!(p1 > p2 + 900, "{p1} {p2}");
    let (_, hers) = c.app.page(&web, &format!("/jobs/{first}")).await;
    assert!(hers.contains("(nice -1000)"), "{hers}");
    // In the audit log, with the figures before and after.
    let admin_api = c
        .app
        .create_token(&admin, "ops", &["read", "jobs", "admin"])
        .await;
    let audit: Value = c
        .app
        .get_bearer("/api/v1/admin/audit?action=job.update", &admin_api)
        .await
        .json()
        .await
        .expect("json");
    let text = audit.to_string();
    assert!(text.contains("\"nice\":-1000"), "{text}");
    // `scontrol update Nice=` is the same change: hers is refused, Slurm's words, exit
    // 1; the administrator's takes.
    let scontrol = |token: &str, nice: &str| {
        let mut cmd =
            crate::fixtures::cli::client(&c, token, &alice.home, &crate::fixtures::atrium_bin());
        cmd.args([
            "scontrol",
            "update",
            &format!("JobId={second}"),
            &format!("Nice={nice}"),
        ]);
        cmd.output().expect("scontrol")
    };
    let refused = scontrol(&alice.token, "-5");
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains(&format!("for job {second}")), "{err}");
    let taken = scontrol(&admin_api, "-5000");
    assert!(
        taken.status.success(),
        "{}",
        String::from_utf8_lossy(&taken.stderr)
    );
    assert_eq!(c.job(&alice, &second).await["nice"], -5000);
    let cancel = reqwest::Client::new()
        .delete(c.app.url(&format!("/api/v1/jobs/{busy}")))
        .bearer_auth(&bob.token)
        .send()
        .await
        .expect("cancel");
    assert!(cancel.status().is_success());
}
