//! `[notify]`: job notifications (`--mail-type`, `--mail-user`) by mail and webhook.
//!
//! Owns: [`NotifyConfig`], its defaults (everything off) and checks: a mail relay
//! (`smtp`) or a local `sendmail` (absolute path), a sender, the domains mail may go
//! to, the webhook's URL, the queue's bounds.
//! Must not touch: sending (that is `notifications`'), reading the credentials file
//! beyond checking it is there.

use std::path::PathBuf;

use serde::Deserialize;

use super::check::{absolute_path, at_least, one_of, readable_file};
use super::HumanDuration;

/// Job notifications. Off unless `smtp`, `sendmail` or `webhook` is set.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct NotifyConfig {
    /// The mail relay, `host:port` (e.g. `mail.example.org:587`).
    pub smtp: Option<String>,
    /// `starttls` (default), `tls` (implicit TLS, port 465) or `none` (a relay on this
    /// machine or a trusted network only).
    pub smtp_tls: String,
    /// A file (root's, 0600) whose first line is `user:password` for the relay.
    pub smtp_credentials_file: Option<PathBuf>,
    /// A local mail transfer agent instead of `smtp`, by absolute path, run as root
    /// with the fixed environment (`sendmail -i -f FROM -- RECIPIENT…`).
    pub sendmail: Option<PathBuf>,
    /// The sender of every message (`atrium@cluster.example.org`).
    pub from: Option<String>,
    /// The domain of a bare user name (`alice` → `alice@example.org`).
    pub domain: Option<String>,
    /// The domains a `--mail-user` address may be in (default: `domain` alone).
    /// Any other address is dropped with a line in the log.
    pub allowed_domains: Vec<String>,
    /// An `https://` (or, for a service on this machine, `http://`) URL that gets a
    /// JSON POST for every notification.
    pub webhook: Option<String>,
    /// Notifications waiting to be sent; more are dropped with a line in the log.
    pub queue: usize,
    /// Tries per message (and per webhook call) before it is given up.
    pub attempts: u32,
    /// How long one try may take.
    pub timeout: HumanDuration,
}

impl Default for NotifyConfig {
    fn default() -> Self {
        Self {
            smtp: None,
            smtp_tls: "starttls".into(),
            smtp_credentials_file: None,
            sendmail: None,
            from: None,
            domain: None,
            allowed_domains: Vec::new(),
            webhook: None,
            queue: 1000,
            attempts: 3,
            timeout: HumanDuration::from_secs(30),
        }
    }
}

/// Longest address or domain accepted (RFC 5321's path limit).
pub const MAX_ADDRESS_LEN: usize = 254;

impl NotifyConfig {
    /// Whether mail is configured.
    pub fn mail(&self) -> bool {
        self.smtp.is_some() || self.sendmail.is_some()
    }

    /// Whether any notification is sent.
    pub fn enabled(&self) -> bool {
        self.mail() || self.webhook.is_some()
    }

    /// The domains a recipient may be in.
    pub fn recipient_domains(&self) -> Vec<String> {
        if self.allowed_domains.is_empty() {
            self.domain.iter().cloned().collect()
        } else {
            self.allowed_domains.clone()
        }
    }

    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        if self.smtp.is_some() && self.sendmail.is_some() {
            problem(
                "notify.sendmail",
                "set either notify.smtp or notify.sendmail, not both".into(),
            );
        }
        if let Some(smtp) = &self.smtp {
            let port = smtp.rsplit_once(':').and_then(|(h, p)| {
                (!h.is_empty()).then_some(())?;
                p.parse::<u16>().ok().filter(|p| *p != 0)
            });
            if port.is_none() {
                problem(
                    "notify.smtp",
                    format!("{smtp:?} is not host:port such as mail.example.org:587"),
                );
            }
        }
        one_of(
            problem,
            "notify.smtp_tls",
            &self.smtp_tls,
            &["starttls", "tls", "none"],
        );
        if let Some(file) = &self.smtp_credentials_file {
            absolute_path(problem, "notify.smtp_credentials_file", file);
            readable_file(problem, "notify.smtp_credentials_file", file);
            if self.smtp.is_none() {
                problem("notify.smtp_credentials_file", "needs notify.smtp".into());
            }
        }
        if let Some(sendmail) = &self.sendmail {
            absolute_path(problem, "notify.sendmail", sendmail);
        }
        if self.mail() {
            match &self.from {
                None => problem(
                    "notify.from",
                    "required when mail is sent (notify.smtp or notify.sendmail)".into(),
                ),
                Some(from) if !is_address(from) => problem(
                    "notify.from",
                    format!("{from:?} is not an address such as atrium@example.org"),
                ),
                Some(_) => {}
            }
            if self.domain.is_none() {
                problem(
                    "notify.domain",
                    "required when mail is sent: the domain of users' addresses".into(),
                );
            }
        }
        for (key, domain) in self.domain.iter().map(|d| ("notify.domain", d)).chain(
            self.allowed_domains
                .iter()
                .map(|d| ("notify.allowed_domains", d)),
        ) {
            if !is_domain(domain) {
                problem(
                    key,
                    format!("{domain:?} is not a domain such as example.org"),
                );
            }
        }
        if let Some(url) = &self.webhook {
            if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() > 2048 {
                problem("notify.webhook", format!("{url:?} must be an https:// URL"));
            }
        }
        at_least(problem, "notify.queue", self.queue, 1);
        at_least(problem, "notify.attempts", self.attempts, 1);
        at_least(
            problem,
            "notify.timeout",
            self.timeout,
            HumanDuration::from_secs(1),
        );
    }
}

/// A domain as mail routes it: dot-separated labels of letters, digits and `-`.
pub fn is_domain(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= MAX_ADDRESS_LEN
        && text.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// `local@domain` with a plain local part (letters, digits and `.+-_`, not starting
/// with `-` or `.`, so that it can never read as an option).
pub fn is_address(text: &str) -> bool {
    text.len() <= MAX_ADDRESS_LEN
        && text.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && !local.starts_with(['-', '.'])
                && local
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
                && is_domain(domain)
        })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_reported, load_str};

    #[test]
    fn notifications_are_off_by_default() {
        let loaded = load_str("", &[]);
        assert!(!loaded.config.notify.enabled());
    }

    #[test]
    fn a_mail_relay_needs_a_sender_and_a_domain() {
        let loaded = load_str("[notify]\nsmtp = \"127.0.0.1:2525\"\n", &[]);
        assert_reported(&loaded, &["notify.domain", "notify.from"]);
        let loaded = load_str(
            "[notify]\nsmtp = \"127.0.0.1:2525\"\nfrom = \"atrium@example.org\"\ndomain = \"example.org\"\n",
            &[],
        );
        assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
        assert_eq!(loaded.config.notify.recipient_domains(), ["example.org"]);
    }

    #[test]
    fn bad_values_name_their_key() {
        let loaded = load_str(
            "[notify]\nsmtp = \"nowhere\"\nsmtp_tls = \"ssl\"\nsendmail = \"sendmail\"\nfrom = \"me\"\ndomain = \"exa mple\"\nwebhook = \"ftp://x\"\nqueue = 0\n",
            &[],
        );
        assert_reported(
            &loaded,
            &[
                "notify.domain",
                "notify.from",
                "notify.queue",
                "notify.sendmail",
                "notify.smtp",
                "notify.smtp_tls",
                "notify.webhook",
            ],
        );
    }
}
