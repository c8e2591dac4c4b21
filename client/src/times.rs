//! Times as Slurm's commands read and print them: time stamps in the format
//! `SLURM_TIME_FORMAT` names (`standard`, `relative` or a `strftime` format), the
//! durations of each command (they differ), and the times `sacct -S/-E` and `scontrol
//! update StartTime=` take (`now-1hour`, `2026-11-27T10:00`, `midnight`, `MMDD`, …).
//! Pure: the time zone and "now" are arguments.

use jiff::{civil, tz::TimeZone, Timestamp, Zoned};

/// How time stamps are printed (`SLURM_TIME_FORMAT`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TimeFormat {
    /// `2026-11-27T17:34:10`.
    #[default]
    Standard,
    /// By distance from now: `17:34:10`, `Ystday 17:34`, `Tomorr 09:00`, `Mon 09:00`,
    /// `27 Nov 17:34`, `27 Nov 2025`.
    Relative,
    /// A `strftime` format (`%s`: seconds since the epoch).
    Strftime(String),
}

impl TimeFormat {
    /// `SLURM_TIME_FORMAT`'s value; a value Slurm would not take falls back to the
    /// standard format with the warning Slurm prints (for standard error).
    pub fn from_env(value: Option<&str>, command: &str) -> (TimeFormat, Option<String>) {
        match value {
            None | Some("") | Some("standard") => (TimeFormat::Standard, None),
            Some("relative") => (TimeFormat::Relative, None),
            Some(f) if f.contains('%') && f.len() < 32 => {
                (TimeFormat::Strftime(f.to_string()), None)
            }
            Some(f) => (
                TimeFormat::Standard,
                Some(format!(
                    "{command}: error: invalid SLURM_TIME_FORMAT = '{f}'"
                )),
            ),
        }
    }
}

/// This machine's time zone as the C library reads it: `TZ` (a zone name, a path, or
/// a POSIX rule), else `/etc/localtime`, else UTC. Unlike jiff's `TimeZone::system`,
/// it never walks the whole zone database to name the zone, which costs a command
/// more than its whole call to the portal.
pub fn local_zone() -> TimeZone {
    let from_file = |path: &str| {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| TimeZone::tzif("Local", &bytes).ok())
    };
    match std::env::var("TZ").ok().filter(|t| !t.is_empty()) {
        Some(tz) => {
            let tz = tz.strip_prefix(':').unwrap_or(&tz);
            if tz.starts_with('/') {
                from_file(tz)
            } else {
                (!tz.contains(".."))
                    .then(|| from_file(&format!("/usr/share/zoneinfo/{tz}")))
                    .flatten()
                    .or_else(|| TimeZone::posix(tz).ok())
            }
        }
        None => from_file("/etc/localtime"),
    }
    .unwrap_or(TimeZone::UTC)
}

/// Prints time stamps in one time zone and format, relative to one "now".
#[derive(Debug, Clone)]
pub struct Clock {
    pub tz: TimeZone,
    pub now: Timestamp,
    pub format: TimeFormat,
}

impl Clock {
    /// This machine's time zone, now, and `SLURM_TIME_FORMAT`; the warning to print.
    pub fn from_env(command: &str) -> (Clock, Option<String>) {
        let (format, warning) =
            TimeFormat::from_env(std::env::var("SLURM_TIME_FORMAT").ok().as_deref(), command);
        (
            Clock {
                tz: local_zone(),
                now: Timestamp::now(),
                format,
            },
            warning,
        )
    }

    pub fn zoned_now(&self) -> Zoned {
        self.now.to_zoned(self.tz.clone())
    }

    /// A time stamp as Slurm prints it (`slurm_make_time_str`).
    pub fn stamp(&self, t: Timestamp) -> String {
        let z = t.to_zoned(self.tz.clone());
        match &self.format {
            TimeFormat::Standard => z.strftime("%Y-%m-%dT%H:%M:%S").to_string(),
            TimeFormat::Strftime(f) => jiff::fmt::strtime::format(f.as_str(), &z)
                .unwrap_or_else(|_| z.strftime("%Y-%m-%dT%H:%M:%S").to_string()),
            TimeFormat::Relative => {
                let today = self.zoned_now().date();
                let distance = today.until(z.date()).map_or(0, |s| s.get_days());
                match distance {
                    0 => z.strftime("%H:%M:%S").to_string(),
                    -1 => z.strftime("Ystday %H:%M").to_string(),
                    1 => z.strftime("Tomorr %H:%M").to_string(),
                    2..=6 => z.strftime("%a %H:%M").to_string(),
                    d if (-365..=365).contains(&d) => z.strftime("%-d %b %H:%M").to_string(),
                    _ => z.strftime("%-d %b %Y").to_string(),
                }
            }
        }
    }

    /// An RFC 3339 time from the portal as a stamp; `missing` when there is none.
    pub fn stamp_of(&self, rfc3339: Option<&str>, missing: &str) -> String {
        rfc3339
            .and_then(|t| t.parse::<Timestamp>().ok())
            .map_or_else(|| missing.to_string(), |t| self.stamp(t))
    }
}

/// A run time as squeue prints `%M`, `%l`, `%L`: `M:SS`, `H:MM:SS` or `D-HH:MM:SS`.
pub fn squeue_secs(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// A duration as sacct and scontrol print `Elapsed`, `Timelimit`, `RunTime`:
/// `HH:MM:SS` (two-digit hours) or `D-HH:MM:SS`.
pub fn secs2time(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// CPU time as sacct prints `TotalCPU`: `D-HH:MM:SS`, `HH:MM:SS`, `MM:SS.mmm` when
/// there is a part of a second, else `00:MM:SS`.
pub fn cpu_time(millis: u64) -> String {
    let secs = millis / 1000;
    let ms = millis % 1000;
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else if h > 0 {
        format!("{h:02}:{m:02}:{s:02}")
    } else if ms > 0 {
        format!("{m:02}:{s:02}.{ms:03}")
    } else {
        format!("00:{m:02}:{s:02}")
    }
}

/// A time Slurm's `parse_time` takes, read in the past sense (sacct's window: a date
/// without a year is this year unless that is in the future; a time alone is today).
/// The error is Slurm's message, printed as is.
pub fn parse_time(text: &str, now: &Zoned) -> Result<Timestamp, String> {
    let bad = |pos: usize| format!("Invalid time specification (pos={pos}): {text}");
    let lower = text.trim().to_ascii_lowercase();
    if let Some(epoch) = lower.strip_prefix("uts") {
        return epoch
            .parse::<i64>()
            .ok()
            .filter(|s| *s >= 1_000_000)
            .and_then(|s| Timestamp::from_second(s).ok())
            .ok_or_else(|| bad(3));
    }
    if let Some(rest) = lower.strip_prefix("now") {
        let rest: String = rest.chars().filter(|c| !c.is_whitespace()).collect();
        if rest.is_empty() {
            return Ok(now.timestamp());
        }
        let (sign, rest) = match rest.split_at(1) {
            ("-", r) => (-1i64, r),
            ("+", r) => (1, r),
            _ => return Err(bad(3)),
        };
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        let count: i64 = rest[..digits].parse().map_err(|_| bad(4))?;
        let unit = match &rest[digits..] {
            "" | "second" | "seconds" => 1,
            "minute" | "minutes" => 60,
            "hour" | "hours" => 3600,
            "day" | "days" => 86_400,
            "week" | "weeks" => 7 * 86_400,
            _ => return Err(bad(4)),
        };
        return Timestamp::from_second(
            now.timestamp()
                .as_second()
                .saturating_add(count.saturating_mul(unit).saturating_mul(sign)),
        )
        .map_err(|_| bad(4));
    }
    let at = |date: civil::Date, h: i8, m: i8, s: i8| -> Result<Timestamp, String> {
        date.at(h, m, s, 0)
            .to_zoned(now.time_zone().clone())
            .map(|z| z.timestamp())
            .map_err(|_| bad(0))
    };
    let today = now.date();
    match lower.as_str() {
        "today" => return at(today, 0, 0, 0),
        "midnight" => return at(today, 0, 0, 0),
        "noon" => return at(today, 12, 0, 0),
        "fika" => return at(today, 15, 0, 0),
        "teatime" => return at(today, 16, 0, 0),
        "tomorrow" => return at(today.tomorrow().map_err(|_| bad(0))?, 0, 0, 0),
        _ => {}
    }
    // A date, a time, or both (`T`, `-` after an MM/DD date, or a blank between).
    let (date_part, time_part) = split_date_time(&lower);
    let date = match date_part {
        Some(d) => parse_date(d, today).ok_or_else(|| bad(0))?,
        None => today,
    };
    let (h, m, s) = match time_part {
        Some(t) => parse_clock(t).ok_or_else(|| bad(date_part.map_or(0, str::len)))?,
        None => (0, 0, 0),
    };
    at(date, h, m, s)
}

/// `YYYY-MM-DD[THH:MM[:SS]]`, `MM/DD[/YY][-HH:MM[:SS]]`, `MMDD[YY][-HH:MM]`,
/// `YYYY-MM-DD HH:MM`, or a time alone.
fn split_date_time(text: &str) -> (Option<&str>, Option<&str>) {
    if let Some((d, t)) = text.split_once('t') {
        return (Some(d), Some(t));
    }
    if let Some((d, t)) = text.split_once(' ') {
        return (Some(d), Some(t.trim()));
    }
    if text.contains(':') && !text.contains('/') && !text.contains('.') && text.len() <= 11 {
        // `10:00`, `5:00pm`; `1127-10:00` has a date before its dash.
        if let Some((d, t)) = text.split_once('-') {
            if d.len() == 4 || d.len() == 6 {
                return (Some(d), Some(t));
            }
        }
        return (None, Some(text));
    }
    if text.matches('-').count() == 3 {
        // `YYYY-MM-DD-HH:MM` is not Slurm's; `MM/DD-HH:MM` is handled below.
        return (Some(text), None);
    }
    if let Some((d, t)) = text.split_once('-') {
        if d.contains('/') || d.contains('.') {
            return (Some(d), Some(t));
        }
    }
    (Some(text), None)
}

fn parse_date(text: &str, today: civil::Date) -> Option<civil::Date> {
    let this_year = today.year();
    // A date without a year is this year, unless that is still to come: last year's.
    let past = |m: i8, d: i8| {
        let date = civil::Date::new(this_year, m, d).ok()?;
        if date > today {
            civil::Date::new(this_year - 1, m, d).ok()
        } else {
            Some(date)
        }
    };
    let two_digit_year = |y: &str| {
        y.parse::<i16>()
            .ok()
            .filter(|_| y.len() == 2)
            .map(|y| 2000 + y)
    };
    if text.len() == 10 && text.as_bytes()[4] == b'-' {
        let y: i16 = text[..4].parse().ok()?;
        let m: i8 = text[5..7].parse().ok()?;
        let d: i8 = text[8..10].parse().ok()?;
        return civil::Date::new(y, m, d).ok();
    }
    for sep in ['/', '.'] {
        if text.contains(sep) {
            let parts: Vec<&str> = text.split(sep).collect();
            let m: i8 = parts.first()?.parse().ok()?;
            let d: i8 = parts.get(1)?.parse().ok()?;
            return match parts.get(2) {
                Some(y) => civil::Date::new(two_digit_year(y)?, m, d).ok(),
                None => past(m, d),
            };
        }
    }
    if text.chars().all(|c| c.is_ascii_digit()) && (text.len() == 4 || text.len() == 6) {
        let m: i8 = text[..2].parse().ok()?;
        let d: i8 = text[2..4].parse().ok()?;
        return match text.get(4..) {
            Some(y) if !y.is_empty() => civil::Date::new(two_digit_year(y)?, m, d).ok(),
            _ => past(m, d),
        };
    }
    None
}

/// `HH:MM[:SS]` with an optional `am`/`pm`.
fn parse_clock(text: &str) -> Option<(i8, i8, i8)> {
    let text = text.trim();
    let (clock, meridiem) = if let Some(c) = text.strip_suffix("am") {
        (c.trim(), Some(false))
    } else if let Some(c) = text.strip_suffix("pm") {
        (c.trim(), Some(true))
    } else {
        (text, None)
    };
    let parts: Vec<&str> = clock.split(':').collect();
    if !(2..=3).contains(&parts.len()) || parts.iter().any(|p| p.is_empty() || p.len() > 2) {
        return None;
    }
    let mut h: i8 = parts[0].parse().ok()?;
    let m: i8 = parts[1].parse().ok()?;
    let s: i8 = parts.get(2).map_or(Some(0), |s| s.parse().ok())?;
    match meridiem {
        Some(pm) if (1..=12).contains(&h) => h = h % 12 + if pm { 12 } else { 0 },
        Some(_) => return None,
        None => {}
    }
    ((0..24).contains(&h) && (0..60).contains(&m) && (0..61).contains(&s)).then_some((h, m, s))
}

/// A time limit as `sinfo` prints `%l`: `infinite`, `H:MM:SS` or `D-HH:MM:SS`.
pub fn time_limit(limit: Option<u64>) -> String {
    match limit {
        None => "infinite".into(),
        Some(secs) => {
            let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
            if d > 0 {
                format!("{d}-{h:02}:{m:02}:{s:02}")
            } else {
                format!("{h}:{m:02}:{s:02}")
            }
        }
    }
}

/// Reads a limit the portal wrote (`UNLIMITED`, `D-HH:MM:SS`, `HH:MM:SS`, `MM:SS`,
/// or seconds as a number): seconds, or `None` for no limit. `Err` when unreadable.
pub fn parse_limit(value: &serde_json::Value) -> Result<Option<u64>, String> {
    let bad = || format!("unreadable time limit {value}");
    match value {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Number(n) => Ok(n.as_u64().filter(|&s| s > 0)),
        serde_json::Value::String(s) => {
            let s = s.trim();
            if s.eq_ignore_ascii_case("unlimited") || s.eq_ignore_ascii_case("infinite") {
                return Ok(None);
            }
            let (days, clock) = match s.split_once('-') {
                Some((d, rest)) => (d.parse::<u64>().map_err(|_| bad())?, rest),
                None => (0, s),
            };
            let parts = clock
                .split(':')
                .map(|p| p.parse::<u64>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| bad())?;
            let (h, m, sec) = match parts.as_slice() {
                [h, m, s] => (*h, *m, *s),
                [m, s] => (0, *m, *s),
                _ => return Err(bad()),
            };
            Ok(Some(days * 86_400 + h * 3600 + m * 60 + sec))
        }
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(text: &str) -> Zoned {
        format!("{text}[UTC]").parse().expect("a zoned time")
    }

    fn read(text: &str) -> Result<String, String> {
        parse_time(text, &utc("2026-11-27T17:34:10"))
            .map(|t| t.to_zoned(TimeZone::UTC).strftime("%FT%T").to_string())
    }

    #[test]
    fn slurms_time_forms_are_read() {
        assert_eq!(read("now").as_deref(), Ok("2026-11-27T17:34:10"));
        assert_eq!(read("now-1hour").as_deref(), Ok("2026-11-27T16:34:10"));
        assert_eq!(read("now - 2 days").as_deref(), Ok("2026-11-25T17:34:10"));
        assert_eq!(read("now+30").as_deref(), Ok("2026-11-27T17:34:40"));
        assert_eq!(read("today").as_deref(), Ok("2026-11-27T00:00:00"));
        assert_eq!(read("midnight").as_deref(), Ok("2026-11-27T00:00:00"));
        assert_eq!(read("noon").as_deref(), Ok("2026-11-27T12:00:00"));
        assert_eq!(read("tomorrow").as_deref(), Ok("2026-11-28T00:00:00"));
        assert_eq!(read("2026-11-20").as_deref(), Ok("2026-11-20T00:00:00"));
        assert_eq!(
            read("2026-11-20T10:05").as_deref(),
            Ok("2026-11-20T10:05:00")
        );
        assert_eq!(
            read("2026-11-20T10:05:07").as_deref(),
            Ok("2026-11-20T10:05:07")
        );
        assert_eq!(
            read("2026-11-20 10:05").as_deref(),
            Ok("2026-11-20T10:05:00")
        );
        assert_eq!(read("10:00").as_deref(), Ok("2026-11-27T10:00:00"));
        assert_eq!(read("5:00pm").as_deref(), Ok("2026-11-27T17:00:00"));
        assert_eq!(read("1120").as_deref(), Ok("2026-11-20T00:00:00"));
        // A date still to come this year is last year's.
        assert_eq!(read("1201").as_deref(), Ok("2025-12-01T00:00:00"));
        assert_eq!(read("112025").as_deref(), Ok("2025-11-20T00:00:00"));
        assert_eq!(read("11/20").as_deref(), Ok("2026-11-20T00:00:00"));
        assert_eq!(read("11/20/25-08:30").as_deref(), Ok("2025-11-20T08:30:00"));
        assert_eq!(read("uts1795800957").as_deref(), Ok("2026-11-27T17:35:57"));
    }

    #[test]
    fn what_slurm_refuses_is_refused_in_its_words() {
        for bad in [
            "now-1h",
            "garbage",
            "2026-13-01",
            "5pm",
            "2026-11-27T10",
            "yesterday",
        ] {
            let err = read(bad).expect_err(bad);
            assert!(err.starts_with("Invalid time specification (pos="), "{err}");
            assert!(err.ends_with(bad), "{err}");
        }
    }

    #[test]
    fn durations_differ_by_command_as_slurms_do() {
        assert_eq!(squeue_secs(0), "0:00");
        assert_eq!(squeue_secs(3725), "1:02:05");
        assert_eq!(squeue_secs(90_061), "1-01:01:01");
        assert_eq!(secs2time(4), "00:00:04");
        assert_eq!(secs2time(1800), "00:30:00");
        assert_eq!(secs2time(86_400), "1-00:00:00");
        assert_eq!(cpu_time(22), "00:00.022");
        assert_eq!(cpu_time(61_000), "00:01:01");
        assert_eq!(cpu_time(3_600_000), "01:00:00");
    }

    #[test]
    fn stamps_follow_slurm_time_format() {
        let clock = |format: TimeFormat| Clock {
            tz: TimeZone::UTC,
            now: "2026-11-27T17:34:10Z".parse().expect("now"),
            format,
        };
        let t: Timestamp = "2026-11-26T09:05:00Z".parse().expect("t");
        assert_eq!(clock(TimeFormat::Standard).stamp(t), "2026-11-26T09:05:00");
        assert_eq!(clock(TimeFormat::Relative).stamp(t), "Ystday 09:05");
        assert_eq!(
            clock(TimeFormat::Strftime("%s".into())).stamp(t),
            t.as_second().to_string()
        );
        let (f, warning) = TimeFormat::from_env(Some("nopercent"), "sacct");
        assert_eq!(f, TimeFormat::Standard);
        assert_eq!(
            warning.as_deref(),
            Some("sacct: error: invalid SLURM_TIME_FORMAT = 'nopercent'")
        );
    }

    #[test]
    fn time_limits_look_like_sinfo() {
        assert_eq!(time_limit(None), "infinite");
        assert_eq!(time_limit(Some(7200)), "2:00:00");
        assert_eq!(time_limit(Some(1800)), "0:30:00");
        assert_eq!(time_limit(Some(86_400)), "1-00:00:00");
        let limit = |v: serde_json::Value| parse_limit(&v);
        assert_eq!(limit("UNLIMITED".into()), Ok(None));
        assert_eq!(limit("1-00:00:00".into()), Ok(Some(86_400)));
        assert_eq!(limit("02:00:00".into()), Ok(Some(7200)));
        assert_eq!(limit("30:00".into()), Ok(Some(1800)));
        assert_eq!(limit(serde_json::json!(60)), Ok(Some(60)));
        assert!(limit("soon".into()).is_err());
    }
}
