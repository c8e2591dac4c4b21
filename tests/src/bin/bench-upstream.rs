//! A fast, cheap upstream for proxy benchmarks (bench/sessions.sh): it stands where a
//! session's JupyterLab would, so that what is measured through a proxy is the proxy.
//!
//!   bench-upstream [--unix PATH]… [--tcp 127.0.0.1:PORT]… [--threads N]
//!
//! Plain HTTP/1.1 with keep-alive on every listener:
//! - a websocket upgrade on a path ending in `/ws` is accepted and every text or binary
//!   message is echoed back;
//! - any other request is answered `200` with a fixed 13-byte body.
//!
//! The path prefix is ignored (a proxy forwards `/user/<u>/<s>/…` unchanged). Port 0 is
//! allowed. Once a listener is bound it prints one line, `listening on unix:PATH` or
//! `listening on http://ADDR`, then `ready` after all of them, so that scripts can wait
//! for either. A unix socket left over at PATH is replaced; the socket is removed at exit
//! (SIGTERM, SIGINT). One runtime thread by default.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context};
use futures_util::{SinkExt, StreamExt};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const BODY: &[u8] = b"hello, bench\n";

const USAGE: &str =
    "usage: bench-upstream [--unix PATH]... [--tcp 127.0.0.1:PORT]... [--threads N]";

struct Options {
    unix: Vec<PathBuf>,
    tcp: Vec<SocketAddr>,
    threads: usize,
}

fn parse_args() -> anyhow::Result<Options> {
    let mut options = Options {
        unix: Vec::new(),
        tcp: Vec::new(),
        threads: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--unix" => options.unix.push(PathBuf::from(value("--unix")?)),
            "--tcp" => {
                let text = value("--tcp")?;
                let addr: SocketAddr = text
                    .parse()
                    .with_context(|| format!("--tcp {text}: not an IP:PORT address"))?;
                options.tcp.push(addr);
            }
            "--threads" => {
                options.threads = value("--threads")?
                    .parse()
                    .context("--threads: not a number")?;
                if options.threads == 0 {
                    bail!("--threads must be at least 1");
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    if options.unix.is_empty() && options.tcp.is_empty() {
        bail!("nothing to listen on\n{USAGE}");
    }
    Ok(options)
}

fn main() {
    if let Err(e) = try_main() {
        eprintln!("bench-upstream: {e:#}");
        std::process::exit(2);
    }
}

fn try_main() -> anyhow::Result<()> {
    let options = parse_args()?;
    let runtime = if options.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(options.threads)
            .enable_all()
            .build()?
    };
    runtime.block_on(serve(options))
}

async fn serve(options: Options) -> anyhow::Result<()> {
    for path in &options.unix {
        // A socket left by an earlier run would make bind fail; anything else is kept.
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            use std::os::unix::fs::FileTypeExt;
            if meta.file_type().is_socket() {
                std::fs::remove_file(path)
                    .with_context(|| format!("removing the old socket {}", path.display()))?;
            }
        }
        let listener =
            UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
        println!("listening on unix:{}", path.display());
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        tokio::spawn(connection(stream));
                    }
                    Err(e) => accept_failed(&e).await,
                }
            }
        });
    }
    for addr in &options.tcp {
        if !addr.ip().is_loopback() {
            bail!("--tcp {addr}: only loopback addresses are served");
        }
        let listener = TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        println!("listening on http://{}", listener.local_addr()?);
        tokio::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(connection(stream));
                    }
                    Err(e) => accept_failed(&e).await,
                }
            }
        });
    }
    println!("ready");

    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    for path in &options.unix {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Out of file descriptors and the like: say so, and give the system a moment.
async fn accept_failed(error: &std::io::Error) {
    eprintln!("bench-upstream: accept: {error}");
    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
}

async fn connection<S>(stream: S)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let served = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service_fn(handle))
        .with_upgrades()
        .await;
    if let Err(e) = served {
        // Clients closing mid-request at the end of a load run are expected.
        if !e.is_incomplete_message() {
            eprintln!("bench-upstream: connection: {e}");
        }
    }
}

async fn handle(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.uri().path().ends_with("/ws") && wants_websocket(&req) {
        return Ok(upgrade(req));
    }
    let mut response = Response::new(Full::new(Bytes::from_static(BODY)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    Ok(response)
}

fn wants_websocket(req: &Request<Incoming>) -> bool {
    let has_token = |name: header::HeaderName, token: &str| {
        req.headers().get_all(name).iter().any(|v| {
            v.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|part| part.trim().eq_ignore_ascii_case(token))
            })
        })
    };
    has_token(header::CONNECTION, "upgrade")
        && has_token(header::UPGRADE, "websocket")
        && req.headers().contains_key(header::SEC_WEBSOCKET_KEY)
}

/// Answers 101 and echoes on the upgraded connection.
fn upgrade(mut req: Request<Incoming>) -> Response<Full<Bytes>> {
    let Some(accept) = req
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .map(|key| derive_accept_key(key.as_bytes()))
    else {
        return status(StatusCode::BAD_REQUEST);
    };
    let Ok(accept) = HeaderValue::from_str(&accept) else {
        return status(StatusCode::BAD_REQUEST);
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let ws =
                    WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None)
                        .await;
                echo(ws).await;
            }
            Err(e) => eprintln!("bench-upstream: upgrade: {e}"),
        }
    });
    let mut response = status(StatusCode::SWITCHING_PROTOCOLS);
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    response
}

async fn echo<S>(mut ws: WebSocketStream<S>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    while let Some(message) = ws.next().await {
        let reply = match message {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => m,
            // Pings are answered by the protocol layer; a close is answered likewise.
            Ok(Message::Close(_)) => break,
            Ok(_) => continue,
            Err(_) => return,
        };
        if ws.send(reply).await.is_err() {
            return;
        }
    }
    let _ = ws.close(None).await;
}

fn status(code: StatusCode) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = code;
    response
}
