//! LDAP login against a real OpenLDAP `slapd` started by the test.

use std::time::{Duration, Instant};

use atrium_tests::support::ldap::{
    Slapd, SlapdOptions, BASE_DN, GROUPS_DN, SERVICE_DN, SERVICE_PASSWORD,
};
use serde_json::Value;

use crate::fixtures::{eventually, spawn_with, Options, TestApp};

/// Direct bind: DN templates for both OUs, groups from `memberOf`. Administrators: the
/// directory group `atrium-admins` by its DN, and the local group `admin`.
fn direct_bind(url: &str, extra: &str) -> String {
    format!(
        "[auth]\nadmin_groups = [\"cn=atrium-admins,{GROUPS_DN}\", \"admin\"]\n[auth.ldap]\nurl = \"{url}\"\ntimeout_seconds = 2\n\
         bind_dn_templates = [\"uid={{username}},ou=people,{BASE_DN}\", \"uid={{username}},ou=staff,{BASE_DN}\"]\n\
         allowed_groups = [\"gpu-users\"]\n{extra}"
    )
}

/// Search then bind with the service account, groups from a group search.
fn search_bind(url: &str, extra: &str) -> String {
    format!(
        "[auth]\nadmin_groups = [\"cn=atrium-admins,{GROUPS_DN}\", \"admin\"]\n[auth.ldap]\nurl = \"{url}\"\ntimeout_seconds = 2\n\
         allowed_groups = [\"gpu-users\"]\n{extra}\n\
         [auth.ldap.search]\nbind_dn = \"{SERVICE_DN}\"\nbind_password = \"{SERVICE_PASSWORD}\"\nbase = \"{BASE_DN}\"\nfilter = \"(&(objectClass=posixAccount)(uid={{username}}))\"\n\
         [auth.ldap.groups]\nsource = \"search\"\nbase = \"{GROUPS_DN}\"\nkind = \"any\"\n"
    )
}

async fn portal(config: String) -> TestApp {
    spawn_with(Options {
        // The injection test makes many failed attempts from one address.
        extra_config: format!(
            "{config}\n[auth.rate_limit]\nper_user = 100000\nper_address = 100000\n"
        ),
        ..Options::default()
    })
    .await
}

#[tokio::test]
async fn direct_bind_login_stores_posix_identity_and_groups() {
    let slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    let app = portal(direct_bind(&slapd.url(), "")).await;

    let (status, alice) = app.api_login("Alice ", "alice-secret").await;
    assert_eq!(status, 200, "{alice}");
    assert_eq!(alice["username"], "alice", "trimmed and lowercased");
    assert_eq!(alice["source"], "ldap");
    assert_eq!(alice["uid_number"], 10001);
    assert_eq!(alice["gid_number"], 10001);
    assert_eq!(alice["home"], "/home/alice");
    assert_eq!(
        alice["groups"],
        serde_json::json!(["gpu-users"]),
        "memberOf"
    );
    assert_eq!(alice["admin"], false);

    // A user in the second OU, through the second template.
    let (status, frank) = app.api_login("frank", "frank-secret").await;
    assert_eq!(status, 200, "{frank}");
    assert_eq!(frank["uid_number"], 10006);

    // The admin group grants admin.
    let (status, dave) = app.api_login("dave", "dave-secret").await;
    assert_eq!(status, 200);
    assert_eq!(dave["admin"], true);
    assert_eq!(
        dave["groups"],
        serde_json::json!(["atrium-admins", "gpu-users"])
    );

    // Right password, but outside allowed_groups.
    let (status, body) = app.api_login("carol", "carol-secret").await;
    assert_eq!(status, 403, "{body}");

    // The identity is kept: `atrium user list` shows the directory users.
    let list = String::from_utf8_lossy(&app.cli(&["user", "list"], "").stdout).to_string();
    assert!(
        list.contains("alice") && list.contains("ldap") && list.contains("10001"),
        "{list}"
    );
    assert!(
        !list.contains("carol"),
        "a refused user is not recorded: {list}"
    );

    // Local break-glass admin still logs in beside LDAP.
    let (status, admin) = app
        .api_login("admin", app.admin_password.as_deref().expect("pw"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(admin["source"], "local");
}

#[tokio::test]
async fn search_then_bind_finds_users_in_both_ous_and_all_group_kinds() {
    let slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    let app = portal(search_bind(&slapd.url(), "")).await;

    let (status, alice) = app.api_login("alice", "alice-secret").await;
    assert_eq!(status, 200, "{alice}");
    assert_eq!(
        alice["groups"],
        serde_json::json!(["gpu-users", "ml-team"]),
        "posixGroup + groupOfNames"
    );
    let (status, frank) = app.api_login("frank", "frank-secret").await;
    assert_eq!(status, 200, "{frank}");
    assert_eq!(
        frank["groups"],
        serde_json::json!(["gpu-users", "hpc-staff"]),
        "groupOfUniqueNames"
    );
    // A DN full of specials (`cn=Eve\, \"Q\" \<Test\>`) binds as found.
    let (status, eve) = app.api_login("eve", "eve-secret").await;
    assert_eq!(status, 200, "{eve}");
    assert_eq!(eve["uid_number"], 10005);

    // A search finding two entries logs nobody in.
    let (status, _) = app.api_login("dup", "dup-secret").await;
    assert_eq!(status, 401);
    // allowed_groups is enforced for the group-search source too.
    let (status, _) = app.api_login("carol", "carol-secret").await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn wrong_password_unknown_user_and_empty_password_get_one_answer() {
    let slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    for config in [direct_bind(&slapd.url(), ""), search_bind(&slapd.url(), "")] {
        let app = portal(config).await;
        let (s1, wrong) = app.api_login("alice", "nope").await;
        let (s2, unknown) = app.api_login("zelda", "nope").await;
        let (s3, empty) = app.api_login("alice", "").await;
        assert_eq!((s1.as_u16(), s2.as_u16(), s3.as_u16()), (401, 401, 401));
        assert_eq!(wrong, unknown);
        assert_eq!(wrong, empty);
        assert_eq!(wrong["message"], "invalid username or password");
    }
}

#[tokio::test]
async fn injection_attempts_never_authenticate_as_anybody() {
    let slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    // A permissive pattern so that hostile names reach the directory code and its
    // escaping is what stands in the way.
    let permissive = "lowercase_usernames = false\nusername_pattern = \"^[\\\\s\\\\S]{1,80}$\"\n";
    let attempts = [
        "*",
        "alice*",
        "*)(uid=*",
        ")(uid=*",
        "alice)(uid=*",
        "admin)(|(uid=*",
        "alice)(|(objectClass=*)",
        "alice\0",
        "alice\0)(uid=*",
        "alice,ou=people",
        "alice+cn=x",
        "alice\"",
        "alice\\",
        "<alice>",
        "alice;x",
        "uid=alice",
        "#alice",
        " #alice",
        "\\2a",
    ];
    for config in [
        direct_bind(&slapd.url(), permissive),
        search_bind(&slapd.url(), permissive),
    ] {
        let app = portal(config).await;
        for name in attempts {
            for password in ["alice-secret", "*", "anything"] {
                let (status, body) = app.api_login(name, password).await;
                assert_eq!(status, 401, "{name:?}/{password:?} → {body}");
            }
        }
        // The genuine login still works under the same configuration, and surrounding
        // blanks are trimmed (the same identity, not another one).
        for name in ["alice", " alice", "alice\t"] {
            let (status, body) = app.api_login(name, "alice-secret").await;
            assert_eq!(
                (status.as_u16(), body["username"].as_str()),
                (200, Some("alice")),
                "{name:?}"
            );
        }
    }
    // And with the default POSIX pattern every one of them is refused outright.
    let app = portal(direct_bind(&slapd.url(), "")).await;
    for name in attempts {
        assert_eq!(app.api_login(name, "alice-secret").await.0, 401, "{name:?}");
    }
}

#[tokio::test]
async fn dead_directory_fails_logins_fast_and_nothing_else() {
    let mut slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    let app = portal(direct_bind(&slapd.url(), "")).await;
    let (status, alice) = app.api_login("alice", "alice-secret").await;
    assert_eq!(status, 200);
    // A token made while the directory is up.
    let client = app
        .login("admin", app.admin_password.as_deref().expect("pw"))
        .await;
    let token = app.create_token(&client, "during-outage", &["read"]).await;

    slapd.stop().await.expect("stop slapd");
    let started = Instant::now();
    let (status, body) = app.api_login("alice", "alice-secret").await;
    assert_eq!(status, 503, "{body}\n{}", app.log().join("\n"));
    assert_eq!(body["error"], "unavailable");
    assert!(
        body["message"].as_str().unwrap_or("").contains("directory"),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "within the 2 s timeout"
    );
    // The login page says so too.
    let form = app.browser_like_client();
    let res = app.post_login(&form, "bob", "bob-secret").await;
    assert_eq!(res.status(), 503);
    assert!(res
        .text()
        .await
        .expect("html")
        .contains("directory is unavailable"));
    // Everything else keeps working.
    assert_eq!(
        reqwest::get(app.url("/healthz")).await.expect("h").status(),
        200
    );
    assert_eq!(app.get_bearer("/api/v1/me", &token).await.status(), 200);
    assert_eq!(alice["username"], "alice");

    slapd.restart().await.expect("restart slapd");
    // The first login after the restart already works: a kept connection that the
    // old slapd took down is replaced, not reported as an outage.
    let (status, body) = app.api_login("alice", "alice-secret").await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn starttls_and_ldaps_with_the_test_ca() {
    let slapd = Slapd::start(SlapdOptions { tls: true })
        .await
        .expect("slapd");
    let ca = slapd.ca_file().expect("ca").display().to_string();
    let ldaps = slapd.ldaps_url().expect("ldaps");

    let starttls = portal(direct_bind(
        &slapd.url(),
        &format!("starttls = true\nca_file = \"{ca}\"\n"),
    ))
    .await;
    assert_eq!(starttls.api_login("alice", "alice-secret").await.0, 200);
    let over_ldaps = portal(direct_bind(&ldaps, &format!("ca_file = \"{ca}\"\n"))).await;
    assert_eq!(over_ldaps.api_login("bob", "bob-secret").await.0, 200);

    // Verification is on by default: without the CA the directory is not trusted.
    let untrusted = portal(direct_bind(&ldaps, "")).await;
    let (status, body) = untrusted.api_login("alice", "alice-secret").await;
    assert_eq!(status, 503, "{body}");
    let untrusted = portal(direct_bind(&slapd.url(), "starttls = true\n")).await;
    assert_eq!(untrusted.api_login("alice", "alice-secret").await.0, 503);
}

/// Send `signal` to the test's slapd process (and nothing else).
fn signal_slapd(slapd: &Slapd, signal: &str) {
    let pid = slapd.pid().expect("slapd runs").to_string();
    let status = std::process::Command::new("kill")
        .args([signal, &pid])
        .status()
        .expect("kill");
    assert!(status.success(), "cannot signal slapd {pid}");
}

#[tokio::test]
async fn hung_directory_times_out_logins_without_blocking_anything_else() {
    let slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    let app = portal(direct_bind(&slapd.url(), "")).await;
    assert_eq!(app.api_login("alice", "alice-secret").await.0, 200);
    let client = app
        .login("admin", app.admin_password.as_deref().expect("pw"))
        .await;
    let token = app.create_token(&client, "t", &["read"]).await;

    // The directory accepts connections but never answers.
    signal_slapd(&slapd, "-STOP");
    let hung = tokio::spawn({
        let url = app.url("/api/v1/login");
        async move {
            let started = Instant::now();
            let res = reqwest::Client::new()
                .post(url)
                .json(&serde_json::json!({"username": "bob", "password": "bob-secret"}))
                .send()
                .await
                .expect("login");
            (res.status().as_u16(), started.elapsed())
        }
    });
    // Meanwhile the portal answers everything else at once.
    for _ in 0..20 {
        let started = Instant::now();
        assert_eq!(app.get_bearer("/api/v1/me", &token).await.status(), 200);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
    let (status, elapsed) = hung.await.expect("join");
    signal_slapd(&slapd, "-CONT");
    assert_eq!(status, 503);
    assert!(
        elapsed >= Duration::from_millis(1900) && elapsed < Duration::from_secs(6),
        "the 2 s timeout bounds the login: {elapsed:?}"
    );
    eventually("logins recover", Duration::from_secs(10), || async {
        app.api_login("bob", "bob-secret").await.0 == 200
    })
    .await;
}

#[tokio::test]
async fn a_directory_group_named_like_a_local_group_grants_nothing() {
    let slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    // Anyone who may create a group anywhere in the directory makes one called admin,
    // in another OU, and puts bob in it.
    slapd
        .ldapadd(&format!(
            "dn: ou=projects,{BASE_DN}\nobjectClass: organizationalUnit\nou: projects\n\n\
             dn: cn=admin,ou=projects,{BASE_DN}\nobjectClass: groupOfNames\ncn: admin\n\
             member: uid=bob,ou=people,{BASE_DN}\n\n\
             dn: cn=gpu-users,ou=projects,{BASE_DN}\nobjectClass: groupOfNames\ncn: gpu-users\n\
             member: uid=carol,ou=people,{BASE_DN}\n"
        ))
        .await
        .expect("ldapadd");
    // The default admin_groups (the local group admin) and the DN of the real one; the
    // allowed group by DN, spelled in another case.
    let config = format!(
        "[auth]\nadmin_groups = [\"admin\", \"CN=Atrium-Admins,OU=Groups,DC=example,DC=org\"]\n\
         [auth.ldap]\nurl = \"{}\"\ntimeout_seconds = 2\n\
         bind_dn_templates = [\"uid={{username}},ou=people,{BASE_DN}\"]\n\
         allowed_groups = [\"cn=gpu-users,{GROUPS_DN}\"]\n",
        slapd.url()
    );
    let app = portal(config).await;

    let (status, bob) = app.api_login("bob", "bob-secret").await;
    assert_eq!(status, 200, "{bob}");
    assert_eq!(bob["groups"], serde_json::json!(["admin", "gpu-users"]));
    assert_eq!(
        bob["admin"], false,
        "cn=admin,ou=projects is not the local admin"
    );
    let bob_client = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .expect("client");
    let res = bob_client
        .post(app.url("/api/v1/login"))
        .json(&serde_json::json!({"username": "bob", "password": "bob-secret"}))
        .send()
        .await
        .expect("login");
    assert_eq!(res.status(), 200);
    let res = bob_client
        .get(app.url("/api/v1/admin/users"))
        .send()
        .await
        .expect("admin api");
    assert_eq!(res.status(), 403);

    // The group named by its DN makes dave an administrator.
    let (status, dave) = app.api_login("dave", "dave-secret").await;
    assert_eq!(status, 200, "{dave}");
    assert_eq!(dave["admin"], true);

    // carol is in a gpu-users, but not the allowed one.
    let (status, carol) = app.api_login("carol", "carol-secret").await;
    assert_eq!(status, 403, "{carol}");

    // The local administrator is still one.
    let (status, admin) = app
        .api_login("admin", app.admin_password.as_deref().expect("pw"))
        .await;
    assert_eq!(status, 200, "{admin}");
    assert_eq!(admin["admin"], true);
    let admin_client = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .expect("client");
    admin_client
        .post(app.url("/api/v1/login"))
        .json(&serde_json::json!({"username": "admin", "password": app.admin_password.as_deref().expect("pw")}))
        .send()
        .await
        .expect("login");
    let users: Value = admin_client
        .get(app.url("/api/v1/admin/users"))
        .send()
        .await
        .expect("users")
        .json()
        .await
        .expect("json");
    let admin_of = |name: &str| {
        users["users"]
            .as_array()
            .and_then(|u| u.iter().find(|u| u["username"] == name))
            .map(|u| u["admin"].clone())
            .unwrap_or_else(|| panic!("no {name} in {users}"))
    };
    assert_eq!(admin_of("bob"), false);
    assert_eq!(admin_of("dave"), true);
    assert_eq!(admin_of("admin"), true);
}
