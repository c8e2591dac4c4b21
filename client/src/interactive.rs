//! Interactive jobs, as `salloc` and `srun` outside a job make them: the job is
//! submitted with `interactive`, waited for (Slurm's messages: queued, allocated,
//! granted), and once it runs its terminal is attached over the portal's websocket
//! (`GET /api/v1/jobs/{id}/attach`): what the job prints comes to standard output,
//! what is typed goes to the job, and the window's size follows this terminal's. A
//! `--pty` job puts this terminal in raw mode, so that ^C, ^Z and the editing keys
//! reach the job's own terminal; otherwise (`srun` without `--pty`) the job's
//! terminal is the raw one and ^C here is sent to the job as SIGINT. When the job's
//! terminal closes, the command exits with the job's exit code.
//! Must not touch: the portal's side (`server::launch::terminal`).

use std::io::Write;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{signal, SignalKind};
use tokio_tungstenite::tungstenite::Message;

use super::api::{JobInfo, Portal, Terminal};
use super::sbatch::ENDED;
use super::SlurmError;

/// The job script of an interactive job: it runs its arguments (the command).
pub const SCRIPT: &str = "#!/bin/sh\nexec \"$@\"\n";

/// A job that waited this long is announced as queued.
const QUIET_WAIT: Duration = Duration::from_millis(300);
/// How long a running job's terminal may take to open.
const TERMINAL_OPENS: Duration = Duration::from_secs(15);

/// Submit `body` (an interactive job) as `command` (`salloc` or `srun`), attach to it
/// once it runs, and relay its terminal until it closes; the job's id and exit code.
/// `pty`: this terminal is the job's (raw mode, window size).
pub async fn run(
    command: &'static str,
    portal: &Portal,
    body: &Value,
    pty: bool,
) -> Result<(u64, i32), SlurmError> {
    let refused = |e: super::api::CallError| {
        let words = if command == "salloc" {
            "Job submit/allocate failed"
        } else {
            "Unable to allocate resources"
        };
        SlurmError::new(command, format!("{words}: {}", e.message))
    };
    let submitted = portal.submit(body).await.map_err(refused)?;
    let id = submitted.job_id.to_string();
    wait_until_running(command, portal, &id).await?;
    let terminal = open_terminal(command, portal, &id).await?;
    relay(command, portal, &id, terminal, pty).await?;
    let job = wait_until_ended(portal, &id).await;
    let code = match job {
        Some(j) if j.state == "COMPLETED" => 0,
        Some(j) => match (j.exit_code, j.signal) {
            (Some(c), _) if c != 0 => c as i32,
            (_, Some(s)) if s > 0 => 128 + s as i32,
            _ => 1,
        },
        None => 1,
    };
    Ok((submitted.job_id, code))
}

/// Polls the job until it runs; Slurm's messages on the way. ^C while it waits
/// cancels it.
async fn wait_until_running(
    command: &'static str,
    portal: &Portal,
    id: &str,
) -> Result<(), SlurmError> {
    let failed = super::failed(command);
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|e| SlurmError::new(command, format!("cannot catch SIGINT: {e}")))?;
    let submitted = Instant::now();
    let mut announced = false;
    let mut pause = Duration::from_millis(20);
    loop {
        let job = portal.job(id).await.map_err(&failed)?;
        match job.state.as_str() {
            "RUNNING" => {
                if announced {
                    eprintln!("{command}: job {id} has been allocated resources");
                }
                if command == "salloc" {
                    eprintln!("salloc: Granted job allocation {id}");
                }
                return Ok(());
            }
            state if ENDED.contains(&state) => {
                return Err(SlurmError::new(
                    command,
                    format!(
                        "Job allocation {id} has been revoked{}",
                        job.reason
                            .as_deref()
                            .map(|r| format!(" ({r})"))
                            .unwrap_or_default()
                    ),
                ));
            }
            _ if !announced && submitted.elapsed() >= QUIET_WAIT => {
                if command == "salloc" {
                    eprintln!("salloc: Pending job allocation {id}");
                }
                eprintln!("{command}: job {id} queued and waiting for resources");
                announced = true;
            }
            _ => {}
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = interrupt.recv() => {
                let _ = portal.cancel(id).await;
                return Err(SlurmError::new(
                    command,
                    format!("Job allocation {id} has been revoked."),
                ));
            }
        }
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

/// The job's terminal; a job that has just started may not have opened it yet.
async fn open_terminal(
    command: &'static str,
    portal: &Portal,
    id: &str,
) -> Result<Terminal, SlurmError> {
    let deadline = Instant::now() + TERMINAL_OPENS;
    loop {
        match portal.attach(id).await {
            Ok(t) => return Ok(t),
            Err(e) if e.status == Some(409) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => {
                return Err(SlurmError::new(
                    command,
                    format!("cannot open job {id}'s terminal: {}", e.message),
                ))
            }
        }
    }
}

/// Polls an attached job until it has ended (its terminal closed as its command
/// exited); `None` if it does not within a minute.
async fn wait_until_ended(portal: &Portal, id: &str) -> Option<JobInfo> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut pause = Duration::from_millis(20);
    while Instant::now() < deadline {
        if let Ok(job) = portal.job(id).await {
            if ENDED.contains(&job.state.as_str()) {
                return Some(job);
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    None
}

/// This terminal in raw mode while it lives (when standard input is a terminal).
struct RawMode(Option<rustix::termios::Termios>);

impl RawMode {
    fn enter() -> RawMode {
        let stdin = rustix::stdio::stdin();
        let Ok(saved) = rustix::termios::tcgetattr(stdin) else {
            return RawMode(None);
        };
        let mut raw = saved.clone();
        raw.make_raw();
        match rustix::termios::tcsetattr(stdin, rustix::termios::OptionalActions::Now, &raw) {
            Ok(()) => RawMode(Some(saved)),
            Err(_) => RawMode(None),
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = rustix::termios::tcsetattr(
                rustix::stdio::stdin(),
                rustix::termios::OptionalActions::Now,
                saved,
            );
        }
    }
}

/// This terminal's size as the text message that tells it; `None` where standard
/// output is not a terminal.
fn window_size() -> Option<Message> {
    let size = rustix::termios::tcgetwinsize(rustix::stdio::stdout())
        .or_else(|_| rustix::termios::tcgetwinsize(rustix::stdio::stdin()))
        .ok()?;
    (size.ws_row > 0 && size.ws_col > 0).then(|| {
        Message::Text(
            serde_json::json!({"rows": size.ws_row, "cols": size.ws_col})
                .to_string()
                .into(),
        )
    })
}

/// Carries bytes between this process's standard streams and the job's terminal
/// until the job closes it.
async fn relay(
    command: &'static str,
    portal: &Portal,
    id: &str,
    terminal: Terminal,
    pty: bool,
) -> Result<(), SlurmError> {
    let io = |what: &str, e: &dyn std::fmt::Display| {
        SlurmError::new(command, format!("job {id}'s terminal: {what}: {e}"))
    };
    let (mut to_job, mut from_job) = terminal.split();
    let _raw = pty.then(RawMode::enter);
    if pty {
        if let Some(size) = window_size() {
            to_job.send(size).await.map_err(|e| io("sending", &e))?;
        }
    }
    let mut window = signal(SignalKind::window_change()).map_err(|e| io("SIGWINCH", &e))?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(|e| io("SIGINT", &e))?;
    let mut stdin = tokio::io::stdin();
    let mut typed = vec![0u8; 16 << 10];
    let mut stdin_open = true;
    let mut stdout = std::io::stdout();
    loop {
        tokio::select! {
            message = from_job.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    // A closed standard output (a pipe whose reader went) ends nothing:
                    // the job goes on as Slurm's would.
                    let _ = stdout.write_all(&bytes).and_then(|()| stdout.flush());
                }
                Some(Ok(Message::Close(_))) | None => return Ok(()),
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(io("receiving", &e)),
            },
            read = stdin.read(&mut typed), if stdin_open => match read {
                Ok(0) | Err(_) => stdin_open = false,
                Ok(n) => {
                    let bytes = typed[..n].to_vec();
                    to_job.send(Message::Binary(bytes.into())).await.map_err(|e| io("sending", &e))?;
                }
            },
            _ = window.recv(), if pty => {
                if let Some(size) = window_size() {
                    to_job.send(size).await.map_err(|e| io("sending", &e))?;
                }
            }
            _ = interrupt.recv() => {
                // Not a terminal of the job's (no --pty): ^C is the job's SIGINT, as
                // srun forwards it to its tasks.
                if let Err(e) = portal.signal(id, 2, "batch").await {
                    eprintln!("{command}: error: sending SIGINT to job {id}: {}", e.message);
                }
            }
        }
    }
}

/// The job's name where none is given: the command's (as Slurm names it).
pub fn default_name(command: &[String]) -> String {
    command
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c).to_string())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "interactive".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_is_named_after_its_command() {
        assert_eq!(default_name(&["/bin/bash".into(), "-l".into()]), "bash");
        assert_eq!(default_name(&["python3".into()]), "python3");
        assert_eq!(default_name(&[]), "interactive");
    }
}
