//! `atrium sbatch [OPTIONS] [FILE [ARGS]]`: submit a batch script (FILE, or standard
//! input) or a `--wrap` command, reading the command line as `sbatch` does: every
//! option of the scheduler's option table (`scheduler::parse::options`), long names
//! shortened to any unique prefix, grouped short flags, `--opt=value` or `--opt value`,
//! options up to the script's name, then the `SBATCH_*` input environment variables
//! for options the command line does not give. The job's options go to the portal
//! under their long names, where they override the script's `#SBATCH` lines and are
//! judged; `--parsable`, `--wait`, `--test-only`, `--help`, `--usage` and `--version`
//! (on the command line, in the environment or in the script) are acted on here.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use scheduler::parse::options::{self, Arg, LookupError, SbatchOption, Support, SBATCH_OPTIONS};
use serde_json::{json, Map, Value};

use super::{connect, failed, SlurmError};

const CMD: &str = "sbatch";

/// Everything after `sbatch`, read by [`CommandLine::parse`] (clap passes it whole:
/// sbatch's own grammar is not clap's).
#[derive(Debug, Clone, Default, Args)]
pub struct SbatchArgs {
    /// sbatch's options, then the script and the script's arguments
    /// (`atrium sbatch --help` lists the options).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub words: Vec<String>,
}

/// The command line as `sbatch` reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandLine {
    /// The job's options in order: the long name and the value (none for a flag).
    pub options: Vec<(&'static str, Option<String>)>,
    pub wrap: Option<String>,
    pub script: Option<PathBuf>,
    /// Words after the script's name: the script's own arguments.
    pub script_args: Vec<String>,
    pub parsable: bool,
    pub wait: bool,
    pub test_only: bool,
    pub quiet: bool,
    pub help: bool,
    pub usage: bool,
    pub version: bool,
}

impl CommandLine {
    /// Reads `words` as `getopt_long` does for sbatch: options until the first word
    /// that is not one (the script) or `--`.
    pub fn parse(words: &[String]) -> Result<CommandLine, SlurmError> {
        let mut cl = CommandLine::default();
        let mut i = 0;
        while i < words.len() {
            let word = &words[i];
            if word == "--" {
                i += 1;
                break;
            }
            if let Some(long) = word.strip_prefix("--") {
                let (name, inline) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                let opt = options::find_long(name).map_err(|e| match e {
                    LookupError::Unknown => error(format!("unrecognized option '--{name}'")),
                    LookupError::Ambiguous(all) => error(format!(
                        "option '--{name}' is ambiguous; possibilities: {}",
                        all.iter()
                            .map(|o| format!("'--{o}'"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    )),
                })?;
                let value = match (opt.arg, inline) {
                    (Arg::None, Some(_)) => {
                        return Err(error(format!(
                            "option '--{}' doesn't allow an argument",
                            opt.long
                        )))
                    }
                    (Arg::None | Arg::Optional, None) => None,
                    (_, Some(v)) => Some(v),
                    (Arg::Required, None) => {
                        i += 1;
                        Some(words.get(i).cloned().ok_or_else(|| {
                            error(format!("option '--{}' requires an argument", opt.long))
                        })?)
                    }
                };
                cl.take(opt, value);
            } else if word.len() > 1 && word.starts_with('-') {
                let body = &word[1..];
                let mut pos = 0;
                while let Some(c) = body[pos..].chars().next() {
                    let opt = options::find_short(c)
                        .ok_or_else(|| error(format!("invalid option -- '{c}'")))?;
                    pos += c.len_utf8();
                    let rest = &body[pos..];
                    let value = match opt.arg {
                        Arg::None => None,
                        Arg::Optional if rest.is_empty() => None,
                        Arg::Optional => Some(rest.to_string()),
                        Arg::Required if rest.is_empty() => {
                            i += 1;
                            Some(words.get(i).cloned().ok_or_else(|| {
                                error(format!("option requires an argument -- '{c}'"))
                            })?)
                        }
                        Arg::Required => Some(rest.to_string()),
                    };
                    let took_value = value.is_some();
                    cl.take(opt, value);
                    if took_value {
                        break;
                    }
                }
            } else {
                break;
            }
            i += 1;
        }
        if let Some(script) = words.get(i) {
            cl.script = Some(PathBuf::from(script));
            cl.script_args = words[i + 1..].to_vec();
        }
        Ok(cl)
    }

    /// Records one option: acted on here, or kept for the job.
    fn take(&mut self, opt: &'static SbatchOption, value: Option<String>) {
        match (opt.support, opt.long) {
            (Support::Client, "parsable") => self.parsable = true,
            (Support::Client, "wait") => self.wait = true,
            (Support::Client, "test-only") => self.test_only = true,
            (Support::Client, "quiet") => self.quiet = true,
            (Support::Client, "help") => self.help = true,
            (Support::Client, "usage") => self.usage = true,
            (Support::Client, "version") => self.version = true,
            (Support::Client, "wrap") => self.wrap = value,
            // --verbose and --ignore-pbs change nothing here.
            (Support::Client, _) => {}
            _ => self.options.push((opt.long, value)),
        }
    }

    /// Adds the `SBATCH_*` input environment variables (read through `var`) for the
    /// options the command line does not give, as sbatch does: a flag is set by an
    /// empty value, `yes` or a number other than 0.
    pub fn add_environment(&mut self, var: impl Fn(&str) -> Option<String>) {
        for opt in SBATCH_OPTIONS {
            let Some(value) = opt.env.iter().find_map(|name| var(name)) else {
                continue;
            };
            let given = self.options.iter().any(|(long, _)| *long == opt.long)
                || (opt.long == "wait" && self.wait);
            if given {
                continue;
            }
            if opt.arg == Arg::None {
                let on = value.is_empty()
                    || value.eq_ignore_ascii_case("yes")
                    || value.parse::<i64>().is_ok_and(|n| n != 0);
                if on {
                    self.take(opt, None);
                }
            } else if !value.is_empty() {
                self.take(opt, Some(value));
            }
        }
    }

    /// The `#SBATCH` lines of `script` that sbatch itself acts on (`--parsable`,
    /// `--wait`, `--test-only`); the portal reads the rest.
    pub fn add_script_directives(&mut self, script: &str) {
        for line in script.lines().map(str::trim) {
            if line.is_empty() {
                continue;
            }
            if !line.starts_with('#') {
                break;
            }
            let Some(rest) = line.strip_prefix("#SBATCH") else {
                continue;
            };
            for word in rest.split_whitespace() {
                if word.starts_with('#') {
                    break;
                }
                let name = word
                    .strip_prefix("--")
                    .map(|w| w.split('=').next().unwrap_or(w));
                let opt = match name {
                    Some(n) => options::find_long(n).ok(),
                    None => word
                        .strip_prefix('-')
                        .and_then(|w| w.chars().next())
                        .and_then(options::find_short),
                };
                match opt.map(|o| o.long) {
                    Some("parsable") => self.parsable = true,
                    Some("wait") => self.wait = true,
                    Some("test-only") => self.test_only = true,
                    _ => {}
                }
            }
        }
    }

    /// The job's options as the API's `options`: long names, strings for values and
    /// `true` for flags; a later option replaces an earlier one of the same name.
    pub fn api_options(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for (long, value) in &self.options {
            let v = match value {
                Some(v) => Value::String(v.clone()),
                None => Value::Bool(true),
            };
            out.insert((*long).to_string(), v);
        }
        out
    }
}

fn error(message: String) -> SlurmError {
    SlurmError::new(CMD, message)
}

/// Whether `name` can be an environment variable a shell exports.
fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The environment sent with the job, as sbatch propagates it: every variable with
/// a valid name and UTF-8 value, except atrium's own (`ATRIUM_TOKEN` and the rest).
pub fn job_environment(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, _)| is_variable_name(k) && !k.starts_with("ATRIUM_"))
        .collect()
}

/// The body of `POST /jobs`.
pub fn request_body(
    cl: &CommandLine,
    script: Option<String>,
    environment: BTreeMap<String, String>,
    working_directory: &str,
) -> Value {
    let mut body = json!({
        "options": cl.api_options(),
        "environment": environment,
        "working_directory": working_directory,
    });
    if !cl.script_args.is_empty() {
        body["arguments"] = json!(cl.script_args);
    }
    match (&cl.wrap, script) {
        (Some(wrap), _) => body["wrap"] = Value::String(wrap.clone()),
        (None, Some(script)) => body["script"] = Value::String(script),
        (None, None) => {}
    }
    body
}

/// What sbatch prints once the job is in.
pub fn submitted_line(job_id: u64, parsable: bool) -> String {
    if parsable {
        job_id.to_string()
    } else {
        format!("Submitted batch job {job_id}")
    }
}

/// What `sbatch --test-only` prints (on standard error), in local time.
pub fn test_only_lines(answer: &crate::api::DryRun, tz: &jiff::tz::TimeZone) -> Vec<String> {
    let mut lines = Vec::new();
    let start = answer
        .expected_start
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .map(|t| {
            t.to_zoned(tz.clone())
                .datetime()
                .strftime("%Y-%m-%dT%H:%M:%S")
                .to_string()
        });
    match start {
        Some(at) => {
            let nodes = if answer.nodes.is_empty() {
                "(not yet chosen)".to_string()
            } else {
                answer.nodes.join(",")
            };
            let ahead = if answer.ahead_of_queue {
                " (were it first in the queue)"
            } else {
                ""
            };
            lines.push(format!(
                "{CMD}: Job would start at {at}{ahead} using {} processors on nodes {nodes} in partition {}",
                answer.cpus, answer.partition
            ));
        }
        None => lines.push(format!(
            "{CMD}: Job would be queued in partition {}, waiting ({}): no start can be planned",
            answer.partition,
            answer.reason.as_deref().unwrap_or("unknown")
        )),
    }
    for i in &answer.ignored {
        lines.push(format!("{CMD}: ignored here: {} ({})", i.option, i.reason));
    }
    lines
}

/// `sbatch --help`: every option of the table, with what happens to it here.
pub fn help_text() -> String {
    let mut out = String::from(
        "Usage: sbatch [OPTIONS...] [script [args...]]\n\nOptions (long names may be shortened to any unique prefix):\n",
    );
    for o in SBATCH_OPTIONS {
        let short = o
            .short
            .map_or_else(|| "    ".to_string(), |c| format!("-{c}, "));
        let value = match o.arg {
            Arg::None => String::new(),
            Arg::Required => format!("={}", o.value.trim_start_matches('=')),
            Arg::Optional => o.value.to_string(),
        };
        let note = match o.support {
            Support::Implemented | Support::Client => String::new(),
            Support::Ignored(why) => format!("  [ignored here: {why}]"),
            Support::Refused(why) => format!("  [refused: {why}]"),
        };
        out.push_str(&format!("  {short}--{}{value}{note}\n", o.long));
    }
    out
}

fn read_script(cl: &CommandLine) -> Result<Option<String>, SlurmError> {
    if cl.wrap.is_some() {
        return Ok(None);
    }
    // `/dev/stdin` (snakemake's form) is this process's input, read as it is: reopening
    // it by name fails for a pipe another user made.
    let script = match cl.script.as_ref().filter(|p| *p != Path::new("/dev/stdin")) {
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            SlurmError::new(CMD, format!("Unable to open file {}: {e}", path.display()))
        })?,
        None => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .map_err(|e| SlurmError::new(CMD, format!("reading standard input: {e}")))?;
            text
        }
    };
    Ok(Some(script))
}

/// The states a job does not leave.
pub(crate) const ENDED: [&str; 9] = [
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
];

/// `--wait`: polls the job (every task of an array) until it has ended; the exit
/// code sbatch then exits with (the highest of an array's tasks).
async fn wait_for(portal: &crate::api::Portal, job_id: u64, since: i64) -> Result<i32, SlurmError> {
    let mut pause = Duration::from_millis(500);
    loop {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(10));
        let jobs = portal
            .jobs(&[("state", "all".to_string()), ("since", since.to_string())])
            .await
            .map_err(failed(CMD))?;
        let mine: Vec<_> = jobs.iter().filter(|j| j.job_id == job_id).collect();
        if mine.is_empty() || mine.iter().any(|j| !ENDED.contains(&j.state.as_str())) {
            continue;
        }
        let code = mine
            .iter()
            .map(|j| match (j.state.as_str(), j.exit_code) {
                ("COMPLETED", _) => 0,
                (_, Some(c)) if c != 0 => c as i32,
                _ => 1,
            })
            .max()
            .unwrap_or(0);
        return Ok(code);
    }
}

pub async fn run(args: SbatchArgs) -> anyhow::Result<()> {
    let mut cl = CommandLine::parse(&args.words)?;
    if cl.help {
        print!("{}", help_text());
        return Ok(());
    }
    if cl.usage {
        println!(
            "Usage: sbatch [OPTIONS...] [script [args...]]  (sbatch --help lists the options)"
        );
        return Ok(());
    }
    if cl.version {
        println!("atrium sbatch {}", env!("CARGO_PKG_VERSION"));
        return Ok(());
    }
    cl.add_environment(|name| std::env::var(name).ok());
    let script = read_script(&cl)?;
    if let Some(text) = &script {
        cl.add_script_directives(text);
    }
    let cwd = std::env::current_dir()
        .map_err(|e| SlurmError::new(CMD, format!("cannot read the current directory: {e}")))?;
    let body = request_body(
        &cl,
        script,
        job_environment(std::env::vars_os()),
        &cwd.to_string_lossy(),
    );
    let portal = connect(CMD)?;
    if cl.test_only {
        let answer = portal.dry_run(&body).await.map_err(failed(CMD))?;
        let tz = crate::times::local_zone();
        for line in test_only_lines(&answer, &tz) {
            eprintln!("{line}");
        }
        return Ok(());
    }
    let since = jiff::Timestamp::now().as_second() - 60;
    let submitted = portal.submit(&body).await.map_err(failed(CMD))?;
    println!("{}", submitted_line(submitted.job_id, cl.parsable));
    if cl.wait {
        let code = wait_for(&portal, submitted.job_id, since).await?;
        if code != 0 {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            std::process::exit(code);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    fn parse(w: &[&str]) -> CommandLine {
        CommandLine::parse(&words(w)).expect("parse")
    }

    #[test]
    fn short_long_and_abbreviated_options_map_to_long_names() {
        let cl = parse(&[
            "-J",
            "train",
            "-p",
            "gpu",
            "-t1:00:00",
            "-G",
            "2",
            "--gres=gpu:a100:1",
            "-c",
            "4",
            "--mem",
            "16G",
            "-a",
            "0-9%2",
            "-d",
            "afterok:12",
            "--out",
            "out-%j",
            "--err=err-%j",
            "-D",
            "/scratch",
            "-H",
            "--export=ALL,FOO=1",
            "-A",
            "lab",
            "-q",
            "high",
            "--begin",
            "now+1hour",
            "--nice=-5",
            "--exclusive",
            "--no-reque",
            "--signal=B:USR1@120",
            "job.sh",
            "--not-an-option",
            "x",
        ]);
        assert_eq!(
            Value::Object(cl.api_options()),
            json!({
                "job-name": "train", "partition": "gpu", "time": "1:00:00", "gpus": "2",
                "gres": "gpu:a100:1", "cpus-per-task": "4", "mem": "16G",
                "array": "0-9%2", "dependency": "afterok:12", "output": "out-%j",
                "error": "err-%j", "chdir": "/scratch", "hold": true,
                "export": "ALL,FOO=1", "account": "lab", "qos": "high",
                "begin": "now+1hour", "nice": "-5", "exclusive": true, "no-requeue": true,
                "signal": "B:USR1@120"
            })
        );
        assert_eq!(cl.script, Some(PathBuf::from("job.sh")));
        assert_eq!(cl.script_args, ["--not-an-option", "x"]);
    }

    #[test]
    fn client_options_are_acted_on_here_and_errors_read_like_getopt() {
        let cl = parse(&[
            "--parsable",
            "-W",
            "--test-on",
            "--wrap",
            "nvidia-smi",
            "-Q",
        ]);
        assert!(cl.parsable && cl.wait && cl.test_only && cl.quiet);
        assert_eq!(cl.wrap.as_deref(), Some("nvidia-smi"));
        assert!(cl.options.is_empty());
        let e = CommandLine::parse(&words(&["--bogus"])).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "sbatch: error: unrecognized option '--bogus'"
        );
        let e = CommandLine::parse(&words(&["--mem-per=1G"])).expect_err("refused");
        assert!(e.to_string().contains("ambiguous"), "{e}");
        let e = CommandLine::parse(&words(&["-t"])).expect_err("refused");
        assert!(e.to_string().contains("requires an argument"), "{e}");
        let e = CommandLine::parse(&words(&["--hold=1"])).expect_err("refused");
        assert!(e.to_string().contains("doesn't allow an argument"), "{e}");
    }

    #[test]
    fn input_environment_variables_fill_what_the_command_line_does_not_give() {
        let mut cl = parse(&["-p", "debug"]);
        let env = BTreeMap::from([
            ("SBATCH_PARTITION", "gpu"),
            ("SBATCH_TIMELIMIT", "10"),
            ("SBATCH_REQUEUE", "yes"),
            ("SBATCH_NO_REQUEUE", "0"),
            ("SBATCH_WAIT", "1"),
            ("SBATCH_MEM_PER_NODE", "4G"),
        ]);
        cl.add_environment(|n| env.get(n).map(|v| v.to_string()));
        assert_eq!(
            Value::Object(cl.api_options()),
            json!({"partition": "debug", "time": "10", "requeue": true, "mem": "4G"})
        );
        assert!(cl.wait);
    }

    #[test]
    fn the_script_can_ask_for_what_sbatch_itself_does() {
        let mut cl = parse(&["job.sh"]);
        cl.add_script_directives(
            "#!/bin/bash\n#SBATCH -J x --parsable\n#SBATCH -W\necho\n#SBATCH --test-only\n",
        );
        assert!(cl.parsable && cl.wait && !cl.test_only);
    }

    #[test]
    fn wrap_replaces_the_script() {
        let cl = parse(&["--wrap", "nvidia-smi", "--parsable"]);
        let body = request_body(&cl, None, BTreeMap::new(), "/home/alice");
        assert_eq!(body["wrap"], "nvidia-smi");
        assert!(body.get("script").is_none());
        assert_eq!(body["working_directory"], "/home/alice");

        let cl = parse(&["job.sh"]);
        let body = request_body(&cl, Some("#!/bin/sh\n".into()), BTreeMap::new(), "/");
        assert_eq!(body["script"], "#!/bin/sh\n");
        assert!(body.get("wrap").is_none());
    }

    #[test]
    fn the_environment_leaves_out_atrium_variables_and_bad_names() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/alice"),
            ("_private", "1"),
            ("ATRIUM_TOKEN", "atr_secret"),
            ("ATRIUM_URL", "http://x"),
            ("BASH_FUNC_f%%", "() { :; }"),
            ("1ABC", "x"),
            ("A-B", "x"),
            ("", "x"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = job_environment(vars);
        assert_eq!(
            env.keys().map(String::as_str).collect::<Vec<_>>(),
            ["HOME", "PATH", "_private"]
        );
    }

    #[test]
    fn submission_and_test_only_are_announced_like_sbatch() {
        assert_eq!(submitted_line(17, false), "Submitted batch job 17");
        assert_eq!(submitted_line(17, true), "17");
        let answer = crate::api::DryRun {
            expected_start: Some("2026-11-25T06:30:00Z".into()),
            nodes: vec!["n1".into()],
            cpus: 4,
            partition: "gpu".into(),
            ignored: vec![crate::api::Ignored {
                option: "--threads-per-core=1".into(),
                reason: "no topology".into(),
            }],
            ..Default::default()
        };
        let utc = jiff::tz::TimeZone::UTC;
        assert_eq!(
            test_only_lines(&answer, &utc),
            [
                "sbatch: Job would start at 2026-11-25T06:30:00 using 4 processors on nodes n1 in partition gpu",
                "sbatch: ignored here: --threads-per-core=1 (no topology)"
            ]
        );
        assert!(help_text().contains("--signal=[{R|B}:]<sig_num>[@sig_time]"));
    }
}
