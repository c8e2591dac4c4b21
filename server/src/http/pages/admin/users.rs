//! `GET /admin/users[?q=TEXT][&page=N]`: the accounts (those whose name or display
//! name holds TEXT), 100 a page, with what they run and use, each linked to its
//! detail page (`user_detail`); `POST /admin/users/{name}/disable|enable`.

use crate::http::pages::PageError;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;

use super::{see_other, AdminPost, AdminUser};
use crate::auth::Principal;
use crate::http::error::urlencode;
use crate::http::pages::jobs::{PageQuery, Pager};
use crate::http::pages::when::filters;
use crate::http::pages::{not_found_page, query_value, render, CsrfForm, MessagePage, Nav};
use crate::http::{ApiError, AppState};
use crate::services::accounts::UserInfo;

#[derive(Template)]
#[template(path = "admin/users.html")]
struct UsersPage {
    nav: Nav,
    users: Vec<UserInfo>,
    pager: Pager,
    period: String,
    /// The search as asked, empty for none.
    search: String,
    /// Why the last change was refused.
    error: Option<String>,
}

/// `?page=N&q=TEXT` of the users page.
struct UsersQuery {
    page: PageQuery,
    search: String,
}

impl UsersQuery {
    /// The query's page and search; the error names the bad parameter.
    fn parse(pairs: &[(String, String)]) -> Result<UsersQuery, String> {
        let page = match query_value(pairs, "page").as_str() {
            "" => None,
            text => Some(
                text.parse::<usize>()
                    .map_err(|_| format!("The page number {text:?} is not a whole number."))?,
            ),
        };
        Ok(UsersQuery {
            page: PageQuery { page },
            search: query_value(pairs, "q"),
        })
    }
}

async fn users_page(
    state: &AppState,
    admin: &Principal,
    error: Option<String>,
    status: StatusCode,
    query: &UsersQuery,
) -> Result<HttpResponse, ApiError> {
    // As many accounts a page as jobs on the queue pages.
    let at = query.page.queue_page();
    let search = (!query.search.is_empty()).then_some(query.search.as_str());
    let found = match state
        .accounts
        .users_matching(search, at.offset(), at.per_page)
        .await
    {
        Ok(found) => found,
        Err(crate::services::ServiceError::Invalid { message, .. }) => {
            let message = format!("The search is too long: {message}.");
            return render(
                &MessagePage {
                    title: "Users",
                    message: &message,
                },
                StatusCode::BAD_REQUEST,
            );
        }
        Err(e) => return Err(e.into()),
    };
    let keep = if query.search.is_empty() {
        String::new()
    } else {
        format!("q={}&", urlencode(&query.search))
    };
    let page = UsersPage {
        nav: Nav::of(admin).at(crate::http::pages::Section::Admin),
        users: found.users,
        pager: Pager::new("/admin/users", at, found.total)
            .counting("users", "user-pages")
            .keeping(keep),
        period: state.quotas.period_name(),
        search: query.search.clone(),
        error,
    };
    render(&page, status)
}

pub async fn show(
    state: web::Data<AppState>,
    admin: AdminUser,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(req.query_string())
        .map(|q| q.into_inner())
        .unwrap_or_default();
    let query = match UsersQuery::parse(&pairs) {
        Ok(q) => q,
        Err(message) => {
            return render(
                &MessagePage {
                    title: "Users",
                    message: &message,
                },
                StatusCode::BAD_REQUEST,
            )
        }
    };
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
        .map_err(PageError::from);
    let (message, status) = match changed {
        Ok(_) => return Ok(see_other("/admin/users")),
        Err(PageError::NotFound) => return not_found_page(),
        Err(PageError::Failed(e)) => return Err(e),
        Err(PageError::Invalid(m)) => (m, StatusCode::BAD_REQUEST),
        Err(PageError::Refused { message, status }) => (message, status),
    };
    let first = UsersQuery {
        page: PageQuery { page: None },
        search: String::new(),
    };
    users_page(&state, &admin, Some(message), status, &first).await
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
            search: String::new(),
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
            search: String::new(),
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
            search: String::new(),
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
