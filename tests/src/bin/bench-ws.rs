//! Websocket ping-pong load for proxy benchmarks (bench/sessions.sh).
//!
//!   bench-ws URL --connections N --seconds S [--header 'Name: value']... [--size BYTES]
//!            [--warmup SECONDS] [--threads T]
//!
//! Opens N websocket connections to URL (`ws://`, loopback only: 127.0.0.1, localhost or
//! [::1]), then on each one sends a binary message of BYTES bytes (32 by default), waits
//! for its echo and repeats. Round trips that start after the warm-up (1 s by default)
//! and end within the S seconds that follow are counted. Prints one machine-readable line
//!
//!   ws: connections=N seconds=S size=B messages=M msgs_per_s=X p50_ms=A p99_ms=B max_ms=C errors=E
//!
//! and one line for people. messages/s are round trips per second over all connections.
//! Exits with 1 if a connection failed during the run or no round trip was counted, with
//! 2 on bad arguments or if a connection could not be opened (the handshake's answer is
//! printed). The client runs on one thread unless --threads says otherwise, to leave the
//! cores to what is measured.

use std::time::Duration;

use anyhow::{bail, Context};
use futures_util::{SinkExt, StreamExt};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue, Request};
use tokio_tungstenite::tungstenite::{Bytes, Error as WsError, Message};

const USAGE: &str = "usage: bench-ws URL --connections N --seconds S [--header 'Name: value']... \
                     [--size BYTES] [--warmup SECONDS] [--threads T]";

/// How long past the end of the run a missing echo is waited for.
const LATE: Duration = Duration::from_secs(10);

struct Options {
    url: String,
    connections: usize,
    seconds: f64,
    warmup: f64,
    size: usize,
    threads: usize,
    headers: Vec<(HeaderName, HeaderValue)>,
}

fn parse_args() -> anyhow::Result<Options> {
    let mut url = None;
    let mut options = Options {
        url: String::new(),
        connections: 0,
        seconds: 0.0,
        warmup: 1.0,
        size: 32,
        threads: 1,
        headers: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().with_context(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--connections" | "-c" => {
                options.connections = value("--connections")?
                    .parse()
                    .context("--connections: not a number")?;
            }
            "--seconds" | "-d" => {
                options.seconds = value("--seconds")?
                    .parse()
                    .context("--seconds: not a number")?;
            }
            "--warmup" => {
                options.warmup = value("--warmup")?
                    .parse()
                    .context("--warmup: not a number")?;
            }
            "--size" => {
                options.size = value("--size")?.parse().context("--size: not a number")?;
            }
            "--threads" => {
                options.threads = value("--threads")?
                    .parse()
                    .context("--threads: not a number")?;
            }
            "--header" | "-H" => {
                let text = value("--header")?;
                let (name, val) = text
                    .split_once(':')
                    .with_context(|| format!("--header {text:?}: expected 'Name: value'"))?;
                let name = HeaderName::from_bytes(name.trim().as_bytes())
                    .with_context(|| format!("--header {text:?}: bad name"))?;
                let val = HeaderValue::from_str(val.trim())
                    .with_context(|| format!("--header {text:?}: bad value"))?;
                options.headers.push((name, val));
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other if other.starts_with('-') => bail!("unknown option {other:?}\n{USAGE}"),
            other => {
                if url.replace(other.to_owned()).is_some() {
                    bail!("more than one URL\n{USAGE}");
                }
            }
        }
    }
    options.url = url.with_context(|| format!("no URL\n{USAGE}"))?;
    if options.connections == 0 {
        bail!("--connections must be at least 1\n{USAGE}");
    }
    if !(options.seconds > 0.0 && options.seconds.is_finite()) {
        bail!("--seconds must be positive\n{USAGE}");
    }
    if !(options.warmup >= 0.0 && options.warmup.is_finite()) {
        bail!("--warmup must not be negative");
    }
    if options.threads == 0 {
        bail!("--threads must be at least 1");
    }
    Ok(options)
}

/// The handshake request, with the extra headers; refuses anything but ws:// to loopback.
fn request(options: &Options) -> anyhow::Result<Request<()>> {
    let mut req = options
        .url
        .as_str()
        .into_client_request()
        .with_context(|| format!("{}: not a websocket URL", options.url))?;
    let uri = req.uri();
    if uri.scheme_str() != Some("ws") {
        bail!("{}: only ws:// URLs are supported", options.url);
    }
    let host = uri.host().unwrap_or("");
    if !matches!(host, "127.0.0.1" | "localhost" | "[::1]" | "::1") {
        bail!(
            "{}: refusing a host other than 127.0.0.1, localhost or [::1]",
            options.url
        );
    }
    for (name, value) in &options.headers {
        req.headers_mut().append(name.clone(), value.clone());
    }
    Ok(req)
}

fn main() {
    match try_main() {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("bench-ws: {e:#}");
            std::process::exit(2);
        }
    }
}

fn try_main() -> anyhow::Result<bool> {
    let options = parse_args()?;
    let req = request(&options)?;
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
    runtime.block_on(run(&options, req))
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn connect(req: Request<()>) -> anyhow::Result<Socket> {
    match tokio_tungstenite::connect_async_with_config(req, None, true).await {
        Ok((ws, _)) => Ok(ws),
        Err(WsError::Http(response)) => {
            let body = response
                .body()
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            bail!(
                "the handshake was answered {}: {}",
                response.status(),
                body.trim()
            )
        }
        Err(e) => Err(e.into()),
    }
}

/// What one connection did: the round-trip times (µs) in the window, and its error.
struct Outcome {
    micros: Vec<u32>,
    error: Option<String>,
}

async fn run(options: &Options, req: Request<()>) -> anyhow::Result<bool> {
    let mut sockets = Vec::with_capacity(options.connections);
    let opened =
        futures_util::future::join_all((0..options.connections).map(|_| connect(req.clone())))
            .await;
    for (i, socket) in opened.into_iter().enumerate() {
        sockets.push(socket.with_context(|| format!("connection {i} to {}", options.url))?);
    }

    let payload = Bytes::from(vec![b'x'; options.size]);
    let start = Instant::now();
    let window_start = start + Duration::from_secs_f64(options.warmup);
    let window_end = window_start + Duration::from_secs_f64(options.seconds);
    let tasks: Vec<_> = sockets
        .into_iter()
        .map(|ws| tokio::spawn(ping_pong(ws, payload.clone(), window_start, window_end)))
        .collect();
    let mut micros = Vec::new();
    let mut errors = Vec::new();
    for task in tasks {
        let outcome = task.await.context("a connection's task failed")?;
        micros.extend(outcome.micros);
        errors.extend(outcome.error);
    }

    micros.sort_unstable();
    let messages = micros.len();
    let rate = messages as f64 / options.seconds;
    // The nearest-rank quantile, per mille.
    let ms = |per_mille: usize| -> f64 {
        if micros.is_empty() {
            return 0.0;
        }
        let rank = (micros.len() * per_mille).div_ceil(1000);
        f64::from(micros[rank.clamp(1, micros.len()) - 1]) / 1000.0
    };
    let (p50, p99, max) = (ms(500), ms(990), ms(1000));
    println!(
        "ws: connections={} seconds={} size={} messages={messages} msgs_per_s={rate:.1} \
         p50_ms={p50:.3} p99_ms={p99:.3} max_ms={max:.3} errors={}",
        options.connections,
        options.seconds,
        options.size,
        errors.len()
    );
    println!(
        "{rate:.0} messages/s (round trips of {} bytes) over {} connections in {} s; \
         round trip p50 {p50:.3} ms, p99 {p99:.3} ms, max {max:.3} ms",
        options.size, options.connections, options.seconds
    );
    for error in &errors {
        eprintln!("bench-ws: {error}");
    }
    Ok(errors.is_empty() && messages > 0)
}

async fn ping_pong(
    mut ws: Socket,
    payload: Bytes,
    window_start: Instant,
    window_end: Instant,
) -> Outcome {
    let mut micros = Vec::new();
    let error = loop {
        let sent = Instant::now();
        if sent >= window_end {
            break None;
        }
        if let Err(e) = ws.send(Message::Binary(payload.clone())).await {
            break Some(format!("send: {e}"));
        }
        let echoed = loop {
            match tokio::time::timeout_at(window_end + LATE, ws.next()).await {
                Err(_) => break Err("no echo within 10 s after the end of the run".to_owned()),
                Ok(None) => break Err("the connection was closed".to_owned()),
                Ok(Some(Err(e))) => break Err(format!("receive: {e}")),
                Ok(Some(Ok(Message::Binary(data)))) => break Ok(data.len()),
                Ok(Some(Ok(Message::Text(text)))) => break Ok(text.len()),
                Ok(Some(Ok(Message::Close(frame)))) => {
                    break Err(format!("closed by the server: {frame:?}"))
                }
                Ok(Some(Ok(_))) => continue, // ping, pong
            }
        };
        let done = Instant::now();
        match echoed {
            Ok(len) if len == payload.len() => {}
            Ok(len) => break Some(format!("echo of {len} bytes for {}", payload.len())),
            Err(e) => break Some(e),
        }
        if sent >= window_start && done <= window_end {
            let us = done.duration_since(sent).as_micros();
            micros.push(u32::try_from(us).unwrap_or(u32::MAX));
        }
    };
    if error.is_none() {
        let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
    }
    Outcome { micros, error }
}
