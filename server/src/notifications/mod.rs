//! Job notifications (`--mail-type`, `--mail-user`) and a queued session's "ready": mail through an SMTP relay
//! (lettre, over the portal's rustls) or the site's `sendmail`, and an optional
//! webhook, as `[notify]` configures them (off by default).
//!
//! The scheduler hands a [`Notice`] to the [`Notifier`] once the change it reports
//! is durable; `send` never waits: notices go into a bounded queue that one task
//! drains, trying each message `attempts` times with a growing pause, and a notice
//! that finds the queue full, or that fails every try, is dropped with a line in
//! the log. A notification never fails or delays a job.
//!
//! - `message.rs`: the subject, body, webhook JSON and the recipients rule (pure).
//! - `send.rs`: the transports.
//!
//! Owns: the queue, the sending task and the wording.
//! Must not touch: the scheduler's state, the store, HTTP.

mod message;
mod send;

use std::time::Duration;

use tokio::sync::mpsc;

use crate::config::NotifyConfig;

pub use message::{elapsed, recipients, subject, webhook_body, WebhookBody};

/// What happened to a job, as `--mail-type` names the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeEvent {
    /// `BEGIN`: the job started.
    Began,
    /// `END`: the job ended (in any state).
    Ended,
    /// `FAIL` (or `END`): the job ended in a failed state.
    Failed,
    /// `REQUEUE`: the job went back to the queue.
    Requeued,
    /// `TIME_LIMIT_50/80/90` and `TIME_LIMIT` (100): that share of the limit is used.
    TimeLimit(u8),
    /// `INVALID_DEPEND`: the job was cancelled because its dependency cannot be met.
    InvalidDependency,
    /// A session that waited in the queue is ready (`sessions.ready_mail_after`):
    /// not a Slurm event; told whatever the job asked for.
    SessionReady,
}

impl NoticeEvent {
    /// The name in the webhook's `event`.
    pub fn name(self) -> &'static str {
        match self {
            NoticeEvent::Began => "begin",
            NoticeEvent::Ended => "end",
            NoticeEvent::Failed => "fail",
            NoticeEvent::Requeued => "requeue",
            NoticeEvent::TimeLimit(50) => "time_limit_50",
            NoticeEvent::TimeLimit(80) => "time_limit_80",
            NoticeEvent::TimeLimit(90) => "time_limit_90",
            NoticeEvent::TimeLimit(_) => "time_limit",
            NoticeEvent::InvalidDependency => "invalid_depend",
            NoticeEvent::SessionReady => "session_ready",
        }
    }

    /// Whether a job that asked for `types` is told of this event. A task of an
    /// array is told only with `ARRAY_TASKS` (otherwise the array as a whole is).
    pub fn wanted(self, types: scheduler::MailTypes, task: bool) -> bool {
        use scheduler::MailTypes as M;
        if task && !types.has(M::ARRAY_TASKS) {
            return false;
        }
        match self {
            NoticeEvent::Began => types.has(M::BEGIN),
            NoticeEvent::Ended => types.has(M::END),
            NoticeEvent::Failed => types.has(M::END) || types.has(M::FAIL),
            NoticeEvent::Requeued => types.has(M::REQUEUE),
            NoticeEvent::TimeLimit(50) => types.has(M::TIME_LIMIT_50),
            NoticeEvent::TimeLimit(80) => types.has(M::TIME_LIMIT_80),
            NoticeEvent::TimeLimit(90) => types.has(M::TIME_LIMIT_90),
            NoticeEvent::TimeLimit(_) => types.has(M::TIME_LIMIT),
            NoticeEvent::InvalidDependency => types.has(M::INVALID_DEPEND),
            NoticeEvent::SessionReady => true,
        }
    }

    /// The event a job's end is: `Failed` for Slurm's failed states, else `Ended`.
    pub fn of_end(state: &str) -> NoticeEvent {
        match state {
            "FAILED" | "TIMEOUT" | "NODE_FAIL" | "OUT_OF_MEMORY" | "BOOT_FAIL" | "DEADLINE" => {
                NoticeEvent::Failed
            }
            _ => NoticeEvent::Ended,
        }
    }
}

/// One notification about one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// `12` or `12_3`.
    pub job: String,
    pub job_id: u64,
    pub name: String,
    pub user: String,
    /// `--mail-user` as given (bounded by the submission's option length).
    pub mail_user: Option<String>,
    pub event: NoticeEvent,
    pub state: String,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<i64>,
    /// Run time (for `Began` and `SessionReady`: time queued), seconds.
    pub seconds: Option<i64>,
    /// Where to open it (a ready session's address).
    pub link: Option<String>,
}

/// The handle the scheduler backends send notices to. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Notifier {
    tx: Option<mpsc::Sender<Notice>>,
}

impl Notifier {
    /// A notifier that sends nothing (`[notify]` unset, and tests).
    pub fn off() -> Notifier {
        Notifier { tx: None }
    }

    /// Start the sending task for `config`; off when nothing is configured. A
    /// transport that cannot be built (an unreadable credentials file) is an error
    /// naming its key.
    pub fn start(config: &NotifyConfig) -> anyhow::Result<Notifier> {
        if !config.enabled() {
            return Ok(Notifier::off());
        }
        let transports = send::Transports::new(config)?;
        let (tx, mut rx) = mpsc::channel::<Notice>(config.queue.max(1));
        let attempts = config.attempts.max(1);
        tokio::spawn(async move {
            while let Some(notice) = rx.recv().await {
                deliver(&transports, &notice, attempts).await;
            }
        });
        tracing::info!(
            mail = config.mail(),
            webhook = config.webhook.is_some(),
            "job notifications are on"
        );
        Ok(Notifier { tx: Some(tx) })
    }

    /// Queue `notice` without waiting; a full queue drops it with a log line.
    pub fn send(&self, notice: Notice) {
        let Some(tx) = &self.tx else {
            return;
        };
        if let Err(e) = tx.try_send(notice) {
            let notice = match &e {
                mpsc::error::TrySendError::Full(n) | mpsc::error::TrySendError::Closed(n) => n,
            };
            tracing::warn!(job = %notice.job, event = notice.event.name(), "the notification queue is full; notice dropped");
        }
    }
}

/// Send one notice by every configured way, each with its own tries.
async fn deliver(transports: &send::Transports, notice: &Notice, attempts: u32) {
    let mail = async {
        if let Some(mail) = &transports.mail {
            let (to, refused) = recipients(notice, &mail.domain, &mail.allowed);
            if !refused.is_empty() {
                tracing::warn!(job = %notice.job, user = %notice.user, ?refused, "--mail-user outside the site's domains (notify.allowed_domains): not mailed");
            }
            if !to.is_empty() {
                retry(attempts, notice, "mail", || mail.send(notice, &to)).await;
            }
        }
    };
    let hook = async {
        if let Some(hook) = &transports.webhook {
            retry(attempts, notice, "webhook", || hook.send(notice)).await;
        }
    };
    tokio::join!(mail, hook);
}

/// Try `what` up to `attempts` times, pausing 1 s, 2 s, 4 s … between tries.
async fn retry<F, Fut>(attempts: u32, notice: &Notice, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let mut pause = Duration::from_secs(1);
    for attempt in 1..=attempts {
        match f().await {
            Ok(()) => return,
            Err(e) if attempt == attempts => {
                tracing::warn!(job = %notice.job, event = notice.event.name(), attempts, error = %e, "sending a job {what} notification failed; given up");
            }
            Err(e) => {
                tracing::debug!(job = %notice.job, attempt, error = %e, "sending a job {what} notification failed; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(60));
            }
        }
    }
}
