//! `sbatch`-compatible parsing. Owns: reading `#SBATCH` lines of a batch script
//! (until the first command), command-line style option lists, and every directive
//! value format, each within the bounds of [`limits`]. Must not know about the
//! cluster: values are checked for syntax and size here, against partitions and
//! limits at submit.

mod array;
mod dependency;
mod hostlist;
pub mod limits;
mod time;
mod values;

pub use hostlist::{compress_hostlist, expand_hostlist};
pub use limits::{MaxArraySize, ParseLimits};
pub use time::format_duration;
pub use values::{expand_pattern, PatternContext};

#[allow(unused_imports)]
pub(crate) use time::{civil_from_days, days_from_civil};

use crate::model::{
    ArraySpec, BeginTime, Constraint, Dependency, ExportSpec, GpuPer, JobRequest, MemoryRequest,
    NodeRange, TimeLimit,
};
use limits::{
    at_most, MAX_COMMENT_BYTES, MAX_DIRECTIVES, MAX_DIRECTIVE_BYTES, MAX_NAME_BYTES, PATH_MAX,
};
use std::fmt;

/// A malformed, unknown or over-size directive.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {directive}: {message}")]
pub struct ParseError {
    /// 1-based line of the script (0 for command-line options).
    pub line: usize,
    /// The option as written (`--gres`, `-N`), or the offending word.
    pub directive: String,
    /// What failed, as the API names it: the option's long name without dashes
    /// (`array`, `nodelist`, `output`), or `script` / `options` for what is not one
    /// option (an unknown option, a line too long, too many directives).
    pub field: &'static str,
    pub message: String,
}

/// Parses a batch script the way `sbatch` does, with the default [`ParseLimits`].
pub fn parse_script(script: &str) -> Result<JobRequest, ParseError> {
    parse_script_with(script, &ParseLimits::default())
}

/// Parses a batch script the way `sbatch` does: `#SBATCH` lines are read until the
/// first line that is neither blank nor a comment; later `#SBATCH` lines are plain
/// comments. A `#` after whitespace starts a comment inside a directive line. Each
/// directive line is at most [`MAX_DIRECTIVE_BYTES`] long, and the lines give at
/// most [`MAX_DIRECTIVES`] options.
pub fn parse_script_with(script: &str, limits: &ParseLimits) -> Result<JobRequest, ParseError> {
    let mut req = JobRequest::default();
    let mut gpu_option: Option<&'static str> = None;
    let mut count = 0;
    for (i, raw) in script.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with('#') {
            break;
        }
        let Some(rest) = line.strip_prefix("#SBATCH") else {
            continue;
        };
        if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
            // e.g. `#SBATCHX`: a comment, as for sbatch.
            continue;
        }
        let script_error = |message: String| ParseError {
            line: line_no,
            directive: "#SBATCH".into(),
            field: "script",
            message,
        };
        at_most("the #SBATCH line", raw, MAX_DIRECTIVE_BYTES).map_err(script_error)?;
        let words = split_words(rest).map_err(script_error)?;
        let cx = Words {
            line: line_no,
            field: "script",
            limits,
        };
        count += apply_words(&mut req, &words, &cx, &mut gpu_option)?;
        if count > MAX_DIRECTIVES {
            return Err(script_error(format!(
                "more than {MAX_DIRECTIVES} directives"
            )));
        }
    }
    Ok(req)
}

/// Parses `sbatch` command-line options (no script body) with the default
/// [`ParseLimits`]. Errors report line 0.
pub fn parse_args<S: AsRef<str>>(args: &[S]) -> Result<JobRequest, ParseError> {
    parse_args_with(args, &ParseLimits::default())
}

/// Parses `sbatch` command-line options (no script body), e.g. from a CLI: at most
/// [`MAX_DIRECTIVES`] words of at most [`MAX_DIRECTIVE_BYTES`] each. Errors report
/// line 0.
pub fn parse_args_with<S: AsRef<str>>(
    args: &[S],
    limits: &ParseLimits,
) -> Result<JobRequest, ParseError> {
    let options_error = |directive: &str, message: String| ParseError {
        line: 0,
        directive: directive.into(),
        field: "options",
        message,
    };
    if args.len() > MAX_DIRECTIVES * 2 {
        return Err(options_error(
            "options",
            format!("more than {MAX_DIRECTIVES} options"),
        ));
    }
    let mut words = Vec::with_capacity(args.len());
    for a in args {
        let a = a.as_ref();
        if a.len() > MAX_DIRECTIVE_BYTES {
            let shown: String = a.chars().take(32).collect();
            return Err(options_error(
                &shown,
                format!("an option may be at most {MAX_DIRECTIVE_BYTES} bytes long"),
            ));
        }
        words.push(a.to_string());
    }
    let mut req = JobRequest::default();
    let mut gpu_option = None;
    let cx = Words {
        line: 0,
        field: "options",
        limits,
    };
    if apply_words(&mut req, &words, &cx, &mut gpu_option)? > MAX_DIRECTIVES {
        return Err(options_error(
            "options",
            format!("more than {MAX_DIRECTIVES} options"),
        ));
    }
    Ok(req)
}

/// Where a list of words comes from: its line, what to call it when the error is
/// not one option's, and the limits.
struct Words<'a> {
    line: usize,
    field: &'static str,
    limits: &'a ParseLimits,
}

/// Splits a directive line into words: whitespace separated, with '…' and "…"
/// quoting; an unquoted `#` at the start of a word begins a comment.
fn split_words(s: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in s.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            None if c == '#' && !in_word => break,
            None => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err("unterminated quote".into());
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

/// How an option takes its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arity {
    Flag,
    Value,
}

/// Canonical long name and arity of an option as written (`-N`, `--nodes`).
fn lookup(name: &str) -> Option<(&'static str, Arity)> {
    use Arity::*;
    Some(match name {
        "-J" | "--job-name" => ("--job-name", Value),
        "-p" | "--partition" => ("--partition", Value),
        "-N" | "--nodes" => ("--nodes", Value),
        "-n" | "--ntasks" => ("--ntasks", Value),
        "--ntasks-per-node" => ("--ntasks-per-node", Value),
        "-c" | "--cpus-per-task" => ("--cpus-per-task", Value),
        "--mem" => ("--mem", Value),
        "--mem-per-cpu" => ("--mem-per-cpu", Value),
        "--mem-per-gpu" => ("--mem-per-gpu", Value),
        "--cpus-per-gpu" => ("--cpus-per-gpu", Value),
        "--gres" => ("--gres", Value),
        "-G" | "--gpus" => ("--gpus", Value),
        "--gpus-per-node" => ("--gpus-per-node", Value),
        "-t" | "--time" => ("--time", Value),
        "-a" | "--array" => ("--array", Value),
        "-d" | "--dependency" => ("--dependency", Value),
        "-o" | "--output" => ("--output", Value),
        "-e" | "--error" => ("--error", Value),
        "-D" | "--chdir" => ("--chdir", Value),
        "--export" => ("--export", Value),
        "-A" | "--account" => ("--account", Value),
        "-q" | "--qos" => ("--qos", Value),
        "-H" | "--hold" => ("--hold", Flag),
        "--begin" | "-b" => ("--begin", Value),
        "--exclusive" => ("--exclusive", Flag),
        "-w" | "--nodelist" => ("--nodelist", Value),
        "-x" | "--exclude" => ("--exclude", Value),
        "-C" | "--constraint" => ("--constraint", Value),
        "--comment" => ("--comment", Value),
        "--requeue" => ("--requeue", Flag),
        "--no-requeue" => ("--no-requeue", Flag),
        "--nice" => ("--nice", Value),
        _ => return None,
    })
}

/// Applies options to `req`; returns how many there were.
fn apply_words(
    req: &mut JobRequest,
    words: &[String],
    cx: &Words<'_>,
    gpu_option: &mut Option<&'static str>,
) -> Result<usize, ParseError> {
    let mut i = 0;
    let mut count = 0;
    while i < words.len() {
        let word = &words[i];
        let err = |directive: &str, field: &'static str, message: String| ParseError {
            line: cx.line,
            directive: directive.to_string(),
            field,
            message,
        };
        // Split `--opt=value`, `-Nvalue`, `-N=value`.
        let (name, inline): (&str, Option<&str>) = if let Some(long) = word.strip_prefix("--") {
            match long.split_once('=') {
                Some((n, v)) => (&word[..n.len() + 2], Some(v)),
                None => (word.as_str(), None),
            }
        } else if word.starts_with('-') && word.len() > 2 && word.is_char_boundary(2) {
            let v = &word[2..];
            (&word[..2], Some(v.strip_prefix('=').unwrap_or(v)))
        } else if word.starts_with('-') && word.len() == 2 {
            (word.as_str(), None)
        } else {
            return Err(err(
                word,
                cx.field,
                "expected an option starting with - or --".into(),
            ));
        };
        let (canon, arity) =
            lookup(name).ok_or_else(|| err(name, cx.field, "unknown option".into()))?;
        let field = &canon[2..];
        let value: Option<&str> = match (arity, inline) {
            (Arity::Flag, None) => None,
            (Arity::Flag, Some(_)) => return Err(err(name, field, "takes no value".into())),
            (Arity::Value, Some(v)) => Some(v),
            (Arity::Value, None) => {
                i += 1;
                Some(
                    words
                        .get(i)
                        .map(String::as_str)
                        .ok_or_else(|| err(name, field, "missing value".into()))?,
                )
            }
        };
        apply(req, canon, value.unwrap_or(""), cx.limits, gpu_option)
            .map_err(|m| err(name, field, m))?;
        i += 1;
        count += 1;
    }
    Ok(count)
}

fn positive(v: &str) -> Result<u32, String> {
    if v.is_empty() || v.len() > 7 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected a positive number, got \"{v}\""));
    }
    v.parse::<u32>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("expected a positive number, got \"{v}\""))
}

/// A name (job name, partition, account, QOS): at most [`MAX_NAME_BYTES`].
fn name(v: &str) -> Result<String, String> {
    at_most("the name", v, MAX_NAME_BYTES)?;
    non_empty(v)
}

/// A path or path pattern: at most [`PATH_MAX`].
fn path(v: &str) -> Result<String, String> {
    at_most("the path", v, PATH_MAX)?;
    non_empty(v)
}

fn non_empty(v: &str) -> Result<String, String> {
    if v.is_empty() {
        Err("expected a value, got \"\"".into())
    } else if v.chars().any(char::is_control) {
        Err(format!("control characters are not allowed, got {v:?}"))
    } else {
        Ok(v.to_string())
    }
}

fn apply(
    req: &mut JobRequest,
    canon: &'static str,
    v: &str,
    limits: &ParseLimits,
    gpu_option: &mut Option<&'static str>,
) -> Result<(), String> {
    let mut gpu = |req: &mut JobRequest, g| -> Result<(), String> {
        if let Some(prev) = *gpu_option {
            if prev != canon {
                return Err(format!("conflicts with {prev}"));
            }
        }
        *gpu_option = Some(canon);
        req.gpus = Some(g);
        Ok(())
    };
    match canon {
        "--job-name" => req.name = Some(name(v)?),
        "--partition" => req.partition = Some(name(v)?),
        "--nodes" => {
            let r = match v.split_once('-') {
                Some((a, b)) => NodeRange {
                    min: positive(a)?,
                    max: positive(b)?,
                },
                None => {
                    let n = positive(v)?;
                    NodeRange { min: n, max: n }
                }
            };
            if r.max < r.min {
                return Err(format!("expected min[-max] nodes, got \"{v}\""));
            }
            req.nodes = Some(r);
        }
        "--ntasks" => req.ntasks = Some(positive(v)?),
        "--ntasks-per-node" => req.ntasks_per_node = Some(positive(v)?),
        "--cpus-per-task" => req.cpus_per_task = Some(positive(v)?),
        "--cpus-per-gpu" => req.cpus_per_gpu = Some(positive(v)?),
        "--mem" => req.memory = Some(MemoryRequest::PerNode(values::memory_mb(v)?)),
        "--mem-per-cpu" => req.memory = Some(MemoryRequest::PerCpu(values::memory_mb(v)?)),
        "--mem-per-gpu" => req.memory = Some(MemoryRequest::PerGpu(values::memory_mb(v)?)),
        "--gres" => gpu(req, values::gres(v)?)?,
        "--gpus" => gpu(req, values::gpus(v, GpuPer::Job)?)?,
        "--gpus-per-node" => gpu(req, values::gpus(v, GpuPer::Node)?)?,
        "--time" => req.time_limit = Some(v.parse::<TimeLimit>()?),
        "--array" => req.array = Some(ArraySpec::parse(v, limits.max_array_size)?),
        "--dependency" => req.dependency = Some(v.parse::<Dependency>()?),
        "--output" | "--error" => {
            let p = path(v)?;
            values::check_pattern(&p)?;
            if canon == "--output" {
                req.output = Some(p);
            } else {
                req.error = Some(p);
            }
        }
        "--chdir" => req.chdir = Some(path(v)?),
        "--export" => req.export = Some(v.parse::<ExportSpec>()?),
        "--account" => req.account = Some(name(v)?),
        "--qos" => req.qos = Some(name(v)?),
        "--hold" => req.hold = true,
        "--begin" => req.begin = Some(v.parse::<BeginTime>()?),
        "--exclusive" => req.exclusive = true,
        "--nodelist" => req.nodelist = expand_hostlist(v)?,
        "--exclude" => req.exclude = expand_hostlist(v)?,
        "--constraint" => req.constraint = Some(v.parse::<Constraint>()?),
        "--comment" => {
            at_most("the comment", v, MAX_COMMENT_BYTES)?;
            req.comment = Some(non_empty(v)?);
        }
        "--requeue" => req.requeue = Some(true),
        "--no-requeue" => req.requeue = Some(false),
        "--nice" => {
            let n: i32 = v
                .parse()
                .ok()
                .filter(|n: &i32| n.unsigned_abs() <= 1_000_000)
                .ok_or_else(|| format!("expected an integer, got \"{v}\""))?;
            req.nice = Some(n);
        }
        other => return Err(format!("unhandled option {other}")),
    }
    Ok(())
}

impl fmt::Display for NodeRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
