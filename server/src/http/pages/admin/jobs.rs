//! `GET /admin/jobs`: every user's pending and running jobs (from the scheduler)
//! and the latest ended ones (from the database); `POST /admin/jobs/{id}/cancel`.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{see_other, AdminPost, AdminUser};
use crate::auth::Principal;
use crate::http::pages::jobs::{parse_id, JobRow, PageQuery, Pager};
use crate::http::pages::{not_found_page, render, CsrfForm, Nav};
use crate::http::{ApiError, AppState};
use crate::services::jobs::JobAction;

/// How many ended jobs the page lists.
const RECENT: i64 = 50;

#[derive(Template)]
#[template(path = "admin/jobs.html")]
struct JobsPage {
    nav: Nav,
    queue: Vec<JobRow>,
    pager: Pager,
    recent: Vec<JobRow>,
    /// Why the last cancel was refused.
    notice: Option<String>,
}

async fn jobs_page(
    state: &AppState,
    admin: &Principal,
    notice: Option<String>,
    status: StatusCode,
    query: &PageQuery,
) -> Result<HttpResponse, ApiError> {
    let queue_page = query.queue_page();
    let (queue, total, recent) = state.jobs.board(admin, true, RECENT, queue_page).await?;
    let page = JobsPage {
        nav: Nav::of(admin).at(crate::http::pages::Section::Admin),
        queue: queue.into_iter().map(JobRow::from).collect(),
        pager: Pager::new("/admin/jobs", queue_page, total),
        recent: recent.into_iter().map(JobRow::from).collect(),
        notice,
    };
    render(&page, status)
}

pub async fn show(
    state: web::Data<AppState>,
    admin: AdminUser,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    jobs_page(&state, &admin.0, None, StatusCode::OK, &query).await
}

pub async fn cancel(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    post: AdminPost<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let admin = post.admin;
    let Some(job) = parse_id(&id) else {
        return not_found_page();
    };
    let cancelled = state
        .jobs
        .control(&admin, &state.client_addr(&req), job, JobAction::Cancel)
        .await
        .map_err(ApiError::from);
    match cancelled {
        Ok(_) => Ok(see_other("/admin/jobs")),
        Err(ApiError::NotFound) => not_found_page(),
        Err(ApiError::Conflict(m) | ApiError::BadRequest(m)) => {
            jobs_page(
                &state,
                &admin,
                Some(m),
                StatusCode::CONFLICT,
                &PageQuery { page: None },
            )
            .await
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::jobs::queue::tests::row as queue_row;
    use crate::http::pages::tests::nav;

    fn row(id: &str, user: &str, state: &str) -> JobRow {
        JobRow {
            user: user.into(),
            ..queue_row(id, "<train>", state)
        }
    }

    #[test]
    fn everyones_jobs_have_cancel_buttons() {
        let html = JobsPage {
            nav: nav(),
            queue: vec![row("5", "bob", "RUNNING")],
            pager: Pager::new(
                "/admin/jobs",
                crate::services::jobs::QueuePage {
                    number: 2,
                    per_page: 1,
                },
                3,
            ),
            recent: vec![row("4", "cy", "COMPLETED")],
            notice: Some("Job 3 is already over".into()),
        }
        .render()
        .expect("render");
        assert!(html.contains("action=\"/admin/jobs/5/cancel\""), "{html}");
        assert!(!html.contains("/admin/jobs/4/cancel"), "{html}");
        assert!(
            html.contains("<td>bob</td>") && html.contains("<td>cy</td>"),
            "{html}"
        );
        assert!(html.contains("&#60;train&#62;"), "{html}");
        assert!(html.contains("Job 3 is already over"), "{html}");
        assert!(
            html.contains("href=\"/admin/jobs?page=1\" rel=\"prev\""),
            "{html}"
        );
        assert!(
            html.contains("href=\"/admin/jobs?page=3\" rel=\"next\""),
            "{html}"
        );
        assert!(html.contains("Page 2 of 3 (3 jobs)"), "{html}");
    }
}
