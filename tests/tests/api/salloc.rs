//! Interactive jobs of the internal scheduler: `srun --pty`, `salloc` and `srun`
//! outside a job, typed at through a real terminal (`script` gives the client one),
//! and the API's websocket (`GET /api/v1/jobs/{id}/attach`) with its refusals. The
//! shell really runs in the job (in bubblewrap where it is installed), as the user,
//! with the job's GPUs.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::fixtures::cli::{client, run};
use crate::fixtures::{atrium_bin, JobCluster, JobUser};

const ENDED: &[&str] = &["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"];
const WITHIN: Duration = Duration::from_secs(60);

/// A client command on a terminal of its own (`script`), typed at through a pipe.
struct Typed {
    child: tokio::process::Child,
    input: tokio::process::ChildStdin,
    screen: Arc<Mutex<String>>,
}

impl Typed {
    fn start(c: &JobCluster, user: &JobUser, command_line: &str) -> Typed {
        let mut cmd = tokio::process::Command::new("script");
        cmd.args(["-qfec", command_line, "/dev/null"])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("TERM", "xterm")
            .env("SHELL", "/bin/bash")
            .env("ATRIUM_URL", &c.app.base)
            .env("ATRIUM_TOKEN", &user.token)
            .current_dir(&user.home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("script");
        let input = child.stdin.take().expect("stdin");
        let mut output = child.stdout.take().expect("stdout");
        let screen = Arc::new(Mutex::new(String::new()));
        let into = screen.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = output.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = into.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
        Typed {
            child,
            input,
            screen,
        }
    }

    async fn type_line(&mut self, line: &str) {
        self.input
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("type");
        self.input.flush().await.expect("flush");
    }

    fn screen(&self) -> String {
        self.screen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The first line of the screen that starts with `prefix` (what a command
    /// printed, not the echo of the line typed).
    async fn line_starting(&self, prefix: &str) -> String {
        let screen = self.screen.clone();
        atrium_tests::support::until(&format!("a line {prefix}…"), WITHIN, || {
            let found = screen.lock().ok().and_then(|s| {
                // What follows the line's last carriage return: bash moves to the
                // line's start (and leaves bracketed paste) before a command's output.
                s.lines()
                    .filter_map(|l| l.trim_end_matches('\r').rsplit('\r').next())
                    .find(|l| l.starts_with(prefix))
                    .map(String::from)
            });
            async move { found }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", self.screen()))
    }

    async fn exit_code(mut self) -> (i32, String) {
        let status = tokio::time::timeout(WITHIN, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("the client did not exit:\n{}", self.screen()))
            .expect("wait");
        // What the reader still had to read.
        tokio::time::sleep(Duration::from_millis(100)).await;
        (status.code().unwrap_or(-1), self.screen())
    }
}

async fn last_job(c: &JobCluster, user: &JobUser) -> Value {
    let body = c
        .app
        .api(&user.token)
        .json("/api/v1/jobs?state=all&me=true")
        .await;
    body["jobs"]
        .as_array()
        .and_then(|j| j.iter().max_by_key(|j| j["job_id"].as_u64()))
        .cloned()
        .expect("a job")
}

#[tokio::test]
async fn srun_pty_and_salloc_give_a_shell_in_the_allocation_with_its_gpus() {
    let c = JobCluster::start(2).await;
    let alice = c.user("alice").await;
    let bin = atrium_bin();
    let bin = bin.display();

    // srun --pty bash: a shell on a terminal, as the user, with one of the GPUs.
    let mut shell = Typed::start(
        &c,
        &alice,
        &format!("{bin} srun --pty --gres=gpu:1 -J shell bash --norc --noprofile -i"),
    );
    shell
        .type_line("echo CVD=$CUDA_VISIBLE_DEVICES uid=$(id -u) job=$SLURM_JOB_ID; tty -s && echo ON-A-TTY")
        .await;
    let seen = shell.line_starting("CVD=").await;
    assert!(
        seen.starts_with(&format!("CVD=0 uid={} job=", alice.uid))
            || seen.starts_with(&format!("CVD=1 uid={} job=", alice.uid)),
        "{seen}"
    );
    shell.line_starting("ON-A-TTY").await;
    shell.type_line("exit 7").await;
    let (code, screen) = shell.exit_code().await;
    assert_eq!(code, 7, "srun exits with the shell's code:\n{screen}");
    let job = last_job(&c, &alice).await;
    assert_eq!(
        (
            job["name"].as_str(),
            job["state"].as_str(),
            job["exit_code"].as_i64()
        ),
        (Some("shell"), Some("FAILED"), Some(7)),
        "{job}"
    );

    // salloc: the shell ($SHELL) in a new allocation; srun in it runs a step of it.
    let mut shell = Typed::start(&c, &alice, &format!("{bin} salloc -n 2 --gres=gpu:2"));
    shell
        .type_line(
            "srun -l hostname >/dev/null; echo STEP=$? N=$SLURM_NTASKS GPUS=$CUDA_VISIBLE_DEVICES",
        )
        .await;
    let seen = shell.line_starting("STEP=").await;
    assert_eq!(seen, "STEP=0 N=2 GPUS=0,1");
    shell.type_line("exit").await;
    let (code, screen) = shell.exit_code().await;
    assert_eq!(code, 0, "{screen}");
    let job = last_job(&c, &alice).await;
    let id = job["id"].as_str().expect("id").to_string();
    assert!(
        screen.contains(&format!("salloc: Granted job allocation {id}"))
            && screen.contains(&format!("salloc: Relinquishing job allocation {id}")),
        "{screen}"
    );
    assert_eq!(job["state"], "COMPLETED", "{job}");
    assert_eq!(job["name"], "bash", "named after the command: {job}");
    let mut sacct = client(&c, &alice.token, &alice.home, &atrium_bin());
    sacct.args(["sacct", "-j", &id, "-P", "-n", "-o", "JobID,JobName,State"]);
    let (ok, out, err) = run(sacct);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .any(|l| l == format!("{id}.0|hostname|COMPLETED")),
        "{out}"
    );

    // srun outside a job without --pty: an allocation for one step, its output as it
    // is (no carriage returns), its exit code.
    let mut srun = client(&c, &alice.token, &alice.home, &atrium_bin());
    srun.args([
        "srun",
        "-n",
        "2",
        "-l",
        "-t",
        "5",
        "sh",
        "-c",
        "echo task $SLURM_PROCID; exit $SLURM_PROCID",
    ])
    .stdin(Stdio::null());
    let out = srun.output().expect("srun");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    let mut lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    lines.sort_unstable();
    assert_eq!(lines, ["0: task 0", "1: task 1"], "{stdout:?}");
    assert!(
        stdout.contains("srun: error: head: task 1: Exited with exit code 1"),
        "{stdout:?}"
    );
    assert!(!stdout.contains('\r'), "{stdout:?}");
}

async fn attach(
    c: &JobCluster,
    token: &str,
    id: &str,
) -> Result<
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    u16,
> {
    let url = c
        .app
        .url(&format!("/api/v1/jobs/{id}/attach"))
        .replacen("http://", "ws://", 1);
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header"),
    );
    match tokio_tungstenite::connect_async(request).await {
        Ok((ws, _)) => Ok(ws),
        Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
            Err(response.status().as_u16())
        }
        Err(e) => panic!("attach: {e}"),
    }
}

fn interactive(command: &[&str], options: Value) -> Value {
    json!({
        "script": "#!/bin/sh\nexec \"$@\"\n",
        "arguments": command,
        "options": options,
        "interactive": true,
    })
}

#[tokio::test]
async fn a_jobs_terminal_is_its_owners_alone_once_it_runs_and_takes_the_window_size() {
    let c = JobCluster::start(1).await;
    let alice = c.user("alice").await;
    let bob = c.user("bob").await;

    // Bad requests name their field and store nothing.
    for (body, field) in [
        (
            json!({"script": "#!/bin/sh\ntrue\n", "raw_terminal": true}),
            "raw_terminal",
        ),
        (
            json!({"script": "#!/bin/sh\ntrue\n", "interactive": true, "options": {"array": "1-3"}}),
            "interactive",
        ),
    ] {
        let res = c.submit(&alice, body).await;
        assert_eq!(res.status(), 400);
        let body: Value = res.json().await.expect("json");
        assert_eq!(body["field"], field, "{body}");
    }

    // Not yet running: 409; not a websocket: 400; someone else's: 404.
    let later = c
        .submitted(
            &alice,
            interactive(&["bash"], json!({"begin": "now+1hour"})),
        )
        .await;
    assert_eq!(attach(&c, &alice.token, &later).await.err(), Some(409));
    let plain = c
        .app
        .get_bearer(&format!("/api/v1/jobs/{later}/attach"), &alice.token)
        .await;
    assert_eq!(plain.status(), 400);
    let plain: Value = plain.json().await.expect("json");
    assert!(
        plain["message"]
            .as_str()
            .unwrap_or("")
            .contains("websocket"),
        "{plain}"
    );

    let id = c
        .submitted(
            &alice,
            interactive(&["bash", "--norc", "--noprofile", "-i"], json!({})),
        )
        .await;
    c.wait_for(&alice, &id, &["RUNNING"], WITHIN).await;
    assert_eq!(attach(&c, &bob.token, &id).await.err(), Some(404));
    let mut ws = atrium_tests::support::until("the terminal to open", WITHIN, || async {
        attach(&c, &alice.token, &id).await.ok()
    })
    .await
    .expect("the owner attaches");
    // One attachment at a time.
    assert_eq!(attach(&c, &alice.token, &id).await.err(), Some(409));

    ws.send(Message::Text(
        json!({"rows": 41, "cols": 97}).to_string().into(),
    ))
    .await
    .expect("size");
    ws.send(Message::Binary(
        b"echo SIZE=$(stty size); exit 3\n".to_vec().into(),
    ))
    .await
    .expect("typed");
    let mut screen = Vec::new();
    let closed = tokio::time::timeout(WITHIN, async {
        while let Some(message) = ws.next().await {
            match message {
                Ok(Message::Binary(bytes)) => screen.extend_from_slice(&bytes),
                Ok(Message::Close(_)) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    let screen = String::from_utf8_lossy(&screen).into_owned();
    assert!(closed.is_ok(), "the job closes the websocket: {screen}");
    assert!(screen.contains("SIZE=41 97"), "{screen}");
    let job = c.wait_for(&alice, &id, ENDED, WITHIN).await;
    assert_eq!(
        (job["state"].as_str(), job["exit_code"].as_i64()),
        (Some("FAILED"), Some(3))
    );
    assert_eq!(attach(&c, &alice.token, &id).await.err(), Some(409));

    // Cancelled before anyone attached: it ends at once.
    let waiting = c.submitted(&alice, interactive(&["bash"], json!({}))).await;
    c.wait_for(&alice, &waiting, &["RUNNING"], WITHIN).await;
    c.cancel(&alice, &waiting).await;
    let job = c.wait_for(&alice, &waiting, ENDED, WITHIN).await;
    assert_eq!(job["state"], "CANCELLED", "{job}");
    c.cancel(&alice, &later).await;
}
