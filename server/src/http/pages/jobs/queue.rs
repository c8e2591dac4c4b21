//! `GET /jobs`: my queue (pending and running, from the scheduler) and my recent
//! jobs that are over (from the database).

use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use askama::Template;

use super::{JobRow, PageQuery, Pager};
use crate::auth::Scope;
use crate::http::authn::PageUser;
use crate::http::pages::{render, Nav};
use crate::http::{ApiError, AppState};

/// How many ended jobs the page lists.
const RECENT: i64 = 20;

#[derive(Template)]
#[template(path = "jobs/queue.html")]
struct QueuePage {
    nav: Nav,
    queue: Vec<JobRow>,
    pager: Pager,
    recent: Vec<JobRow>,
}

pub async fn show(
    state: web::Data<AppState>,
    user: PageUser,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    let me = user.0;
    me.require(Scope::Read)?;
    let page = query.queue_page();
    let (queue, total, recent) = state.jobs.board(&me, false, RECENT, page).await?;
    let queue = queue.into_iter().map(JobRow::from).collect();
    let recent = recent.into_iter().map(JobRow::from).collect();
    render(
        &QueuePage {
            nav: Nav::of(&me).at(crate::http::pages::Section::Jobs),
            queue,
            pager: Pager::new("/jobs", page, total),
            recent,
        },
        StatusCode::OK,
    )
}

#[cfg(test)]
pub(in crate::http::pages) mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    /// A job of alice's for render tests.
    pub fn row(id: &str, name: &str, state: &str) -> JobRow {
        JobRow {
            id: id.into(),
            display_id: id.into(),
            user: "alice".into(),
            name: name.into(),
            partition: "gpu".into(),
            state: state.into(),
            reason: if state == "PENDING" {
                "Resources".into()
            } else {
                String::new()
            },
            submit_time: "2026-01-02T03:04:05Z".into(),
            time_used: "00:00:07".into(),
            time_limit: "01:00:00".into(),
            nodelist: "node1".into(),
            gres: "gpu:1".into(),
            exit_code: if state == "COMPLETED" {
                "0".into()
            } else {
                String::new()
            },
        }
    }

    fn one_page(total: u64) -> Pager {
        Pager::new(
            "/jobs",
            crate::services::jobs::QueuePage {
                number: 1,
                per_page: super::super::QUEUE_PAGE,
            },
            total,
        )
    }

    #[test]
    fn queue_page_lists_both_tables_and_escapes_names() {
        let html = QueuePage {
            nav: nav(),
            queue: vec![row("7", "<script>alert(1)</script>", "PENDING")],
            pager: one_page(1),
            recent: vec![row("3", "done", "COMPLETED")],
        }
        .render()
        .expect("render");
        assert!(html.contains("href=\"/jobs/new\""), "{html}");
        assert!(html.contains("href=\"/jobs/7\""), "{html}");
        assert!(html.contains("Resources"), "{html}");
        assert!(html.contains("href=\"/jobs/3\""), "{html}");
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{html}"
        );
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(!html.contains("queue-pages"), "one page: no pager");
    }

    #[test]
    fn empty_queue_says_so() {
        let html = QueuePage {
            nav: nav(),
            queue: vec![],
            pager: one_page(0),
            recent: vec![],
        }
        .render()
        .expect("render");
        assert!(html.contains("id=\"queue-empty\""), "{html}");
    }
}
