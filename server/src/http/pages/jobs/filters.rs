//! The filters of a job list page (`/jobs`, `/admin/jobs`): a GET form whose values
//! come back in the query string, read into the jobs service's [`BoardFilter`].
//!
//! Owns: the form's fields (`state`, `q`, `from`, `to`), their checks (a bad value
//! is refused naming the field) and the query string that keeps them across pages
//! and refreshes. Must not touch: which jobs match (`services::jobs`).

use scheduler::JobState;

use crate::services::jobs::BoardFilter;

/// The filter form as the user filled it in: what the page shows again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterForm {
    /// A state's name (`RUNNING`), or empty for any.
    pub state: String,
    /// Text in the name or partition.
    pub q: String,
    /// Submitted on or after this day (`YYYY-MM-DD`, UTC).
    pub from: String,
    /// Submitted on or before this day (`YYYY-MM-DD`, UTC).
    pub to: String,
    /// Only this user's jobs (everyone's list, for administrators).
    pub user: String,
}

/// A filter value that cannot be read: the field and why, in plain words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadFilter {
    pub field: &'static str,
    pub message: String,
}

/// The states the form offers, in the order a user thinks of them.
pub const STATES: [&str; 9] = [
    "PENDING",
    "RUNNING",
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "NODE_FAIL",
    "COMPLETING",
];

impl FilterForm {
    /// The form's values from a query string's pairs (the last of each name);
    /// other names (`page`) are left to their readers.
    pub fn from_pairs(pairs: &[(String, String)]) -> FilterForm {
        let value = |name: &str| super::super::query_value(pairs, name);
        FilterForm {
            state: value("state").to_ascii_uppercase(),
            q: value("q"),
            from: value("from"),
            to: value("to"),
            user: value("user"),
        }
    }

    /// The service's filter, or the first field that cannot be read.
    pub fn filter(&self) -> Result<BoardFilter, BadFilter> {
        let state = match self.state.as_str() {
            "" | "ALL" | "ANY" => None,
            s => Some(
                JobState::ALL
                    .iter()
                    .copied()
                    .find(|st| st.name() == s || st.short() == s)
                    .ok_or_else(|| BadFilter {
                        field: "state",
                        message: format!(
                            "\"{}\" is not a job state; pick one of {}, or any.",
                            shorten(&self.state),
                            STATES.join(", ")
                        ),
                    })?,
            ),
        };
        if self.q.len() > BoardFilter::MAX_SEARCH {
            return Err(BadFilter {
                field: "q",
                message: format!(
                    "The search text is {} bytes long; at most {} are allowed.",
                    self.q.len(),
                    BoardFilter::MAX_SEARCH
                ),
            });
        }
        let user = self.user.trim();
        if user.len() > MAX_USER_BYTES
            || !user
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
        {
            return Err(BadFilter {
                field: "user",
                message: format!(
                    "\"{}\" is not a user name (letters, digits, . _ - @; at most {MAX_USER_BYTES}).",
                    shorten(user)
                ),
            });
        }
        let since = day("from", &self.from)?;
        let until = day("to", &self.to)?.map(|d| d + DAY_MS);
        if let (Some(s), Some(u)) = (since, until) {
            if u <= s {
                return Err(BadFilter {
                    field: "to",
                    message: "The end of the time range is before its start.".into(),
                });
            }
        }
        Ok(BoardFilter {
            state,
            search: (!self.q.is_empty()).then(|| self.q.clone()),
            since,
            until,
            user: (!user.is_empty()).then(|| user.to_string()),
        })
    }

    /// The filled fields as a query string ending in `&` (empty when none is), to
    /// put before `page=N`.
    pub fn query(&self) -> String {
        [
            ("state", &self.state),
            ("q", &self.q),
            ("from", &self.from),
            ("to", &self.to),
            ("user", &self.user),
        ]
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}&", encode(v)))
        .collect()
    }

    /// Whether any field is filled.
    pub fn is_set(&self) -> bool {
        *self != FilterForm::default()
    }
}

const DAY_MS: i64 = 86_400_000;
/// The longest user name the filter takes.
const MAX_USER_BYTES: usize = 64;

/// A `YYYY-MM-DD` day as the ms of its start in UTC; empty: none.
fn day(field: &'static str, text: &str) -> Result<Option<i64>, BadFilter> {
    if text.is_empty() {
        return Ok(None);
    }
    let bad = || BadFilter {
        field,
        message: format!(
            "\"{}\" is not a day; write it as 2026-11-25.",
            shorten(text)
        ),
    };
    if text.len() != 10 {
        return Err(bad());
    }
    let date: jiff::civil::Date = text.parse().map_err(|_| bad())?;
    let ts = date
        .to_zoned(jiff::tz::TimeZone::UTC)
        .map_err(|_| bad())?
        .timestamp();
    Ok(Some(ts.as_millisecond()))
}

/// At most 40 characters of what the user wrote, for a message.
fn shorten(text: &str) -> String {
    text.chars().take(40).collect()
}

/// Percent-encoding of a query string value (everything but RFC 3986's unreserved
/// characters).
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(q: &[(&str, &str)]) -> Vec<(String, String)> {
        q.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_filled_form_is_read_and_written_back() {
        let form = FilterForm::from_pairs(&pairs(&[
            ("state", "running"),
            ("q", " train & eval "),
            ("from", "2026-11-20"),
            ("to", "2026-11-25"),
            ("page", "2"),
        ]));
        assert_eq!(form.state, "RUNNING");
        assert_eq!(form.q, "train & eval");
        let f = form.filter().expect("valid");
        assert_eq!(f.state, Some(JobState::Running));
        assert_eq!(f.search.as_deref(), Some("train & eval"));
        assert_eq!(f.since, Some(1_795_132_800_000));
        assert_eq!(f.until, Some(1_795_132_800_000 + 6 * DAY_MS));
        assert_eq!(
            form.query(),
            "state=RUNNING&q=train%20%26%20eval&from=2026-11-20&to=2026-11-25&"
        );
        assert!(form.is_set());
        assert_eq!(FilterForm::default().query(), "");
        assert!(FilterForm::default().filter().expect("empty").is_empty());
        assert_eq!(
            FilterForm::from_pairs(&pairs(&[("state", "CD")]))
                .filter()
                .map(|f| f.state),
            Ok(Some(JobState::Completed))
        );
    }

    #[test]
    fn bad_values_name_their_field() {
        let bad = |q: &[(&str, &str)]| {
            FilterForm::from_pairs(&pairs(q))
                .filter()
                .expect_err("refused")
                .field
        };
        assert_eq!(bad(&[("state", "SLEEPING")]), "state");
        assert_eq!(bad(&[("from", "yesterday")]), "from");
        assert_eq!(bad(&[("to", "2026-13-01")]), "to");
        assert_eq!(bad(&[("from", "2026-11-25"), ("to", "2026-11-24")]), "to");
        let long = "x".repeat(BoardFilter::MAX_SEARCH + 1);
        assert_eq!(bad(&[("q", &long)]), "q");
        assert_eq!(bad(&[("user", "a;b")]), "user");
        assert_eq!(bad(&[("user", &"u".repeat(65))]), "user");
        let ok = FilterForm::from_pairs(&pairs(&[("user", "alice")]));
        assert_eq!(ok.filter().expect("read").user.as_deref(), Some("alice"));
        assert_eq!(ok.query(), "user=alice&");
    }
}
