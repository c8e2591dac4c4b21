//! `GET /admin/jobs`: every user's pending and running jobs (from the scheduler)
//! and the latest ended ones (from the database), with the job lists' filters and
//! live refresh (`GET /admin/jobs/rows`, as `/jobs/rows`); `POST
//! /admin/jobs/{id}/cancel`.

use crate::http::pages::PageError;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{see_other, AdminPost, AdminUser};
use crate::auth::Principal;
use crate::http::pages::jobs::detail::CancelForm;
use crate::http::pages::jobs::filters::{FilterForm, STATES};
use crate::http::pages::jobs::parse_id;
use crate::http::pages::jobs::queue::{lists, read_query, ListQuery, Lists, RowsFragment};
use crate::http::pages::when::filters;
use crate::http::pages::{not_found_page, render, Nav};
use crate::http::{ApiError, AppState};
use crate::services::jobs::JobAction;

/// How many ended jobs the page lists.
const RECENT: i64 = 50;

#[derive(Template)]
#[template(path = "admin/jobs.html")]
struct JobsPage {
    nav: Nav,
    form: FilterForm,
    states: &'static [&'static str],
    list_path: &'static str,
    rows_path: &'static str,
    lists: Lists,
    /// Why the last cancel was refused.
    notice: Option<String>,
}

async fn jobs_page(
    state: &AppState,
    admin: &Principal,
    notice: Option<String>,
    status: StatusCode,
    query: ListQuery,
) -> Result<HttpResponse, ApiError> {
    let lists = lists(state, admin, true, RECENT, "/admin/jobs", &query).await?;
    let page = JobsPage {
        nav: Nav::of(admin).at(crate::http::pages::Section::Admin),
        form: query.form,
        states: &STATES,
        list_path: "/admin/jobs",
        rows_path: "/admin/jobs/rows",
        lists,
        notice,
    };
    render(&page, status)
}

pub async fn show(
    state: web::Data<AppState>,
    admin: AdminUser,
    query: crate::http::query::Query<Vec<(String, String)>>,
) -> Result<HttpResponse, ApiError> {
    let query = match read_query(&query) {
        Ok(q) => q,
        Err(response) => return Ok(*response),
    };
    jobs_page(&state, &admin.0, None, StatusCode::OK, query).await
}

/// `GET /admin/jobs/rows`: the lists alone, for the live refresh.
pub async fn rows(
    state: web::Data<AppState>,
    admin: AdminUser,
    query: crate::http::query::Query<Vec<(String, String)>>,
) -> Result<HttpResponse, ApiError> {
    let query = match read_query(&query) {
        Ok(q) => q,
        Err(response) => return Ok(*response),
    };
    let lists = lists(&state, &admin.0, true, RECENT, "/admin/jobs", &query).await?;
    render(&RowsFragment { lists }, StatusCode::OK)
}

impl super::CsrfField for CancelForm {
    fn csrf(&self) -> &str {
        &self.csrf
    }
}

pub async fn cancel(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<String>,
    post: AdminPost<CancelForm>,
) -> Result<HttpResponse, ApiError> {
    let admin = post.admin;
    let Some(job) = parse_id(&id) else {
        return not_found_page();
    };
    let cancelled = state
        .jobs
        .control_because(
            &admin,
            &state.client_addr(&req),
            job,
            JobAction::Cancel,
            &post.form.reason,
        )
        .await
        .map_err(PageError::from);
    let (message, status) = match cancelled {
        Ok(_) => return Ok(see_other("/admin/jobs")),
        Err(PageError::NotFound) => return not_found_page(),
        Err(PageError::Failed(e)) => return Err(e),
        Err(PageError::Invalid(m)) => (m, StatusCode::BAD_REQUEST),
        Err(PageError::Refused { message, .. }) => (message, StatusCode::CONFLICT),
    };
    let query = match read_query(&[]) {
        Ok(q) => q,
        Err(response) => return Ok(*response),
    };
    jobs_page(&state, &admin, Some(message), status, query).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::jobs::queue::tests::row as queue_row;
    use crate::http::pages::jobs::JobRow;
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
            form: FilterForm::default(),
            states: &STATES,
            list_path: "/admin/jobs",
            rows_path: "/admin/jobs/rows",
            lists: Lists {
                queue: vec![row("5", "bob", "RUNNING")],
                pager: crate::http::pages::jobs::Pager::new(
                    "/admin/jobs",
                    crate::services::jobs::QueuePage {
                        number: 2,
                        per_page: 1,
                    },
                    3,
                ),
                recent: vec![row("4", "cy", "COMPLETED")],
                filtered: false,
                everyone: true,
                csrf: "tok".into(),
            },
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
        assert!(
            html.contains("action=\"/admin/jobs\""),
            "the filters: {html}"
        );
        assert!(
            html.contains("data-rows=\"/admin/jobs/rows?page=2\""),
            "{html}"
        );
    }
}
