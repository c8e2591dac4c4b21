//! The privilege boundary: the one place where the portal, running as root, becomes
//! one of its users.
//!
//! Every program the portal runs for a user crosses here, one of two ways:
//! - in a process that is about to exec the user's program (the job trampoline,
//!   `atrium step exec`), by calling [`become_user`] itself;
//! - from the portal, through a [`UserCommand`]: a fresh `atrium step as-user` process,
//!   started from this binary's absolute path with the fixed [`SYSTEM_PATH`]
//!   environment, reads what to run from its standard input, calls [`become_user`],
//!   and only then execs the program with the user's variables. A user's variables
//!   (`PATH`, `LD_PRELOAD`, `LD_LIBRARY_PATH` …) therefore never reach a process
//!   running as root: the dynamic loader of a root process sees only ours.
//!
//! [`become_user`] gives the process a session of its own with no controlling
//! terminal (so nothing the user runs can reach a terminal of the portal: no
//! `TIOCSTI`, no `/dev/tty`), the user's groups, gid and uid, checks that root cannot
//! be regained, and sets the usual umask. Programs run as root are named by absolute
//! path ([`system_program`]).
//!
//! Owns: whom a step becomes ([`Identity`]), the switch, the as-user trampoline.
//! Must not touch: the database, HTTP, the scheduler.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

/// The `PATH` of every process the portal starts, and the only place root looks for
/// a program named without a path.
pub const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The umask a user's processes start with (the portal's own is 077).
pub const USER_UMASK: u32 = 0o022;

/// The umask of the portal itself: nothing it writes is readable by others unless it
/// says so.
pub const PORTAL_UMASK: u32 = 0o077;

/// Exit code of the as-user trampoline when it could not switch or start the program.
const AS_USER_FAILED: i32 = 126;

/// Largest description of a command the trampoline reads.
const MAX_REQUEST: usize = 4 << 20;

/// Whom to become: a user's POSIX identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub user: String,
    pub uid: u32,
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
    pub home: PathBuf,
}

impl Identity {
    /// `user` as the store knows them.
    pub fn from_posix(user: &str, id: crate::domain::identity::PosixIdentity) -> Identity {
        Identity {
            user: user.to_string(),
            uid: id.uid,
            gid: id.gid,
            groups: id.supplementary_gids(),
            home: id.home,
        }
    }

    /// The variables that say who the process is (`HOME`, `USER`, `LOGNAME`, `SHELL`).
    pub fn login_env(&self) -> Vec<(String, String)> {
        vec![
            ("HOME".into(), self.home.display().to_string()),
            ("USER".into(), self.user.clone()),
            ("LOGNAME".into(), self.user.clone()),
            ("SHELL".into(), "/bin/bash".into()),
        ]
    }

    /// Every group of the user, the primary one included.
    fn all_groups(&self) -> Vec<nix::unistd::Gid> {
        use nix::unistd::Gid;
        let mut groups: Vec<Gid> = self.groups.iter().map(|g| Gid::from_raw(*g)).collect();
        if !groups.contains(&Gid::from_raw(self.gid)) {
            groups.push(Gid::from_raw(self.gid));
        }
        groups
    }
}

/// The environment every process the portal starts begins with.
pub fn base_env() -> Vec<(String, String)> {
    vec![
        ("PATH".into(), SYSTEM_PATH.into()),
        ("LANG".into(), "C.UTF-8".into()),
    ]
}

/// Whether the portal runs as root (and so switches to users).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// Set the portal's umask (at start, before it creates anything).
pub fn restrict_umask() {
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(PORTAL_UMASK));
}

/// `name` as root runs it: an absolute path as given, else the first executable file
/// of that name in the system's directories (never the caller's `PATH`), else
/// `/usr/bin/<name>` (which then fails to start with a clear error).
pub fn system_program(name: &str) -> PathBuf {
    if Path::new(name).is_absolute() {
        return PathBuf::from(name);
    }
    SYSTEM_PATH
        .split(':')
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| Path::new("/usr/bin").join(name))
}

/// Why the switch failed.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    #[error("cannot start a new session: {0}")]
    Session(nix::Error),
    #[error("cannot switch to user {user} (uid {uid}): {source}")]
    Identity {
        user: String,
        uid: u32,
        source: nix::Error,
    },
    #[error("switched to uid {uid} but root could be regained")]
    Reversible { uid: u32 },
}

/// Detach this process from the terminal and process group it was started in: a
/// session of its own, with no controlling terminal.
pub fn new_session() -> Result<(), SwitchError> {
    nix::unistd::setsid()
        .map(|_| ())
        .map_err(SwitchError::Session)
}

/// Become `id` for good: a new session with no terminal, then the user's groups, gid
/// and uid (when the portal runs as root; unprivileged, the process stays who it is),
/// checked so that root cannot be regained, and the users' umask. The process must
/// not be a process group leader (spawn it without `process_group`).
pub fn become_user(id: &Identity) -> Result<(), SwitchError> {
    new_session()?;
    if is_root() {
        switch_ids(id).map_err(|source| SwitchError::Identity {
            user: id.user.clone(),
            uid: id.uid,
            source,
        })?;
        let regained = nix::unistd::setuid(nix::unistd::Uid::from_raw(0)).is_ok();
        if id.uid != 0 && (regained || nix::unistd::geteuid().is_root()) {
            return Err(SwitchError::Reversible { uid: id.uid });
        }
    }
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(USER_UMASK));
    Ok(())
}

fn switch_ids(id: &Identity) -> nix::Result<()> {
    use nix::unistd::{getgid, getuid, setgid, setgroups, setuid, Gid, Uid};
    setgroups(&id.all_groups())?;
    setgid(Gid::from_raw(id.gid))?;
    setuid(Uid::from_raw(id.uid))?;
    if getuid().as_raw() != id.uid || getgid().as_raw() != id.gid {
        return Err(nix::errno::Errno::EPERM);
    }
    Ok(())
}

/// Act as `id` for file access only (effective ids and groups) while the real and
/// saved ids stay root; for a runtime whose client must stay root. Returns the
/// groups to give back to [`resume_root`].
pub fn assume_user(id: &Identity) -> nix::Result<Vec<nix::unistd::Gid>> {
    use nix::unistd::{getgroups, setegid, seteuid, setgroups, Gid, Uid};
    let saved = getgroups()?;
    setgroups(&id.all_groups())?;
    setegid(Gid::from_raw(id.gid))?;
    seteuid(Uid::from_raw(id.uid))?;
    Ok(saved)
}

/// Back to root after [`assume_user`].
pub fn resume_root(groups: &[nix::unistd::Gid]) -> nix::Result<()> {
    use nix::unistd::{setegid, seteuid, setgroups, Gid, Uid};
    seteuid(Uid::from_raw(0))?;
    setegid(Gid::from_raw(0))?;
    setgroups(groups)
}

/// Run `write` (bytes into a user's file, through a descriptor the user's own
/// process opened) on this thread as the user's own write would be judged: the
/// thread's file-system ids become the user's (`setfsuid`, `setfsgid`: the blocks
/// ext4 reserves for root, `s_resuid` 0 by default, are not the user's), and its
/// effective set loses `CAP_SYS_RESOURCE` (exceeding disk quotas and those reserved
/// blocks) and `CAP_FSETID` (keeping set-user-ID bits that a write clears). Both
/// come back after the call: the thread is one of the runtime's, used again for
/// other work (the permitted set keeps the capabilities). Disk quotas charge the
/// file's owner, the user, who now meets their hard limit as their own process would.
/// The ids are per thread: nothing else of the portal changes.
pub fn write_as_user(
    uid: u32,
    gid: u32,
    write: impl FnOnce() -> std::io::Result<()>,
) -> std::io::Result<()> {
    use nix::unistd::{setfsgid, setfsuid, Gid, Uid};
    use rustix::thread::{capabilities, set_capabilities, CapabilitySet};
    let dropped = CapabilitySet::SYS_RESOURCE | CapabilitySet::FSETID;
    let before = capabilities(None).ok();
    let lowered = before
        .filter(|b| b.effective.intersects(dropped))
        .and_then(|b| {
            let mut less = b;
            less.effective.remove(dropped);
            set_capabilities(None, less).ok().map(|()| b)
        });
    let old_gid = setfsgid(Gid::from_raw(gid));
    let old_uid = setfsuid(Uid::from_raw(uid));
    let out = write();
    setfsuid(old_uid);
    setfsgid(old_gid);
    if let Some(b) = lowered {
        if let Err(e) = set_capabilities(None, b) {
            tracing::error!(error = %e, "a writing thread could not take its capabilities back");
        }
    }
    out
}

/// A program the portal runs as a user: started through `atrium step as-user`, which
/// switches first and execs the program with exactly `env`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserCommand {
    pub identity: Identity,
    /// An absolute path.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The program's whole environment, in order (a later value of a name wins).
    pub env: Vec<(String, String)>,
    /// Entered as the user, after the switch.
    pub cwd: Option<PathBuf>,
}

impl UserCommand {
    /// `program` (an absolute path: see [`system_program`]) as `identity`, with the
    /// fixed environment and the user's login variables.
    pub fn new(identity: &Identity, program: PathBuf) -> UserCommand {
        let mut env = base_env();
        env.extend(identity.login_env());
        UserCommand {
            identity: identity.clone(),
            program,
            args: Vec::new(),
            env,
            cwd: None,
        }
    }

    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    pub fn envs<'a>(mut self, vars: impl IntoIterator<Item = &'a (String, String)>) -> Self {
        self.env.extend(vars.into_iter().cloned());
        self
    }

    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Start it: the trampoline from this binary's own path, with nothing of the
    /// portal's environment, its standard output and error as given. Returns the child
    /// and its standard input, which the program reads once the request is consumed.
    pub async fn spawn(
        &self,
        stdout: Stdio,
        stderr: Stdio,
    ) -> std::io::Result<(tokio::process::Child, tokio::process::ChildStdin)> {
        let exe = std::env::current_exe()?;
        tracing::debug!(user = %self.identity.user, uid = self.identity.uid, program = %self.program.display(), "running as a user");
        let request = serde_json::to_vec(self).map_err(std::io::Error::other)?;
        let mut child = tokio::process::Command::new(exe)
            .arg("step")
            .arg("as-user")
            .env_clear()
            .envs(base_env())
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no standard input"))?;
        stdin
            .write_all(format!("{}\n", request.len()).as_bytes())
            .await?;
        stdin.write_all(&request).await?;
        Ok((child, stdin))
    }
}

/// `atrium step as-user`: read a [`UserCommand`] from standard input (its length on
/// a line, then its JSON), become its user, enter its directory and exec its program;
/// the rest of standard input is the program's. Returns only on failure.
pub fn as_user_main() -> anyhow::Result<()> {
    let fail = |what: String| -> ! {
        let _ = writeln!(std::io::stderr(), "atrium: {what}");
        std::process::exit(AS_USER_FAILED)
    };
    let request = read_request().unwrap_or_else(|e| fail(format!("bad request: {e}")));
    let command: UserCommand =
        serde_json::from_slice(&request).unwrap_or_else(|e| fail(format!("bad request: {e}")));
    if !command.program.is_absolute() {
        fail(format!(
            "{} is not an absolute path",
            command.program.display()
        ));
    }
    if let Err(e) = become_user(&command.identity) {
        fail(e.to_string());
    }
    if let Some(dir) = &command.cwd {
        if let Err(e) = std::env::set_current_dir(dir) {
            fail(format!("cannot enter {}: {e}", dir.display()));
        }
    }
    close_inherited_fds();
    let err = std::process::Command::new(&command.program)
        .args(&command.args)
        .env_clear()
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .exec();
    fail(format!("cannot start {}: {err}", command.program.display()))
}

/// The request on standard input, read without reading past it (the rest is the
/// program's): a decimal length and a newline, then that many bytes.
fn read_request() -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    loop {
        let mut byte = [0u8; 1];
        if nix::unistd::read(0, &mut byte)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if byte[0] == b'\n' {
            break;
        }
        if line.len() > 12 {
            return Err(std::io::Error::other("length line too long"));
        }
        line.push(byte[0]);
    }
    let len: usize = std::str::from_utf8(&line)
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n <= MAX_REQUEST)
        .ok_or_else(|| std::io::Error::other("bad length"))?;
    let mut request = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        let n = nix::unistd::read(0, &mut request[filled..])?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        filled += n;
    }
    Ok(request)
}

/// Mark every descriptor above stderr close-on-exec: the portal opens its own that
/// way, but one it inherited (from a service manager, a shell) would otherwise reach
/// a user's process.
pub fn close_inherited_fds() {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        let _ = fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_runs_system_programs_by_absolute_path() {
        assert_eq!(
            system_program("/opt/x/bin/tool"),
            PathBuf::from("/opt/x/bin/tool")
        );
        let sh = system_program("sh");
        assert!(sh.is_absolute(), "{}", sh.display());
        assert!(
            sh.starts_with("/usr") || sh.starts_with("/bin"),
            "{}",
            sh.display()
        );
        assert_eq!(
            system_program("no-such-program-anywhere"),
            PathBuf::from("/usr/bin/no-such-program-anywhere")
        );
    }

    #[test]
    fn a_users_variables_come_after_the_fixed_ones() {
        let id = Identity {
            user: "alice".into(),
            uid: 20101,
            gid: 20101,
            groups: vec![],
            home: "/home/alice".into(),
        };
        let vars = vec![("PATH".to_string(), "/home/alice/bin".to_string())];
        let c = UserCommand::new(&id, system_program("sbatch")).envs(&vars);
        assert_eq!(c.env.first().map(|(k, _)| k.as_str()), Some("PATH"));
        assert_eq!(
            c.env.last(),
            Some(&("PATH".to_string(), "/home/alice/bin".to_string()))
        );
        assert!(c.program.is_absolute());
    }
}
