//! Announcements: an administrator's message to everyone (maintenance next Tuesday)
//! with a severity and a time window, shown on the dashboard and atop every page
//! while the window is open; set from the admin pages and the API, audited.
//!
//! Owns: the rules of an announcement (bounded text, a known severity, a window that
//! ends after it starts and within a year). Must not touch: HTTP types, SQL.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ServiceError;
use crate::auth::Principal;
use crate::store::{AnnouncementRecord, NewAuditEntry, Store};
use crate::util::{now_ms, rfc3339};

/// The longest message, in characters.
pub const MAX_MESSAGE_CHARS: usize = 1000;
/// The severities, mildest first.
pub const SEVERITIES: [&str; 3] = ["info", "warning", "critical"];
/// The longest window.
const MAX_WINDOW_MS: i64 = 366 * 86_400_000;

/// An announcement as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Announcement {
    pub id: i64,
    pub message: String,
    /// `info`, `warning` or `critical`.
    pub severity: String,
    /// Shown from, until (RFC 3339).
    pub starts_at: String,
    pub ends_at: String,
    pub created_by: String,
}

impl From<AnnouncementRecord> for Announcement {
    fn from(r: AnnouncementRecord) -> Self {
        Announcement {
            id: r.id,
            message: r.message,
            severity: r.severity,
            starts_at: rfc3339(r.starts_at),
            ends_at: rfc3339(r.ends_at),
            created_by: r.created_by,
        }
    }
}

/// `POST /api/v1/admin/announcements`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewAnnouncement {
    pub message: String,
    /// `info` (default), `warning` or `critical`.
    #[serde(default)]
    pub severity: Option<String>,
    /// RFC 3339; default: now.
    #[serde(default)]
    pub starts_at: Option<String>,
    /// RFC 3339, after `starts_at` and within a year of it.
    pub ends_at: String,
}

/// The announcements service. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Announcements {
    store: Store,
}

impl Announcements {
    pub fn new(store: Store) -> Announcements {
        Announcements { store }
    }

    /// What everyone is shown now.
    pub async fn current(&self) -> Result<Vec<Announcement>, ServiceError> {
        let now = now_ms();
        Ok(self
            .store
            .announcements(now, true)
            .await?
            .into_iter()
            .map(Announcement::from)
            .collect())
    }

    /// Every announcement not over yet (administrators).
    pub async fn upcoming(&self, caller: &Principal) -> Result<Vec<Announcement>, ServiceError> {
        admin_only(caller)?;
        Ok(self
            .store
            .announcements(now_ms(), false)
            .await?
            .into_iter()
            .map(Announcement::from)
            .collect())
    }

    /// Announce, checked and audited.
    pub async fn create(
        &self,
        caller: &Principal,
        client_addr: &str,
        new: &NewAnnouncement,
    ) -> Result<Announcement, ServiceError> {
        admin_only(caller)?;
        let message = new.message.trim();
        if message.is_empty() || message.chars().count() > MAX_MESSAGE_CHARS {
            return Err(invalid(
                "message",
                format!("say something, in at most {MAX_MESSAGE_CHARS} characters"),
            ));
        }
        if message.chars().any(|c| c.is_control() && c != '\n') {
            return Err(invalid("message", "plain text only".into()));
        }
        let severity = new
            .severity
            .as_deref()
            .unwrap_or("info")
            .trim()
            .to_lowercase();
        if !SEVERITIES.contains(&severity.as_str()) {
            return Err(invalid(
                "severity",
                format!("one of {}", SEVERITIES.join(", ")),
            ));
        }
        let now = now_ms();
        let starts_at = match new
            .starts_at
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            None => now,
            Some(t) => time("starts_at", t)?,
        };
        let ends_at = time("ends_at", new.ends_at.trim())?;
        if ends_at <= starts_at || ends_at <= now {
            return Err(invalid(
                "ends_at",
                "the end is after the start and still to come".into(),
            ));
        }
        if ends_at - starts_at > MAX_WINDOW_MS {
            return Err(invalid("ends_at", "a window of at most a year".into()));
        }
        let detail = serde_json::json!({
            "severity": severity,
            "starts_at": rfc3339(starts_at),
            "ends_at": rfc3339(ends_at),
        })
        .to_string();
        let record = self
            .store
            .create_announcement(
                message,
                &severity,
                starts_at,
                ends_at,
                now,
                &NewAuditEntry {
                    actor: &caller.username,
                    action: "announcement.create",
                    target: message,
                    detail: &detail,
                    client_addr,
                },
            )
            .await?;
        Ok(record.into())
    }

    /// Withdraw an announcement, audited.
    pub async fn delete(
        &self,
        caller: &Principal,
        client_addr: &str,
        id: i64,
    ) -> Result<Announcement, ServiceError> {
        admin_only(caller)?;
        let target = id.to_string();
        let gone = self
            .store
            .delete_announcement(
                id,
                now_ms(),
                &NewAuditEntry {
                    actor: &caller.username,
                    action: "announcement.delete",
                    target: &target,
                    detail: "{}",
                    client_addr,
                },
            )
            .await?;
        Ok(gone.into())
    }
}

fn admin_only(caller: &Principal) -> Result<(), ServiceError> {
    if caller.acts_as_admin() {
        Ok(())
    } else {
        Err(ServiceError::Forbidden(
            "announcements are made by administrators".into(),
        ))
    }
}

fn invalid(field: &'static str, message: String) -> ServiceError {
    ServiceError::Invalid {
        field,
        message: format!("{field}: {message}"),
    }
}

/// An RFC 3339 time (`2026-12-01T08:00:00Z`, an offset, or the form's local
/// `2026-12-01T08:00` read as UTC) as ms.
fn time(field: &'static str, text: &str) -> Result<i64, ServiceError> {
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return Ok(t.as_millisecond());
    }
    if let Ok(dt) = text.parse::<jiff::civil::DateTime>() {
        if let Ok(z) = dt.to_zoned(jiff::tz::TimeZone::UTC) {
            return Ok(z.timestamp().as_millisecond());
        }
    }
    Err(invalid(
        field,
        format!(
            "\"{}\" is not a time like 2026-12-01T08:00:00Z",
            text.chars().take(40).collect::<String>()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_read_in_rfc_3339_and_as_a_forms_local_time() {
        assert_eq!(time("t", "1970-01-01T00:00:01Z").expect("utc"), 1000);
        assert_eq!(
            time("t", "1970-01-01T01:00:01+01:00").expect("offset"),
            1000
        );
        assert_eq!(time("t", "1970-01-01T00:00:01").expect("local"), 1000);
        assert!(time("t", "next tuesday").is_err());
    }
}
