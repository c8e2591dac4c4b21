//! `atrium step run DIR` (the supervisor, stays root) and `atrium step exec DIR`
//! (the trampoline: drops privileges, opens the output as the user, execs the
//! container runtime's command). A runtime whose client must stay root (docker)
//! gets the user's identity only while the trampoline opens the job's files, and
//! gives it to the container instead.
//! Must not touch: the database, the scheduler, the runtimes' command lines (those
//! are `runtime`'s).

use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use scheduler::JobOutcome;
use tokio::signal::unix::{signal, SignalKind};

use super::early_signal;
use super::runtime::{ContainerRuntime, Host, StepFiles};
use super::terminal;
use super::usage::{self, Usage};
use super::{read_spec, write_private, write_state, ProcessIdentity, StepSpec, StepState};
use crate::privilege;

/// Exit code of the trampoline when the job could not be set up.
pub const SETUP_FAILED: i32 = 121;
/// How a setup failure that is the site's (not the job's) begins its message: the
/// pages say "the cluster could not start it" for these.
pub const SITE_FAILURE: &str = "the cluster could not start the job: the folder ";
/// How often a starting step looks for the missing folder of its output.
const OUTPUT_FOLDER_POLL: Duration = Duration::from_millis(20);
const MEMORY_POLL: Duration = Duration::from_millis(250);
/// Tells the trampoline which cgroup to join.
const CGROUP_ENV: &str = "ATRIUM_STEP_CGROUP";
/// How long removing a step's container may take.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How often, and how many times, the supervisor looks for the batch shell of a
/// step with `--signal` (to remember it before the script can `exec` away).
const SHELL_LOOK: Duration = Duration::from_millis(200);
const SHELL_LOOKS: u32 = 150;
/// How long the terminal of an interactive job that ended may take to pass on what
/// it still holds.
const TERMINAL_DRAIN: Duration = Duration::from_secs(5);

/// Run the step in `dir` to its end and record how it ended.
pub async fn run(dir: &Path) -> anyhow::Result<()> {
    privilege::new_session()?;
    let spec = read_spec(dir)?;
    let me = std::process::id();
    let identity = ProcessIdentity::of(me).context("reading /proc/self/stat")?;
    let mut state = StepState {
        job: spec.job.clone(),
        supervisor_pid: me,
        supervisor_start: identity.start_ticks,
        phase: "starting".into(),
        started_at_ms: crate::util::now_ms(),
        ..Default::default()
    };
    write_state(dir, &state)?;
    let mut term = signal(SignalKind::terminate())?;
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut usr2 = signal(SignalKind::user_defined2())?;
    // An interactive job's terminal, and its owner attached to it: the command starts
    // once someone reads what it prints.
    let mut pty = None;
    if spec.pty {
        let p = terminal::open(spec.uid, spec.gid).context("opening the job's terminal")?;
        if spec.pty_raw {
            terminal::make_raw(&p.master).context("making the job's terminal raw")?;
        }
        let socket = dir.join(terminal::SOCKET);
        let attached = tokio::select! {
            attached = terminal::await_attachment(&socket) => attached,
            _ = term.recv() => Err(std::io::Error::other("cancelled before its owner attached")),
        };
        match attached {
            Ok(connection) => pty = Some((p, connection)),
            Err(e) => {
                state.reason = Some("error".into());
                state.error = Some(e.to_string());
                state.outcome = Some(JobOutcome::Exited(1));
                state.phase = "finished".into();
                state.ended_at_ms = Some(crate::util::now_ms());
                write_state(dir, &state)?;
                return Ok(());
            }
        }
    }
    let cgroup = spec.memory_limit_mb.and_then(|mb| cgroup_v2(&spec.job, mb));
    let exe = std::env::current_exe()?;
    let mut command = tokio::process::Command::new(exe);
    if let Some(cg) = &cgroup {
        command.env(CGROUP_ENV, cg);
    }
    // An interactive job's terminal: its end is the job's standard input and output
    // (the trampoline makes it the controlling terminal, and the error too).
    let (stdin, stdout) = match &pty {
        Some((p, _)) => (
            std::process::Stdio::from(p.slave.try_clone()?),
            std::process::Stdio::from(p.slave.try_clone()?),
        ),
        None => (std::process::Stdio::null(), std::process::Stdio::null()),
    };
    let mut child = command
        .arg("step")
        .arg("exec")
        .arg(dir)
        .stdin(stdin)
        .stdout(stdout)
        .stderr(std::process::Stdio::piped())
        // No process group of its own here: the trampoline makes a session of its
        // own (and with it the group the signals below go to), which a group leader
        // could not.
        .spawn()?;
    // The command holds what it gave the child (the terminal's end among them).
    drop(command);
    let pid = child.id().context("the job exited at once")?;
    // Only the job holds its end now: when its processes are gone, the relay sees it.
    let relay = pty.map(|(p, connection)| {
        drop(p.slave);
        tokio::spawn(terminal::serve(p.master, connection, pid as i32))
    });
    let mut setup_errors = child.stderr.take();
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        if let Some(e) = setup_errors.as_mut() {
            use tokio::io::AsyncReadExt;
            let _ = e.read_to_string(&mut text).await;
        }
        text
    });
    state.phase = "running".into();
    state.child_pid = Some(pid);
    write_state(dir, &state)?;

    let group = Pid::from_raw(pid as i32);
    let limit = spec
        .time_limit_secs
        .map(|s| tokio::time::Instant::now() + Duration::from_secs(s));
    // With a cgroup the kernel enforces the limit; otherwise sample.
    let memory_limit_kb = match cgroup {
        Some(_) => None,
        None => spec.memory_limit_mb.map(|m| m * 1024),
    };
    let mut kill_at: Option<tokio::time::Instant> = None;
    let mut reason: Option<&'static str> = None;
    // `--signal`: armed for this run, `seconds_before` the limit (at once when the
    // limit is shorter than that).
    let script = StepFiles::in_dir(dir).script;
    let shell_uid = if spec.drop_privileges {
        spec.uid
    } else {
        nix::unistd::getuid().as_raw()
    };
    let mut early = spec.signal.zip(spec.time_limit_secs).map(|(s, secs)| {
        let at = Duration::from_secs(secs.saturating_sub(s.seconds_before));
        (s, tokio::time::Instant::now() + at)
    });
    let mut shell: Option<ProcessIdentity> = None;
    let mut shell_looks = SHELL_LOOKS;
    let mut look = tokio::time::interval(SHELL_LOOK);
    // The first sample one period in: a short job costs no walk through /proc.
    let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + MEMORY_POLL, MEMORY_POLL);
    let mut memory = ProcessSampler::new(pid);
    // Usage: the first sample one interval in (a short job has its totals only).
    let mut usage = Usage::new(state.started_at_ms, spec.usage_interval_secs as u32);
    usage.node = spec.node.clone();
    let every = Duration::from_secs(spec.usage_interval_secs.max(1));
    let mut usage_tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    usage_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let status = loop {
        let stop = |reason: &mut Option<&'static str>,
                    kill_at: &mut Option<tokio::time::Instant>,
                    why: &'static str| {
            if reason.is_none() {
                *reason = Some(why);
            }
            if kill_at.is_none() {
                let _ = killpg(group, Signal::SIGTERM);
                *kill_at =
                    Some(tokio::time::Instant::now() + Duration::from_secs(spec.kill_grace_secs));
            }
        };
        tokio::select! {
            status = child.wait() => break status?,
            _ = term.recv() => stop(&mut reason, &mut kill_at, "cancelled"),
            _ = usr1.recv() => stop(&mut reason, &mut kill_at, "time_limit"),
            _ = usr2.recv() => {
                // `scancel --signal`: the portal named the signal in the step's folder.
                let asked = std::fs::read(dir.join(super::SIGNAL_FILE))
                    .ok()
                    .and_then(|b| serde_json::from_slice::<super::SignalRequest>(&b).ok());
                let _ = std::fs::remove_file(dir.join(super::SIGNAL_FILE));
                if let Some(asked) = asked {
                    let (line, found) = early_signal::signal_shell("scancel --signal", asked.signal, asked.whom, shell, &script, shell_uid);
                    shell = found.or(shell);
                    eprintln!("{line}");
                }
            }
            _ = async { match limit { Some(l) => tokio::time::sleep_until(l).await, None => std::future::pending().await } }, if kill_at.is_none() => {
                stop(&mut reason, &mut kill_at, "time_limit")
            }
            _ = async { match kill_at { Some(k) => tokio::time::sleep_until(k).await, None => std::future::pending().await } } => {
                let _ = killpg(group, Signal::SIGKILL);
                kill_at = Some(tokio::time::Instant::now() + Duration::from_secs(3600));
            }
            _ = look.tick(), if early.is_some() && shell.is_none() && shell_looks > 0 => {
                shell_looks -= 1;
                shell = early_signal::batch_shell(&early_signal::processes(), &script, shell_uid);
            }
            _ = async { match early { Some((_, at)) => tokio::time::sleep_until(at).await, None => std::future::pending().await } }, if early.is_some() && kill_at.is_none() => {
                if let Some((signal, _)) = early.take() {
                    let whom = if signal.batch_only { super::SignalWhom::Batch } else { super::SignalWhom::Steps };
                    let (line, _) = early_signal::signal_shell("--signal", signal.signal, whom, shell, &script, shell_uid);
                    eprintln!("{line}");
                }
            }
            _ = usage_tick.tick(), if spec.usage_interval_secs > 0 && kill_at.is_none() => {
                let sample = usage_sample(&mut memory, cgroup.as_deref(), &spec.sampled_gpus, &spec.sampled_migs).await;
                usage.record(&sample);
                if let Err(e) = write_private(&dir.join(usage::USAGE_FILE), &serde_json::to_vec(&usage)?, 0o600, false) {
                    eprintln!("cannot write the usage samples: {e}");
                }
            }
            _ = poll.tick(), if memory_limit_kb.is_some() && kill_at.is_none() => {
                if let Some(max) = memory_limit_kb {
                    if memory.sample_kb() > max {
                        stop(&mut reason, &mut kill_at, "out_of_memory");
                    }
                }
            }
        }
    };
    if let Some(mut relay) = relay {
        // What the job printed last is relayed whole; a process of the job's that
        // still holds the terminal is not waited for long.
        if tokio::time::timeout(TERMINAL_DRAIN, &mut relay)
            .await
            .is_err()
        {
            relay.abort();
        }
    }
    // The kernel's account of every process the job waited for: the trampoline has
    // been reaped, nothing else was started yet.
    let (mut cpu_seconds, mut max_rss, mut storage_read) = usage::children_usage();
    // Nothing of the job outlives it.
    remove_container(&spec).await;
    let _ = killpg(group, Signal::SIGKILL);
    let _ = std::fs::remove_file(StepFiles::in_dir(dir).env_file);
    let setup = errors.await.unwrap_or_default();
    if let Some(c) = cgroup.as_deref().and_then(usage::cgroup_usage) {
        // The cgroup's, before it goes.
        cpu_seconds = cpu_seconds.max(c.cpu_seconds);
        max_rss = max_rss.max(c.peak_bytes.unwrap_or(c.memory_bytes));
        storage_read = storage_read.max(c.read_bytes.unwrap_or(0));
    }
    usage.finish(crate::util::now_ms(), cpu_seconds, max_rss);
    if usage.read_source.is_some() {
        usage.finish_reads(storage_read);
    }
    if let Err(e) = write_private(
        &dir.join(usage::USAGE_FILE),
        &serde_json::to_vec(&usage)?,
        0o600,
        true,
    ) {
        eprintln!("cannot write the usage samples: {e}");
    }
    if let Some(cg) = &cgroup {
        if cgroup_oom_killed(cg) {
            reason = Some("out_of_memory");
        }
        let _ = std::fs::write(cg.join("cgroup.kill"), "1");
        let _ = std::fs::remove_dir(cg);
    }
    let outcome = match (reason, status.code(), status.signal()) {
        (Some("out_of_memory"), _, _) => JobOutcome::OutOfMemory,
        (_, Some(code), _) => JobOutcome::Exited(code),
        (_, None, Some(sig)) => JobOutcome::Signaled(sig),
        _ => JobOutcome::Signaled(9),
    };
    if status.code() == Some(SETUP_FAILED) && !setup.trim().is_empty() {
        state.reason = Some("error".into());
        state.error = Some(setup.trim().to_string());
    } else {
        state.reason = reason.map(str::to_string);
    }
    state.outcome = Some(outcome);
    state.phase = "finished".into();
    state.ended_at_ms = Some(crate::util::now_ms());
    write_state(dir, &state)?;
    Ok(())
}

/// Linux reports process times in `/proc/PID/stat` in `USER_HZ`, 100 per second.
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// One usage sample: the job's cgroup where it has one (its counters include every
/// process that ever ran in it), else a walk of its processes; and its GPUs.
async fn usage_sample(
    processes: &mut ProcessSampler,
    cgroup: Option<&Path>,
    gpus: &[u32],
    migs: &[usage::MigSlice],
) -> usage::Sample {
    let p = processes.sample(true);
    let counters = cgroup.and_then(usage::cgroup_usage);
    let (cpu_seconds, rss_bytes) = match counters {
        Some(c) => (c.cpu_seconds, c.memory_bytes),
        None => (p.cpu_ticks as f64 / CLOCK_TICKS_PER_SECOND, p.rss_kb * 1024),
    };
    // Each process's I/O accounting sees every read call; the cgroup's io.stat, where
    // there is one, also the storage reads of processes that ended between samples.
    let read = processes.read_io().map(|(chars, bytes)| {
        match counters.and_then(|c| c.read_bytes) {
            Some(cgroup_bytes) => usage::ReadSample {
                chars,
                bytes: bytes.max(cgroup_bytes),
                source: "read calls: /proc/PID/io of the job's processes; storage: the job's cgroup (io.stat)",
            },
            None => usage::ReadSample {
                chars,
                bytes,
                source: "/proc/PID/io of the job's processes (rchar: read calls; read_bytes: storage)",
            },
        }
    });
    usage::Sample {
        at_ms: crate::util::now_ms(),
        cpu_seconds,
        rss_bytes,
        read,
        gpus: [
            usage::gpu_samples(gpus).await,
            usage::mig_samples(migs).await,
        ]
        .concat(),
    }
}

/// The job's cgroup v2 directory when the memory controller can be delegated to
/// it (`/sys/fs/cgroup/atrium/job_<job>` with `memory.max`); `None` otherwise.
fn cgroup_v2(job: &str, limit_mb: u64) -> Option<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).ok()?;
    if !controllers.split_whitespace().any(|c| c == "memory") {
        return None;
    }
    let parent = root.join("atrium");
    std::fs::create_dir_all(&parent).ok()?;
    std::fs::write(root.join("cgroup.subtree_control"), "+memory").ok()?;
    std::fs::write(parent.join("cgroup.subtree_control"), "+memory").ok()?;
    let dir = parent.join(format!("job_{job}"));
    std::fs::create_dir_all(&dir).ok()?;
    let bytes = (limit_mb * 1024 * 1024).to_string();
    if std::fs::write(dir.join("memory.max"), bytes).is_err() {
        let _ = std::fs::remove_dir(&dir);
        return None;
    }
    let _ = std::fs::write(dir.join("memory.swap.max"), "0");
    Some(dir)
}

/// Whether the kernel killed a process of the cgroup for memory.
fn cgroup_oom_killed(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("memory.events"))
        .ok()
        .and_then(|e| {
            e.lines()
                .find_map(|l| l.strip_prefix("oom_kill ").map(|n| n.trim() != "0"))
        })
        .unwrap_or(false)
}

/// Samples of a job's processes (resident memory, CPU time), cheaply: a walk of
/// `/proc` (every [`FULL_WALK_EVERY`]th memory sample and at every usage sample) lists
/// the machine's processes but reads only those it has not seen (a new process belongs
/// to the job if its parent does, or if it is in the job's session or process group:
/// that is decided at its birth) and the job's own; the others' are read again every
/// [`RECHECK_EVERY`]th walk. In between walks, the job's known processes are read
/// again. A process that leaves the tree (double-forking, `setsid`) stays counted once
/// seen. Without this, every supervisor read every process of the machine at each walk:
/// a cost that grew with the number of jobs, and all the supervisors' with its square.
struct ProcessSampler {
    leader: u32,
    /// The job's processes at the last look: (pid, start time in ticks).
    known: Vec<(u32, u64)>,
    /// The machine's other processes at the last walk.
    others: std::collections::HashSet<u32>,
    samples: u32,
    walks: u32,
    /// The latest `/proc/PID/io` (`rchar`, `read_bytes`) of each process of the job
    /// seen, by (pid, start time): an ended process keeps its last reading.
    io: std::collections::HashMap<(u32, u64), (u64, u64)>,
}

/// The most processes whose I/O readings are kept apart; beyond, the ended ones are
/// summed into one.
const MAX_IO_KEPT: usize = 4096;

/// Every so many walks, the other processes are read again (a pid reused since).
const RECHECK_EVERY: u32 = 12;

/// A full walk of `/proc` every so many samples (with [`MEMORY_POLL`]: every 5 s).
const FULL_WALK_EVERY: u32 = 20;

/// What one look at the job's processes read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ProcessSample {
    rss_kb: u64,
    /// User and system time of the processes and of the children they waited for.
    cpu_ticks: u64,
}

impl ProcessSampler {
    fn new(leader: u32) -> Self {
        Self {
            leader,
            known: Vec::new(),
            others: Default::default(),
            samples: 0,
            walks: 0,
            io: Default::default(),
        }
    }

    /// Read `/proc/PID/io` of the job's processes known from the last look; the
    /// totals over every process seen so far (`rchar`, `read_bytes`), `None` when no
    /// process's could be read (no I/O accounting in this kernel).
    fn read_io(&mut self) -> Option<(u64, u64)> {
        for &(pid, start) in &self.known {
            if let Some(io) = std::fs::read_to_string(format!("/proc/{pid}/io"))
                .ok()
                .and_then(|t| usage::proc_io(&t))
            {
                let seen = self.io.entry((pid, start)).or_default();
                *seen = (seen.0.max(io.0), seen.1.max(io.1));
            }
        }
        // Bounded: a job that starts many short processes keeps their sum only.
        if self.io.len() > MAX_IO_KEPT {
            let alive: std::collections::HashSet<(u32, u64)> = self.known.iter().copied().collect();
            let (mut chars, mut bytes) = (0, 0);
            self.io.retain(|key, v| {
                if alive.contains(key) {
                    return true;
                }
                chars += v.0;
                bytes += v.1;
                false
            });
            let ended = self.io.entry((0, 0)).or_default();
            *ended = (ended.0 + chars, ended.1 + bytes);
        }
        (!self.io.is_empty()).then(|| {
            self.io
                .values()
                .fold((0, 0), |(c, b), &(ci, bi)| (c + ci, b + bi))
        })
    }

    /// The job's processes now, from a walk of `/proc` (see [`ProcessSampler`]).
    fn walk(&mut self) -> Vec<JobProcess> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let listed: Vec<u32> = entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .collect();
        let recheck = self.walks.is_multiple_of(RECHECK_EVERY);
        self.walks = self.walks.wrapping_add(1);
        let known: std::collections::HashMap<u32, u64> = self.known.iter().copied().collect();
        let mut procs: Vec<JobProcess> = listed
            .iter()
            .filter(|pid| recheck || known.contains_key(pid) || !self.others.contains(pid))
            .filter_map(|&pid| Some(JobProcess::from_stat(pid, &super::stat_fields(pid)?)))
            .collect();
        // Parents start before their children: one pass in that order finds the tree,
        // a few more where they started in the same tick.
        procs.sort_by_key(|p| (p.start, p.pid));
        let leader = u64::from(self.leader);
        let mut job = std::collections::HashSet::new();
        loop {
            let before = job.len();
            for p in &procs {
                if known.get(&p.pid) == Some(&p.start)
                    || p.pid == self.leader
                    || p.group == leader
                    || p.session == leader
                    || job.contains(&p.parent)
                {
                    job.insert(p.pid);
                }
            }
            if job.len() == before {
                break;
            }
        }
        self.others = listed
            .into_iter()
            .filter(|pid| !job.contains(pid))
            .collect();
        let found: Vec<JobProcess> = procs
            .into_iter()
            .filter(|p| job.contains(&p.pid) && !p.zombie)
            .collect();
        self.known = found.iter().map(|p| (p.pid, p.start)).collect();
        found
    }

    /// The job's resident memory now (kB), walking `/proc` every so often.
    fn sample_kb(&mut self) -> u64 {
        let full = self.samples.is_multiple_of(FULL_WALK_EVERY);
        self.sample(full).rss_kb
    }

    /// The job's processes now; `full`: walk all of `/proc` for them.
    fn sample(&mut self, full: bool) -> ProcessSample {
        self.samples = self.samples.wrapping_add(1);
        let sum = |procs: &mut dyn Iterator<Item = JobProcess>| {
            procs.fold(ProcessSample::default(), |s, p| ProcessSample {
                rss_kb: s.rss_kb + p.rss_kb,
                cpu_ticks: s.cpu_ticks + p.cpu_ticks,
            })
        };
        if full {
            return sum(&mut self.walk().into_iter());
        }
        let mut alive = Vec::with_capacity(self.known.len());
        self.known.retain(|&(pid, start)| {
            match super::stat_fields(pid).map(|f| JobProcess::from_stat(pid, &f)) {
                // Still there, and not another process under a reused pid.
                Some(p) if p.start == start && !p.zombie => {
                    alive.push(p);
                    true
                }
                _ => false,
            }
        });
        sum(&mut alive.into_iter())
    }
}

/// One process of a job, from its `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct JobProcess {
    pid: u32,
    parent: u32,
    session: u64,
    group: u64,
    /// Start time after boot, in clock ticks (tells a reused pid apart).
    start: u64,
    rss_kb: u64,
    /// `utime + stime + cutime + cstime`, in clock ticks.
    cpu_ticks: u64,
    /// Ended, not yet reaped.
    zombie: bool,
}

impl JobProcess {
    /// From the fields of `stat` after the command name (`super::stat_fields`).
    fn from_stat(pid: u32, fields: &[String]) -> JobProcess {
        let num = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
        JobProcess {
            pid,
            parent: num(1).unwrap_or(0) as u32,
            group: num(2).unwrap_or(0),
            session: num(3).unwrap_or(0),
            start: num(19).unwrap_or(0),
            // Field 24 of stat (index 21 here) is the resident set in pages.
            rss_kb: num(21).unwrap_or(0) * 4,
            cpu_ticks: (11..=14).filter_map(num).sum(),
            zombie: fields.first().is_some_and(|state| state == "Z"),
        }
    }
}

/// The job's processes: every process descended from its first process `leader`, or
/// in the session or process group it made (bubblewrap's sandbox is a session of its
/// own, still in the tree). Walks all of `/proc`.
#[cfg(test)]
fn job_processes(leader: u32) -> Vec<JobProcess> {
    ProcessSampler::new(leader).walk()
}

/// Remove the step's container, which may outlive its runtime's client when that
/// was killed; nothing to do for runtimes without one.
async fn remove_container(spec: &StepSpec) {
    let runtime = spec.runtime.runtime();
    let Ok(host) = Host::probe(runtime) else {
        return;
    };
    let Some(argv) = runtime.cleanup_argv(spec, &host) else {
        return;
    };
    let Some((program, args)) = argv.split_first() else {
        return;
    };
    if spec.drop_privileges && !runtime.needs_root_client() {
        let cleanup = crate::privilege::UserCommand::new(&spec.identity(), PathBuf::from(program))
            .args(args.iter().cloned())
            .envs(&runtime.env(spec, &host));
        let run = async {
            let (mut child, stdin) = cleanup
                .spawn(std::process::Stdio::null(), std::process::Stdio::null())
                .await?;
            drop(stdin);
            child.wait().await
        };
        let _ = tokio::time::timeout(CLEANUP_TIMEOUT, run).await;
        return;
    }
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(runtime.env(spec, &host))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    let _ = tokio::time::timeout(CLEANUP_TIMEOUT, command.status()).await;
}

/// The trampoline: become the user, enter the working directory, open the output
/// as the user, and exec the runtime. Returns only on failure.
pub fn exec(dir: &Path) -> anyhow::Result<()> {
    let mut spec = read_spec(dir)?;
    let fail = |what: String| -> ! {
        eprintln!("{what}");
        std::process::exit(SETUP_FAILED)
    };
    if let Some(cg) = std::env::var_os(CGROUP_ENV) {
        let procs = Path::new(&cg).join("cgroup.procs");
        if let Err(e) = std::fs::write(&procs, std::process::id().to_string()) {
            fail(format!(
                "cannot join the job's cgroup {}: {e}",
                procs.display()
            ));
        }
    }
    let runtime: &dyn ContainerRuntime = spec.runtime.runtime();
    let host = Host::probe(runtime).unwrap_or_else(|e| fail(e));
    if let Err(e) = runtime.check(&spec) {
        fail(e);
    }
    let files = StepFiles::in_dir(dir);
    if let Some(text) = runtime.env_file(&spec) {
        if let Err(e) = write_private(&files.env_file, text.as_bytes(), 0o600, false) {
            fail(format!("cannot write {}: {e}", files.env_file.display()));
        }
    }
    // A root client keeps root (real and saved ids) and takes the user's identity
    // as its effective one only until the job's files are open.
    let root_client = spec.drop_privileges && runtime.needs_root_client();
    let identity = spec.identity();
    let saved_groups = if root_client {
        if let Err(e) = privilege::new_session() {
            fail(e.to_string());
        }
        match privilege::assume_user(&identity) {
            Ok(groups) => Some(groups),
            Err(e) => fail(format!("cannot act as user {}: {e}", spec.user)),
        }
    } else {
        // The one switch from root to the user (a session of its own, no terminal).
        if let Err(e) = privilege::become_user(&identity) {
            fail(e.to_string());
        }
        None
    };
    if spec.pty {
        // The session just made takes the job's terminal (its standard input) as its
        // controlling terminal: job control, ^C, the window's size.
        if let Err(e) = rustix::process::ioctl_tiocsctty(std::io::stdin()) {
            fail(format!("cannot take the job's terminal: {e}"));
        }
    }
    if let Err(e) = std::env::set_current_dir(&spec.workdir) {
        fail(format!(
            "cannot enter the working directory {}: {e}",
            spec.workdir.display()
        ));
    }
    // A folder of the site's that the job binds and that is missing (storage not
    // mounted, a typo in the configuration) is the site's failure, not the script's:
    // said as such before the runtime would fail on it with its own words.
    for m in &spec.mounts {
        if let Err(e) = std::fs::metadata(&m.source) {
            let why = match e.kind() {
                std::io::ErrorKind::NotFound => "does not exist".to_string(),
                std::io::ErrorKind::PermissionDenied => "cannot be reached".to_string(),
                _ => e.to_string(),
            };
            fail(format!(
                "{SITE_FAILURE}{} (bound at {}) {why}",
                m.source.display(),
                m.target.display()
            ));
        }
    }
    // Opened as the user (the switch is done), never a terminal: a job's output is
    // its user's alone unless they share it. Always `O_APPEND` (standard output and
    // error may share the file); emptied first unless `--open-mode=append`.
    let mut flags = nix::fcntl::OFlag::O_NOCTTY;
    if !spec.append_output {
        flags |= nix::fcntl::OFlag::O_TRUNC;
    }
    let open_now = |p: &PathBuf| {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(flags.bits())
            .open(p)
    };
    // A folder the submitting program makes just after `sbatch` returns may not be
    // there yet: wait for it a while (as the user, who must be able to see it).
    let folder_deadline =
        std::time::Instant::now() + Duration::from_secs(spec.output_folder_wait_secs);
    let open = |p: &PathBuf| loop {
        match open_now(p) {
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && std::time::Instant::now() < folder_deadline =>
            {
                std::thread::sleep(OUTPUT_FOLDER_POLL);
            }
            other => break other,
        }
    };
    // An interactive job writes to its terminal (this process's standard output), not
    // to files.
    let terminal = |what: &str| -> std::fs::File {
        use std::os::fd::AsFd;
        std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .map(std::fs::File::from)
            .unwrap_or_else(|e| fail(format!("cannot give the job its terminal ({what}): {e}")))
    };
    let (stdin, stdout, stderr) = if spec.pty {
        (
            std::process::Stdio::from(terminal("input")),
            terminal("output"),
            terminal("errors"),
        )
    } else {
        let stdout = open(&spec.stdout).unwrap_or_else(|e| {
            fail(format!(
                "cannot open the output file {}: {e}",
                spec.stdout.display()
            ))
        });
        let stderr = match &spec.stderr {
            Some(p) => open(p).unwrap_or_else(|e| {
                fail(format!("cannot open the error file {}: {e}", p.display()))
            }),
            None => stdout
                .try_clone()
                .unwrap_or_else(|e| fail(format!("cannot duplicate the output: {e}"))),
        };
        (std::process::Stdio::null(), stdout, stderr)
    };
    if let Some(groups) = saved_groups {
        // The daemon binds the working directory as root: give it the path the user
        // reached, not one a symbolic link could redirect. (A user who swaps a
        // directory of that path between now and the daemon's mount can still
        // redirect it, to a directory whose parents would not let them through;
        // the container runs as the user, so its own permissions still apply.)
        match std::env::current_dir() {
            Ok(real) => spec.workdir = real,
            Err(e) => fail(format!("cannot resolve the working directory: {e}")),
        }
        if let Err(e) = privilege::resume_root(&groups) {
            fail(format!("cannot return to root: {e}"));
        }
    }
    let argv = runtime.argv(&spec, &files, &host);
    let Some((program, args)) = argv.split_first() else {
        fail(format!("runtime {} gave no command", runtime.name()));
    };
    privilege::close_inherited_fds();
    let err = std::process::Command::new(program)
        .args(args)
        .env_clear()
        .envs(runtime.env(&spec, &host))
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .exec();
    fail(format!("cannot start {program}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell in a process group of its own with two children, one of them
    /// double-forked away from the tree (still in the group).
    fn job() -> std::process::Child {
        use std::os::unix::process::CommandExt as _;
        let mut command = std::process::Command::new("/bin/sh");
        command
            .args(["-c", "sleep 30 & (sleep 31 &) ; exec sleep 32"])
            .process_group(0);
        command.spawn().expect("sh")
    }

    fn pids(found: &[JobProcess]) -> Vec<u32> {
        let mut pids: Vec<u32> = found.iter().map(|p| p.pid).collect();
        pids.sort_unstable();
        pids
    }

    #[test]
    fn a_later_walk_finds_the_processes_started_since_and_never_an_outsiders() {
        use std::os::unix::process::CommandExt as _;
        // The shell forks nothing until the flag exists (`[` is a builtin).
        let dir = tempfile::tempdir().expect("tempdir");
        let flag = dir.path().join("go");
        let mut job = std::process::Command::new("/bin/sh")
            .args([
                "-c",
                "while [ ! -e \"$1\" ]; do :; done; (sleep 30 &); exec sleep 31",
                "sh",
            ])
            .arg(&flag)
            .process_group(0)
            .spawn()
            .expect("sh");
        let mut outsider = std::process::Command::new("/bin/sleep")
            .arg("33")
            .spawn()
            .expect("sleep");
        // Whatever happens below, nothing is left running.
        struct Reap(i32, i32);
        impl Drop for Reap {
            fn drop(&mut self) {
                let _ = killpg(Pid::from_raw(self.0), Signal::SIGKILL);
                let _ = nix::sys::signal::kill(Pid::from_raw(self.1), Signal::SIGKILL);
            }
        }
        let reap = Reap(job.id() as i32, outsider.id() as i32);
        let mut sampler = ProcessSampler::new(job.id());
        let first = sampler.walk();
        assert_eq!(pids(&first), vec![job.id()], "{first:?}");
        std::fs::write(&flag, "").expect("flag");
        // Once a fresh walk (which reads every process) sees them, the sampler's next
        // walk, which reads only what is new, must too.
        let sleeps = |found: &[JobProcess]| {
            found.len() == 2
                && found.iter().all(|p| {
                    std::fs::read_to_string(format!("/proc/{}/comm", p.pid))
                        .is_ok_and(|c| c.trim() == "sleep")
                })
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let fresh = loop {
            let found = job_processes(job.id());
            if sleeps(&found) {
                break found;
            }
            assert!(std::time::Instant::now() < deadline, "{found:?}");
            std::thread::sleep(Duration::from_millis(20));
        };
        // Its second walk: no recheck of the others.
        let later = sampler.walk();
        assert_eq!(sampler.walks, 2);
        assert_eq!(
            pids(&later),
            pids(&fresh),
            "the exec'd shell and the double-forked sleep"
        );
        assert!(!pids(&later).contains(&outsider.id()));
        assert!(sampler.others.contains(&outsider.id()));
        drop(reap);
        let _ = job.wait();
        let _ = outsider.wait();
    }

    #[test]
    fn the_walk_finds_the_tree_and_the_group_and_samples_read_them_again() {
        let mut child = job();
        let leader = child.id();
        // Wait (polling, with a deadline) for the three sleeps, each past its exec (a
        // process caught between fork and exec has no resident memory yet).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let found = loop {
            let found = job_processes(leader);
            if found.len() >= 3 && found.iter().all(|p| p.rss_kb > 0) {
                break found;
            }
            assert!(std::time::Instant::now() < deadline, "{found:?}");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found.iter().any(|p| p.pid == leader));
        assert!(found.iter().all(|p| p.rss_kb > 0), "{found:?}");

        let mut sampler = ProcessSampler::new(leader);
        let walked = sampler.sample_kb();
        assert!(walked > 0);
        assert_eq!(sampler.known.len(), 3);
        // In between walks, the same processes, read again.
        let again = sampler.sample_kb();
        assert!(again > 0);
        assert_eq!(
            pids(&job_processes(leader)),
            sampler
                .known
                .iter()
                .map(|k| k.0)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
        // Ended processes drop out at a sample once they are gone or zombies. (A
        // process still exiting may have freed its memory already, so a sample of 0
        // does not yet mean that.)
        let _ = killpg(Pid::from_raw(leader as i32), Signal::SIGKILL);
        let _ = child.wait();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let kb = sampler.sample_kb();
            if sampler.known.is_empty() {
                assert_eq!(kb, 0);
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{:?}", sampler.known);
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
