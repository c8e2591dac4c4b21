//! `--signal`: which processes of a step get the signal sent before its time limit.
//!
//! The batch shell is found, whatever the runtime, as the process of the step's user
//! whose first or second argument is the step's script (`<spool>/<job>/slurm_script`,
//! bound at the same path in every runtime): the kernel starts a `#!` script as
//! `interpreter [one option] script`, and a script without `#!` runs as
//! `/bin/sh script`. The runtime's own processes name the script further along
//! their command line (`bwrap … -- script`), and a process of another user is never
//! taken. Since the path holds the job's id, no other step's shell matches. The
//! supervisor looks for the shell as soon as the step runs and remembers it (pid and
//! start time), so a script that `exec`s its program keeps being found.
//!
//! Without `B:`, the signal goes to every descendant of the batch shell (Slurm's
//! steps: what the script started), never to the shell itself nor to the runtime's
//! processes above it (bubblewrap ends the job on `SIGUSR1`).
//!
//! Owns: reading the process table for the step and choosing the targets.
//! Must not touch: the step's state file, the database, the scheduler.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::ProcessIdentity;

/// One process, as `/proc` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Proc {
    pub pid: u32,
    pub parent: u32,
    pub uid: u32,
    pub start_ticks: u64,
    pub argv: Vec<Vec<u8>>,
}

/// Every process on the machine (those that vanish while being read are skipped).
pub(super) fn processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let fields = super::stat_fields(pid)?;
            let uid = std::fs::metadata(e.path()).ok()?.uid();
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            Some(Proc {
                pid,
                parent: fields.get(1)?.parse().ok()?,
                uid,
                start_ticks: fields.get(19)?.parse().ok()?,
                argv: cmdline
                    .split(|b| *b == 0)
                    .filter(|a| !a.is_empty())
                    .map(<[u8]>::to_vec)
                    .collect(),
            })
        })
        .collect()
}

/// The batch shell of the step whose script is `script`, run by `uid`: the earliest
/// started process of `uid` naming the script as its first or second argument.
pub(super) fn batch_shell(procs: &[Proc], script: &Path, uid: u32) -> Option<ProcessIdentity> {
    let script = script.as_os_str().as_encoded_bytes();
    procs
        .iter()
        .filter(|p| p.uid == uid && p.argv.iter().skip(1).take(2).any(|a| a == script))
        .min_by_key(|p| (p.start_ticks, p.pid))
        .map(|p| ProcessIdentity {
            pid: p.pid,
            start_ticks: p.start_ticks,
        })
}

/// Every process descended from `shell`, not the shell itself.
pub(super) fn descendants(procs: &[Proc], shell: u32) -> Vec<ProcessIdentity> {
    let mut children: HashMap<u32, Vec<&Proc>> = HashMap::new();
    for p in procs {
        children.entry(p.parent).or_default().push(p);
    }
    let mut out = Vec::new();
    let mut todo = vec![shell];
    while let Some(pid) = todo.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            if child.pid != shell && !out.iter().any(|o: &ProcessIdentity| o.pid == child.pid) {
                out.push(ProcessIdentity {
                    pid: child.pid,
                    start_ticks: child.start_ticks,
                });
                todo.push(child.pid);
            }
        }
    }
    out
}

/// Send `signal` to `targets` that are still the same processes; how many got it.
pub(super) fn send(targets: &[ProcessIdentity], signal: i32) -> usize {
    let Ok(signal) = nix::sys::signal::Signal::try_from(signal) else {
        return 0;
    };
    targets
        .iter()
        .filter(|t| t.is_alive())
        .filter(|t| {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(t.pid as i32), signal).is_ok()
        })
        .count()
}

/// Send `signal` to the step's batch shell (`remembered` if it is still there, else
/// looked up now), to what the shell started, or to both (`whom`): the early signal
/// (`--signal`, `B:` is the shell alone) and `scancel --signal` alike. Returns a line
/// for the supervisor's log (`label` names the cause) and the shell, to remember.
pub(super) fn signal_shell(
    label: &str,
    signal: i32,
    whom: super::SignalWhom,
    remembered: Option<ProcessIdentity>,
    script: &Path,
    uid: u32,
) -> (String, Option<ProcessIdentity>) {
    let procs = processes();
    let shell = remembered
        .filter(ProcessIdentity::is_alive)
        .or_else(|| batch_shell(&procs, script, uid));
    let Some(shell) = shell else {
        return (
            format!(
                "{label}: no batch shell runs {}; signal {signal} not sent",
                script.display()
            ),
            None,
        );
    };
    let (targets, what) = match whom {
        super::SignalWhom::Batch => (vec![shell], "the batch shell"),
        super::SignalWhom::Steps => (
            descendants(&procs, shell.pid),
            "the batch shell's processes",
        ),
        super::SignalWhom::Full => {
            let mut all = vec![shell];
            all.extend(descendants(&procs, shell.pid));
            (all, "the batch shell and its processes")
        }
    };
    let sent = send(&targets, signal);
    let line = format!(
        "{label}: signal {signal} sent to {sent} of {} process(es) ({what}, shell pid {})",
        targets.len(),
        shell.pid
    );
    (line, Some(shell))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, parent: u32, uid: u32, start: u64, argv: &[&str]) -> Proc {
        Proc {
            pid,
            parent,
            uid,
            start_ticks: start,
            argv: argv.iter().map(|a| a.as_bytes().to_vec()).collect(),
        }
    }

    const SCRIPT: &str = "/spool/7/slurm_script";

    /// bubblewrap's monitor and init (both naming the script late), the shell, a
    /// child of the shell and its grandchild, another user's process naming the path.
    fn table() -> Vec<Proc> {
        vec![
            proc(10, 1, 0, 100, &["atrium", "step", "run", "/spool/7"]),
            proc(11, 10, 1000, 101, &["bwrap", "--unshare-pid", "--", SCRIPT]),
            proc(12, 11, 1000, 102, &["bwrap", "--unshare-pid", "--", SCRIPT]),
            proc(13, 12, 1000, 103, &["/bin/bash", SCRIPT]),
            proc(14, 13, 1000, 104, &["python", "train.py"]),
            proc(15, 14, 1000, 105, &["python", "-c", "worker"]),
            proc(20, 1, 1001, 50, &["cat", SCRIPT]),
            proc(21, 1, 1000, 300, &["less", SCRIPT]),
        ]
    }

    #[test]
    fn the_batch_shell_is_the_users_earliest_process_running_the_script() {
        let shell = batch_shell(&table(), Path::new(SCRIPT), 1000).expect("found");
        assert_eq!(shell.pid, 13);
        assert_eq!(batch_shell(&table(), Path::new(SCRIPT), 1002), None);
        assert_eq!(
            batch_shell(&table(), Path::new("/spool/8/slurm_script"), 1000),
            None
        );
    }

    #[test]
    fn a_shebang_option_still_names_the_shell() {
        let procs = vec![proc(5, 1, 7, 1, &["/bin/bash", "-l", SCRIPT])];
        assert_eq!(
            batch_shell(&procs, Path::new(SCRIPT), 7).map(|p| p.pid),
            Some(5)
        );
    }

    #[test]
    fn without_b_every_process_the_shell_started_gets_it_but_not_the_shell() {
        let mut pids: Vec<u32> = descendants(&table(), 13).iter().map(|p| p.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, [14, 15]);
    }
}
