//! Small directive values: memory sizes, GPU requests, constraints, `--export`, and
//! output file patterns (`%j %A %a %u %x %N`).

use super::limits::{at_most, PATH_MAX};
use crate::model::{Constraint, ExportSpec, GpuPer, GpuRequest, SliceKind};
use std::fmt;
use std::str::FromStr;

/// A memory size in MB: `16000`, `500M`, `16G`, `1T`, `1024K`.
pub(crate) fn memory_mb(s: &str) -> Result<u64, String> {
    let bad = || format!("expected a size like 16G, 500M or 16000 (MB), got \"{s}\"");
    let (digits, mult) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 0),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 1024),
        Some(b'T' | b't') => (&s[..s.len() - 1], 1024 * 1024),
        _ => (s, 1),
    };
    if digits.is_empty() || digits.len() > 12 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let v: u64 = digits.parse().map_err(|_| bad())?;
    let mb = if mult == 0 {
        v.div_ceil(1024)
    } else {
        v * mult
    };
    if mb == 0 {
        return Err(format!("memory must be positive, got \"{s}\""));
    }
    Ok(mb)
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

/// `-G/--gpus` and `--gpus-per-node`: `[type:]count`.
pub(crate) fn gpus(s: &str, per: GpuPer) -> Result<GpuRequest, String> {
    let bad = || format!("expected {GPUS_EXPECTED}, got \"{s}\"");
    let (ty, c) = match s.rsplit_once(':') {
        Some((t, c)) if type_name(t) => (Some(t.to_string()), c),
        Some(_) => return Err(bad()),
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
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

impl FromStr for Constraint {
    type Err = String;
    /// `a&b|c`: `|` separates alternatives, `&` or `,` joins required features.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("expected features joined by & or |, got \"{s}\"");
        let mut any_of = Vec::new();
        for alt in s.split('|') {
            let all: Vec<String> = alt.split(['&', ',']).map(str::to_string).collect();
            if !all.iter().all(|f| feature_name(f)) {
                return Err(bad());
            }
            any_of.push(all);
        }
        Ok(Constraint { any_of })
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

pub(crate) const PATTERN_EXPECTED: &str = "a path with %j, %A, %a, %u, %x, %N or %%";

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
    let mut out = String::with_capacity(p.len() + 16);
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        if out.len() > PATH_MAX {
            return Err(format!(
                "the pattern expands to more than {PATH_MAX} bytes (PATH_MAX)"
            ));
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
                .ok_or_else(|| format!("expected {PATTERN_EXPECTED}, got \"{p}\""))?
        };
        let pad = |v: String| format!("{v:0>w$}");
        match chars.next() {
            Some('%') => out.push('%'),
            Some('j') => out.push_str(&pad(cx.job.to_string())),
            Some('A') => out.push_str(&pad(cx.job.job.to_string())),
            Some('a') => out.push_str(&pad(cx
                .job
                .task
                .map_or_else(|| "4294967294".into(), |t| t.to_string()))),
            Some('u') => out.push_str(cx.user),
            Some('x') => out.push_str(cx.name),
            Some('N') => out.push_str(cx.node),
            _ => return Err(format!("expected {PATTERN_EXPECTED}, got \"{p}\"")),
        }
    }
    if out.len() > PATH_MAX {
        return Err(format!(
            "the pattern expands to more than {PATH_MAX} bytes (PATH_MAX)"
        ));
    }
    Ok(out)
}
