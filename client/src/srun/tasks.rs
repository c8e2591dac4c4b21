//! Starting a step's tasks as srun's children, relaying their output, forwarding
//! signals to them, and how the step ended.
//! Must not touch: the portal (the caller records the step).

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

use super::options::SrunOptions;
use super::plan::Plan;

/// The longest output path (`PATH_MAX`), checked as it is expanded.
use scheduler::parse::limits::PATH_MAX;

/// Starts a task with `SLURM_TASK_PID` (its own pid, known only once it runs) and
/// then execs the command.
const SH: &str = "/bin/sh";
const WITH_TASK_PID: &str = "SLURM_TASK_PID=$$; export SLURM_TASK_PID; exec \"$@\"";

/// How a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ended {
    /// The highest exit code of the tasks.
    pub exit_code: i32,
    /// The signal that ended a task, if one did (the highest).
    pub signal: Option<i32>,
    /// srun forwarded a signal that stops the step (SIGINT, SIGTERM).
    pub cancelled: bool,
}

impl Ended {
    /// As the portal records it.
    pub fn state(&self) -> &'static str {
        if self.cancelled {
            "CANCELLED"
        } else if self.exit_code != 0 || self.signal.is_some() {
            "FAILED"
        } else {
            "COMPLETED"
        }
    }

    /// srun's exit status: the highest exit code, or 128 + the signal.
    pub fn status(&self) -> u8 {
        let by_signal = self.signal.map_or(0, |s| 128 + s);
        self.exit_code.max(by_signal).clamp(0, 255) as u8
    }
}

/// The command's file: a path as given (relative to `chdir`), else the first match
/// on `PATH`, as execvp finds it.
pub fn resolve(command: &str, chdir: Option<&str>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let path = match chdir {
            Some(dir) if !command.starts_with('/') => Path::new(dir).join(command),
            _ => PathBuf::from(command),
        };
        return executable(&path).then_some(PathBuf::from(command));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(command))
        .find(|p| executable(p))
}

/// Expand srun's `%` output pattern for task `t`: `%t` task, `%j` job (`12_3` for an
/// array task), `%A` the array's job, `%a` the task of the array, `%J` job.step, `%s`
/// step, `%n` node index, `%N` node, `%u` user, `%x` job name, `%%`; a width
/// (`%3t`) pads a number with zeros, a backslash turns expansion off (Slurm's rules).
fn expand(pattern: &str, job: &str, step: u32, t: u32, node: &str) -> Result<String, String> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let array_job = var("SLURM_ARRAY_JOB_ID");
    let array_task = var("SLURM_ARRAY_TASK_ID");
    let value = |c: char| {
        Some(match c {
            't' => t.to_string(),
            'j' => job.to_string(),
            'A' => array_job
                .clone()
                .unwrap_or_else(|| job.split('_').next().unwrap_or(job).to_string()),
            'a' => array_task
                .clone()
                .unwrap_or_else(|| scheduler::parse::NO_TASK.to_string()),
            'J' => format!("{job}.{step}"),
            's' => step.to_string(),
            'n' => "0".into(),
            'N' => node.to_string(),
            'u' => var("USER").unwrap_or_default(),
            'x' => var("SLURM_JOB_NAME").unwrap_or_default(),
            _ => return None,
        })
    };
    scheduler::parse::expand_filename(pattern, PATH_MAX, true, value).map_err(|e| match e {
        scheduler::parse::PatternError::TooLong => {
            format!("the output pattern {pattern:?} expands to more than {PATH_MAX} bytes")
        }
        scheduler::parse::PatternError::Malformed => {
            format!("the output pattern {pattern:?}: a width is at most 10")
        }
    })
}

/// Where one of a task's streams goes.
#[derive(Clone)]
enum Sink {
    Stdout,
    Stderr,
    File(Arc<Mutex<std::fs::File>>),
}

impl Sink {
    fn stdio(&self) -> std::io::Result<Stdio> {
        Ok(match self {
            Sink::Stdout => Stdio::inherit(),
            Sink::Stderr => Stdio::inherit(),
            Sink::File(f) => {
                let file = f.lock().map_err(|_| std::io::Error::other("poisoned"))?;
                Stdio::from(file.try_clone()?)
            }
        })
    }

    fn write_line(&self, bytes: &[u8]) {
        // A closed stream (srun's output piped to `head`) drops the line.
        let _ = match self {
            Sink::Stdout => std::io::stdout().lock().write_all(bytes),
            Sink::Stderr => std::io::stderr().lock().write_all(bytes),
            Sink::File(f) => match f.lock() {
                Ok(mut file) => file.write_all(bytes),
                Err(_) => Ok(()),
            },
        };
    }
}

/// The files of `-o`/`-e`, each opened (truncated) once however many tasks share it.
struct Outputs {
    open: HashMap<String, Sink>,
}

impl Outputs {
    fn sink(
        &mut self,
        pattern: Option<&str>,
        default: Sink,
        job: &str,
        step: u32,
        t: u32,
        node: &str,
    ) -> Result<Sink, String> {
        let Some(pattern) = pattern else {
            return Ok(default);
        };
        let path = expand(pattern, job, step, t, node)?;
        if let Some(sink) = self.open.get(&path) {
            return Ok(sink.clone());
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| format!("cannot open {path}: {e}"))?;
        let sink = Sink::File(Arc::new(Mutex::new(file)));
        self.open.insert(path, sink.clone());
        Ok(sink)
    }
}

/// Copy `stream` to `sink` line by line, each prefixed with `t: `.
async fn relay(stream: impl AsyncRead + Unpin, sink: Sink, t: u32) {
    let mut reader = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let mut out = format!("{t}: ").into_bytes();
                out.extend_from_slice(&line);
                if !out.ends_with(b"\n") {
                    out.push(b'\n');
                }
                sink.write_line(&out);
            }
        }
    }
}

/// Start every task of `plan`, wait for them, and say how the step ended.
pub async fn run_step(
    o: &SrunOptions,
    plan: &Plan,
    program: &Path,
    job: &str,
    step: u32,
) -> anyhow::Result<Ended> {
    let mut outputs = Outputs {
        open: HashMap::new(),
    };
    let mut pids: Vec<Option<i32>> = Vec::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(u32, std::process::ExitStatus)>();
    let mut relays = Vec::new();
    let use_sh = Path::new(SH).exists();
    let bad = |e: String| super::SlurmError::new(super::CMD, e);
    let mut started = 0;
    let mut start_error = None;
    for t in 0..plan.ntasks {
        let out = outputs
            .sink(o.output.as_deref(), Sink::Stdout, job, step, t, &plan.node)
            .map_err(bad)?;
        let err_default = match (&o.output, &out) {
            (Some(_), sink) => sink.clone(),
            (None, _) => Sink::Stderr,
        };
        let err = outputs
            .sink(o.error.as_deref(), err_default, job, step, t, &plan.node)
            .map_err(bad)?;
        let mut command = if use_sh {
            let mut c = tokio::process::Command::new(SH);
            c.arg("-c").arg(WITH_TASK_PID).arg("srun-task").arg(program);
            c
        } else {
            let mut c = tokio::process::Command::new(program);
            c.arg0(&o.command[0]);
            c
        };
        command.args(&o.command[1..]);
        if !o.export.all {
            command.env_clear();
            for (k, v) in std::env::vars_os() {
                if k.to_string_lossy().starts_with("SLURM_") {
                    command.env(k, v);
                }
            }
        }
        for (k, v) in &o.export.vars {
            match v {
                Some(v) => {
                    command.env(k, v);
                }
                None => {
                    if let Some(v) = std::env::var_os(k) {
                        command.env(k, v);
                    }
                }
            }
        }
        command.envs(plan.task_env(step, t));
        if let Some(dir) = &o.chdir {
            command.current_dir(dir);
        }
        let stdin = match o.input.as_deref() {
            Some("none") => Stdio::null(),
            Some("all") => Stdio::inherit(),
            Some(n) if n.parse::<u32>().is_ok() => {
                if n.parse::<u32>() == Ok(t) {
                    Stdio::inherit()
                } else {
                    Stdio::null()
                }
            }
            Some(path) => Stdio::from(
                std::fs::File::open(path).map_err(|e| bad(format!("cannot open {path}: {e}")))?,
            ),
            None if t == 0 => Stdio::inherit(),
            None => Stdio::null(),
        };
        command.stdin(stdin);
        if o.label {
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
        } else {
            command.stdout(out.stdio()?).stderr(err.stdio()?);
        }
        let mut child = match command.spawn() {
            Ok(c) => c,
            Err(e) => {
                start_error = Some(format!("task {t}: cannot start {}: {e}", program.display()));
                break;
            }
        };
        started += 1;
        pids.push(child.id().and_then(|p| i32::try_from(p).ok()));
        if let Some(stdout) = child.stdout.take() {
            relays.push(tokio::spawn(relay(stdout, out, t)));
        }
        if let Some(stderr) = child.stderr.take() {
            relays.push(tokio::spawn(relay(stderr, err, t)));
        }
        let done = done_tx.clone();
        tokio::spawn(async move {
            if let Ok(status) = child.wait().await {
                let _ = done.send((t, status));
            }
        });
    }
    drop(done_tx);
    let send = |pids: &[Option<i32>], sig: Signal| {
        for pid in pids.iter().flatten() {
            let _ = kill(Pid::from_raw(*pid), sig);
        }
    };
    let mut ended = Ended::default();
    if let Some(e) = start_error {
        eprintln!("srun: error: {e}");
        send(&pids, Signal::SIGKILL);
        ended.exit_code = 1;
    }
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut usr2 = signal(SignalKind::user_defined2())?;
    let mut finished = 0;
    // Tasks srun itself killed (`--kill-on-bad-exit`) do not make the step's status.
    let mut killed_by_srun = false;
    while finished < started {
        tokio::select! {
            got = done_rx.recv() => {
                let Some((t, status)) = got else { break };
                finished += 1;
                if let Some(slot) = pids.get_mut(t as usize) {
                    *slot = None;
                }
                let failed = match (status.code(), status.signal()) {
                    (Some(0), _) => false,
                    (Some(code), _) => {
                        eprintln!("srun: error: {}: task {t}: Exited with exit code {code}", plan.node);
                        ended.exit_code = ended.exit_code.max(code);
                        true
                    }
                    (None, Some(sig)) if killed_by_srun && sig == Signal::SIGKILL as i32 => false,
                    (None, Some(sig)) => {
                        let name = Signal::try_from(sig).map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string());
                        eprintln!("srun: error: {}: task {t}: {name}", plan.node);
                        ended.signal = Some(ended.signal.map_or(sig, |s| s.max(sig)));
                        true
                    }
                    (None, None) => false,
                };
                if failed && o.kill_on_bad_exit && !killed_by_srun {
                    killed_by_srun = true;
                    send(&pids, Signal::SIGKILL);
                }
            }
            _ = int.recv() => {
                ended.cancelled = true;
                send(&pids, Signal::SIGINT);
            }
            _ = term.recv() => {
                ended.cancelled = true;
                send(&pids, Signal::SIGTERM);
            }
            _ = usr1.recv() => send(&pids, Signal::SIGUSR1),
            _ = usr2.recv() => send(&pids, Signal::SIGUSR2),
        }
    }
    for relay in relays {
        let _ = relay.await;
    }
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_ends_with_the_highest_code() {
        let e = Ended {
            exit_code: 3,
            signal: None,
            cancelled: false,
        };
        assert_eq!((e.state(), e.status()), ("FAILED", 3));
        let e = Ended {
            exit_code: 1,
            signal: Some(9),
            cancelled: false,
        };
        assert_eq!((e.state(), e.status()), ("FAILED", 137));
        let e = Ended {
            cancelled: true,
            ..Ended::default()
        };
        assert_eq!(e.state(), "CANCELLED");
        assert_eq!(
            (Ended::default().state(), Ended::default().status()),
            ("COMPLETED", 0)
        );
    }

    #[test]
    fn output_patterns_expand_per_task() {
        assert_eq!(
            expand("out-%j.%s-%t-%N-%%", "12", 1, 3, "head").expect("fits"),
            "out-12.1-3-head-%"
        );
        assert_eq!(
            expand("%J.log", "12_4", 0, 0, "h").expect("fits"),
            "12_4.0.log"
        );
        assert!(expand(&"%N".repeat(3000), "1", 0, 0, "head").is_err());
        // submitit's array logs: `%A_%a_%t`, with widths and a backslash as Slurm's.
        // (Outside an array the environment names none: `%A` is the job, `%a` NO_VAL.)
        assert_eq!(
            expand("%A_%a_%3t_log.out", "12_4", 0, 2, "h").expect("fits"),
            "12_4294967294_002_log.out"
        );
        assert_eq!(
            expand("\\%j-%t.out", "12", 0, 2, "h").expect("fits"),
            "%j-%t.out"
        );
        assert!(expand("%11t", "12", 0, 2, "h").is_err());
    }

    #[test]
    fn commands_are_found_on_the_path_or_by_their_path() {
        assert_eq!(resolve("/bin/sh", None), Some(PathBuf::from("/bin/sh")));
        assert!(resolve("sh", None).is_some());
        assert_eq!(resolve("surely-no-such-command-here", None), None);
        assert_eq!(resolve("./surely-not-here", Some("/")), None);
    }
}
