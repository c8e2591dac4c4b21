//! `sbatch`-compatible parsing. Owns: reading `#SBATCH` lines of a batch script
//! (until the first command), command-line style option lists, and every directive
//! value format, each within the bounds of [`limits`]. Must not know about the
//! cluster: values are checked for syntax and size here, against partitions and
//! limits at submit.

mod array;
mod dependency;
mod hostlist;
pub mod limits;
pub mod options;
mod time;
mod values;

pub use hostlist::{compress_hostlist, expand_hostlist, hostlist_count};
pub use limits::{MaxArraySize, ParseLimits};
pub use time::format_duration;
pub use values::{
    expand_filename, expand_pattern, scancel_signal, signal_name, PatternContext, PatternError,
    MAIL_TYPES, NO_TASK, SCANCEL_SIGNALS,
};

#[allow(unused_imports)]
pub(crate) use time::{civil_from_days, days_from_civil};

use crate::model::{
    ArraySpec, BeginTime, Constraint, Dependency, ExportSpec, GpuPer, GpuRequest, IgnoredOption,
    JobRequest, MailTypes, MemoryRequest, NodeRange, OpenMode, SignalSpec, SliceKind, TimeLimit,
};
use limits::{
    at_most, MAX_COMMENT_BYTES, MAX_DIRECTIVES, MAX_DIRECTIVE_BYTES, MAX_NAME_BYTES, PATH_MAX,
};
use options::{Arg, LookupError, SbatchOption, Support};
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
    parse_submission::<&str>(script, &[], limits)
}

/// Parses a batch script and the command-line options given with it, as `sbatch`
/// does: the options override the script's directives (they are applied after
/// them). Errors in the options report line 0.
pub fn parse_submission<S: AsRef<str>>(
    script: &str,
    args: &[S],
    limits: &ParseLimits,
) -> Result<JobRequest, ParseError> {
    submission(script, args, limits, State::default())
}

/// Reads what a script and its options ask, for a submission that Slurm's own
/// `sbatch` judges: an option this parser does not know or whose value it refuses
/// is skipped (Slurm may accept it). Only the bounds on the text (line length, the
/// number of directives, quoting) are errors.
pub fn read_submission<S: AsRef<str>>(
    script: &str,
    args: &[S],
    limits: &ParseLimits,
) -> Result<JobRequest, ParseError> {
    let state = State {
        lenient: true,
        ..State::default()
    };
    submission(script, args, limits, state)
}

fn submission<S: AsRef<str>>(
    script: &str,
    args: &[S],
    limits: &ParseLimits,
    mut state: State,
) -> Result<JobRequest, ParseError> {
    let mut req = JobRequest::default();
    script_directives(&mut req, script, limits, &mut state)?;
    if !args.is_empty() {
        // An option on the command line replaces the script's GPU request.
        state.gpu_option = None;
        option_words(&mut req, args, limits, &mut state)?;
    }
    finish(&mut req, &state);
    Ok(req)
}

fn script_directives(
    req: &mut JobRequest,
    script: &str,
    limits: &ParseLimits,
    state: &mut State,
) -> Result<(), ParseError> {
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
        count += apply_words(req, &words, &cx, state)?;
        if count > MAX_DIRECTIVES {
            return Err(script_error(format!(
                "more than {MAX_DIRECTIVES} directives"
            )));
        }
    }
    Ok(())
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
    parse_submission("", args, limits)
}

fn option_words<S: AsRef<str>>(
    req: &mut JobRequest,
    args: &[S],
    limits: &ParseLimits,
    state: &mut State,
) -> Result<(), ParseError> {
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
    let cx = Words {
        line: 0,
        field: "options",
        limits,
    };
    if apply_words(req, &words, &cx, state)? > MAX_DIRECTIVES {
        return Err(options_error(
            "options",
            format!("more than {MAX_DIRECTIVES} options"),
        ));
    }
    Ok(())
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

/// What the parser keeps between the options of one submission.
#[derive(Default)]
struct State {
    /// The option that set the GPU request (`gres`, `gpus`, `gpus-per-node`): two
    /// different ones conflict.
    gpu_option: Option<&'static str>,
    /// The type of `--gpus-per-task=type:N`.
    task_gpu_type: Option<String>,
    /// The options are read for another judge (Slurm's own `sbatch`): what this
    /// parser refuses is skipped, not refused. Bounds still hold.
    lenient: bool,
}

/// Applies options to `req`; returns how many there were. Long options may be
/// shortened to a unique prefix; short flags may be grouped (`-Hk`); a short
/// option's value may be attached (`-N2`, `-N=2`). When the options are read for
/// another judge (`State::lenient`), an option this parser refuses is skipped.
fn apply_words(
    req: &mut JobRequest,
    words: &[String],
    cx: &Words<'_>,
    state: &mut State,
) -> Result<usize, ParseError> {
    let mut i = 0;
    let mut count = 0;
    while i < words.len() {
        match next_option(req, words, &mut i, cx, state) {
            Ok(n) => count += n,
            Err(_) if state.lenient => count += 1,
            Err(e) => return Err(e),
        }
        i += 1;
    }
    Ok(count)
}

/// Applies the option at `words[*i]` (and its value, moving `i` past it); returns
/// how many options the word held.
fn next_option(
    req: &mut JobRequest,
    words: &[String],
    i: &mut usize,
    cx: &Words<'_>,
    state: &mut State,
) -> Result<usize, ParseError> {
    let err = |directive: &str, field: &'static str, message: String| ParseError {
        line: cx.line,
        directive: directive.to_string(),
        field,
        message,
    };
    let word = &words[*i];
    let mut take_next = |written: &str, field: &'static str| {
        *i += 1;
        words
            .get(*i)
            .map(String::as_str)
            .ok_or_else(|| err(written, field, "missing value".into()))
    };
    if let Some(long) = word.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (long, None),
        };
        let written = format!("--{name}");
        let opt = options::find_long(name).map_err(|e| match e {
            LookupError::Unknown => err(&written, cx.field, "unknown option".into()),
            LookupError::Ambiguous(all) => err(
                &written,
                cx.field,
                format!("ambiguous: it could be --{}", all.join(", --")),
            ),
        })?;
        let value = match (opt.arg, inline) {
            (Arg::None, Some(_)) => return Err(err(&written, opt.long, "takes no value".into())),
            (Arg::None | Arg::Optional, None) => None,
            (_, Some(v)) => Some(v),
            (Arg::Required, None) => Some(take_next(&written, opt.long)?),
        };
        apply_option(req, opt, value, cx.limits, state).map_err(|m| err(&written, opt.long, m))?;
        return Ok(1);
    }
    if word.len() < 2 || !word.starts_with('-') {
        return Err(err(
            word,
            cx.field,
            "expected an option starting with - or --".into(),
        ));
    }
    let body = &word[1..];
    let mut pos = 0;
    let mut count = 0;
    while let Some(c) = body[pos..].chars().next() {
        let written = format!("-{c}");
        let opt = options::find_short(c)
            .ok_or_else(|| err(&written, cx.field, "unknown option".into()))?;
        pos += c.len_utf8();
        let rest = &body[pos..];
        let value = match opt.arg {
            Arg::None => None,
            Arg::Optional if rest.is_empty() => None,
            Arg::Optional => Some(rest),
            Arg::Required if rest.is_empty() => Some(take_next(&written, opt.long)?),
            Arg::Required => Some(rest.strip_prefix('=').unwrap_or(rest)),
        };
        apply_option(req, opt, value, cx.limits, state).map_err(|m| err(&written, opt.long, m))?;
        count += 1;
        if value.is_some() {
            break;
        }
    }
    Ok(count)
}

/// Applies one option by what the table says of it.
fn apply_option(
    req: &mut JobRequest,
    opt: &'static SbatchOption,
    value: Option<&str>,
    limits: &ParseLimits,
    state: &mut State,
) -> Result<(), String> {
    match opt.support {
        Support::Refused(why) => Err(why.to_string()),
        Support::Implemented => apply(req, opt.long, value, limits, state),
        Support::Ignored(why) => {
            check_ignored(opt.long, value)?;
            ignore(req, opt, value, why);
            Ok(())
        }
        Support::Client => {
            if let Some(v) = value {
                non_empty(v)?;
            }
            ignore(
                req,
                opt,
                value,
                "acted on by atrium sbatch, the command line",
            );
            Ok(())
        }
    }
}

/// Records an option as ignored (once per option: the last value given).
fn ignore(req: &mut JobRequest, opt: &SbatchOption, value: Option<&str>, why: &str) {
    let option = match value {
        Some(v) => format!("--{}={v}", opt.long),
        None => format!("--{}", opt.long),
    };
    let prefix = format!("--{}", opt.long);
    req.ignored
        .retain(|i| i.option != prefix && !i.option.starts_with(&format!("{prefix}=")));
    req.ignored.push(IgnoredOption {
        option,
        reason: why.to_string(),
    });
}

/// Checks the value of an ignored option with Slurm's grammar for it, so that what
/// Slurm refuses is refused here too.
fn check_ignored(long: &str, value: Option<&str>) -> Result<(), String> {
    let Some(v) = value else { return Ok(()) };
    let one_of = |words: &[&str]| -> Result<(), String> {
        if words.iter().any(|w| w.eq_ignore_ascii_case(v)) {
            Ok(())
        } else {
            Err(format!("expected {}, got \"{v}\"", words.join(" or ")))
        }
    };
    match long {
        // Slurm reads these with parse_int(positive): 0 is refused, as for -c.
        "cores-per-socket" | "sockets-per-node" | "threads-per-core" | "thread-spec"
        | "mincpus" | "ntasks-per-core" | "ntasks-per-socket" => positive(v).map(drop),
        "core-spec" => count_or_zero(v).map(drop),
        "wait-all-nodes" | "oom-kill-step" => one_of(&["0", "1"]),
        "kill-on-invalid-dep" => one_of(&["yes", "no"]),
        "no-kill" => one_of(&["off"]),
        "tmp" => values::memory_mb(v).map(drop),
        "delay-boot" => v.parse::<TimeLimit>().map(drop),
        "priority" if v.eq_ignore_ascii_case("top") => Ok(()),
        "priority" => count_or_zero(v).map(drop),
        "extra-node-info" => {
            let ok = v.split(':').count() <= 3
                && v.split(':').all(|p| {
                    p == "*"
                        || p.split('-')
                            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                });
            if ok {
                Ok(())
            } else {
                Err(format!("expected sockets[:cores[:threads]], got \"{v}\""))
            }
        }
        "switches" => {
            let (n, time) = v.split_once('@').unwrap_or((v, ""));
            positive(n)?;
            if !time.is_empty() {
                time.parse::<TimeLimit>()?;
            }
            Ok(())
        }
        _ => non_empty(v).map(drop),
    }
}

/// A count that may be 0 (`--core-spec=0`).
fn count_or_zero(v: &str) -> Result<u32, String> {
    if v.is_empty() || v.len() > 7 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected a number, got \"{v}\""));
    }
    v.parse::<u32>()
        .map_err(|_| format!("expected a number, got \"{v}\""))
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

/// Applies an option the scheduler implements.
fn apply(
    req: &mut JobRequest,
    long: &'static str,
    value: Option<&str>,
    limits: &ParseLimits,
    state: &mut State,
) -> Result<(), String> {
    let v = value.unwrap_or("");
    let mut gpu = |req: &mut JobRequest, g| -> Result<(), String> {
        if let Some(prev) = state.gpu_option {
            if prev != long {
                return Err(format!("conflicts with --{prev}"));
            }
        }
        state.gpu_option = Some(long);
        req.gpus = Some(g);
        Ok(())
    };
    match long {
        "job-name" => req.name = Some(name(v)?),
        "partition" => req.partition = Some(name(v)?),
        "nodes" => {
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
        "ntasks" => req.ntasks = Some(positive(v)?),
        "ntasks-per-node" => req.ntasks_per_node = Some(positive(v)?),
        "ntasks-per-gpu" => req.ntasks_per_gpu = Some(positive(v)?),
        "cpus-per-task" => req.cpus_per_task = Some(positive(v)?),
        "cpus-per-gpu" => req.cpus_per_gpu = Some(positive(v)?),
        "mem" => req.memory = Some(MemoryRequest::PerNode(values::memory_mb(v)?)),
        // slurmctld maps --mem-per-cpu=0 to --mem=0: all of each node's memory.
        "mem-per-cpu" => {
            req.memory = Some(match values::memory_mb(v)? {
                0 => MemoryRequest::PerNode(0),
                mb => MemoryRequest::PerCpu(mb),
            })
        }
        "mem-per-gpu" => req.memory = Some(MemoryRequest::PerGpu(values::positive_memory_mb(v)?)),
        // Slurm's `--gres=none`: no generic resource (over the script's own).
        "gres" if v.eq_ignore_ascii_case("none") => req.gpus = None,
        "gres" => gpu(req, values::gres(v)?)?,
        "gpus" => gpu(req, values::gpus(v, GpuPer::Job)?)?,
        "gpus-per-node" => gpu(req, values::gpus(v, GpuPer::Node)?)?,
        "gpus-per-task" => {
            let g = values::gpus(v, GpuPer::Job)?;
            state.task_gpu_type = match g.kind {
                crate::model::SliceKind::Gpu { r#type } => r#type,
                crate::model::SliceKind::Shard => None,
            };
            req.gpus_per_task = Some(g.count);
        }
        "gpu-bind" => {
            at_most("the binding", v, MAX_NAME_BYTES)?;
            req.gpu_bind = Some(non_empty(v)?);
        }
        "time" => req.time_limit = Some(v.parse::<TimeLimit>()?),
        "time-min" => req.time_min = Some(v.parse::<TimeLimit>()?),
        "array" => req.array = Some(ArraySpec::parse(v, limits.max_array_size)?),
        "dependency" => req.dependency = Some(v.parse::<Dependency>()?),
        "output" | "error" => {
            let p = path(v)?;
            values::check_pattern(&p)?;
            if long == "output" {
                req.output = Some(p);
            } else {
                req.error = Some(p);
            }
        }
        "chdir" => req.chdir = Some(path(v)?),
        "export" => req.export = Some(v.parse::<ExportSpec>()?),
        "account" => req.account = Some(name(v)?),
        "qos" => req.qos = Some(name(v)?),
        "hold" => req.hold = true,
        "begin" => req.begin = Some(v.parse::<BeginTime>()?),
        "deadline" => req.deadline = Some(v.parse::<BeginTime>()?),
        "exclusive" => {
            // Slurm's modes: `exclusive` is the flag alone, `oversubscribe` shares
            // the nodes (as without the option), `topo` came in 25.x.
            let mode = value.unwrap_or("exclusive");
            let is = |m: &str| m.eq_ignore_ascii_case(mode);
            if !["exclusive", "oversubscribe", "user", "mcs", "topo"]
                .iter()
                .any(|m| is(m))
            {
                return Err(format!(
                    "expected exclusive, oversubscribe, user, mcs or topo, got \"{mode}\""
                ));
            }
            req.exclusive = !is("oversubscribe");
        }
        "nodelist" => req.nodelist = expand_hostlist(v)?,
        "exclude" => req.exclude = expand_hostlist(v)?,
        "constraint" => req.constraint = Some(v.parse::<Constraint>()?),
        "comment" => {
            at_most("the comment", v, MAX_COMMENT_BYTES)?;
            req.comment = Some(non_empty(v)?);
        }
        "requeue" => req.requeue = Some(true),
        "no-requeue" => req.requeue = Some(false),
        "nice" => {
            let n: i32 = match value {
                None => 100,
                Some(v) => v
                    .parse()
                    .ok()
                    .filter(|n: &i32| n.unsigned_abs() <= 1_000_000)
                    .ok_or_else(|| format!("expected an integer, got \"{v}\""))?,
            };
            req.nice = Some(n);
        }
        "signal" => req.signal = Some(v.parse::<SignalSpec>()?),
        "open-mode" => {
            req.open_mode = Some(match v.as_bytes().first() {
                Some(b'a' | b'A') => OpenMode::Append,
                Some(b't' | b'T') => OpenMode::Truncate,
                _ => return Err(format!("expected append or truncate, got \"{v}\"")),
            })
        }
        "mail-type" => req.mail_type = Some(v.parse::<MailTypes>()?),
        "mail-user" => {
            at_most("the address", v, MAX_NAME_BYTES)?;
            if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(format!("expected a user name or a mail address, got {v:?}"));
            }
            req.mail_user = Some(v.to_string());
        }
        "licenses" => req.licenses = values::licenses(v)?,
        "get-user-env" => {
            if let Some(v) = value {
                let digits = v.trim_end_matches(['S', 'L', 's', 'l']);
                if v.len() - digits.len() > 1 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(format!("expected [timeout][S|L], got \"{v}\""));
                }
            }
            req.get_user_env = true;
        }
        other => return Err(format!("--{other} is in the table but not handled")),
    }
    Ok(())
}

/// What the options together imply: `--gpus-per-task` and `--ntasks-per-gpu` make
/// the job's GPUs or tasks when they are not given otherwise.
fn finish(req: &mut JobRequest, state: &State) {
    if let (Some(per_task), None) = (req.gpus_per_task, &req.gpus) {
        let tasks = req
            .ntasks
            .unwrap_or_else(|| req.ntasks_per_node.unwrap_or(1) * req.nodes.map_or(1, |n| n.min));
        req.gpus = Some(GpuRequest {
            kind: SliceKind::Gpu {
                r#type: state.task_gpu_type.clone(),
            },
            count: per_task.saturating_mul(tasks),
            per: GpuPer::Job,
        });
    }
    if let (Some(per_gpu), None, Some(g)) = (req.ntasks_per_gpu, req.ntasks, &req.gpus) {
        let gpus = match g.per {
            GpuPer::Job => g.count,
            GpuPer::Node => g.count.saturating_mul(req.nodes.map_or(1, |n| n.min)),
        };
        req.ntasks = Some(per_gpu.saturating_mul(gpus));
    }
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
