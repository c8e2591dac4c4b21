//! Slurm time formats: `-t/--time` limits and `--begin` times (resolved in UTC).

use crate::model::{BeginTime, Time, TimeLimit};
use std::fmt;
use std::str::FromStr;

pub(crate) const TIME_EXPECTED: &str =
    "minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds or UNLIMITED";

fn num(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

impl FromStr for TimeLimit {
    type Err = String;
    /// Every `sbatch --time` format; `0`, `INFINITE` and `UNLIMITED` mean no limit.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let bad = || format!("expected {TIME_EXPECTED}, got \"{s}\"");
        if s.eq_ignore_ascii_case("unlimited") || s.eq_ignore_ascii_case("infinite") || s == "-1" {
            return Ok(TimeLimit::Unlimited);
        }
        let secs = if let Some((d, rest)) = s.split_once('-') {
            let days = num(d).ok_or_else(bad)?;
            let parts: Vec<&str> = rest.split(':').collect();
            let p: Vec<u64> = parts
                .iter()
                .map(|p| num(p))
                .collect::<Option<_>>()
                .ok_or_else(bad)?;
            let (h, m, sec) = match p.as_slice() {
                [h] => (*h, 0, 0),
                [h, m] => (*h, *m, 0),
                [h, m, sec] => (*h, *m, *sec),
                _ => return Err(bad()),
            };
            if h >= 24 || m >= 60 || sec >= 60 {
                return Err(bad());
            }
            days * 86_400 + h * 3600 + m * 60 + sec
        } else {
            let p: Vec<u64> = s
                .split(':')
                .map(num)
                .collect::<Option<_>>()
                .ok_or_else(bad)?;
            match p.as_slice() {
                [m] => m * 60,
                [m, sec] if *sec < 60 => m * 60 + sec,
                [h, m, sec] if *m < 60 && *sec < 60 => h * 3600 + m * 60 + sec,
                _ => return Err(bad()),
            }
        };
        Ok(if secs == 0 {
            TimeLimit::Unlimited
        } else {
            TimeLimit::Seconds(secs)
        })
    }
}

impl fmt::Display for TimeLimit {
    /// `D-HH:MM:SS` (or `HH:MM:SS` under a day), `UNLIMITED`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeLimit::Unlimited => f.write_str("UNLIMITED"),
            TimeLimit::Seconds(s) => f.write_str(&format_duration(*s)),
        }
    }
}

/// `D-HH:MM:SS` or `HH:MM:SS`, as `squeue` prints times.
pub fn format_duration(s: u64) -> String {
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

impl TryFrom<String> for TimeLimit {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
impl From<TimeLimit> for String {
    fn from(t: TimeLimit) -> String {
        t.to_string()
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day) of a day number since 1970-01-01.
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

pub(crate) const BEGIN_EXPECTED: &str = "now[+N[seconds|minutes|hours|days|weeks]], HH:MM[:SS][AM|PM], YYYY-MM-DD[THH:MM[:SS]], MM/DD[/YY], MMDD[YY], midnight, noon, elevenses, fika, teatime, today or tomorrow";

/// A time of day in seconds, for `HH:MM[:SS][AM|PM]`.
fn time_of_day(s: &str) -> Option<i64> {
    let lower = s.to_ascii_lowercase();
    let (body, pm) = if let Some(b) = lower.strip_suffix("pm") {
        (b.trim_end().to_string(), Some(true))
    } else if let Some(b) = lower.strip_suffix("am") {
        (b.trim_end().to_string(), Some(false))
    } else {
        (lower, None)
    };
    let p: Vec<u64> = body.split(':').map(num).collect::<Option<_>>()?;
    let (mut h, m, sec) = match p.as_slice() {
        [h, m] => (*h, *m, 0),
        [h, m, s] => (*h, *m, *s),
        _ => return None,
    };
    if let Some(pm) = pm {
        if h == 0 || h > 12 {
            return None;
        }
        h = match (h, pm) {
            (12, false) => 0,
            (12, true) => 12,
            (h, true) => h + 12,
            (h, false) => h,
        };
    }
    if h >= 24 || m >= 60 || sec >= 60 {
        return None;
    }
    Some((h * 3600 + m * 60 + sec) as i64)
}

/// A date as (year or None, month, day).
fn date(s: &str) -> Option<(Option<i64>, u32, u32)> {
    let year = |y: &str| -> Option<i64> {
        let v = num(y)? as i64;
        match y.len() {
            2 => Some(2000 + v),
            4 => Some(v),
            _ => None,
        }
    };
    let (y, m, d) = if s.len() == 10 && s.as_bytes()[4] == b'-' && s.as_bytes()[7] == b'-' {
        (
            Some(year(&s[..4])?),
            num(&s[5..7])? as u32,
            num(&s[8..10])? as u32,
        )
    } else if s.contains('/') || s.contains('.') {
        let parts: Vec<&str> = s.split(['/', '.']).collect();
        match parts.as_slice() {
            [m, d] => (None, num(m)? as u32, num(d)? as u32),
            [m, d, y] => (Some(year(y)?), num(m)? as u32, num(d)? as u32),
            _ => return None,
        }
    } else if s.len() == 4 || s.len() == 6 {
        num(s)?;
        let y = if s.len() == 6 {
            Some(year(&s[4..])?)
        } else {
            None
        };
        (y, num(&s[..2])? as u32, num(&s[2..4])? as u32)
    } else {
        return None;
    };
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y.unwrap_or(2000), m) {
        return None;
    }
    Some((y, m, d))
}

impl BeginTime {
    /// The instant this begin time names, as seen at `now` (UTC). A time of day
    /// already past today means tomorrow; a date without a year already past
    /// means next year.
    pub fn resolve(&self, now: Time) -> Result<Time, String> {
        resolve_begin(&self.0, now)
    }
    /// As written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn resolve_begin(raw: &str, now: Time) -> Result<Time, String> {
    let bad = || format!("expected {BEGIN_EXPECTED}, got \"{raw}\"");
    let s = raw.trim().to_ascii_lowercase();
    let today = now.div_euclid(86_400) * 86_400;
    let next_at = |tod: i64| {
        let t = today + tod;
        if t < now {
            t + 86_400
        } else {
            t
        }
    };
    if let Some(rest) = s.strip_prefix("now") {
        if rest.is_empty() {
            return Ok(now);
        }
        let rest = rest.strip_prefix('+').ok_or_else(bad)?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let n = num(&rest[..digits]).ok_or_else(bad)? as i64;
        let unit = match &rest[digits..] {
            "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
            "m" | "min" | "mins" | "minute" | "minutes" => 60,
            "h" | "hour" | "hours" => 3600,
            "d" | "day" | "days" => 86_400,
            "w" | "week" | "weeks" => 7 * 86_400,
            _ => return Err(bad()),
        };
        return Ok(now + n * unit);
    }
    match s.as_str() {
        "today" => return Ok(today),
        "tomorrow" => return Ok(today + 86_400),
        "midnight" => return Ok(today + 86_400),
        "noon" => return Ok(next_at(12 * 3600)),
        "elevenses" => return Ok(next_at(11 * 3600)),
        "fika" => return Ok(next_at(15 * 3600)),
        "teatime" => return Ok(next_at(16 * 3600)),
        _ => {}
    }
    if let Some(tod) = time_of_day(&s) {
        return Ok(next_at(tod));
    }
    let (dpart, tpart) = match s.split_once('t') {
        Some((d, t)) => (d, Some(t)),
        None => (s.as_str(), None),
    };
    let (y, m, d) = date(dpart).ok_or_else(bad)?;
    let tod = match tpart {
        Some(t) => time_of_day(t).ok_or_else(bad)?,
        None => 0,
    };
    let at = |y: i64| days_from_civil(y, m, d) * 86_400 + tod;
    Ok(match y {
        Some(y) => at(y),
        None => {
            let (cy, _, _) = civil_from_days(now.div_euclid(86_400));
            if at(cy) < today {
                at(cy + 1)
            } else {
                at(cy)
            }
        }
    })
}

impl FromStr for BeginTime {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        resolve_begin(s, 0)?;
        Ok(BeginTime(s.trim().to_string()))
    }
}
impl TryFrom<String> for BeginTime {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
impl From<BeginTime> for String {
    fn from(b: BeginTime) -> String {
        b.0
    }
}
