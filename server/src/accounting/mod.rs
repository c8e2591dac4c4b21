//! Usage accounting as users ask for it: a query (time range, filters, grouping)
//! read from URL parameters, the rule of who may see whose usage, and the answer
//! as CSV ([`csv`]) or as an SVG chart ([`chart`]).
//!
//! Owns: parsing and checking accounting queries, and laying usage out. Must not
//! touch: SQL (the store sums usage) or HTTP (the handlers call this).

pub mod answer;
pub mod chart;
pub mod csv;
pub mod utilisation;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

use crate::store::{Bucket, UsageFilter, UsageKey};

/// The most job records one answer holds, and how many by default.
pub const MAX_LIMIT: i64 = 100_000;
pub const DEFAULT_LIMIT: i64 = 1000;

/// A query parameter with a bad value: the parameter and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    pub field: &'static str,
    pub message: String,
}

/// The error of `field`: `message` says what is wrong with its value.
pub(crate) fn bad(field: &'static str, message: impl Into<String>) -> FieldError {
    FieldError {
        field,
        message: message.into(),
    }
}

/// How usage is laid out: one row per job, or sums per user, group, account or
/// calendar bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    Job,
    Key(UsageKey),
    Bucket(Bucket),
}

impl GroupBy {
    pub const NAMES: [&'static str; 7] =
        ["job", "user", "group", "account", "day", "week", "month"];

    pub fn parse(text: &str) -> Option<GroupBy> {
        Some(match text {
            "job" => GroupBy::Job,
            "user" => GroupBy::Key(UsageKey::User),
            "group" => GroupBy::Key(UsageKey::Group),
            "account" => GroupBy::Key(UsageKey::Account),
            "day" => GroupBy::Bucket(Bucket::Day),
            "week" => GroupBy::Bucket(Bucket::Week),
            "month" => GroupBy::Bucket(Bucket::Month),
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Job => "job",
            GroupBy::Key(UsageKey::User) => "user",
            GroupBy::Key(UsageKey::Group) => "group",
            GroupBy::Key(UsageKey::Account) => "account",
            GroupBy::Bucket(Bucket::Day) => "day",
            GroupBy::Bucket(Bucket::Week) => "week",
            GroupBy::Bucket(Bucket::Month) => "month",
        }
    }
}

/// An accounting query, checked.
#[derive(Debug, Clone)]
pub struct Query {
    pub filter: UsageFilter,
    pub group_by: GroupBy,
    /// Job records per answer (`group_by=job`), when given.
    pub limit: Option<i64>,
    pub offset: i64,
    /// `format=csv` (`Some(true)`) or `format=json`, when given.
    pub csv: Option<bool>,
    /// The chart's buckets: as asked, else days for a range of up to three months,
    /// else months.
    pub bucket: Bucket,
}

/// Parameters every accounting URL accepts.
const PARAMS: [&str; 11] = [
    "user",
    "group",
    "account",
    "partition",
    "from",
    "to",
    "group_by",
    "limit",
    "offset",
    "format",
    "bucket",
];

impl Query {
    /// Read `pairs` (URL query parameters); empty values count as absent. Without
    /// `from` and `to`: the calendar month of `now`, in UTC.
    pub fn parse(pairs: &[(String, String)], now: i64) -> Result<Query, FieldError> {
        let mut q = Query {
            filter: UsageFilter {
                now,
                ..UsageFilter::default()
            },
            group_by: GroupBy::Job,
            limit: None,
            offset: 0,
            csv: None,
            bucket: Bucket::Day,
        };
        let (mut from, mut to, mut chosen_bucket) = (None, None, None);
        for (name, value) in pairs {
            let Some(field) = PARAMS.iter().find(|p| **p == name.as_str()) else {
                return Err(bad("query", format!("unknown parameter \"{name}\"")));
            };
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            match *field {
                "user" => q.filter.user = Some(value.to_string()),
                "group" => q.filter.group = Some(value.to_string()),
                "account" => q.filter.account = Some(value.to_string()),
                "partition" => q.filter.partition = Some(value.to_string()),
                "from" => from = Some(parse_time("from", value)?),
                "to" => to = Some(parse_time("to", value)?),
                "group_by" => {
                    q.group_by = GroupBy::parse(value).ok_or_else(|| {
                        bad(
                            "group_by",
                            format!("\"{value}\" is not one of {}", GroupBy::NAMES.join(", ")),
                        )
                    })?
                }
                "limit" => {
                    q.limit = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=MAX_LIMIT).contains(n))
                        .map(Some)
                        .ok_or_else(|| bad("limit", format!("must be 1 to {MAX_LIMIT}")))?
                }
                "offset" => {
                    q.offset = value
                        .parse()
                        .ok()
                        .filter(|n| *n >= 0)
                        .ok_or_else(|| bad("offset", "must be a whole number, 0 or more"))?
                }
                "format" => {
                    q.csv = match value {
                        "csv" => Some(true),
                        "json" => Some(false),
                        other => {
                            return Err(bad("format", format!("\"{other}\" is not csv or json")))
                        }
                    }
                }
                _ => {
                    chosen_bucket = Some(match value {
                        "day" => Bucket::Day,
                        "week" => Bucket::Week,
                        "month" => Bucket::Month,
                        other => {
                            return Err(bad(
                                "bucket",
                                format!("\"{other}\" is not day, week or month"),
                            ))
                        }
                    })
                }
            }
        }
        // Absent ends: the current month; from a given `from` to the end of the
        // current month (or of its own); to a given `to` from the start of its month.
        (q.filter.from, q.filter.to) = match (from, to) {
            (None, None) => month_of(now),
            (Some(f), None) => (f, month_of(now).1.max(month_of(f).1)),
            (None, Some(t)) => (month_of(t - 1).0, t),
            (Some(f), Some(t)) => (f, t),
        };
        if q.filter.to <= q.filter.from {
            return Err(bad("to", "must be after from"));
        }
        if let GroupBy::Bucket(b) = q.group_by {
            chosen_bucket = Some(b);
        }
        // Without a choice: days for up to three months, else months.
        q.bucket = chosen_bucket.unwrap_or(if q.filter.to - q.filter.from <= 92 * 86_400_000 {
            Bucket::Day
        } else {
            Bucket::Month
        });
        let buckets = crate::store::bucket_bounds(q.filter.from, q.filter.to, q.bucket).len();
        if chosen_bucket.is_some() && buckets > crate::store::MAX_BUCKETS {
            return Err(bad(
                "bucket",
                format!(
                    "the range holds more than {} buckets; ask for a shorter range or larger buckets",
                    crate::store::MAX_BUCKETS
                ),
            ));
        }
        Ok(q)
    }

    /// Apply who may see what: administrators see everyone; anyone else only
    /// themselves (asking for another user is refused).
    pub fn restrict_to(&mut self, user: &str, is_admin: bool) -> Result<(), String> {
        if is_admin {
            return Ok(());
        }
        match &self.filter.user {
            Some(other) if other != user => Err(format!(
                "user: you may see only your own usage ({user}), not {other}'s; administrators see everyone's"
            )),
            _ => {
                self.filter.user = Some(user.to_string());
                Ok(())
            }
        }
    }
}

/// A time as RFC 3339 (`2025-03-01T00:00:00Z`) or a date (`2025-03-01`, its
/// midnight in UTC): Unix milliseconds.
pub fn parse_time(field: &'static str, text: &str) -> Result<i64, FieldError> {
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(t.as_millisecond());
    }
    text.parse::<Date>()
        .ok()
        .and_then(|d| d.to_zoned(TimeZone::UTC).ok())
        .map(|z| z.timestamp().as_millisecond())
        .ok_or_else(|| {
            bad(
                field,
                format!("\"{text}\" is neither an RFC 3339 time (2025-03-01T00:00:00Z) nor a date (2025-03-01)"),
            )
        })
}

/// The first instant of the calendar month (UTC) holding `now`, and of the next.
pub fn month_of(now: i64) -> (i64, i64) {
    let first = Timestamp::from_millisecond(now)
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_zoned(TimeZone::UTC)
        .date()
        .first_of_month();
    let ms = |d: Date| {
        d.to_zoned(TimeZone::UTC)
            .map(|z| z.timestamp().as_millisecond())
            .unwrap_or(now)
    };
    let next = first.checked_add(1.month()).unwrap_or(first);
    (ms(first), ms(next))
}

/// A time for answers: RFC 3339 in UTC, with milliseconds when there are any.
pub fn time_text(ms: i64) -> String {
    Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// A bucket's name: its first day (`2025-03-01`).
pub fn bucket_text(ms: i64) -> String {
    Timestamp::from_millisecond(ms)
        .map(|t| t.to_zoned(TimeZone::UTC).date().to_string())
        .unwrap_or_default()
}

/// Hours with four decimals, seconds with three: what answers show.
pub fn hours(seconds: f64) -> f64 {
    (seconds / 3600.0 * 1e4).round() / 1e4
}

pub fn seconds(seconds: f64) -> f64 {
    (seconds * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn ms(text: &str) -> i64 {
        text.parse::<Timestamp>().expect("time").as_millisecond()
    }

    #[test]
    fn the_default_range_is_the_current_month_in_utc() {
        let now = ms("2025-03-10T15:00:00Z");
        let q = Query::parse(&[], now).expect("query");
        assert_eq!(q.filter.from, ms("2025-03-01T00:00:00Z"));
        assert_eq!(q.filter.to, ms("2025-04-01T00:00:00Z"));
        assert_eq!((q.group_by, q.limit, q.csv), (GroupBy::Job, None, None));
        let (dec, jan) = month_of(ms("2024-12-31T23:59:59Z"));
        assert_eq!(
            (dec, jan),
            (ms("2024-12-01T00:00:00Z"), ms("2025-01-01T00:00:00Z"))
        );
    }

    #[test]
    fn times_are_rfc_3339_or_dates() {
        let q = Query::parse(
            &pairs(&[
                ("from", "2025-01-01"),
                ("to", "2025-01-02T12:30:00+01:00"),
                ("group_by", "month"),
                ("format", "csv"),
                ("user", "alice"),
                ("partition", ""),
            ]),
            0,
        )
        .expect("query");
        assert_eq!(q.filter.from, ms("2025-01-01T00:00:00Z"));
        assert_eq!(q.filter.to, ms("2025-01-02T11:30:00Z"));
        assert_eq!(q.group_by, GroupBy::Bucket(Bucket::Month));
        assert_eq!(q.bucket, Bucket::Month);
        assert_eq!(q.csv, Some(true));
        assert_eq!(q.filter.user.as_deref(), Some("alice"));
        assert_eq!(q.filter.partition, None, "empty values are absent");
    }

    #[test]
    fn bad_values_name_their_parameter() {
        let err = |list: &[(&str, &str)]| Query::parse(&pairs(list), 0).expect_err("bad").field;
        assert_eq!(err(&[("from", "yesterday")]), "from");
        assert_eq!(err(&[("to", "2025-13-01")]), "to");
        assert_eq!(err(&[("from", "2025-02-01"), ("to", "2025-01-01")]), "to");
        assert_eq!(err(&[("group_by", "node")]), "group_by");
        assert_eq!(err(&[("limit", "0")]), "limit");
        assert_eq!(err(&[("limit", "100001")]), "limit");
        assert_eq!(err(&[("offset", "-1")]), "offset");
        assert_eq!(err(&[("format", "xml")]), "format");
        assert_eq!(err(&[("bucket", "hour")]), "bucket");
        assert_eq!(err(&[("colour", "red")]), "query");
        assert_eq!(
            err(&[
                ("from", "1990-01-01"),
                ("to", "2025-01-01"),
                ("bucket", "day")
            ]),
            "bucket"
        );
    }

    #[test]
    fn users_see_only_their_own_usage() {
        let mut q = Query::parse(&[], 0).expect("query");
        q.restrict_to("alice", false).expect("own");
        assert_eq!(q.filter.user.as_deref(), Some("alice"));
        let mut q = Query::parse(&pairs(&[("user", "bob")]), 0).expect("query");
        let refused = q.restrict_to("alice", false).expect_err("another user");
        assert!(refused.contains("bob"), "{refused}");
        q.restrict_to("root", true).expect("admin");
        assert_eq!(q.filter.user.as_deref(), Some("bob"));
        let mut q = Query::parse(&[], 0).expect("query");
        q.restrict_to("root", true).expect("admin");
        assert_eq!(q.filter.user, None, "administrators see everyone");
    }
}
