//! The login page, login and logout.

use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use actix_web::http::{header, StatusCode};
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use serde::Deserialize;

use super::{csrf_refused, render, CsrfForm};
use crate::auth::{csrf, Credential};
use crate::http::authn::{session_cookie, MaybeUser, PageUser};
use crate::http::signin::{self, Failure};
use crate::http::{ApiError, AppState};

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage<'a> {
    csrf: &'a str,
    next: &'a str,
    username: &'a str,
    error: Option<&'a str>,
}

#[derive(Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    csrf: String,
    next: Option<String>,
}

/// Only same-site paths may be redirected to after login.
fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.contains('\\') => n,
        _ => "/",
    }
}

fn see_other(location: &str) -> actix_web::HttpResponseBuilder {
    let mut response = HttpResponse::SeeOther();
    response.insert_header((header::LOCATION, location.to_string()));
    response
}

fn login_page(
    state: &AppState,
    next: &str,
    username: &str,
    error: Option<&str>,
    status: StatusCode,
) -> Result<HttpResponse, ApiError> {
    let token = csrf::new_token();
    let mut response = render(
        &LoginPage {
            csrf: &token,
            next,
            username,
            error,
        },
        status,
    )?;
    let cookie = Cookie::build(csrf::LOGIN_CSRF_COOKIE, token)
        .path("/login")
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(state.secure_cookies)
        .max_age(CookieDuration::hours(2))
        .finish();
    response.add_cookie(&cookie).map_err(ApiError::internal)?;
    Ok(response)
}

pub async fn show(
    state: web::Data<AppState>,
    caller: MaybeUser,
    query: web::Query<NextQuery>,
) -> Result<HttpResponse, ApiError> {
    let next = safe_next(query.next.as_deref());
    if caller.0.is_some() {
        return Ok(see_other(next).finish());
    }
    login_page(&state, next, "", None, StatusCode::OK)
}

pub async fn submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<LoginForm>,
) -> Result<HttpResponse, ApiError> {
    let form = form.into_inner();
    let next = safe_next(form.next.as_deref());
    let cookie_token = req.cookie(csrf::LOGIN_CSRF_COOKIE);
    if !cookie_token.is_some_and(|c| csrf::matches(c.value(), &form.csrf)) {
        return csrf_refused();
    }
    let (status, message) = match signin::sign_in(&state, &req, &form.username, &form.password).await {
        Ok((_, login)) => {
            let mut clear_csrf = Cookie::new(csrf::LOGIN_CSRF_COOKIE, "");
            clear_csrf.set_path("/login");
            clear_csrf.make_removal();
            return Ok(see_other(next)
                .cookie(session_cookie(&login.token, &state))
                .cookie(clear_csrf)
                .finish());
        }
        Err(Failure::Invalid) => (StatusCode::UNAUTHORIZED, "Invalid username or password.".to_string()),
        Err(Failure::RateLimited(retry_after)) => {
            let mut response = login_page(
                &state,
                next,
                &form.username,
                Some(&format!(
                    "Too many failed attempts. Try again in {} seconds.",
                    retry_after.as_secs()
                )),
                StatusCode::TOO_MANY_REQUESTS,
            )?;
            response.headers_mut().insert(
                header::RETRY_AFTER,
                header::HeaderValue::from(retry_after.as_secs()),
            );
            return Ok(response);
        }
        Err(Failure::NotAllowed) => (
            StatusCode::FORBIDDEN,
            "Your account is not in a group allowed to use this portal. Ask your administrator to add you.".to_string(),
        ),
        Err(Failure::DirectoryUnavailable) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "The directory is unavailable, so nobody can log in right now. Try again shortly.".to_string(),
        ),
        Err(Failure::Unavailable(e)) => {
            tracing::error!(error = %e, "login unavailable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "The login service is unavailable. Try again shortly.".to_string(),
            )
        }
    };
    login_page(&state, next, &form.username, Some(&message), status)
}

pub async fn logout(
    state: web::Data<AppState>,
    user: PageUser,
    form: web::Form<CsrfForm>,
) -> Result<HttpResponse, ApiError> {
    let principal = user.0;
    if !principal.csrf_ok(Some(&form.csrf)) {
        return csrf_refused();
    }
    if let Credential::Session { jti, .. } = &principal.credential {
        state.auth.end_session(jti).await?;
        tracing::info!(user = %principal.username, "logout");
    }
    Ok(see_other("/login")
        .cookie(session_cookie("", &state))
        .finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_site() {
        assert_eq!(safe_next(Some("/tokens?x=1")), "/tokens?x=1");
        for bad in ["//evil.example", "https://evil.example", "/\\evil", "", "x"] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn login_page_renders_error_escaped() {
        let html = LoginPage {
            csrf: "tok",
            next: "/",
            username: "<b>",
            error: Some("Invalid username or password."),
        }
        .render()
        .expect("render");
        assert!(html.contains("name=\"csrf\" value=\"tok\""));
        assert!(html.contains("&#60;b&#62;"), "{html}");
        assert!(html.contains("Invalid username or password."));
    }
}
