//! Job steps: the spec the portal writes, the step supervisor (`atrium step run`)
//! that runs one job detached from the portal, and the trampoline (`atrium step
//! exec`) that drops to the user's identity and starts the container runtime
//! (`runtime/`: bubblewrap, apptainer, podman, docker or a plain process).
//!
//! Each step has a directory `<spool>/<job>` (mode 0711, root) holding `spec.json`
//! (0600), `state.json` (0600, written atomically by the supervisor),
//! `supervisor.log` (0600) and `slurm_script` (the user's, mode 0500, so only they
//! can read it). The supervisor survives the portal: the portal finds it again
//! through the state file, checking pid *and* start time so that a reused pid is
//! never mistaken for it. Once the step's end is recorded in the database, the portal
//! removes its directory (`sched::internal::steps`).
//!
//! Memory: cgroup v2 is used when its memory controller is available to us;
//! otherwise (cgroup v1 or no delegation) the supervisor samples the resident
//! memory of the job's process group every 250 ms and kills the job when it is
//! over its limit, as Slurm's `JobAcctGatherParams=OverMemoryKill` does. The
//! fallback can miss a spike shorter than the sampling period.
//! `--signal` (`early_signal.rs`): the supervisor sends the signal `seconds_before`
//! the time limit of each run, to the batch shell (`B:`) or to what it started; it
//! finds the shell as the user's process running the step's script.
//! Usage (`usage.rs`): the supervisor samples the job's CPU time, memory and GPUs
//! into `usage.json` (0600), which the portal stores while the job runs and once it
//! ends.
//! Must not touch: the database or the scheduler.

mod early_signal;
mod runtime;
mod supervisor;
pub use supervisor::{SETUP_FAILED, SITE_FAILURE};
pub mod terminal;
pub mod usage;

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use scheduler::JobOutcome;
use serde::{Deserialize, Serialize};

pub use runtime::{detect_available, detect_runtime, probe_command, ProbeCommand, RuntimeKind};
pub use supervisor::{exec, run};

/// Everything a step needs, written by the portal as `spec.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StepSpec {
    /// `123` or `123_4`.
    pub job: String,
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    pub home: PathBuf,
    pub workdir: PathBuf,
    pub script: String,
    /// The whole environment of the job.
    pub env: Vec<(String, String)>,
    pub stdout: PathBuf,
    /// `None`: merged into `stdout`.
    pub stderr: Option<PathBuf>,
    pub time_limit_secs: Option<u64>,
    pub memory_limit_mb: Option<u64>,
    pub kill_grace_secs: u64,
    /// Physical GPU indices allocated to the job (their device files are exposed).
    pub gpu_indices: Vec<u32>,
    pub runtime: RuntimeKind,
    /// Switch to `uid`/`gid`/`groups` (the portal runs as root).
    pub drop_privileges: bool,
    /// The container image: an apptainer `.sif` path, an OCI image reference for
    /// podman/docker, or a root directory for bubblewrap. `None`: the host's `/`.
    #[serde(default)]
    pub image: Option<String>,
    /// Shared storage and other paths bound into the container, in order.
    #[serde(default)]
    pub mounts: Vec<Mount>,
    /// The portal's own directories (data directory, spool), hidden from the job by
    /// runtimes that show the host's file system (an empty directory over each; the
    /// job's own script and session directory are bound back).
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// `--signal`: a signal sent before the time limit, armed again by every run.
    #[serde(default)]
    pub signal: Option<EarlySignal>,
    /// `--open-mode=append`: the output files keep what they hold (default: they are
    /// truncated when the step starts, as Slurm's default `truncate`).
    #[serde(default)]
    pub append_output: bool,
    /// The script's arguments (`sbatch script ARGS`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Seconds to wait for a missing folder of the output files before failing.
    #[serde(default)]
    pub output_folder_wait_secs: u64,
    /// An interactive job: it runs on a terminal of its own ([`terminal`]), not
    /// into its output files.
    #[serde(default)]
    pub pty: bool,
    /// With `pty`: a raw terminal (no echo, no line editing, no carriage returns added).
    #[serde(default)]
    pub pty_raw: bool,
    /// Seconds between two samples of the job's use of its CPUs, memory and GPUs
    /// (`usage.json`); 0: none (the totals at the end only).
    #[serde(default = "default_usage_interval")]
    pub usage_interval_secs: u64,
    /// The GPUs whose utilisation the samples read (`nvidia-smi` indices): the
    /// job's whole GPUs and shared ones, not MIG instances (which do not report it).
    #[serde(default)]
    pub sampled_gpus: Vec<u32>,
    /// The MIG instances the samples read the memory of.
    #[serde(default)]
    pub sampled_migs: Vec<usage::MigSlice>,
    /// The node the step runs on, as the scheduler names it.
    #[serde(default)]
    pub node: String,
}

fn default_usage_interval() -> u64 {
    crate::config::DEFAULT_USAGE_INTERVAL_SECONDS
}

/// `--signal=[B:]SIG@TIME`: what the supervisor sends before the time limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlySignal {
    /// The signal's number.
    pub signal: i32,
    /// `B:`: to the batch shell only; otherwise to every process the shell started
    /// (its descendants), never to the shell or the container runtime.
    pub batch_only: bool,
    /// How long before the time limit.
    pub seconds_before: u64,
}

impl StepSpec {
    /// A step of `job` running `script` as `identity` in `workdir` under `runtime`,
    /// its output to `stdout`, with nothing else: no limits, GPUs, image, mounts,
    /// signal, arguments or usage samples (the portal's jobs set those; a probe and
    /// the tests need none).
    pub fn plain(
        job: &str,
        identity: &crate::privilege::Identity,
        workdir: &Path,
        script: &str,
        stdout: PathBuf,
        runtime: RuntimeKind,
    ) -> StepSpec {
        StepSpec {
            job: job.to_string(),
            user: identity.user.clone(),
            uid: identity.uid,
            gid: identity.gid,
            groups: identity.groups.clone(),
            home: identity.home.clone(),
            workdir: workdir.to_path_buf(),
            script: script.to_string(),
            env: Vec::new(),
            stdout,
            stderr: None,
            time_limit_secs: None,
            memory_limit_mb: None,
            kill_grace_secs: 10,
            gpu_indices: Vec::new(),
            runtime,
            drop_privileges: true,
            image: None,
            mounts: Vec::new(),
            hidden: Vec::new(),
            signal: None,
            append_output: false,
            args: Vec::new(),
            output_folder_wait_secs: 0,
            pty: false,
            pty_raw: false,
            usage_interval_secs: 0,
            sampled_gpus: Vec::new(),
            sampled_migs: Vec::new(),
            node: String::new(),
        }
    }

    /// Whom the step runs as.
    pub fn identity(&self) -> crate::privilege::Identity {
        crate::privilege::Identity {
            user: self.user.clone(),
            uid: self.uid,
            gid: self.gid,
            groups: self.groups.clone(),
            home: self.home.clone(),
        }
    }
}

/// The environment a job or session runs in when it is not the jobs' default: kept
/// with the job (as JSON) and applied to its step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    pub runtime: RuntimeKind,
    #[serde(default)]
    pub image: Option<String>,
    /// Bound after the shared storage.
    #[serde(default)]
    pub mounts: Vec<Mount>,
    /// Set over the job's environment (e.g. `PATH` to reach the image's software).
    #[serde(default)]
    pub env: Vec<(String, String)>,
}

/// A path of the host made visible inside the step's container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub source: PathBuf,
    pub target: PathBuf,
    #[serde(default)]
    pub read_only: bool,
}

/// What the supervisor records.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct StepState {
    pub job: String,
    pub supervisor_pid: u32,
    /// Start time of the supervisor in clock ticks since boot (`/proc/PID/stat`).
    pub supervisor_start: u64,
    /// `starting`, `running` or `finished`.
    pub phase: String,
    pub child_pid: Option<u32>,
    pub started_at_ms: i64,
    pub outcome: Option<JobOutcome>,
    /// `cancelled`, `time_limit`, `out_of_memory` or `error`.
    pub reason: Option<String>,
    pub error: Option<String>,
    pub ended_at_ms: Option<i64>,
}

impl StepState {
    pub fn is_finished(&self) -> bool {
        self.phase == "finished"
    }

    /// Whether the supervisor that wrote this is still running.
    pub fn supervisor_alive(&self) -> bool {
        ProcessIdentity {
            pid: self.supervisor_pid,
            start_ticks: self.supervisor_start,
        }
        .is_alive()
    }

    /// The end of a step whose supervisor disappeared without recording one.
    pub fn lost(job: &str) -> StepState {
        StepState {
            job: job.to_string(),
            phase: "finished".into(),
            outcome: Some(JobOutcome::Signaled(9)),
            reason: Some("error".into()),
            error: Some("step supervisor lost".into()),
            ..Default::default()
        }
    }
}

/// A signal the portal sends a supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepSignal {
    /// Stop the job: SIGTERM, then SIGKILL after the grace time; CANCELLED.
    Cancel,
    /// The time limit is reached: the same, recorded as a time limit.
    TimeLimit,
    /// Send `signal` to the job's processes (`scancel --signal`); the job goes on.
    Send { signal: i32, whom: SignalWhom },
}

/// Which of a job's processes `scancel --signal` reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalWhom {
    /// Every process the batch shell started (Slurm's steps), not the shell.
    Steps,
    /// The batch shell only (`--batch`).
    Batch,
    /// The batch shell and everything it started (`--full`).
    Full,
}

/// The file in a step's directory naming the signal the supervisor is to send next
/// (written by the portal, root's, before it sends the supervisor `SIGUSR2`).
pub const SIGNAL_FILE: &str = "signal.json";

/// What [`SIGNAL_FILE`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SignalRequest {
    pub signal: i32,
    pub whom: SignalWhom,
}

/// A process, identified by pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessIdentity {
    pub pid: u32,
    pub start_ticks: u64,
}

/// Fields of `/proc/PID/stat` after the command name: state is `[0]`, pgrp `[2]`,
/// start time `[19]`.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

impl ProcessIdentity {
    pub fn of(pid: u32) -> Option<ProcessIdentity> {
        let fields = stat_fields(pid)?;
        Some(ProcessIdentity {
            pid,
            start_ticks: fields.get(19)?.parse().ok()?,
        })
    }

    /// The same process is still there (not a zombie, not a reused pid).
    pub fn is_alive(&self) -> bool {
        match stat_fields(self.pid) {
            Some(f) => {
                f.first().is_some_and(|s| s != "Z" && s != "X")
                    && f.get(19).and_then(|s| s.parse().ok()) == Some(self.start_ticks)
            }
            None => false,
        }
    }
}

impl Mount {
    /// A configured mount; `read_only` forces it read-only (data sets).
    pub fn from_config(m: &crate::config::MountConfig, read_only: bool) -> Mount {
        Mount {
            source: m.source.clone(),
            target: m.target.clone().unwrap_or_else(|| m.source.clone()),
            read_only: read_only || m.read_only,
        }
    }
}

/// The shared storage every step sees: data sets read-only, project spaces as
/// configured.
pub fn storage_mounts(storage: &crate::config::StorageConfig) -> Vec<Mount> {
    let datasets = storage.datasets.iter().map(|m| Mount::from_config(m, true));
    let projects = storage
        .projects
        .iter()
        .map(|m| Mount::from_config(m, false));
    datasets.chain(projects).collect()
}

/// Open `path` for reading only if it is a regular file of `owner`, not a link. The
/// path is first opened without access (`O_PATH`, which opens no device and follows no
/// link) and checked; only a regular file of `owner` is then opened for reading,
/// through that descriptor, never as a controlling terminal.
pub fn open_owned(path: &Path, owner: u32) -> std::io::Result<Option<std::fs::File>> {
    use nix::fcntl::OFlag;
    use std::os::fd::AsRawFd;
    let handle = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = handle.metadata()?;
    let not_owned = || {
        std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "not a regular file of the step's user",
        )
    };
    if !meta.is_file() || meta.uid() != owner {
        return Err(not_owned());
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOCTTY | OFlag::O_NONBLOCK).bits())
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))?;
    let opened = file.metadata()?;
    if opened.dev() != meta.dev() || opened.ino() != meta.ino() {
        return Err(not_owned());
    }
    Ok(Some(file))
}

/// The last `max` bytes of `path`, a plain file of `owner` (as [`open_owned`] opens
/// it), as text; `None` if there is no such file.
pub fn read_tail_owned(path: &Path, owner: u32, max: u64) -> std::io::Result<Option<String>> {
    use std::io::{Read, Seek, SeekFrom};
    let Some(mut file) = open_owned(path, owner)? else {
        return Ok(None);
    };
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(max)))?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The portal's uid and gid.
pub fn current_ids() -> (u32, u32) {
    (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
    )
}

/// Create the spool directory (0711: users may reach their own script by name).
pub fn ensure_spool(spool: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(spool)?;
    std::fs::set_permissions(spool, std::fs::Permissions::from_mode(0o711))
}

/// The commands a job runs inside its allocation (`srun`, `scontrol`): symbolic
/// links to the `atrium` binary, which acts as the command its name says.
pub const STEP_COMMANDS: [&str; 2] = ["srun", "scontrol"];

/// Create `<spool>/bin` (0755, root) with [`STEP_COMMANDS`] as links to `exe`, put
/// first on every job's `PATH`; returns the directory. Links to another binary (an
/// earlier installation) are replaced.
pub fn ensure_step_commands(spool: &Path, exe: &Path) -> std::io::Result<PathBuf> {
    let dir = spool.join("bin");
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    for name in STEP_COMMANDS {
        let link = dir.join(name);
        if std::fs::read_link(&link).is_ok_and(|target| target == exe) {
            continue;
        }
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(exe, &link)?;
    }
    Ok(dir)
}

/// Write `path` whole or not at all (a temporary file renamed over it). Only `durable`
/// writes wait for the disk: a step's spec, script and start state matter only while
/// the machine is up (a power loss ends the step with them), but its exit status must
/// outlive one, to be recorded when the portal comes back.
fn write_private(path: &Path, data: &[u8], mode: u32, durable: bool) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)?;
    f.write_all(data)?;
    if durable {
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// Create the step directory with its spec and script; returns the directory.
pub fn prepare(spool: &Path, spec: &StepSpec) -> std::io::Result<PathBuf> {
    let dir = spool.join(&spec.job);
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))?;
    let json = serde_json::to_vec(spec).map_err(std::io::Error::other)?;
    write_private(&dir.join("spec.json"), &json, 0o600, false)?;
    let script = dir.join("slurm_script");
    let _ = std::fs::remove_file(&script);
    write_private(&script, spec.script.as_bytes(), 0o700, false)?;
    if spec.drop_privileges {
        std::os::unix::fs::chown(&script, Some(spec.uid), Some(spec.gid))?;
    }
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o500))?;
    Ok(dir)
}

/// Start `atrium step run DIR` with the fixed environment; the supervisor detaches
/// itself at once into a session of its own (so that neither a signal to the portal's
/// process group nor its terminal reaches it).
pub async fn spawn(exe: &Path, dir: &Path) -> std::io::Result<tokio::process::Child> {
    let log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(dir.join("supervisor.log"))?;
    let log2 = log.try_clone()?;
    tokio::process::Command::new(exe)
        .arg("step")
        .arg("run")
        .arg(dir)
        .env_clear()
        .envs(crate::privilege::base_env())
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        .kill_on_drop(false)
        .spawn()
}

pub(crate) fn read_spec(dir: &Path) -> anyhow::Result<StepSpec> {
    let bytes = std::fs::read(dir.join("spec.json"))?;
    Ok(serde_json::from_slice(&bytes)?)
}

pub fn read_state(dir: &Path) -> std::io::Result<Option<StepState>> {
    match std::fs::read(dir.join("state.json")) {
        Ok(bytes) => Ok(Some(
            serde_json::from_slice(&bytes).map_err(std::io::Error::other)?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

pub(crate) fn write_state(dir: &Path, state: &StepState) -> std::io::Result<()> {
    let json = serde_json::to_vec(state).map_err(std::io::Error::other)?;
    let durable = state.phase == "finished";
    write_private(&dir.join("state.json"), &json, 0o600, durable)
}

/// Send `sig` to the supervisor of the step in `dir`, if it is still the same process.
pub fn signal(dir: &Path, state: &StepState, sig: StepSignal) -> std::io::Result<bool> {
    if !state.supervisor_alive() {
        return Ok(false);
    }
    let signal = match sig {
        StepSignal::Cancel => nix::sys::signal::Signal::SIGTERM,
        StepSignal::TimeLimit => nix::sys::signal::Signal::SIGUSR1,
        StepSignal::Send { signal, whom } => {
            let request = serde_json::to_vec(&SignalRequest { signal, whom })
                .map_err(std::io::Error::other)?;
            write_private(&dir.join(SIGNAL_FILE), &request, 0o600, false)?;
            nix::sys::signal::Signal::SIGUSR2
        }
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(state.supervisor_pid as i32),
        signal,
    )
    .map_err(std::io::Error::from)?;
    Ok(true)
}

/// Whether a supervisor for `dir` is running (it may not have written its state).
pub fn supervisor_running(dir: &Path) -> bool {
    let want = dir.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            return false;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        args.windows(3)
            .any(|w| w[0] == b"step" && w[1] == b"run" && w[2] == want)
    })
}
