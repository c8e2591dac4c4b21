//! Proves that the slapd fixture (tests/src/support/ldap.rs) works, using the OpenLDAP CLI tools.

use std::path::Path;
use std::process::Output;

use atrium_tests::support::ldap::{self, Slapd, SlapdOptions};
use atrium_tests::support::{many_users, process};

/// Runs an OpenLDAP client tool with `args` and extra `envs` (ldap.conf and ~/.ldaprc are still
/// read unless `envs` says otherwise).
async fn tool(name: &str, args: &[&str], envs: &[(&str, &str)]) -> anyhow::Result<Output> {
    let program = process::find_binary(name, &[])?;
    Ok(tokio::process::Command::new(program)
        .args(args)
        .envs(envs.iter().copied())
        .kill_on_drop(true)
        .output()
        .await?)
}

/// `ldapwhoami` as `dn` with `password` against `url`; returns the output on success.
async fn whoami(url: &str, dn: &str, password: &str, extra: &[&str]) -> anyhow::Result<Output> {
    let mut args = vec!["-x", "-H", url, "-D", dn, "-w", password];
    args.extend(extra);
    tool("ldapwhoami", &args, &[("LDAPNOINIT", "1")]).await
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A TLS handshake with rustls/webpki against 127.0.0.1:`port`, verifying the server certificate
/// for `server_name` with `ca` as the only root.
fn rustls_handshake(ca: &Path, server_name: &str, port: u16) -> anyhow::Result<()> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName};

    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca)? {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from(server_name.to_owned())?;
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(config), name)?;
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port))?;
    sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    while conn.is_handshaking() {
        conn.complete_io(&mut sock)?;
    }
    Ok(())
}

/// Anonymous read of the root DSE.
async fn root_dse(url: &str) -> anyhow::Result<Output> {
    tool(
        "ldapsearch",
        &[
            "-x",
            "-H",
            url,
            "-o",
            "nettimeout=5",
            "-LLL",
            "-b",
            "",
            "-s",
            "base",
            "namingContexts",
        ],
        &[("LDAPNOINIT", "1")],
    )
    .await
}

/// Live slapd processes started from `dir` (the fixture's private directory); not counting its
/// supervisor shell, whose command line mentions `dir` too.
fn slapd_processes_of(dir: &Path) -> Vec<u32> {
    process::live_processes_mentioning(&dir.join("slapd.d").to_string_lossy())
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "slapd")
        })
        .collect()
}

/// No slapd may run except those of fixtures still alive (other tests run in parallel): every
/// `slapd` process must have been started from an existing fixture directory. A system slapd or
/// one whose fixture is gone fails the check.
fn assert_no_stray_slapd() {
    let Ok(out) = std::process::Command::new("pgrep")
        .args(["-x", "slapd"])
        .output()
    else {
        return;
    };
    let stray: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|pid| pid.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<String> = cmdline
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let config = args
                .iter()
                .position(|a| a == "-F")
                .and_then(|i| args.get(i + 1));
            let owned =
                config.is_some_and(|c| c.contains("atrium-slapd-") && Path::new(c).exists());
            // A fixture removes its directory only after its slapd is gone: re-check liveness.
            (!owned && process::pid_alive(pid)).then(|| format!("{pid}: {}", args.join(" ")))
        })
        .collect();
    assert!(stray.is_empty(), "stray slapd processes: {stray:?}");
}

#[tokio::test]
async fn plain_directory_binds_searches_and_computes_member_of() -> anyhow::Result<()> {
    let slapd = Slapd::start(SlapdOptions::default()).await?;
    let dir = slapd.dir().to_path_buf();
    assert!(
        slapd.url().starts_with("ldap://127.0.0.1:"),
        "{}",
        slapd.url()
    );
    assert_eq!(slapd.url(), format!("ldap://127.0.0.1:{}", slapd.port()));
    assert_eq!(slapd.ldaps_url(), None);
    assert_eq!(slapd.ca_file(), None);

    let out = root_dse(&slapd.url()).await?;
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(ldap::BASE_DN), "{}", text(&out));

    // Every fixture user binds with its password, and not with a wrong one.
    for user in ldap::USERS {
        let ok = whoami(&slapd.url(), user.dn, user.password, &[]).await?;
        assert!(ok.status.success(), "{}: {}", user.dn, text(&ok));
        let bad = whoami(&slapd.url(), user.dn, "wrong-secret", &[]).await?;
        assert!(
            !bad.status.success(),
            "{} bound with a wrong password",
            user.dn
        );
        assert!(text(&bad).contains("Invalid credentials"), "{}", text(&bad));
    }

    // The service account finds users by uid in the whole tree, and reads no passwords.
    let out = tool(
        "ldapsearch",
        &[
            "-x",
            "-H",
            &slapd.url(),
            "-D",
            ldap::SERVICE_DN,
            "-w",
            ldap::SERVICE_PASSWORD,
            "-LLL",
            "-o",
            "ldif-wrap=no",
            "-b",
            ldap::BASE_DN,
            "(uid=alice)",
            "uid",
            "uidNumber",
            "userPassword",
            "memberOf",
        ],
        &[("LDAPNOINIT", "1")],
    )
    .await?;
    let found = text(&out);
    assert!(out.status.success(), "{found}");
    assert!(
        found.contains("dn: uid=alice,ou=people,dc=example,dc=org"),
        "{found}"
    );
    assert!(found.contains("uidNumber: 10001"), "{found}");
    assert!(!found.contains("userPassword"), "{found}");
    // memberOf maintained by the overlay for groups loaded over LDAP.
    assert!(
        found.contains("memberOf: cn=gpu-users,ou=groups,dc=example,dc=org"),
        "{found}"
    );

    // Root searches: two uid=dup entries, memberOf of dave and eve, carol in no group.
    let dups = slapd.search(ldap::BASE_DN, "(uid=dup)", &["1.1"]).await?;
    assert_eq!(dups.matches("dn: ").count(), 2, "{dups}");
    let dave = slapd
        .search(ldap::BASE_DN, "(uid=dave)", &["memberOf"])
        .await?;
    assert!(
        dave.contains("memberOf: cn=atrium-admins,ou=groups"),
        "{dave}"
    );
    assert!(dave.contains("memberOf: cn=gpu-users,ou=groups"), "{dave}");
    let eve = slapd
        .search(ldap::BASE_DN, "(uid=eve)", &["memberOf"])
        .await?;
    assert!(eve.contains("memberOf: cn=gpu-users,ou=groups"), "{eve}");
    let carol = slapd
        .search(ldap::BASE_DN, "(uid=carol)", &["memberOf"])
        .await?;
    assert!(!carol.contains("memberOf"), "{carol}");
    let staff = slapd
        .search(
            ldap::GROUPS_DN,
            "(uniqueMember=uid=frank,ou=staff,dc=example,dc=org)",
            &["cn"],
        )
        .await?;
    assert!(staff.contains("cn: hpc-staff"), "{staff}");
    let posix = slapd
        .search(
            ldap::GROUPS_DN,
            "(&(objectClass=posixGroup)(memberUid=alice))",
            &["cn"],
        )
        .await?;
    assert!(posix.contains("cn: ml-team"), "{posix}");

    // The generated users: they bind, are in gpu-users (memberOf) and in their team.
    for n in [1, 1000, many_users::COUNT] {
        let user = many_users::user(n);
        let ok = whoami(&slapd.url(), &user.dn, &user.password, &[]).await?;
        assert!(ok.status.success(), "{}: {}", user.dn, text(&ok));
        let entry = slapd
            .search(ldap::BASE_DN, &format!("(uid={})", user.uid), &["memberOf"])
            .await?;
        assert!(
            entry.contains("memberOf: cn=gpu-users,ou=groups"),
            "{entry}"
        );
        let team = slapd
            .search(
                ldap::GROUPS_DN,
                &format!("(&(objectClass=posixGroup)(memberUid={}))", user.uid),
                &["cn"],
            )
            .await?;
        assert!(team.contains(&format!("cn: {}", user.team)), "{team}");
    }
    let members = slapd
        .search(&ldap::group_dn("gpu-users"), "(objectClass=*)", &["member"])
        .await?;
    assert_eq!(
        members.matches("\nmember: ").count(),
        2005,
        "5 named + 2,000"
    );

    // Changes through ldapmodify keep memberOf current.
    slapd
        .ldapmodify(&format!(
            "dn: {}\nchangetype: modify\nadd: member\nmember: uid=carol,ou=people,dc=example,dc=org\n",
            ldap::group_dn("atrium-admins")
        ))
        .await?;
    let carol = slapd
        .search(ldap::BASE_DN, "(uid=carol)", &["memberOf"])
        .await?;
    assert!(
        carol.contains("memberOf: cn=atrium-admins,ou=groups"),
        "{carol}"
    );

    assert_eq!(
        slapd_processes_of(&dir),
        slapd.pid().into_iter().collect::<Vec<_>>()
    );
    drop(slapd);
    assert!(!dir.exists(), "{} not removed", dir.display());
    assert!(slapd_processes_of(&dir).is_empty());
    assert_no_stray_slapd();
    Ok(())
}

#[tokio::test]
async fn stop_and_restart_keep_url_and_data() -> anyhow::Result<()> {
    let mut slapd = Slapd::start(SlapdOptions::default()).await?;
    let url = slapd.url();
    let dir = slapd.dir().to_path_buf();
    slapd
        .ldapmodify(
            "dn: uid=bob,ou=people,dc=example,dc=org\nchangetype: modify\nreplace: mail\nmail: robert@example.org\n",
        )
        .await?;

    slapd.stop().await?;
    assert!(!slapd.is_running());
    assert_eq!(slapd.pid(), None);
    assert!(slapd_processes_of(&dir).is_empty());
    let down = root_dse(&url).await?;
    assert!(
        !down.status.success(),
        "answered while stopped: {}",
        text(&down)
    );
    let bind = whoami(&url, ldap::SERVICE_DN, ldap::SERVICE_PASSWORD, &[]).await?;
    assert!(!bind.status.success());
    assert!(dir.exists(), "stop must keep the data");
    slapd.stop().await?; // idempotent

    slapd.restart().await?;
    assert!(slapd.is_running());
    assert_eq!(slapd.url(), url);
    let up = root_dse(&url).await?;
    assert!(up.status.success(), "{}", text(&up));
    let bob = slapd
        .search(ldap::BASE_DN, "(uid=bob)", &["mail", "memberOf"])
        .await?;
    assert!(bob.contains("mail: robert@example.org"), "{bob}");
    assert!(bob.contains("memberOf: cn=gpu-users"), "{bob}");
    let alice = ldap::user("alice").map(|u| (u.dn, u.password));
    let (alice_dn, alice_pw) = alice.ok_or_else(|| anyhow::anyhow!("alice not in USERS"))?;
    assert!(whoami(&url, alice_dn, alice_pw, &[])
        .await?
        .status
        .success());

    // restart() while running also works.
    slapd.restart().await?;
    assert!(root_dse(&url).await?.status.success());
    assert_eq!(slapd_processes_of(&dir).len(), 1);

    drop(slapd);
    assert!(!dir.exists());
    assert_no_stray_slapd();
    Ok(())
}

#[tokio::test]
async fn tls_directory_offers_starttls_and_ldaps_with_its_ca() -> anyhow::Result<()> {
    let slapd = Slapd::start(SlapdOptions { tls: true }).await?;
    let dir = slapd.dir().to_path_buf();
    let ca = slapd
        .ca_file()
        .ok_or_else(|| anyhow::anyhow!("no CA file with tls"))?
        .to_string_lossy()
        .into_owned();
    let ldaps = slapd
        .ldaps_url()
        .ok_or_else(|| anyhow::anyhow!("no ldaps URL with tls"))?;
    assert!(ldaps.starts_with("ldaps://127.0.0.1:"), "{ldaps}");
    assert_ne!(slapd.ldaps_port(), Some(slapd.port()));

    let (dn, pw) = (ldap::SERVICE_DN, ldap::SERVICE_PASSWORD);
    let url = slapd.url();
    let trusted: &[(&str, &str)] = &[("LDAPTLS_CACERT", &ca), ("LDAPTLS_REQCERT", "demand")];
    // Without LDAPTLS_CACERT the system bundle (ldap.conf TLS_CACERT) applies: our CA is not in it.
    let untrusted: &[(&str, &str)] = &[("LDAPTLS_REQCERT", "demand")];

    for (what, target, extra) in [
        ("StartTLS", url.as_str(), &["-ZZ"][..]),
        ("ldaps", ldaps.as_str(), &[][..]),
    ] {
        let mut args = vec!["-x", "-H", target, "-D", dn, "-w", pw];
        args.extend(extra);
        let ok = tool("ldapwhoami", &args, trusted).await?;
        assert!(ok.status.success(), "{what} with the CA: {}", text(&ok));
        assert!(text(&ok).contains(&format!("dn:{dn}")), "{}", text(&ok));
        let bad = tool("ldapwhoami", &args, untrusted).await?;
        assert!(
            !bad.status.success(),
            "{what} succeeded without trusting the CA: {}",
            text(&bad)
        );
    }
    // rustls (webpki) accepts the chain for both names, trusting only the fixture's CA.
    let port = slapd
        .ldaps_port()
        .ok_or_else(|| anyhow::anyhow!("no ldaps port"))?;
    let ca_path = std::path::PathBuf::from(&ca);
    for name in ["127.0.0.1", "localhost"] {
        let ca_path = ca_path.clone();
        tokio::task::spawn_blocking(move || rustls_handshake(&ca_path, name, port))
            .await?
            .map_err(|e| e.context(format!("rustls handshake as {name:?}")))?;
    }
    let wrong = rustls_handshake(&ca_path, "ldap.example.org", port);
    assert!(wrong.is_err(), "a name not in the certificate was accepted");

    // The server certificate is a CA-signed leaf, not a self-signed CA.
    let cert = dir.join("tls/server.pem");
    let out = tool(
        "openssl",
        &["x509", "-noout", "-text", "-in", &cert.to_string_lossy()],
        &[],
    )
    .await?;
    let info = text(&out);
    assert!(info.contains("CA:FALSE"), "{info}");
    assert!(info.contains("IP Address:127.0.0.1"), "{info}");
    assert!(info.contains("DNS:localhost"), "{info}");
    assert!(info.contains("TLS Web Server Authentication"), "{info}");

    drop(slapd);
    assert!(!dir.exists());
    assert_no_stray_slapd();
    Ok(())
}
