//! `atrium doctor` on this machine: a good configuration (the bubblewrap probe really
//! runs, the database is still to be made), a bad one (a data directory others can
//! enter, a directory that does not answer, an expired certificate), and the real
//! directory's service bind.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use atrium_tests::support::ldap::{Slapd, SlapdOptions, BASE_DN, SERVICE_DN, SERVICE_PASSWORD};
use serde_json::Value;

use crate::fixtures::{atrium_command, openssl};

/// A configuration in `dir` with its data directory `dir/var` (mode `mode`) and `extra`.
fn config(dir: &Path, mode: u32, extra: &str) -> std::path::PathBuf {
    let var = dir.join("var");
    std::fs::create_dir_all(&var).expect("data dir");
    std::fs::set_permissions(&var, std::fs::Permissions::from_mode(mode)).expect("chmod");
    let path = dir.join("atrium.toml");
    std::fs::write(
        &path,
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n[accounts]\ncreate_homes = false\n{extra}",
            var.display()
        ),
    )
    .expect("write config");
    path
}

/// `atrium doctor --json`: the report and whether it exited 0.
fn doctor(config: &Path) -> (Value, bool) {
    let out = atrium_command()
        .arg("--config")
        .arg(config)
        .args(["doctor", "--json"])
        .output()
        .expect("run atrium doctor");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor's JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (report, out.status.success())
}

/// The finding of `check`.
fn check<'a>(report: &'a Value, check: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|f| f["check"] == check))
        .unwrap_or_else(|| panic!("no {check} in {report:#}"))
}

fn status(report: &Value, name: &str) -> String {
    check(report, name)["status"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn text(report: &Value, name: &str, field: &str) -> String {
    check(report, name)[field]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn doctor_on_a_good_configuration_probes_bubblewrap_and_exits_0() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config(dir.path(), 0o700, "[jobs]\nruntime = \"bubblewrap\"\n");
    let (report, ok) = doctor(&config);
    assert_eq!(status(&report, "runtime"), "ok", "{report:#}");
    let runtime = text(&report, "runtime", "finding");
    assert!(
        runtime.starts_with("bubblewrap runs /usr/bin/true as nobody"),
        "{runtime}"
    );
    assert_eq!(status(&report, "data_dir"), "ok", "{report:#}");
    assert!(
        text(&report, "database", "finding").contains("does not exist yet"),
        "{report:#}"
    );
    assert!(
        !dir.path().join("var/atrium.db").exists(),
        "doctor created the database"
    );
    for skipped in ["ldap", "slurm", "tls"] {
        assert_eq!(status(&report, skipped), "skipped", "{report:#}");
    }
    if !Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        // This machine's cgroups are v1: a warning with its consequence and fix.
        assert_eq!(status(&report, "cgroups"), "warning", "{report:#}");
        assert!(text(&report, "cgroups", "finding").contains("sampling"));
        assert!(text(&report, "cgroups", "fix").contains("systemd.unified_cgroup_hierarchy=1"));
    }
    assert_eq!(report["problems"], 0, "{report:#}");
    assert!(ok, "no problem, yet doctor failed: {report:#}");

    // Once migrated, every migration is applied and the files are private.
    let migrate = atrium_command()
        .arg("--config")
        .arg(&config)
        .arg("migrate")
        .output()
        .expect("migrate");
    assert!(migrate.status.success(), "{migrate:?}");
    let (report, ok) = doctor(&config);
    assert_eq!(status(&report, "database"), "ok", "{report:#}");
    assert!(
        text(&report, "database", "finding").starts_with("every migration applied"),
        "{report:#}"
    );
    assert_eq!(status(&report, "data_dir"), "ok", "{report:#}");
    assert!(ok);
}

#[test]
fn doctor_names_each_problem_with_its_fix_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = |name: &str| dir.path().join(name).display().to_string();
    let (key, csr, cert) = (path("key.pem"), path("req.csr"), path("cert.pem"));
    // A certificate that expired yesterday (openssl 3 takes a negative -days).
    openssl(&format!(
        "req -new -subj /CN=expired.example.org -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout {key} -out {csr}"
    ));
    openssl(&format!(
        "x509 -req -days -1 -in {csr} -signkey {key} -out {cert}"
    ));
    // A loopback port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let config = config(
        dir.path(),
        0o777,
        &format!(
            "[tls]\ncert_file = \"{cert}\"\nkey_file = \"{key}\"\n\
             [auth.ldap]\nurl = \"ldap://127.0.0.1:{port}\"\ntimeout_seconds = 2\n\
             [auth.ldap.search]\nbind_dn = \"{SERVICE_DN}\"\nbind_password = \"x\"\nbase = \"{BASE_DN}\"\n\
             filter = \"(uid={{username}})\"\n"
        ),
    );
    let (report, ok) = doctor(&config);
    assert!(!ok, "doctor exited 0 with problems: {report:#}");
    let var = dir.path().join("var").display().to_string();
    assert_eq!(status(&report, "data_dir"), "problem", "{report:#}");
    assert!(text(&report, "data_dir", "finding").contains("mode 0777"));
    assert_eq!(
        text(&report, "data_dir", "fix"),
        format!("chmod 0700 {var}")
    );
    assert_eq!(status(&report, "ldap"), "problem", "{report:#}");
    assert!(
        text(&report, "ldap", "finding")
            .starts_with(&format!("cannot reach ldap://127.0.0.1:{port}")),
        "{report:#}"
    );
    assert!(text(&report, "ldap", "fix").contains("auth.ldap.url"));
    assert_eq!(status(&report, "tls"), "problem", "{report:#}");
    assert!(
        text(&report, "tls", "finding").contains("CN=expired.example.org expired on"),
        "{report:#}"
    );
    assert!(text(&report, "tls", "fix").contains("tls.cert_file"));
    assert!(report["problems"].as_u64() >= Some(3), "{report:#}");

    // The text form: a line a check, each fix indented below it.
    let out = atrium_command()
        .arg("--config")
        .arg(&config)
        .arg("doctor")
        .output()
        .expect("doctor");
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("problem  data_dir"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        lines[at + 1].trim_start() == format!("fix: chmod 0700 {var}"),
        "{text}"
    );
}

#[tokio::test]
async fn doctor_binds_as_the_service_account_of_a_real_directory() {
    let slapd = Slapd::start(SlapdOptions::default()).await.expect("slapd");
    let ldap = |password: &str| {
        format!(
            "[auth.ldap]\nurl = \"{}\"\ntimeout_seconds = 2\n\
             [auth.ldap.search]\nbind_dn = \"{SERVICE_DN}\"\nbind_password = \"{password}\"\n\
             base = \"{BASE_DN}\"\nfilter = \"(uid={{username}})\"\n",
            slapd.url()
        )
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let (report, _) = doctor(&config(dir.path(), 0o700, &ldap(SERVICE_PASSWORD)));
    assert_eq!(status(&report, "ldap"), "ok", "{report:#}");
    assert!(
        text(&report, "ldap", "finding").ends_with(&format!("{SERVICE_DN} binds")),
        "{report:#}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let (report, ok) = doctor(&config(dir.path(), 0o700, &ldap("not-the-password")));
    assert!(!ok);
    assert_eq!(status(&report, "ldap"), "problem", "{report:#}");
    assert!(
        text(&report, "ldap", "finding").contains("refuses the service account"),
        "{report:#}"
    );
    assert!(text(&report, "ldap", "fix").contains("bind_password"));
}

#[test]
fn a_missing_mount_is_a_problem_for_doctor_and_config_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let present = dir.path().join("projects");
    std::fs::create_dir(&present).expect("projects");
    let missing = dir.path().join("no-such-datasets");
    let config = config(
        dir.path(),
        0o700,
        &format!(
            "[storage]\ndatasets = [{{ source = \"{}\", target = \"/datasets\" }}]\n\
             projects = [{{ source = \"{}\" }}]\n",
            missing.display(),
            present.display()
        ),
    );
    let (report, ok) = doctor(&config);
    assert!(!ok, "{report:#}");
    assert_eq!(status(&report, "mounts"), "problem", "{report:#}");
    let finding = text(&report, "mounts", "finding");
    assert!(
        finding.contains(&format!(
            "storage.datasets: {} (at /datasets) does not exist",
            missing.display()
        )),
        "{finding}"
    );
    assert!(
        !finding.contains("projects"),
        "only the missing one: {finding}"
    );
    let check = atrium_command()
        .arg("--config")
        .arg(&config)
        .args(["config", "check"])
        .output()
        .expect("config check");
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(!check.status.success(), "{said}");
    assert!(
        said.contains("no-such-datasets (at /datasets) does not exist"),
        "{said}"
    );
    // Once it is there, both are content.
    std::fs::create_dir(&missing).expect("datasets");
    let (report, _) = doctor(&config);
    assert_eq!(status(&report, "mounts"), "ok", "{report:#}");
}

#[test]
fn doctor_warns_of_an_apps_program_missing_from_its_environment() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    for program in ["jupyter", "tensorboard"] {
        let p = bin.join(program);
        std::fs::write(&p, "#!/bin/sh\n").expect("program");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let config = config(
        dir.path(),
        0o700,
        &format!(
            "[[environments]]\nname = \"py\"\nruntime = \"bubblewrap\"\nenv = {{ PATH = \"{}\" }}\n",
            bin.display()
        ),
    );
    let (report, _) = doctor(&config);
    assert_eq!(status(&report, "apps"), "warning", "{report:#}");
    let finding = text(&report, "apps", "finding");
    assert!(
        finding.contains("vscode in environment py: code-server is not on its PATH"),
        "{finding}"
    );
    assert!(!finding.contains("notebook"), "jupyter is there: {finding}");
}
