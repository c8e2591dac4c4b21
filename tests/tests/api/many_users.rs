//! Many users (issue 23): 200 of the fixture directory's 2,000 generated users log in at
//! once, each to their own account; administrators list the accounts a page at a time.

use atrium_tests::support::ldap::{Slapd, SlapdOptions, BASE_DN};
use atrium_tests::support::many_users;
use serde_json::Value;

use crate::fixtures::{spawn_with, Options, TestApp};

/// How many directory users log in at once.
const AT_ONCE: u32 = 200;

/// Direct bind, groups from `memberOf`, `gpu-users` allowed; the directory's pool and
/// timeout, and the login rate limit, as configured by default: every login comes from
/// 127.0.0.1, ten times the attempts one address may have unsettled at once.
async fn portal(slapd: &Slapd) -> TestApp {
    spawn_with(Options {
        extra_config: format!(
            "[auth.ldap]\nurl = \"{url}\"\n\
             bind_dn_templates = [\"uid={{username}},ou=people,{BASE_DN}\"]\n\
             allowed_groups = [\"gpu-users\"]\n",
            url = slapd.url()
        ),
        ..Options::default()
    })
    .await
}

/// Users 10, 20, … 2,000: spread over the whole directory and all twenty teams.
fn chosen() -> impl Iterator<Item = many_users::GeneratedUser> {
    (1..=AT_ONCE).map(|i| many_users::user(i * many_users::COUNT / AT_ONCE))
}

#[tokio::test]
async fn two_hundred_directory_users_log_in_at_once_each_to_their_own_account() {
    let slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    let app = portal(&slapd).await;
    let client = reqwest::Client::new();

    let logins = chosen().map(|user| {
        let (client, app) = (&client, &app);
        async move {
            let answer = app.api_login_in(client, &user.uid, &user.password).await;
            (user, answer)
        }
    });
    let answers = futures_util::future::join_all(logins).await;

    let mut uid_numbers = std::collections::BTreeSet::new();
    for (user, (status, body)) in &answers {
        assert_eq!(*status, 200, "{}: {body}", user.uid);
        assert_eq!(body["username"], user.uid.as_str(), "{body}");
        assert_eq!(body["source"], "ldap", "{body}");
        assert_eq!(body["uid_number"], user.uid_number, "{body}");
        assert_eq!(body["home"], format!("/home/{}", user.uid), "{body}");
        assert_eq!(body["groups"], serde_json::json!(["gpu-users"]), "{body}");
        uid_numbers.insert(user.uid_number);
    }
    assert_eq!(uid_numbers.len(), AT_ONCE as usize, "200 distinct users");

    // Each has an account of their own, kept.
    let out = app.cli(&["user", "list"], "");
    let list = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{list}");
    for user in chosen() {
        let line = list
            .lines()
            .find(|l| l.split_whitespace().next() == Some(user.uid.as_str()))
            .unwrap_or_else(|| panic!("{} not in `atrium user list`:\n{list}", user.uid));
        assert!(
            line.contains("ldap") && line.contains(&user.uid_number.to_string()),
            "{line}"
        );
    }
    let ldap_accounts = list.lines().filter(|l| l.contains(" ldap ")).count();
    assert_eq!(ldap_accounts, AT_ONCE as usize, "{list}");

    // The administrators' list of accounts comes a page at a time: 201 accounts (the
    // local admin and the 200), by name.
    let password = app.admin_password.clone().expect("admin password");
    let admin = app.login("admin", &password).await;
    let token = app.create_token(&admin, "admin", &["read", "admin"]).await;
    let listed = |path: &'static str| {
        let (app, token) = (&app, &token);
        async move {
            let res = app.get_bearer(path, token).await;
            assert_eq!(res.status(), 200, "{path}");
            res.json::<Value>().await.expect("json")
        }
    };
    let first = listed("/api/v1/admin/users").await;
    assert_eq!(first["total"], 201, "{first}");
    assert_eq!(
        (&first["page"], &first["per_page"]),
        (&1.into(), &100.into())
    );
    let names = |page: &Value| -> Vec<String> {
        page["users"]
            .as_array()
            .expect("users")
            .iter()
            .map(|u| u["username"].as_str().expect("username").to_string())
            .collect()
    };
    assert_eq!(names(&first).len(), 100);
    assert_eq!(names(&first)[0], "admin");
    let third = listed("/api/v1/admin/users?page=3&per_page=80").await;
    let last_names = names(&third);
    assert_eq!(last_names.len(), 41, "201 - 160: {third}");
    assert_eq!(last_names.last().map(String::as_str), Some("user2000"));
    assert_eq!(third["users"][0]["source"], "ldap", "{third}");
    let all = listed("/api/v1/admin/users?per_page=5000").await;
    assert_eq!(all["per_page"], 1000, "at most 1000 a page: {all}");
    assert_eq!(names(&all).len(), 201);

    let html = admin
        .get(app.url("/admin/users?page=2"))
        .send()
        .await
        .expect("users page")
        .text()
        .await
        .expect("html");
    assert!(html.contains("Page 2 of 3 (201 users)"), "{html}");
    assert_eq!(html.matches("<tr id=\"user-").count(), 100, "{html}");
    let overview = admin
        .get(app.url("/admin"))
        .send()
        .await
        .expect("overview")
        .text()
        .await
        .expect("html");
    assert!(
        overview.contains("201 (1 administrator, 0 disabled)"),
        "{overview}"
    );
}
