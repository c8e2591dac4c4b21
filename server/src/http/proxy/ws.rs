//! Websockets through the proxy: the session's server is reached first (so that the
//! subprotocol it picks, such as Jupyter's `v1.kernel.websocket.jupyter.org`, is the one
//! the browser gets), then messages are relayed both ways as they come, each data
//! message counting as activity (pings do not).

use std::sync::Arc;

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;

use super::unreachable_session;
use crate::http::ApiError;
use crate::sessions::upstream::UpstreamError;
use crate::sessions::Route;

/// The largest message relayed (kernel outputs with images can be large).
const MAX_MESSAGE: usize = 64 << 20;

/// Headers of the browser's handshake passed to the session's server.
const PASSED: &[&str] = &["host", "origin", "sec-websocket-protocol", "user-agent"];

pub(super) async fn relay(
    req: &HttpRequest,
    body: web::Payload,
    route: Arc<Route>,
    metrics: crate::metrics::ProxyMetrics,
) -> Result<HttpResponse, ApiError> {
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.path().to_string(), |p| p.as_str().to_string());
    let path = route.upstream_path(&path);
    let mut upstream_req = format!("ws://localhost{path}")
        .into_client_request()
        .map_err(|e| ApiError::bad_request(format!("bad websocket request: {e}")))?;
    let headers = upstream_req.headers_mut();
    for name in PASSED {
        if let Some(v) = req.headers().get(*name) {
            if let (Ok(n), Ok(v)) = (
                hyper::header::HeaderName::from_bytes(name.as_bytes()),
                hyper::header::HeaderValue::from_bytes(v.as_bytes()),
            ) {
                headers.insert(n, v);
            }
        }
    }
    let auth = hyper::header::HeaderValue::from_str(&route.authorization)
        .map_err(|_| ApiError::internal("session secret is not a header value"))?;
    headers.insert(hyper::header::AUTHORIZATION, auth);
    let stream = route
        .upstream()
        .ok_or_else(|| ApiError::Unavailable("the session is not ready yet".into()))?
        .connect()
        .await
        .map_err(unreachable_session)?;
    let mut config = WebSocketConfig::default();
    config.max_message_size = Some(MAX_MESSAGE);
    config.max_frame_size = Some(MAX_MESSAGE);
    let (upstream, answer) =
        tokio_tungstenite::client_async_with_config(upstream_req, stream, Some(config))
            .await
            .map_err(|e| {
                tracing::info!(error = %e, "the session refused a websocket");
                match e {
                    tokio_tungstenite::tungstenite::Error::Http(r)
                        if r.status().as_u16() == 404 =>
                    {
                        ApiError::NotFound
                    }
                    other => unreachable_session(UpstreamError::Io(std::io::Error::other(
                        other.to_string(),
                    ))),
                }
            })?;
    let protocol = answer
        .headers()
        .get("sec-websocket-protocol")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);

    let (mut response, mut session, messages) = actix_ws::handle(req, body)
        .map_err(|e| ApiError::bad_request(format!("bad websocket handshake: {e}")))?;
    if let Some(p) = protocol {
        if let Ok(v) = header::HeaderValue::from_str(&p) {
            response
                .headers_mut()
                .insert(header::SEC_WEBSOCKET_PROTOCOL, v);
        }
    }
    let mut messages = messages
        .max_frame_size(MAX_MESSAGE)
        .aggregate_continuations()
        .max_continuation_size(MAX_MESSAGE);
    let (mut to_server, mut from_server) = upstream.split();

    // Browser → session.
    let inbound_route = route.clone();
    let to_session = metrics.messages_to_session;
    let to_browser = metrics.messages_to_browser;
    actix_web::rt::spawn(async move {
        while let Some(Ok(msg)) = messages.next().await {
            if matches!(
                msg,
                actix_ws::AggregatedMessage::Text(_) | actix_ws::AggregatedMessage::Binary(_)
            ) {
                inbound_route.touch();
                to_session.inc();
            }
            let out = match msg {
                actix_ws::AggregatedMessage::Text(t) => Message::Text(t.to_string().into()),
                actix_ws::AggregatedMessage::Binary(b) => Message::Binary(b),
                actix_ws::AggregatedMessage::Ping(p) => Message::Ping(p),
                actix_ws::AggregatedMessage::Pong(p) => Message::Pong(p),
                actix_ws::AggregatedMessage::Close(reason) => {
                    let frame = reason.map(|r| CloseFrame {
                        code: CloseCode::from(u16::from(r.code)),
                        reason: r.description.unwrap_or_default().into(),
                    });
                    let _ = to_server.send(Message::Close(frame)).await;
                    break;
                }
            };
            if to_server.send(out).await.is_err() {
                break;
            }
        }
        let _ = to_server.close().await;
    });

    // Session → browser.
    actix_web::rt::spawn(async move {
        let mut close = None;
        while let Some(msg) = from_server.next().await {
            let Ok(msg) = msg else { break };
            if matches!(msg, Message::Text(_) | Message::Binary(_)) {
                route.touch();
                to_browser.inc();
            }
            let sent = match msg {
                Message::Text(t) => session.text(t.as_str().to_owned()).await,
                Message::Binary(b) => session.binary(b).await,
                Message::Ping(p) => session.ping(&p).await,
                Message::Pong(p) => session.pong(&p).await,
                Message::Close(frame) => {
                    close = frame.map(|f| actix_ws::CloseReason {
                        code: u16::from(f.code).into(),
                        description: Some(f.reason.as_str().to_owned()),
                    });
                    break;
                }
                Message::Frame(_) => Ok(()),
            };
            if sent.is_err() {
                return;
            }
        }
        let _ = session.close(close).await;
    });
    Ok(response)
}
