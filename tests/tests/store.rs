//! One store test suite, run against SQLite and against PostgreSQL.

use atrium::config::DatabaseUrl;
use std::path::PathBuf;

use atrium::store::{NewApiToken, NewAuditEntry, NewUser, PosixIdentity, Store, StoreError};
use atrium_tests::support::fresh_database;

async fn suite(store: Store) {
    store.migrate().await.expect("migrate twice is a no-op");
    store.ping().await.expect("ping");
    let now = 1_700_000_000_000;

    // Users: create, find, conflict, list.
    let alice = store
        .create_local_user(
            &NewUser {
                username: "alice".into(),
                display_name: "Alice A.".into(),
                email: "alice@example.org".into(),
                password_hash: Some("$argon2id$stub".into()),
                uid_number: Some(1001),
                gid_number: Some(1001),
                home: Some("/home/alice".into()),
            },
            now,
        )
        .await
        .expect("create alice");
    assert_eq!(alice.username, "alice");
    assert_eq!(alice.uid_number, Some(1001));
    assert!(!alice.disabled);
    let again = store
        .create_local_user(
            &NewUser {
                username: "alice".into(),
                ..NewUser::default()
            },
            now,
        )
        .await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    assert_eq!(
        store.user_by_name("alice").await.expect("get"),
        Some(alice.clone())
    );
    assert_eq!(
        store.user_by_id(alice.id).await.expect("get"),
        Some(alice.clone())
    );
    assert_eq!(store.user_by_name("nobody").await.expect("get"), None);
    let bob = store
        .create_local_user(
            &NewUser {
                username: "bob".into(),
                ..NewUser::default()
            },
            now,
        )
        .await
        .expect("bob");
    let names: Vec<String> = store
        .list_users()
        .await
        .expect("list")
        .into_iter()
        .map(|u| u.username)
        .collect();
    assert_eq!(names, ["alice", "bob"]);

    // Groups and memberships.
    let admins = store
        .ensure_group("admin", "local", now)
        .await
        .expect("group");
    assert_eq!(
        store
            .ensure_group("admin", "local", now)
            .await
            .expect("again"),
        admins
    );
    let ml = store
        .ensure_group("ml-team", "local", now)
        .await
        .expect("group");
    assert!(!store.any_member_of(&["admin".into()]).await.expect("any"));
    store.add_member(alice.id, ml).await.expect("member");
    store.add_member(alice.id, admins).await.expect("member");
    store
        .add_member(alice.id, admins)
        .await
        .expect("idempotent");
    assert_eq!(
        store.groups_of(alice.id).await.expect("groups"),
        ["admin", "ml-team"]
    );
    assert!(store.any_member_of(&["admin".into()]).await.expect("any"));

    // Disabling bumps the auth epoch and hides the user from admin checks.
    let epoch = store.auth_epoch().await.expect("epoch");
    store
        .set_disabled(alice.id, true, now + 1)
        .await
        .expect("disable");
    assert!(
        store
            .user_by_id(alice.id)
            .await
            .expect("get")
            .expect("row")
            .disabled
    );
    assert!(!store.any_member_of(&["admin".into()]).await.expect("any"));
    assert!(store.auth_epoch().await.expect("epoch") > epoch);
    store
        .set_disabled(alice.id, false, now + 2)
        .await
        .expect("enable");
    assert!(matches!(
        store.set_disabled(9999, true, now).await,
        Err(StoreError::NotFound)
    ));

    // Login sessions: create, extend, revoke (once), purge.
    store
        .create_login_session("jti-1", alice.id, now, now + 60_000, "127.0.0.1", "test")
        .await
        .expect("session");
    store
        .extend_login_session("jti-1", now + 120_000)
        .await
        .expect("extend");
    let session = store
        .login_session("jti-1")
        .await
        .expect("get")
        .expect("row");
    assert_eq!(
        (session.user_id, session.expires_at, session.revoked_at),
        (alice.id, now + 120_000, None)
    );
    assert!(store
        .revoke_login_session("jti-1", now + 5)
        .await
        .expect("revoke"));
    assert!(!store
        .revoke_login_session("jti-1", now + 6)
        .await
        .expect("revoke twice"));
    assert_eq!(
        store
            .login_session("jti-1")
            .await
            .expect("get")
            .expect("row")
            .revoked_at,
        Some(now + 5)
    );
    assert_eq!(
        store
            .purge_login_sessions(now + 10_000_000, 1000)
            .await
            .expect("purge"),
        1
    );

    // A new password ends the user's sessions.
    store
        .create_login_session("jti-2", alice.id, now, now + 60_000, "", "")
        .await
        .expect("session");
    store
        .set_password_hash(alice.id, "$argon2id$new", now + 7)
        .await
        .expect("passwd");
    assert!(store
        .login_session("jti-2")
        .await
        .expect("get")
        .expect("row")
        .revoked_at
        .is_some());

    // API tokens: create, use, expiry, name conflicts, revoke.
    let token = store
        .create_api_token(
            &NewApiToken {
                user_id: alice.id,
                name: "laptop",
                token_hash: "h1",
                scopes: "read jobs",
                expires_at: Some(now + 1000),
            },
            now,
        )
        .await
        .expect("token");
    let dup = store
        .create_api_token(
            &NewApiToken {
                user_id: alice.id,
                name: "laptop",
                token_hash: "h2",
                scopes: "read",
                expires_at: None,
            },
            now,
        )
        .await;
    assert!(matches!(dup, Err(StoreError::Conflict(_))), "{dup:?}");
    let used = store
        .use_api_token("h1", now + 10)
        .await
        .expect("use")
        .expect("live");
    assert_eq!(
        (used.username.as_str(), used.disabled, used.token.id),
        ("alice", false, token.id)
    );
    assert_eq!(
        store
            .list_api_tokens(alice.id, now + 20)
            .await
            .expect("list")[0]
            .last_used_at,
        Some(now + 10)
    );
    assert_eq!(
        store.use_api_token("h1", now + 1000).await.expect("use"),
        None,
        "expired"
    );
    assert_eq!(store.use_api_token("nope", now).await.expect("use"), None);
    assert!(store
        .list_api_tokens(alice.id, now + 5000)
        .await
        .expect("list")
        .is_empty());
    assert!(matches!(
        store.revoke_api_token(bob.id, token.id, now).await,
        Err(StoreError::NotFound)
    ));
    store
        .revoke_api_token(alice.id, token.id, now + 30)
        .await
        .expect("revoke");
    assert_eq!(
        store.use_api_token("h1", now + 40).await.expect("use"),
        None
    );
    // The name is free again once revoked.
    store
        .create_api_token(
            &NewApiToken {
                user_id: alice.id,
                name: "laptop",
                token_hash: "h3",
                scopes: "read",
                expires_at: None,
            },
            now,
        )
        .await
        .expect("reuse name");

    // Audit log, newest first.
    for (i, action) in ["user.add", "token.create"].into_iter().enumerate() {
        store
            .audit(
                &NewAuditEntry {
                    actor: "admin",
                    action,
                    target: "alice",
                    detail: "{\"x\":1}",
                    client_addr: "127.0.0.1",
                },
                now + i as i64,
            )
            .await
            .expect("audit");
    }
    let entries = store.audit_entries(10).await.expect("entries");
    let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(actions, ["token.create", "user.add"]);
    assert_eq!(entries[0].detail, "{\"x\":1}");
}

fn local(name: &str) -> NewUser {
    NewUser {
        username: name.into(),
        password_hash: Some("$argon2id$stub".into()),
        home: Some(format!("/home/{name}")),
        ..NewUser::default()
    }
}

/// uid allocation for local accounts, and the identity jobs run as.
async fn posix_suite(store: Store) {
    let now = 1_700_000_000_000;
    let range = || 40000..=40004;

    // The lowest number no user holds as uid or gid, no group holds as gid, and the
    // system does not know; the gid is the same number unless given.
    store
        .create_local_user(
            &NewUser {
                uid_number: Some(40000),
                gid_number: Some(40001),
                ..local("held")
            },
            now,
        )
        .await
        .expect("explicit uid");
    let staff = store
        .ensure_group("staff", "local", now)
        .await
        .expect("group");
    store
        .set_group_gid(staff, Some(40002))
        .await
        .expect("group gid");
    assert!(matches!(
        store.set_group_gid(9999, Some(1)).await,
        Err(StoreError::NotFound)
    ));
    let carol = store
        .create_local_user_allocating_uid(&local("carol"), range(), |n| n == 40003, now)
        .await
        .expect("carol");
    assert_eq!(
        (carol.uid_number, carol.gid_number),
        (Some(40004), Some(40004))
    );
    assert_eq!(carol.home.as_deref(), Some("/home/carol"));
    let err = store
        .create_local_user_allocating_uid(&local("dan"), range(), |n| n == 40003, now)
        .await
        .expect_err("range full");
    assert!(
        matches!(
            err,
            StoreError::NoFreeUid {
                min: 40000,
                max: 40004
            }
        ),
        "{err:?}"
    );
    assert_eq!(store.user_by_name("dan").await.expect("get"), None);
    let dup = store
        .create_local_user_allocating_uid(&local("carol"), 41000..=41000, |_| false, now)
        .await;
    assert!(matches!(dup, Err(StoreError::Conflict(_))), "{dup:?}");
    let with_gid = store
        .create_local_user_allocating_uid(
            &NewUser {
                gid_number: Some(100),
                ..local("erin")
            },
            41000..=41000,
            |_| false,
            now,
        )
        .await
        .expect("erin");
    assert_eq!(
        (with_gid.uid_number, with_gid.gid_number),
        (Some(41000), Some(100)),
        "the failed duplicate did not use up 41000"
    );

    // Concurrent allocations never share a uid.
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .create_local_user_allocating_uid(
                        &local(&format!("racer{i}")),
                        42000..=42009,
                        |_| false,
                        now,
                    )
                    .await
            })
        })
        .collect();
    let mut uids = Vec::new();
    for task in tasks {
        let user = task.await.expect("join").expect("allocated");
        uids.push(user.uid_number.expect("uid"));
    }
    uids.sort();
    assert_eq!(uids, (42000..42006).collect::<Vec<i64>>());

    // The identity jobs run as, with the groups' gids.
    let ml = store
        .ensure_group("ml-team", "local", now)
        .await
        .expect("group");
    store.add_member(carol.id, ml).await.expect("member");
    store.add_member(carol.id, staff).await.expect("member");
    assert_eq!(
        store.posix_identity("carol").await.expect("identity"),
        Some(PosixIdentity {
            uid: 40004,
            gid: 40004,
            home: PathBuf::from("/home/carol"),
            groups: vec![("ml-team".into(), None), ("staff".into(), Some(40002))],
        })
    );
    let none = store
        .create_local_user(&local("no-uid"), now)
        .await
        .expect("no uid");
    assert_eq!(none.uid_number, None);
    assert_eq!(
        store.posix_identity("no-uid").await.expect("identity"),
        None
    );
    assert_eq!(
        store.posix_identity("nobody").await.expect("identity"),
        None
    );
    store
        .create_local_user(
            &NewUser {
                uid_number: Some(0),
                gid_number: Some(0),
                ..local("toor")
            },
            now,
        )
        .await
        .expect("a root row");
    assert_eq!(
        store.posix_identity("toor").await.expect("identity"),
        None,
        "no job runs as root"
    );
}

#[tokio::test]
async fn posix_identities_on_sqlite() {
    let (store, _dir) = on_sqlite().await;
    posix_suite(store).await;
}

#[tokio::test]
async fn posix_identities_on_postgres() {
    let (store, _db) = on_postgres().await;
    posix_suite(store).await;
}

#[tokio::test]
async fn store_suite_on_sqlite() {
    let (store, _dir) = on_sqlite().await;
    suite(store).await;
}

#[tokio::test]
async fn store_suite_on_postgres() {
    let (store, _db) = on_postgres().await;
    suite(store).await;
}

/// Interactive sessions: names unique among running ones, a per-user limit, state
/// changes, the end recorded once, the routes to restore after a restart.
async fn sessions_suite(store: Store) {
    use atrium::store::NewSession;
    let now = 1_700_000_000_000;
    store
        .create_local_user(&local("carol"), now)
        .await
        .expect("carol");
    let one_gpu = scheduler::GpuRequest {
        kind: scheduler::SliceKind::Gpu { r#type: None },
        count: 1,
        per: scheduler::GpuPer::Node,
    };
    let new = |name: &'static str| NewSession {
        user_name: "carol",
        name,
        kind: "notebook",
        environment: "python",
        gpus: Some(&one_gpu),
        logdir: None,
        folder: None,
        secret: "s3cret",
    };
    let a = store
        .create_session(&new("a"), "/spool/sessions", 2, now)
        .await
        .expect("a");
    assert_eq!(a.state, "pending");
    assert_eq!(a.gpus.as_ref(), Some(&one_gpu));
    assert_eq!(a.socket_dir, format!("/spool/sessions/{}", a.id));
    let again = store
        .create_session(&new("a"), "/spool/sessions", 2, now)
        .await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    let b = store
        .create_session(&new("b"), "/spool/sessions", 2, now)
        .await
        .expect("b");
    let over = store
        .create_session(&new("c"), "/spool/sessions", 2, now)
        .await;
    assert!(
        matches!(over, Err(StoreError::Conflict(_))),
        "the limit: {over:?}"
    );

    store.set_session_job(a.id, 41).await.expect("job");
    store
        .set_session_state(a.id, "starting", now + 1)
        .await
        .expect("starting");
    store
        .set_session_state(a.id, "ready", now + 2)
        .await
        .expect("ready");
    store
        .touch_sessions(&[(a.id, now + 10), (b.id, now + 5)])
        .await
        .expect("touch");
    let a_now = store.session(a.id).await.expect("a");
    assert_eq!(
        (
            a_now.state.as_str(),
            a_now.ready_at,
            a_now.job_id,
            a_now.last_activity
        ),
        ("ready", Some(now + 2), Some(41), Some(now + 10))
    );
    store
        .stopping_session(a.id, "idle")
        .await
        .expect("stopping");
    assert!(store
        .end_session(a.id, "stopped", None, now + 20)
        .await
        .expect("end"));
    assert!(!store
        .end_session(a.id, "failed", Some("later"), now + 30)
        .await
        .expect("end once"));
    let ended = store.session(a.id).await.expect("a");
    assert_eq!(ended.state, "ended");
    assert_eq!(
        ended.end_reason.as_deref(),
        Some("idle"),
        "the first reason stays"
    );
    assert_eq!(ended.ended_at, Some(now + 20));

    // The name is free again once ended; routes list only sessions not over.
    let a2 = store
        .create_session(&new("a"), "/spool/sessions", 2, now + 40)
        .await
        .expect("a again");
    let active: Vec<i64> = store
        .active_sessions()
        .await
        .expect("active")
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(active, vec![b.id, a2.id]);
    let mine: Vec<i64> = store
        .sessions_of("carol", 10)
        .await
        .expect("mine")
        .iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(mine, vec![a2.id, b.id, a.id]);
}

/// A session's GPU request reads back as it was stored, for each kind of slice.
async fn session_gpus_suite(store: Store) {
    use atrium::store::NewSession;
    use scheduler::{GpuPer, GpuRequest, SliceKind};
    let now = 1_700_000_000_000;
    store
        .create_local_user(&local("dora"), now)
        .await
        .expect("dora");
    let asked = [
        None,
        Some(GpuRequest {
            kind: SliceKind::Gpu { r#type: None },
            count: 2,
            per: GpuPer::Node,
        }),
        Some(GpuRequest {
            kind: SliceKind::Gpu {
                r#type: Some("1g.10gb".into()),
            },
            count: 3,
            per: GpuPer::Node,
        }),
        Some(GpuRequest {
            kind: SliceKind::Shard,
            count: 4,
            per: GpuPer::Node,
        }),
    ];
    for (i, gpus) in asked.iter().enumerate() {
        let name = format!("s{i}");
        let made = store
            .create_session(
                &NewSession {
                    user_name: "dora",
                    name: &name,
                    kind: "notebook",
                    environment: "python",
                    gpus: gpus.as_ref(),
                    logdir: None,
                    folder: None,
                    secret: "s3cret",
                },
                "/spool/sessions",
                10,
                now,
            )
            .await
            .expect("session");
        assert_eq!(&made.gpus, gpus);
        let read = store.session(made.id).await.expect("read back");
        assert_eq!(&read.gpus, gpus);
    }
}

#[tokio::test]
async fn session_gpus_on_sqlite() {
    let (store, _dir) = on_sqlite().await;
    session_gpus_suite(store).await;
}

#[tokio::test]
async fn session_gpus_on_postgres() {
    let (store, _db) = on_postgres().await;
    session_gpus_suite(store).await;
}

#[tokio::test]
async fn sessions_on_sqlite() {
    let (store, _dir) = on_sqlite().await;
    sessions_suite(store).await;
}

#[tokio::test]
async fn sessions_on_postgres() {
    let (store, _db) = on_postgres().await;
    sessions_suite(store).await;
}

/// A migrated store on a fresh SQLite file (kept while the directory lives).
async fn on_sqlite() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = DatabaseUrl::new(format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("t.db").display()
    ));
    let store = Store::connect(&url, 4).await.expect("connect");
    store.migrate().await.expect("migrate");
    (store, dir)
}

/// A migrated store on a fresh PostgreSQL database (kept while the guard lives).
async fn on_postgres() -> (Store, atrium_tests::support::PgDatabase) {
    let db = fresh_database().await.expect("postgres database");
    let store = Store::connect(&DatabaseUrl::new(db.url.clone()), 4)
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    (store, db)
}

/// Accounting: only the part of each run inside the range counts (running jobs up to
/// `now`), GPU-seconds weighted by slice size, and the filters and sums by user,
/// group, account and day.
async fn accounting_suite(store: Store) {
    use atrium::store::{
        Bucket, JobChange, JobRecord, JobStart, NewSession, UsageFilter, UsageKey,
    };
    const H: i64 = 3_600_000;
    // The range: ten hours from 20:00 UTC, across midnight.
    let t = 1_741_032_000_000; // 2025-03-03T20:00:00Z
    let mut users = Vec::new();
    for name in ["alice", "bob", "carol"] {
        users.push(
            store
                .create_local_user(&local(name), t)
                .await
                .expect("user"),
        );
    }
    let ml = store.ensure_group("ml", "local", t).await.expect("ml");
    let cv = store.ensure_group("cv", "local", t).await.expect("cv");
    store.add_member(users[0].id, ml).await.expect("member");
    store.add_member(users[1].id, ml).await.expect("member");
    store.add_member(users[1].id, cv).await.expect("member");

    /// (id, user, account, partition, start, end, gpu_milli, cpus)
    type Run = (
        i64,
        &'static str,
        &'static str,
        &'static str,
        Option<i64>,
        Option<i64>,
        i64,
        i64,
    );
    let runs: [Run; 8] = [
        (
            1,
            "alice",
            "alice",
            "gpu",
            Some(t - 2 * H),
            Some(t + H),
            2000,
            4,
        ), // 1 h inside
        (
            2,
            "alice",
            "proj",
            "short",
            Some(t + 2 * H),
            Some(t + 4 * H),
            1000,
            2,
        ), // 2 h
        (
            3,
            "bob",
            "bob",
            "gpu",
            Some(t + 9 * H),
            Some(t + 12 * H),
            500,
            1,
        ), // 1 h, a MIG slice
        (
            4,
            "bob",
            "bob",
            "gpu",
            Some(t - 5 * H),
            Some(t - H),
            1000,
            1,
        ), // before
        (5, "carol", "carol", "gpu", Some(t + 5 * H), None, 1000, 8), // running: 2 h to now
        (
            6,
            "carol",
            "carol",
            "gpu",
            Some(t + 11 * H),
            Some(t + 12 * H),
            1000,
            1,
        ), // after
        (7, "carol", "carol", "gpu", None, None, 0, 0),               // never started
        (
            8,
            "alice",
            "alice",
            "gpu",
            Some(t + 3 * H),
            Some(t + 3 * H + H / 2),
            1000,
            2,
        ), // a session, 30 min
    ];
    let mut changes = Vec::new();
    for (id, user, account, partition, start, end, gpu_milli, cpus) in runs {
        changes.push(JobChange::Submitted(Box::new(JobRecord {
            id,
            task: -1,
            user_name: user.into(),
            account: account.into(),
            partition: partition.into(),
            name: format!("job{id}"),
            state: "PENDING".into(),
            submit_time: t - 6 * H,
            gpus: format!("gpu:{}", gpu_milli / 1000),
            request: "{}".into(),
            environment: "{}".into(),
            ..JobRecord::default()
        })));
        if let Some(start_time) = start {
            changes.push(JobChange::Started(Box::new(JobStart {
                id,
                task: -1,
                start_time,
                time_limit: Some(86_400),
                allocation: "{}".into(),
                nodelist: "node1".into(),
                cpus,
                memory_mb: 1024 * cpus,
                gpus: format!("gpu:{}", gpu_milli / 1000),
                gpu_milli,
                stdout_path: "/dev/null".into(),
                stderr_path: None,
            })));
        }
        if let Some(end_time) = end {
            changes.push(JobChange::Ended {
                id,
                task: -1,
                state: "COMPLETED".into(),
                end_time,
                exit_code: Some(0),
                exit_signal: None,
                reason: None,
                message: None,
            });
        }
    }
    store
        .commit_scheduler_batch(&[], &changes)
        .await
        .expect("jobs");
    let session = store
        .create_session(
            &NewSession {
                user_name: "alice",
                name: "lab",
                kind: "notebook",
                environment: "python",
                gpus: Some(&scheduler::GpuRequest {
                    kind: scheduler::SliceKind::Gpu { r#type: None },
                    count: 1,
                    per: scheduler::GpuPer::Node,
                }),
                logdir: None,
                folder: None,
                secret: "s",
            },
            "/spool/sessions",
            4,
            t,
        )
        .await
        .expect("session");
    store.set_session_job(session.id, 8).await.expect("job");

    let all = UsageFilter {
        from: t,
        to: t + 10 * H,
        now: t + 7 * H,
        ..UsageFilter::default()
    };
    let records = store.usage_records(&all, 100, 0).await.expect("records");
    let ids: Vec<i64> = records.iter().map(|r| r.id).collect();
    assert_eq!(
        ids,
        [1, 2, 8, 5, 3],
        "by start time; outside the range left out"
    );
    let hours: Vec<f64> = records.iter().map(|r| r.gpu_seconds() / 3600.0).collect();
    assert_eq!(hours, [2.0, 2.0, 0.5, 2.0, 0.5]);
    let kinds: Vec<&str> = records.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["job", "job", "session", "job", "job"]);
    assert_eq!(records[0].cpu_seconds(), 4.0 * 3600.0);
    assert_eq!(records[3].end_time, None);
    assert_eq!(
        (records[3].wall_seconds(), records[0].memory_mb),
        (7200.0, 4096)
    );
    let page: Vec<i64> = store
        .usage_records(&all, 2, 2)
        .await
        .expect("page")
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(page, [8, 5]);

    let total = store.usage_total(&all).await.expect("total");
    assert_eq!(total.jobs, 5);
    assert_eq!(total.gpu_seconds, 7.0 * 3600.0);
    assert_eq!(total.cpu_seconds, (4.0 + 4.0 + 1.0 + 16.0 + 1.0) * 3600.0);
    assert_eq!(total.wall_seconds, 6.5 * 3600.0);

    let by = |key| store.usage_by(&all, key);
    let gpu_hours = |rows: Vec<atrium::store::UsageRow>| -> Vec<(String, i64, f64)> {
        rows.into_iter()
            .map(|r| (r.key, r.usage.jobs, r.usage.gpu_seconds / 3600.0))
            .collect()
    };
    assert_eq!(
        gpu_hours(by(UsageKey::User).await.expect("by user")),
        [
            ("alice".to_string(), 3, 4.5),
            ("carol".into(), 1, 2.0),
            ("bob".into(), 1, 0.5)
        ]
    );
    assert_eq!(
        gpu_hours(by(UsageKey::Group).await.expect("by group")),
        [("ml".to_string(), 4, 5.0), ("cv".into(), 1, 0.5)],
        "carol is in no group; bob counts in both of his"
    );
    assert_eq!(
        gpu_hours(by(UsageKey::Account).await.expect("by account")),
        [
            ("alice".to_string(), 2, 2.5),
            ("carol".into(), 1, 2.0),
            ("proj".into(), 1, 2.0),
            ("bob".into(), 1, 0.5)
        ]
    );

    // Filters.
    let only = |f: UsageFilter| {
        let store = store.clone();
        async move {
            let mut ids: Vec<i64> = store
                .usage_records(&f, 100, 0)
                .await
                .expect("records")
                .iter()
                .map(|r| r.id)
                .collect();
            ids.sort();
            ids
        }
    };
    let with = |edit: fn(&mut UsageFilter)| {
        let mut f = all.clone();
        edit(&mut f);
        f
    };
    assert_eq!(
        only(with(|f| f.user = Some("alice".into()))).await,
        [1, 2, 8]
    );
    assert_eq!(
        only(with(|f| f.group = Some("ml".into()))).await,
        [1, 2, 3, 8]
    );
    assert_eq!(only(with(|f| f.group = Some("cv".into()))).await, [3]);
    assert_eq!(only(with(|f| f.account = Some("proj".into()))).await, [2]);
    assert_eq!(
        only(with(|f| f.partition = Some("short".into()))).await,
        [2]
    );
    assert!(only(with(|f| f.group = Some("nobody".into())))
        .await
        .is_empty());
    // A job ending exactly where the range begins used nothing in it.
    assert_eq!(
        only(with(|f| f.from = 1_741_028_400_000)).await,
        [1, 2, 3, 5, 8]
    );

    // By day: 20:00–24:00 on the 3rd, 00:00–06:00 on the 4th.
    let days = store
        .usage_by_bucket(&all, Bucket::Day, None)
        .await
        .expect("days");
    let per_day: Vec<(i64, f64)> = days
        .iter()
        .map(|b| (b.start, b.usage.gpu_seconds / 3600.0))
        .collect();
    assert_eq!(
        per_day,
        [(1_740_960_000_000, 4.5), (1_741_046_400_000, 2.5)],
        "job 5 runs 01:00-03:00 on the 4th, job 3 05:00-06:00"
    );
    let per_user = store
        .usage_by_bucket(&all, Bucket::Month, Some(UsageKey::User))
        .await
        .expect("months");
    let sum: f64 = per_user.iter().map(|b| b.usage.gpu_seconds).sum();
    assert_eq!(sum, total.gpu_seconds);
    assert_eq!(per_user.len(), 3);
}

#[tokio::test]
async fn accounting_on_sqlite() {
    let (store, _dir) = on_sqlite().await;
    accounting_suite(store).await;
}

#[tokio::test]
async fn accounting_on_postgres() {
    let (store, _db) = on_postgres().await;
    accounting_suite(store).await;
}

/// Benchmark runs: recorded with their metrics, filtered (a tag's `_` literally, the
/// time of local runs only), sorted by a metric, deleted; the reference runs seeded
/// once per version and never deleted one by one.
async fn benchmarks_suite(store: Store) {
    use atrium::benchmarks::{Metric, RunSetup};
    use atrium::store::{BenchmarkFilter, BenchmarkRun, BenchmarkSort};

    let now = 1_700_000_000_000;
    let metric = |name: &str, value: f64| Metric {
        name: name.into(),
        value,
        unit: "images/s".into(),
    };
    let run = |user: &str, gpus: i64, tags: &str, images: f64| BenchmarkRun {
        setup: RunSetup {
            suite: "tf_cnn_benchmarks".into(),
            model: Some("ResNet-50".into()),
            gpus,
            nodes: 1,
            gpu_model: Some("A100".into()),
            storage: Some("nfs".into()),
            ..RunSetup::default()
        },
        user_name: user.into(),
        tags: tags.into(),
        source: "local".into(),
        started_at: Some(now - 10_000),
        metrics: vec![
            metric("images_per_sec", images),
            metric("storage_mb_per_s", images / 10.0),
        ],
        ..BenchmarkRun::default()
    };
    let all = |filter: BenchmarkFilter| BenchmarkFilter {
        limit: 100,
        ..filter
    };
    let ids =
        |runs: Vec<atrium::store::BenchmarkRecord>| runs.iter().map(|r| r.id).collect::<Vec<_>>();

    let one = store
        .create_benchmark_run(&run("alice", 1, "nightly,lab_1", 900.0), now)
        .await
        .expect("create");
    assert_eq!(
        one.run,
        run("alice", 1, "nightly,lab_1", 900.0),
        "stored as given"
    );
    let eight = store
        .create_benchmark_run(&run("alice", 8, "labx1", 6800.0), now + 1)
        .await
        .expect("create");
    let bob = store
        .create_benchmark_run(
            &BenchmarkRun {
                setup: RunSetup {
                    suite: "fio".into(),
                    gpus: 1,
                    nodes: 1,
                    ..RunSetup::default()
                },
                user_name: "bob".into(),
                source: "local".into(),
                job_id: Some(42),
                ..BenchmarkRun::default()
            },
            now + 2,
        )
        .await
        .expect("a run without metrics");
    assert_eq!(
        store.benchmark_run(eight.id).await.expect("get"),
        Some(eight.clone())
    );
    assert_eq!(store.benchmark_run(999_999).await.expect("get"), None);

    let list = |filter: BenchmarkFilter| {
        let store = store.clone();
        async move { ids(store.benchmark_runs(&all(filter)).await.expect("list")) }
    };
    assert_eq!(
        list(BenchmarkFilter::default()).await,
        [bob.id, eight.id, one.id]
    );
    assert_eq!(
        list(BenchmarkFilter {
            tag: Some("lab_1".into()),
            ..Default::default()
        })
        .await,
        [one.id],
        "`_` is not a wildcard"
    );
    assert_eq!(
        list(BenchmarkFilter {
            user: Some("alice".into()),
            suite: Some("tf_cnn_benchmarks".into()),
            model: Some("ResNet-50".into()),
            gpu_model: Some("A100".into()),
            storage: Some("nfs".into()),
            sort: BenchmarkSort::Gpus,
            ..Default::default()
        })
        .await,
        [one.id, eight.id]
    );
    assert_eq!(
        list(BenchmarkFilter {
            job_id: Some(42),
            ..Default::default()
        })
        .await,
        [bob.id]
    );
    assert_eq!(
        list(BenchmarkFilter {
            metric: Some("images_per_sec".into()),
            sort: BenchmarkSort::Metric("images_per_sec".into()),
            ..Default::default()
        })
        .await,
        [eight.id, one.id]
    );
    assert_eq!(
        list(BenchmarkFilter {
            sort: BenchmarkSort::Metric("images_per_sec".into()),
            ..Default::default()
        })
        .await,
        [eight.id, one.id, bob.id],
        "runs without the metric last"
    );
    assert_eq!(
        list(BenchmarkFilter {
            from: Some(now - 10_000),
            to: Some(now),
            ..Default::default()
        })
        .await,
        [eight.id, one.id],
        "started in the range; bob's run, without a start, was recorded after it"
    );

    // Reference runs: seeded once per version, read-only one by one.
    let reference = BenchmarkRun {
        source: "some-study-2019".into(),
        user_name: String::new(),
        ..run("", 4, "", 2657.0)
    };
    assert!(store
        .seed_reference_benchmarks(7, std::slice::from_ref(&reference), now)
        .await
        .expect("seed"));
    let seeded = ids(store
        .benchmark_runs(&all(BenchmarkFilter {
            reference: Some(true),
            ..Default::default()
        }))
        .await
        .expect("list"));
    assert_eq!(seeded.len(), 1);
    assert!(!store
        .seed_reference_benchmarks(7, std::slice::from_ref(&reference), now)
        .await
        .expect("again"));
    assert_eq!(
        list(BenchmarkFilter {
            reference: Some(true),
            from: Some(now + 1),
            ..Default::default()
        })
        .await,
        seeded,
        "the same rows, not narrowed by time"
    );
    assert!(matches!(
        store.delete_benchmark_run(seeded[0], now, None).await,
        Err(StoreError::NotFound)
    ));
    assert!(store
        .seed_reference_benchmarks(8, &[reference.clone(), reference], now)
        .await
        .expect("a new version"));
    assert_eq!(
        list(BenchmarkFilter {
            reference: Some(true),
            ..Default::default()
        })
        .await
        .len(),
        2
    );
    assert_eq!(
        list(BenchmarkFilter {
            reference: Some(false),
            ..Default::default()
        })
        .await,
        [bob.id, eight.id, one.id],
        "local runs stay"
    );

    // Deleting a local run takes its metrics with it, with its audit entry.
    let deleted = store
        .delete_benchmark_run(
            eight.id,
            now,
            Some(&NewAuditEntry {
                actor: "root",
                action: "benchmark.delete",
                target: "benchmark",
                detail: "{}",
                client_addr: "127.0.0.1",
            }),
        )
        .await
        .expect("delete");
    assert_eq!(deleted, eight);
    assert_eq!(store.benchmark_run(eight.id).await.expect("get"), None);
    assert!(store
        .audit_entries(10)
        .await
        .expect("audit")
        .iter()
        .any(|e| e.action == "benchmark.delete"));
    assert!(matches!(
        store.delete_benchmark_run(eight.id, now, None).await,
        Err(StoreError::NotFound)
    ));
}

#[tokio::test]
async fn benchmarks_on_sqlite() {
    let (store, _dir) = on_sqlite().await;
    benchmarks_suite(store).await;
}

#[tokio::test]
async fn benchmarks_on_postgres() {
    let (store, _db) = on_postgres().await;
    benchmarks_suite(store).await;
}

/// Changes that read before they write (a quota's create and update check what is
/// there first) succeed while another connection commits all the time, as the
/// scheduler does: none fails with "database is locked".
async fn concurrent_writers_suite(store: Store) {
    let now = 1_700_000_000_000;
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            for seq in 1..=300_i64 {
                store
                    .commit_scheduler_batch(&[(seq, "{}".to_string())], &[])
                    .await
                    .expect("scheduler batch");
            }
        })
    };
    let audit = |action| NewAuditEntry {
        actor: "admin",
        action,
        target: "user:u",
        detail: "{}",
        client_addr: "127.0.0.1",
    };
    for i in 0..60 {
        let name = format!("u{i}");
        let created = store
            .create_quota(
                "user",
                &name,
                r#"{"max_gpus":1}"#,
                now,
                &audit("quota.create"),
            )
            .await
            .expect("create quota beside a busy writer");
        store
            .update_quota(created.id, r#"{"max_gpus":2}"#, now, &audit("quota.update"))
            .await
            .expect("update quota beside a busy writer");
    }
    writer.await.expect("writer");
    assert_eq!(store.quotas().await.expect("quotas").len(), 60);
}

#[tokio::test]
async fn concurrent_writers_on_sqlite() {
    let (store, _dir) = on_sqlite().await;
    concurrent_writers_suite(store).await;
}

#[tokio::test]
async fn concurrent_writers_on_postgres() {
    let (store, _db) = on_postgres().await;
    concurrent_writers_suite(store).await;
}

/// A batch of the scheduler actor as a busy queue makes it: more log entries and
/// more submissions than one multi-row statement holds, with other changes between
/// runs of submissions. Every row and entry is written, in order, with every column.
async fn scheduler_batch_suite(store: Store) {
    use atrium::store::{JobChange, JobRecord};
    let record = |id: i64| JobRecord {
        id,
        task: -1,
        user_name: format!("u{}", id % 7),
        account: "acct".into(),
        partition: "gpu".into(),
        name: format!("job{id}"),
        state: "PENDING".into(),
        reason: (id % 2 == 0).then(|| "JobHeldUser".to_string()),
        array_spec: (id % 5 == 0).then(|| "0-3%2".to_string()),
        script: format!("#!/bin/sh\necho {id} 'quoted' \"and\" $HOME\n"),
        request: format!("{{\"name\":\"job{id}\"}}"),
        environment: "{\"A\":\"1\"}".into(),
        workdir: format!("/home/u/{id}"),
        submit_dir: "/home/u".into(),
        submit_time: 1_700_000_000_000 + id,
        time_limit: (id % 3 != 0).then_some(600),
        gpus: "gpu:1".into(),
        stdout_path: Some(format!("/home/u/slurm-{id}.out")),
        stderr_path: (id % 4 == 0).then(|| "/home/u/err".to_string()),
        container: (id % 6 == 0).then(|| "{\"image\":\"x\"}".to_string()),
        benchmark: (id % 9 == 0).then(|| "auto".to_string()),
        ..JobRecord::default()
    };
    let mut changes: Vec<JobChange> = (1..=205)
        .map(|id| JobChange::Submitted(Box::new(record(id))))
        .collect();
    changes.push(JobChange::State {
        id: 3,
        task: -1,
        state: "CANCELLED".into(),
        reason: None,
    });
    changes.extend((206..=208).map(|id| JobChange::Submitted(Box::new(record(id)))));
    changes.push(JobChange::Submitted(Box::new(record(209))));
    let log: Vec<(i64, String)> = (1..=450)
        .map(|seq| (seq, format!("{{\"n\":{seq}}}")))
        .collect();
    store
        .commit_scheduler_batch(&log, &changes)
        .await
        .expect("a batch of 209 submissions and 450 log entries");

    let stored = store.load_scheduler_log().await.expect("log");
    assert_eq!(stored.entries, log);
    assert_eq!(stored.max_job_id, 209);
    for id in 1..=209 {
        let mut expected = record(id);
        if id == 3 {
            expected.state = "CANCELLED".into();
            expected.reason = None;
        }
        assert_eq!(
            store.job(id, -1).await.expect("job row"),
            expected,
            "job {id}"
        );
    }
    // A batch that fails is written not at all: a duplicate row in a run.
    let again = vec![
        JobChange::Submitted(Box::new(record(210))),
        JobChange::Submitted(Box::new(record(5))),
    ];
    assert!(store
        .commit_scheduler_batch(&[(451, "{}".into())], &again)
        .await
        .is_err());
    assert!(matches!(
        store.job(210, -1).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        store.load_scheduler_log().await.expect("log").entries.len(),
        450
    );
}

#[tokio::test]
async fn scheduler_batch_on_sqlite() {
    let (store, _dir) = on_sqlite().await;
    scheduler_batch_suite(store).await;
}

#[tokio::test]
async fn scheduler_batch_on_postgres() {
    let (store, _db) = on_postgres().await;
    scheduler_batch_suite(store).await;
}

/// Jobs' usage: the latest record replaces the one before, a final record is never
/// replaced by a late sample, and the idle-GPU list takes the last week's jobs,
/// longest idle first, joined with what lists show of them.
async fn job_usage_suite(store: Store) {
    use atrium::store::{JobChange, JobRecord, JobUsageRow};
    let t = 1_741_032_000_000;
    let mut changes = Vec::new();
    for (id, task) in [(1, -1), (2, -1), (3, 0), (4, -1)] {
        changes.push(JobChange::Submitted(Box::new(JobRecord {
            id,
            task,
            user_name: format!("user{id}"),
            account: "acct".into(),
            partition: "gpu".into(),
            name: format!("job{id}"),
            state: "RUNNING".into(),
            submit_time: t,
            gpus: "gpu:1".into(),
            request: "{}".into(),
            environment: "{}".into(),
            ..JobRecord::default()
        })));
    }
    store
        .commit_scheduler_batch(&[], &changes)
        .await
        .expect("jobs");
    let row = |id: i64, task: i64, at: i64, complete: bool, idle: f64| JobUsageRow {
        job_id: id,
        task,
        sampled_at: at,
        complete,
        cpu_seconds: idle * 2.0,
        max_rss_bytes: 1 << 30,
        gpu_idle_seconds: idle,
        gpu_utilization: (idle > 0.0).then_some(3.5),
        series: format!("{{\"at\":{at}}}"),
    };
    assert_eq!(store.job_usage(1, -1).await.expect("none"), None);
    store
        .record_job_usage(&row(1, -1, t, false, 10.0))
        .await
        .expect("first");
    store
        .record_job_usage(&row(1, -1, t + 1000, false, 20.0))
        .await
        .expect("later");
    assert_eq!(
        store.job_usage(1, -1).await.expect("read"),
        Some(row(1, -1, t + 1000, false, 20.0))
    );
    store
        .record_job_usage(&row(1, -1, t + 2000, true, 30.0))
        .await
        .expect("final");
    // A sample read after the end does not replace the final record.
    store
        .record_job_usage(&row(1, -1, t + 3000, false, 99.0))
        .await
        .expect("late");
    assert_eq!(
        store.job_usage(1, -1).await.expect("read"),
        Some(row(1, -1, t + 2000, true, 30.0))
    );
    store
        .record_job_usage(&row(2, -1, t, true, 500.0))
        .await
        .expect("2");
    store
        .record_job_usage(&row(3, 0, t, false, 40.0))
        .await
        .expect("3_0");
    store
        .record_job_usage(&row(4, -1, t, true, 0.0))
        .await
        .expect("never idle");
    // Job 2 was sampled before the week began.
    store
        .record_job_usage(&row(2, -1, t - 10, true, 500.0))
        .await
        .expect("2 again");
    let idle = store.idle_gpu_jobs(t - 5, 10).await.expect("idle");
    let found: Vec<(i64, i64, f64)> = idle
        .iter()
        .map(|j| (j.job_id, j.task, j.gpu_idle_seconds))
        .collect();
    assert_eq!(found, vec![(3, 0, 40.0), (1, -1, 30.0)]);
    assert_eq!(idle[0].user_name, "user3");
    assert_eq!(idle[0].name, "job3");
    assert_eq!(idle[0].gpu_utilization, Some(3.5));
    assert_eq!(store.idle_gpu_jobs(t - 5, 1).await.expect("one").len(), 1);
}

#[tokio::test]
async fn job_usage_on_sqlite() {
    let (store, _dir) = on_sqlite().await;
    job_usage_suite(store).await;
}

#[tokio::test]
async fn job_usage_on_postgres() {
    let (store, _db) = on_postgres().await;
    job_usage_suite(store).await;
}
