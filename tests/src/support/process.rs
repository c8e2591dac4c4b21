//! Child processes that never outlive the test.
//!
//! * [`ChildGuard`]: SIGKILLs and reaps a `std` or `tokio` child when dropped (including during a
//!   panic unwind). Enough for things started and stopped inside one test, such as the atrium
//!   server under test.
//! * [`Supervised`]: for processes that must also die when the test process is killed outright
//!   (nextest timeout, SIGKILL, `process::exit` skipping destructors) and that leave files behind.
//!   The process runs under a tiny `sh` supervisor whose stdin is a pipe held by the test process
//!   (the "lifeline"). The kernel closes that pipe however the test process ends; the supervisor
//!   then signals the whole process group of the child, reaps it and removes its scratch directory.
//!   The child additionally gets `PR_SET_PDEATHSIG=SIGKILL` (via `setpriv`) in case the supervisor
//!   itself is killed.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead as _, BufReader};
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;

use super::wait;

/// How long `Drop` waits for a killed child or a supervisor's cleanup before giving up.
const REAP_DEADLINE: Duration = Duration::from_secs(10);

/// Directories searched by [`find_binary`] after `$PATH`.
const KNOWN_DIRS: &[&str] = &[
    "/usr/local/bin",
    "/usr/bin",
    "/bin",
    "/usr/local/sbin",
    "/usr/sbin",
    "/sbin",
    "/usr/lib/chromium",
    "/snap/bin",
];

/// True when the current process runs with effective uid 0.
pub fn is_root() -> bool {
    // /proc/self is owned by the effective uid of the process; avoids `unsafe { geteuid() }`.
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// Finds an executable called `name` in `$PATH`, then in `extra_dirs`, then in common system
/// locations ([`KNOWN_DIRS`]). A `name` containing a `/` is checked as is.
pub fn find_binary(name: &str, extra_dirs: &[&Path]) -> anyhow::Result<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        anyhow::ensure!(is_executable(&p), "{name} is not an executable file");
        return Ok(p);
    }
    let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let candidates = path_dirs
        .iter()
        .map(PathBuf::as_path)
        .chain(extra_dirs.iter().copied())
        .chain(KNOWN_DIRS.iter().map(Path::new));
    let mut searched = Vec::new();
    for dir in candidates {
        let p = dir.join(name);
        if is_executable(&p) {
            return Ok(p);
        }
        searched.push(dir.display().to_string());
    }
    anyhow::bail!(
        "executable {name:?} not found (searched {}); run tests/install-deps.sh",
        searched.join(":")
    )
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs `program` with `args` and extra `env`, feeding it `stdin` (or nothing), killing it
/// after `timeout`; returns its standard output, or fails with its standard error and output.
pub async fn output_of<A, I, K, V>(
    program: &Path,
    args: &[A],
    env: I,
    stdin: Option<&str>,
    timeout: Duration,
) -> anyhow::Result<String>
where
    A: AsRef<OsStr>,
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    use tokio::io::AsyncWriteExt as _;
    let shown = || {
        let mut s = program.display().to_string();
        for a in args {
            s.push(' ');
            s.push_str(&a.as_ref().to_string_lossy());
        }
        s
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .envs(env)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("spawning {}", shown()))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .await
            .with_context(|| format!("writing stdin of {}", shown()))?;
        drop(pipe);
    }
    let out = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .with_context(|| format!("{} did not finish within {timeout:?}", shown()))?
        .with_context(|| format!("waiting for {}", shown()))?;
    anyhow::ensure!(
        out.status.success(),
        "{} failed ({}): {}{}",
        shown(),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim(),
        String::from_utf8_lossy(&out.stdout).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether `pid` exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Format: "pid (comm) S ..."; comm may contain spaces and parens, so split at the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn live_processes_in_group(pgid: u32) -> Vec<u32> {
    scan_processes(|pid| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after "(comm)": state ppid pgrp ...
        let (_, rest) = stat.rsplit_once(')')?;
        let mut fields = rest.split_whitespace();
        let state = fields.next()?;
        let pgrp: u32 = fields.nth(1)?.parse().ok()?;
        Some(pgrp == pgid && state != "Z" && state != "X")
    })
}

/// Live (non-zombie) processes, other than this one, whose command line contains `needle`.
pub fn live_processes_mentioning(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    scan_processes(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        Some(pid != me && String::from_utf8_lossy(&cmdline).contains(needle) && pid_alive(pid))
    })
}

/// Stop every job step that a portal started under `root` (its spool): their
/// supervisors outlive the portal by design, so a test's portal going away leaves
/// them running. SIGTERM makes each supervisor end its job (SIGTERM, then SIGKILL
/// after the grace time) and exit; what is still there after `within` (a supervisor,
/// or a container runtime whose command line names a path under `root`) gets SIGKILL.
pub fn stop_steps_under(root: &Path, within: std::time::Duration) {
    let root = root.display().to_string();
    let supervisors = scan_processes(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let text = String::from_utf8_lossy(&cmdline);
        Some(text.contains("\0step\0run\0") && text.contains(&root) && pid_alive(pid))
    });
    let signal = |sig: &str, pids: &[u32]| {
        if pids.is_empty() {
            return;
        }
        let _ = std::process::Command::new("kill")
            .arg("-s")
            .arg(sig)
            .args(pids.iter().map(u32::to_string))
            .stderr(std::process::Stdio::null())
            .status();
    };
    signal("TERM", &supervisors);
    let deadline = std::time::Instant::now() + within;
    while supervisors.iter().any(|p| pid_alive(*p)) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    signal("KILL", &live_processes_mentioning(&root));
}

/// Live (non-zombie) processes whose real uid is `uid`, with their state letter
/// (`R`, `S`, `T` for stopped …).
pub fn processes_of_uid(uid: u32) -> Vec<(u32, char)> {
    let mut out = Vec::new();
    scan_processes(|pid| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let real: u32 = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let state = status
            .lines()
            .find_map(|l| l.strip_prefix("State:"))?
            .trim()
            .chars()
            .next()?;
        if real == uid && state != 'Z' && state != 'X' {
            out.push((pid, state));
        }
        Some(false)
    });
    out
}

fn scan_processes(mut matches: impl FnMut(u32) -> Option<bool>) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| matches(pid).unwrap_or(false))
        .collect()
}

/// Returns the last `max_lines` lines of a (log) file, or a note if it cannot be read.
pub fn file_tail(path: &Path, max_lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(max_lines)..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}

enum Inner {
    Std(std::process::Child),
    Tokio(tokio::process::Child),
}

/// Owns a child process; SIGKILLs and reaps it when dropped.
///
/// Does not survive a SIGKILL of the test process itself; use [`Supervised`] for that.
pub struct ChildGuard {
    inner: Option<Inner>,
    name: String,
}

impl From<std::process::Child> for ChildGuard {
    fn from(child: std::process::Child) -> Self {
        Self::new("child process", child)
    }
}

impl From<tokio::process::Child> for ChildGuard {
    fn from(child: tokio::process::Child) -> Self {
        Self::new("child process", child)
    }
}

/// Either kind of child accepted by [`ChildGuard::new`].
pub trait AnyChild {
    #[doc(hidden)]
    fn into_inner(self) -> ChildGuardInner;
}

/// Opaque wrapper used by [`AnyChild`].
#[doc(hidden)]
pub struct ChildGuardInner(Inner);

impl AnyChild for std::process::Child {
    fn into_inner(self) -> ChildGuardInner {
        ChildGuardInner(Inner::Std(self))
    }
}

impl AnyChild for tokio::process::Child {
    fn into_inner(self) -> ChildGuardInner {
        ChildGuardInner(Inner::Tokio(self))
    }
}

impl ChildGuard {
    /// Guards `child`; `name` appears in error messages.
    pub fn new(name: impl Into<String>, child: impl AnyChild) -> Self {
        Self {
            inner: Some(child.into_inner().0),
            name: name.into(),
        }
    }

    /// The OS pid, or `None` once the child has been reaped.
    pub fn id(&self) -> Option<u32> {
        match self.inner.as_ref()? {
            Inner::Std(c) => Some(c.id()),
            Inner::Tokio(c) => c.id(),
        }
    }

    /// The guarded `std` child, if it is one (e.g. to take its stdout).
    pub fn std_mut(&mut self) -> Option<&mut std::process::Child> {
        match self.inner.as_mut()? {
            Inner::Std(c) => Some(c),
            Inner::Tokio(_) => None,
        }
    }

    /// The guarded `tokio` child, if it is one (e.g. to take its stdout or `wait()` on it).
    pub fn tokio_mut(&mut self) -> Option<&mut tokio::process::Child> {
        match self.inner.as_mut()? {
            Inner::Tokio(c) => Some(c),
            Inner::Std(_) => None,
        }
    }

    /// Non-blocking: `Some(status)` if the child has exited (it is then reaped).
    pub fn try_wait(&mut self) -> anyhow::Result<Option<std::process::ExitStatus>> {
        let status = match self.inner.as_mut() {
            None => return Ok(None),
            Some(Inner::Std(c)) => c.try_wait(),
            Some(Inner::Tokio(c)) => c.try_wait(),
        };
        status.with_context(|| format!("checking whether {} exited", self.name))
    }

    /// SIGKILLs the child (if still running) and reaps it. Idempotent.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        let Some(mut inner) = self.inner.take() else {
            return Ok(());
        };
        let name = &self.name;
        // Errors from kill mean "already exited"; reaping below is what matters.
        match &mut inner {
            Inner::Std(c) => {
                let _ = c.kill();
            }
            Inner::Tokio(c) => {
                let _ = c.start_kill();
            }
        }
        wait::until_blocking(
            &format!("{name} to exit after SIGKILL"),
            REAP_DEADLINE,
            || {
                match &mut inner {
                    Inner::Std(c) => c.try_wait(),
                    Inner::Tokio(c) => c.try_wait(),
                }
                .map(|s| s.map(|_| ()))
                .unwrap_or(Some(()))
            },
        )?;
        Ok(())
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Err(e) = self.kill() {
            eprintln!("warning: {e:#}");
        }
    }
}

/// The `sh` supervisor. Arguments: LOG SIGNAL PROGRAM ARGS...; env ATRIUM_SUPERVISOR_CLEANUP: a
/// directory to remove at the end.
///
/// The child runs in its own session (so its process group can be signalled as a whole, and
/// terminal/nextest group signals aimed at the test do not reach it directly). The supervisor
/// prints the child pid, then blocks reading its stdin until EOF. `env --default-signal` undoes
/// the SIGINT/SIGQUIT ignoring that `sh` applies to background jobs. A child that ignores the
/// stop signal is SIGKILLed after 5 s. After the group is gone, any
/// process whose command line mentions the cleanup directory is killed too: some programs
/// (Chromium's crashpad handler) daemonize into their own session, escaping the group.
const SUPERVISOR_SCRIPT: &str = r#"
log=$1; sig=$2; shift 2
cleanup=${ATRIUM_SUPERVISOR_CLEANUP:-}
unset ATRIUM_SUPERVISOR_CLEANUP
setsid env --default-signal "$@" </dev/null >>"$log" 2>&1 &
pid=$!
echo "$pid"
exec >/dev/null
cat >/dev/null
kill -s "$sig" -- "-$pid" 2>/dev/null || kill -s "$sig" "$pid" 2>/dev/null
( sleep 5; kill -s KILL -- "-$pid" ) </dev/null >/dev/null 2>&1 &
watchdog=$!
wait "$pid"
kill -s KILL "$watchdog" 2>/dev/null
kill -s KILL -- "-$pid" 2>/dev/null
if [ -n "$cleanup" ]; then
    # Not `pkill -f`: this shell's own command line may contain the path too.
    for p in $(pgrep -f -- "$cleanup"); do
        [ "$p" = "$$" ] || kill -s KILL "$p" 2>/dev/null
    done
    rm -rf -- "$cleanup" 2>/dev/null || rm -rf -- "$cleanup"
fi
exit 0
"#;

/// What to run under a [`Supervised`] lifeline.
#[derive(Debug, Clone)]
pub struct SupervisedCommand {
    /// Name used in messages, e.g. "postgres".
    pub name: String,
    /// Executable path.
    pub program: PathBuf,
    /// Arguments.
    pub args: Vec<OsString>,
    /// Extra environment variables (the rest is inherited).
    pub envs: Vec<(OsString, OsString)>,
    /// Run as this OS user (switching uid/gid and supplementary groups). Requires root.
    pub run_as: Option<String>,
    /// Signal sent to the child's process group when the lifeline closes, e.g. "KILL", "QUIT".
    /// The group is SIGKILLed after the child exits in any case.
    pub stop_signal: &'static str,
    /// stdout and stderr of the child are appended to this file.
    pub log: PathBuf,
    /// Removed (`rm -rf`) after the child and its group are gone. Remaining processes whose
    /// command line contains this path are SIGKILLed first, so make it unique (a temp dir).
    pub remove_on_exit: Option<PathBuf>,
    /// Working directory of the child (default: inherited).
    pub current_dir: Option<PathBuf>,
}

impl SupervisedCommand {
    /// A command with no arguments that is SIGKILLed on exit and logs to `log`.
    pub fn new(
        name: impl Into<String>,
        program: impl Into<PathBuf>,
        log: impl Into<PathBuf>,
    ) -> Self {
        Self {
            name: name.into(),
            program: program.into(),
            args: Vec::new(),
            envs: Vec::new(),
            run_as: None,
            stop_signal: "KILL",
            log: log.into(),
            remove_on_exit: None,
            current_dir: None,
        }
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }
}

/// A process tied to the lifetime of the test process (see the module docs).
///
/// Dropping it (or calling [`Supervised::stop`]) stops the child synchronously and waits for the
/// cleanup. If the test process dies instead, the same happens asynchronously within moments.
pub struct Supervised {
    supervisor: Option<std::process::Child>,
    pid: u32,
    name: String,
    log: PathBuf,
    remove_on_exit: Option<PathBuf>,
}

impl Supervised {
    /// Starts `cmd` under a supervisor. Returns once the child process exists (not once it is
    /// ready: poll for readiness with [`wait::until`]).
    pub fn spawn(cmd: SupervisedCommand) -> anyhow::Result<Self> {
        let setpriv = find_binary("setpriv", &[])?;
        find_binary("setsid", &[])?;
        let mut inner: Vec<OsString> = vec![
            setpriv.into_os_string(),
            "--pdeathsig".into(),
            "KILL".into(),
        ];
        if let Some(user) = &cmd.run_as {
            anyhow::ensure!(is_root(), "running {} as {user} requires root", cmd.name);
            inner.extend(
                ["--reuid", user, "--regid", user, "--init-groups"]
                    .iter()
                    .map(OsString::from),
            );
        }
        inner.push("--".into());
        inner.push(cmd.program.clone().into_os_string());
        inner.extend(cmd.args.iter().cloned());

        let mut sh = Command::new("/bin/sh");
        sh.arg("-c")
            .arg(SUPERVISOR_SCRIPT)
            .arg("atrium-test-supervisor")
            .arg(&cmd.log)
            .arg(cmd.stop_signal)
            .args(&inner)
            .envs(cmd.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            // Own process group: signals aimed at the test's group (Ctrl-C, nextest timeouts)
            // must not kill the supervisor before it has cleaned up.
            .process_group(0);
        if let Some(dir) = &cmd.current_dir {
            sh.current_dir(dir);
        }
        if let Some(dir) = &cmd.remove_on_exit {
            sh.env("ATRIUM_SUPERVISOR_CLEANUP", dir);
        }
        let mut supervisor = sh
            .spawn()
            .with_context(|| format!("spawning supervisor for {}", cmd.name))?;
        let pid_line = {
            let stdout = supervisor
                .stdout
                .take()
                .context("supervisor stdout is piped")?;
            let mut line = String::new();
            BufReader::new(stdout)
                .read_line(&mut line)
                .with_context(|| format!("reading pid of {} from its supervisor", cmd.name))?;
            line
        };
        let pid: u32 = match pid_line.trim().parse() {
            Ok(pid) => pid,
            Err(e) => {
                let _ = supervisor.kill();
                let _ = supervisor.wait();
                anyhow::bail!(
                    "supervisor of {} printed {pid_line:?} instead of a pid: {e}",
                    cmd.name
                );
            }
        };
        Ok(Self {
            supervisor: Some(supervisor),
            pid,
            name: cmd.name,
            log: cmd.log,
            remove_on_exit: cmd.remove_on_exit,
        })
    }

    /// Pid of the child (also its process group and session id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the child is still running.
    pub fn is_running(&self) -> bool {
        self.supervisor.is_some() && pid_alive(self.pid)
    }

    /// Path of the child's combined stdout/stderr log.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Last `max_lines` lines of the child's log, for error messages.
    pub fn log_tail(&self, max_lines: usize) -> String {
        file_tail(&self.log, max_lines)
    }

    /// Stops the child, waits for it and for the cleanup. Idempotent.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        let Some(mut supervisor) = self.supervisor.take() else {
            return Ok(());
        };
        // Closing the lifeline is the stop request.
        drop(supervisor.stdin.take());
        let waited = wait::until_blocking(
            &format!("supervisor of {} to stop it and clean up", self.name),
            REAP_DEADLINE,
            || {
                supervisor
                    .try_wait()
                    .map(|s| s.map(|_| ()))
                    .unwrap_or(Some(()))
            },
        );
        if waited.is_err() {
            // The child has PR_SET_PDEATHSIG=SIGKILL, so killing the supervisor kills it too.
            let _ = supervisor.kill();
            let _ = supervisor.wait();
        }
        waited?;
        // SIGKILLed processes finish exiting asynchronously; make "stopped" mean "gone".
        let (pgid, dir) = (self.pid, self.remove_on_exit.clone());
        wait::until_blocking(
            &format!("all processes of {} to exit", self.name),
            REAP_DEADLINE,
            || {
                let mut left = live_processes_in_group(pgid);
                if let Some(dir) = &dir {
                    left.extend(live_processes_mentioning(&dir.to_string_lossy()));
                }
                if left.is_empty() {
                    Ok(())
                } else {
                    Err(anyhow::anyhow!("still running: {left:?}"))
                }
            },
        )
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("warning: {e:#}");
        }
    }
}
