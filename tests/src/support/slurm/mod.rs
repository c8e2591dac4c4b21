//! A throwaway single-node Slurm cluster for tests: Debian's slurm-wlm 22.05 (`slurmctld`,
//! `slurmd`) with its own `munged`, on loopback only, everything in a temp dir the fixture owns.
//!
//! [`Slurm::start`] writes the configuration and runs the three daemons in the foreground
//! (`munged -F`, `slurmctld -D`, `slurmd -D`), each under a [`Supervised`] lifeline: they die
//! with the test process, however that ends. It returns once `sinfo` reports the node `idle`.
//! The configuration follows `bench/slurm/setup.sh`:
//!
//! * one node named after this host (`hostname -s`) at `NodeAddr=127.0.0.1`, with
//!   [`SlurmOptions::cpus`] CPUs (more than the machine has is accepted:
//!   `SlurmdParameters=config_overrides`), 90 % of the machine's memory and the gres
//!   [`NODE_GRES`]: two `a100` and two `1g.10gb` "GPUs", device files `DIR/dev/nvidia0..3`
//!   (character devices 195,N where mknod is allowed, plain files otherwise; nothing opens them);
//! * two partitions on it, [`DEFAULT_PARTITION`] (`gpu`, `MaxTime=INFINITE`) and
//!   [`DEBUG_PARTITION`] (`debug`, `MaxTime=1:00:00`);
//! * two free ports of 127.0.0.1, `CommunicationParameters=NoInAddrAny,NoCtldInAddrAny` so that
//!   neither daemon listens on other addresses; `SlurmUser=root`; munge through
//!   `AuthInfo=socket=DIR/munge/munge.socket` with a fresh key;
//! * `proctrack/linuxproc`, `task/none`, `select/cons_tres` with `CR_CPU`, no accounting
//!   storage, `ReturnToService=2`, `MinJobAge=600` (finished jobs stay visible to `squeue -t all`
//!   for ten minutes) and `sched_interval=1`.
//!
//! # Several nodes
//!
//! With [`SlurmOptions::multi_node`], the cluster has the three compute nodes of
//! [`CLUSTER_NODES`] instead (`node1` with `gpu:a100:2`, `node2` with `gpu:a100:2` and the
//! MIG-style `gpu:1g.10gb:2`, `node3` with CPUs only), each its own `slurmd` with its own
//! hostname, spool (`DIR/spool/slurmd.NODE`), log (`DIR/log/slurmd.NODE.log`) and address, in a
//! network and UTS namespace of its own on a private bridge (see [`nodes`]). slurmctld listens
//! on the host's side of the bridge; names resolve through nss_wrapper's `DIR/hosts`;
//! `SlurmdTimeout=6`, so a node killed with [`Slurm::kill_node`] is marked down within half a
//! minute. Both partitions hold all three nodes.
//!
//! # Accounting
//!
//! With [`SlurmOptions::accounting`], the fixture also runs a private MariaDB (`mariadbd` on a
//! free port of 127.0.0.1, its data in `DIR/mysql`) and `slurmdbd` on another, registers the
//! cluster and an account [`ACCOUNT`], and configures slurmctld with
//! `AccountingStorageType=accounting_storage/slurmdbd`, `AccountingStorageTRES=gres/gpu` (and
//! the typed `gres/gpu:a100`, `gres/gpu:1g.10gb`), `AccountingStorageEnforce=limits` and
//! `MinJobAge=2`: a finished job leaves `squeue` after seconds and `sacct` answers for it.
//! [`Slurm::add_user`] then also adds the user's association (`sacctmgr add user`), without
//! which Slurm would refuse the user's jobs.
//!
//! # Users
//!
//! Test users need not exist in `/etc/passwd`: the daemons run with nss_wrapper
//! (`libnss-wrapper`) over `DIR/passwd` and `DIR/group`, copies of the system files to which
//! [`Slurm::add_user`] appends. slurmctld refuses jobs of uids it cannot resolve; with this it
//! resolves the fixture's users. A `TaskProlog` gives the jobs' tasks the same nss_wrapper
//! environment, so `id -un` in a job prints the user's name whatever the job's `--export`.
//!
//! # Clients
//!
//! `sbatch`, `squeue`, `scontrol`, `sinfo` and `scancel` need only `SLURM_CONF` ([`Slurm::env`]);
//! add [`Slurm::nss_env`] where they should print the fixture users' names rather than `nobody`.
//! [`Slurm::run`] runs one as root with both. A portal under test reaches them through
//! [`Slurm::bin_dir`] (its `[slurm] bin_dir`): wrappers that run Slurm's commands with the
//! users of nss_wrapper, as a site's head node resolves its users through its own NSS.
//! Without it, `squeue -u UID` of a fixture user is refused ("Invalid user").
//!
//! # Teardown
//!
//! Dropping the fixture kills the daemons, then every job still running (the sessions of the
//! `slurmstepd`s started from `DIR`), then removes `DIR`. [`Slurm::stop_controller`] and
//! [`Slurm::start_controller`] stop and restart slurmctld alone (a controller outage); its state
//! (`StateSaveLocation`) survives, and so do the jobs.
//!
//! Requires root (`SlurmUser=root`, device files, the test users' uids) and the packages
//! `slurm-wlm`, `munge` and `libnss-wrapper` (`tests/install-deps.sh`).
//!
//! # The fixture directory
//!
//! ```text
//! DIR/etc/{slurm.conf, gres.conf, task-prolog}   configuration
//! DIR/passwd, DIR/group                          the users nss_wrapper serves
//! DIR/munge/{munge.key, munge.socket, ...}       munged's key (0400) and socket (dir 0755)
//! DIR/log/{slurmctld,slurmd,munged}.log          the daemons' logs (see Slurm::log)
//! DIR/state, DIR/spool, DIR/run, DIR/dev         slurmctld's state, slurmd's spool, pid files, GPUs
//! ```

mod nodes;

pub use nodes::{NodeSpec, CLUSTER_NODES};

use super::{free_port, verbose};
use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::process::{find_binary, is_root, output_of, Supervised, SupervisedCommand};
use super::wait;

/// The partition jobs land in unless they name one (`MaxTime=INFINITE`).
pub const DEFAULT_PARTITION: &str = "gpu";
/// The second partition (`MaxTime=1:00:00`).
pub const DEBUG_PARTITION: &str = "debug";
/// The generic resources of the node, as `sinfo -o %G` prints them.
pub const NODE_GRES: &str = "gpu:a100:2,gpu:1g.10gb:2";

/// The client commands [`Slurm::bin_dir`] holds.
const CLIENT_COMMANDS: [&str; 9] = [
    "sbatch", "squeue", "scontrol", "scancel", "sinfo", "sacct", "sacctmgr", "srun", "salloc",
];

/// The cluster's name (`ClusterName`), as accounting records it.
pub const CLUSTER_NAME: &str = "atriumtest";
/// With accounting: the Slurm account every added user belongs to.
pub const ACCOUNT: &str = "research";
/// With accounting: slurmdbd's database user and its password (MariaDB on loopback only).
const DB_USER: &str = "slurm";
const DB_PASSWORD: &str = "atrium-test-slurmdbd";
/// How long the node may take to become idle, and slurmctld to answer after a restart.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// How long slurmctld may take to save its state and exit after SIGTERM (about 2 s).
const STOP_DEADLINE: Duration = Duration::from_secs(20);
/// How long one client command (sinfo, squeue, munge ...) may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// Attempts with fresh ports when another process takes one between probing and binding.
const PORT_ATTEMPTS: usize = 3;
/// Lines of each log shown when the cluster fails to start.
const LOG_TAIL_LINES: usize = 20;
/// Where nss_wrapper may live (Debian's multiarch directories first).
const NSS_WRAPPER_CANDIDATES: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libnss_wrapper.so",
    "/usr/lib/aarch64-linux-gnu/libnss_wrapper.so",
    "/usr/lib64/libnss_wrapper.so",
    "/usr/lib/libnss_wrapper.so",
];

/// Options for [`Slurm::start`].
#[derive(Debug, Clone)]
pub struct SlurmOptions {
    /// CPUs of the node (default 8); may exceed the machine's.
    pub cpus: u32,
    /// Run slurmdbd (with MariaDB) and account jobs (see the module docs).
    pub accounting: bool,
    /// Three compute nodes in namespaces of their own rather than one on loopback (see the
    /// module docs).
    pub multi_node: bool,
}

impl Default for SlurmOptions {
    fn default() -> Self {
        Self {
            cpus: 8,
            accounting: false,
            multi_node: false,
        }
    }
}

/// The three daemons, by the names [`Slurm::log`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Daemon {
    Munged,
    Mariadb,
    Slurmdbd,
    Slurmctld,
    Slurmd,
}

impl Daemon {
    const ALL: [Daemon; 5] = [
        Daemon::Slurmctld,
        Daemon::Slurmd,
        Daemon::Slurmdbd,
        Daemon::Mariadb,
        Daemon::Munged,
    ];

    fn name(self) -> &'static str {
        match self {
            Daemon::Munged => "munged",
            Daemon::Mariadb => "mariadb",
            Daemon::Slurmdbd => "slurmdbd",
            Daemon::Slurmctld => "slurmctld",
            Daemon::Slurmd => "slurmd",
        }
    }
}

/// The programs the fixture runs.
#[derive(Debug, Clone)]
struct Programs {
    munged: PathBuf,
    munge: PathBuf,
    slurmctld: PathBuf,
    slurmd: PathBuf,
    unshare: PathBuf,
    kill: PathBuf,
}

/// What accounting runs (see the module docs).
#[derive(Debug, Clone)]
struct Accounting {
    mariadbd: PathBuf,
    mariadb: PathBuf,
    install_db: PathBuf,
    slurmdbd: PathBuf,
    sacctmgr: PathBuf,
    /// MariaDB's and slurmdbd's ports, once chosen.
    ports: (u16, u16),
}

/// A running single-node Slurm cluster (see the module docs). Dropping it stops everything,
/// jobs included, and removes its directory.
pub struct Slurm {
    // Field order is drop order: the daemons, then the keeper, which kills what is left of the
    // jobs and removes the directory.
    /// One per node; in a multi-node cluster, the process holding the node's namespaces.
    slurmd: Vec<Supervised>,
    slurmctld: Option<Supervised>,
    slurmdbd: Option<Supervised>,
    mariadb: Option<Supervised>,
    munged: Option<Supervised>,
    _keeper: Supervised,
    accounting: Option<Accounting>,
    dir: PathBuf,
    conf: PathBuf,
    /// This host's short name: slurmctld's host, and the node of a single-node cluster.
    node: String,
    /// The bridge of a multi-node cluster.
    network: Option<nodes::Network>,
    nss_wrapper: PathBuf,
    programs: Programs,
}

impl Slurm {
    /// Builds and starts a fresh cluster (see the module docs). Returns once the node is idle.
    pub async fn start(opts: SlurmOptions) -> anyhow::Result<Slurm> {
        let started = Instant::now();
        anyhow::ensure!(
            is_root(),
            "the Slurm fixture must run as root (SlurmUser=root, device files, test users' uids)"
        );
        let programs = Programs {
            munged: find_binary("munged", &[])?,
            munge: find_binary("munge", &[])?,
            slurmctld: find_binary("slurmctld", &[])?,
            slurmd: find_binary("slurmd", &[])?,
            unshare: find_binary("unshare", &[])?,
            kill: find_binary("kill", &[])?,
        };
        let nss_wrapper = NSS_WRAPPER_CANDIDATES
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .context("libnss_wrapper.so not found; run tests/install-deps.sh (libnss-wrapper)")?;
        let node = short_hostname().await?;
        let accounting = match opts.accounting {
            false => None,
            true => Some(Accounting {
                mariadbd: find_binary("mariadbd", &[Path::new("/usr/sbin")])?,
                mariadb: find_binary("mariadb", &[])?,
                install_db: find_binary("mariadb-install-db", &[])?,
                slurmdbd: find_binary("slurmdbd", &[Path::new("/usr/sbin")])?,
                sacctmgr: find_binary("sacctmgr", &[])?,
                ports: (0, 0),
            }),
        };

        let (dir, keeper) = super::kept_dir("atrium-slurm-", spawn_keeper)?;
        // From here on the keeper removes `dir`, however this function or the process ends.

        let mut slurm = Slurm {
            slurmd: Vec::new(),
            slurmctld: None,
            slurmdbd: None,
            mariadb: None,
            munged: None,
            _keeper: keeper,
            accounting,
            conf: dir.join("etc/slurm.conf"),
            dir,
            node,
            network: None,
            nss_wrapper,
            programs,
        };
        if opts.multi_node {
            slurm.network = Some(nodes::Network::create(&slurm.dir).await?);
        }
        slurm.prepare_dir().await?;
        slurm.start_munged().await?;
        if slurm.accounting.is_some() {
            slurm.start_accounting().await?;
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let ports = (free_port()?, free_port()?);
            if ports.0 == ports.1 {
                continue;
            }
            slurm.write_slurm_conf(&opts, ports)?;
            let out_lens = slurm.out_lens();
            match slurm.start_slurm_daemons().await {
                Ok(()) => break,
                Err(e) if attempt < PORT_ATTEMPTS && slurm.port_was_taken(out_lens) => {
                    if verbose() {
                        eprintln!("Slurm could not bind its ports, retrying: {e:#}");
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if verbose() {
            eprintln!(
                "Slurm ({}, node {}) ready in {} ms",
                slurm.dir.display(),
                slurm.node,
                started.elapsed().as_millis()
            );
        }
        Ok(slurm)
    }

    /// The `slurm.conf`; clients find the cluster through `SLURM_CONF` set to it.
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// The fixture's directory (see the module docs). Removed on drop.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Name of the one node (this host's short name); the first node of a multi-node cluster.
    pub fn node_name(&self) -> &str {
        self.node_names()[0]
    }

    /// Names of the nodes, in `slurm.conf` order.
    pub fn node_names(&self) -> Vec<&str> {
        match self.network {
            None => vec![self.node.as_str()],
            Some(_) => CLUSTER_NODES.iter().map(|n| n.name).collect(),
        }
    }

    /// The address of node `name` (127.0.0.1 for the one node on loopback).
    pub fn node_addr(&self, name: &str) -> Option<std::net::Ipv4Addr> {
        match &self.network {
            None => (name == self.node).then_some(std::net::Ipv4Addr::LOCALHOST),
            Some(net) => CLUSTER_NODES
                .iter()
                .position(|n| n.name == name)
                .map(|i| net.node_addr(i)),
        }
    }

    /// The bridge of a multi-node cluster, removed with the fixture.
    pub fn bridge(&self) -> Option<&str> {
        self.network.as_ref().map(nodes::Network::bridge)
    }

    /// Kills node `name` of a multi-node cluster as a crash would: its slurmd, slurmstepds and
    /// jobs get SIGKILL at once; its address stays, refusing connections. slurmctld marks it
    /// down (`Not responding`) after `SlurmdTimeout`, and its jobs end with `NODE_FAIL` or are
    /// requeued. Returns how many processes were killed.
    pub fn kill_node(&self, name: &str) -> anyhow::Result<usize> {
        anyhow::ensure!(
            self.network.is_some(),
            "kill_node needs a multi-node cluster"
        );
        let index = CLUSTER_NODES
            .iter()
            .position(|n| n.name == name)
            .with_context(|| format!("no node {name:?}"))?;
        let holder = self
            .slurmd
            .get(index)
            .with_context(|| format!("node {name} is not running"))?;
        nodes::kill_namespace(&self.programs.kill, holder.pid())
    }

    /// A directory of Slurm's client commands (`squeue`, `sbatch` …) that resolve the users
    /// added with [`Slurm::add_user`] (see the module docs).
    pub fn bin_dir(&self) -> PathBuf {
        self.dir.join("bin")
    }

    /// The environment Slurm clients need: `SLURM_CONF`.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("SLURM_CONF".to_owned(), self.conf.display().to_string())]
    }

    /// `LD_PRELOAD` and `NSS_WRAPPER_*` for processes that should resolve the users added with
    /// [`Slurm::add_user`] (the daemons and jobs have them already).
    pub fn nss_env(&self) -> Vec<(String, String)> {
        let hosts = self.network.as_ref().map(|_| {
            (
                "NSS_WRAPPER_HOSTS".to_owned(),
                self.dir.join("hosts").display().to_string(),
            )
        });
        let mut env = vec![
            (
                "LD_PRELOAD".to_owned(),
                self.nss_wrapper.display().to_string(),
            ),
            (
                "NSS_WRAPPER_PASSWD".to_owned(),
                self.dir.join("passwd").display().to_string(),
            ),
            (
                "NSS_WRAPPER_GROUP".to_owned(),
                self.dir.join("group").display().to_string(),
            ),
        ];
        env.extend(hosts);
        env
    }

    /// Makes user `name` (uid, primary group `gid` named like the user, `home`, `/bin/bash`)
    /// known to the cluster. nss_wrapper rereads the files, so it works at once.
    pub fn add_user(&self, name: &str, uid: u32, gid: u32, home: &Path) -> anyhow::Result<()> {
        let home = home
            .to_str()
            .with_context(|| format!("home {} is not UTF-8", home.display()))?;
        let invalid = |s: &str| s.is_empty() || s.contains([':', '\n']);
        anyhow::ensure!(
            !invalid(name) && !invalid(home),
            "user name {name:?} and home {home:?} must be non-empty, without ':' or newlines"
        );
        let passwd = self.dir.join("passwd");
        let known = std::fs::read_to_string(&passwd)
            .with_context(|| format!("reading {}", passwd.display()))?;
        anyhow::ensure!(
            !known.lines().any(|l| l.split(':').next() == Some(name)),
            "user {name:?} exists already"
        );
        append_line(&passwd, &format!("{name}:x:{uid}:{gid}::{home}:/bin/bash"))?;
        append_line(&self.dir.join("group"), &format!("{name}:x:{gid}:"))?;
        if let Some(a) = &self.accounting {
            // Slurm enforces associations here: without one the user's jobs are refused.
            let out = std::process::Command::new(&a.sacctmgr)
                .args(["-i", "add", "user", name])
                .arg(format!("account={ACCOUNT}"))
                .arg(format!("cluster={CLUSTER_NAME}"))
                .envs(self.env())
                .stdin(Stdio::null())
                .output()
                .context("running sacctmgr add user")?;
            anyhow::ensure!(
                out.status.success(),
                "sacctmgr add user {name}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// Runs the Slurm client `program` (`squeue`, `scontrol` ...) as root with [`Slurm::env`] and
    /// [`Slurm::nss_env`]; returns its standard output, or fails with its standard error.
    pub async fn run(&self, program: &str, args: &[&str]) -> anyhow::Result<String> {
        let program = find_binary(program, &[])?;
        let env = self.env().into_iter().chain(self.nss_env());
        output_of(&program, args, env, None, CLIENT_TIMEOUT).await
    }

    /// The log of `which` daemon (`slurmctld`, `slurmd`, `munged`), for failure messages. Ends
    /// with the daemon's own output where that holds what the log file does not (errors from
    /// before it opened the file).
    pub fn log(&self, which: &str) -> String {
        let Some(daemon) = Daemon::ALL.into_iter().find(|d| d.name() == which) else {
            return format!("<no daemon called {which:?}: slurmctld, slurmd or munged>");
        };
        if daemon == Daemon::Slurmd && self.network.is_some() {
            return CLUSTER_NODES
                .iter()
                .map(|n| {
                    let log = self.dir.join(format!("log/slurmd.{}.log", n.name));
                    let out = self.dir.join(format!("log/slurmd.{}.out", n.name));
                    let read = |p: &Path| {
                        std::fs::read(p)
                            .map(|b| String::from_utf8_lossy(&b).into_owned())
                            .unwrap_or_default()
                    };
                    format!(
                        "--- {}:\n{}--- its output:\n{}",
                        n.name,
                        read(&log),
                        read(&out)
                    )
                })
                .collect();
        }
        let log = std::fs::read(self.log_path(daemon))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let out_path = self.out_path(daemon);
        if out_path == self.log_path(daemon) {
            return log;
        }
        let out = std::fs::read(&out_path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        // Output lines read "slurmctld: MESSAGE", log lines "[TIME] MESSAGE".
        let last_message = out
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.split_once(": ").map_or(l, |(_, message)| message));
        match last_message {
            Some(message) if !log.contains(message) => {
                format!(
                    "{log}--- output of {which} ({}):\n{out}",
                    out_path.display()
                )
            }
            _ => log,
        }
    }

    /// Stops slurmctld (SIGTERM: it saves its state) and waits until it has exited. slurmd, the
    /// jobs and the state stay. Idempotent.
    pub async fn stop_controller(&mut self) -> anyhow::Result<()> {
        let Some(mut slurmctld) = self.slurmctld.take() else {
            return Ok(());
        };
        let pid = slurmctld.pid().to_string();
        output_of(
            &self.programs.kill,
            &["-TERM", &pid],
            std::iter::empty::<(&str, &str)>(),
            None,
            CLIENT_TIMEOUT,
        )
        .await
        .context("sending SIGTERM to slurmctld")?;
        let exited = wait::until(
            "slurmctld to save its state and exit",
            STOP_DEADLINE,
            || {
                let slurmctld = &slurmctld;
                async move { (!slurmctld.is_running()).then_some(()) }
            },
        )
        .await;
        // Reaps it (or SIGKILLs it, had it ignored SIGTERM).
        slurmctld.stop().context("stopping slurmctld")?;
        exited.with_context(|| self.log("slurmctld"))
    }

    /// Starts slurmctld again (after [`Slurm::stop_controller`]) on the same port with the same
    /// state; returns once it answers (`scontrol ping`). It recovers the jobs at once; the node
    /// shows `unknown` until slurmd registers again, about 4 s later (slurmctld asks it then),
    /// and jobs submitted meanwhile pend until it has.
    pub async fn start_controller(&mut self) -> anyhow::Result<()> {
        anyhow::ensure!(self.slurmctld.is_none(), "slurmctld is already running");
        self.slurmctld = Some(self.spawn_daemon(Daemon::Slurmctld)?);
        let answered = self
            .wait_for("slurmctld to answer again", "scontrol", &["ping"], |_| true)
            .await;
        if answered.is_err() {
            self.slurmctld = None;
        }
        answered
    }

    /// Writes everything but `slurm.conf` (which holds the ports): directories, users, munge key,
    /// device files, gres.conf and the task prolog.
    async fn prepare_dir(&self) -> anyhow::Result<()> {
        let dir = &self.dir;
        for sub in [
            "etc", "munge", "log", "run", "state", "spool", "dev", "mysql",
        ] {
            // `run` exists already in a multi-node cluster (the bridge's teardown).
            std::fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("creating {}/{sub}", dir.display()))?;
        }
        // slurmd creates its spool directory itself, but complains first.
        for node in self.node_names() {
            std::fs::create_dir(dir.join(format!("spool/slurmd.{node}")))?;
        }
        // Users reach the munge socket, read the configuration and the user files and run the
        // task prolog: all of it is world-readable, only the munge key is not.
        for d in [
            dir.clone(),
            dir.join("munge"),
            dir.join("etc"),
            dir.join("dev"),
        ] {
            set_mode(&d, 0o755)?;
        }
        for file in ["passwd", "group"] {
            let mut text = std::fs::read_to_string(Path::new("/etc").join(file))
                .with_context(|| format!("reading /etc/{file}"))?;
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            std::fs::write(dir.join(file), text).with_context(|| format!("writing {file}"))?;
            set_mode(&dir.join(file), 0o644)?;
        }

        let key = dir.join("munge/munge.key");
        let mut bytes = [0u8; 128];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .context("reading /dev/urandom for the munge key")?;
        std::fs::write(&key, bytes).context("writing the munge key")?;
        set_mode(&key, 0o400)?;

        let mknod = find_binary("mknod", &[]).ok();
        for n in 0..4 {
            let device = dir.join(format!("dev/nvidia{n}"));
            let made = match &mknod {
                Some(mknod) => tokio::process::Command::new(mknod)
                    .arg(&device)
                    .args(["c", "195", &n.to_string()])
                    .stderr(Stdio::null())
                    .status()
                    .await
                    .is_ok_and(|s| s.success()),
                None => false,
            };
            if !made {
                std::fs::write(&device, "")
                    .with_context(|| format!("creating {}", device.display()))?;
            }
        }
        let d = dir.display();
        let gres = match &self.network {
            None => format!(
                "Name=gpu Type=a100 File={d}/dev/nvidia[0-1]\n\
                 Name=gpu Type=1g.10gb File={d}/dev/nvidia[2-3]\n"
            ),
            Some(_) => {
                // Each node numbers its own devices from 0.
                let mut lines = String::new();
                for node in &CLUSTER_NODES {
                    let mut first = 0;
                    for (kind, count) in node.gpus {
                        let last = first + count - 1;
                        lines.push_str(&format!(
                            "NodeName={} Name=gpu Type={kind} File={d}/dev/nvidia[{first}-{last}]\n",
                            node.name
                        ));
                        first += count;
                    }
                }
                lines
            }
        };
        std::fs::write(dir.join("etc/gres.conf"), gres).context("writing gres.conf")?;
        if let Some(net) = &self.network {
            let mut hosts = format!("{} {}\n", net.controller_addr(), self.node);
            for (i, node) in CLUSTER_NODES.iter().enumerate() {
                hosts.push_str(&format!("{} {}\n", net.node_addr(i), node.name));
            }
            std::fs::write(dir.join("hosts"), hosts).context("writing hosts")?;
            set_mode(&dir.join("hosts"), 0o644)?;
        }

        // The client commands a portal under test runs, with the fixture's users.
        std::fs::create_dir_all(self.bin_dir()).context("creating DIR/bin")?;
        set_mode(&self.bin_dir(), 0o755)?;
        let exports: String = self
            .nss_env()
            .iter()
            .map(|(k, v)| format!("export {k}='{v}'\n"))
            .collect();
        for command in CLIENT_COMMANDS {
            let Ok(program) = find_binary(command, &[]) else {
                continue;
            };
            let wrapper = self.bin_dir().join(command);
            std::fs::write(
                &wrapper,
                format!(
                    "#!/bin/sh\n# Slurm's {command} with the fixture's users (support/slurm).\n\
                     {exports}exec {} \"$@\"\n",
                    program.display()
                ),
            )
            .with_context(|| format!("writing {}", wrapper.display()))?;
            set_mode(&wrapper, 0o755)?;
        }

        // Lines "export NAME=VALUE" that a TaskProlog prints go into the task's environment.
        let prolog = dir.join("etc/task-prolog");
        let exports: String = self
            .nss_env()
            .iter()
            .map(|(k, v)| format!("echo 'export {k}={v}'\n"))
            .collect();
        std::fs::write(
            &prolog,
            format!(
                "#!/bin/sh\n# Jobs resolve the fixture's users too (support/slurm).\n{exports}"
            ),
        )
        .context("writing the task prolog")?;
        set_mode(&prolog, 0o755)
    }

    fn write_slurm_conf(&self, opts: &SlurmOptions, ports: (u16, u16)) -> anyhow::Result<()> {
        let (ctld_port, slurmd_port) = ports;
        let d = self.dir.display();
        let node = &self.node;
        let cpus = opts.cpus;
        let memory_mb = memory_mb()? * 9 / 10;
        let (ctld_addr, slurmd_files, nodes) = match &self.network {
            None => (
                self.controller_addr(),
                format!("SlurmdPidFile={d}/run/slurmd.pid\nSlurmdLogFile={d}/log/slurmd.log\n"),
                format!(
                    "NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} \
                     Gres={NODE_GRES} State=UNKNOWN\n"
                ),
            ),
            Some(net) => (
                self.controller_addr(),
                format!(
                    "SlurmdPidFile={d}/run/slurmd.%n.pid\nSlurmdLogFile={d}/log/slurmd.%n.log\n\
                     # A node that stops answering is down within half a minute.\n\
                     SlurmdTimeout=6\n"
                ),
                CLUSTER_NODES
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        let gres = match n.gres() {
                            g if g.is_empty() => String::new(),
                            g => format!(" Gres={g}"),
                        };
                        format!(
                            "NodeName={} NodeAddr={} CPUs={cpus} RealMemory={memory_mb}{gres} \
                             State=UNKNOWN\n",
                            n.name,
                            net.node_addr(i)
                        )
                    })
                    .collect::<String>(),
            ),
        };
        let accounting = match &self.accounting {
            None => "\
# AccountingStorageTRES=gres/gpu needs slurmdbd: slurmctld 22.05 refuses to start without it.
AccountingStorageType=accounting_storage/none
MinJobAge=600
JobAcctGatherType=jobacct_gather/none
"
            .to_string(),
            Some(a) => format!(
                "\
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost={}
AccountingStoragePort={}
AccountingStoragePass={}/munge/munge.socket
AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:1g.10gb
AccountingStorageEnforce=limits
MinJobAge=2
# Steps' CPU time and memory, sampled every second, for sacct's MaxRSS and TRESUsageIn*.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
",
                self.controller_addr(),
                a.ports.1,
                self.dir.display()
            ),
        };
        let conf = format!(
            "\
# Throwaway Slurm written by tests/src/support/slurm/mod.rs.
ClusterName={CLUSTER_NAME}
SlurmctldHost={node}({ctld_addr})
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge/munge.socket
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/slurmd.%n
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmctldLogFile={d}/log/slurmctld.log
{slurmd_files}SlurmctldDebug=info
SlurmdDebug=info
# Debian has no mail program; the default one makes slurmctld log an error.
MailProg=/bin/true
TaskProlog={d}/etc/task-prolog
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu
{accounting}JobCompType=jobcomp/none
ReturnToService=2
SlurmdParameters=config_overrides
{nodes}PartitionName={DEFAULT_PARTITION} Default=YES Nodes=ALL MaxTime=INFINITE State=UP
PartitionName={DEBUG_PARTITION} Nodes=ALL MaxTime=1:00:00 State=UP
"
        );
        std::fs::write(&self.conf, conf).context("writing slurm.conf")?;
        set_mode(&self.conf, 0o644)
    }

    async fn start_munged(&mut self) -> anyhow::Result<()> {
        self.munged = Some(self.spawn_daemon(Daemon::Munged)?);
        let socket = self.munge_socket();
        let (munge, munged) = (&self.programs.munge, &self.munged);
        let ready = wait::until("munged to issue credentials", START_DEADLINE, || {
            let socket = socket.as_os_str();
            async move {
                if !munged.as_ref().is_some_and(Supervised::is_running) {
                    return Some(Err(anyhow::anyhow!("munged exited during startup")));
                }
                let args: [&std::ffi::OsStr; 3] =
                    ["--no-input".as_ref(), "--socket".as_ref(), socket];
                let made = tokio::process::Command::new(munge)
                    .args(args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true)
                    .status()
                    .await;
                made.is_ok_and(|s| s.success()).then_some(Ok(()))
            }
        })
        .await
        .and_then(|r| r);
        ready.with_context(|| format!("starting munged; log:\n{}", self.log_tails()))
    }

    /// MariaDB with slurmdbd's database user, then slurmdbd, the cluster and [`ACCOUNT`].
    async fn start_accounting(&mut self) -> anyhow::Result<()> {
        let Some(a) = self.accounting.as_mut() else {
            return Ok(());
        };
        a.ports = (free_port()?, free_port()?);
        anyhow::ensure!(a.ports.0 != a.ports.1, "the same free port twice");
        let a = a.clone();
        let d = self.dir.display().to_string();
        let data = format!("{d}/mysql/data");
        output_of(
            &a.install_db,
            &[
                "--no-defaults",
                &format!("--datadir={data}"),
                "--user=root",
                "--skip-test-db",
                "--auth-root-authentication-method=socket",
            ],
            std::iter::empty::<(&str, &str)>(),
            None,
            START_DEADLINE,
        )
        .await
        .context("mariadb-install-db")?;
        self.mariadb = Some(self.spawn_daemon(Daemon::Mariadb)?);
        let socket = format!("--socket={d}/mysql/mysql.sock");
        let sql = format!(
            "CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASSWORD}'; \
             GRANT ALL ON slurm_acct_db.* TO '{DB_USER}'@'127.0.0.1';"
        );
        let this = &*self;
        wait::until("MariaDB to take slurmdbd's user", START_DEADLINE, || {
            let (mariadb, socket, sql) = (&a.mariadb, &socket, &sql);
            async move {
                if let Some(dead) = this.exited_daemon() {
                    return Some(Err(anyhow::anyhow!("{dead} exited")));
                }
                let args = [
                    "--no-defaults",
                    socket.as_str(),
                    "-uroot",
                    "-e",
                    sql.as_str(),
                ];
                output_of(mariadb, &args, this.env(), None, CLIENT_TIMEOUT)
                    .await
                    .ok()
                    .map(|_| Ok(()))
            }
        })
        .await
        .and_then(|r| r)
        .with_context(|| format!("starting MariaDB:\n{}", self.log_tails()))?;

        let conf = self.dir.join("etc/slurmdbd.conf");
        std::fs::write(
            &conf,
            format!(
                "# slurmdbd of the throwaway Slurm (tests/src/support/slurm).\n\
                 AuthType=auth/munge\nAuthInfo=socket={d}/munge/munge.socket\n\
                 DbdHost=localhost\nDbdAddr={}\nDbdPort={}\nSlurmUser=root\n\
                 LogFile={d}/log/slurmdbd.log\nPidFile={d}/run/slurmdbd.pid\n\
                 StorageType=accounting_storage/mysql\nStorageHost=127.0.0.1\nStoragePort={}\n\
                 StorageUser={DB_USER}\nStoragePass={DB_PASSWORD}\nStorageLoc=slurm_acct_db\n",
                self.controller_addr(),
                a.ports.1,
                a.ports.0
            ),
        )
        .context("writing slurmdbd.conf")?;
        // slurmdbd refuses a configuration others may read (it holds the password).
        set_mode(&conf, 0o600)?;
        // slurmdbd reads slurmdbd.conf beside slurm.conf; sacctmgr needs slurm.conf to name
        // slurmdbd's port before slurmctld runs.
        self.write_slurm_conf(&SlurmOptions::default(), (free_port()?, free_port()?))?;
        self.slurmdbd = Some(self.spawn_daemon(Daemon::Slurmdbd)?);
        self.wait_for(
            "slurmdbd to answer",
            "sacctmgr",
            &["-i", "-n", "show", "cluster"],
            |_| true,
        )
        .await?;
        for args in [
            vec!["-i", "add", "cluster", CLUSTER_NAME],
            vec![
                "-i",
                "add",
                "account",
                ACCOUNT,
                &format!("cluster={CLUSTER_NAME}"),
            ],
        ] {
            output_of(&a.sacctmgr, &args, self.env(), None, CLIENT_TIMEOUT)
                .await
                .with_context(|| format!("sacctmgr {}:\n{}", args.join(" "), self.log_tails()))?;
        }
        Ok(())
    }

    /// Spawns slurmctld and the nodes' slurmd and waits until every node is idle; on failure,
    /// stops them all.
    async fn start_slurm_daemons(&mut self) -> anyhow::Result<()> {
        self.slurmctld = Some(self.spawn_daemon(Daemon::Slurmctld)?);
        let spawned = match self.network.clone() {
            None => self.spawn_daemon(Daemon::Slurmd).map(|d| vec![d]),
            Some(net) => self.spawn_nodes(&net).await,
        };
        let idle = match spawned {
            Ok(daemons) => {
                self.slurmd = daemons;
                self.wait_for(
                    "every node to be idle",
                    "sinfo",
                    &["-h", "-N", "-o", "%T", "-p", DEFAULT_PARTITION],
                    |states| {
                        let states: Vec<&str> = states.split_whitespace().collect();
                        !states.is_empty() && states.iter().all(|s| *s == "idle")
                    },
                )
                .await
            }
            Err(e) => Err(e),
        };
        if idle.is_err() {
            self.slurmd.clear();
            self.slurmctld = None;
        }
        idle
    }

    /// The nodes of a multi-node cluster, each in its namespaces with its address (see
    /// [`nodes`]).
    async fn spawn_nodes(&self, net: &nodes::Network) -> anyhow::Result<Vec<Supervised>> {
        let mut started = Vec::new();
        for (i, node) in CLUSTER_NODES.iter().enumerate() {
            let ready = self.dir.join(format!("run/{}.network", node.name));
            let mut spec = SupervisedCommand::new(
                format!("slurmd of {}", node.name),
                &self.programs.unshare,
                self.dir.join(format!("log/slurmd.{}.out", node.name)),
            )
            .args(["--net", "--uts", "--", "/bin/sh", "-c", nodes::NODE_SCRIPT])
            .args(["atrium-slurm-node", node.name])
            .args([
                ready.as_os_str(),
                self.programs.slurmd.as_os_str(),
                self.conf.as_os_str(),
            ]);
            self.daemon_env(&mut spec);
            let daemon = Supervised::spawn(spec)?;
            net.attach(daemon.pid(), i)
                .await
                .with_context(|| format!("giving {} its network", node.name))?;
            std::fs::write(&ready, "").context("marking the node's network ready")?;
            started.push(daemon);
        }
        Ok(started)
    }

    fn spawn_daemon(&self, daemon: Daemon) -> anyhow::Result<Supervised> {
        let (program, args): (&Path, Vec<OsString>) = match daemon {
            Daemon::Munged => (
                &self.programs.munged,
                vec![
                    "--foreground".into(),
                    // Accepts the socket directory being world-readable.
                    "--force".into(),
                    format!("--socket={}", self.munge_socket().display()).into(),
                    format!("--key-file={}", self.dir.join("munge/munge.key").display()).into(),
                    format!("--pid-file={}", self.dir.join("run/munged.pid").display()).into(),
                    format!(
                        "--seed-file={}",
                        self.dir.join("munge/munged.seed").display()
                    )
                    .into(),
                    "--num-threads=4".into(),
                ],
            ),
            Daemon::Mariadb => {
                let d = self.dir.display();
                let port = self.accounting.as_ref().map_or(0, |a| a.ports.0);
                (
                    self.accounting
                        .as_ref()
                        .map(|a| a.mariadbd.as_path())
                        .context("no accounting")?,
                    vec![
                        "--no-defaults".into(),
                        format!("--datadir={d}/mysql/data").into(),
                        "--user=root".into(),
                        "--bind-address=127.0.0.1".into(),
                        format!("--port={port}").into(),
                        format!("--socket={d}/mysql/mysql.sock").into(),
                        format!("--pid-file={d}/run/mariadb.pid").into(),
                        "--skip-name-resolve".into(),
                        "--innodb-buffer-pool-size=32M".into(),
                    ],
                )
            }
            // `-v`: tests/install-deps.sh tells this slurmdbd from the system's by it.
            Daemon::Slurmdbd => (
                self.accounting
                    .as_ref()
                    .map(|a| a.slurmdbd.as_path())
                    .context("no accounting")?,
                vec!["-D".into(), "-v".into()],
            ),
            Daemon::Slurmctld => (
                &self.programs.slurmctld,
                vec![
                    "-D".into(),
                    "-i".into(),
                    "-f".into(),
                    self.conf.clone().into(),
                ],
            ),
            Daemon::Slurmd => (
                &self.programs.slurmd,
                vec![
                    "-D".into(),
                    "-f".into(),
                    self.conf.clone().into(),
                    "-N".into(),
                    self.node.clone().into(),
                ],
            ),
        };
        let mut spec =
            SupervisedCommand::new(daemon.name(), program, self.out_path(daemon)).args(args);
        self.daemon_env(&mut spec);
        Supervised::spawn(spec)
    }

    /// A daemon's environment (the users and hosts of nss_wrapper, Slurm's own) and
    /// working directory: slurmstepd inherits slurmd's, and the keeper finds the job
    /// steps by it.
    fn daemon_env(&self, spec: &mut SupervisedCommand) {
        spec.envs = self
            .nss_env()
            .into_iter()
            .chain(self.env())
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        spec.current_dir = Some(self.dir.join("spool"));
    }

    /// Runs the client `program` with `args` until it succeeds with an output that is `ready`;
    /// fails early when a daemon exits, and with the logs' tails.
    async fn wait_for(
        &self,
        what: &str,
        program: &str,
        args: &[&str],
        ready: fn(&str) -> bool,
    ) -> anyhow::Result<()> {
        let program = find_binary(program, &[])?;
        let this = self;
        let answered = wait::until(what, START_DEADLINE, || {
            let program = &program;
            async move {
                if let Some(dead) = this.exited_daemon() {
                    return Some(Err(anyhow::anyhow!("{dead} exited")));
                }
                let out = output_of(program, args, this.env(), None, CLIENT_TIMEOUT).await;
                if let (Err(e), true) = (&out, verbose()) {
                    eprintln!("{what}: {e:#}");
                }
                ready(&out.ok()?).then_some(Ok(()))
            }
        })
        .await
        .and_then(|r| r);
        answered.with_context(|| format!("Slurm in {}:\n{}", self.dir.display(), self.log_tails()))
    }

    /// The first daemon that should run and does not.
    fn exited_daemon(&self) -> Option<&'static str> {
        [
            (Daemon::Munged, &self.munged),
            (Daemon::Mariadb, &self.mariadb),
            (Daemon::Slurmdbd, &self.slurmdbd),
            (Daemon::Slurmctld, &self.slurmctld),
        ]
        .into_iter()
        .find(|(_, d)| d.as_ref().is_some_and(|d| !d.is_running()))
        .map(|(daemon, _)| daemon.name())
        .or_else(|| {
            self.slurmd
                .iter()
                .any(|d| !d.is_running())
                .then_some(Daemon::Slurmd.name())
        })
    }

    /// Whether slurmctld's or slurmd's output since `lens` says its port was taken.
    fn port_was_taken(&self, lens: [u64; 2]) -> bool {
        [Daemon::Slurmctld, Daemon::Slurmd]
            .into_iter()
            .zip(lens)
            .any(|(daemon, start)| {
                std::fs::read(self.out_path(daemon))
                    .ok()
                    .and_then(|out| {
                        let run = out.get(usize::try_from(start).ok()?..)?;
                        Some(String::from_utf8_lossy(run).contains("Address already in use"))
                    })
                    .unwrap_or(false)
            })
    }

    /// Current lengths of slurmctld's and slurmd's output, for [`Slurm::port_was_taken`].
    fn out_lens(&self) -> [u64; 2] {
        [Daemon::Slurmctld, Daemon::Slurmd].map(|daemon| {
            std::fs::metadata(self.out_path(daemon))
                .map(|m| m.len())
                .unwrap_or(0)
        })
    }

    fn log_tails(&self) -> String {
        Daemon::ALL
            .into_iter()
            .map(|daemon| {
                let log = self.log(daemon.name());
                let lines: Vec<&str> = log.lines().collect();
                format!(
                    "--- {} (last {LOG_TAIL_LINES} lines)\n{}\n",
                    daemon.name(),
                    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
                )
            })
            .collect()
    }

    /// The daemon's log file (munged, in the foreground, logs to its output only).
    fn log_path(&self, daemon: Daemon) -> PathBuf {
        self.dir.join(format!("log/{}.log", daemon.name()))
    }

    /// Where the daemon's standard output and error go. slurmctld and slurmd copy their log
    /// there in the foreground, plus what happens before they open their log file.
    fn out_path(&self, daemon: Daemon) -> PathBuf {
        match daemon {
            Daemon::Munged | Daemon::Mariadb => self.log_path(daemon),
            _ => self.dir.join(format!("log/{}.out", daemon.name())),
        }
    }

    /// Where slurmctld and slurmdbd listen: 127.0.0.1, or the bridge of a multi-node cluster.
    /// slurmdbd sends updates (new associations) to slurmctld at the address slurmctld
    /// connected from, so the two share it.
    fn controller_addr(&self) -> String {
        self.network.as_ref().map_or_else(
            || "127.0.0.1".to_string(),
            |net| net.controller_addr().to_string(),
        )
    }

    fn munge_socket(&self) -> PathBuf {
        self.dir.join("munge/munge.socket")
    }
}

/// The keeper: waits until its lifeline closes (SIGTERM), then SIGKILLs the sessions of the
/// `slurmstepd`s working in DIR ($1): each job step runs in its own session, away from slurmd's
/// process group; and removes a multi-node cluster's bridge. Its supervisor then removes DIR.
const KEEPER_SCRIPT: &str = r#"
dir=$1
kill_jobs() {
    for pid in $(pgrep -x slurmstepd); do
        case $(readlink "/proc/$pid/cwd" 2>/dev/null) in
            "$dir" | "$dir"/*) ;;
            *) continue ;;
        esac
        sid=$(cut -d' ' -f6 "/proc/$pid/stat" 2>/dev/null) || continue
        [ "${sid:-0}" -gt 1 ] || continue
        pkill -KILL -s "$sid"
        n=0
        while pgrep -s "$sid" >/dev/null && [ "$n" -lt 200 ]; do
            sleep 0.01
            n=$((n + 1))
        done
    done
}
# A multi-node cluster's bridge (slurm/nodes.rs).
teardown() {
    [ -f "$dir/run/teardown" ] && sh "$dir/run/teardown" 2>/dev/null
}
trap 'kill_jobs; teardown; exit 0' TERM
sleep infinity &
wait
"#;

/// Starts the process that owns `dir` (see [`KEEPER_SCRIPT`]).
fn spawn_keeper(dir: &Path) -> anyhow::Result<Supervised> {
    let mut spec =
        SupervisedCommand::new("Slurm keeper", "/bin/sh", dir.join("keeper.log")).args([
            "-c".as_ref(),
            KEEPER_SCRIPT.as_ref(),
            "atrium-slurm-keeper".as_ref(),
            dir.as_os_str(),
        ]);
    spec.stop_signal = "TERM";
    spec.remove_on_exit = Some(dir.to_path_buf());
    Supervised::spawn(spec)
}

/// This host's short name (`hostname -s`): slurmctld runs only where `SlurmctldHost` names.
async fn short_hostname() -> anyhow::Result<String> {
    let hostname = find_binary("hostname", &[])?;
    let name = output_of(
        &hostname,
        &["-s"],
        std::iter::empty::<(&str, &str)>(),
        None,
        CLIENT_TIMEOUT,
    )
    .await?
    .trim()
    .to_owned();
    anyhow::ensure!(!name.is_empty(), "hostname -s printed nothing");
    Ok(name)
}

/// The machine's memory in MiB (`MemTotal` of /proc/meminfo).
fn memory_mb() -> anyhow::Result<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    let kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .context("no MemTotal in /proc/meminfo")?;
    Ok(kib / 1024)
}

fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {mode:o} {}", path.display()))
}

/// Appends `line` and a newline to `path` in one write, so a reader never sees half of it.
/// The file's modification time moves on by at least a second: nss_wrapper rereads a file
/// only when that time differs from when it last read it, in whole seconds, so a daemon that
/// read the file in the same second would otherwise miss the line.
fn append_line(path: &Path, line: &str) -> anyhow::Result<()> {
    let appended = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
        let before = file.metadata()?.modified()?;
        file.write_all(format!("{line}\n").as_bytes())?;
        let next = before + Duration::from_secs(1);
        file.set_modified(std::time::SystemTime::now().max(next))
    };
    appended().with_context(|| format!("appending to {}", path.display()))
}
