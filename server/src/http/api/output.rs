//! `GET /api/v1/jobs/{id}/output`: a job's output file, whole (from an offset) or
//! followed as server-sent events, one `data:` line per output line, and an `end`
//! event once the job is over and everything was sent.
//!
//! The portal reads the file as root, so it opens it without following a final
//! symbolic link and serves it only when it belongs to the job's user: a user
//! cannot swap their output for a link or a hard link to someone else's file.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use actix_web::web::{self, Bytes};
use actix_web::HttpResponse;
use serde::Deserialize;
use utoipa::IntoParams;

use super::jobs::{job_info, JobInfo};
use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use scheduler::JobId;

/// Most bytes returned by one plain read.
const MAX_READ: u64 = 1 << 20;
const POLL: Duration = Duration::from_millis(200);
const KEEP_ALIVE: Duration = Duration::from_secs(15);

#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct OutputQuery {
    /// Stream new lines as server-sent events until the job ends.
    #[serde(default)]
    pub follow: bool,
    /// `stdout` (default) or `stderr` (when the job has a separate one).
    pub stream: Option<String>,
    /// Start at this byte offset (default: the last MiB).
    pub offset: Option<u64>,
}

/// A job's output.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/output", params(OutputQuery),
    responses((status = 200, description = "text/plain, or text/event-stream with follow=true"), (status = 404)))]
pub async fn get(
    caller: Principal,
    state: web::Data<AppState>,
    id: web::Path<String>,
    query: web::Query<OutputQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let job: JobId = id.parse().map_err(|_| ApiError::NotFound)?;
    let info = job_info(&state, &caller, job).await?;
    let path = match query.stream.as_deref() {
        None | Some("stdout") => info.stdout.clone(),
        Some("stderr") => info.stderr.clone().or(info.stdout.clone()),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "stream: \"{other}\" is neither stdout nor stderr"
            )))
        }
    };
    let Some(path) = path.map(PathBuf::from) else {
        return Err(ApiError::Conflict(
            "the job has not started: it has no output yet".into(),
        ));
    };
    let owner = owner_uid(&state, &info.user).await?;
    if !query.follow {
        let (text, next) = read_from(&path, owner, query.offset, MAX_READ)?;
        return Ok(HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .insert_header(("X-Output-Offset", next.to_string()))
            .body(text));
    }
    let follower = Follower {
        state: state.clone(),
        caller,
        job,
        path,
        owner,
        offset: query.offset.unwrap_or(0),
        partial: Vec::new(),
        last_sent: Instant::now(),
        last_check: Instant::now(),
        over: false,
        done: false,
    };
    let stream = futures_util::stream::unfold(follower, |mut f| async move {
        if f.done {
            return None;
        }
        let chunk = f.next_chunk().await;
        Some((Ok::<Bytes, actix_web::Error>(chunk), f))
    });
    Ok(HttpResponse::Ok()
        .content_type("text/event-stream")
        .insert_header(("Cache-Control", "no-cache"))
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(stream))
}

/// The uid a job's files must belong to.
async fn owner_uid(state: &AppState, user: &str) -> Result<u32, ApiError> {
    if !state.jobs.drop_privileges {
        return Ok(crate::launch::current_ids().0);
    }
    state
        .store
        .posix_identity(user)
        .await?
        .map(|i| i.uid)
        .ok_or(ApiError::NotFound)
}

/// The last part of a job's standard output for a page, and the offset to follow it
/// from; `None` while the job has no output file yet.
pub struct Tail {
    pub text: String,
    /// Where the file ended: `?follow=true&offset=` continues from here.
    pub next_offset: u64,
    /// Earlier output was left out.
    pub truncated: bool,
}

/// Read the last `max_bytes` of `info`'s standard output, as the API does (owned
/// regular files only), starting at a whole line.
pub async fn tail(
    state: &AppState,
    info: &JobInfo,
    max_bytes: u64,
) -> Result<Option<Tail>, ApiError> {
    let Some(path) = info.stdout.as_deref().map(PathBuf::from) else {
        return Ok(None);
    };
    let owner = owner_uid(state, &info.user).await?;
    let max_bytes = max_bytes.min(MAX_READ);
    let (text, next) = read_from(&path, owner, None, max_bytes)?;
    // Read from `len - max_bytes`, and `next` is where the file ended.
    let truncated = next > max_bytes;
    let text = match (truncated, text.find('\n')) {
        (true, Some(i)) => text[i + 1..].to_string(),
        _ => text,
    };
    Ok(Some(Tail {
        text,
        next_offset: next,
        truncated,
    }))
}

/// Read from `offset` (default: the last `last` bytes) at most [`MAX_READ`] bytes.
fn read_from(
    path: &Path,
    owner: u32,
    offset: Option<u64>,
    last: u64,
) -> Result<(String, u64), ApiError> {
    let refused = |e: std::io::Error| {
        tracing::warn!(path = %path.display(), error = %e, "refusing to serve job output");
        ApiError::forbidden("the output file is not a regular file of the job's user")
    };
    let Some(mut file) = crate::launch::open_owned(path, owner).map_err(refused)? else {
        return Ok((String::new(), offset.unwrap_or(0)));
    };
    let len = file.metadata().map_err(ApiError::internal)?.len();
    let start = offset.unwrap_or_else(|| len.saturating_sub(last)).min(len);
    file.seek(SeekFrom::Start(start))
        .map_err(ApiError::internal)?;
    let mut buf = Vec::new();
    file.take(MAX_READ)
        .read_to_end(&mut buf)
        .map_err(ApiError::internal)?;
    let next = start + buf.len() as u64;
    Ok((String::from_utf8_lossy(&buf).into_owned(), next))
}

struct Follower {
    state: web::Data<AppState>,
    caller: Principal,
    job: JobId,
    path: PathBuf,
    owner: u32,
    offset: u64,
    partial: Vec<u8>,
    last_sent: Instant,
    last_check: Instant,
    over: bool,
    done: bool,
}

impl Follower {
    /// The next piece of the event stream: lines, a keep-alive, or the end.
    async fn next_chunk(&mut self) -> Bytes {
        loop {
            let fresh = self.read_new();
            let mut out = String::new();
            if !fresh.is_empty() {
                self.partial.extend_from_slice(&fresh);
                while let Some(i) = self.partial.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = self.partial.drain(..=i).collect();
                    let text = String::from_utf8_lossy(&line[..line.len() - 1]);
                    out.push_str("data: ");
                    out.push_str(text.trim_end_matches('\r'));
                    out.push_str("\n\n");
                }
            }
            if !out.is_empty() {
                self.last_sent = Instant::now();
                return Bytes::from(out);
            }
            if self.over {
                // The job is over and nothing new came: send what is left, then end.
                self.done = true;
                let mut out = String::new();
                if !self.partial.is_empty() {
                    out.push_str("data: ");
                    out.push_str(&String::from_utf8_lossy(&self.partial));
                    out.push_str("\n\n");
                }
                out.push_str("event: end\ndata: {}\n\n");
                return Bytes::from(out);
            }
            if self.last_check.elapsed() >= Duration::from_millis(500) {
                self.last_check = Instant::now();
                self.over = match job_info(&self.state, &self.caller, self.job).await {
                    Ok(info) => {
                        !matches!(info.state.as_str(), "PENDING" | "RUNNING" | "COMPLETING")
                    }
                    Err(_) => true,
                };
                if self.over {
                    continue;
                }
            }
            if self.last_sent.elapsed() >= KEEP_ALIVE {
                self.last_sent = Instant::now();
                return Bytes::from_static(b": keep-alive\n\n");
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn read_new(&mut self) -> Vec<u8> {
        let Ok(Some(mut file)) = crate::launch::open_owned(&self.path, self.owner) else {
            return Vec::new();
        };
        let mut buf = Vec::new();
        if file.seek(SeekFrom::Start(self.offset)).is_ok()
            && file.take(MAX_READ).read_to_end(&mut buf).is_ok()
        {
            self.offset += buf.len() as u64;
        }
        buf
    }
}
