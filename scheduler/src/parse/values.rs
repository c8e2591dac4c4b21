//! Small directive values: memory sizes, GPU requests, constraints, `--export`, and
//! output file patterns (`%j %A %a %u %x %N`).

use super::limits::{at_most, PATH_MAX};
use crate::model::{Constraint, ExportSpec, GpuPer, GpuRequest, SliceKind};
use std::fmt;
use std::str::FromStr;

/// A memory size in MB, as Slurm writes sizes: a number with an optional unit `K`,
/// `M` (the default), `G` or `T`, with or without `B` (`16000`, `500M`, `16G`,
/// `64000MB`, `170GB`, `1T`). `0` is returned as 0: for `--mem` it means all of the
/// node's memory.
pub(crate) fn memory_mb(s: &str) -> Result<u64, String> {
    let bad = || format!("expected a size like 16G, 500M, 64000MB or 16000 (MB), got \"{s}\"");
    let unitless = s
        .strip_suffix(['B', 'b'])
        .filter(|r| r.ends_with(|c: char| "KkMmGgTt".contains(c)))
        .unwrap_or(s);
    let (digits, mult) = match unitless.as_bytes().last() {
        Some(b'K' | b'k') => (&unitless[..unitless.len() - 1], 0),
        Some(b'M' | b'm') => (&unitless[..unitless.len() - 1], 1),
        Some(b'G' | b'g') => (&unitless[..unitless.len() - 1], 1024),
        Some(b'T' | b't') => (&unitless[..unitless.len() - 1], 1024 * 1024),
        _ => (unitless, 1),
    };
    if digits.is_empty() || digits.len() > 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let v: u64 = digits.parse().map_err(|_| bad())?;
    Ok(if mult == 0 {
        v.div_ceil(1024)
    } else {
        v * mult
    })
}

/// A memory size that must not be 0 (`--mem-per-cpu`, `--mem-per-gpu`, `--tmp`).
pub(crate) fn positive_memory_mb(s: &str) -> Result<u64, String> {
    match memory_mb(s)? {
        0 => Err(format!("memory must be positive, got \"{s}\"")),
        mb => Ok(mb),
    }
}

fn count(c: &str) -> Option<u32> {
    if c.is_empty() || c.len() > 6 || !c.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    c.parse().ok().filter(|&n| n > 0)
}

fn type_name(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 64
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
}

pub(crate) const GRES_EXPECTED: &str = "gpu[:type]:count or shard:count";

/// `--gres=gpu[:type][:count]` or `shard[:count]` (per node).
pub(crate) fn gres(s: &str) -> Result<GpuRequest, String> {
    let bad = || format!("expected {GRES_EXPECTED}, got \"{s}\"");
    if s.contains(',') {
        return Err(format!("only one gres may be requested, got \"{s}\""));
    }
    let parts: Vec<&str> = s.split(':').collect();
    let (kind, n) = match parts.as_slice() {
        ["gpu"] => (SliceKind::Gpu { r#type: None }, 1),
        ["gpu", c] if c.bytes().all(|b| b.is_ascii_digit()) => {
            (SliceKind::Gpu { r#type: None }, count(c).ok_or_else(bad)?)
        }
        ["gpu", t] if type_name(t) && !t.bytes().all(|b| b.is_ascii_digit()) => (
            SliceKind::Gpu {
                r#type: Some((*t).to_string()),
            },
            1,
        ),
        ["gpu", t, c] if type_name(t) => (
            SliceKind::Gpu {
                r#type: Some((*t).to_string()),
            },
            count(c).ok_or_else(bad)?,
        ),
        ["shard"] => (SliceKind::Shard, 1),
        ["shard", c] => (SliceKind::Shard, count(c).ok_or_else(bad)?),
        _ => return Err(bad()),
    };
    Ok(GpuRequest {
        kind,
        count: n,
        per: GpuPer::Node,
    })
}

pub(crate) const GPUS_EXPECTED: &str = "[type:]count";

/// `-G/--gpus` and `--gpus-per-node`: `[type:]count`, or a type alone for one GPU
/// of it (`--gpus=a100`), as Slurm reads `gpu:a100` in `--gres`.
pub(crate) fn gpus(s: &str, per: GpuPer) -> Result<GpuRequest, String> {
    let bad = || format!("expected {GPUS_EXPECTED}, got \"{s}\"");
    let (ty, c) = match s.rsplit_once(':') {
        Some((t, c)) if type_name(t) => (Some(t.to_string()), c),
        Some(_) => return Err(bad()),
        None if type_name(s) && !s.bytes().all(|b| b.is_ascii_digit()) => {
            (Some(s.to_string()), "1")
        }
        None => (None, s),
    };
    let n = count(c).ok_or_else(bad)?;
    Ok(GpuRequest {
        kind: SliceKind::Gpu { r#type: ty },
        count: n,
        per,
    })
}

fn feature_name(f: &str) -> bool {
    !f.is_empty()
        && f.len() <= 64
        && f.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':' | b'='))
}

/// Most alternatives a constraint may expand to.
const MAX_CONSTRAINT_ALTERNATIVES: usize = 64;

impl FromStr for Constraint {
    type Err = String;
    /// Slurm's constraint grammar: `&` (or `,`) joins required features, `|`
    /// separates alternatives, `[…]` and `(…)` group, `feature*count` asks a count
    /// of nodes with it (counted here as the feature). Kept as alternatives of
    /// required features, at most 64 of them.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("expected features joined by &, | and grouped by [ ] or ( ), got \"{s}\"");
        let mut p = ConstraintParser {
            text: s.as_bytes(),
            pos: 0,
            depth: 0,
        };
        let any_of = p.alternatives().ok_or_else(bad)?;
        if p.pos != p.text.len() {
            return Err(bad());
        }
        Ok(Constraint { any_of })
    }
}

/// A recursive-descent reader of constraints into alternatives of feature sets.
struct ConstraintParser<'a> {
    text: &'a [u8],
    pos: usize,
    depth: usize,
}

impl ConstraintParser<'_> {
    fn alternatives(&mut self) -> Option<Vec<Vec<String>>> {
        let mut out = self.all_of()?;
        while self.text.get(self.pos) == Some(&b'|') {
            self.pos += 1;
            out.extend(self.all_of()?);
            if out.len() > MAX_CONSTRAINT_ALTERNATIVES {
                return None;
            }
        }
        Some(out)
    }

    fn all_of(&mut self) -> Option<Vec<Vec<String>>> {
        let mut out = self.factor()?;
        while matches!(self.text.get(self.pos), Some(b'&' | b',')) {
            self.pos += 1;
            let next = self.factor()?;
            let mut product = Vec::new();
            for a in &out {
                for b in &next {
                    let mut both = a.clone();
                    both.extend(b.iter().filter(|f| !a.contains(f)).cloned());
                    product.push(both);
                }
            }
            if product.len() > MAX_CONSTRAINT_ALTERNATIVES {
                return None;
            }
            out = product;
        }
        Some(out)
    }

    fn factor(&mut self) -> Option<Vec<Vec<String>>> {
        match self.text.get(self.pos) {
            Some(&open @ (b'(' | b'[')) => {
                let close = if open == b'(' { b')' } else { b']' };
                self.depth += 1;
                if self.depth > 8 {
                    return None;
                }
                self.pos += 1;
                let inner = self.alternatives()?;
                if self.text.get(self.pos) != Some(&close) {
                    return None;
                }
                self.pos += 1;
                self.depth -= 1;
                self.count();
                Some(inner)
            }
            _ => {
                let start = self.pos;
                while self.pos < self.text.len()
                    && (self.text[self.pos].is_ascii_alphanumeric()
                        || matches!(self.text[self.pos], b'_' | b'-' | b'.' | b':' | b'='))
                {
                    self.pos += 1;
                }
                let name = std::str::from_utf8(&self.text[start..self.pos]).ok()?;
                if !feature_name(name) {
                    return None;
                }
                self.count();
                Some(vec![vec![name.to_string()]])
            }
        }
    }

    /// `*count` after a feature or group.
    fn count(&mut self) {
        if self.text.get(self.pos) == Some(&b'*') {
            let start = self.pos + 1;
            let mut end = start;
            while end < self.text.len() && self.text[end].is_ascii_digit() {
                end += 1;
            }
            if end > start {
                self.pos = end;
            }
        }
    }
}

impl Constraint {
    /// Whether a node with these features satisfies the constraint.
    pub fn matches(&self, features: &[String]) -> bool {
        self.any_of
            .iter()
            .any(|all| all.iter().all(|f| features.iter().any(|g| g == f)))
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let alts: Vec<String> = self.any_of.iter().map(|a| a.join("&")).collect();
        f.write_str(&alts.join("|"))
    }
}

impl TryFrom<String> for Constraint {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
impl From<Constraint> for String {
    fn from(c: Constraint) -> String {
        c.to_string()
    }
}

fn env_name(v: &str) -> bool {
    let mut b = v.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

impl FromStr for ExportSpec {
    type Err = String;
    /// `ALL`, `NONE`, `ALL,VAR=value`, `VAR1,VAR2=value` (a list without `ALL`
    /// passes only the listed variables).
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected ALL, NONE or VAR[=value] items, got \"{s}\"");
        let mut spec = ExportSpec {
            all: false,
            vars: Vec::new(),
        };
        for (i, item) in s.split(',').enumerate() {
            if item.eq_ignore_ascii_case("all") && i == 0 {
                spec.all = true;
            } else if item.eq_ignore_ascii_case("none") && i == 0 {
                spec.all = false;
            } else {
                let (k, v) = match item.split_once('=') {
                    Some((k, v)) => (k, Some(v.to_string())),
                    None => (item, None),
                };
                if !env_name(k) {
                    return Err(bad());
                }
                spec.vars.push((k.to_string(), v));
            }
        }
        Ok(spec)
    }
}

impl fmt::Display for ExportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = vec![if self.all { "ALL" } else { "NONE" }.to_string()];
        for (k, v) in &self.vars {
            parts.push(match v {
                Some(v) => format!("{k}={v}"),
                None => k.clone(),
            });
        }
        f.write_str(&parts.join(","))
    }
}

impl TryFrom<String> for ExportSpec {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
impl From<ExportSpec> for String {
    fn from(e: ExportSpec) -> String {
        e.to_string()
    }
}

/// What output patterns may refer to.
#[derive(Debug, Clone, Copy)]
pub struct PatternContext<'a> {
    /// `%j`: the job id (a task's own id is `job_task` in this scheduler, so `%j`
    /// prints the array job id followed by `_task` for tasks, like `%A_%a`).
    pub job: crate::model::JobId,
    /// `%u`.
    pub user: &'a str,
    /// `%x`.
    pub name: &'a str,
    /// `%N`: the first node of the allocation.
    pub node: &'a str,
}

impl PatternContext<'_> {
    /// The text of `%c` for the batch step (on the job's first node, 0, as task 0):
    /// `None` for a letter that is not a pattern's.
    pub fn batch_value(&self, c: char) -> Option<String> {
        match c {
            'j' | 'J' => Some(self.job.to_string()),
            'n' | 't' => Some("0".into()),
            's' => Some("batch".into()),
            'A' => Some(self.job.job.to_string()),
            'a' => Some(
                self.job
                    .task
                    .map_or_else(|| NO_TASK.into(), |t| t.to_string()),
            ),
            'u' => Some(self.user.to_string()),
            'x' => Some(self.name.to_string()),
            'N' => Some(self.node.to_string()),
            _ => None,
        }
    }
}

pub(crate) const PATTERN_EXPECTED: &str =
    "a path with %j, %J, %A, %a, %u, %x, %N, %n, %s, %t or %%";

/// Checks a pattern's `%` escapes.
pub(crate) fn check_pattern(p: &str) -> Result<(), String> {
    expand_pattern(
        p,
        &PatternContext {
            job: crate::model::JobId::new(0),
            user: "",
            name: "",
            node: "",
        },
    )
    .map(drop)
}

/// Expands `%j %A %a %u %x %N %%` (an optional zero-padding width may follow `%`,
/// as in `%4a`). A pattern, or what it expands to, longer than [`PATH_MAX`] is
/// refused, and the expansion stops there.
pub fn expand_pattern(p: &str, cx: &PatternContext<'_>) -> Result<String, String> {
    at_most("the pattern", p, PATH_MAX)?;
    expand_filename(p, PATH_MAX, false, |c| cx.batch_value(c)).map_err(|e| match e {
        PatternError::TooLong => {
            format!("the pattern expands to more than {PATH_MAX} bytes (PATH_MAX)")
        }
        PatternError::Malformed => format!("expected {PATTERN_EXPECTED}, got \"{p}\""),
    })
}

/// `%a` of a job that is not an array task (Slurm's NO_VAL - 1).
pub const NO_TASK: &str = "4294967294";

/// Why a filename pattern did not expand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("the path expands to more than the bytes allowed")]
    TooLong,
    /// A width over 10, or (unless lenient) a `%` that ends the pattern.
    #[error("a malformed % escape")]
    Malformed,
}

/// The letters whose values are numbers a width (`%4t`) pads with zeros.
const NUMERIC_LETTERS: &str = "AajJnst";

/// Slurm's filename patterns (`-o`, `-e`, `-i` of sbatch and srun): `value` gives each
/// letter's text (`None`: the escape stays as written); `%%` is a `%`; a width of up
/// to 10 between `%` and the letter pads a number with zeros. A pattern holding a
/// backslash is not expanded: the backslashes are removed, as Slurm does. `lenient`:
/// a trailing `%` stays (else it is [`PatternError::Malformed`]). The result is at
/// most `max` bytes, checked as it grows.
pub fn expand_filename(
    p: &str,
    max: usize,
    lenient: bool,
    value: impl Fn(char) -> Option<String>,
) -> Result<String, PatternError> {
    if p.contains('\\') {
        let plain: String = p.chars().filter(|&c| c != '\\').collect();
        return if plain.len() > max {
            Err(PatternError::TooLong)
        } else {
            Ok(plain)
        };
    }
    let mut out = String::with_capacity(p.len() + 16);
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        if out.len() > max {
            return Err(PatternError::TooLong);
        }
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = String::new();
        while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
            width.push(d);
            chars.next();
        }
        let w: usize = if width.is_empty() {
            0
        } else {
            width
                .parse()
                .ok()
                .filter(|w| *w <= 10)
                .ok_or(PatternError::Malformed)?
        };
        match chars.next() {
            Some('%') => out.push('%'),
            Some(letter) => match value(letter) {
                Some(v) if NUMERIC_LETTERS.contains(letter) => {
                    // The leading number is padded (`%4j` of `42_7` is `0042_7`).
                    let digits = v.chars().take_while(char::is_ascii_digit).count();
                    for _ in digits..w {
                        out.push('0');
                    }
                    out.push_str(&v);
                }
                Some(v) => out.push_str(&v),
                // An unknown letter stays as written, as Slurm leaves it.
                None => {
                    out.push('%');
                    out.push_str(&width);
                    out.push(letter);
                }
            },
            None if lenient => {
                out.push('%');
                out.push_str(&width);
            }
            None => return Err(PatternError::Malformed),
        }
    }
    if out.len() > max {
        return Err(PatternError::TooLong);
    }
    Ok(out)
}

/// The signals `scancel --signal` takes by name (Slurm's `sig_name2num`), in the order
/// the job page offers them.
pub const SCANCEL_SIGNALS: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ABRT", 6),
    ("KILL", 9),
    ("USR1", 10),
    ("USR2", 12),
    ("ALRM", 14),
    ("TERM", 15),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
];

/// A signal as scancel reads `--signal`: one of [`SCANCEL_SIGNALS`] (with or without
/// `SIG`, any case) or a number from 1 to 64.
pub fn scancel_signal(text: &str) -> Option<i32> {
    let upper = text.trim().to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    SCANCEL_SIGNALS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| *v)
        .or_else(|| {
            text.trim()
                .parse::<i32>()
                .ok()
                .filter(|n| (1..=64).contains(n))
        })
}

/// Linux signal numbers by name, as `kill -l` lists them (without `SIG`).
const SIGNALS: &[(&str, i32)] = &[
    ("HUP", 1),
    ("INT", 2),
    ("QUIT", 3),
    ("ILL", 4),
    ("TRAP", 5),
    ("ABRT", 6),
    ("BUS", 7),
    ("FPE", 8),
    ("KILL", 9),
    ("USR1", 10),
    ("SEGV", 11),
    ("USR2", 12),
    ("PIPE", 13),
    ("ALRM", 14),
    ("TERM", 15),
    ("STKFLT", 16),
    ("CHLD", 17),
    ("CONT", 18),
    ("STOP", 19),
    ("TSTP", 20),
    ("TTIN", 21),
    ("TTOU", 22),
    ("URG", 23),
    ("XCPU", 24),
    ("XFSZ", 25),
    ("VTALRM", 26),
    ("PROF", 27),
    ("WINCH", 28),
    ("IO", 29),
    ("PWR", 30),
    ("SYS", 31),
];

/// A signal by number (1–64) or name, with or without `SIG` (`USR1`, `SIGTERM`, `10`).
pub(crate) fn signal_number(s: &str) -> Option<i32> {
    if !s.is_empty() && s.len() <= 2 && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok().filter(|n| (1..=64).contains(n));
    }
    let upper = s.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    SIGNALS.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
}

/// The name of a signal number (`USR1`), or the number itself.
pub fn signal_name(n: i32) -> String {
    SIGNALS
        .iter()
        .find(|&&(_, v)| v == n)
        .map_or_else(|| n.to_string(), |(name, _)| (*name).to_string())
}

impl FromStr for crate::model::SignalSpec {
    type Err = String;
    /// `[{R|B}:]SIG[@TIME]` (`RB:` both), as `sbatch --signal` takes it; `TIME` is
    /// seconds before the time limit, 60 if not given, at most 65535.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected [{{R|B}}:]SIGNAL[@SECONDS], got \"{s}\"");
        let (flags, rest) = match s.split_once(':') {
            Some((f, r)) => (f, r),
            None => ("", s),
        };
        let (mut batch_only, mut reservation) = (false, false);
        for c in flags.chars() {
            match c.to_ascii_uppercase() {
                'B' => batch_only = true,
                'R' => reservation = true,
                _ => return Err(bad()),
            }
        }
        let (sig, time) = match rest.split_once('@') {
            Some((sig, t)) => (sig, Some(t)),
            None => (rest, None),
        };
        let signal = signal_number(sig).ok_or_else(bad)?;
        let seconds_before = match time {
            None => 60,
            Some(t) if !t.is_empty() && t.len() <= 5 && t.bytes().all(|b| b.is_ascii_digit()) => t
                .parse::<u32>()
                .ok()
                .filter(|&n| n <= 0xffff)
                .ok_or_else(bad)?,
            Some(_) => return Err(bad()),
        };
        Ok(crate::model::SignalSpec {
            signal,
            batch_only,
            reservation,
            seconds_before,
        })
    }
}

impl fmt::Display for crate::model::SignalSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flags = match (self.reservation, self.batch_only) {
            (true, true) => "RB:",
            (true, false) => "R:",
            (false, true) => "B:",
            (false, false) => "",
        };
        write!(
            f,
            "{flags}{}@{}",
            signal_name(self.signal),
            self.seconds_before
        )
    }
}

impl TryFrom<String> for crate::model::SignalSpec {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
impl From<crate::model::SignalSpec> for String {
    fn from(s: crate::model::SignalSpec) -> String {
        s.to_string()
    }
}

/// `--mail-type` words and their flags, in the order `scontrol` prints them.
pub const MAIL_TYPES: &[(&str, u16)] = &[
    ("BEGIN", 1),
    ("END", 1 << 1),
    ("FAIL", 1 << 2),
    ("REQUEUE", 1 << 3),
    ("TIME_LIMIT", 1 << 4),
    ("TIME_LIMIT_90", 1 << 5),
    ("TIME_LIMIT_80", 1 << 6),
    ("TIME_LIMIT_50", 1 << 7),
    ("ARRAY_TASKS", 1 << 8),
    ("INVALID_DEPEND", 1 << 9),
    ("STAGE_OUT", 1 << 10),
];

impl crate::model::MailTypes {
    pub const BEGIN: u16 = 1;
    pub const END: u16 = 1 << 1;
    pub const FAIL: u16 = 1 << 2;
    pub const REQUEUE: u16 = 1 << 3;
    pub const TIME_LIMIT: u16 = 1 << 4;
    pub const TIME_LIMIT_90: u16 = 1 << 5;
    pub const TIME_LIMIT_80: u16 = 1 << 6;
    pub const TIME_LIMIT_50: u16 = 1 << 7;
    pub const ARRAY_TASKS: u16 = 1 << 8;
    pub const INVALID_DEPEND: u16 = 1 << 9;

    /// Whether the event `flag` (one of the constants) is asked for.
    pub fn has(self, flag: u16) -> bool {
        self.0 & flag != 0
    }
}

impl FromStr for crate::model::MailTypes {
    type Err = String;
    /// Comma-separated `NONE`, `BEGIN`, `END`, `FAIL`, `REQUEUE`, `ALL` (= BEGIN, END,
    /// FAIL, INVALID_DEPEND, REQUEUE, STAGE_OUT), `INVALID_DEPEND`, `STAGE_OUT`,
    /// `TIME_LIMIT`, `TIME_LIMIT_90`, `TIME_LIMIT_80`, `TIME_LIMIT_50`, `ARRAY_TASKS`.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut flags = 0u16;
        for word in s.split(',') {
            let w = word.trim().to_ascii_uppercase();
            flags |= match w.as_str() {
                "NONE" => 0,
                "ALL" => 1 | 1 << 1 | 1 << 2 | 1 << 3 | 1 << 9 | 1 << 10,
                _ => MAIL_TYPES
                    .iter()
                    .find(|(n, _)| *n == w)
                    .map(|&(_, f)| f)
                    .ok_or_else(|| {
                        format!(
                            "expected NONE, BEGIN, END, FAIL, REQUEUE, ALL, INVALID_DEPEND, STAGE_OUT, TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50 or ARRAY_TASKS, got \"{word}\""
                        )
                    })?,
            };
        }
        Ok(crate::model::MailTypes(flags))
    }
}

impl fmt::Display for crate::model::MailTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let words: Vec<&str> = MAIL_TYPES
            .iter()
            .filter(|(_, flag)| self.0 & flag != 0)
            .map(|(n, _)| *n)
            .collect();
        if words.is_empty() {
            f.write_str("NONE")
        } else {
            f.write_str(&words.join(","))
        }
    }
}

impl TryFrom<String> for crate::model::MailTypes {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
impl From<crate::model::MailTypes> for String {
    fn from(m: crate::model::MailTypes) -> String {
        m.to_string()
    }
}

/// `-L name[@db][:count][,…]` (`|` between items means any of them in Slurm; here
/// every item is needed, which satisfies the same scripts when one item is given).
pub(crate) fn licenses(s: &str) -> Result<Vec<crate::model::License>, String> {
    let bad = || format!("expected name[:count] items separated by commas, got \"{s}\"");
    let mut out: Vec<crate::model::License> = Vec::new();
    for item in s.split([',', '|']) {
        let (name, count) = match item.split_once(':') {
            Some((n, c)) => (n, count(c).ok_or_else(bad)?),
            None => (item, 1),
        };
        let name = name.split('@').next().unwrap_or(name);
        if !feature_name(name) {
            return Err(bad());
        }
        match out.iter_mut().find(|l| l.name == name) {
            Some(l) => l.count = l.count.saturating_add(count),
            None => out.push(crate::model::License {
                name: name.to_string(),
                count,
            }),
        }
    }
    Ok(out)
}
