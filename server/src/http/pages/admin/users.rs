//! `GET /admin/users[?page=N]`: the accounts, 100 a page, with what they run and use;
//! `POST /admin/users/{name}/disable|enable`.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{see_other, AdminPost, AdminUser};
use crate::auth::Principal;
use crate::http::pages::jobs::{PageQuery, Pager};
use crate::http::pages::{not_found_page, render, CsrfForm, Nav};
use crate::http::{ApiError, AppState};
use crate::services::accounts::UserInfo;

#[derive(Template)]
#[template(path = "admin/users.html")]
struct UsersPage {
    nav: Nav,
    users: Vec<UserInfo>,
    pager: Pager,
    period: String,
    /// Why the last change was refused.
    error: Option<String>,
}

async fn users_page(
    state: &AppState,
    admin: &Principal,
    error: Option<String>,
    status: StatusCode,
    query: &PageQuery,
) -> Result<HttpResponse, ApiError> {
    // As many accounts a page as jobs on the queue pages.
    let at = query.queue_page();
    let found = state.accounts.users(at.offset(), at.per_page).await?;
    let page = UsersPage {
        nav: Nav::of(admin).at(crate::http::pages::Section::Admin),
        users: found.users,
        pager: Pager::new("/admin/users", at, found.total).counting("users", "user-pages"),
        period: state.quotas.period_name(),
        error,
    };
    render(&page, status)
}

pub async fn show(
    state: web::Data<AppState>,
    admin: AdminUser,
    query: web::Query<PageQuery>,
) -> Result<HttpResponse, ApiError> {
    users_page(&state, &admin.0, None, StatusCode::OK, &query).await
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
            let first = PageQuery { page: None };
            users_page(&state, &admin, Some(m), StatusCode::CONFLICT, &first).await
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

    fn one_page(total: u64) -> Pager {
        Pager::new("/admin/users", first_page(), total).counting("users", "user-pages")
    }

    fn first_page() -> crate::services::jobs::QueuePage {
        PageQuery { page: None }.queue_page()
    }

    #[test]
    fn a_long_list_of_users_has_links_to_its_other_pages() {
        let html = UsersPage {
            nav: nav(),
            users: vec![user("bob", false)],
            pager: Pager::new(
                "/admin/users",
                PageQuery { page: Some(2) }.queue_page(),
                2005,
            )
            .counting("users", "user-pages"),
            period: "month".into(),
            error: None,
        }
        .render()
        .expect("render");
        assert!(html.contains("id=\"user-pages\""), "{html}");
        assert!(html.contains("Page 2 of 21 (2005 users)"), "{html}");
        assert!(html.contains("href=\"/admin/users?page=1\""), "{html}");
        assert!(html.contains("href=\"/admin/users?page=3\""), "{html}");
        let html = UsersPage {
            nav: nav(),
            users: vec![user("bob", false)],
            pager: one_page(1),
            period: "month".into(),
            error: None,
        }
        .render()
        .expect("render");
        assert!(!html.contains("user-pages"), "one page, no pager: {html}");
    }

    #[test]
    fn users_have_disable_or_enable_buttons_but_not_for_oneself() {
        let html = UsersPage {
            nav: nav(),
            users: vec![user("alice", false), user("bob", false), user("cy", true)],
            pager: one_page(3),
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
