//! Websockets through the proxy: the browser's handshake is checked here (its origin
//! and owner were, in `handle`) and passed to the session's server on an
//! authenticated connection (`Upstream::connect`), with the browser's own key, so the
//! server's answer (its `Sec-WebSocket-Accept`, the subprotocol it picks, such as
//! Jupyter's `v1.kernel.websocket.jupyter.org`, and any extension) is what the browser
//! gets. After the upgrade the bytes are relayed both ways as they come, between the
//! browser's connection and the server's own socket, never decoded and encoded again:
//! the two ends speak the protocol to each other. Only the frames' headers are read on
//! the way (a few bytes of each), so that each data message counts as activity and in
//! the metrics (pings do not).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use bytes::{Bytes, BytesMut};
use futures_util::Stream;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::either::Either;

use super::{session_cookies, unreachable_session};
use crate::http::ApiError;
use crate::sessions::upstream::{Connection, UpstreamError};
use crate::sessions::Route;

/// Headers of the browser's handshake passed to the session's server (servers that
/// check the origin compare it with the host: code-server does).
const PASSED: &[&str] = &[
    "host",
    "origin",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
    "user-agent",
];

/// Headers of the server's answer passed to the browser.
const ANSWERED: &[&str] = &[
    "sec-websocket-accept",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
];

/// What one read of the relay takes at most.
const READ_BUFFER: usize = 64 << 10;

pub(super) async fn relay(
    req: &HttpRequest,
    body: web::Payload,
    route: Arc<Route>,
    metrics: crate::metrics::ProxyMetrics,
) -> Result<HttpResponse, ApiError> {
    let headers = req.headers();
    if headers.get("sec-websocket-version").map(|v| v.as_bytes()) != Some(b"13")
        || !headers.contains_key("sec-websocket-key")
    {
        return Err(ApiError::invalid(
            "sec-websocket-version",
            "bad websocket handshake: it needs Sec-WebSocket-Version 13 and a key",
        ));
    }
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| req.path().to_string(), |p| p.as_str().to_string());
    let path = route.upstream_path(&path);
    let mut handshake = hyper::Request::get(path.as_ref())
        .header(hyper::header::CONNECTION, "Upgrade")
        .header(hyper::header::UPGRADE, "websocket")
        .header(hyper::header::AUTHORIZATION, route.authorization.as_str());
    for name in PASSED {
        if let Some(v) = headers.get(*name) {
            handshake = handshake.header(*name, v.as_bytes());
        }
    }
    if !headers.contains_key("host") {
        handshake = handshake.header(hyper::header::HOST, "localhost");
    }
    if let Some(cookies) = session_cookies(req, &route) {
        handshake = handshake.header("cookie", cookies);
    }
    let handshake = handshake
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| ApiError::invalid("upgrade", format!("bad websocket request: {e}")))?;

    let stream = route
        .upstream()
        .ok_or_else(|| ApiError::Unavailable("the session is not ready yet".into()))?
        .connect()
        .await
        .map_err(unreachable_session)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| unreachable_session(UpstreamError::Http(e)))?;
    actix_web::rt::spawn(async move {
        let _ = connection.with_upgrades().await;
    });
    let answer = sender
        .send_request(handshake)
        .await
        .map_err(|e| unreachable_session(UpstreamError::Http(e)))?;
    if answer.status() != hyper::StatusCode::SWITCHING_PROTOCOLS {
        tracing::info!(status = %answer.status(), "the session refused a websocket");
        return Err(match answer.status().as_u16() {
            404 => ApiError::NotFound,
            400 => ApiError::invalid("upgrade", "the session's server refused the websocket"),
            _ => ApiError::BadGateway("the session's server refused the websocket".into()),
        });
    }
    let mut response = HttpResponse::build(StatusCode::SWITCHING_PROTOCOLS);
    response.upgrade("websocket");
    for name in ANSWERED {
        if let Some(v) = answer.headers().get(*name) {
            response.insert_header((*name, v.as_bytes()));
        }
    }
    let upgraded = hyper::upgrade::on(answer)
        .await
        .map_err(|e| unreachable_session(UpstreamError::Http(e)))?;
    // The connection itself, with what was read past the server's answer: no layer
    // between the two sockets but this one.
    let parts = upgraded
        .downcast::<TokioIo<Connection>>()
        .map_err(|_| ApiError::internal("the upgraded connection is not the one opened"))?;
    let (from_server, to_server): (Box<dyn AsyncRead + Unpin>, Box<dyn AsyncWrite + Unpin>) =
        match parts.io.into_inner() {
            Either::Left(unix) => {
                let (r, w) = unix.into_split();
                (Box::new(r), Box::new(w))
            }
            Either::Right(tcp) => {
                let (r, w) = tcp.into_split();
                (Box::new(r), Box::new(w))
            }
        };
    let relay = Relay {
        from_browser: body,
        to_server,
        unsent: Bytes::new(),
        browser_done: false,
        from_server,
        received: (!parts.read_buf.is_empty()).then_some(parts.read_buf),
        buffer: BytesMut::new(),
        to_session: Frames::default(),
        to_browser: Frames::default(),
        route,
        metrics,
    };
    Ok(response.streaming(relay))
}

/// Both directions of an upgraded connection, driven by the response's body, which
/// the HTTP server polls whenever either side can move: what the browser sent is
/// written to the session's server, and what the server sends is the body. One task
/// for the two directions, so a message costs no wake-up of another task.
struct Relay {
    from_browser: web::Payload,
    to_server: Box<dyn AsyncWrite + Unpin>,
    /// What the browser sent that the server has not taken yet.
    unsent: Bytes,
    browser_done: bool,
    from_server: Box<dyn AsyncRead + Unpin>,
    /// What the server sent before the connection was handed over.
    received: Option<Bytes>,
    buffer: BytesMut,
    to_session: Frames,
    to_browser: Frames,
    route: Arc<Route>,
    metrics: crate::metrics::ProxyMetrics,
}

impl Relay {
    /// Move what the browser sent to the server, as far as both allow now.
    fn browser_to_server(&mut self, cx: &mut Context<'_>) {
        loop {
            while !self.unsent.is_empty() {
                match Pin::new(&mut self.to_server).poll_write(cx, &self.unsent) {
                    Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => {
                        self.unsent.clear();
                        self.browser_done = true;
                        return;
                    }
                    Poll::Ready(Ok(n)) => {
                        let _ = self.unsent.split_to(n);
                    }
                    Poll::Pending => return,
                }
            }
            if self.browser_done {
                let _ = Pin::new(&mut self.to_server).poll_shutdown(cx);
                return;
            }
            match Pin::new(&mut self.from_browser).poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    let messages = self.to_session.feed(&chunk);
                    if messages > 0 {
                        self.route.touch();
                        self.metrics.messages_to_session.inc_by(messages);
                    }
                    self.unsent = chunk;
                }
                Poll::Ready(Some(Err(_)) | None) => self.browser_done = true,
                Poll::Pending => return,
            }
        }
    }

    fn counted(&mut self, chunk: Bytes) -> Bytes {
        let messages = self.to_browser.feed(&chunk);
        if messages > 0 {
            self.route.touch();
            self.metrics.messages_to_browser.inc_by(messages);
        }
        chunk
    }
}

impl Stream for Relay {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        this.browser_to_server(cx);
        if let Some(early) = this.received.take() {
            return Poll::Ready(Some(Ok(this.counted(early))));
        }
        if this.buffer.capacity() < READ_BUFFER / 4 {
            this.buffer.reserve(READ_BUFFER);
        }
        match tokio_util::io::poll_read_buf(Pin::new(&mut this.from_server), cx, &mut this.buffer) {
            Poll::Ready(Ok(0)) => Poll::Ready(None),
            Poll::Ready(Ok(_)) => {
                let chunk = this.buffer.split().freeze();
                Poll::Ready(Some(Ok(this.counted(chunk))))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Reads the frame headers (RFC 6455 §5.2) of a byte stream as it passes, to count
/// its data messages: a text or binary frame begins one (continuations and control
/// frames do not). Payloads are skipped, never copied or unmasked.
#[derive(Debug, Default)]
struct Frames {
    /// The header read so far (at most 14 bytes).
    head: [u8; 14],
    have: usize,
    /// Payload bytes of the current frame still to skip.
    skip: u64,
}

impl Frames {
    /// Pass `bytes`; the data messages that began in them.
    fn feed(&mut self, mut bytes: &[u8]) -> u64 {
        let mut messages = 0;
        while !bytes.is_empty() {
            if self.skip > 0 {
                let n = (self.skip.min(bytes.len() as u64)) as usize;
                self.skip -= n as u64;
                bytes = &bytes[n..];
                continue;
            }
            let take = (self.needed() - self.have).min(bytes.len());
            self.head[self.have..self.have + take].copy_from_slice(&bytes[..take]);
            self.have += take;
            bytes = &bytes[take..];
            if self.have < self.needed() {
                continue;
            }
            if matches!(self.head[0] & 0x0f, 0x1 | 0x2) {
                messages += 1;
            }
            self.skip = self.payload_length();
            self.have = 0;
        }
        messages
    }

    /// The header's length as far as it is known: 2 bytes, then what the length and
    /// mask bits say.
    fn needed(&self) -> usize {
        if self.have < 2 {
            return 2;
        }
        let mask = if self.head[1] & 0x80 != 0 { 4 } else { 0 };
        let extended = match self.head[1] & 0x7f {
            126 => 2,
            127 => 8,
            _ => 0,
        };
        2 + extended + mask
    }

    fn payload_length(&self) -> u64 {
        match self.head[1] & 0x7f {
            126 => u64::from(u16::from_be_bytes([self.head[2], self.head[3]])),
            127 => {
                let mut eight = [0u8; 8];
                eight.copy_from_slice(&self.head[2..10]);
                u64::from_be_bytes(eight)
            }
            n => u64::from(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Frames;

    /// A frame as a client (masked) or a server sends it.
    fn frame(opcode: u8, fin: bool, payload: &[u8], masked: bool) -> Vec<u8> {
        let mut out = vec![(if fin { 0x80 } else { 0 }) | opcode];
        let mask_bit = if masked { 0x80 } else { 0 };
        match payload.len() {
            n if n < 126 => out.push(mask_bit | n as u8),
            n if n <= 0xffff => {
                out.push(mask_bit | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(mask_bit | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        if masked {
            out.extend_from_slice(&[1, 2, 3, 4]);
        }
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn data_messages_are_counted_however_the_bytes_are_cut() {
        let mut stream = Vec::new();
        stream.extend(frame(0x1, true, b"hello", true));
        stream.extend(frame(0x9, true, b"ping", true));
        stream.extend(frame(0x2, false, &[7u8; 300], false));
        stream.extend(frame(0x0, false, &[7u8; 70_000], false));
        stream.extend(frame(0xA, true, b"", false));
        stream.extend(frame(0x0, true, &[7u8; 10], false));
        stream.extend(frame(0x1, true, &[b'x'; 125], false));
        stream.extend(frame(0x8, true, &[3, 232], true));
        for cut in [1usize, 2, 3, 7, 13, 64, 1000, stream.len()] {
            let mut frames = Frames::default();
            let counted: u64 = stream.chunks(cut).map(|c| frames.feed(c)).sum();
            assert_eq!(counted, 3, "cut into pieces of {cut}");
            assert_eq!((frames.have, frames.skip), (0, 0), "ends on a frame's end");
        }
    }
}
