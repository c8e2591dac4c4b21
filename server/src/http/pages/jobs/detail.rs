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
use crate::services::efficiency::Efficiency;
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
    /// What it used of what it was given, once sampled.
    usage: Option<UsageView>,
}

/// The job's efficiency as the page shows it: `seff`'s figures and a small chart
/// per resource.
struct UsageView {
    facts: Vec<(&'static str, String)>,
    charts: Vec<Spark>,
    final_figures: bool,
}

/// One resource over the run, as an SVG polyline in a [`SPARK_W`] × [`SPARK_H`] box.
struct Spark {
    id: &'static str,
    title: String,
    points: String,
}

const SPARK_W: f64 = 480.0;
const SPARK_H: f64 = 60.0;

/// `(t, value)` pairs scaled to the chart's box, `top` at its top.
fn spark(values: &[(u32, f64)], top: f64, end: u32) -> String {
    let end = f64::from(end.max(1));
    let top = if top > 0.0 { top } else { 1.0 };
    values
        .iter()
        .map(|&(t, v)| {
            let x = f64::from(t) / end * SPARK_W;
            let y = SPARK_H - (v / top).clamp(0.0, 1.0) * SPARK_H;
            format!("{x:.1},{y:.1}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn usage_view(e: &Efficiency) -> Option<UsageView> {
    e.source.as_ref()?;
    let mut facts = Vec::new();
    if let Some(cpu) = e.cpu_seconds {
        let pct = e
            .cpu_efficiency_percent
            .map_or(String::new(), |p| format!(": {p:.1} % of its cores × time"));
        facts.push(("CPU used", format!("{}{pct}", duration(cpu.round() as u64))));
    }
    if let Some(rss) = e.max_rss_bytes {
        let pct = e
            .memory_efficiency_percent
            .map_or(String::new(), |p| format!(": {p:.1} % of its request"));
        facts.push(("Peak memory", format!("{} MiB{pct}", rss >> 20)));
    }
    if let Some(u) = e.gpu_utilization_percent {
        facts.push(("GPU utilisation", format!("{u:.1} % on average")));
    }
    if let Some(idle) = e.gpu_idle_seconds {
        facts.push(("GPU idle", duration(idle.round() as u64)));
    }
    let mut charts = Vec::new();
    if let Some(series) = &e.series {
        let end = series.points.last().map_or(1, |p| p.t);
        let cores = e.cpus.unwrap_or(1) as f64;
        let cpu: Vec<(u32, f64)> = series
            .points
            .iter()
            .map(|p| (p.t, f64::from(p.cpu)))
            .collect();
        charts.push(Spark {
            id: "usage-cpu",
            title: format!("CPU cores busy (of {cores})"),
            points: spark(&cpu, cores, end),
        });
        let mem_top = e
            .memory_requested_bytes
            .map_or(0.0, |b| (b >> 20) as f64)
            .max(
                series
                    .points
                    .iter()
                    .map(|p| f64::from(p.rss_mib))
                    .fold(0.0, f64::max),
            );
        let mem: Vec<(u32, f64)> = series
            .points
            .iter()
            .map(|p| (p.t, f64::from(p.rss_mib)))
            .collect();
        charts.push(Spark {
            id: "usage-memory",
            title: format!("Memory, MiB (of {mem_top:.0})"),
            points: spark(&mem, mem_top, end),
        });
        let gpu: Vec<(u32, f64)> = series
            .points
            .iter()
            .filter_map(|p| Some((p.t, f64::from(p.gpu?))))
            .collect();
        if !gpu.is_empty() {
            charts.push(Spark {
                id: "usage-gpu",
                title: "GPU utilisation, % (of 100)".into(),
                points: spark(&gpu, 100.0, end),
            });
        }
    }
    Some(UsageView {
        facts,
        charts,
        final_figures: e.complete,
    })
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
    let usage = state
        .jobs
        .efficiency_of(&info)
        .await
        .map_err(ApiError::from)?;
    render(
        &JobPage {
            nav: Nav::of(me).at(crate::http::pages::Section::Jobs),
            time_used: duration(info.time_used),
            time_limit: time_limit(info.time_limit),
            exit: exit_text(info.exit_code, info.signal),
            active: is_active(&info.state),
            job: info,
            output,
            output_error,
            notice,
            usage: usage_view(&usage),
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
            usage: None,
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
        let mut samples = crate::launch::usage::Usage::new(0, 30);
        for (i, util) in [(1, 90), (2, 5)] {
            samples.record(&crate::launch::usage::Sample {
                at_ms: i * 30_000,
                cpu_seconds: i as f64 * 30.0,
                rss_bytes: 512 << 20,
                gpus: vec![crate::launch::usage::GpuSample {
                    index: 0,
                    utilization_percent: Some(util),
                    ..Default::default()
                }],
            });
        }
        samples.finish(60_000, 60.0, 0);
        let usage = usage_view(&crate::services::efficiency::efficiency(
            &job,
            Some(&samples),
        ));
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
            usage,
        }
        .render()
        .expect("render");
        // The efficiency: figures, and a chart per resource with the GPU's.
        assert!(html.contains("<dt>Peak memory</dt><dd>512 MiB"), "{html}");
        assert!(
            html.contains("<dt>GPU idle</dt><dd>00:00:30</dd>"),
            "{html}"
        );
        assert!(
            html.contains("<polyline points=\"240.0,6.0 480.0,57.0\""),
            "GPU at 90 % then 5 %: {html}"
        );
        assert!(html.contains("over its whole run"), "{html}");
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
