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

/// The longest `next` followed after login.
const MAX_NEXT: usize = 2048;

/// Where to go after login: `next` when it is a path on this site, else `/`.
fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(n) if is_local_path(n) => n,
        _ => "/",
    }
}

/// Whether `target` (as it arrived, query-decoded) can only lead to this origin: a
/// single leading `/`, no backslash, control character or whitespace anywhere (browsers
/// drop tabs and newlines from URLs and read `\` as `/`, so `/\t/evil.example` would
/// be `//evil.example`), bounded in length. Its path, percent-decoded once more, must
/// also pass, for whatever decodes it again on the way.
pub fn is_local_path(target: &str) -> bool {
    fn plain(path: &str) -> bool {
        path.starts_with('/')
            && !path.starts_with("//")
            && !path
                .chars()
                .any(|c| c == '\\' || c.is_control() || c.is_whitespace())
    }
    let path = target.split(['?', '#']).next().unwrap_or("");
    target.len() <= MAX_NEXT
        && plain(target)
        && percent_decoded(path).is_some_and(|decoded| plain(&decoded))
}

/// `text` with `%XX` escapes decoded (`None` when that is not UTF-8).
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
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
    query: crate::http::query::Query<NextQuery>,
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
            let message = format!(
                "Too many failed attempts. Try again in {} seconds.",
                retry_after.as_secs()
            );
            let status = StatusCode::TOO_MANY_REQUESTS;
            return retry_later(&state, next, &form.username, &message, status, retry_after);
        }
        Err(Failure::Busy(retry_after)) => {
            let message = "The portal is busy checking other logins. Try again in a moment.";
            let status = StatusCode::SERVICE_UNAVAILABLE;
            return retry_later(&state, next, &form.username, message, status, retry_after);
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

/// The login page with `message`, answered with `status` and `Retry-After`.
fn retry_later(
    state: &AppState,
    next: &str,
    username: &str,
    message: &str,
    status: StatusCode,
    retry_after: std::time::Duration,
) -> Result<HttpResponse, ApiError> {
    let mut response = login_page(state, next, username, Some(message), status)?;
    response.headers_mut().insert(
        header::RETRY_AFTER,
        header::HeaderValue::from(retry_after.as_secs().max(1)),
    );
    Ok(response)
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
        for good in [
            "/tokens?x=1",
            "/",
            "/jobs/12",
            "/user/alice/default/lab?token=a%20b",
            "/sessions#top",
        ] {
            assert_eq!(safe_next(Some(good)), good);
        }
        let long = format!("/{}", "a".repeat(MAX_NEXT));
        for bad in [
            "//evil.example",
            "https://evil.example",
            "/\\evil.example",
            "\\/evil.example",
            "/\tevil",
            // `/%09/evil.example/x` as it arrives once the query is decoded.
            "/\t/evil.example/x",
            "/\r\n/evil.example",
            "/\n/evil.example",
            "/ /evil.example",
            "/x/\u{0}",
            "/x\u{2028}y",
            // Still encoded (double-encoded in the request).
            "/%09/evil.example",
            "/%2F/evil.example",
            "/%2fevil.example",
            "/%5Cevil.example",
            "/%0d%0aSet-Cookie:x",
            "",
            "x",
            "evil.example",
            long.as_str(),
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn percent_decoding_is_done_once() {
        assert_eq!(percent_decoded("/a%2Fb%20c").as_deref(), Some("/a/b c"));
        assert_eq!(percent_decoded("/%252F").as_deref(), Some("/%2F"));
        assert_eq!(percent_decoded("/100%").as_deref(), Some("/100%"));
        assert_eq!(percent_decoded("/%zz").as_deref(), Some("/%zz"));
        assert_eq!(percent_decoded("/%ff"), None);
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
