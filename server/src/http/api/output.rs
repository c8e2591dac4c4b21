//! `GET /api/v1/jobs/{id}/output`: a job's output file, whole (from an offset) or
//! followed as server-sent events, one `data:` line per output line, and an `end`
//! event once the job is over and everything was sent.
//!
//! Which file, and whether the caller may read it, is the jobs service's
//! (`services::output`); this handler frames what it reads.

use std::time::{Duration, Instant};

use actix_web::web::{self, Bytes};
use actix_web::HttpResponse;
use scheduler::JobId;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::{Principal, Scope};
use crate::http::{ApiError, AppState};
use crate::services::output::{Output, MAX_READ};

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
    query: crate::http::query::Query<OutputQuery>,
) -> Result<HttpResponse, ApiError> {
    caller.require(Scope::Read)?;
    let job: JobId = id.parse().map_err(|_| ApiError::NotFound)?;
    let (_, output) = state
        .jobs
        .output(&caller, job, query.stream.as_deref())
        .await?;
    if !query.follow {
        let (text, next) = output.read(query.offset, MAX_READ)?;
        return Ok(HttpResponse::Ok()
            .content_type("text/plain; charset=utf-8")
            .insert_header(("X-Output-Offset", next.to_string()))
            .body(text));
    }
    let follower = Follower {
        state: state.clone(),
        caller,
        job,
        output,
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

struct Follower {
    state: web::Data<AppState>,
    caller: Principal,
    job: JobId,
    output: Output,
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
            let fresh = self.output.read_new(&mut self.offset);
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
                self.over = match self.state.jobs.show(&self.caller, self.job).await {
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
}
