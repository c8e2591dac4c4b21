//! `GET /admin/users`: every account with what it runs and uses; `POST
//! /admin/users/{name}/disable|enable`.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{see_other, AdminPost, AdminUser};
use crate::auth::Principal;
use crate::http::pages::{not_found_page, render, CsrfForm, Nav};
use crate::http::{ApiError, AppState};
use crate::services::accounts::UserInfo;

#[derive(Template)]
#[template(path = "admin/users.html")]
struct UsersPage {
    nav: Nav,
    users: Vec<UserInfo>,
    period: String,
    /// Why the last change was refused.
    error: Option<String>,
}

async fn users_page(
    state: &AppState,
    admin: &Principal,
    error: Option<String>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let page = UsersPage {
        nav: Nav::of(admin),
        users: state.accounts.users().await?,
        period: state.quotas.period_name(),
        error,
    };
    render(&page, status)
}

pub async fn show(state: web::Data<AppState>, admin: AdminUser) -> Result<HttpResponse, ApiError> {
    users_page(&state, &admin.0, None, StatusCode::OK).await
}

pub async fn act(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    post: AdminPost<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let admin = post.admin;
    let (name, action) = path.into_inner();
    let disabled = match action.as_str() {
        "disable" => true,
        "enable" => false,
        _ => return not_found_page(),
    };
    let changed = state
        .accounts
        .set_disabled(&admin, &state.client_addr(&req), &name, disabled)
        .await
        .map_err(ApiError::from);
    match changed {
        Ok(_) => Ok(see_other("/admin/users")),
        Err(ApiError::NotFound) => not_found_page(),
        Err(ApiError::Conflict(m)) => {
            users_page(&state, &admin, Some(m), StatusCode::CONFLICT).await
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::pages::tests::nav;

    fn user(name: &str, disabled: bool) -> UserInfo {
        UserInfo {
            username: name.into(),
            display_name: "<b>Ann</b>".into(),
            source: "local".into(),
            admin: false,
            disabled,
            last_login: None,
            running_sessions: 1,
            running_jobs: 2,
            pending_jobs: 3,
            gpus_in_use: 1.5,
            gpu_hours: 12.345,
        }
    }

    #[test]
    fn users_have_disable_or_enable_buttons_but_not_for_oneself() {
        let html = UsersPage {
            nav: nav(),
            users: vec![user("alice", false), user("bob", false), user("cy", true)],
            period: "month".into(),
            error: Some("you cannot disable your own account".into()),
        }
        .render()
        .expect("render");
        assert!(
            !html.contains("/admin/users/alice/disable"),
            "the viewer (alice) cannot disable herself: {html}"
        );
        assert!(
            html.contains("action=\"/admin/users/bob/disable\""),
            "{html}"
        );
        assert!(html.contains("action=\"/admin/users/cy/enable\""), "{html}");
        assert!(html.contains("name=\"csrf\" value=\"tok\""), "{html}");
        assert!(html.contains("&#60;b&#62;Ann&#60;/b&#62;"), "{html}");
        assert!(html.contains("12.35"), "{html}");
        assert!(
            html.contains("you cannot disable your own account"),
            "{html}"
        );
    }
}
