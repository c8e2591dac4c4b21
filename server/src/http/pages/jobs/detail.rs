//! `GET /jobs/{id}`: one job with the last part of its output (followed live by
//! `frontend/js/job-output.js`), and `POST /jobs/{id}/cancel`.
//!
//! Who may see or cancel a job is the job API's and the scheduler's decision:
//! another user's job answers "not found" there, and a 404 page here.

use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use scheduler::JobId;

use super::{duration, exit_text, is_active, parse_id, time_limit};
use crate::auth::{Principal, Scope};
use crate::http::authn::PageUser;
use crate::http::pages::{csrf_refused, not_found_page, render, CsrfForm, Nav};
use crate::http::{ApiError, AppState};
use crate::services::jobs::{JobAction, JobInfo};
use crate::services::output::Tail;

/// How much output the page shows before the live tail takes over.
const TAIL_BYTES: u64 = 64 * 1024;

#[derive(Template)]
#[template(path = "jobs/show.html")]
struct JobPage {
    nav: Nav,
    job: JobInfo,
    time_used: String,
    time_limit: String,
    exit: String,
    /// Pending or running: it may be cancelled and its output followed.
    active: bool,
    output: Option<Tail>,
    /// Why the output cannot be shown.
    output_error: Option<String>,
    /// The outcome of an action on this page (a refused cancel).
    notice: Option<String>,
}

impl JobPage {
    /// Where the live tail starts reading.
    fn follow_offset(&self) -> u64 {
        self.output.as_ref().map_or(0, |t| t.next_offset)
    }
}

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let Some(job) = parse_id(&id) else {
        return not_found_page();
    };
    job_page(&state, &me, job, None, StatusCode::OK).await
}

async fn job_page(
    state: &AppState,
    me: &Principal,
    job: JobId,
    notice: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let info = match state.jobs.show(me, job).await.map_err(ApiError::from) {
        Ok(info) => info,
        Err(ApiError::NotFound) => return not_found_page(),
        Err(e) => return Err(e),
    };
    let (output, output_error) = match state
        .jobs
        .tail(&info, TAIL_BYTES)
        .await
        .map_err(ApiError::from)
    {
        Ok(tail) => (tail, None),
        Err(ApiError::Forbidden(m)) => (None, Some(m)),
        Err(ApiError::NotFound) => (
            None,
            Some(
                "The job's owner has no POSIX identity, so its output cannot be read.".to_string(),
            ),
        ),
        Err(e) => return Err(e),
    };
    render(
        &JobPage {
            nav: Nav::of(me),
            time_used: duration(info.time_used),
            time_limit: time_limit(info.time_limit),
            exit: exit_text(info.exit_code, info.signal),
            active: is_active(&info.state),
            job: info,
            output,
            output_error,
            notice,
        },
        status,
    )
}

pub async fn cancel(
    req: HttpRequest,
    state: web::Data<AppState>,
    user: PageUser,
    id: web::Path<String>,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    if !me.csrf_ok(Some(&form.csrf)) {
        return csrf_refused();
    }
    me.require(Scope::Jobs)?;
    let Some(job) = parse_id(&id) else {
        return not_found_page();
    };
    let cancelled = state
        .jobs
        .control(&me, &state.client_addr(&req), job, JobAction::Cancel)
        .await
        .map_err(ApiError::from);
    match cancelled {
        Ok(_) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, format!("/jobs/{job}")))
            .finish()),
        Err(ApiError::NotFound) => not_found_page(),
        Err(ApiError::Conflict(m) | ApiError::BadRequest(m)) => {
            job_page(&state, &me, job, Some(m), StatusCode::CONFLICT).await
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    fn info(state: &str) -> JobInfo {
        JobInfo {
            id: "42".into(),
            job_id: 42,
            array_task_id: None,
            display_id: "42".into(),
            name: "<script>alert(1)</script>".into(),
            user: "alice".into(),
            account: "alice".into(),
            partition: "gpu".into(),
            state: state.into(),
            state_code: "R".into(),
            reason: None,
            priority: Some(1),
            submit_time: "2026-01-02T03:04:05Z".into(),
            start_time: Some("2026-01-02T03:04:06Z".into()),
            end_time: None,
            time_limit: Some(3600),
            time_used: 65,
            nodes: 1,
            nodelist: "node1".into(),
            gres: "gpu:1".into(),
            cpus: Some(2),
            memory_mb: Some(4096),
            cuda_visible_devices: Some("0".into()),
            exit_code: None,
            signal: None,
            workdir: Some("/home/alice".into()),
            stdout: Some("/home/alice/slurm-42.out".into()),
            stderr: None,
            message: None,
            restarts: 0,
            benchmark: None,
            benchmark_note: None,
            ignored: vec![scheduler::IgnoredOption {
                option: "--threads-per-core=1".into(),
                reason: "nodes are described by their CPUs".into(),
            }],
            steps: Vec::new(),
        }
    }

    fn page(state: &str, output: Option<Tail>) -> String {
        let job = info(state);
        JobPage {
            nav: nav(),
            time_used: duration(job.time_used),
            time_limit: time_limit(job.time_limit),
            exit: exit_text(job.exit_code, job.signal),
            active: is_active(state),
            job,
            output,
            output_error: None,
            notice: None,
        }
        .render()
        .expect("render")
    }

    #[test]
    fn running_job_shows_details_output_and_cancel() {
        let html = page(
            "RUNNING",
            Some(Tail {
                text: "step 1 <ok>\n".into(),
                next_offset: 12,
                truncated: false,
            }),
        );
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{html}"
        );
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("CUDA_VISIBLE_DEVICES"), "{html}");
        assert!(html.contains("/home/alice/slurm-42.out"), "{html}");
        assert!(html.contains("00:01:05"), "{html}");
        assert!(html.contains("step 1 &#60;ok&#62;"), "{html}");
        assert!(html.contains("data-offset=\"12\""), "{html}");
        assert!(html.contains("data-follow=\"true\""), "{html}");
        assert!(html.contains("action=\"/jobs/42/cancel\""), "{html}");
        assert!(html.contains("name=\"csrf\" value=\"tok\""), "{html}");
        assert!(html.contains("src=\"/static/js/job-output.js\""), "{html}");
        assert!(
            html.contains("<code>--threads-per-core=1</code>: nodes are described by their CPUs"),
            "{html}"
        );
    }

    #[test]
    fn ended_job_has_no_cancel_button_and_is_not_followed() {
        let mut job = info("COMPLETED");
        job.exit_code = Some(3);
        job.message = Some("exited <3>".into());
        let html = JobPage {
            nav: nav(),
            time_used: duration(job.time_used),
            time_limit: time_limit(job.time_limit),
            exit: exit_text(job.exit_code, job.signal),
            active: false,
            job,
            output: None,
            output_error: Some("not a regular file".into()),
            notice: Some("Job 42 is already over".into()),
        }
        .render()
        .expect("render");
        assert!(!html.contains("/jobs/42/cancel"), "{html}");
        assert!(html.contains("data-follow=\"false\""), "{html}");
        assert!(html.contains("id=\"job-exit-code\">3<"), "{html}");
        assert!(html.contains("exited &#60;3&#62;"), "{html}");
        assert!(html.contains("not a regular file"), "{html}");
        assert!(html.contains("Job 42 is already over"), "{html}");
    }

    #[test]
    fn pending_job_waits_for_output() {
        let html = page("PENDING", None);
        assert!(html.contains("data-follow=\"true\""), "{html}");
        assert!(html.contains("data-offset=\"0\""), "{html}");
        assert!(html.contains("action=\"/jobs/42/cancel\""), "{html}");
    }
}
