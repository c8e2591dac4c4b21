//! Request authentication for handlers: extractors that resolve the caller, the
//! middleware that returns renewed session cookies, and the client address.
//!
//! Credentials: `Authorization: Bearer atr_…` (API tokens) or the session cookie.
//! A cookie-authenticated API call that changes state must carry the session's CSRF
//! token in `X-CSRF-Token` (checked here, once, for every such route).

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;

use actix_web::body::MessageBody;
use actix_web::cookie::{time::Duration as CookieDuration, Cookie, SameSite};
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method};
use actix_web::middleware::Next;
use actix_web::{web, FromRequest, HttpMessage, HttpRequest};

use super::{ApiError, AppState};
use crate::auth::{csrf, Credential, Principal, Scope};

pub const SESSION_COOKIE: &str = "atrium_session";

/// Whether a cookie named `name` is one of the portal's own: every cookie the portal
/// sets is named `atrium_…` ([`SESSION_COOKIE`], [`csrf::LOGIN_CSRF_COOKIE`]). Compared
/// without case and without the `__Host-`/`__Secure-` prefixes, so no spelling of it
/// passes. Users' servers must never set these or receive them.
pub fn is_portal_cookie(name: &str) -> bool {
    let name = name.trim();
    let bare = ["__Host-", "__Secure-"]
        .iter()
        .find_map(|p| {
            name.get(..p.len())
                .filter(|head| head.eq_ignore_ascii_case(p))
                .map(|_| &name[p.len()..])
        })
        .unwrap_or(name);
    bare.get(..7)
        .is_some_and(|head| head.eq_ignore_ascii_case("atrium_"))
}

/// A session token renewed while handling the request, to be set as the cookie.
#[derive(Debug, Clone)]
struct Renewed(String);

/// The resolved caller, memoised in the request's extensions.
#[derive(Debug, Clone)]
struct Resolved(Option<Principal>);

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::internal("application state missing"))
}

/// Resolve the caller once per request.
async fn resolve(req: &HttpRequest) -> Result<Option<Principal>, ApiError> {
    if let Some(Resolved(found)) = req.extensions().get::<Resolved>() {
        return Ok(found.clone());
    }
    let state = state(req)?;
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or("").trim().to_string());
    let found = match bearer {
        Some(secret) => state.auth.from_bearer(&secret).await?,
        None => match req.cookie(SESSION_COOKIE) {
            Some(cookie) => state.auth.from_session_cookie(cookie.value()).await?,
            None => None,
        },
    };
    if let Some(Principal {
        credential: Credential::Session {
            renewed: Some(token),
            ..
        },
        ..
    }) = &found
    {
        req.extensions_mut().insert(Renewed(token.clone()));
    }
    req.extensions_mut().insert(Resolved(found.clone()));
    Ok(found)
}

fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Require the CSRF header on cookie-authenticated API calls that change state.
fn check_api_csrf(req: &HttpRequest, principal: &Principal) -> Result<(), ApiError> {
    if changes_state(req.method()) {
        let presented = req
            .headers()
            .get(csrf::HEADER)
            .and_then(|v| v.to_str().ok());
        if !principal.csrf_ok(presented) {
            return Err(ApiError::forbidden(
                "missing or invalid CSRF token (send the X-CSRF-Token header)",
            ));
        }
    }
    Ok(())
}

type Fut<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>>>>;

/// An authenticated API caller (401 otherwise).
impl FromRequest for Principal {
    type Error = ApiError;
    type Future = Fut<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let principal = resolve(&req).await?.ok_or(ApiError::Unauthorized)?;
            check_api_csrf(&req, &principal)?;
            Ok(principal)
        })
    }
}

/// A logged-in browser user (redirect to the login page otherwise). Pages check their
/// form's CSRF field themselves with [`Principal::csrf_ok`].
#[derive(Debug, Clone)]
pub struct PageUser(pub Principal);

impl FromRequest for PageUser {
    type Error = ApiError;
    type Future = Fut<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            match resolve(&req).await? {
                Some(principal) => Ok(PageUser(principal)),
                None => Err(ApiError::LoginRequired {
                    next: req
                        .uri()
                        .path_and_query()
                        .map(|p| p.as_str().to_string())
                        .unwrap_or_else(|| "/".into()),
                }),
            }
        })
    }
}

/// The caller if any.
#[derive(Debug, Clone)]
pub struct MaybeUser(pub Option<Principal>);

impl FromRequest for MaybeUser {
    type Error = ApiError;
    type Future = Fut<Self>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { Ok(MaybeUser(resolve(&req).await?)) })
    }
}

impl Principal {
    /// `Err(403)` unless this caller holds `scope`.
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.has_scope(scope) {
            Ok(())
        } else if scope == Scope::Admin && !self.admin_account {
            Err(ApiError::forbidden("administrators only"))
        } else {
            Err(ApiError::forbidden(format!(
                "this token lacks the {scope} scope"
            )))
        }
    }
}

/// The session cookie carrying `token`, or one that clears it (`token` empty).
pub fn session_cookie(token: &str, state: &AppState) -> Cookie<'static> {
    let mut cookie = Cookie::build(SESSION_COOKIE, token.to_string())
        .path("/")
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(state.secure_cookies)
        .finish();
    if token.is_empty() {
        cookie.make_removal();
    } else {
        let ttl = state.auth.session_ttl().as_secs() as i64;
        cookie.set_max_age(CookieDuration::seconds(ttl));
    }
    cookie
}

/// After the handler: send a renewed session cookie when the session was renewed.
pub async fn renew_session_cookie(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut res = next.call(req).await?;
    let renewed = res.request().extensions().get::<Renewed>().cloned();
    let data = res.request().app_data::<web::Data<AppState>>().cloned();
    if let (Some(Renewed(token)), Some(state)) = (renewed, data) {
        // A response that itself sets the session cookie (login, logout) wins.
        let sets_session = res.response().cookies().any(|c| c.name() == SESSION_COOKIE);
        if !sets_session {
            let cookie = session_cookie(&token, &state);
            res.response_mut().add_cookie(&cookie)?;
        }
    }
    Ok(res)
}

/// The client's address: the peer, or the last `X-Forwarded-For` hop when the peer
/// is a trusted proxy.
pub fn client_addr(req: &HttpRequest, trusted: &[IpAddr]) -> String {
    let peer = req.peer_addr().map(|a| a.ip());
    if let Some(peer) = peer {
        if trusted.contains(&peer) {
            let forwarded = req
                .headers()
                .get("x-forwarded-for")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.rsplit(',').next())
                .and_then(|v| v.trim().parse::<IpAddr>().ok());
            if let Some(client) = forwarded {
                return client.to_string();
            }
        }
        return peer.to_string();
    }
    "unknown".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_portals_cookies_are_recognised_in_every_spelling() {
        for name in [
            SESSION_COOKIE,
            csrf::LOGIN_CSRF_COOKIE,
            "ATRIUM_SESSION",
            "__Host-atrium_session",
            "__secure-Atrium_x",
            " atrium_session",
        ] {
            assert!(is_portal_cookie(name), "{name}");
        }
        for name in [
            "_xsrf",
            "username-localhost-8888",
            "atrium",
            "my_atrium_x",
            "",
        ] {
            assert!(!is_portal_cookie(name), "{name}");
        }
    }
}
