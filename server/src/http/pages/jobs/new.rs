//! `GET /jobs/new` and `POST /jobs`: the submission form. A script is pasted or
//! taken from a starter (`templates/starters/jobs/*.sh`, embedded in the binary);
//! it goes through the job API's one submission path.

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
use crate::services::jobs::SubmitJob;

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
}

#[derive(Deserialize)]
pub struct StarterQuery {
    starter: Option<String>,
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

pub async fn show(
    user: PageUser,
    query: web::Query<StarterQuery>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Jobs)?;
    let starters = starters();
    let wanted = query.starter.as_deref().unwrap_or("");
    let chosen = starters.iter().find(|s| s.name == wanted);
    let error = (!wanted.is_empty() && chosen.is_none())
        .then_some("There is no starter script by that name.");
    render(
        &NewJobPage {
            nav: Nav::of(&me).at(crate::http::pages::Section::Jobs),
            starters: &starters,
            selected: chosen.map_or("", |s| s.name.as_str()),
            script: chosen.map_or("", |s| s.script.as_str()),
            working_directory: "",
            error,
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
    };
    let (status, message) = match state
        .jobs
        .submit(&me, request)
        .await
        .map_err(ApiError::from)
    {
        Ok(job) => {
            return Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, format!("/jobs/{job}")))
                .finish())
        }
        Err(ApiError::BadRequest(m)) => (StatusCode::BAD_REQUEST, m),
        Err(e @ ApiError::InvalidField { .. }) => (StatusCode::BAD_REQUEST, e.to_string()),
        Err(ApiError::Forbidden(m)) => (StatusCode::FORBIDDEN, m),
        Err(ApiError::Conflict(m)) => (StatusCode::CONFLICT, m),
        Err(ApiError::Unavailable(cause)) => {
            tracing::warn!(%cause, "job submission from the page failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "The scheduler is not available; try again shortly.".to_string(),
            )
        }
        Err(other) => return Err(other),
    };
    let starters = starters();
    render(
        &NewJobPage {
            nav: Nav::of(&me).at(crate::http::pages::Section::Jobs),
            starters: &starters,
            selected: "",
            script: &script,
            working_directory,
            error: Some(&message),
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
}
