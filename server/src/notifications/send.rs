//! The transports: an SMTP relay (lettre: STARTTLS, implicit TLS or plain, with
//! optional credentials), the site's `sendmail` (by absolute path, as root, with the
//! fixed environment and the recipients after `--`), and the webhook (a JSON POST).
//!
//! Owns: building each transport once from `[notify]`, and one try of each.
//! Must not touch: what a message says (`message.rs`), the queue (`mod.rs`).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use tokio::io::AsyncWriteExt;

use super::message::{body, subject, webhook_body};
use super::Notice;
use crate::config::NotifyConfig;

/// Largest credentials file read.
const MAX_CREDENTIALS_BYTES: u64 = 4096;

pub(super) struct Transports {
    pub mail: Option<Mail>,
    pub webhook: Option<Webhook>,
}

impl Transports {
    pub fn new(config: &NotifyConfig) -> anyhow::Result<Transports> {
        let mail = if config.mail() {
            Some(Mail::new(config)?)
        } else {
            None
        };
        let webhook = config
            .webhook
            .as_ref()
            .map(|url| Webhook::new(url, config.timeout.0))
            .transpose()
            .context("notify.webhook")?;
        Ok(Transports { mail, webhook })
    }
}

enum MailWay {
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    Sendmail(PathBuf),
}

pub(super) struct Mail {
    way: MailWay,
    from: lettre::message::Mailbox,
    pub domain: String,
    pub allowed: Vec<String>,
    timeout: Duration,
}

impl Mail {
    fn new(config: &NotifyConfig) -> anyhow::Result<Mail> {
        let from = config
            .from
            .as_deref()
            .context("notify.from is required")?
            .parse()
            .context("notify.from")?;
        let domain = config.domain.clone().context("notify.domain is required")?;
        let timeout = config.timeout.0;
        let way = match (&config.smtp, &config.sendmail) {
            (Some(relay), _) => {
                let (host, port) = relay
                    .rsplit_once(':')
                    .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
                    .context("notify.smtp: not host:port")?;
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let builder = match config.smtp_tls.as_str() {
                    "tls" => AsyncSmtpTransport::<Tokio1Executor>::relay(host),
                    "none" => Ok(AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(
                        host,
                    )),
                    _ => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(host),
                }
                .context("notify.smtp")?;
                let mut builder = builder
                    .port(port)
                    .timeout(Some(timeout))
                    .hello_name(ClientId::Domain(domain.clone()));
                if let Some(file) = &config.smtp_credentials_file {
                    let (user, password) =
                        credentials(file).context("notify.smtp_credentials_file")?;
                    builder = builder.credentials(Credentials::new(user, password));
                }
                MailWay::Smtp(builder.build())
            }
            (None, Some(path)) => MailWay::Sendmail(path.clone()),
            (None, None) => anyhow::bail!("notify: neither smtp nor sendmail is set"),
        };
        Ok(Mail {
            way,
            from,
            domain,
            allowed: config.recipient_domains(),
            timeout,
        })
    }

    /// One try at mailing `n` to `to` (addresses already checked).
    pub async fn send(&self, n: &Notice, to: &[String]) -> Result<(), String> {
        let mut builder = Message::builder()
            .from(self.from.clone())
            .subject(subject(n))
            .header(ContentType::TEXT_PLAIN);
        for address in to {
            builder = builder.to(address.parse().map_err(|e| format!("{address}: {e}"))?);
        }
        let message = builder.body(body(n)).map_err(|e| e.to_string())?;
        match &self.way {
            MailWay::Smtp(transport) => transport
                .send(message)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            MailWay::Sendmail(program) => {
                tokio::time::timeout(self.timeout, sendmail(program, &self.from, to, &message))
                    .await
                    .map_err(|_| format!("{} took too long", program.display()))?
            }
        }
    }
}

/// `sendmail -i -f FROM -- TO…` as root, the message on its standard input.
async fn sendmail(
    program: &Path,
    from: &lettre::message::Mailbox,
    to: &[String],
    message: &Message,
) -> Result<(), String> {
    let mut child = tokio::process::Command::new(program)
        .args(["-i", "-f", from.email.as_ref(), "--"])
        .args(to)
        .env_clear()
        .envs(crate::privilege::base_env())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(&message.formatted())
            .await
            .map_err(|e| e.to_string())?;
    }
    let status = child.wait().await.map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} ended with {status}", program.display()))
    }
}

/// `user:password` from the first line of `file` (read at most 4 KiB).
fn credentials(file: &Path) -> anyhow::Result<(String, String)> {
    let mut text = String::new();
    std::fs::File::open(file)?
        .take(MAX_CREDENTIALS_BYTES)
        .read_to_string(&mut text)?;
    let line = text.lines().next().unwrap_or_default();
    let (user, password) = line
        .split_once(':')
        .context("the first line must be user:password")?;
    Ok((user.to_string(), password.to_string()))
}

pub(super) struct Webhook {
    url: String,
    client: reqwest::Client,
}

impl Webhook {
    fn new(url: &str, timeout: Duration) -> anyhow::Result<Webhook> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Webhook {
            url: url.to_string(),
            client,
        })
    }

    /// One try at POSTing `n` as JSON; any 2xx is done.
    pub async fn send(&self, n: &Notice) -> Result<(), String> {
        let response = self
            .client
            .post(&self.url)
            .json(&webhook_body(n))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("the webhook answered {}", response.status()))
        }
    }
}
