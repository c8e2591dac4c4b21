//! A job submission in the portal's terms: the script (or a one-line command), the
//! request parsed from its `#SBATCH` directives or from JSON options, the
//! environment and the working directory, each bounded before it is parsed,
//! expanded or stored ([`SubmissionLimits`] and the parser's own limits).
//! What a started job's step is given is `step_env`'s.
//! Must not touch: the scheduler state, the database or processes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use scheduler::parse::limits::{MAX_DIRECTIVES, MAX_HOST_NAME_BYTES, PATH_MAX};
#[cfg(test)]
use scheduler::ParseLimits;
use scheduler::{JobId, JobRequest, ParseError};

use super::step_env::{output_path, PatternValues};

/// Most arguments a batch script may be given.
pub const MAX_ARGUMENTS: usize = 1024;
/// Most bytes the arguments may hold together.
pub const MAX_ARGUMENT_BYTES: usize = 128 * 1024;

/// Gives the script its arguments (`sbatch script ARGS`), bounded in number and
/// size, without NUL bytes.
pub fn set_arguments(sub: &mut Submission, arguments: Vec<String>) -> Result<(), SubmissionError> {
    if arguments.len() > MAX_ARGUMENTS {
        return Err(field(
            "arguments",
            &format!("at most {MAX_ARGUMENTS} arguments are allowed"),
        ));
    }
    let bytes: usize = arguments.iter().map(|a| a.len() + 1).sum();
    if bytes > MAX_ARGUMENT_BYTES {
        return Err(field(
            "arguments",
            &format!("are {bytes} bytes long; at most {MAX_ARGUMENT_BYTES} are allowed"),
        ));
    }
    if arguments.iter().any(|a| a.contains('\0')) {
        return Err(field("arguments", "contain a NUL byte"));
    }
    sub.request.arguments = arguments;
    Ok(())
}

/// Most variables a submission's environment may hold.
pub const MAX_ENV_VARS: usize = 4096;
/// Most bytes a submission's environment may hold, names and values together.
pub const MAX_ENV_BYTES: usize = 512 * 1024;
/// What a site bounds submissions by (`[jobs] max_script_bytes` and
/// `max_array_size`): configuration, so defined with it.
pub use crate::config::{SubmissionLimits, DEFAULT_MAX_SCRIPT_BYTES};

/// One refused directive of a script, by its line: what the submission form marks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LineError {
    /// 1-based line of the script.
    pub line: usize,
    /// As written: `--time`, `-N`, `#SBATCH`.
    pub directive: String,
    /// What is wrong with it, without the line (`expected a time like 1:00:00 …`).
    pub message: String,
}

/// Most directive errors one refusal reports.
pub const MAX_LINE_ERRORS: usize = 100;

/// Why a submission was refused before it reached the scheduler. Each names the
/// field (or the directive, by its long name) that failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SubmissionError {
    #[error("{field}: line {line}: {directive}: {message}{}", more_lines(.others))]
    Directive {
        line: usize,
        /// As written: `-a`, `--array`, `#SBATCH`, `#ATRIUM`.
        directive: String,
        /// `array`, `output`, `script`…
        field: &'static str,
        message: String,
        /// The script's other refused directives, after this one (the parser stops
        /// at the first; [`directive_errors`] reads on).
        others: Vec<LineError>,
    },
    #[error("{field}: {message}")]
    Field {
        field: &'static str,
        message: String,
    },
}

/// `; line 5: --gres: …` for each further refused directive.
fn more_lines(others: &[LineError]) -> String {
    others
        .iter()
        .map(|e| format!("; line {}: {}: {}", e.line, e.directive, e.message))
        .collect()
}

impl SubmissionError {
    /// Every refused directive line, the first included: empty for a field's
    /// refusal.
    pub fn line_errors(&self) -> Vec<LineError> {
        match self {
            SubmissionError::Directive {
                line,
                directive,
                message,
                others,
                ..
            } => std::iter::once(LineError {
                line: *line,
                directive: directive.clone(),
                message: message.clone(),
            })
            .chain(others.iter().cloned())
            .collect(),
            SubmissionError::Field { .. } => Vec::new(),
        }
    }

    /// The field or directive that failed, as the API names it.
    pub fn field(&self) -> &'static str {
        match self {
            SubmissionError::Directive { field, .. } | SubmissionError::Field { field, .. } => {
                field
            }
        }
    }
}

impl From<ParseError> for SubmissionError {
    fn from(e: ParseError) -> Self {
        SubmissionError::Directive {
            line: e.line,
            directive: e.directive,
            field: e.field,
            message: e.message,
            others: Vec::new(),
        }
    }
}

/// A validated submission.
#[derive(Debug, Clone)]
pub struct Submission {
    pub script: String,
    pub request: JobRequest,
    /// The options given beside the script, as `sbatch` long options (`--gres=gpu:1`):
    /// already in `request`; the Slurm backend passes them to `sbatch` as they are.
    pub options: Vec<String>,
    /// The request was built in code, not parsed from options: the Slurm backend
    /// prints `sbatch` options from it (`slurm::sbatch`).
    pub typed: bool,
    pub environment: BTreeMap<String, String>,
    /// Where `sbatch` was run (`SLURM_SUBMIT_DIR`); the job runs here unless `-D`.
    pub submit_dir: Option<String>,
    /// The environment it runs in; `None`: the jobs' runtime on this machine's software.
    pub container: Option<crate::launch::Container>,
    /// Read the output as a benchmark of this suite (`auto`: recognise it) at the end.
    pub benchmark: Option<String>,
}

impl Submission {
    /// The row of job `id` as submitted, from what the submission itself says (the
    /// scheduler may fill in the partition, name and limits it resolves).
    pub fn record(
        &self,
        id: u64,
        owner: &scheduler::Owner,
        workdir: &Path,
    ) -> crate::store::JobRecord {
        let r = &self.request;
        crate::store::JobRecord {
            id: id as i64,
            task: -1,
            user_name: owner.user.clone(),
            account: r.account.clone().unwrap_or_else(|| owner.account.clone()),
            partition: r.partition.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_else(|| "sbatch".into()),
            state: "PENDING".into(),
            reason: None,
            array_spec: r.array.as_ref().map(|a| a.to_string()),
            script: self.script.clone(),
            request: serde_json::to_string(r).unwrap_or_default(),
            environment: serde_json::to_string(&self.environment).unwrap_or_else(|_| "{}".into()),
            workdir: workdir.display().to_string(),
            submit_dir: self
                .submit_dir
                .clone()
                .unwrap_or_else(|| workdir.display().to_string()),
            submit_time: crate::util::now_ms(),
            time_limit: match r.time_limit {
                Some(scheduler::TimeLimit::Seconds(s)) => Some(s as i64),
                _ => None,
            },
            container: self
                .container
                .as_ref()
                .and_then(|c| serde_json::to_string(c).ok()),
            benchmark: self.benchmark.clone(),
            ..Default::default()
        }
    }
}

/// Build a submission from a script with `#SBATCH` directives, or from a command
/// (`--wrap`), plus options spelled like `sbatch`'s long options. Every part is
/// bounded before it is parsed: the script by `limits`, the options and the
/// environment by count and size.
pub fn build(
    script: Option<&str>,
    wrap: Option<&str>,
    options: &BTreeMap<String, serde_json::Value>,
    environment: BTreeMap<String, String>,
    submit_dir: Option<String>,
    limits: &SubmissionLimits,
) -> Result<Submission, SubmissionError> {
    build_for(
        super::OptionJudge::Atrium,
        script,
        wrap,
        options,
        environment,
        submit_dir,
        limits,
    )
}

/// [`build`] for a backend whose options `judge` judges: under Slurm, an option
/// atrium's parser refuses is passed to `sbatch` as written.
pub fn build_for(
    judge: super::OptionJudge,
    script: Option<&str>,
    wrap: Option<&str>,
    options: &BTreeMap<String, serde_json::Value>,
    environment: BTreeMap<String, String>,
    submit_dir: Option<String>,
    limits: &SubmissionLimits,
) -> Result<Submission, SubmissionError> {
    let (text, text_field) = match (script, wrap) {
        (Some(_), Some(_)) => {
            return Err(field("wrap", "give either a script or a command to wrap"))
        }
        (Some(s), None) => (s, "script"),
        (None, Some(w)) => (w, "wrap"),
        (None, None) => return Err(field("script", "give a script or a command to wrap")),
    };
    if text.len() > limits.max_script_bytes {
        return Err(SubmissionError::Field {
            field: text_field,
            message: format!(
                "is {} bytes long; at most {} are allowed",
                text.len(),
                limits.max_script_bytes
            ),
        });
    }
    if text.trim().is_empty() {
        return Err(field(text_field, "is empty"));
    }
    let script = match wrap {
        Some(w) => format!("#!/bin/sh\n# generated by atrium from --wrap\n{w}\n"),
        None => text.to_string(),
    };
    if script.contains('\0') {
        return Err(field(text_field, "contains a NUL byte"));
    }
    check_environment(&environment)?;
    if options.len() > MAX_DIRECTIVES {
        return Err(SubmissionError::Field {
            field: "options",
            message: format!("at most {MAX_DIRECTIVES} options are allowed"),
        });
    }
    let mut benchmark = benchmark_directive(&script)?;
    let mut options = options.clone();
    if let Some(value) = options.remove("benchmark") {
        benchmark = benchmark_option(&value)?;
    }
    let words = option_words(&options)?;
    // The options override the script's directives, as sbatch's command line does.
    let parse = match judge {
        super::OptionJudge::Atrium => scheduler::parse_submission::<String>,
        // Slurm judges its own options: read what the portal needs, refuse nothing
        // but what is over the bounds.
        super::OptionJudge::Slurm => scheduler::read_submission::<String>,
    };
    let request = parse(&script, &words, &limits.parse).map_err(|e| match e.line {
        0 => SubmissionError::Field {
            field: e.field,
            message: e.message,
        },
        _ => {
            let mut all = directive_errors(parse, &script, &words, &limits.parse).into_iter();
            let first: SubmissionError = all.next().unwrap_or(e).into();
            match first {
                SubmissionError::Directive {
                    line,
                    directive,
                    field,
                    message,
                    ..
                } => SubmissionError::Directive {
                    line,
                    directive,
                    field,
                    message,
                    others: all
                        .map(|e| LineError {
                            line: e.line,
                            directive: e.directive,
                            message: e.message,
                        })
                        .collect(),
                },
                other => other,
            }
        }
    })?;
    if let Some(dir) = &submit_dir {
        if dir.len() > PATH_MAX {
            return Err(SubmissionError::Field {
                field: "working_directory",
                message: format!("may be at most {PATH_MAX} bytes long (PATH_MAX)"),
            });
        }
        if !Path::new(dir).is_absolute() {
            return Err(field("working_directory", "must be an absolute path"));
        }
    }
    if let Some(dir) = &request.chdir {
        if !Path::new(dir).is_absolute() && submit_dir.is_none() {
            return Err(field(
                "chdir",
                "a relative --chdir needs a working_directory to start from",
            ));
        }
    }
    Ok(Submission {
        script,
        request,
        options: words,
        typed: false,
        environment,
        submit_dir,
        container: None,
        benchmark,
    })
}

/// The environment's bounds (count, then size), then each variable's name and value.
fn check_environment(environment: &BTreeMap<String, String>) -> Result<(), SubmissionError> {
    if environment.len() > MAX_ENV_VARS {
        return Err(SubmissionError::Field {
            field: "environment",
            message: format!(
                "has {} variables; at most {MAX_ENV_VARS} are allowed",
                environment.len()
            ),
        });
    }
    let bytes: usize = environment.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    if bytes > MAX_ENV_BYTES {
        return Err(SubmissionError::Field {
            field: "environment",
            message: format!("is {bytes} bytes long; at most {MAX_ENV_BYTES} are allowed"),
        });
    }
    for (name, value) in environment {
        check_env(name, value)?;
    }
    Ok(())
}

impl Submission {
    /// Refuses a job whose working directory, or whose `-o`/`-e` paths as they will
    /// be expanded for `user` (with the longest job id, task id and node name), would
    /// be longer than `PATH_MAX`.
    pub fn check_paths(&self, user: &str, workdir: &Path) -> Result<(), SubmissionError> {
        let r = &self.request;
        let workdir_field = if r.chdir.is_some() {
            "chdir"
        } else {
            "working_directory"
        };
        let too_long = |field: &'static str| SubmissionError::Field {
            field,
            message: format!("the path is longer than {PATH_MAX} bytes (PATH_MAX)"),
        };
        if workdir.as_os_str().len() > PATH_MAX {
            return Err(too_long(workdir_field));
        }
        let node = "n".repeat(MAX_HOST_NAME_BYTES);
        let longest = PatternValues {
            job: JobId::task(u64::MAX, u32::MAX),
            user,
            name: r.name.as_deref().unwrap_or("sbatch"),
            node: &node,
        };
        // The default output file must fit in the working directory as well.
        let stdout_field = if r.output.is_some() {
            "output"
        } else {
            workdir_field
        };
        output_path(r.output.as_deref(), &longest, workdir).map_err(|_| too_long(stdout_field))?;
        if let Some(pattern) = &r.error {
            output_path(Some(pattern), &longest, workdir).map_err(|_| too_long("error"))?;
        }
        Ok(())
    }
}

/// Every refused directive line of `script` (read with `words` as `parse` reads
/// them), in line order, at most [`MAX_LINE_ERRORS`]: the parser stops at the
/// first, so each refused line is set aside (made a bare `#`, which keeps the
/// numbering and the directives after it) and the script read again. An error in
/// the options (line 0) ends the list.
pub fn directive_errors(
    parse: fn(&str, &[String], &scheduler::ParseLimits) -> Result<JobRequest, ParseError>,
    script: &str,
    words: &[String],
    limits: &scheduler::ParseLimits,
) -> Vec<ParseError> {
    let mut lines: Vec<&str> = script.lines().collect();
    let mut errors: Vec<ParseError> = Vec::new();
    while errors.len() < MAX_LINE_ERRORS {
        let text = lines.join("\n");
        let Err(e) = parse(&text, words, limits) else {
            break;
        };
        let line = e.line;
        let seen = errors.iter().any(|x| x.line == line);
        if line == 0 || line > lines.len() || seen {
            if !seen {
                errors.push(e);
            }
            break;
        }
        errors.push(e);
        lines[line - 1] = "#";
    }
    errors.sort_by_key(|e| e.line);
    errors
}

/// `#ATRIUM --benchmark[=SUITE]` among the comments at the top of the script (where
/// `#SBATCH` lines are read): the suite's name, or `auto`.
fn benchmark_directive(script: &str) -> Result<Option<String>, SubmissionError> {
    let mut found = None;
    for (n, line) in script.lines().enumerate() {
        let line = line.trim();
        if n == 0 && line.starts_with("#!") {
            continue;
        }
        if !line.is_empty() && !line.starts_with('#') {
            break;
        }
        let Some(rest) = line.strip_prefix("#ATRIUM") else {
            continue;
        };
        let bad = |message: String| SubmissionError::Directive {
            line: n + 1,
            directive: "#ATRIUM".into(),
            field: "benchmark",
            message,
            others: Vec::new(),
        };
        for word in rest.split_whitespace() {
            found = Some(match word.split_once('=') {
                None if word == "--benchmark" => "auto".to_string(),
                Some(("--benchmark", suite)) => suite_name(suite).map_err(bad)?,
                _ => return Err(bad(format!("unknown option {word:?}"))),
            });
        }
    }
    Ok(found)
}

/// The submission's `benchmark` field: `true`, `false`, or a suite.
fn benchmark_option(value: &serde_json::Value) -> Result<Option<String>, SubmissionError> {
    match value {
        serde_json::Value::Bool(true) => Ok(Some("auto".into())),
        serde_json::Value::Bool(false) | serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => {
            suite_name(s).map(Some).map_err(|m| SubmissionError::Field {
                field: "benchmark",
                message: m,
            })
        }
        _ => Err(field("benchmark", "must be true, false or a suite's name")),
    }
}

fn suite_name(text: &str) -> Result<String, String> {
    if text == "auto" {
        return Ok("auto".into());
    }
    crate::domain::benchmark::Suite::parse(text)
        .map(|s| s.name().to_string())
        .ok_or_else(|| {
            let known: Vec<&str> = crate::domain::benchmark::Suite::ALL
                .iter()
                .map(|s| s.name())
                .collect();
            format!(
                "{text:?} is not a benchmark suite ({}, or auto)",
                known.join(", ")
            )
        })
}

fn field(field: &'static str, message: &str) -> SubmissionError {
    SubmissionError::Field {
        field,
        message: message.to_string(),
    }
}

/// `{"gres": "gpu:2", "hold": true}` → `["--gres=gpu:2", "--hold"]`.
fn option_words(
    options: &BTreeMap<String, serde_json::Value>,
) -> Result<Vec<String>, SubmissionError> {
    let mut words = Vec::new();
    for (key, value) in options {
        let name = key.trim_start_matches('-').replace('_', "-");
        if name.is_empty()
            || name.len() > 64
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            let shown: String = key.chars().take(64).collect();
            return Err(SubmissionError::Field {
                field: "options",
                message: format!("\"{shown}\" is not an sbatch option name"),
            });
        }
        match value {
            serde_json::Value::Bool(true) => words.push(format!("--{name}")),
            serde_json::Value::Bool(false) | serde_json::Value::Null => {}
            serde_json::Value::String(s) => words.push(format!("--{name}={s}")),
            serde_json::Value::Number(n) => words.push(format!("--{name}={n}")),
            _ => {
                return Err(SubmissionError::Field {
                    field: "options",
                    message: format!("\"{key}\" must be a string, a number or a boolean"),
                })
            }
        }
    }
    Ok(words)
}

/// Options given as JSON override the script's directives, as `sbatch` command
/// line options do.
fn merge(base: JobRequest, over: JobRequest) -> JobRequest {
    let d = JobRequest::default();
    macro_rules! pick {
        ($($f:ident),*) => {
            JobRequest { $($f: if over.$f != d.$f { over.$f } else { base.$f },)* }
        };
    }
    pick!(
        name,
        partition,
        nodes,
        ntasks,
        ntasks_per_node,
        cpus_per_task,
        memory,
        cpus_per_gpu,
        gpus,
        time_limit,
        array,
        dependency,
        output,
        error,
        chdir,
        export,
        account,
        qos,
        hold,
        begin,
        exclusive,
        nodelist,
        exclude,
        constraint,
        comment,
        requeue,
        nice,
        signal,
        open_mode,
        mail_type,
        mail_user,
        gpus_per_task,
        ntasks_per_gpu,
        gpu_bind,
        licenses,
        time_min,
        deadline,
        get_user_env,
        ignored,
        arguments,
        pty,
        pty_raw
    )
}

fn check_env(name: &str, value: &str) -> Result<(), SubmissionError> {
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(SubmissionError::Field {
            field: "environment",
            message: format!("\"{name}\" is not a valid variable name"),
        });
    }
    if value.contains('\0') {
        return Err(SubmissionError::Field {
            field: "environment",
            message: format!("the value of {name} contains a NUL byte"),
        });
    }
    Ok(())
}

/// The working directory of a job: `-D` (relative to where it was submitted), else
/// where it was submitted, else the user's home.
pub fn workdir(request: &JobRequest, submit_dir: Option<&str>, home: &Path) -> PathBuf {
    let base = submit_dir.map_or_else(|| home.to_path_buf(), PathBuf::from);
    match &request.chdir {
        Some(d) => base.join(d),
        None => base,
    }
}

#[cfg(test)]
mod tests;
mod typed;
