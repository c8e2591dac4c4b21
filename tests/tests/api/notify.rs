//! Job notifications end to end: the portal mails a real SMTP server on loopback
//! (the test's own, on a port of its own; the protocol is the `mailin` crate's), for
//! the events a job names, only to the site's domains; and a bad `[notify]` stops it
//! at start naming the key.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mailin::{Action, Handler, Response, SessionBuilder};

use crate::fixtures::{atrium_command, JobCluster};
use serde_json::{json, Value};

/// One message as the server received it.
#[derive(Debug, Clone, Default)]
struct Received {
    to: Vec<String>,
    data: String,
}

/// An SMTP server on 127.0.0.1, port 0, keeping what it receives; stopped on drop.
struct SmtpSink {
    port: u16,
    messages: Arc<Mutex<Vec<Received>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Clone)]
struct Collect {
    current: Received,
    messages: Arc<Mutex<Vec<Received>>>,
}

impl Handler for Collect {
    fn data_start(&mut self, _domain: &str, _from: &str, _8bit: bool, to: &[String]) -> Response {
        self.current = Received {
            to: to.to_vec(),
            data: String::new(),
        };
        mailin::response::OK
    }

    fn data(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.current.data.push_str(&String::from_utf8_lossy(buf));
        Ok(())
    }

    fn data_end(&mut self) -> Response {
        let message = std::mem::take(&mut self.current);
        self.messages.lock().expect("lock").push(message);
        mailin::response::OK
    }
}

impl SmtpSink {
    fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler = Collect {
            current: Received::default(),
            messages: messages.clone(),
        };
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, peer)) => {
                        let _ = serve(stream, peer.ip(), handler.clone());
                    }
                    // Nothing waiting: look again shortly (and notice the stop).
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        SmtpSink {
            port,
            messages,
            stop,
            thread: Some(thread),
        }
    }

    fn messages(&self) -> Vec<Received> {
        self.messages.lock().expect("lock").clone()
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One SMTP conversation, line by line through mailin's session.
fn serve(stream: TcpStream, peer: IpAddr, handler: Collect) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut out = stream.try_clone()?;
    let mut session = SessionBuilder::new("sink.test").build(peer, handler);
    session.greeting().write_to(&mut out)?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = Vec::new();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let response = session.process(&line);
        match response.action {
            Action::Reply => response.write_to(&mut out)?,
            Action::Close => {
                response.write_to(&mut out)?;
                return out.flush();
            }
            Action::NoReply => {}
            Action::UpgradeTls => return Ok(()),
        }
    }
}

fn notify_config(port: u16) -> String {
    format!(
        "[notify]\nsmtp = \"127.0.0.1:{port}\"\nsmtp_tls = \"none\"\n\
         from = \"atrium@cluster.example.org\"\ndomain = \"example.org\"\n"
    )
}

#[tokio::test]
async fn a_job_with_mail_type_end_mails_its_user_once_naming_its_state_and_exit_code() {
    let sink = SmtpSink::start();
    let c = JobCluster::start_with(0, &notify_config(sink.port)).await;
    let alice = c.user("alice").await;
    let wait = Duration::from_secs(60);

    let first = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH -J train --mail-type=END\nexit 0\n",
        )
        .await;
    c.wait_ended(&alice, &first, wait).await;
    // No --mail-type: nothing is sent.
    let quiet = c
        .sbatch(&alice, "#!/bin/bash\n#SBATCH -J quiet\nexit 0\n")
        .await;
    c.wait_ended(&alice, &quiet, wait).await;
    // An address outside the site's domains is dropped; a colleague's name is not.
    let last = c
        .sbatch(
            &alice,
            "#!/bin/bash\n#SBATCH -J eval --mail-type=END,FAIL --mail-user=x@spam.example,bob\nexit 3\n",
        )
        .await;
    c.wait_ended(&alice, &last, wait).await;

    // Messages go out in order: once the last job's has arrived, any second message
    // of the first job would have too.
    atrium_tests::support::until("the last job's mail", wait, || async {
        sink.messages()
            .iter()
            .any(|m| m.data.contains(&format!("Job_id={last} ")))
            .then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\nportal log:\n{}", c.app.log().join("\n")));
    let messages = sink.messages();
    assert_eq!(messages.len(), 2, "{messages:#?}");
    let (mail, other) = (&messages[0], &messages[1]);
    assert_eq!(mail.to, ["alice@example.org"]);
    let subject = format!("Subject: Slurm Job_id={first} Name=train Ended, Run time ");
    assert!(mail.data.contains(&subject), "{}", mail.data);
    assert!(
        mail.data.contains(", COMPLETED, ExitCode 0"),
        "{}",
        mail.data
    );
    assert!(
        mail.data.contains("From: atrium@cluster.example.org"),
        "{}",
        mail.data
    );
    assert_eq!(other.to, ["bob@example.org"]);
    assert!(
        other
            .data
            .contains(&format!("Job_id={last} Name=eval Failed")),
        "{}",
        other.data
    );
    assert!(
        other.data.contains(", FAILED, ExitCode 3"),
        "{}",
        other.data
    );
    assert!(!messages.iter().any(|m| m.data.contains("Name=quiet")));
}

#[test]
fn a_bad_notify_section_stops_the_portal_at_start_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("atrium.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n[notify]\nsmtp = \"mail.example.org\"\nfrom = \"atrium@example.org\"\ndomain = \"example.org\"\n",
            dir.path().join("var").display()
        ),
    )
    .expect("write");
    let out = atrium_command()
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .output()
        .expect("run atrium");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("notify.smtp"), "{stderr}");
}

#[tokio::test]
async fn a_session_that_waited_in_the_queue_mails_its_user_once_ready() {
    let sink = SmtpSink::start();
    // One GPU: the second session waits for the first to end.
    let sessions = format!("ready_mail_after = \"1s\"\n{}", notify_config(sink.port));
    let Some(c) = crate::fixtures::sessions::SessionCluster::start(1, &sessions).await else {
        return;
    };
    let alice = c.user("alice").await;
    let (first, _) = c
        .ready_session(
            &alice,
            json!({"name": "first", "gpus": 1, "environment": "python"}),
        )
        .await;
    let res = c
        .start_session(
            &alice,
            json!({"name": "second", "gpus": 1, "environment": "python"}),
        )
        .await;
    assert_eq!(res.status(), 201);
    let second: Value = res.json().await.expect("json");
    let id = second["id"].as_i64().expect("id");
    let queued = c.follow(&alice, id, |e| e["state"] == "pending").await;
    assert_eq!(queued.last().map(|e| &e["state"]), Some(&json!("pending")));
    tokio::time::sleep(Duration::from_secs(2)).await;
    c.stop(&alice, first["id"].as_i64().expect("id")).await;
    let events = c.follow(&alice, id, |e| e["ready"] == true).await;
    assert_eq!(events.last().map(|e| &e["ready"]), Some(&json!(true)));

    let wait = Duration::from_secs(30);
    atrium_tests::support::until("the ready session's mail", wait, || async {
        (!sink.messages().is_empty()).then_some(())
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\nportal log:\n{}", c.log_tail()));
    let messages = sink.messages();
    // The first session started at once: it is not mailed.
    assert_eq!(messages.len(), 1, "{messages:#?}");
    assert_eq!(messages[0].to, ["alice@example.org"]);
    let data = &messages[0].data;
    assert!(
        data.contains("Subject: atrium: your session second is ready, Queued time 00:00:0"),
        "{data}"
    );
    assert!(data.contains("in the queue."), "{data}");
}
