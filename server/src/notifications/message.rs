//! What a notification says: Slurm's subject line, a short body, the webhook's JSON,
//! and to whom mail may go.
//!
//! Owns: the wording (pure functions, unit-tested) and the recipients rule.
//! Must not touch: sending, the configuration file.

use serde::Serialize;

use super::{Notice, NoticeEvent};

/// Most recipients one `--mail-user` may name; more are dropped.
pub const MAX_RECIPIENTS: usize = 4;

/// `HH:MM:SS` (or `D-HH:MM:SS`), as Slurm prints run times.
pub fn elapsed(secs: i64) -> String {
    let secs = secs.max(0);
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// The job's name with control characters replaced, so that it cannot end a header.
fn printable(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Slurm's subject: `Slurm Job_id=12 Name=train Ended, Run time 00:01:02, COMPLETED,
/// ExitCode 0`.
pub fn subject(n: &Notice) -> String {
    let head = format!("Slurm Job_id={} Name={}", n.job, printable(&n.name));
    let run = elapsed(n.seconds.unwrap_or(0));
    match n.event {
        NoticeEvent::Began => format!("{head} Began, Queued time {run}"),
        NoticeEvent::Ended | NoticeEvent::Failed => format!(
            "{head} {}, Run time {run}, {}, ExitCode {}",
            if n.event == NoticeEvent::Failed {
                "Failed"
            } else {
                "Ended"
            },
            n.state,
            n.exit_code.unwrap_or(0)
        ),
        NoticeEvent::Requeued => format!("{head} Requeued, Run time {run}, {}", n.state),
        NoticeEvent::TimeLimit(100) => format!("{head} Reached time limit, Run time {run}"),
        NoticeEvent::TimeLimit(p) => {
            format!("{head} Reached {p}% of time limit, Run time {run}")
        }
        NoticeEvent::InvalidDependency => format!("{head} Failed, invalid dependency"),
        NoticeEvent::SessionReady => format!(
            "atrium: your session {} is ready, Queued time {run}",
            printable(&n.name)
        ),
    }
}

/// The body: the same facts, one a line.
pub fn body(n: &Notice) -> String {
    if n.event == NoticeEvent::SessionReady {
        let mut text = format!(
            "Your session {} (job {}) is ready after {} in the queue.\n",
            printable(&n.name),
            n.job,
            elapsed(n.seconds.unwrap_or(0))
        );
        if let Some(link) = &n.link {
            text.push_str(&format!("Open it: {link}\n"));
        }
        text.push_str("Its time limit counts from when it started.\n");
        return text;
    }
    let mut text = format!(
        "Job {} ({}) of {}: {}\nEvent: {}\nState: {}\n",
        n.job,
        printable(&n.name),
        n.user,
        subject(n),
        n.event.name(),
        n.state
    );
    if let Some(code) = n.exit_code {
        text.push_str(&format!("Exit code: {code}\n"));
    }
    if let Some(signal) = n.exit_signal {
        text.push_str(&format!("Signal: {signal}\n"));
    }
    text
}

/// What the webhook receives.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct WebhookBody<'a> {
    pub job: &'a str,
    pub job_id: u64,
    pub name: &'a str,
    pub user: &'a str,
    pub state: &'a str,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<i64>,
    pub event: &'static str,
    /// Run time (queued time for `begin`), seconds.
    pub seconds: Option<i64>,
    pub subject: String,
}

pub fn webhook_body(n: &Notice) -> WebhookBody<'_> {
    WebhookBody {
        job: &n.job,
        job_id: n.job_id,
        name: &n.name,
        user: &n.user,
        state: &n.state,
        exit_code: n.exit_code,
        exit_signal: n.exit_signal,
        event: n.event.name(),
        seconds: n.seconds,
        subject: subject(n),
    }
}

/// Whom the mail of `n` goes to, and what was refused. The rule: mail goes only to
/// addresses in the site's domains (`allowed`): `--mail-user` unset is the job's user
/// at `domain`; a bare name `bob` is `bob@domain`; an address must be in `allowed`;
/// at most [`MAX_RECIPIENTS`]. So no user can make the portal mail the outside world.
pub fn recipients(n: &Notice, domain: &str, allowed: &[String]) -> (Vec<String>, Vec<String>) {
    let wanted = n
        .mail_user
        .as_deref()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or(&n.user);
    let (mut ok, mut refused) = (Vec::new(), Vec::new());
    for (i, word) in wanted.split(',').map(str::trim).enumerate() {
        let word: String = word
            .chars()
            .take(crate::config::MAX_ADDRESS_LEN + 1)
            .collect();
        if word.is_empty() {
            continue;
        }
        let address = if word.contains('@') {
            word.clone()
        } else {
            format!("{word}@{domain}")
        };
        let in_site = address
            .rsplit_once('@')
            .is_some_and(|(_, d)| allowed.iter().any(|a| a.eq_ignore_ascii_case(d)));
        if i < MAX_RECIPIENTS && in_site && crate::config::is_address(&address) {
            if !ok.contains(&address) {
                ok.push(address);
            }
        } else {
            refused.push(word);
        }
    }
    (ok, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice() -> Notice {
        Notice {
            job: "12".into(),
            job_id: 12,
            name: "train".into(),
            user: "alice".into(),
            mail_user: None,
            event: NoticeEvent::Ended,
            state: "COMPLETED".into(),
            exit_code: Some(0),
            exit_signal: None,
            seconds: Some(62),
            link: None,
        }
    }

    #[test]
    fn subjects_read_as_slurms() {
        assert_eq!(
            subject(&notice()),
            "Slurm Job_id=12 Name=train Ended, Run time 00:01:02, COMPLETED, ExitCode 0"
        );
        let failed = Notice {
            event: NoticeEvent::Failed,
            state: "FAILED".into(),
            exit_code: Some(3),
            name: "a\r\nBcc: x@evil.example".into(),
            ..notice()
        };
        assert_eq!(
            subject(&failed),
            "Slurm Job_id=12 Name=a??Bcc: x@evil.example Failed, Run time 00:01:02, FAILED, ExitCode 3"
        );
        let began = Notice {
            event: NoticeEvent::Began,
            seconds: Some(90_061),
            ..notice()
        };
        assert_eq!(
            subject(&began),
            "Slurm Job_id=12 Name=train Began, Queued time 1-01:01:01"
        );
    }

    #[test]
    fn a_ready_session_says_where_to_open_it() {
        let n = Notice {
            event: NoticeEvent::SessionReady,
            name: "lab".into(),
            state: "RUNNING".into(),
            exit_code: None,
            seconds: Some(312),
            link: Some("https://gpu.example.org/user/alice/lab/lab".into()),
            ..notice()
        };
        assert_eq!(
            subject(&n),
            "atrium: your session lab is ready, Queued time 00:05:12"
        );
        let text = body(&n);
        assert!(
            text.starts_with("Your session lab (job 12) is ready after 00:05:12 in the queue.\n"),
            "{text}"
        );
        assert!(text.contains("Open it: https://gpu.example.org/user/alice/lab/lab\n"));
        assert_eq!(webhook_body(&n).event, "session_ready");
    }

    #[test]
    fn the_webhook_body_names_the_job_its_state_and_exit_code() {
        let n = notice();
        let json = serde_json::to_value(webhook_body(&n)).expect("json");
        assert_eq!(
            json,
            serde_json::json!({
                "job": "12", "job_id": 12, "name": "train", "user": "alice",
                "state": "COMPLETED", "exit_code": 0, "exit_signal": null, "event": "end",
                "seconds": 62,
                "subject": "Slurm Job_id=12 Name=train Ended, Run time 00:01:02, COMPLETED, ExitCode 0",
            })
        );
    }

    #[test]
    fn mail_goes_only_to_the_sites_domains() {
        let allowed = vec!["example.org".to_string(), "lab.example.org".to_string()];
        let r = |mail_user: Option<&str>| {
            let n = Notice {
                mail_user: mail_user.map(str::to_string),
                ..notice()
            };
            recipients(&n, "example.org", &allowed)
        };
        assert_eq!(r(None), (vec!["alice@example.org".into()], vec![]));
        assert_eq!(
            r(Some(
                "bob, carol@LAB.example.org,x@spam.example,-o@example.org"
            )),
            (
                vec!["bob@example.org".into(), "carol@LAB.example.org".into()],
                vec!["x@spam.example".into(), "-o@example.org".into()]
            )
        );
        let many = r(Some("a,b,c,d,e,f"));
        assert_eq!(many.0.len(), MAX_RECIPIENTS);
        assert_eq!(many.1, ["e", "f"]);
        assert_eq!(r(Some("a b@example.org")).0, Vec::<String>::new());
    }
}
