//! HTTP/1.1 to a session's server: over its unix socket on this machine, or over TCP
//! to a compute node (sessions under Slurm). One-shot requests for the portal's own
//! checks (readiness, kernel activity), and a pool of kept-alive connections per proxy
//! worker thread.
//!
//! A session's directory belongs to its user, who could put anything there, and swap
//! the socket's name for another between any two looks at it. So the listener is
//! authenticated, not the path: once connected, the credentials of the process
//! listening at the other end (`SO_PEERCRED`) must be the session user's (never
//! root); anything else is dropped before a byte is sent. (A first `lstat` only tells
//! "not there yet" and a planted link apart, for the messages.) A TCP address is
//! never the user's to choose: the host is the node Slurm runs the session on. Its
//! port is named by a file the user can write, so before a new TCP connection carries
//! anything, the server there must prove that it knows the session's token (a
//! challenge answered with HMAC-SHA256 under the token, by `atrium_proof.py` or the
//! TensorBoard launcher); whatever else listens on that port gets no request at all.
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
/// Idle connections kept per worker thread, all session servers together: each holds
/// buffers (about 30 KiB), and with many sessions the chance peaks of each one's
/// traffic would otherwise stay open for good (100 sessions under load: 1,450
/// connections, 80 MiB), as would those of sessions that ended.
const MAX_IDLE_TOTAL: usize = 256;
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
    /// What listens there could not prove that it knows the session's token.
    #[error("what listens at {0} is not the session's server")]
    NotProven(SocketAddr),
}

/// Where a session's server listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Upstream {
    /// A unix socket on this machine, and the uid that must own it (`None`: not
    /// checked; single-user mode).
    Unix { path: PathBuf, owner: Option<u32> },
    /// A TCP address on a compute node, and what its server must prove first.
    Tcp { addr: SocketAddr, proof: Proof },
}

/// What a session's server on a compute node must prove on each new connection.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Proof {
    /// The session's token.
    pub token: String,
    /// `<prefix>atrium/proof`, where the server answers a challenge.
    pub path: String,
}

impl std::fmt::Debug for Proof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proof").field("path", &self.path).finish()
    }
}

/// The longest answer to a challenge read.
const MAX_PROOF_ANSWER: usize = 8192;

impl Proof {
    /// The proof path of the session served under `prefix` (`/user/<u>/<s>/`).
    pub fn under(prefix: &str, token: &str) -> Proof {
        Proof {
            token: token.to_string(),
            path: format!("{}/atrium/proof", prefix.trim_end_matches('/')),
        }
    }

    /// The answer a server that knows the token gives to `challenge`.
    pub fn answer(&self, challenge: &str) -> String {
        use hmac::{Hmac, Mac};
        match Hmac::<sha2::Sha256>::new_from_slice(self.token.as_bytes()) {
            Ok(mut mac) => {
                mac.update(challenge.as_bytes());
                hex::encode(mac.finalize().into_bytes())
            }
            Err(_) => String::new(),
        }
    }

    /// Ask the server on `stream` to prove it knows the token. `Ok(true)` when the
    /// server closes the connection after answering (TensorBoard's server closes every
    /// one): the next connection to the same port then reaches the same server, which
    /// holds the port while it runs.
    async fn check(&self, stream: &mut TcpStream, addr: SocketAddr) -> Result<bool, UpstreamError> {
        use tokio::io::AsyncWriteExt;
        let challenge = hex::encode(rand::random::<[u8; 32]>());
        let request = format!(
            "GET {}?challenge={challenge} HTTP/1.1\r\nHost: atrium\r\n\
             Connection: keep-alive\r\n\r\n",
            self.path
        );
        stream.write_all(request.as_bytes()).await?;
        let mut got = Vec::with_capacity(512);
        let (head_len, body_len) = loop {
            if let Some(found) = response_head(&got) {
                break found.ok_or(UpstreamError::NotProven(addr))?;
            }
            read_more(stream, &mut got, addr).await?;
        };
        while got.len() < head_len + body_len {
            read_more(stream, &mut got, addr).await?;
        }
        let closes = closes_connection(&got[..head_len]);
        // Anything beyond the answer was not asked for.
        let expected = self.answer(&challenge);
        let body = &got[head_len..];
        if body.len() != body_len
            || !bool::from(subtle::ConstantTimeEq::ct_eq(body, expected.as_bytes()))
        {
            return Err(UpstreamError::NotProven(addr));
        }
        Ok(closes)
    }
}

/// Read what the server sent next onto `got`: an end of the stream, or more than an
/// answer can be, is no proof.
async fn read_more(
    stream: &mut TcpStream,
    got: &mut Vec<u8>,
    addr: SocketAddr,
) -> Result<(), UpstreamError> {
    use tokio::io::AsyncReadExt;
    let mut chunk = [0u8; 1024];
    let n = stream.read(&mut chunk).await?;
    got.extend_from_slice(&chunk[..n]);
    if n == 0 || got.len() > MAX_PROOF_ANSWER {
        return Err(UpstreamError::NotProven(addr));
    }
    Ok(())
}

/// Whether a response's head says the server closes the connection.
fn closes_connection(head: &[u8]) -> bool {
    String::from_utf8_lossy(head).split("\r\n").any(|l| {
        l.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("connection")
                && value.trim().eq_ignore_ascii_case("close")
        })
    })
}

/// The end of a response's head and its body's length, once the head is all there:
/// `Some(None)` when it is not a 200 with a `Content-Length`.
fn response_head(got: &[u8]) -> Option<Option<(usize, usize)>> {
    let end = got.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&got[..end]);
    let mut lines = head.split("\r\n");
    let ok = lines
        .next()
        .is_some_and(|status| status.split_whitespace().nth(1) == Some("200"));
    let length = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().ok())
            .flatten()
    });
    Some(match (ok, length) {
        (true, Some(n)) if n <= MAX_PROOF_ANSWER => Some((end, n)),
        _ => None,
    })
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
                // The name is the user's to swap between the look above and the
                // connect: what was reached is judged by who listens there.
                let stream = UnixStream::connect(path).await?;
                listener_is(&stream, *owner).map_err(|_| UpstreamError::NotTheirs(path.clone()))?;
                Ok(Either::Left(stream))
            }
            Upstream::Tcp { addr, proof } => {
                let open = async {
                    let mut stream = tcp(addr).await?;
                    if proof.check(&mut stream, *addr).await? {
                        stream = tcp(addr).await?;
                    }
                    Ok::<_, UpstreamError>(stream)
                };
                let stream = tokio::time::timeout(CONNECT_TIMEOUT, open)
                    .await
                    .map_err(|_| UpstreamError::Timeout)??;
                Ok(Either::Right(stream))
            }
        }
    }
}

/// Whether the process listening at the other end of `stream` runs as `owner` (its
/// credentials when it called `listen`, from `SO_PEERCRED`): never root, whatever the
/// socket's file says; `None` (single-user mode, the portal not root) the portal's own
/// uid. The socket's name lives in a folder the user writes, so it may lead anywhere
/// by the time it is connected to: to a socket of root's, or of another user's server.
fn listener_is(stream: &UnixStream, owner: Option<u32>) -> Result<(), u32> {
    let expected = owner.unwrap_or_else(|| nix::unistd::geteuid().as_raw());
    let peer = stream.peer_cred().map_err(|_| u32::MAX)?.uid();
    if peer != expected || (peer == 0 && owner.is_some()) {
        tracing::warn!(
            peer,
            expected,
            "a session's socket led to another user's listener: refused"
        );
        return Err(peer);
    }
    Ok(())
}

async fn tcp(addr: &SocketAddr) -> Result<TcpStream, UpstreamError> {
    let stream = TcpStream::connect(addr).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::ConnectionRefused => UpstreamError::NotListening,
        _ => UpstreamError::Io(e),
    })?;
    stream.set_nodelay(true)?;
    Ok(stream)
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

/// A worker thread's idle connections, by session server.
#[derive(Default)]
struct Pool {
    idle: HashMap<Upstream, Vec<SendRequest<ProxyBody>>>,
    /// How many there are in `idle`, all servers together.
    count: usize,
}

impl Pool {
    fn take(&mut self, upstream: &Upstream) -> Option<SendRequest<ProxyBody>> {
        let sender = self.idle.get_mut(upstream)?.pop()?;
        self.count -= 1;
        Some(sender)
    }

    /// Keep `sender` unless the server's or the thread's idle connections are full.
    fn keep(&mut self, upstream: &Upstream, sender: SendRequest<ProxyBody>) {
        if self.count >= MAX_IDLE_TOTAL {
            // Room for this one where a closed connection (a server that is gone) is.
            self.idle.retain(|_, senders| {
                senders.retain(|s| !s.is_closed());
                !senders.is_empty()
            });
            self.count = self.idle.values().map(Vec::len).sum();
            if self.count >= MAX_IDLE_TOTAL {
                return;
            }
        }
        // The key is cloned only the first time a server's connection is pooled.
        match self.idle.get_mut(upstream) {
            Some(idle) if idle.len() < MAX_IDLE => idle.push(sender),
            Some(_) => return,
            None => {
                self.idle.insert(upstream.clone(), vec![sender]);
            }
        }
        self.count += 1;
    }
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
}

/// A kept-alive connection to `upstream` for this worker thread: an idle one that is
/// still open, or a new one. Must be called on a worker with a local task set (the
/// connection is driven by a local task, so bodies need not be `Send`).
pub async fn pooled(upstream: &Upstream) -> Result<SendRequest<ProxyBody>, UpstreamError> {
    loop {
        let idle = POOL.with(|p| p.borrow_mut().take(upstream));
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
    POOL.with(|p| p.borrow_mut().keep(upstream, sender));
}

#[cfg(test)]
mod proof_tests {
    use super::*;

    #[test]
    fn the_proof_is_what_atrium_proof_py_answers() {
        // python3 -c "import hmac,hashlib; print(hmac.new(b'tok123', b'a'*64,
        //   hashlib.sha256).hexdigest())"
        let p = Proof::under("/user/a/b/", "tok123");
        assert_eq!(p.path, "/user/a/b/atrium/proof");
        assert_eq!(
            p.answer(&"a".repeat(64)),
            "cef13672d95f43ee8eda06f126826f009f86ba0f7be2677d2ec6beb0b8267cd8"
        );
    }

    #[test]
    fn only_a_200_with_a_length_is_an_answer() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\ncontent-length: 64\r\n\r\nab";
        assert_eq!(response_head(ok), Some(Some((ok.len() - 2, 64))));
        assert_eq!(response_head(b"HTTP/1.1 200 OK\r\nContent-Le"), None);
        assert_eq!(
            response_head(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 3\r\n\r\n"),
            Some(None)
        );
        assert_eq!(
            response_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"),
            Some(None)
        );
        assert!(closes_connection(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
        ));
        assert!(!closes_connection(&ok[..ok.len() - 2]));
    }

    #[tokio::test]
    async fn a_server_that_does_not_know_the_token_gets_no_request() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        // A server that answers every request with a fixed 64-character body.
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut buf = [0u8; 4096];
            let n = socket.read(&mut buf).await.expect("read");
            seen.extend_from_slice(&buf[..n]);
            let body = "0".repeat(64);
            let _ = socket
                .write_all(
                    format!("HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n{body}").as_bytes(),
                )
                .await;
            let n = socket.read(&mut buf).await.unwrap_or(0);
            seen.extend_from_slice(&buf[..n]);
            String::from_utf8_lossy(&seen).into_owned()
        });
        let upstream = Upstream::Tcp {
            addr,
            proof: Proof::under("/user/a/b/", "the-sessions-token"),
        };
        let refused = upstream.connect().await;
        assert!(
            matches!(refused, Err(UpstreamError::NotProven(a)) if a == addr),
            "{refused:?}"
        );
        let seen = server.await.expect("server");
        assert!(
            seen.starts_with("GET /user/a/b/atrium/proof?challenge="),
            "{seen}"
        );
        assert!(!seen.contains("the-sessions-token"), "{seen}");
    }
}

#[cfg(test)]
mod pool_tests {
    use super::*;

    /// A connection over an in-memory pipe; the other end is returned to keep it open.
    async fn connection() -> (SendRequest<ProxyBody>, tokio::io::DuplexStream) {
        let (ours, theirs) = tokio::io::duplex(64);
        let (sender, conn) = http1::handshake(TokioIo::new(ours))
            .await
            .expect("handshake");
        tokio::task::spawn_local(async move {
            let _ = conn.await;
        });
        (sender, theirs)
    }

    fn server(i: usize) -> Upstream {
        Upstream::Unix {
            path: PathBuf::from(format!("/run/session-{i}/socket")),
            owner: None,
        }
    }

    #[tokio::test]
    async fn idle_connections_are_bounded_per_server_and_in_all() {
        // Connections are driven by local tasks, as on the proxy's workers.
        tokio::task::LocalSet::new().run_until(bounded()).await;
    }

    async fn bounded() {
        let mut pool = Pool::default();
        let mut others = Vec::new();
        for _ in 0..MAX_IDLE + 5 {
            let (sender, other) = connection().await;
            others.push(other);
            pool.keep(&server(0), sender);
        }
        assert_eq!(pool.count, MAX_IDLE, "one server keeps at most MAX_IDLE");
        for i in 1..MAX_IDLE_TOTAL {
            let (sender, other) = connection().await;
            others.push(other);
            pool.keep(&server(i), sender);
        }
        assert_eq!(
            pool.count, MAX_IDLE_TOTAL,
            "the thread keeps at most MAX_IDLE_TOTAL"
        );
        assert!(pool.take(&server(MAX_IDLE_TOTAL - 1)).is_none(), "not kept");
        assert!(pool.take(&server(1)).is_some());
        assert_eq!(pool.count, MAX_IDLE_TOTAL - 1);

        // A server that went away leaves room: its closed connections are dropped.
        let (sender, other) = connection().await;
        pool.keep(&server(1), sender);
        assert_eq!(pool.count, MAX_IDLE_TOTAL);
        drop(others.drain(..MAX_IDLE + 5));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while pool.idle[&server(0)].iter().any(|s| !s.is_closed()) {
            assert!(tokio::time::Instant::now() < deadline, "never closed");
            tokio::task::yield_now().await;
        }
        let (sender, another) = connection().await;
        pool.keep(&server(MAX_IDLE_TOTAL), sender);
        assert!(!pool.idle.contains_key(&server(0)));
        assert_eq!(pool.count, MAX_IDLE_TOTAL - MAX_IDLE + 1);
        assert!(pool.take(&server(MAX_IDLE_TOTAL)).is_some());
        drop((other, another, others));
    }
}
