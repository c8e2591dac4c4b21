//! The command line: `serve`, `migrate`, `config check`, `doctor`, and local account management
//! (`user add|list|passwd|disable`), which works on the database directly, as an
//! administrator on the head node would. The Slurm-style client commands (`sbatch`,
//! `squeue`, `sinfo`, `scancel`, `sacct`) live in the `atrium-client` crate; this
//! module parses their arguments and calls them.

use std::io::{BufRead, IsTerminal};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};

use crate::config::{Config, Loaded};
use crate::services::account_changes::{AccountChanges, Actor};
use crate::services::{Audit, ServiceError};
use crate::startup::{open_store, Application};
use crate::store::{NewUser, Store};

#[derive(Debug, Parser)]
#[command(
    name = "atrium",
    version,
    about = "A portal for data scientists on GPU clusters"
)]
pub struct Cli {
    /// Configuration file (default: ./atrium.toml when it exists).
    #[arg(long, global = true, env = "ATRIUM_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Whether the command is a short-lived client or a job step, which one thread
    /// serves best: no worker threads to start, wake and stop (a thousand-job `squeue`
    /// spends more time in thread hand-offs than in parsing). The portal itself gets a
    /// worker per core.
    pub fn single_threaded(&self) -> bool {
        !self.is_administration()
    }

    /// The portal and the commands an administrator runs on its database.
    fn is_administration(&self) -> bool {
        matches!(
            self.command,
            Command::Serve
                | Command::Migrate
                | Command::Backup { .. }
                | Command::Restore { .. }
                | Command::Config(_)
                | Command::Doctor { .. }
                | Command::User(_)
        )
    }
}

impl Cli {
    /// Whether this is the portal's side (running as root on the head node), whose
    /// files no one else may read: the portal, its administration commands and job
    /// steps; not the Slurm-style client a user runs, nor a user's home sync.
    pub fn is_portal_side(&self) -> bool {
        self.is_administration() || matches!(self.command, Command::Slurm(_) | Command::Step(_))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the portal.
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Copy the database (SQLite, while the portal serves) to FILE, and the portal's
    /// key (`jwt.key`) to FILE.key. PostgreSQL: use `pg_dump`.
    Backup { file: PathBuf },
    /// Put a backup (FILE and FILE.key) in place as this configuration's database and
    /// key; the portal must be stopped and the data directory hold no database yet.
    Restore { file: PathBuf },
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Check this machine and the configuration: container runtime, cgroups, GPUs,
    /// LDAP, Slurm, the data directory, TLS, migrations, disk space. Each problem is
    /// printed with its fix; exit status 1 when there is one (warnings alone: 0).
    Doctor {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Manage local accounts.
    #[command(subcommand)]
    User(UserCommand),
    /// Submit a batch script to the portal (like Slurm's sbatch; `--help` lists
    /// its options).
    #[command(disable_help_flag = true)]
    Sbatch(Box<atrium_client::sbatch::SbatchArgs>),
    /// List jobs not yet over (like Slurm's squeue; `--help` lists its options).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Squeue(atrium_client::RawArgs),
    /// List partitions and node states (like Slurm's sinfo; `--help` lists its options).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Sinfo(atrium_client::RawArgs),
    /// Cancel or signal jobs (like Slurm's scancel; `--help` lists its options).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Scancel(atrium_client::RawArgs),
    /// Show accounting records of jobs (like Slurm's sacct; `--help` lists its options).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Sacct(atrium_client::RawArgs),
    /// What a job used of what it was given (like Slurm's seff, with its GPUs).
    Seff(atrium_client::seff::SeffArgs),
    /// The factors of the pending jobs' priorities (like Slurm's sprio; `--help`
    /// lists its options).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Sprio(atrium_client::RawArgs),
    /// The fair-share tree: shares, usage and factors (like Slurm's sshare; `--help`
    /// lists its options).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Sshare(atrium_client::RawArgs),
    /// What running job steps use (like Slurm's sstat; `--help` lists its options).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Sstat(atrium_client::RawArgs),
    /// Benchmark campaigns: templates, submit a matrix, list, show, export a report.
    Campaign(atrium_client::campaign::CampaignArgs),
    /// Run tasks of a job step inside a job; outside one, run a command in a new
    /// allocation, `--pty` on a terminal of its own (like Slurm's srun).
    #[command(disable_help_flag = true)]
    Srun(atrium_client::srun::SrunArgs),
    /// Run a command (your shell by default) in a new allocation, on a terminal of its
    /// own (like Slurm's salloc; `--help` lists its options).
    #[command(disable_help_flag = true, disable_version_flag = true)]
    Salloc(atrium_client::salloc::SallocArgs),
    /// `show hostnames`, `requeue|hold|release ID` (like Slurm's scontrol).
    #[command(disable_help_flag = true)]
    Scontrol(atrium_client::RawArgs),
    /// Work with the site's Slurm (`[scheduler] backend = "slurm"`).
    #[command(subcommand)]
    Slurm(SlurmCommand),
    /// Run a job step (started by the portal).
    #[command(subcommand, hide = true)]
    Step(StepCommand),
    /// Work on a user's home, as that user (started by the portal).
    #[command(subcommand, hide = true)]
    Home(HomeCommand),
    /// List, change or open a user's files, as that user (started by the portal
    /// through `step as-user`; the request on standard input).
    #[command(hide = true)]
    Files,
}

#[derive(Debug, Subcommand)]
pub enum SlurmCommand {
    /// Make Slurm enforce atrium's quotas: set the association limits they map to
    /// with `sacctmgr` (the mapping is in docs/slurm.md).
    ApplyQuotas {
        /// Print the commands without running them.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum HomeCommand {
    /// Bring DIR (the user's ~/templates) up to date with the starters.
    Sync { dir: PathBuf },
}

#[derive(Debug, Subcommand)]
pub enum StepCommand {
    /// Supervise the step in DIR until it ends.
    Run { dir: PathBuf },
    /// Become the job's user and start its script (run by the supervisor).
    Exec { dir: PathBuf },
    /// Become a user and run a program for the portal (the request on standard input).
    AsUser,
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Report every problem in the configuration, with its key.
    Check,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a local account. The password is read from the terminal, or from the
    /// first line of standard input when it is not a terminal.
    Add(AddUser),
    /// List accounts.
    List,
    /// Set a local account's password (ends its browser sessions).
    Passwd { username: String },
    /// Disable an account (or enable it again with --enable).
    Disable {
        username: String,
        #[arg(long)]
        enable: bool,
    },
}

#[derive(Debug, Args)]
pub struct AddUser {
    pub username: String,
    /// Make the account an administrator (member of the first admin group).
    #[arg(long)]
    pub admin: bool,
    #[arg(long, default_value = "")]
    pub display_name: String,
    #[arg(long, default_value = "")]
    pub email: String,
    /// Extra groups (repeatable).
    #[arg(long = "group")]
    pub groups: Vec<String>,
    /// POSIX uid the account's processes run as (default: the lowest free uid of
    /// accounts.uid_min..=uid_max).
    #[arg(long)]
    pub uid: Option<i64>,
    /// POSIX primary gid (default: the same number as the uid).
    #[arg(long)]
    pub gid: Option<i64>,
    /// Home directory on shared storage (default: <accounts.home_root>/<username>).
    #[arg(long)]
    pub home: Option<String>,
}

fn load_config(path: Option<&std::path::Path>) -> anyhow::Result<Loaded> {
    Ok(Config::load(path, std::env::vars())?)
}

fn usable_config(path: Option<&std::path::Path>) -> anyhow::Result<Config> {
    let loaded = load_config(path)?;
    if !loaded.problems.is_empty() {
        for problem in &loaded.problems {
            eprintln!("config: {problem}");
        }
        bail!(
            "the configuration has {} problem(s); see `atrium config check`",
            loaded.problems.len()
        );
    }
    Ok(loaded.config)
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let path = cli.config.as_deref();
    match cli.command {
        Command::Serve => {
            let config = usable_config(path)?;
            crate::telemetry::init(&config.log);
            for missing in crate::doctor::missing_mounts(&config) {
                tracing::warn!(%missing, "a folder every job binds is missing: jobs fail to start until it is there");
            }
            let host = config
                .listen
                .rsplit_once(':')
                .map_or("127.0.0.1", |(host, _)| host)
                .to_string();
            let app = Application::build(config).await?;
            println!(
                "atrium: listening on {}://{host}:{}",
                app.scheme(),
                app.port()
            );
            app.run_until_stopped().await
        }
        Command::Migrate => {
            let config = usable_config(path)?;
            let store = open_store(&config).await?;
            store.close().await;
            println!("migrations applied to {}", config.database_url());
            Ok(())
        }
        Command::Backup { file } => {
            let config = usable_config(path)?;
            backup(&config, &file).await
        }
        Command::Restore { file } => {
            let config = usable_config(path)?;
            restore(&config, &file)
        }
        Command::Config(ConfigCommand::Check) => config_check(path),
        Command::Doctor { json } => doctor(path, json).await,
        Command::User(command) => {
            let config = usable_config(path)?;
            let store = open_store(&config).await?;
            let result = user_command(&store, &config, command).await;
            store.close().await;
            result
        }
        Command::Slurm(SlurmCommand::ApplyQuotas { dry_run }) => {
            let config = usable_config(path)?;
            let store = open_store(&config).await?;
            let result = apply_quotas(&store, &config, dry_run).await;
            store.close().await;
            result
        }
        Command::Sbatch(args) => atrium_client::sbatch::run(*args).await,
        Command::Squeue(args) => atrium_client::squeue::run(args.args).await,
        Command::Sinfo(args) => atrium_client::sinfo::run(args.args).await,
        Command::Scancel(args) => atrium_client::scancel::run(args.args).await,
        Command::Sacct(args) => atrium_client::sacct::run(args.args).await,
        Command::Seff(args) => atrium_client::seff::run(args).await,
        Command::Sprio(args) => atrium_client::sprio::run(args.args).await,
        Command::Sshare(args) => atrium_client::sshare::run(args.args).await,
        Command::Sstat(args) => atrium_client::sstat::run(args.args).await,
        Command::Campaign(args) => atrium_client::campaign::run(args).await,
        Command::Srun(args) => atrium_client::srun::run(args).await,
        Command::Salloc(args) => atrium_client::salloc::run(args).await,
        Command::Scontrol(args) => atrium_client::scontrol::run(args.args).await,
        Command::Step(StepCommand::Run { dir }) => crate::launch::run(&dir).await,
        Command::Step(StepCommand::Exec { dir }) => crate::launch::exec(&dir),
        Command::Step(StepCommand::AsUser) => crate::privilege::as_user_main(),
        Command::Home(HomeCommand::Sync { dir }) => crate::homes::sync_command(&dir),
        Command::Files => crate::user_files::main(),
    }
}

/// `atrium slurm apply-quotas`: print each `sacctmgr` command, and run it unless
/// `dry_run`; stop at the first that fails.
async fn apply_quotas(store: &Store, config: &Config, dry_run: bool) -> anyhow::Result<()> {
    use crate::sched::slurm::{cli::SlurmCli, quotas::commands};
    use crate::services::quotas::{quota_from_record, Quota};
    let quotas: Vec<Quota> = store
        .quotas()
        .await?
        .iter()
        .filter_map(quota_from_record)
        .collect();
    let users: Vec<String> = store
        .list_users()
        .await?
        .into_iter()
        .filter(|u| u.uid_number.is_some() && !u.disabled)
        .map(|u| u.username)
        .collect();
    let (cmds, notes) = commands(&quotas, &users);
    let cli = SlurmCli::from_config(&config.slurm, false);
    for cmd in &cmds {
        println!("sacctmgr {}", cmd.args.join(" "));
        if !dry_run {
            cli.admin("sacctmgr", &cmd.args)
                .await
                .map_err(|e| anyhow::anyhow!("sacctmgr failed: {e}"))?;
        }
    }
    for note in &notes {
        println!("# {note}");
    }
    if cmds.is_empty() {
        println!("# no quotas to apply");
    }
    Ok(())
}

fn config_check(path: Option<&std::path::Path>) -> anyhow::Result<()> {
    let loaded = load_config(path)?;
    let source = loaded
        .source
        .as_ref()
        .map_or("defaults and environment".to_string(), |p| {
            p.display().to_string()
        });
    // A folder every job binds that is not there fails every job at its start.
    let missing = crate::doctor::missing_mounts(&loaded.config);
    if loaded.problems.is_empty() && missing.is_empty() {
        println!("configuration OK ({source})");
        println!("  listen:   {}", loaded.config.listen);
        println!("  data_dir: {}", loaded.config.data_dir.display());
        println!("  database: {}", loaded.config.database_url());
        return Ok(());
    }
    for problem in &loaded.problems {
        println!("{problem}");
    }
    for m in &missing {
        println!("{m}: every job and session that binds it fails to start");
    }
    bail!(
        "{} problem(s) in {source}",
        loaded.problems.len() + missing.len()
    )
}

/// `atrium doctor`: the configuration's own problems first (as `config check`), then
/// every check of [`crate::doctor`]; an error (exit status 1) when any is a problem.
async fn doctor(path: Option<&std::path::Path>, json: bool) -> anyhow::Result<()> {
    let loaded = load_config(path)?;
    let mut report = crate::doctor::run(&loaded.config).await;
    let config_problems: Vec<crate::doctor::Finding> = loaded
        .problems
        .iter()
        .map(|p| {
            crate::doctor::Finding::problem(
                "config",
                p.to_string(),
                "correct the key it names (atrium config check)",
            )
        })
        .collect();
    if !config_problems.is_empty() {
        report =
            crate::doctor::Report::new(config_problems.into_iter().chain(report.checks).collect());
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.text());
    }
    if report.problems > 0 {
        bail!("{} problem(s) found", report.problems);
    }
    Ok(())
}

/// Who ran the command, for the audit log: the real uid's account (and sudo's
/// caller), as `services::audit::command_line_actor` words it.
fn cli_actor() -> String {
    let uid = nix::unistd::getuid();
    let name = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name);
    crate::services::audit::command_line_actor(
        std::env::var("SUDO_USER").ok().as_deref(),
        uid.as_raw(),
        name.as_deref(),
    )
}

/// A number of a user row, or `-`.
fn show(n: Option<i64>) -> String {
    n.map_or("-".into(), |n| n.to_string())
}

fn read_password(prompt: &str) -> anyhow::Result<String> {
    let password = if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password(prompt)?;
        let again = rpassword::prompt_password("Repeat: ")?;
        if first != again {
            bail!("the passwords differ");
        }
        first
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim_end_matches(['\n', '\r']).to_string()
    };
    if password.is_empty() {
        bail!("password must not be empty");
    }
    Ok(password)
}

/// The account changes of `atrium user`, written as the portal writes them (the same
/// service and audit entries), named by who ran the command.
fn changes(store: &Store) -> AccountChanges {
    AccountChanges::new(store.clone(), Audit::new(store.clone()))
}

/// A service's refusal as the command's error, in its words.
fn refused(e: ServiceError) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

/// Who ran the command, for the audit entries: [`cli_actor`]'s words.
struct CliActor(String);

impl CliActor {
    fn as_actor(&self) -> Actor<'_> {
        Actor {
            name: &self.0,
            client_addr: "local",
        }
    }
}

async fn user_command(store: &Store, config: &Config, command: UserCommand) -> anyhow::Result<()> {
    let cli_actor = CliActor(cli_actor());
    match command {
        UserCommand::Add(add) => {
            let pass = read_password("Password: ")?;
            let mut groups = add.groups.clone();
            if add.admin {
                // A plain name is a local group; a DN names a directory group.
                let admin_group = config
                    .auth
                    .admin_groups
                    .iter()
                    .find(|g| !crate::domain::dn::looks_like_dn(g))
                    .context("auth.admin_groups names no local group (only directory DNs)")?;
                groups.push(admin_group.clone());
            }
            let changes = changes(store);
            let user = changes
                .add(
                    cli_actor.as_actor(),
                    &config.accounts,
                    NewUser {
                        username: add.username.clone(),
                        display_name: add.display_name,
                        email: add.email,
                        uid_number: add.uid,
                        gid_number: add.gid,
                        home: add.home,
                        password_hash: None,
                    },
                    &pass,
                    &groups,
                )
                .await
                .map_err(refused)?;
            println!(
                "created user {} (id {}, uid {}, gid {}, home {})",
                user.username,
                user.id,
                show(user.uid_number),
                show(user.gid_number),
                user.home.as_deref().unwrap_or("-")
            );
        }
        UserCommand::List => {
            println!(
                "{:<20} {:<6} {:<8} {:<8} {:<24} {:<9} {:<24}",
                "USERNAME", "SOURCE", "UID", "GID", "HOME", "STATE", "GROUPS"
            );
            for user in store.list_users().await? {
                let groups = store.groups_of(user.id).await?.join(",");
                println!(
                    "{:<20} {:<6} {:<8} {:<8} {:<24} {:<9} {:<24}",
                    user.username,
                    user.source,
                    show(user.uid_number),
                    show(user.gid_number),
                    user.home.as_deref().unwrap_or("-"),
                    if user.disabled { "disabled" } else { "active" },
                    groups
                );
            }
        }
        UserCommand::Passwd { username } => {
            // Asked only of an account that can take one.
            let user = store
                .user_by_name(&username)
                .await?
                .with_context(|| format!("no user {username:?}"))?;
            if user.source != "local" {
                bail!("{username} is not a local account; change its password in the directory");
            }
            let pass = read_password("New password: ")?;
            let revoked = changes(store)
                .set_password(cli_actor.as_actor(), &username, pass)
                .await
                .map_err(refused)?;
            println!(
                "password of {username} changed; {} browser session(s) ended and {} API token(s) revoked",
                revoked.sessions, revoked.tokens
            );
        }
        UserCommand::Disable { username, enable } => {
            let (_, revoked) = changes(store)
                .set_disabled(cli_actor.as_actor(), &username, !enable)
                .await
                .map_err(|e| match e {
                    ServiceError::NotFound => anyhow::anyhow!("no user {username:?}"),
                    e => refused(e),
                })?;
            if enable {
                println!("{username} enabled");
            } else {
                println!(
                    "{username} disabled; {} browser session(s) ended and {} API token(s) revoked",
                    revoked.sessions, revoked.tokens
                );
            }
        }
    }
    Ok(())
}

/// The portal's key file beside a backup `file`: `FILE.key`.
fn key_beside(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// `atrium backup FILE`: a consistent copy of the SQLite database while the portal
/// serves, and its key (without it, a restored portal's sessions and tokens derived
/// from it would not be recognised).
async fn backup(config: &Config, file: &Path) -> anyhow::Result<()> {
    let url = config.database_url();
    if !url.is_sqlite() {
        anyhow::bail!(
            "the database is PostgreSQL: back it up with pg_dump (docs/OPERATIONS.md, \"Backup and restore\")"
        );
    }
    let key_file = key_beside(file);
    for f in [file, key_file.as_path()] {
        if f.exists() {
            anyhow::bail!("{} exists: the backup does not overwrite it", f.display());
        }
    }
    // Made empty and private first (SQLite fills an empty file): the copy is never
    // readable by others, not even for a moment.
    create_private(file)?;
    let store = open_store(config).await?;
    let copied = store.backup_into(file).await;
    store.close().await;
    if let Err(e) = copied {
        let _ = std::fs::remove_file(file);
        return Err(e).with_context(|| format!("copying the database to {}", file.display()));
    }
    if config.auth.jwt_secret.is_none() {
        let key = config.data_dir.join("jwt.key");
        if key.exists() {
            copy_private(&key, &key_file)?;
        }
    }
    println!(
        "atrium: backed up {} to {}{}",
        url.redacted(),
        file.display(),
        if key_file.exists() {
            format!(" and its key to {}", key_file.display())
        } else {
            String::new()
        }
    );
    Ok(())
}

/// `atrium restore FILE`: the backup becomes this configuration's database (and its
/// key the portal's), in a data directory that has none yet.
fn restore(config: &Config, file: &Path) -> anyhow::Result<()> {
    let url = config.database_url();
    let Some(target) = url.sqlite_file().filter(|_| url.is_sqlite()) else {
        anyhow::bail!("the database is PostgreSQL: restore it with pg_restore or psql");
    };
    if !file.is_file() {
        anyhow::bail!("{}: no such backup", file.display());
    }
    if target.exists() {
        anyhow::bail!(
            "{} exists: stop the portal and move the database away before restoring over it",
            target.display()
        );
    }
    crate::startup::secure_data_dir(&config.data_dir, Some(&target))?;
    // Copied beside the target, then renamed: a restore cut short leaves no database
    // that looks whole.
    let partial = target.with_extension("db.restoring");
    copy_private(file, &partial)?;
    std::fs::rename(&partial, &target)?;
    let key_file = key_beside(file);
    if key_file.exists() && config.auth.jwt_secret.is_none() {
        copy_private(&key_file, &config.data_dir.join("jwt.key"))?;
    }
    println!(
        "atrium: restored {} as {}",
        file.display(),
        target.display()
    );
    Ok(())
}

/// A new, empty file at `path` (which must not exist), readable by the owner only.
fn create_private(path: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))
}

/// Copy `from` to `to` (which must not exist), readable by the owner only.
fn copy_private(from: &Path, to: &Path) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = create_private(to)?;
    let mut input =
        std::fs::File::open(from).with_context(|| format!("reading {}", from.display()))?;
    std::io::copy(&mut input, &mut out)?;
    out.flush()?;
    out.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use atrium_client::dispatch_argv0;
    use clap::{CommandFactory, Parser};

    use super::{Cli, Command};

    fn args(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_command_line_accepts_every_client_command() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(dispatch_argv0(args(&["sbatch", "-p", "gpu", "x.sh"])))
            .expect("sbatch");
        assert!(matches!(cli.command, Command::Sbatch(a) if a.words == ["-p", "gpu", "x.sh"]));
        let cli = Cli::try_parse_from(dispatch_argv0(args(&["sbatch", "-h", "--hold"])))
            .expect("sbatch -h is sbatch's");
        assert!(matches!(cli.command, Command::Sbatch(a) if a.words == ["-h", "--hold"]));
        let cli = Cli::try_parse_from(args(&["atrium", "squeue", "-h", "--me"])).expect("squeue");
        assert!(matches!(cli.command, Command::Squeue(a) if a.args == ["-h", "--me"]));
        let cli = Cli::try_parse_from(dispatch_argv0(args(&["sinfo", "-h"]))).expect("sinfo");
        assert!(matches!(cli.command, Command::Sinfo(a) if a.args == ["-h"]));
        let cli =
            Cli::try_parse_from(dispatch_argv0(args(&["scancel", "17", "18_2"]))).expect("scancel");
        assert!(matches!(cli.command, Command::Scancel(a) if a.args == ["17", "18_2"]));
        let cli =
            Cli::try_parse_from(dispatch_argv0(args(&["sacct", "-X", "-j", "17"]))).expect("sacct");
        assert!(matches!(cli.command, Command::Sacct(a) if a.args == ["-X", "-j", "17"]));
    }

    #[test]
    fn sprio_sshare_and_sstat_get_their_words_as_typed() {
        let cli = Cli::try_parse_from(dispatch_argv0(args(&["/usr/bin/sprio", "-h", "-V"])))
            .expect("sprio");
        assert!(matches!(cli.command, Command::Sprio(a) if a.args == ["-h", "-V"]));
        let cli =
            Cli::try_parse_from(dispatch_argv0(args(&["sshare", "--help", "-a"]))).expect("sshare");
        assert!(matches!(cli.command, Command::Sshare(a) if a.args == ["--help", "-a"]));
        let cli = Cli::try_parse_from(args(&["atrium", "sstat", "-h", "12"])).expect("sstat");
        assert!(matches!(cli.command, Command::Sstat(a) if a.args == ["-h", "12"]));
    }
}
