//! Times on pages: the RFC 3339 strings the pages hold, as people read them.
//!
//! Owns: the readable form of a time ("25 Nov 2026, 14:20 UTC"), the relative form
//! ("in 5 min", "3 h ago", "just now") against `util`'s clock, and the `<time>`
//! element that carries both, which `frontend/js/time.js` rewrites to the browser's
//! local time. Must not touch: anything but `util` (it formats, it decides nothing).
//!
//! In a template, with `use crate::http::pages::when::filters;` beside the page's
//! struct:
//!
//! - `{{ t|when }}`: `<time datetime="ISO" title="3 h ago">25 Nov 2026, 14:20 UTC</time>`;
//! - `{{ t|when_relative }}`: `<time datetime="ISO" title="25 Nov 2026, 14:20 UTC"
//!   data-relative>3 h ago</time>` (the script refreshes it each minute);
//! - `type="{{ form.from|date_input }}"`: every filter's day field is the browser's
//!   date picker (a full time given in the address stays text).
//!
//! Text that is not an RFC 3339 time (empty, a placeholder) is shown as it is,
//! escaped.

use askama::Template;

/// A time as the pages show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct When {
    /// RFC 3339 in UTC, to the second: the `datetime` attribute.
    pub iso: String,
    /// `25 Nov 2026, 14:20 UTC`.
    pub readable: String,
    /// `in 5 min`, `3 h ago`, `just now`.
    pub relative: String,
}

impl When {
    /// `text` (RFC 3339) seen at `now_ms`; `None` when it is not a time.
    pub fn parse(text: &str, now_ms: i64) -> Option<When> {
        let ts: jiff::Timestamp = text.trim().parse().ok()?;
        Some(When::at_ms(ts.as_millisecond(), now_ms))
    }

    /// The time `ms` (since the epoch) seen at `now_ms`.
    pub fn at_ms(ms: i64, now_ms: i64) -> When {
        When {
            iso: crate::util::rfc3339(ms),
            readable: readable(ms),
            relative: relative(ms, now_ms),
        }
    }
}

/// `25 Nov 2026, 14:20 UTC` (minutes; the seconds are in the `datetime`).
pub fn readable(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => ts
            .to_zoned(jiff::tz::TimeZone::UTC)
            .strftime("%-d %b %Y, %H:%M UTC")
            .to_string(),
        Err(_) => crate::util::rfc3339(ms),
    }
}

/// How far `ms` is from `now_ms` in words: `just now` within 45 s, else `in …` or
/// `… ago` with [`span`].
pub fn relative(ms: i64, now_ms: i64) -> String {
    let delta = (ms - now_ms) / 1000;
    if delta.abs() < 45 {
        return "just now".into();
    }
    let words = span(delta.unsigned_abs());
    if delta > 0 {
        format!("in {words}")
    } else {
        format!("{words} ago")
    }
}

/// A length of time in words, rounded to what matters at its size: `40 s`,
/// `5 min`, `1 h 40 min`, `14 h`, `3 days`.
pub fn span(secs: u64) -> String {
    const MIN: u64 = 60;
    const HOUR: u64 = 60 * MIN;
    const DAY: u64 = 24 * HOUR;
    if secs < MIN {
        return format!("{secs} s");
    }
    if secs < HOUR {
        return format!("{} min", (secs + MIN / 2) / MIN);
    }
    if secs < 10 * HOUR {
        let mins = (secs + MIN / 2) / MIN;
        let (h, m) = (mins / 60, mins % 60);
        return if m == 0 {
            format!("{h} h")
        } else {
            format!("{h} h {m} min")
        };
    }
    if secs < 2 * DAY {
        return format!("{} h", (secs + HOUR / 2) / HOUR);
    }
    let days = (secs + DAY / 2) / DAY;
    format!("{days} days")
}

/// The `<time>` element (askama escapes every value).
#[derive(Template)]
#[template(
    source = "{% if let Some(w) = when %}<time datetime=\"{{ w.iso }}\" title=\"{% if relative %}{{ w.readable }}{% else %}{{ w.relative }}{% endif %}\"{% if relative %} data-relative{% endif %}>{% if relative %}{{ w.relative }}{% else %}{{ w.readable }}{% endif %}</time>{% else %}{{ raw }}{% endif %}",
    ext = "html"
)]
struct TimeElement<'a> {
    when: Option<When>,
    relative: bool,
    raw: &'a str,
}

/// `text` as a `<time>` element seen at `now_ms` (`relative`: the relative form
/// shown, the readable one in its title).
pub fn element(text: &str, now_ms: i64, relative: bool) -> String {
    TimeElement {
        when: When::parse(text, now_ms),
        relative,
        raw: text,
    }
    .render()
    .unwrap_or_default()
}

/// The askama filters: `use crate::http::pages::when::filters;` in a page's module.
pub mod filters {
    use askama::filters::Safe;

    /// `{{ t|when }}`: the readable time, the relative one in its title.
    pub fn when(
        text: impl std::fmt::Display,
        _: &dyn askama::Values,
    ) -> askama::Result<Safe<String>> {
        Ok(Safe(super::element(
            &text.to_string(),
            crate::util::now_ms(),
            false,
        )))
    }

    /// `{{ value|date_input }}`: the type of a filter's day field, `date` (the
    /// browser's date picker, every page's one) for a day or nothing, `text` for a
    /// full time given in the address (`2025-03-01T12:00:00Z`), kept as it is.
    pub fn date_input(
        text: impl std::fmt::Display,
        _: &dyn askama::Values,
    ) -> askama::Result<&'static str> {
        let text = text.to_string();
        let day = text.is_empty() || text.trim().parse::<jiff::civil::Date>().is_ok();
        Ok(if day { "date" } else { "text" })
    }

    /// `{{ t|when_relative }}`: the relative time, the readable one in its title.
    pub fn when_relative(
        text: impl std::fmt::Display,
        _: &dyn askama::Values,
    ) -> askama::Result<Safe<String>> {
        Ok(Safe(super::element(
            &text.to_string(),
            crate::util::now_ms(),
            true,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 25 Nov 2026, 14:20:00 UTC.
    const NOW: i64 = 1_795_616_400_000;

    #[test]
    fn a_day_or_nothing_gets_the_date_picker_a_full_time_stays_text() {
        let kind = |t: &str| filters::date_input(t, &()).expect("filter");
        assert_eq!(kind(""), "date");
        assert_eq!(kind("2026-01-01"), "date");
        assert_eq!(kind("2026-01-01T12:00:00Z"), "text");
        assert_eq!(kind("yesterday"), "text");
    }

    #[test]
    fn the_clock_constant_is_what_it_says() {
        assert_eq!(crate::util::rfc3339(NOW), "2026-11-25T14:20:00Z");
    }

    #[test]
    fn readable_is_day_month_year_and_minutes_in_utc() {
        assert_eq!(readable(NOW), "25 Nov 2026, 14:20 UTC");
        assert_eq!(readable(NOW + 59_000), "25 Nov 2026, 14:20 UTC");
        assert_eq!(readable(NOW - 14 * 3_600_000), "25 Nov 2026, 00:20 UTC");
        assert_eq!(readable(NOW + 7 * 86_400_000), "2 Dec 2026, 14:20 UTC");
    }

    #[test]
    fn relative_says_just_now_in_and_ago() {
        assert_eq!(relative(NOW, NOW), "just now");
        assert_eq!(relative(NOW + 44_000, NOW), "just now");
        assert_eq!(relative(NOW - 44_000, NOW), "just now");
        assert_eq!(relative(NOW + 50_000, NOW), "in 50 s");
        assert_eq!(relative(NOW + 5 * 60_000, NOW), "in 5 min");
        assert_eq!(relative(NOW - 3 * 3_600_000, NOW), "3 h ago");
        assert_eq!(relative(NOW + 100 * 60_000, NOW), "in 1 h 40 min");
        assert_eq!(relative(NOW - 30 * 3_600_000, NOW), "30 h ago");
        assert_eq!(relative(NOW - 3 * 86_400_000, NOW), "3 days ago");
    }

    #[test]
    fn span_rounds_to_its_unit() {
        assert_eq!(span(0), "0 s");
        assert_eq!(span(59), "59 s");
        assert_eq!(span(60), "1 min");
        assert_eq!(span(89), "1 min");
        assert_eq!(span(90), "2 min");
        assert_eq!(span(3_600), "1 h");
        assert_eq!(span(3_600 + 29), "1 h");
        assert_eq!(span(10 * 3_600 + 1_000), "10 h");
        assert_eq!(span(2 * 86_400), "2 days");
    }

    #[test]
    fn parse_reads_rfc3339_and_refuses_the_rest() {
        let w = When::parse("2026-11-25T11:20:00Z", NOW).expect("a time");
        assert_eq!(w.iso, "2026-11-25T11:20:00Z");
        assert_eq!(w.readable, "25 Nov 2026, 11:20 UTC");
        assert_eq!(w.relative, "3 h ago");
        assert_eq!(
            When::parse("2026-11-25T16:20:00+02:00", NOW).map(|w| w.relative),
            Some("just now".into())
        );
        assert!(When::parse("", NOW).is_none());
        assert!(When::parse("N/A", NOW).is_none());
    }

    #[test]
    fn the_element_carries_both_forms_and_escapes_what_is_not_a_time() {
        assert_eq!(
            element("2026-11-25T14:25:00Z", NOW, false),
            "<time datetime=\"2026-11-25T14:25:00Z\" title=\"in 5 min\">25 Nov 2026, 14:25 UTC</time>"
        );
        assert_eq!(
            element("2026-11-25T14:25:00Z", NOW, true),
            "<time datetime=\"2026-11-25T14:25:00Z\" title=\"25 Nov 2026, 14:25 UTC\" data-relative>in 5 min</time>"
        );
        assert_eq!(element("<b>", NOW, false), "&#60;b&#62;");
        assert_eq!(element("", NOW, true), "");
    }
}
