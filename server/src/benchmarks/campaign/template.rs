//! Campaign templates: a job script whose header declares its parameters, read as
//! `sbatch` reads `#SBATCH` lines (only the comment block at the top, before the
//! first line that is neither blank nor a comment):
//!
//! ```text
//! #CAMPAIGN --title=ResNet-50 training (synthetic images)
//! #CAMPAIGN --param BATCH=64
//! #CAMPAIGN --param DATA_DIR=
//! #CAMPAIGN --serial
//! ```
//!
//! A parameter is an upper-case shell variable the job reads; its default is a value
//! as a matrix gives one ([`value_problem`]). `--serial`: the runs must not overlap
//! (storage benchmarks). The GPU count is not a parameter: it is the matrix's `gpus`
//! axis, which becomes `--gres=gpu:N`. The built-in templates are three of the job
//! starters (`templates/starters/jobs`). Must not touch: how the jobs are submitted.

use scheduler::parse::ParseLimits;
use scheduler::TimeLimit;

use super::{bad, FieldError};
use crate::domain::benchmark::Suite;

/// The longest script, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// The most parameters of one template.
pub const MAX_PARAMS: usize = 32;
/// The longest value of a parameter, in bytes.
pub const MAX_VALUE_BYTES: usize = 256;
/// The longest parameter name, in bytes.
pub const MAX_PARAM_NAME: usize = 32;
/// The longest title, in characters.
pub const MAX_TITLE: usize = 200;
/// The longest template name, in bytes.
pub const MAX_NAME: usize = 64;

/// Variables a parameter may not set: the shell's own, the loader's, and the ones
/// Slurm and atrium give the job (`SLURM_`, `ATRIUM_`, `LD_` prefixes).
const RESERVED: [&str; 13] = [
    "PATH",
    "HOME",
    "USER",
    "SHELL",
    "PWD",
    "IFS",
    "ENV",
    "BASH_ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "CUDA_VISIBLE_DEVICES",
    "TMPDIR",
];
const RESERVED_PREFIXES: [&str; 3] = ["SLURM_", "ATRIUM_", "LD_"];

/// One parameter: the variable the job reads, and its value when a matrix does not
/// give one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Param {
    pub name: String,
    pub default: String,
}

/// A job script with its parameters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Template {
    /// What the API and the command line call it (`resnet50-synthetic`).
    pub name: String,
    /// `#CAMPAIGN --title=`, else the name.
    pub title: String,
    pub script: String,
    /// In the order the header declares them.
    pub params: Vec<Param>,
    /// `#CAMPAIGN --serial`: one run at a time, arrays one after the other.
    pub serial: bool,
}

/// Whether `name` may name a parameter: `[A-Z][A-Z0-9_]{0,31}`.
pub fn is_param_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_uppercase())
        && name.len() <= MAX_PARAM_NAME
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// What is wrong with a parameter's value, if anything: at most 256 bytes of
/// `[A-Za-z0-9._/:=+,@%-]`, not starting with `-`. Empty is a value (the script's
/// own default, for `${NAME:-…}`). Values end up single-quoted in a script; nothing
/// else gets that far anyway.
pub fn value_problem(value: &str) -> Option<String> {
    if value.len() > MAX_VALUE_BYTES {
        return Some(format!("{} bytes: at most {MAX_VALUE_BYTES}", value.len()));
    }
    if value.starts_with('-') {
        return Some(format!("{value:?} starts with '-'"));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "._/:=+,@%-".contains(*c)))
    {
        return Some(format!(
            "{value:?} holds {c:?}: only letters, digits and . _ / : = + , @ % - may be used"
        ));
    }
    None
}

/// The lines of the header block, numbered from 1 and trimmed, and the byte offset
/// where the block ends (the start of the first line of the script's body, or its
/// length).
pub(crate) fn header(script: &str) -> (Vec<(usize, &str)>, usize) {
    let mut lines = Vec::new();
    let mut offset = 0;
    for (i, raw) in script.split_inclusive('\n').enumerate() {
        let line = raw.trim();
        if !line.is_empty() && !line.starts_with('#') {
            return (lines, offset);
        }
        lines.push((i + 1, line));
        offset += raw.len();
    }
    (lines, offset)
}

/// The words after `#DIRECTIVE` on a header line, when it is one (`#DIRECTIVEX` is a
/// comment, as for sbatch).
fn directive<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(name)?;
    (rest.is_empty() || rest.starts_with(char::is_whitespace)).then(|| rest.trim())
}

/// The refusal of a line of the script.
fn at_line(line: usize, message: impl std::fmt::Display) -> FieldError {
    bad("script", format!("line {line}: {message}"))
}

impl Template {
    /// Read the `#CAMPAIGN` lines of `script`; the error names the field (`name`,
    /// `script`) and, for a line, the line.
    pub fn parse(name: &str, script: &str) -> Result<Template, FieldError> {
        if name.is_empty()
            || name.len() > MAX_NAME
            || !name.starts_with(|c: char| c.is_ascii_alphanumeric())
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        {
            return Err(bad(
                "name",
                format!("1 to {MAX_NAME} letters, digits, '.', '_' or '-', starting with a letter or digit"),
            ));
        }
        if script.len() > MAX_SCRIPT_BYTES {
            return Err(bad(
                "script",
                format!(
                    "{} bytes: a template has at most {MAX_SCRIPT_BYTES}",
                    script.len()
                ),
            ));
        }
        let mut template = Template {
            name: name.to_string(),
            title: name.to_string(),
            script: script.to_string(),
            params: Vec::new(),
            serial: false,
        };
        for (n, line) in header(script).0 {
            let Some(rest) = directive(line, "#CAMPAIGN") else {
                continue;
            };
            if let Some(param) = rest
                .strip_prefix("--param")
                .filter(|p| p.starts_with([' ', '\t', '=']))
            {
                template.declare(n, param[1..].trim())?;
            } else if rest == "--serial" {
                template.serial = true;
            } else if let Some(title) = rest.strip_prefix("--title=") {
                let title = title.trim().trim_matches('"').trim();
                if title.is_empty()
                    || title.chars().count() > MAX_TITLE
                    || title.chars().any(char::is_control)
                {
                    return Err(at_line(
                        n,
                        format!("#CAMPAIGN --title: 1 to {MAX_TITLE} characters"),
                    ));
                }
                template.title = title.to_string();
            } else {
                let word = rest.split_whitespace().next().unwrap_or("");
                let word: String = word.chars().take(40).collect();
                return Err(at_line(
                    n,
                    format!(
                        "#CAMPAIGN {word:?} is not --param NAME=DEFAULT, --serial or --title=TEXT"
                    ),
                ));
            }
        }
        Ok(template)
    }

    /// `NAME=DEFAULT` of a `#CAMPAIGN --param` on line `n`.
    fn declare(&mut self, n: usize, text: &str) -> Result<(), FieldError> {
        let (name, default) = text.split_once('=').ok_or_else(|| {
            at_line(
                n,
                "#CAMPAIGN --param: NAME=DEFAULT (the default may be empty)",
            )
        })?;
        if !is_param_name(name) {
            let shown: String = name.chars().take(40).collect();
            return Err(at_line(
                n,
                format!("#CAMPAIGN --param: {shown:?} is not an upper-case shell variable name ([A-Z][A-Z0-9_], at most {MAX_PARAM_NAME})"),
            ));
        }
        if RESERVED.contains(&name) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p)) {
            return Err(at_line(
                n,
                format!("#CAMPAIGN --param: {name} is the shell's, Slurm's or atrium's variable"),
            ));
        }
        if let Some(problem) = value_problem(default) {
            return Err(at_line(n, format!("#CAMPAIGN --param {name}: {problem}")));
        }
        if self.param(name).is_some() {
            return Err(at_line(
                n,
                format!("#CAMPAIGN --param: {name} is declared twice"),
            ));
        }
        if self.params.len() == MAX_PARAMS {
            return Err(at_line(
                n,
                format!("#CAMPAIGN --param: at most {MAX_PARAMS} parameters"),
            ));
        }
        self.params.push(Param {
            name: name.to_string(),
            default: default.to_string(),
        });
        Ok(())
    }

    /// The parameter called `name`.
    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The suite of `#ATRIUM --benchmark=SUITE`, where the header names one.
    pub fn suite(&self) -> Option<Suite> {
        header(&self.script)
            .0
            .into_iter()
            .filter_map(|(_, line)| directive(line, "#ATRIUM"))
            .flat_map(str::split_whitespace)
            .filter_map(|word| word.strip_prefix("--benchmark="))
            .filter_map(Suite::parse)
            .next_back()
    }

    /// The GPUs the script's `#SBATCH` lines ask for (`--gres=gpu:2` → 2), 0 when
    /// none: the GPU count of a matrix that gives none.
    pub fn default_gpus(&self) -> u32 {
        self.directives()
            .and_then(|r| r.gpus)
            .map_or(0, |g| g.count)
    }

    /// The script's `#SBATCH --time`, in whole minutes (rounded up); `None` when it
    /// gives none or no limit.
    pub fn time_limit_minutes(&self) -> Option<u32> {
        match self.directives()?.time_limit? {
            TimeLimit::Seconds(s) => u32::try_from(s.div_ceil(60)).ok(),
            TimeLimit::Unlimited => None,
        }
    }

    /// What the `#SBATCH` lines ask, as Slurm's `sbatch` would read them (an option
    /// atrium does not know is skipped).
    fn directives(&self) -> Option<scheduler::JobRequest> {
        scheduler::read_submission::<&str>(&self.script, &[], &ParseLimits::default()).ok()
    }
}

/// The built-in templates: the job starters that declare `#CAMPAIGN` parameters.
pub fn builtin() -> Vec<Template> {
    [
        (
            "resnet50-synthetic",
            include_str!("../../../../templates/starters/jobs/resnet50-synthetic.sh"),
        ),
        (
            "fio-seqread",
            include_str!("../../../../templates/starters/jobs/fio-seqread.sh"),
        ),
        (
            "nccl-allreduce",
            include_str!("../../../../templates/starters/jobs/nccl-allreduce.sh"),
        ),
    ]
    .into_iter()
    .filter_map(|(name, script)| match Template::parse(name, script) {
        Ok(t) => Some(t),
        Err(e) => {
            // Tested to parse: this is a build that shipped a broken starter.
            tracing::error!(template = name, error = %e, "a built-in campaign template cannot be read");
            None
        }
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(script: &str) -> Result<Template, FieldError> {
        Template::parse("t", script)
    }

    #[test]
    fn the_header_declares_params_title_and_serial() {
        let t = parse(
            "#!/bin/bash\n# A test.\n#SBATCH --gres=gpu:2\n#SBATCH --time=1:00:00\n#ATRIUM --benchmark=fio\n\
             #CAMPAIGN --title=\"Reads & writes\"\n#CAMPAIGN --param BS=1M\n#CAMPAIGN --param=DIR=\n#CAMPAIGN --serial\n\n\
             echo hi\n#CAMPAIGN --param LATE=1\n",
        )
        .expect("template");
        assert_eq!(t.title, "Reads & writes");
        assert_eq!(
            t.params,
            [
                Param {
                    name: "BS".into(),
                    default: "1M".into()
                },
                Param {
                    name: "DIR".into(),
                    default: String::new()
                }
            ]
        );
        assert!(t.serial);
        assert_eq!(t.suite(), Some(Suite::Fio));
        assert_eq!(t.default_gpus(), 2);
        assert_eq!(t.time_limit_minutes(), Some(60));
        let plain = parse("#!/bin/sh\n#SBATCH -t 90\necho\n").expect("template");
        assert_eq!(
            (
                plain.title.as_str(),
                plain.serial,
                plain.default_gpus(),
                plain.time_limit_minutes()
            ),
            ("t", false, 0, Some(90))
        );
        assert_eq!(plain.suite(), None);
    }

    #[test]
    fn bad_headers_name_the_field_and_the_line() {
        let err = |script: &str| {
            let e = parse(script).expect_err("refused");
            (e.field, e.message)
        };
        let (field, message) = err("#!/bin/bash\n#CAMPAIGN --param A=1\n#CAMPAIGN --param A=2\n");
        assert_eq!(field, "script");
        assert!(
            message.starts_with("line 3:") && message.contains("twice"),
            "{message}"
        );
        let (_, message) = err("#!/bin/bash\n\n#CAMPAIGN --param batch=1\n");
        assert!(message.starts_with("line 3:"), "{message}");
        let (_, message) = err("#CAMPAIGN --param A='x y'\n");
        assert!(message.starts_with("line 1:"), "{message}");
        let (_, message) = err("#CAMPAIGN --param A=-rf\n");
        assert!(message.contains("starts with '-'"), "{message}");
        let (_, message) = err("#CAMPAIGN --param PATH=/bin\n");
        assert!(message.contains("PATH"), "{message}");
        let (_, message) = err("#CAMPAIGN --param SLURM_X=1\n");
        assert!(message.contains("SLURM_X"), "{message}");
        let (_, message) = err("#CAMPAIGN --param A\n");
        assert!(message.contains("NAME=DEFAULT"), "{message}");
        let (_, message) = err("#CAMPAIGN --parallel\n");
        assert!(message.contains("--parallel"), "{message}");
        let many: String = (0..=MAX_PARAMS)
            .map(|i| format!("#CAMPAIGN --param P{i}=1\n"))
            .collect();
        let (_, message) = err(&many);
        assert!(message.starts_with("line 33:"), "{message}");
        let long = format!("#!/bin/sh\n{}", "#\n".repeat(MAX_SCRIPT_BYTES));
        assert_eq!(err(&long).0, "script");
        assert_eq!(
            Template::parse("../x", "echo").expect_err("name").field,
            "name"
        );
        // A lookalike is a comment.
        assert!(parse("#CAMPAIGNS --oops\n")
            .expect("comment")
            .params
            .is_empty());
    }

    #[test]
    fn values_and_names() {
        assert!(value_problem("").is_none());
        assert!(value_problem("/scratch/imagenet,a=b:c+d@e%f-g.h_i").is_none());
        assert!(value_problem("a'b").is_some());
        assert!(value_problem("$HOME").is_some());
        assert!(value_problem("a b").is_some());
        assert!(value_problem("-x").is_some());
        assert!(value_problem(&"a".repeat(MAX_VALUE_BYTES)).is_none());
        assert!(value_problem(&"a".repeat(MAX_VALUE_BYTES + 1)).is_some());
        assert!(is_param_name("BATCH_2"));
        assert!(!is_param_name("2BATCH"));
        assert!(!is_param_name("Batch"));
        assert!(!is_param_name(&"A".repeat(MAX_PARAM_NAME + 1)));
    }

    #[test]
    fn the_builtin_templates_parse_with_their_params() {
        let all = builtin();
        let names: Vec<&str> = all.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["resnet50-synthetic", "fio-seqread", "nccl-allreduce"]
        );
        let params = |t: &Template| -> Vec<(String, String)> {
            t.params
                .iter()
                .map(|p| (p.name.clone(), p.default.clone()))
                .collect()
        };
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        let resnet = &all[0];
        assert_eq!(
            params(resnet),
            pairs(&[
                ("PRECISION", "fp16"),
                ("BATCH", "64"),
                ("STEPS", "100"),
                ("DATA_DIR", "")
            ])
        );
        assert_eq!(resnet.title, "ResNet-50 training (synthetic images)");
        assert!(!resnet.serial);
        assert_eq!(resnet.default_gpus(), 1);
        let fio = &all[1];
        assert_eq!(
            params(fio),
            pairs(&[
                ("BS", "1M"),
                ("FIO_JOBS", "4"),
                ("FIO_SIZE", "1G"),
                ("FIO_RUNTIME", "30"),
                ("DIR", "")
            ])
        );
        assert!(fio.serial);
        assert_eq!(fio.title, "Storage read throughput (fio)");
        assert_eq!(fio.default_gpus(), 0);
        assert_eq!(fio.suite(), Some(Suite::Fio));
        let nccl = &all[2];
        assert!(nccl.serial);
        assert_eq!(nccl.suite(), Some(Suite::NcclTests));
        assert!(nccl.param("MAX_BYTES").is_some(), "{:?}", nccl.params);
        for t in &all {
            assert!(t.time_limit_minutes().is_some(), "{}", t.name);
            // Every parameter is read by the script's body.
            let body = &t.script[header(&t.script).1..];
            for p in &t.params {
                assert!(
                    body.contains(&format!("${{{}:-", p.name))
                        || body.contains(&format!("\"{}\"", p.name)),
                    "{}: {} is not read",
                    t.name,
                    p.name
                );
            }
        }
    }
}
