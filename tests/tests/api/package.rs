//! What a site installs (docs/OPERATIONS.md): the Debian package and the container image.
//! The package is built with `cargo deb` from this build's binary (no release build),
//! its files and maintainer scripts are read with `dpkg-deb`, and it is installed into a
//! throwaway root (`dpkg --root`, the scripts run outside a chroot with `$DPKG_ROOT`),
//! where the installed binary checks the installed configuration and serves the login
//! page; a purge then leaves nothing of it. The Containerfile is not built here (its
//! base images come from a registry these machines cannot reach): its sources must be
//! in the repository and it must start the portal on the package's configuration.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::fixtures::{atrium_bin, spawn_program};

/// The configuration the unit, the package and the image use.
const CONFIG: &str = "/etc/atrium/atrium.toml";
/// The Slurm-style commands the package links to the binary, in /usr/lib/atrium/bin.
const COMMANDS: [&str; 12] = [
    "sbatch", "squeue", "sinfo", "scancel", "sacct", "seff", "salloc", "srun", "scontrol", "sprio",
    "sshare", "sstat",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Run `command`; its output, which must be a success.
fn run(command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// Whether `cargo deb` runs here. Without it the package test is skipped, outside CI
/// only (tests/install-deps.sh installs it).
fn cargo_deb_or_skip(test: &str) -> bool {
    let installed = Command::new(cargo())
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !installed {
        assert!(
            !atrium_tests::support::in_ci(),
            "{test}: cargo-deb is not installed (CI is set, so this fails instead of \
             skipping); run tests/install-deps.sh"
        );
        eprintln!("SKIPPED {test}: cargo-deb is not installed (tests/install-deps.sh)");
    }
    installed
}

/// `cargo deb` on this build's binary: linked into a target directory of the test's own
/// as the `dev` profile's, so cargo-deb neither builds nor writes to the shared target.
fn build_package(dir: &Path) -> PathBuf {
    let target = dir.join("target");
    std::fs::create_dir_all(target.join("debug")).expect("target dir");
    let bin = target.join("debug/atrium");
    if std::fs::hard_link(atrium_bin(), &bin).is_err() {
        std::fs::copy(atrium_bin(), &bin).expect("copy the binary");
    }
    let deb = dir.join("atrium.deb");
    run(Command::new(cargo())
        .args(["deb", "-p", "atrium", "--no-build", "--profile", "dev"])
        // xz at its fastest: 3 s rather than 20 for the debug binary.
        .args(["--fast", "--quiet", "--output"])
        .arg(&deb)
        .arg("--manifest-path")
        .arg(repo().join("server/Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target));
    deb
}

/// `dpkg-deb -c`: each path (without the leading `.`) with its mode string and link target.
fn contents(deb: &Path) -> Vec<(String, String, Option<String>)> {
    let out = run(Command::new("dpkg-deb").arg("--contents").arg(deb));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let path = fields[5].trim_start_matches('.').to_string();
            let link = (fields.get(6) == Some(&"->")).then(|| fields[7].to_string());
            (path, fields[0].to_string(), link)
        })
        .collect()
}

/// `dpkg` on the throwaway root `root`, as the user running the tests.
fn dpkg(root: &Path) -> Command {
    let mut command = Command::new("dpkg");
    command
        .arg(format!("--root={}", root.display()))
        .args(["--force-script-chrootless", "--force-not-root"])
        .arg("--log=/dev/null");
    command
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

#[tokio::test]
async fn the_debian_package_installs_and_serves_the_login_page() {
    let test = "the_debian_package_installs_and_serves_the_login_page";
    if !cargo_deb_or_skip(test) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let deb = build_package(dir.path());

    // Its files: the binary, the unit, the configuration (0600: it may hold secrets),
    // the commands beside /usr/bin, where a Slurm client package has its own.
    let files = contents(&deb);
    let entry = |path: &str| {
        files
            .iter()
            .find(|(p, _, _)| p == path)
            .unwrap_or_else(|| panic!("{path} is not in the package: {files:?}"))
    };
    assert_eq!(entry("/usr/bin/atrium").1, "-rwxr-xr-x");
    assert_eq!(
        entry("/usr/lib/systemd/system/atrium.service").1,
        "-rw-r--r--"
    );
    assert_eq!(entry(CONFIG).1, "-rw-------");
    assert_eq!(entry("/etc/profile.d/atrium.sh").1, "-rw-r--r--");
    for command in COMMANDS {
        let (_, mode, link) = entry(&format!("/usr/lib/atrium/bin/{command}"));
        assert!(mode.starts_with('l'), "{command}: {mode}");
        assert_eq!(link.as_deref(), Some("../../../bin/atrium"), "{command}");
        assert!(
            !files
                .iter()
                .any(|(p, _, _)| *p == format!("/usr/bin/{command}")),
            "/usr/bin/{command} would clash with Slurm's"
        );
    }
    let conffiles = run(Command::new("dpkg-deb")
        .arg("--info")
        .arg(&deb)
        .arg("conffiles"));
    assert!(
        String::from_utf8_lossy(&conffiles.stdout)
            .lines()
            .any(|line| line == CONFIG),
        "{CONFIG} is not a conffile"
    );

    // The maintainer scripts: deploy/debian's, with cargo-deb's systemd parts.
    let control = dir.path().join("control");
    run(Command::new("dpkg-deb")
        .arg("--control")
        .arg(&deb)
        .arg(&control));
    let postinst = read(&control.join("postinst"));
    assert!(postinst.contains("data_dir=\"${DPKG_ROOT:-}/var/lib/atrium\""));
    assert!(postinst.contains("chmod 0700 \"$data_dir\""));
    // Enabled at installation, not started; an upgrade restarts a running portal.
    assert!(postinst.contains("deb-systemd-helper enable atrium.service"));
    assert!(postinst.contains("deb-systemd-invoke try-restart atrium.service"));
    assert!(!postinst.contains("deb-systemd-invoke start"), "{postinst}");
    let prerm = read(&control.join("prerm"));
    assert!(prerm.contains("[ \"$1\" = remove ]"), "{prerm}");
    assert!(
        prerm.contains("deb-systemd-invoke stop atrium.service"),
        "{prerm}"
    );
    let postrm = read(&control.join("postrm"));
    assert!(postrm.contains("rm -rf \"${DPKG_ROOT:-}/var/lib/atrium\""));
    assert!(postrm.contains("deb-systemd-helper purge atrium.service"));
    for script in ["postinst", "prerm", "postrm"] {
        assert!(
            !read(&control.join(script)).contains("#DEBHELPER#"),
            "{script}"
        );
        assert_eq!(mode(&control.join(script)), 0o755, "{script}");
    }

    // Installed into a root of its own, with a dpkg database of nothing (so no libc6:
    // --force-depends).
    let root = dir.path().join("root");
    for sub in ["info", "updates", "triggers"] {
        std::fs::create_dir_all(root.join("var/lib/dpkg").join(sub)).expect("dpkg dirs");
    }
    for file in ["status", "available"] {
        std::fs::write(root.join("var/lib/dpkg").join(file), "").expect("dpkg db");
    }
    run(dpkg(&root)
        .arg("--force-depends")
        .arg("--install")
        .arg(&deb));
    let data_dir = root.join("var/lib/atrium");
    assert_eq!(
        format!("{:o}", mode(&data_dir)),
        "700",
        "postinst leaves {}",
        data_dir.display()
    );
    assert_eq!(std::fs::metadata(&data_dir).expect("data dir").uid(), 0);
    let config = root.join(CONFIG.trim_start_matches('/'));
    assert_eq!(
        read(&config),
        read(&repo().join("deploy/debian/atrium.toml"))
    );
    assert_eq!(mode(&config), 0o600);
    assert_eq!(
        read(&root.join("usr/lib/systemd/system/atrium.service")),
        read(&repo().join("deploy/systemd/atrium.service"))
    );
    let wants = root.join("etc/systemd/system/multi-user.target.wants/atrium.service");
    assert!(wants.is_symlink(), "the unit is not enabled in the root");

    // The installed binary: the commands run as the one their link names; the unit's
    // check passes on the configuration as installed.
    let installed = root.join("usr/bin/atrium");
    for command in COMMANDS {
        let out = run(Command::new(root.join("usr/lib/atrium/bin").join(command)).arg("--help"));
        let help = String::from_utf8_lossy(&out.stdout);
        // The usage line, in the command's own words (`Usage: squeue …`, Slurm's
        // `sacct [<OPTION>]`).
        assert!(
            help.lines().any(|l| l
                .trim_start_matches("Usage:")
                .split_whitespace()
                .take(2)
                .any(|w| w == command)),
            "{command}: {help}"
        );
    }
    let check = run(Command::new(&installed)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .args([
            "--config",
            config.to_str().expect("path"),
            "config",
            "check",
        ]));
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(said.contains("configuration OK"), "{said}");
    assert!(said.contains("data_dir: /var/lib/atrium"), "{said}");

    // Served as the unit serves it, with the root's data directory and spool, on a
    // port of its own: the login page, and a first administrator.
    let spool = root.join("var/spool/atrium");
    let any_port = Path::new("127.0.0.1:0");
    let mut app = spawn_program(
        &installed,
        config.clone(),
        &[
            ("ATRIUM_DATA_DIR", &data_dir),
            ("ATRIUM_LISTEN", any_port),
            ("ATRIUM_JOBS__SPOOL_DIR", &spool),
            ("ATRIUM_ACCOUNTS__CREATE_HOMES", Path::new("false")),
        ],
        tempfile::tempdir().expect("tempdir"),
    )
    .await;
    let login = reqwest::get(app.url("/login")).await.expect("GET /login");
    assert_eq!(login.status(), 200);
    let page = login.text().await.expect("login page");
    assert!(page.contains("name=\"password\""), "{page}");
    assert!(app.admin_password.is_some(), "no first administrator");
    assert!(app.terminate().success());
    drop(app);
    assert!(data_dir.join("atrium.db").exists());
    assert_eq!(format!("{:o}", mode(&data_dir)), "700");

    // Purged: the configuration, the data directory and the unit's links go.
    run(dpkg(&root).arg("--purge").arg("atrium"));
    for gone in [&config, &data_dir, &installed, &spool, &wants] {
        assert!(
            !gone.exists() && !gone.is_symlink(),
            "{} is left",
            gone.display()
        );
    }
}

/// `section.key` of every key line in a TOML text, commented out or not (`# key = …`).
fn keys(toml: &str) -> std::collections::BTreeSet<String> {
    let mut section = String::new();
    let mut keys = std::collections::BTreeSet::new();
    for line in toml.lines() {
        let line = line.trim_start_matches('#').trim();
        if let Some(header) = line.strip_prefix('[') {
            let end = header.find(']').expect("a header");
            section = header[..end].trim_matches(['[', ']']).to_string();
        } else if let Some((key, _)) = line.split_once(" = ") {
            if !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                keys.insert(
                    format!("{section}.{key}")
                        .trim_start_matches('.')
                        .to_string(),
                );
            }
        }
    }
    keys
}

#[test]
fn the_packaged_configuration_shows_every_setting_and_passes_its_check() {
    let packaged = read(&repo().join("deploy/debian/atrium.toml"));
    let documented = read(&repo().join("docs/configuration.md"));
    let block = documented
        .split("## Every setting")
        .nth(1)
        .and_then(|rest| rest.split("```toml").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("docs/configuration.md's settings");
    let missing: Vec<String> = keys(block).difference(&keys(&packaged)).cloned().collect();
    assert!(
        missing.is_empty(),
        "deploy/debian/atrium.toml lacks {missing:?} (docs/configuration.md has them)"
    );
    // Everything but the data directory commented out: the defaults, as documented.
    let set: Vec<&str> = packaged
        .lines()
        .filter(|l| !l.starts_with(['#', '[']) && l.contains(" = "))
        .collect();
    assert_eq!(set, ["data_dir = \"/var/lib/atrium\""]);
    // The unit's state directory is that data directory.
    let unit = read(&repo().join("deploy/systemd/atrium.service"));
    assert!(unit.contains("\nStateDirectory=atrium\n"));
    assert!(unit.contains(&format!("--config {CONFIG} serve")));
    let out = run(crate::fixtures::atrium_command()
        .arg("--config")
        .arg(repo().join("deploy/debian/atrium.toml"))
        .args(["config", "check"]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("configuration OK"));
}

/// The Containerfile's instructions, continuation lines joined.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                let (word, rest) = current.split_once(' ').expect("an instruction");
                out.push((word.to_uppercase(), rest.trim().to_string()));
                current.clear();
            }
        }
    }
    out
}

#[test]
fn the_containerfile_copies_what_the_repository_has_and_serves_the_package_configuration() {
    let text = read(&repo().join("deploy/Containerfile"));
    let instructions = instructions(&text);
    let of = |word: &str| -> Vec<&str> {
        instructions
            .iter()
            .filter(|(w, _)| w == word)
            .map(|(_, rest)| rest.as_str())
            .collect()
    };
    let mut from_repo = Vec::new();
    for copy in of("COPY") {
        let args: Vec<&str> = copy.split_whitespace().collect();
        let (sources, dest) = args.split_at(args.len() - 1);
        if sources[0].starts_with("--from=") {
            // The build stage's binary, as `cargo build --release` leaves it.
            assert_eq!(sources, ["--from=build", "/src/target/release/atrium"]);
            assert_eq!(dest, ["/usr/bin/atrium"]);
            continue;
        }
        for source in sources {
            assert!(!source.starts_with("--"), "COPY {copy}");
            assert!(
                repo().join(source).exists(),
                "deploy/Containerfile copies {source}, which the repository lacks"
            );
            from_repo.push((source.to_string(), dest[0].to_string()));
        }
    }
    assert!(from_repo.contains(&("deploy/debian/atrium.toml".into(), CONFIG.into())));
    assert!(of("RUN")
        .iter()
        .any(|r| r.contains("cargo build --locked --release -p atrium")));
    // Started as the unit starts it: the package's configuration, `serve`.
    let json = |rest: &str| -> Vec<String> { serde_json::from_str(rest).expect("a JSON array") };
    let mut command = json(of("ENTRYPOINT").last().expect("ENTRYPOINT"));
    command.extend(json(of("CMD").last().expect("CMD")));
    let command = command.join(" ");
    assert!(
        command.ends_with(&format!("/usr/bin/atrium --config {CONFIG} serve")),
        "{command}"
    );
    assert!(of("VOLUME")
        .iter()
        .any(|v| v.contains("\"/var/lib/atrium\"")));
    assert!(of("ENV").contains(&"ATRIUM_LISTEN=0.0.0.0:8000"));
    assert_eq!(of("EXPOSE"), ["8000"]);
}
