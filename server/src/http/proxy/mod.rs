//! The sessions' reverse proxy: `/user/{owner}/{session}/…` carries HTTP and
//! websockets to the session's server (its unix socket, or TCP on a compute node).
//!
//! Only the owner passes (administrators too when `sessions.admin_access`); anyone
//! else gets 404, as if the session did not exist. The portal's own credentials (its
//! cookies, a bearer token) never reach the session, and the session can never set a
//! cookie named like the portal's; the session's secret token is added here, so the
//! browser never sees it. An administrator viewing another user's server gets its
//! responses under a `sandbox` content security policy (no `allow-same-origin`): the
//! user's scripts run in an opaque origin, where they can neither read the portal's
//! cookies nor call the portal as the administrator, and none of the session's cookies
//! are stored in the administrator's browser. Bodies and event streams are streamed
//! both ways, never buffered. An app that cannot be told its base URL (code-server:
//! `strip_base_path`) gets paths without `/user/{owner}/{session}`, websockets too.
//! Routes come from the sessions service, which rebuilds them from the database at
//! startup.
//! Must not touch: SQL, the scheduler, or how sessions start.

mod ws;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::http::{header, Method};
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::SendRequest;

use crate::auth::Scope;
use crate::http::authn::{is_portal_cookie, MaybeUser};
use crate::http::{ApiError, AppState};
use crate::sessions::upstream::{self, ProxyBody, UpstreamError};
use crate::sessions::Route;

/// Headers that belong to one connection, not to the message (RFC 9110 §7.6.1).
fn hop_by_hop(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// The policy on every response shown to someone other than the session's owner.
/// Without `allow-same-origin` the page is its own opaque origin.
pub const SANDBOX: &str = "sandbox allow-scripts allow-forms allow-popups allow-downloads";

/// Who is looking at a session's server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Viewer {
    Owner,
    /// An administrator looking at another user's server.
    Administrator,
}

/// `/user/{owner}/{session}{tail}`: every method.
pub async fn handle(
    req: HttpRequest,
    body: web::Payload,
    state: web::Data<AppState>,
    caller: MaybeUser,
) -> Result<HttpResponse, ApiError> {
    let (owner, name, tail) = split_path(req.path()).ok_or(ApiError::NotFound)?;
    let (route, viewer) = authorize(&req, &state, caller, owner, name)?;
    if tail.is_empty() {
        let query = req.query_string();
        let to = if query.is_empty() {
            route.prefix.clone()
        } else {
            format!("{}?{query}", route.prefix)
        };
        return Ok(HttpResponse::Found()
            .insert_header((header::LOCATION, to))
            .finish());
    }
    if !route.is_ready() {
        if req.method() == Method::GET && wants_html(&req) {
            return Ok(HttpResponse::SeeOther()
                .insert_header((header::LOCATION, format!("/sessions/{}", route.id)))
                .finish());
        }
        return Err(ApiError::Unavailable(
            "the session is not ready yet; follow its progress".into(),
        ));
    }
    // The session's server skips its own origin and XSRF checks for the requests the
    // proxy signs with its token: the proxy checks instead. A browser names the page's
    // origin on websockets and on every request that changes something.
    let websocket = is_websocket(&req);
    if (websocket || !matches!(*req.method(), Method::GET | Method::HEAD)) && !same_origin(&req) {
        return Err(ApiError::forbidden(
            "a request from another site's page is refused",
        ));
    }
    if websocket {
        route.touch();
        state.metrics.proxy.websocket_connections.inc();
        return ws::relay(&req, body, route, state.metrics.proxy.clone()).await;
    }
    state.metrics.proxy.http_requests.inc();
    // What a person does counts as activity: pages, saves, runs. JupyterLab's own
    // polling (GET requests of an open tab) does not, or no tab would ever be idle.
    if req.method() != Method::GET || wants_html(&req) {
        route.touch();
    }
    forward(&req, body, route, viewer).await
}

/// The session the path names, if the caller may use it.
/// `/user/{owner}/{session}{tail}` → its three parts (the tail empty or from `/`). The
/// path is split here rather than by a route pattern: a plain prefix match is cheaper
/// than the router's regular expression on every proxied request.
fn split_path(path: &str) -> Option<(&str, &str, &str)> {
    let rest = path.strip_prefix("/user/")?;
    let (owner, rest) = rest.split_once('/')?;
    let (name, tail) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    (!owner.is_empty() && !name.is_empty()).then_some((owner, name, tail))
}

fn authorize(
    req: &HttpRequest,
    state: &AppState,
    caller: MaybeUser,
    owner: &str,
    name: &str,
) -> Result<(Arc<Route>, Viewer), ApiError> {
    let Some(caller) = caller.0 else {
        if req.method() == Method::GET && wants_html(req) {
            return Err(ApiError::LoginRequired {
                next: req
                    .uri()
                    .path_and_query()
                    .map_or_else(|| "/".into(), |p| p.as_str().to_string()),
            });
        }
        return Err(ApiError::Unauthorized);
    };
    caller.require(Scope::Sessions)?;
    let route = state
        .sessions
        .route(owner, name)
        .ok_or(ApiError::NotFound)?;
    if !state
        .sessions
        .may_use(&caller.username, caller.acts_as_admin(), &route.owner)
    {
        return Err(ApiError::NotFound);
    }
    let viewer = if caller.username == route.owner {
        Viewer::Owner
    } else {
        Viewer::Administrator
    };
    Ok((route, viewer))
}

fn wants_html(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"))
}

/// A browser's websocket from a page of this portal: its `Origin` names the host the
/// request was sent to. (Clients that send no `Origin` are not browsers.)
fn same_origin(req: &HttpRequest) -> bool {
    let Some(origin) = req.headers().get(header::ORIGIN) else {
        return true;
    };
    let host = req.connection_info().host().to_string();
    origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .is_some_and(|(_, authority)| authority.eq_ignore_ascii_case(&host))
}

fn is_websocket(req: &HttpRequest) -> bool {
    req.headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// The cookies the session's server gets: the browser's less the portal's own, and,
/// for an app that checks a cookie, that one holding the session's token (whatever
/// of that name the browser sent is dropped).
fn session_cookies(req: &HttpRequest, route: &Route) -> Option<String> {
    cookies_for(req, route.token_cookie.as_deref())
}

fn cookies_for(req: &HttpRequest, token_cookie: Option<&str>) -> Option<String> {
    let replaced = token_cookie.and_then(|c| c.split_once('=')).map(|(n, _)| n);
    let all = req
        .headers()
        .get(header::COOKIE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut kept: Vec<&str> = all
        .split(';')
        .map(str::trim)
        .filter(|c| {
            let name = c.split('=').next().unwrap_or("").trim();
            !c.is_empty() && !is_portal_cookie(name) && Some(name) != replaced
        })
        .collect();
    kept.extend(token_cookie);
    (!kept.is_empty()).then(|| kept.join("; "))
}

/// The request as the session's server gets it.
fn upstream_request(
    req: &HttpRequest,
    route: &Route,
    body: ProxyBody,
) -> Result<hyper::Request<ProxyBody>, ApiError> {
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.path().to_string(), |p| p.as_str().to_string());
    // An app that cannot be told its base URL gets the path under the prefix.
    let path = route.upstream_path(&path);
    let method = hyper::Method::from_bytes(req.method().as_str().as_bytes())
        .map_err(|_| ApiError::invalid("method", "unsupported method"))?;
    let mut out = hyper::Request::builder().method(method).uri(path.as_ref());
    for (name, value) in req.headers() {
        let n = name.as_str();
        if hop_by_hop(n) || n == "authorization" || n == "cookie" {
            continue;
        }
        out = out.header(n, value.as_bytes());
    }
    if let Some(cookies) = session_cookies(req, route) {
        out = out.header("cookie", cookies);
    }
    out = out.header("authorization", route.authorization.as_str());
    if let Some(peer) = req.peer_addr() {
        out = out.header("x-forwarded-for", peer.ip().to_string());
    }
    out.body(body)
        .map_err(|e| ApiError::invalid("uri", format!("cannot forward this request: {e}")))
}

fn has_body(req: &HttpRequest) -> bool {
    let headers = req.headers();
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|n| n > 0)
}

/// Whether the session's response header `name: value` goes on to the browser of
/// `viewer`: not the connection's own headers, never a cookie named like the portal's,
/// and no cookie at all for someone other than the owner.
fn passes_to_browser(name: &str, value: &[u8], viewer: Viewer) -> bool {
    if hop_by_hop(name) {
        return false;
    }
    if name != "set-cookie" {
        return true;
    }
    let cookie_name = std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.split_once('='))
        .map(|(n, _)| n);
    match cookie_name {
        Some(n) => viewer == Viewer::Owner && !is_portal_cookie(n),
        None => false,
    }
}

async fn forward(
    req: &HttpRequest,
    payload: web::Payload,
    route: Arc<Route>,
    viewer: Viewer,
) -> Result<HttpResponse, ApiError> {
    let body = if has_body(req) {
        ProxyBody::Stream(Box::pin(
            payload.map(|chunk| chunk.map_err(|e| std::io::Error::other(e.to_string()))),
        ))
    } else {
        ProxyBody::Empty
    };
    let request = upstream_request(req, &route, body)?;
    let Some(up) = route.upstream() else {
        return Err(ApiError::Unavailable(
            "the session is not ready yet; follow its progress".into(),
        ));
    };
    let mut sender = upstream::pooled(up).await.map_err(unreachable_session)?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| unreachable_session(UpstreamError::Http(e)))?;
    let (parts, incoming) = response.into_parts();
    let status = actix_web::http::StatusCode::from_u16(parts.status.as_u16())
        .map_err(|_| ApiError::BadGateway("the session answered with a bad status".into()))?;
    let mut out = HttpResponse::build(status);
    let mut length: Option<u64> = None;
    for (name, value) in &parts.headers {
        let n = name.as_str();
        if n == "content-length" {
            length = value.to_str().ok().and_then(|v| v.parse().ok());
            continue;
        }
        if !passes_to_browser(n, value.as_bytes(), viewer) {
            if n == "set-cookie" {
                tracing::warn!(owner = %route.owner, ?viewer, "a session's cookie was not passed on");
            }
            continue;
        }
        out.append_header((n, value.as_bytes()));
    }
    if viewer == Viewer::Administrator {
        // Added to the session's own policies: a browser enforces every one.
        out.append_header((header::CONTENT_SECURITY_POLICY, SANDBOX));
    }
    if !parts.headers.contains_key("x-frame-options") {
        // Jupyter and TensorBoard frame their own pages; the portal's DENY would break them.
        out.insert_header(("x-frame-options", "SAMEORIGIN"));
    }
    if incoming.is_end_stream() {
        upstream::release(up, sender);
        return Ok(out.finish());
    }
    let relay = Relay {
        body: incoming,
        sender: Some(sender),
        route,
    };
    Ok(match length {
        Some(n) => out.body(actix_web::body::SizedStream::new(n, relay)),
        None => out.streaming(relay),
    })
}

fn unreachable_session(e: UpstreamError) -> ApiError {
    tracing::warn!(error = %e, "proxying to a session failed");
    ApiError::BadGateway("the session's server is not answering".into())
}

/// The session's response body, passed on as it arrives; at its end the connection
/// goes back to the pool.
struct Relay {
    body: Incoming,
    sender: Option<SendRequest<ProxyBody>>,
    route: Arc<Route>,
}

impl Stream for Relay {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        return Poll::Ready(Some(Ok(data)));
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.sender = None;
                    return Poll::Ready(Some(Err(std::io::Error::other(e))));
                }
                Poll::Ready(None) => {
                    if let (Some(sender), Some(up)) = (this.sender.take(), this.route.upstream()) {
                        upstream::release(up, sender);
                    }
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxied_paths_split_into_owner_session_and_tail() {
        assert_eq!(
            split_path("/user/alice/default/lab/tree"),
            Some(("alice", "default", "/lab/tree"))
        );
        assert_eq!(
            split_path("/user/alice/default/"),
            Some(("alice", "default", "/"))
        );
        assert_eq!(
            split_path("/user/alice/default"),
            Some(("alice", "default", ""))
        );
        assert_eq!(split_path("/user/alice/"), None);
        assert_eq!(split_path("/user/alice"), None);
        assert_eq!(split_path("/users/alice/x"), None);
    }

    #[test]
    fn websockets_only_from_this_origin() {
        let req = |origin: &str| {
            actix_web::test::TestRequest::default()
                .insert_header((header::HOST, "portal.example.org"))
                .insert_header((header::ORIGIN, origin))
                .to_http_request()
        };
        assert!(same_origin(&req("https://portal.example.org")));
        assert!(!same_origin(&req("https://evil.example.net")));
        assert!(!same_origin(&req("null")));
        assert!(same_origin(
            &actix_web::test::TestRequest::default().to_http_request()
        ));
    }

    #[test]
    fn the_portals_cookies_stay_behind() {
        let req = actix_web::test::TestRequest::default()
            .insert_header((
                header::COOKIE,
                "atrium_session=secret; _xsrf=abc; atrium_csrf=x; username-u=v",
            ))
            .to_http_request();
        assert_eq!(
            cookies_for(&req, None).as_deref(),
            Some("_xsrf=abc; username-u=v")
        );
        let only_ours = actix_web::test::TestRequest::default()
            .insert_header((header::COOKIE, "atrium_session=secret"))
            .to_http_request();
        assert_eq!(cookies_for(&only_ours, None), None);
        assert_eq!(
            cookies_for(&only_ours, Some("code-server-session=tok")).as_deref(),
            Some("code-server-session=tok")
        );
        let forged = actix_web::test::TestRequest::default()
            .insert_header((header::COOKIE, "code-server-session=mine; a=1"))
            .to_http_request();
        assert_eq!(
            cookies_for(&forged, Some("code-server-session=tok")).as_deref(),
            Some("a=1; code-server-session=tok")
        );
        let spelled = actix_web::test::TestRequest::default()
            .insert_header((
                header::COOKIE,
                "ATRIUM_SESSION=a; __Host-atrium_session=b; atrium_login_csrf=c; _xsrf=d",
            ))
            .to_http_request();
        assert_eq!(cookies_for(&spelled, None).as_deref(), Some("_xsrf=d"));
    }

    #[test]
    fn a_session_cannot_set_the_portals_cookies() {
        let owner = Viewer::Owner;
        for cookie in [
            "atrium_session=forged; Path=/; HttpOnly",
            "atrium_login_csrf=x; Path=/login",
            "Atrium_Session=forged; Path=/",
            "__Host-atrium_session=forged; Path=/; Secure",
            " atrium_session=forged",
            "no-equals-sign",
        ] {
            assert!(
                !passes_to_browser("set-cookie", cookie.as_bytes(), owner),
                "{cookie}"
            );
        }
        let jupyter = b"_xsrf=2|abc; Path=/user/alice/default/";
        assert!(passes_to_browser("set-cookie", jupyter, owner));
        assert!(!passes_to_browser("set-cookie", &[0xff, b'='], owner));
        // Nothing of the session's is stored in an administrator's browser.
        assert!(!passes_to_browser(
            "set-cookie",
            jupyter,
            Viewer::Administrator
        ));
        assert!(passes_to_browser(
            "content-type",
            b"text/html",
            Viewer::Administrator
        ));
        assert!(!passes_to_browser("connection", b"close", owner));
    }

    #[test]
    fn the_sandbox_gives_no_same_origin() {
        assert!(SANDBOX.starts_with("sandbox "));
        assert!(!SANDBOX.contains("allow-same-origin"));
        assert!(SANDBOX.contains("allow-scripts"));
    }
}
