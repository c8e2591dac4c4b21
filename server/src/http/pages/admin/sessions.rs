//! `GET /admin/sessions`: every user's sessions that have not ended; `POST
//! /admin/sessions/{id}/stop`.

use crate::http::pages::PageError;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{see_other, AdminPost, AdminUser};
use crate::http::pages::sessions::SessionRow;
use crate::http::pages::{not_found_page, render, CsrfForm, Nav};
use crate::http::{ApiError, AppState};

#[derive(Template)]
#[template(path = "admin/sessions.html")]
struct SessionsPage {
    nav: Nav,
    sessions: Vec<SessionRow>,
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    let sessions = state
        .sessions
        .running()
        .await?
        .into_iter()
        .map(SessionRow::of)
        .collect();
    let page = SessionsPage {
        nav: Nav::of(&admin.0).at(crate::http::pages::Section::Admin),
        sessions,
    };
    render(&page, StatusCode::OK)
}

pub async fn stop(
    req: HttpRequest,
    state: web::Data<AppState>,
    id: web::Path<i64>,
    post: AdminPost<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let stopped = state
        .sessions
        .stop_as(&post.admin, &state.client_addr(&req), id.into_inner())
        .await
        .map_err(PageError::from);
    match stopped {
        Ok(()) => Ok(see_other("/admin/sessions")),
        Err(PageError::NotFound) => not_found_page(),
        Err(PageError::Invalid(message) | PageError::Refused { message, .. }) => {
            Err(ApiError::Conflict(message))
        }
        Err(PageError::Failed(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::sessions::tests::info;
    use crate::http::pages::tests::nav;

    #[test]
    fn everyones_sessions_have_stop_buttons() {
        let html = SessionsPage {
            nav: nav(),
            sessions: vec![SessionRow::of(info("ready", true))],
        }
        .render()
        .expect("render");
        assert!(html.contains("action=\"/admin/sessions/7/stop\""), "{html}");
        assert!(html.contains("<td>alice</td>"), "{html}");
        assert!(html.contains("&#60;b&#62;nb&#60;/b&#62;"), "{html}");
        assert!(html.contains("1 h 02 min"), "{html}");
    }
}
