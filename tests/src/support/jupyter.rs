//! Jupyter Server as the end-to-end tests use it: start a kernel, run code on it and read its
//! output over the kernel's websocket (in both wire protocols JupyterLab speaks), keep a kernel
//! busy, save and read notebooks. Also the test environment holding JupyterLab and TensorBoard,
//! and [`JupyterServer`], a Jupyter Server started directly (without the portal) to prove
//! these helpers.
//!
//! Every helper takes the session's base URL, e.g. `http://127.0.0.1:PORT/user/alice/default/`,
//! and headers to send with every request and websocket handshake: through the portal, its
//! login cookie ([`cookie_headers`]), the portal adding Jupyter's token itself; against a
//! server reached directly, `Authorization: token …` ([`JupyterServer::headers`]). Jupyter
//! skips its XSRF and origin checks for token-authenticated requests, so plain POST and PUT
//! requests work either way.
//!
//! Must not touch: the portal. Everything here speaks Jupyter's own protocols only.

use std::hash::{BuildHasher as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use futures_util::{SinkExt as _, StreamExt as _};
use reqwest::cookie::CookieStore as _;
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, COOKIE, SEC_WEBSOCKET_PROTOCOL};
use reqwest::Url;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::{self, Message};

use super::process::{is_root, Supervised, SupervisedCommand};
use super::wait;

/// The environment variable naming the Python environment with JupyterLab and TensorBoard.
pub const VENV_ENV: &str = "ATRIUM_TEST_JUPYTER";
/// Where `tests/install-deps.sh` builds that environment by default.
pub const DEFAULT_VENV: &str = "/opt/atrium-test/jupyter";
/// The websocket subprotocol of Jupyter's binary kernel-channel framing.
pub const V1_SUBPROTOCOL: &str = "v1.kernel.websocket.jupyter.org";
/// Version of the Jupyter messaging protocol the requests claim.
const PROTOCOL_VERSION: &str = "5.3";
/// `username` in the headers of the messages sent.
const USERNAME: &str = "atrium-test";
/// How long [`JupyterServer::start`] waits for the server to answer.
const START_DEADLINE: Duration = Duration::from_secs(60);

/// The framing of messages on a kernel's channels websocket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WsProtocol {
    /// No subprotocol: one JSON text frame per message, its channel inside.
    Legacy,
    /// [`V1_SUBPROTOCOL`]: binary frames of offsets, channel and message parts (JupyterLab's).
    V1,
}

/// The Python environment of the session tests (`$ATRIUM_TEST_JUPYTER`, else [`DEFAULT_VENV`]).
pub fn venv() -> PathBuf {
    std::env::var_os(VENV_ENV)
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_VENV), PathBuf::from)
}

/// The session tests' Python environment, or `Ok(None)` after saying why `test` is skipped:
/// only outside CI may it be missing. With `CI` set (other than to `false` or `0`), a missing
/// environment is an error.
pub fn venv_or_skip(test: &str) -> anyhow::Result<Option<PathBuf>> {
    let venv = venv();
    let complete = ["jupyter-lab", "tensorboard", "python"]
        .iter()
        .all(|b| venv.join("bin").join(b).is_file());
    if complete {
        return Ok(Some(venv));
    }
    anyhow::ensure!(
        !super::in_ci(),
        "{test}: the Jupyter environment {} is missing or incomplete (CI is set, so this fails \
         instead of skipping); run tests/install-deps.sh",
        venv.display()
    );
    eprintln!(
        "SKIPPED {test}: no Jupyter environment at {} (set {VENV_ENV}, or run tests/install-deps.sh)",
        venv.display()
    );
    Ok(None)
}

/// The `Cookie` header `jar` holds for `url`, as a header map for these helpers. (A client
/// built with `cookie_provider(jar)` sends the same cookies itself; the websocket needs them
/// given.)
pub fn cookie_headers(jar: &reqwest::cookie::Jar, url: &Url) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(cookies) = jar.cookies(url) {
        headers.insert(COOKIE, cookies);
    }
    headers
}

/// `base` with its scheme turned into the websocket one (`http` → `ws`, `https` → `wss`).
pub fn ws_url(base: &Url) -> anyhow::Result<Url> {
    let scheme = match base.scheme() {
        "http" | "ws" => "ws",
        "https" | "wss" => "wss",
        other => anyhow::bail!("{base}: no websocket scheme for {other:?}"),
    };
    let mut url = base.clone();
    url.set_scheme(scheme)
        .map_err(|()| anyhow::anyhow!("{base}: cannot switch the scheme to {scheme}"))?;
    Ok(url)
}

/// Starts a kernel of the server's default kernelspec; returns its id.
pub async fn start_kernel(
    client: &reqwest::Client,
    base: &Url,
    headers: &HeaderMap,
) -> anyhow::Result<String> {
    let url = endpoint(base, &["api", "kernels"])?;
    let response = client
        .post(url.clone())
        .headers(headers.clone())
        .json(&json!({}))
        .send()
        .await
        .with_context(|| format!("POST {url}"))?;
    let model = json_body(response, &format!("POST {url}")).await?;
    model["id"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("POST {url}: no kernel id in {model}"))
}

/// The kernel's `execution_state` as the server last saw it (`idle`, `busy`, `starting` …).
pub async fn kernel_state(
    client: &reqwest::Client,
    base: &Url,
    headers: &HeaderMap,
    kernel_id: &str,
) -> anyhow::Result<String> {
    let url = endpoint(base, &["api", "kernels", kernel_id])?;
    let response = client
        .get(url.clone())
        .headers(headers.clone())
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    let model = json_body(response, &format!("GET {url}")).await?;
    model["execution_state"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("GET {url}: no execution_state in {model}"))
}

/// Runs `code` on the kernel over its channels websocket (`base` may be the `http` or the `ws`
/// URL) and returns what it printed to stdout, once the kernel has replied and gone idle.
/// An exception in the code is an error here, naming it and carrying the output so far;
/// `deadline` bounds the whole exchange, connection included.
pub async fn execute(
    base: &Url,
    headers: &HeaderMap,
    kernel_id: &str,
    code: &str,
    protocol: WsProtocol,
    deadline: Duration,
) -> anyhow::Result<String> {
    let mut execution = Execution::default();
    let outcome = tokio::time::timeout(
        deadline,
        execution.run(base, headers, kernel_id, code, protocol),
    )
    .await;
    let context = || format!("running {code:?} on kernel {kernel_id} ({protocol:?})");
    match outcome {
        Err(_) => Err(anyhow::anyhow!(
            "timed out after {deadline:?} {}; {}",
            context(),
            execution.progress()
        )),
        Ok(Err(e)) => Err(e.context(format!("{}; {}", context(), execution.progress()))),
        Ok(Ok(())) => Ok(execution.stdout),
    }
}

/// Starts `import time; time.sleep(…)` for `busy` on the kernel and returns as soon as the
/// kernel reports itself busy with it, without waiting for the end; the websocket is closed,
/// the kernel keeps sleeping (and the server reports it `busy`), as for idle-culling tests.
pub async fn kernel_busy_for(
    base: &Url,
    headers: &HeaderMap,
    kernel_id: &str,
    busy: Duration,
    protocol: WsProtocol,
    deadline: Duration,
) -> anyhow::Result<()> {
    let code = format!("import time; time.sleep({})", busy.as_secs_f64());
    let started = async {
        let mut channels = Channels::open(base, headers, kernel_id, protocol).await?;
        let msg_id = channels.send_execute(&code).await?;
        loop {
            let msg = channels.receive().await?;
            if msg.is_reply_to(&msg_id)
                && msg.channel == "iopub"
                && msg.msg_type() == "status"
                && msg.content["execution_state"] == "busy"
            {
                break;
            }
        }
        channels.close().await;
        anyhow::Ok(())
    };
    tokio::time::timeout(deadline, started)
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "timed out after {deadline:?} waiting for kernel {kernel_id} to start {code:?}"
            )
        })?
        .with_context(|| format!("making kernel {kernel_id} busy with {code:?}"))
}

/// An nbformat 4.5 notebook of code cells with `sources`, without outputs, Python kernelspec.
pub fn notebook(sources: &[&str]) -> Value {
    let cells: Vec<Value> = sources
        .iter()
        .enumerate()
        .map(|(i, source)| {
            json!({
                "cell_type": "code",
                "id": format!("cell-{i}"),
                "metadata": {},
                "execution_count": null,
                "outputs": [],
                "source": source,
            })
        })
        .collect();
    json!({
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
        "cells": cells,
    })
}

/// Saves `notebook` (nbformat JSON) at `path` (relative to the server's root, `/`-separated);
/// returns the contents model the server answers with (no content).
pub async fn save_notebook(
    client: &reqwest::Client,
    base: &Url,
    headers: &HeaderMap,
    path: &str,
    notebook: &Value,
) -> anyhow::Result<Value> {
    let url = contents_url(base, path)?;
    let response = client
        .put(url.clone())
        .headers(headers.clone())
        .json(&json!({"type": "notebook", "format": "json", "content": notebook}))
        .send()
        .await
        .with_context(|| format!("PUT {url}"))?;
    json_body(response, &format!("PUT {url}")).await
}

/// The contents model of `path` with its content (a notebook's JSON, a file's text, a
/// directory's listing).
pub async fn get_contents(
    client: &reqwest::Client,
    base: &Url,
    headers: &HeaderMap,
    path: &str,
) -> anyhow::Result<Value> {
    let mut url = contents_url(base, path)?;
    url.query_pairs_mut().append_pair("content", "1");
    let response = client
        .get(url.clone())
        .headers(headers.clone())
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    json_body(response, &format!("GET {url}")).await
}

/// `base` joined with `segments`, each percent-encoded; `base` is taken as a directory even
/// without its trailing slash.
fn endpoint(base: &Url, segments: &[&str]) -> anyhow::Result<Url> {
    let mut url = base.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.path_segments_mut()
        .map_err(|()| anyhow::anyhow!("{base} cannot be a base URL"))?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

fn contents_url(base: &Url, path: &str) -> anyhow::Result<Url> {
    let mut segments = vec!["api", "contents"];
    segments.extend(path.split('/').filter(|s| !s.is_empty()));
    endpoint(base, &segments)
}

/// The JSON body of a successful response; otherwise an error with the status and the body.
async fn json_body(response: reqwest::Response, what: &str) -> anyhow::Result<Value> {
    let status = response.status();
    let body = response
        .text()
        .await
        .with_context(|| format!("{what}: reading the body"))?;
    anyhow::ensure!(
        status.is_success(),
        "{what}: {status}: {}",
        body.chars().take(500).collect::<String>()
    );
    serde_json::from_str(&body).with_context(|| format!("{what}: not JSON: {body:.200}"))
}

/// What an [`execute`] has seen so far.
#[derive(Default)]
struct Execution {
    connected: bool,
    msg_id: Option<String>,
    stdout: String,
    busy: bool,
    idle: bool,
    reply: Option<Value>,
}

impl Execution {
    async fn run(
        &mut self,
        base: &Url,
        headers: &HeaderMap,
        kernel_id: &str,
        code: &str,
        protocol: WsProtocol,
    ) -> anyhow::Result<()> {
        let mut channels = Channels::open(base, headers, kernel_id, protocol).await?;
        self.connected = true;
        let msg_id = channels.send_execute(code).await?;
        self.msg_id = Some(msg_id.clone());
        // The reply (shell) and the outputs (iopub) travel on different sockets: the outputs
        // are complete once iopub says idle for this request.
        while !(self.idle && self.reply.is_some()) {
            let msg = channels.receive().await?;
            if !msg.is_reply_to(&msg_id) {
                continue;
            }
            match (msg.channel.as_str(), msg.msg_type()) {
                ("iopub", "stream") if msg.content["name"] == "stdout" => {
                    self.stdout
                        .push_str(msg.content["text"].as_str().unwrap_or_default());
                }
                ("iopub", "status") => match msg.content["execution_state"].as_str() {
                    Some("busy") => self.busy = true,
                    Some("idle") => self.idle = true,
                    _ => {}
                },
                ("shell", "execute_reply") => self.reply = Some(msg.content),
                _ => {}
            }
        }
        channels.close().await;
        let reply = self.reply.as_ref().map_or(&Value::Null, |r| r);
        anyhow::ensure!(
            reply["status"] == "ok",
            "the kernel answered {}: {}: {}",
            reply["status"],
            reply["ename"].as_str().unwrap_or("?"),
            reply["evalue"].as_str().unwrap_or("?")
        );
        Ok(())
    }

    fn progress(&self) -> String {
        format!(
            "seen: connected {}, request {}, busy {}, idle {}, reply {}, stdout {:?}",
            self.connected,
            self.msg_id.as_deref().unwrap_or("not sent"),
            self.busy,
            self.idle,
            self.reply
                .as_ref()
                .map_or("none", |r| r["status"].as_str().unwrap_or("?")),
            self.stdout
        )
    }
}

type WsStream =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One connection to a kernel's channels websocket.
struct Channels {
    ws: WsStream,
    protocol: WsProtocol,
    session: String,
}

impl Channels {
    async fn open(
        base: &Url,
        headers: &HeaderMap,
        kernel_id: &str,
        protocol: WsProtocol,
    ) -> anyhow::Result<Self> {
        let session = new_id();
        let mut url = endpoint(&ws_url(base)?, &["api", "kernels", kernel_id, "channels"])?;
        url.query_pairs_mut().append_pair("session_id", &session);
        let mut request = url
            .as_str()
            .into_client_request()
            .with_context(|| format!("websocket request for {url}"))?;
        request.headers_mut().extend(headers.clone());
        if protocol == WsProtocol::V1 {
            request.headers_mut().insert(
                SEC_WEBSOCKET_PROTOCOL,
                HeaderValue::from_static(V1_SUBPROTOCOL),
            );
        }
        // With a subprotocol asked for, the handshake fails unless the server chose it.
        let (ws, _response) = tokio_tungstenite::connect_async(request)
            .await
            .map_err(|e| handshake_error(e, &url))?;
        Ok(Self {
            ws,
            protocol,
            session,
        })
    }

    /// Sends an `execute_request` for `code` on the shell channel; returns its msg_id.
    async fn send_execute(&mut self, code: &str) -> anyhow::Result<String> {
        let msg_id = new_id();
        let msg = KernelMessage {
            channel: "shell".into(),
            header: json!({
                "msg_id": msg_id,
                "session": self.session,
                "username": USERNAME,
                "date": now_iso8601(),
                "msg_type": "execute_request",
                "version": PROTOCOL_VERSION,
            }),
            parent_header: json!({}),
            metadata: json!({}),
            content: json!({
                "code": code,
                "silent": false,
                "store_history": false,
                "user_expressions": {},
                "allow_stdin": false,
                "stop_on_error": true,
            }),
        };
        self.ws
            .send(msg.encode(self.protocol))
            .await
            .context("sending execute_request")?;
        Ok(msg_id)
    }

    /// The next kernel message (pings and pongs skipped).
    async fn receive(&mut self) -> anyhow::Result<KernelMessage> {
        loop {
            let frame = self
                .ws
                .next()
                .await
                .context("the server closed the kernel channels")?
                .context("reading the kernel channels")?;
            if let Some(msg) = KernelMessage::decode(frame, self.protocol)? {
                return Ok(msg);
            }
        }
    }

    async fn close(mut self) {
        // Best effort: the exchange is over either way.
        let _ = self.ws.close(None).await;
    }
}

fn handshake_error(e: tungstenite::Error, url: &Url) -> anyhow::Error {
    match e {
        tungstenite::Error::Http(response) => {
            let body = response
                .body()
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default();
            anyhow::anyhow!(
                "websocket handshake with {url} refused: {}: {:.300}",
                response.status(),
                body
            )
        }
        other => anyhow::Error::new(other).context(format!("websocket handshake with {url}")),
    }
}

/// A Jupyter message with the channel it travels on.
#[derive(Debug)]
struct KernelMessage {
    channel: String,
    header: Value,
    parent_header: Value,
    metadata: Value,
    content: Value,
}

impl KernelMessage {
    fn msg_type(&self) -> &str {
        self.header["msg_type"].as_str().unwrap_or_default()
    }

    fn is_reply_to(&self, msg_id: &str) -> bool {
        self.parent_header["msg_id"] == msg_id
    }

    fn encode(&self, protocol: WsProtocol) -> Message {
        match protocol {
            WsProtocol::Legacy => Message::text(
                json!({
                    "channel": self.channel,
                    "header": self.header,
                    "parent_header": self.parent_header,
                    "metadata": self.metadata,
                    "content": self.content,
                    "buffers": [],
                })
                .to_string(),
            ),
            WsProtocol::V1 => {
                let parts: Vec<Vec<u8>> = [
                    &self.header,
                    &self.parent_header,
                    &self.metadata,
                    &self.content,
                ]
                .iter()
                .map(|v| v.to_string().into_bytes())
                .collect();
                Message::binary(encode_v1(&self.channel, &parts))
            }
        }
    }

    /// `None` for control frames; an error for a close frame or a malformed message.
    fn decode(frame: Message, protocol: WsProtocol) -> anyhow::Result<Option<Self>> {
        let whole: Value = match (frame, protocol) {
            (Message::Text(text), _) => {
                serde_json::from_str(text.as_str()).context("a text frame that is not JSON")?
            }
            (Message::Binary(bytes), WsProtocol::V1) => {
                let (channel, parts) = decode_v1(&bytes)?;
                let part = |i: usize| -> anyhow::Result<Value> {
                    let bytes = parts
                        .get(i)
                        .with_context(|| format!("no message part {i}"))?;
                    if bytes.is_empty() {
                        return Ok(json!({}));
                    }
                    serde_json::from_slice(bytes)
                        .with_context(|| format!("message part {i} is not JSON"))
                };
                return Ok(Some(Self {
                    channel,
                    header: part(0)?,
                    parent_header: part(1)?,
                    metadata: part(2)?,
                    content: part(3)?,
                }));
            }
            (Message::Binary(bytes), WsProtocol::Legacy) => decode_legacy_binary(&bytes)?,
            (Message::Close(frame), _) => {
                anyhow::bail!("the server closed the kernel channels: {frame:?}")
            }
            _ => return Ok(None),
        };
        let field = |name: &str| whole.get(name).cloned().unwrap_or_else(|| json!({}));
        Ok(Some(Self {
            channel: whole["channel"].as_str().unwrap_or_default().to_owned(),
            header: field("header"),
            parent_header: field("parent_header"),
            metadata: field("metadata"),
            content: field("content"),
        }))
    }
}

/// The v1 framing: the number of offsets, the offsets (all little-endian u64), the channel
/// name, then the parts; offset 0 is where the channel starts, the last one where the message
/// ends.
fn encode_v1(channel: &str, parts: &[Vec<u8>]) -> Vec<u8> {
    let count = parts.len() + 2;
    let mut offsets = Vec::with_capacity(count);
    let mut at = 8 * (count + 1);
    offsets.push(at);
    at += channel.len();
    offsets.push(at);
    for part in parts {
        at += part.len();
        offsets.push(at);
    }
    let mut out = Vec::with_capacity(at);
    out.extend_from_slice(&(count as u64).to_le_bytes());
    for offset in offsets {
        out.extend_from_slice(&(offset as u64).to_le_bytes());
    }
    out.extend_from_slice(channel.as_bytes());
    for part in parts {
        out.extend_from_slice(part);
    }
    out
}

fn decode_v1(bytes: &[u8]) -> anyhow::Result<(String, Vec<&[u8]>)> {
    let word = |i: usize| -> anyhow::Result<usize> {
        let raw = bytes
            .get(8 * i..8 * (i + 1))
            .with_context(|| format!("v1 frame of {} bytes cut in its offsets", bytes.len()))?;
        let value = u64::from_le_bytes(raw.try_into().context("eight bytes")?);
        usize::try_from(value).context("v1 offset out of range")
    };
    let count = word(0)?;
    anyhow::ensure!(count >= 2, "v1 frame with {count} offsets");
    let offsets = (1..=count).map(word).collect::<anyhow::Result<Vec<_>>>()?;
    let slice = |from: usize, to: usize| {
        bytes
            .get(from..to)
            .with_context(|| format!("v1 frame of {} bytes: bad range {from}..{to}", bytes.len()))
    };
    let channel = std::str::from_utf8(slice(offsets[0], offsets[1])?)
        .context("v1 channel name is not UTF-8")?
        .to_owned();
    let parts = offsets[1..]
        .windows(2)
        .map(|w| slice(w[0], w[1]))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok((channel, parts))
}

/// The legacy protocol's binary frames (messages with buffers): the number of parts and their
/// offsets (big-endian u32), the JSON message first, then the buffers.
fn decode_legacy_binary(bytes: &[u8]) -> anyhow::Result<Value> {
    let word = |i: usize| -> anyhow::Result<usize> {
        let raw = bytes
            .get(4 * i..4 * (i + 1))
            .context("legacy binary frame cut in its offsets")?;
        Ok(u32::from_be_bytes(raw.try_into().context("four bytes")?) as usize)
    };
    let parts = word(0)?;
    let start = word(1)?;
    let end = if parts > 1 { word(2)? } else { bytes.len() };
    let json = bytes
        .get(start..end)
        .context("legacy binary frame: bad message range")?;
    serde_json::from_slice(json).context("legacy binary frame: message is not JSON")
}

/// A fresh random id (32 hex digits), as Jupyter's msg_id and session.
fn new_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut ids = [0u64; 2];
    for (i, id) in ids.iter_mut().enumerate() {
        // RandomState's keys are random per process and differ for every instance.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_usize(i);
        *id = h.finish();
    }
    format!("{:016x}{:016x}", ids[0], ids[1])
}

/// The current UTC time as ISO 8601 with microseconds, as Jupyter writes message dates.
fn now_iso8601() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rest / 3_600,
        rest % 3_600 / 60,
        rest % 60,
        now.subsec_micros()
    )
}

/// A Jupyter Server (JupyterLab's) of the session tests' environment, started directly on a
/// free port of 127.0.0.1 with a base URL like the portal's and a random token: what the
/// portal's proxy will reach through a unix socket. It, its kernels and its directory (root,
/// runtime, configuration) go when it is dropped or the test process dies.
pub struct JupyterServer {
    server: Supervised,
    dir: PathBuf,
    base: Url,
    token: String,
}

impl JupyterServer {
    /// Starts JupyterLab from `venv` serving under `base_path` (e.g. `/user/alice/default/`);
    /// returns once `api/status` answers.
    pub async fn start(venv: &Path, base_path: &str) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("atrium-jupyter-")
            .tempdir()
            .context("creating a temp dir for Jupyter")?
            .keep();
        let root = dir.join("root");
        let runtime = dir.join("runtime");
        for d in [
            &root,
            &runtime,
            &dir.join("config"),
            &dir.join("data"),
            &dir.join("ipython"),
        ] {
            std::fs::create_dir(d).with_context(|| format!("creating {}", d.display()))?;
        }
        let token = new_id();
        let mut spec = SupervisedCommand::new(
            "jupyter lab",
            venv.join("bin/jupyter-lab"),
            dir.join("jupyter.log"),
        )
        .args([
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0",
            "--ServerApp.port_retries=0",
            &format!("--ServerApp.base_url={base_path}"),
            &format!("--ServerApp.root_dir={}", root.display()),
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.news_url=None",
        ]);
        if is_root() {
            spec = spec.args(["--allow-root"]);
        }
        for (name, value) in [
            ("JUPYTER_TOKEN", token.clone()),
            ("JUPYTER_RUNTIME_DIR", runtime.display().to_string()),
            (
                "JUPYTER_CONFIG_DIR",
                dir.join("config").display().to_string(),
            ),
            ("JUPYTER_DATA_DIR", dir.join("data").display().to_string()),
            ("IPYTHONDIR", dir.join("ipython").display().to_string()),
        ] {
            spec.envs.push((name.into(), value.into()));
        }
        spec.stop_signal = "TERM";
        spec.current_dir = Some(root.clone());
        // Kernels run in sessions of their own; their command lines name the runtime dir,
        // which is how the supervisor finds and ends them.
        spec.remove_on_exit = Some(dir.clone());
        let server = match Supervised::spawn(spec) {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let mut jupyter = Self {
            server,
            dir,
            base: Url::parse("http://127.0.0.1/").context("placeholder URL")?,
            token,
        };
        let port = wait::until("Jupyter to write its server info", START_DEADLINE, || {
            let (server, runtime) = (&jupyter.server, &runtime);
            async move {
                if !server.is_running() {
                    return Some(Err(anyhow::anyhow!("jupyter lab exited during startup")));
                }
                server_port(runtime).map(Ok)
            }
        })
        .await
        .and_then(|r| r)
        .with_context(|| format!("starting Jupyter; its log ends:\n{}", jupyter.log_tail(30)))?;
        jupyter.base = Url::parse(&format!("http://127.0.0.1:{port}/"))
            .and_then(|u| u.join(base_path.trim_start_matches('/')))
            .with_context(|| format!("base URL from port {port} and {base_path:?}"))?;
        let status = endpoint(&jupyter.base, &["api", "status"])?;
        let client = reqwest::Client::new();
        let headers = jupyter.headers();
        wait::until("Jupyter to answer api/status", START_DEADLINE, || {
            let (client, status, headers) = (&client, &status, &headers);
            async move {
                let response = client
                    .get(status.clone())
                    .headers(headers.clone())
                    .send()
                    .await?;
                anyhow::ensure!(
                    response.status().is_success(),
                    "{status}: {}",
                    response.status()
                );
                anyhow::Ok(())
            }
        })
        .await
        .with_context(|| format!("Jupyter's log ends:\n{}", jupyter.log_tail(30)))?;
        Ok(jupyter)
    }

    /// The server's base URL, e.g. `http://127.0.0.1:PORT/user/alice/default/`.
    pub fn base(&self) -> &Url {
        &self.base
    }

    /// `Authorization: token …`, the header the portal's proxy adds.
    pub fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        let value = HeaderValue::from_str(&format!("token {}", self.token))
            .expect("a hex token is a valid header value");
        headers.insert(AUTHORIZATION, value);
        headers
    }

    /// The directory the server serves (`ServerApp.root_dir`).
    pub fn root_dir(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// Last `max_lines` lines of the server's log.
    pub fn log_tail(&self, max_lines: usize) -> String {
        self.server.log_tail(max_lines)
    }

    /// Stops the server and its kernels and removes its directory. Idempotent.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        self.server.stop()
    }
}

/// The port in the `jpserver-*.json` file Jupyter writes into its runtime dir once it listens.
fn server_port(runtime: &Path) -> Option<u16> {
    std::fs::read_dir(runtime)
        .ok()?
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("jpserver-") && name.ends_with(".json")
        })
        .find_map(|e| {
            let info: Value = serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            u16::try_from(info["port"].as_u64()?)
                .ok()
                .filter(|&p| p != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_frames_round_trip() {
        let parts = vec![
            b"{\"a\":1}".to_vec(),
            b"{}".to_vec(),
            Vec::new(),
            b"[2]".to_vec(),
        ];
        let bytes = encode_v1("shell", &parts);
        // 6 offsets: channel start, channel end, the end of each part.
        assert_eq!(
            u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")),
            6
        );
        let (channel, decoded) = decode_v1(&bytes).expect("decodes");
        assert_eq!(channel, "shell");
        assert_eq!(decoded, parts.iter().map(Vec::as_slice).collect::<Vec<_>>());
    }

    #[test]
    fn endpoints_encode_segments_and_keep_the_base_path() {
        let base = Url::parse("http://h:1/user/alice/default").expect("url");
        let url = contents_url(&base, "dir/my notebook.ipynb").expect("url");
        assert_eq!(
            url.as_str(),
            "http://h:1/user/alice/default/api/contents/dir/my%20notebook.ipynb"
        );
        let ws = ws_url(&Url::parse("https://h/user/a/b/").expect("url")).expect("ws");
        assert_eq!(ws.as_str(), "wss://h/user/a/b/");
    }

    #[test]
    fn dates_are_iso8601_utc() {
        let date = now_iso8601();
        assert_eq!(date.len(), "2026-01-01T00:00:00.000000Z".len(), "{date}");
        assert!(date.starts_with("20") && date.ends_with('Z'), "{date}");
    }
}
