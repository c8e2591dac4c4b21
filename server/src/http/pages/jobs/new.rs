//! `GET /jobs/new` and `POST /jobs`: the submission form. A script is pasted, taken
//! from a starter (`templates/starters/jobs/*.sh`, embedded in the binary) or from
//! an earlier job (`?from=ID`, "edit as new"); it goes through the job API's one
//! submission path. A refused script comes back with every refused directive
//! listed and its line marked in a numbered view; the GPU and time fields
//! (`frontend/js/job-submit.js`) write the `#SBATCH` lines.

use crate::http::pages::PageError;
use crate::services::ServiceError;
use std::borrow::Cow;

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpResponse};
use askama::Template;
use rust_embed::RustEmbed;
use serde::Deserialize;

use crate::auth::Scope;
use crate::http::authn::PageUser;
use crate::http::pages::{csrf_refused, render, Nav};
use crate::http::{ApiError, AppState};
use crate::sched::submission::LineError;
use crate::services::jobs::SubmitJob;
use crate::services::reasons;

#[derive(RustEmbed)]
#[folder = "../templates/starters/jobs/"]
struct StarterFiles;

/// A starter script offered by the form.
pub struct Starter {
    /// The file name without `.sh` (`hello`): what `?starter=` takes.
    pub name: String,
    /// The first line of its comment header.
    pub title: String,
    pub script: String,
}

/// Every starter script, by name.
pub fn starters() -> Vec<Starter> {
    let mut out: Vec<Starter> = StarterFiles::iter()
        .filter_map(|file| {
            let name = file.strip_suffix(".sh")?.to_string();
            let data = StarterFiles::get(&file)?.data;
            let script = String::from_utf8_lossy(&data).into_owned();
            let title = header_title(&script).unwrap_or(&name).to_string();
            Some(Starter {
                name,
                title,
                script,
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The first comment line that is neither the `#!` line nor a directive.
fn header_title(script: &str) -> Option<&str> {
    script
        .lines()
        .filter(|l| l.starts_with('#') && !l.starts_with("#!") && !l.starts_with("#SBATCH"))
        .map(|l| l.trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
}

#[derive(Template)]
#[template(path = "jobs/new.html")]
struct NewJobPage<'a> {
    nav: Nav,
    starters: &'a [Starter],
    /// The starter whose script fills the form, or empty.
    selected: &'a str,
    script: &'a str,
    working_directory: &'a str,
    error: Option<&'a str>,
    /// Every refused directive, by line.
    line_errors: Vec<LineError>,
    /// The script's lines, numbered, the refused ones marked: shown beside the
    /// errors.
    lines: Vec<ScriptLine>,
    /// The GPU types of the cluster, for the GPU field (`a100`, `1g.10gb`).
    gpu_types: Vec<String>,
    /// The partitions one may choose, the default first, with what each gives and
    /// allows: the fields show them.
    partitions: Vec<PartitionChoice>,
}

/// A partition as the form's fields describe it.
pub struct PartitionChoice {
    pub name: String,
    pub default: bool,
    /// The longest time limit, in seconds (0: unlimited), and as Slurm writes it.
    pub max_secs: u64,
    pub max_time: String,
    /// The time limit of a job that asks for none, as Slurm writes it (empty:
    /// unlimited or unknown).
    pub default_time: String,
    /// CPUs and memory (GiB) given per GPU when a job does not say; 0 when unknown.
    pub cpus_per_gpu: u32,
    pub mem_per_gpu_gib: u64,
}

/// One numbered line of the script.
struct ScriptLine {
    number: usize,
    text: String,
    bad: bool,
}

impl NewJobPage<'_> {
    /// The refused line numbers, comma-separated, for the page's script.
    fn bad_lines(&self) -> String {
        self.line_errors
            .iter()
            .map(|e| e.line.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The script's lines numbered from 1, those of `errors` marked.
fn numbered(script: &str, errors: &[LineError]) -> Vec<ScriptLine> {
    script
        .lines()
        .enumerate()
        .map(|(i, text)| ScriptLine {
            number: i + 1,
            text: text.to_string(),
            bad: errors.iter().any(|e| e.line == i + 1),
        })
        .collect()
}

#[derive(Deserialize)]
pub struct StarterQuery {
    starter: Option<String>,
    /// A job whose script fills the form ("edit as new").
    from: Option<String>,
    /// A script file of the user's ("submit as a job" in Files): its text fills the
    /// form, its folder is the working directory.
    file: Option<String>,
}

#[derive(Deserialize)]
pub struct SubmitForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    script: String,
    #[serde(default)]
    working_directory: String,
}

/// The cluster's GPU types, whole GPUs first, and its partitions, the default first,
/// for the fields; none when the scheduler cannot say.
async fn field_choices(state: &AppState) -> (Vec<String>, Vec<PartitionChoice>) {
    let Ok((nodes, partitions)) = state.cluster.nodes().await else {
        return (Vec::new(), Vec::new());
    };
    let mut types: Vec<String> = super::cluster_slices(&nodes)
        .into_keys()
        .filter(|t| t != "shard")
        .collect();
    types.sort_by_key(|t| (t.contains('.'), t.clone()));
    let configured = &state.config.cluster.partitions;
    let mut choices: Vec<PartitionChoice> = partitions
        .iter()
        .map(|p| {
            let section = configured.iter().find(|c| c.name == p.name);
            let max_secs = match p.max_time {
                scheduler::TimeLimit::Seconds(s) => s,
                scheduler::TimeLimit::Unlimited => 0,
            };
            PartitionChoice {
                name: p.name.clone(),
                default: p.default,
                max_secs,
                max_time: if max_secs == 0 {
                    String::new()
                } else {
                    p.max_time.to_string()
                },
                default_time: section
                    .and_then(|c| c.default_time.as_deref())
                    .and_then(|t| t.parse::<scheduler::TimeLimit>().ok())
                    .filter(|t| matches!(t, scheduler::TimeLimit::Seconds(_)))
                    .map(|t| t.to_string())
                    .unwrap_or_default(),
                cpus_per_gpu: section.map_or(0, |c| c.cpus_per_gpu),
                mem_per_gpu_gib: section.map_or(0, |c| c.mem_per_gpu_mb.div_ceil(1024)),
            }
        })
        .collect();
    choices.sort_by_key(|p| !p.default);
    (types, choices)
}

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    query: crate::http::query::Query<StarterQuery>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Jobs)?;
    let (gpu_types, partitions) = field_choices(&state).await;
    let starters = starters();
    let wanted = query.starter.as_deref().unwrap_or("");
    let chosen = starters.iter().find(|s| s.name == wanted);
    let mut error = (!wanted.is_empty() && chosen.is_none())
        .then_some("There is no starter script by that name.");
    // "Edit as new": the script of a job the caller may see, and where it was
    // submitted from.
    let mut from_job: Option<(String, String)> = None;
    if let Some(raw) = query.from.as_deref() {
        match super::parse_id(raw) {
            Some(job) => match state
                .jobs
                .script_of(&me, job)
                .await
                .map_err(PageError::from)
            {
                Ok(found) => from_job = Some(found),
                Err(PageError::NotFound) => {
                    error = Some("There is no job of yours by that number.")
                }
                Err(PageError::Invalid(m) | PageError::Refused { message: m, .. }) => {
                    return Err(ApiError::invalid("from", m))
                }
                Err(PageError::Failed(e)) => return Err(e),
            },
            None => error = Some("There is no job of yours by that number."),
        }
    }
    if let Some(path) = query.file.as_deref() {
        match state.files.read_text(&me, path).await {
            Ok(f) => {
                match f.text {
                    Some(text) => {
                        let dir = std::path::Path::new(&f.path)
                            .parent()
                            .map(|p| p.display().to_string())
                            .unwrap_or_default();
                        from_job = Some((text, dir));
                    }
                    None => error = Some(
                        "That file is not a script the form can take (not text, or over 1 MiB).",
                    ),
                }
            }
            Err(_) => error = Some("There is no file of yours by that name."),
        }
    }
    let (script, working_directory) = match (&from_job, chosen) {
        (Some((script, dir)), _) => (script.as_str(), dir.as_str()),
        (None, Some(s)) => (s.script.as_str(), ""),
        (None, None) => ("", ""),
    };
    render(
        &NewJobPage {
            nav: Nav::of(&me).at(crate::http::pages::Section::Jobs),
            starters: &starters,
            selected: chosen.map_or("", |s| s.name.as_str()),
            script,
            working_directory,
            error,
            line_errors: Vec::new(),
            lines: Vec::new(),
            gpu_types,
            partitions,
        },
        if error.is_some() {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        },
    )
}

pub async fn submit(
    state: web::Data<AppState>,
    user: PageUser,
    form: web::Form<SubmitForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    let form = form.into_inner();
    if !me.csrf_ok(Some(&form.csrf)) {
        return csrf_refused();
    }
    me.require(Scope::Jobs)?;
    // Browsers send a textarea's lines ending in CRLF; the shell wants LF.
    let script = normalize_newlines(&form.script);
    let working_directory = form.working_directory.trim();
    let request = SubmitJob {
        script: Some(script.clone().into_owned()),
        wrap: None,
        options: Default::default(),
        environment: Default::default(),
        working_directory: (!working_directory.is_empty()).then(|| working_directory.to_string()),
        arguments: Vec::new(),
        interactive: false,
        raw_terminal: false,
    };
    let mut line_errors = Vec::new();
    let (status, message) = match state.jobs.submit(&me, request).await {
        Ok(job) => {
            return Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, format!("/jobs/{job}")))
                .finish())
        }
        // Every wrong directive marked on its line: the service's own account.
        Err(ServiceError::InvalidLines { errors, .. }) => {
            let message = match errors.len() {
                1 => "One directive of the script is wrong; it is marked below.".to_string(),
                n => format!("{n} directives of the script are wrong; they are marked below."),
            };
            line_errors = errors;
            (StatusCode::BAD_REQUEST, message)
        }
        // A refused option, in plain words with what to do (the scheduler's
        // refusals: a partition, a time limit, what can never run).
        Err(e @ (ServiceError::Invalid { .. } | ServiceError::InvalidPath { .. })) => {
            (StatusCode::BAD_REQUEST, reasons::refusal(&e.to_string()))
        }
        Err(ServiceError::Forbidden(m) | ServiceError::QuotaExceeded(m)) => {
            (StatusCode::FORBIDDEN, reasons::refusal(&m))
        }
        Err(ServiceError::Conflict(m)) => (StatusCode::CONFLICT, reasons::refusal(&m)),
        Err(ServiceError::Full(m)) => (StatusCode::TOO_MANY_REQUESTS, m),
        Err(ServiceError::Unavailable(cause)) => {
            tracing::warn!(%cause, "job submission from the page failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "The scheduler is not available; try again shortly.".to_string(),
            )
        }
        Err(other) => return Err(other.into()),
    };
    let (gpu_types, partitions) = field_choices(&state).await;
    let starters = starters();
    render(
        &NewJobPage {
            nav: Nav::of(&me).at(crate::http::pages::Section::Jobs),
            starters: &starters,
            selected: "",
            script: &script,
            working_directory,
            error: Some(&message),
            lines: numbered(&script, &line_errors),
            line_errors,
            gpu_types,
            partitions,
        },
        status,
    )
}

fn normalize_newlines(text: &str) -> Cow<'_, str> {
    if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    #[test]
    fn starters_are_embedded_with_directives_and_titles() {
        let all = starters();
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "array",
                "fio-randread",
                "fio-seqread",
                "gpu-check",
                "hello",
                "nccl-allreduce",
                "resnet50-synthetic"
            ]
        );
        for s in &all {
            assert!(s.script.starts_with("#!"), "{}", s.name);
            assert!(s.script.contains("\n#SBATCH "), "{}", s.name);
            assert!(!s.title.is_empty() && s.title != s.name, "{}", s.name);
            let parsed = crate::sched::submission::build(
                Some(&s.script),
                None,
                &Default::default(),
                Default::default(),
                None,
                &Default::default(),
            );
            let benchmark = parsed
                .unwrap_or_else(|e| panic!("{}: {e}", s.name))
                .benchmark;
            let is_benchmark = ["fio-", "nccl-", "resnet50-"]
                .iter()
                .any(|p| s.name.starts_with(p));
            assert_eq!(benchmark.is_some(), is_benchmark, "{}", s.name);
        }
    }

    #[test]
    fn header_title_skips_shebang_and_directives() {
        assert_eq!(
            header_title("#!/bin/bash\n#SBATCH -J x\n#\n# Say hello\n# more\n"),
            Some("Say hello")
        );
        assert_eq!(header_title("#!/bin/sh\necho\n"), None);
    }

    #[test]
    fn crlf_from_browsers_becomes_lf() {
        assert_eq!(normalize_newlines("a\r\nb\r\n"), "a\nb\n");
        assert!(matches!(normalize_newlines("a\nb"), Cow::Borrowed(_)));
    }

    #[test]
    fn form_renders_starters_and_keeps_the_script_escaped() {
        let starters = starters();
        let html = NewJobPage {
            nav: nav(),
            starters: &starters,
            selected: "hello",
            script: "#!/bin/sh\necho '</textarea><script>x</script>'\n",
            working_directory: "/tmp/<w>",
            error: Some("script: line 2: bad <directive>"),
            line_errors: Vec::new(),
            lines: Vec::new(),
            gpu_types: vec!["a100".into(), "1g.10gb".into()],
            partitions: Vec::new(),
        }
        .render()
        .expect("render");
        assert!(html.contains("name=\"csrf\" value=\"tok\""), "{html}");
        assert!(html.contains("<option value=\"hello\" selected"), "{html}");
        assert!(html.contains("<option value=\"gpu-check\""), "{html}");
        assert!(
            html.contains("&#60;/textarea&#62;&#60;script&#62;"),
            "{html}"
        );
        assert!(!html.contains("<script>x"), "{html}");
        assert!(html.contains("value=\"/tmp/&#60;w&#62;\""), "{html}");
        assert!(html.contains("bad &#60;directive&#62;"), "{html}");
        assert!(html.contains("src=\"/static/js/job-submit.js\""), "{html}");
    }

    #[test]
    fn refused_directives_are_listed_and_their_lines_marked() {
        let starters = starters();
        let script = "#!/bin/sh\n#SBATCH -N two\n#SBATCH --time=soon\n#SBATCH -J <x>\ntrue\n";
        let line_errors = vec![
            LineError {
                line: 2,
                directive: "-N".into(),
                message: "expected a positive number, got \"two\"".into(),
            },
            LineError {
                line: 3,
                directive: "--time".into(),
                message: "expected a time".into(),
            },
        ];
        let html = NewJobPage {
            nav: nav(),
            starters: &starters,
            selected: "",
            script,
            working_directory: "",
            error: Some("2 directives of the script are wrong; they are marked below."),
            lines: numbered(script, &line_errors),
            line_errors,
            gpu_types: Vec::new(),
            partitions: Vec::new(),
        }
        .render()
        .expect("render");
        assert!(
            html.contains("<li><a href=\"#script-line-2\">Line 2</a>: <code>-N</code>: expected a positive number, got &#34;two&#34;</li>"),
            "{html}"
        );
        assert!(
            html.contains("<a href=\"#script-line-3\">Line 3</a>"),
            "{html}"
        );
        assert!(
            html.contains("<li id=\"script-line-2\" class=\"bad\" aria-invalid=\"true\">"),
            "{html}"
        );
        assert!(
            html.contains("<li id=\"script-line-3\" class=\"bad\""),
            "{html}"
        );
        assert!(
            html.contains("<li id=\"script-line-4\"><code>#SBATCH -J &#60;x&#62;</code>"),
            "{html}"
        );
        assert!(html.contains("data-bad-lines=\"2,3\""), "{html}");
        assert!(!html.contains("line 2: line 2"), "{html}");
    }
}
