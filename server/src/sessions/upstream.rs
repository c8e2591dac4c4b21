//! HTTP/1.1 to a session's server: over its unix socket on this machine, or over TCP
//! to a compute node (sessions under Slurm). One-shot requests for the portal's own
//! checks (readiness, kernel activity), and a pool of kept-alive connections per proxy
//! worker thread.
//!
//! A session's directory belongs to its user, who could put anything there: a
//! connection is made only to a socket that is owned by that user (checked with
//! `lstat`, so a symbolic link planted in its place is refused). A TCP address is
//! never the user's to choose: the host is the node Slurm runs the session on.
//! Must not touch: authentication, the database or the scheduler.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use http_body_util::BodyExt;
use hyper::body::Frame;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpStream, UnixStream};
use tokio_util::either::Either;

/// The request body of pooled connections: nothing, or the browser's body streamed as
/// it arrives. Connections are driven on the proxy worker's own thread, so the body
/// need not be `Send` (the browser's body is not).
pub enum ProxyBody {
    Empty,
    Stream(Pin<Box<dyn Stream<Item = Result<Bytes, std::io::Error>>>>),
}

impl hyper::body::Body for ProxyBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            ProxyBody::Empty => Poll::Ready(None),
            ProxyBody::Stream(s) => s
                .as_mut()
                .poll_next(cx)
                .map(|o| o.map(|r| r.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ProxyBody::Empty)
    }
}

/// Idle connections kept per session server and worker thread.
const MAX_IDLE: usize = 64;
/// The longest a TCP connection to a compute node may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A connection to a session's server.
pub type Connection = Either<UnixStream, TcpStream>;

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("the session's socket is not there yet")]
    NoSocket,
    #[error("{0} is not a socket of the session's user")]
    NotTheirs(PathBuf),
    #[error("connecting to the session failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("the session's server answered badly: {0}")]
    Http(#[from] hyper::Error),
    #[error("the session's server did not answer in time")]
    Timeout,
    /// Nothing listens there (yet): the server is still starting.
    #[error("the session's server is not listening yet")]
    NotListening,
}

/// Where a session's server listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Upstream {
    /// A unix socket on this machine, and the uid that must own it (`None`: not
    /// checked; single-user mode).
    Unix { path: PathBuf, owner: Option<u32> },
    /// A TCP address on a compute node.
    Tcp(SocketAddr),
}

impl Upstream {
    /// Connect, after checking what a socket's path is.
    pub async fn connect(&self) -> Result<Connection, UpstreamError> {
        match self {
            Upstream::Unix { path, owner } => {
                let meta = match std::fs::symlink_metadata(path) {
                    Ok(m) => m,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(UpstreamError::NoSocket)
                    }
                    Err(e) => return Err(e.into()),
                };
                if !meta.file_type().is_socket() || owner.is_some_and(|uid| meta.uid() != uid) {
                    return Err(UpstreamError::NotTheirs(path.clone()));
                }
                Ok(Either::Left(UnixStream::connect(path).await?))
            }
            Upstream::Tcp(addr) => {
                let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
                    .await
                    .map_err(|_| UpstreamError::Timeout)?
                    .map_err(|e| match e.kind() {
                        std::io::ErrorKind::ConnectionRefused => UpstreamError::NotListening,
                        _ => UpstreamError::Io(e),
                    })?;
                stream.set_nodelay(true)?;
                Ok(Either::Right(stream))
            }
        }
    }
}

/// One GET on a fresh connection, for the portal's own checks: the status and up to
/// `limit` bytes of the body.
pub async fn get(
    upstream: &Upstream,
    path_and_query: &str,
    authorization: &str,
    timeout: Duration,
    limit: usize,
) -> Result<(hyper::StatusCode, Bytes), UpstreamError> {
    send(
        upstream,
        hyper::Method::GET,
        path_and_query,
        authorization,
        None,
        timeout,
        limit,
    )
    .await
}

/// One request on a fresh connection, with an optional JSON body.
pub async fn send(
    upstream: &Upstream,
    method: hyper::Method,
    path_and_query: &str,
    authorization: &str,
    json: Option<Bytes>,
    timeout: Duration,
    limit: usize,
) -> Result<(hyper::StatusCode, Bytes), UpstreamError> {
    let work = async {
        let stream = upstream.connect().await?;
        let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path_and_query)
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::AUTHORIZATION, authorization);
        if json.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        let body = http_body_util::Full::new(json.unwrap_or_default());
        let req = req
            .body(body)
            .map_err(|e| UpstreamError::Io(std::io::Error::other(e)))?;
        let res = sender.send_request(req).await?;
        let status = res.status();
        let body = http_body_util::Limited::new(res.into_body(), limit)
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        Ok((status, body))
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| UpstreamError::Timeout)?
}

thread_local! {
    static POOL: RefCell<HashMap<Upstream, Vec<SendRequest<ProxyBody>>>> = RefCell::new(HashMap::new());
}

/// A kept-alive connection to `upstream` for this worker thread: an idle one that is
/// still open, or a new one. Must be called on a worker with a local task set (the
/// connection is driven by a local task, so bodies need not be `Send`).
pub async fn pooled(upstream: &Upstream) -> Result<SendRequest<ProxyBody>, UpstreamError> {
    loop {
        let idle = POOL.with(|p| p.borrow_mut().get_mut(upstream).and_then(Vec::pop));
        match idle {
            Some(mut sender) => {
                if sender.ready().await.is_ok() {
                    return Ok(sender);
                }
            }
            None => break,
        }
    }
    let stream = upstream.connect().await?;
    let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::task::spawn_local(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// Give a connection whose last response was read to the end back to the pool.
pub fn release(upstream: &Upstream, sender: SendRequest<ProxyBody>) {
    if sender.is_closed() {
        return;
    }
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        // The key is cloned only the first time a server's connection is pooled.
        match pool.get_mut(upstream) {
            Some(idle) if idle.len() < MAX_IDLE => idle.push(sender),
            Some(_) => {}
            None => {
                pool.insert(upstream.clone(), vec![sender]);
            }
        }
    });
}
