//! `GET /admin/idle-gpus`: the jobs of the last week that held GPUs idle longest
//! (their GPUs under 10 % busy), from what their step supervisors sampled.

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;

use super::AdminUser;
use crate::http::pages::jobs::duration;
use crate::http::pages::{render, Nav};
use crate::http::{ApiError, AppState};
use crate::services::efficiency::{IdleGpus, IDLE_GPU_JOBS};

#[derive(Template)]
#[template(path = "admin/idle_gpus.html")]
struct IdleGpusPage {
    nav: Nav,
    jobs: Vec<IdleRow>,
    most: i64,
    /// Some GPU reported its utilisation this week.
    measured: bool,
}

struct IdleRow {
    job: IdleGpus,
    idle: String,
    utilisation: String,
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    let jobs = state
        .jobs
        .idle_gpus(&admin.0)
        .await?
        .into_iter()
        .map(|job| IdleRow {
            idle: duration(job.idle_seconds.round() as u64),
            utilisation: job
                .gpu_utilization_percent
                .map_or("n/a".into(), |u| format!("{u:.1} %")),
            job,
        })
        .collect();
    let measured = state.jobs.gpu_utilisation_measured().await?;
    render(
        &IdleGpusPage {
            nav: Nav::of(&admin.0).at(crate::http::pages::Section::Admin),
            jobs,
            most: IDLE_GPU_JOBS,
            measured,
        },
        StatusCode::OK,
    )
}
