//! Throwaway OpenLDAP directories (`slapd`) for tests.
//!
//! [`Slapd::start`] builds a private `cn=config` in a temp dir with `slapadd -n0` (modules
//! back_mdb, memberof and refint; one mdb database for `dc=example,dc=org`), loads
//! `tests/fixtures/ldap/directory.ldif` and the generated users of [`many_users`] with
//! `slapadd -n1` (writing `memberOf` on the members of each `groupOfNames`, as the memberof
//! overlay would: about 0.15 s for the 2,038 entries, against 0.6 s when the overlay adds it
//! member by member), and runs `slapd -d 0` in the foreground on free ports of 127.0.0.1 under a
//! [`Supervised`] lifeline: it dies with the test process, however that ends, and the temp dir is
//! removed. With [`SlapdOptions::tls`] it also gets a throwaway CA ([`Slapd::ca_file`]) and a
//! server certificate for `IP:127.0.0.1` and `DNS:localhost`, and listens for StartTLS on
//! [`Slapd::url`] and for LDAPS on [`Slapd::ldaps_url`].
//!
//! Access: anonymous clients may only bind (and read the root DSE); any bound user may read
//! everything except `userPassword`, which only its owner may (over)write; [`ROOT_DN`] may do
//! anything.
//!
//! # The fixture directory (base `dc=example,dc=org`)
//!
//! | login   | DN                                                       | password       | uidNumber | groups |
//! |---------|----------------------------------------------------------|----------------|-----------|--------|
//! | `alice` | `uid=alice,ou=people,dc=example,dc=org`                  | `alice-secret` | 10001 | `ml-team` (posixGroup, `memberUid`), `gpu-users` |
//! | `bob`   | `uid=bob,ou=people,dc=example,dc=org`                    | `bob-secret`   | 10002 | `gpu-users` |
//! | `carol` | `uid=carol,ou=people,dc=example,dc=org`                  | `carol-secret` | 10003 | none |
//! | `dave`  | `uid=dave,ou=people,dc=example,dc=org`                   | `dave-secret`  | 10004 | `atrium-admins`, `gpu-users` |
//! | `eve`   | `cn=Eve\, \"Q\" \<Test\>,ou=people,dc=example,dc=org` ([`EVE_DN`]) | `eve-secret` | 10005 | `gpu-users` |
//! | `frank` | `uid=frank,ou=staff,dc=example,dc=org`                   | `frank-secret` | 10006 | `hpc-staff` (groupOfUniqueNames, `uniqueMember`), `gpu-users` |
//! | `dup`   | `uid=dup,ou=people,dc=example,dc=org`                    | `dup-secret`   | 10007 | none |
//! | `dup`   | `uid=dup,ou=staff,dc=example,dc=org`                     | `dup-secret`   | 10008 | none |
//!
//! Users are `inetOrgPerson` + `posixAccount` with `uid`, `cn`, `sn`, `givenName` (not `dup`),
//! `displayName`, `mail` (`<login>@example.org`; `dup.staff@example.org` for the staff `dup`),
//! `uidNumber`, `gidNumber` (= uidNumber; no personal group entries exist), `homeDirectory`
//! (`/home/<login>`), `loginShell` (`/bin/bash`, carol `/bin/zsh`) and an `{SSHA}` `userPassword`.
//! `eve`'s `cn` is `Eve, "Q" <Test>` and is also her RDN, so her DN needs escaping; `uid=dup`
//! exists twice (a search for it finds two entries).
//!
//! Groups, all in `ou=groups,dc=example,dc=org`:
//!
//! | group           | object class         | members                               |
//! |-----------------|----------------------|---------------------------------------|
//! | `gpu-users`     | `groupOfNames`       | `member`: alice, bob, dave, eve, frank |
//! | `atrium-admins` | `groupOfNames`       | `member`: dave                        |
//! | `hpc-staff`     | `groupOfUniqueNames` | `uniqueMember`: frank                 |
//! | `ml-team`       | `posixGroup` (gidNumber 20001) | `memberUid`: alice          |
//!
//! Beside them, [`many_users::COUNT`] (2,000) generated users, `user0001` … `user2000` in
//! `ou=people` with passwords `user0001-secret` …, all in `gpu-users` and each in one of
//! twenty `posixGroup`s `team-01` … `team-20`: see [`many_users`] (`gpu-users` has 2,005
//! members).
//!
//! `memberOf` (operational; ask for it explicitly or with `+`) is maintained for `groupOfNames`
//! only, so alice, bob, eve and frank have `memberOf: cn=gpu-users,...` and dave has both
//! `cn=atrium-admins,...` and `cn=gpu-users,...`. Changes made later through LDAP (e.g.
//! [`Slapd::ldapmodify`]) keep `memberOf` up to date; refint removes deleted members from groups.
//!
//! Service account (search bind of the atrium server): [`SERVICE_DN`] / [`SERVICE_PASSWORD`];
//! it reads everything except passwords. Directory manager: [`ROOT_DN`] / [`ROOT_PASSWORD`].
//!
//! System dependencies (`tests/install-deps.sh`): `slapd`, `ldap-utils`, `openssl`.

use super::{free_port, many_users, verbose};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::process::{file_tail, find_binary, output_of, Supervised, SupervisedCommand};
use super::wait;

/// Base DN of the fixture directory.
pub const BASE_DN: &str = "dc=example,dc=org";
/// Directory manager (rootdn of the database): may do anything.
pub const ROOT_DN: &str = "cn=admin,dc=example,dc=org";
/// Password of [`ROOT_DN`].
pub const ROOT_PASSWORD: &str = "admin-secret";
/// Service account for the server's search bind; reads everything except `userPassword`.
pub const SERVICE_DN: &str = "cn=atrium,ou=services,dc=example,dc=org";
/// Password of [`SERVICE_DN`].
pub const SERVICE_PASSWORD: &str = "service-secret";
/// Where the users live (besides [`STAFF_DN`]).
pub const PEOPLE_DN: &str = "ou=people,dc=example,dc=org";
/// The second organizational unit with users (frank, the second dup).
pub const STAFF_DN: &str = "ou=staff,dc=example,dc=org";
/// Where the groups live.
pub const GROUPS_DN: &str = "ou=groups,dc=example,dc=org";
/// DN of user `eve`, whose RDN (`cn`) contains characters that must be escaped in DNs.
pub const EVE_DN: &str = r#"cn=Eve\, \"Q\" \<Test\>,ou=people,dc=example,dc=org"#;

/// One user of the fixture directory (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixtureUser {
    /// Login name (`uid`).
    pub uid: &'static str,
    /// Entry DN, in the form stored in the directory.
    pub dn: &'static str,
    /// Cleartext password.
    pub password: &'static str,
    /// `uidNumber` (also the `gidNumber`).
    pub uid_number: u32,
    /// `cn` of the groups the user belongs to, of any kind (`groupOfNames`, `groupOfUniqueNames`,
    /// `posixGroup`), sorted.
    pub groups: &'static [&'static str],
}

/// All users of the fixture directory. `dup` appears twice (two entries with `uid=dup`).
pub const USERS: &[FixtureUser] = &[
    FixtureUser {
        uid: "alice",
        dn: "uid=alice,ou=people,dc=example,dc=org",
        password: "alice-secret",
        uid_number: 10001,
        groups: &["gpu-users", "ml-team"],
    },
    FixtureUser {
        uid: "bob",
        dn: "uid=bob,ou=people,dc=example,dc=org",
        password: "bob-secret",
        uid_number: 10002,
        groups: &["gpu-users"],
    },
    FixtureUser {
        uid: "carol",
        dn: "uid=carol,ou=people,dc=example,dc=org",
        password: "carol-secret",
        uid_number: 10003,
        groups: &[],
    },
    FixtureUser {
        uid: "dave",
        dn: "uid=dave,ou=people,dc=example,dc=org",
        password: "dave-secret",
        uid_number: 10004,
        groups: &["atrium-admins", "gpu-users"],
    },
    FixtureUser {
        uid: "eve",
        dn: EVE_DN,
        password: "eve-secret",
        uid_number: 10005,
        groups: &["gpu-users"],
    },
    FixtureUser {
        uid: "frank",
        dn: "uid=frank,ou=staff,dc=example,dc=org",
        password: "frank-secret",
        uid_number: 10006,
        groups: &["gpu-users", "hpc-staff"],
    },
    FixtureUser {
        uid: "dup",
        dn: "uid=dup,ou=people,dc=example,dc=org",
        password: "dup-secret",
        uid_number: 10007,
        groups: &[],
    },
    FixtureUser {
        uid: "dup",
        dn: "uid=dup,ou=staff,dc=example,dc=org",
        password: "dup-secret",
        uid_number: 10008,
        groups: &[],
    },
];

/// The first fixture user with login `uid` (for `dup`, the one in `ou=people`).
pub fn user(uid: &str) -> Option<&'static FixtureUser> {
    USERS.iter().find(|u| u.uid == uid)
}

/// DN of the group called `cn` in [`GROUPS_DN`], e.g. `cn=gpu-users,ou=groups,dc=example,dc=org`.
pub fn group_dn(cn: &str) -> String {
    format!("cn={cn},{GROUPS_DN}")
}

/// The fixture directory.
const DIRECTORY_LDIF: &str = include_str!("../../fixtures/ldap/directory.ldif");

/// How long slapd may take to answer after being spawned.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// How long one client command (ldapsearch, ldapmodify, ...) may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one readiness probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Attempts with fresh ports when another process takes a port between probing and binding.
const PORT_ATTEMPTS: usize = 5;

/// Options for [`Slapd::start`].
#[derive(Debug, Clone, Default)]
pub struct SlapdOptions {
    /// Generate a CA and a server certificate; offer StartTLS on [`Slapd::url`] and listen on
    /// [`Slapd::ldaps_url`] too.
    pub tls: bool,
}

/// A running (or stopped, see [`Slapd::stop`]) private slapd with the fixture directory.
///
/// Dropping it stops slapd and removes its directory.
pub struct Slapd {
    // Field order is drop order: slapd first, then the keeper that removes the directory.
    server: Option<Supervised>,
    /// Owns the temp dir: a `sleep infinity` under a lifeline whose cleanup removes `dir` (and
    /// kills anything still mentioning it) once the fixture is dropped or the test process dies.
    _keeper: Supervised,
    dir: PathBuf,
    port: u16,
    ldaps_port: Option<u16>,
    ca_file: Option<PathBuf>,
    slapd: PathBuf,
    tools: Tools,
    /// Length of `slapd.log` when the latest slapd was spawned.
    log_start: u64,
}

/// The OpenLDAP client tools.
#[derive(Debug, Clone)]
struct Tools {
    ldapsearch: PathBuf,
    ldapmodify: PathBuf,
}

impl Slapd {
    /// Builds and starts a fresh directory (see the module docs). Returns once slapd answers
    /// LDAP requests and the groups are loaded.
    pub async fn start(opts: SlapdOptions) -> anyhow::Result<Slapd> {
        let started = Instant::now();
        let slapd = find_binary("slapd", &[])?;
        let slapadd = find_binary("slapadd", &[])?;
        let tools = Tools {
            ldapsearch: find_binary("ldapsearch", &[])?,
            ldapmodify: find_binary("ldapmodify", &[])?,
        };
        let module_dir = module_dir()?;
        let schema_dir = schema_dir()?;

        let (dir, keeper) = super::kept_dir("atrium-slapd-", spawn_keeper)?;
        // From here on the keeper removes `dir`, however this function or the process ends.

        let ca_file = if opts.tls {
            Some(make_certificates(&dir).await?)
        } else {
            None
        };
        let config_dir = dir.join("slapd.d");
        let data_dir = dir.join("data");
        for d in [&config_dir, &data_dir] {
            std::fs::create_dir(d).with_context(|| format!("creating {}", d.display()))?;
        }
        let config = config_ldif(&dir, &module_dir, &schema_dir, opts.tls);
        let config_file = dir.join("config.ldif");
        std::fs::write(&config_file, config).context("writing config.ldif")?;
        run_tool(
            &slapadd,
            [
                "-n0".into(),
                "-F".into(),
                config_dir.clone().into_os_string(),
                "-l".into(),
                config_file.into_os_string(),
            ],
            None,
            CLIENT_TIMEOUT,
        )
        .await
        .context("building cn=config with slapadd -n0")?;

        let offline = fixture_entries(DIRECTORY_LDIF);
        let offline_file = dir.join("directory-offline.ldif");
        std::fs::write(&offline_file, &offline).context("writing directory-offline.ldif")?;
        run_tool(
            &slapadd,
            [
                "-q".into(),
                "-n1".into(),
                "-F".into(),
                config_dir.into_os_string(),
                "-l".into(),
                offline_file.into_os_string(),
            ],
            None,
            CLIENT_TIMEOUT,
        )
        .await
        .context("loading the fixture directory with slapadd -n1")?;
        let loaded = started.elapsed();

        let mut fixture = Slapd {
            server: None,
            _keeper: keeper,
            dir,
            port: 0,
            ldaps_port: None,
            ca_file,
            slapd,
            tools,
            log_start: 0,
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            fixture.port = free_port()?;
            fixture.ldaps_port = if opts.tls { Some(free_port()?) } else { None };
            match fixture.launch().await {
                Ok(()) => break,
                Err(e) if attempt < PORT_ATTEMPTS && fixture.port_was_taken() => {
                    if verbose() {
                        eprintln!("slapd could not bind its ports, retrying: {e:#}");
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if verbose() {
            eprintln!(
                "slapd at {} ({}) ready in {} ms ({} entries loaded by slapadd at {} ms)",
                fixture.url(),
                fixture.dir.display(),
                started.elapsed().as_millis(),
                offline.matches("\ndn: ").count() + 1,
                loaded.as_millis(),
            );
        }
        Ok(fixture)
    }

    /// `ldap://127.0.0.1:PORT` (StartTLS-capable when started with `tls`).
    pub fn url(&self) -> String {
        format!("ldap://127.0.0.1:{}", self.port)
    }

    /// `ldaps://127.0.0.1:PORT` when started with `tls`.
    pub fn ldaps_url(&self) -> Option<String> {
        self.ldaps_port.map(|p| format!("ldaps://127.0.0.1:{p}"))
    }

    /// Port of [`Slapd::url`].
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Port of [`Slapd::ldaps_url`].
    pub fn ldaps_port(&self) -> Option<u16> {
        self.ldaps_port
    }

    /// PEM file of the CA that signed the server certificate, when started with `tls`.
    pub fn ca_file(&self) -> Option<&Path> {
        self.ca_file.as_deref()
    }

    /// The private directory (config, data, certificates, `slapd.log`). Removed on drop.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Process id of the running slapd, e.g. to SIGSTOP/SIGCONT it (a hung directory). Prefer this
    /// over `pkill -f <dir>`, which also matches slapd's supervisor shell.
    pub fn pid(&self) -> Option<u32> {
        self.server
            .as_ref()
            .filter(|s| s.is_running())
            .map(Supervised::pid)
    }

    /// Whether slapd is running (false after [`Slapd::stop`] or if it died).
    pub fn is_running(&self) -> bool {
        self.server.as_ref().is_some_and(Supervised::is_running)
    }

    /// Last `max_lines` lines of slapd's log (all runs), for error messages.
    pub fn log_tail(&self, max_lines: usize) -> String {
        file_tail(&self.log_path(), max_lines)
    }

    /// SIGKILLs slapd and waits until it is gone; keeps its data. Idempotent.
    pub async fn stop(&mut self) -> anyhow::Result<()> {
        match self.server.take() {
            Some(mut s) => s.stop().context("stopping slapd"),
            None => Ok(()),
        }
    }

    /// Starts slapd again (stopping it first if it runs) on the same ports with the same data;
    /// returns once it answers.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.stop().await?;
        self.launch().await
    }

    /// Applies `ldif` (changetype records, as for `ldapmodify`) as [`ROOT_DN`].
    pub async fn ldapmodify(&self, ldif: &str) -> anyhow::Result<()> {
        self.modify(ldif, false).await
    }

    /// Adds the entries in `ldif` (plain entries, as for `ldapadd`) as [`ROOT_DN`].
    pub async fn ldapadd(&self, ldif: &str) -> anyhow::Result<()> {
        self.modify(ldif, true).await
    }

    /// Searches the subtree under `base` for `filter` as [`ROOT_DN`] and returns the entries as
    /// LDIF (`ldapsearch -LLL`, lines unwrapped). `attrs` as for ldapsearch (e.g. `["memberOf"]`,
    /// `["*", "+"]`; empty: all user attributes).
    pub async fn search(&self, base: &str, filter: &str, attrs: &[&str]) -> anyhow::Result<String> {
        let mut args = self.root_client_args();
        args.extend(
            ["-LLL", "-o", "ldif-wrap=no", "-b", base, filter]
                .iter()
                .chain(attrs)
                .map(OsString::from),
        );
        run_tool(&self.tools.ldapsearch, args, None, CLIENT_TIMEOUT).await
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("slapd.log")
    }

    fn root_client_args(&self) -> Vec<OsString> {
        ["-x", "-H", &self.url(), "-D", ROOT_DN, "-w", ROOT_PASSWORD]
            .iter()
            .map(OsString::from)
            .collect()
    }

    async fn modify(&self, ldif: &str, add: bool) -> anyhow::Result<()> {
        let mut args = self.root_client_args();
        if add {
            args.push("-a".into());
        }
        run_tool(&self.tools.ldapmodify, args, Some(ldif), CLIENT_TIMEOUT)
            .await
            .map(drop)
    }

    /// Spawns slapd on `self.port` / `self.ldaps_port` and waits until it answers.
    async fn launch(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.server.is_none(), "slapd is already running");
        let mut urls = format!("ldap://127.0.0.1:{}/", self.port);
        if let Some(p) = self.ldaps_port {
            urls.push_str(&format!(" ldaps://127.0.0.1:{p}/"));
        }
        let log = self.log_path();
        // Mark where this run's log starts, for port_was_taken().
        self.log_start = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
        let mut spec = SupervisedCommand::new("slapd", &self.slapd, &log).args([
            // Any -d keeps slapd in the foreground; "none" still logs startup errors (-d 0 does not).
            "-d".as_ref(),
            "none".as_ref(),
            "-F".as_ref(),
            self.dir.join("slapd.d").as_os_str(),
            "-h".as_ref(),
            urls.as_ref(),
        ]);
        spec.current_dir = Some(self.dir.clone());
        // slapd writes its pid file only after it has bound all its listeners, so "the pid file
        // holds our pid" tells that the ports are ours: until then an answer on them may come
        // from whoever took a port after free_port() let go of it (another test's slapd, say).
        let pid_file = self.dir.join("slapd.pid");
        match std::fs::remove_file(&pid_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", pid_file.display()));
            }
            _ => {}
        }
        let server = Supervised::spawn(spec)?;
        let args = anonymous_root_dse_args(&self.url());
        let ldapsearch = self.tools.ldapsearch.clone();
        let ready = wait::until("slapd to answer LDAP requests", START_DEADLINE, || {
            let (args, ldapsearch, server, pid_file) = (&args, &ldapsearch, &server, &pid_file);
            async move {
                if !server.is_running() {
                    return Some(Err(anyhow::anyhow!("slapd exited during startup")));
                }
                let pid = std::fs::read_to_string(pid_file).ok()?;
                if pid.trim() != server.pid().to_string() {
                    return None;
                }
                run_tool(ldapsearch, args.iter().cloned(), None, PROBE_TIMEOUT)
                    .await
                    .ok()
                    .map(|_| Ok(()))
            }
        })
        .await
        .and_then(|r| r);
        match ready {
            Ok(()) => {
                self.server = Some(server);
                Ok(())
            }
            Err(e) => {
                drop(server);
                Err(e.context(format!(
                    "starting slapd on {urls}; log {}:\n{}",
                    log.display(),
                    file_tail(&log, 30)
                )))
            }
        }
    }

    /// Whether the latest slapd run failed because a port was in use.
    fn port_was_taken(&self) -> bool {
        std::fs::read(self.log_path())
            .ok()
            .and_then(|log| {
                let start = usize::try_from(self.log_start).ok()?;
                let run = String::from_utf8_lossy(log.get(start..)?).into_owned();
                Some(run.contains("errno=98") || run.contains("Address already in use"))
            })
            .unwrap_or(false)
    }
}

/// ldapsearch arguments reading the root DSE anonymously: succeeds once slapd serves requests.
fn anonymous_root_dse_args(url: &str) -> Vec<OsString> {
    [
        "-x",
        "-H",
        url,
        "-o",
        "nettimeout=2",
        "-LLL",
        "-b",
        "",
        "-s",
        "base",
        "namingContexts",
    ]
    .iter()
    .map(OsString::from)
    .collect()
}

/// Starts the process that owns `dir`: it does nothing until its lifeline closes, then its
/// supervisor kills whatever still mentions `dir` (slapd's command line does) and removes it.
fn spawn_keeper(dir: &Path) -> anyhow::Result<Supervised> {
    let sleep = find_binary("sleep", &[])?;
    let mut spec = SupervisedCommand::new("slapd directory keeper", sleep, dir.join("keeper.log"))
        .args(["infinity"]);
    spec.remove_on_exit = Some(dir.to_path_buf());
    Supervised::spawn(spec)
}

/// Runs an OpenLDAP or openssl tool, feeding it `stdin`, killing it after `timeout`; returns its
/// stdout. Client tools ignore
/// ldap.conf and ~/.ldaprc (`LDAPNOINIT`), so only the arguments count.
async fn run_tool<I>(
    program: &Path,
    args: I,
    stdin: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<String>
where
    I: IntoIterator<Item = OsString>,
{
    let args: Vec<OsString> = args.into_iter().collect();
    output_of(program, &args, [("LDAPNOINIT", "1")], stdin, timeout).await
}

/// Every entry of the fixture for `slapadd`: those of `ldif` (the fixture file) and the
/// generated users ([`many_users`], all of them also members of `gpu-users`), with `memberOf`
/// written on the members of each `groupOfNames` as the memberof overlay would have (slapadd
/// runs no overlay). Adding the groups over LDAP instead costs the overlay one modify per
/// member: half a second for `gpu-users`' 2,005. Once slapd runs, the overlay keeps
/// `memberOf` current.
fn fixture_entries(ldif: &str) -> String {
    let generated = many_users::offline_ldif();
    let mut records: Vec<String> = records_of(ldif).chain(records_of(&generated)).collect();
    let gpu_users = format!("dn: {}\n", group_dn("gpu-users"));
    for record in records.iter_mut().filter(|r| r.starts_with(&gpu_users)) {
        record.push_str(&many_users::gpu_users_members());
    }
    // member DN (lowercased) -> the DNs of its groupOfNames
    let mut member_of: std::collections::HashMap<String, Vec<String>> = Default::default();
    for record in records.iter().filter(|r| is_group_of_names(r)) {
        let group = value_of(record, "dn").unwrap_or_default().to_string();
        for line in record.lines() {
            if let Some(member) = attribute_value(line, "member") {
                member_of
                    .entry(member.to_lowercase())
                    .or_default()
                    .push(group.clone());
            }
        }
    }
    let (groups, mut entries): (Vec<String>, Vec<String>) =
        records.into_iter().partition(|r| is_group_of_names(r));
    for record in &mut entries {
        let dn = value_of(record, "dn").unwrap_or_default().to_lowercase();
        for group in member_of.get(&dn).into_iter().flatten() {
            record.push_str(&format!("memberOf: {group}\n"));
        }
    }
    let mut out = String::with_capacity(ldif.len() + generated.len() * 2);
    for record in entries.iter().chain(&groups) {
        out.push_str(record);
        out.push('\n');
    }
    out
}

/// The records of an LDIF text, each its lines (comments left out) ending in a newline.
fn records_of(ldif: &str) -> impl Iterator<Item = String> + '_ {
    ldif.split("\n\n").filter_map(|chunk| {
        let record: String = chunk
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        (!record.is_empty()).then_some(record)
    })
}

/// The value of `line` when it is attribute `name` (`name: value`), else `None`.
fn attribute_value<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    line.split_once(':')
        .filter(|(attr, _)| attr.trim().eq_ignore_ascii_case(name))
        .map(|(_, value)| value.trim())
}

/// The first value of attribute `name` in `record`.
fn value_of<'a>(record: &'a str, name: &str) -> Option<&'a str> {
    record.lines().find_map(|l| attribute_value(l, name))
}

fn is_group_of_names(record: &str) -> bool {
    record.lines().any(|l| {
        attribute_value(l, "objectClass").is_some_and(|v| v.eq_ignore_ascii_case("groupOfNames"))
    })
}

/// First of `candidates` that contains `probe`.
fn first_dir_with(candidates: &[&str], probe: &str, what: &str) -> anyhow::Result<PathBuf> {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join(probe).exists())
        .with_context(|| {
            format!(
                "{what} not found (no {probe} in {}); run tests/install-deps.sh",
                candidates.join(", ")
            )
        })
}

/// Directory with the slapd modules (back_mdb, memberof, refint).
fn module_dir() -> anyhow::Result<PathBuf> {
    first_dir_with(
        &[
            "/usr/lib/ldap",
            "/usr/lib64/openldap",
            "/usr/lib/openldap",
            "/usr/libexec/openldap",
        ],
        "memberof.la",
        "slapd modules",
    )
}

/// Directory with the LDIF schema files (core, cosine, nis, inetorgperson).
fn schema_dir() -> anyhow::Result<PathBuf> {
    first_dir_with(
        &["/etc/ldap/schema", "/etc/openldap/schema"],
        "inetorgperson.ldif",
        "OpenLDAP schema",
    )
}

/// The `cn=config` of the private slapd, for `slapadd -n0`.
fn config_ldif(dir: &Path, module_dir: &Path, schema_dir: &Path, tls: bool) -> String {
    let dir = dir.display();
    let tls_attrs = if tls {
        format!(
            "olcTLSCACertificateFile: {dir}/tls/ca.pem\n\
             olcTLSCertificateFile: {dir}/tls/server.pem\n\
             olcTLSCertificateKeyFile: {dir}/tls/server.key\n"
        )
    } else {
        String::new()
    };
    let schemas: String = ["core", "cosine", "nis", "inetorgperson"]
        .iter()
        .map(|s| format!("include: file://{}/{s}.ldif\n\n", schema_dir.display()))
        .collect();
    format!(
        "\
dn: cn=config
objectClass: olcGlobal
cn: config
olcPidFile: {dir}/slapd.pid
olcArgsFile: {dir}/slapd.args
olcLogLevel: none
{tls_attrs}
dn: cn=module{{0}},cn=config
objectClass: olcModuleList
cn: module{{0}}
olcModulePath: {modules}
olcModuleLoad: back_mdb
olcModuleLoad: memberof
olcModuleLoad: refint

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

{schemas}\
dn: olcDatabase={{-1}}frontend,cn=config
objectClass: olcDatabaseConfig
objectClass: olcFrontendConfig
olcDatabase: {{-1}}frontend
olcSizeLimit: 1000
olcAccess: {{0}}to dn.base=\"\" by * read
olcAccess: {{1}}to dn.base=\"cn=subschema\" by * read

dn: olcDatabase={{0}}config,cn=config
objectClass: olcDatabaseConfig
olcDatabase: {{0}}config
olcAccess: {{0}}to * by * none

dn: olcDatabase={{1}}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {{1}}mdb
olcSuffix: {BASE_DN}
olcDbDirectory: {dir}/data
olcDbMaxSize: 67108864
olcRootDN: {ROOT_DN}
olcRootPW: {ROOT_PASSWORD}
olcDbIndex: objectClass eq
olcDbIndex: uid,cn,mail eq
olcDbIndex: member,uniqueMember,memberUid eq
olcAccess: {{0}}to attrs=userPassword by anonymous auth by self write by * none
olcAccess: {{1}}to * by dn.exact=\"{SERVICE_DN}\" read by users read by anonymous auth

dn: olcOverlay={{0}}memberof,olcDatabase={{1}}mdb,cn=config
objectClass: olcOverlayConfig
objectClass: olcMemberOf
olcOverlay: {{0}}memberof
olcMemberOfDangling: ignore
olcMemberOfRefInt: TRUE
olcMemberOfGroupOC: groupOfNames
olcMemberOfMemberAD: member
olcMemberOfMemberOfAD: memberOf

dn: olcOverlay={{1}}refint,olcDatabase={{1}}mdb,cn=config
objectClass: olcOverlayConfig
objectClass: olcRefintConfig
olcOverlay: {{1}}refint
olcRefintAttribute: member uniqueMember
",
        modules = module_dir.display(),
    )
}

/// openssl configuration for the throwaway CA and the server certificate.
const OPENSSL_CNF: &str = "\
[req]
distinguished_name = dn
prompt = no

[dn]
CN = atrium test LDAP

[ca_ext]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash

[server_ext]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid,issuer
";

/// Creates `<dir>/tls/{ca.pem, server.pem, server.key}` (ECDSA P-256, valid for 7 days) and
/// returns the path of `ca.pem`.
async fn make_certificates(dir: &Path) -> anyhow::Result<PathBuf> {
    let openssl = find_binary("openssl", &[])?;
    let tls = dir.join("tls");
    std::fs::create_dir(&tls).with_context(|| format!("creating {}", tls.display()))?;
    let cnf = tls.join("openssl.cnf");
    std::fs::write(&cnf, OPENSSL_CNF).context("writing openssl.cnf")?;
    let p = |name: &str| tls.join(name).into_os_string();
    let os = |args: &[&str]| args.iter().map(OsString::from).collect::<Vec<_>>();
    let key_args = os(&[
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-noenc",
    ]);

    let mut ca = os(&["req", "-x509", "-days", "7", "-extensions", "ca_ext"]);
    ca.extend(key_args.iter().cloned());
    ca.extend([
        "-subj".into(),
        "/CN=atrium test CA".into(),
        "-config".into(),
        cnf.clone().into_os_string(),
        "-keyout".into(),
        p("ca.key"),
        "-out".into(),
        p("ca.pem"),
    ]);
    run_tool(&openssl, ca, None, CLIENT_TIMEOUT)
        .await
        .context("creating the test CA")?;

    let mut csr = os(&["req", "-new"]);
    csr.extend(key_args);
    csr.extend([
        "-subj".into(),
        "/CN=localhost".into(),
        "-config".into(),
        cnf.clone().into_os_string(),
        "-keyout".into(),
        p("server.key"),
        "-out".into(),
        p("server.csr"),
    ]);
    run_tool(&openssl, csr, None, CLIENT_TIMEOUT)
        .await
        .context("creating the server key and CSR")?;

    let mut sign = os(&["x509", "-req", "-days", "7", "-set_serial"]);
    sign.extend([
        format!("0x{:x}", serial()).into(),
        "-in".into(),
        p("server.csr"),
        "-CA".into(),
        p("ca.pem"),
        "-CAkey".into(),
        p("ca.key"),
        "-extfile".into(),
        cnf.into_os_string(),
        "-extensions".into(),
        "server_ext".into(),
        "-out".into(),
        p("server.pem"),
    ]);
    run_tool(&openssl, sign, None, CLIENT_TIMEOUT)
        .await
        .context("signing the server certificate")?;
    Ok(tls.join("ca.pem"))
}

/// A positive certificate serial number that differs between runs.
fn serial() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    u64::try_from(nanos & u128::from(u64::MAX >> 1)).unwrap_or(1) | 1
}
