//! Following one session from its queued job to its end: progress for the page and
//! the event stream, readiness (the server answers on its socket), the warning before
//! the time limit, where a server on a compute node listens, and what is recorded
//! when it ends.
//! Must not touch: HTTP types or SQL (through the store only), a backend's own types
//! (the session's host is a `SessionHost`).

use std::sync::Arc;
use std::time::Duration;

use scheduler::{JobId, JobState, SqueueFilter, TimeLimit};

use super::apps::{App, Ready};
use super::{portal, script, upstream, Event, Progress, Route, Sessions};
use crate::privilege::Identity;
use crate::sched::host::SessionHost;
use crate::sched::SchedError;
use crate::store::SessionRecord;
use crate::util::now_ms;

/// How often a starting session's socket is tried: start → ready is on this path.
const PROBE_EVERY: Duration = Duration::from_millis(15);
const QUEUED_EVERY: Duration = Duration::from_millis(250);
const RUNNING_EVERY: Duration = Duration::from_millis(500);
/// Lines of the server's log shown when it fails.
const LOG_LINES: usize = 25;
/// Most bytes of a connection file read.
const CONNECTION_BYTES: usize = 4096;

fn url(route_prefix: &str, app: &App) -> String {
    format!("{route_prefix}{}", app.landing())
}

/// Most events kept of a session.
const MAX_EVENTS: usize = 64;

/// The events a session's row tells of: the log kept when it ended, else asked for
/// and ready.
fn recorded_events(record: &SessionRecord) -> Vec<Event> {
    if let Some(events) = record
        .events
        .as_deref()
        .and_then(|e| serde_json::from_str::<Vec<Event>>(e).ok())
    {
        return events;
    }
    let mut events = vec![Event::at(record.created_at, "Queued")];
    if let Some(t) = record.ready_at {
        events.push(Event::at(t, "Ready"));
    }
    events
}

/// The first progress of a session being followed.
pub(super) fn initial(record: &SessionRecord, prefix: &str, app: &App) -> Progress {
    let events = recorded_events(record);
    match record.state.as_str() {
        "ready" => Progress {
            progress: 100,
            message: "Ready".into(),
            ready: true,
            url: Some(url(prefix, app)),
            state: "ready".into(),
            events,
            ..Default::default()
        },
        state => Progress {
            progress: 5,
            message: "Queued".into(),
            state: state.to_string(),
            events,
            ..Default::default()
        },
    }
}

/// Add an event to the session's log (once: the same words twice in a row are one).
fn event(route: &Route, message: &str) {
    let mut p = route.progress();
    if p.events.last().is_some_and(|e| e.message == message) || p.events.len() >= MAX_EVENTS {
        return;
    }
    p.events.push(Event::at(now_ms(), message));
    route.set_progress(p);
}

/// The last word on a session that is over.
pub(super) fn final_progress(record: &SessionRecord) -> Progress {
    let reason = record.end_reason.as_deref().unwrap_or("ended");
    let failed = reason == "failed";
    let message = match reason {
        "stopped" => "Stopped".to_string(),
        "idle" => "Stopped after being idle".to_string(),
        "time_limit" => "Stopped at its time limit".to_string(),
        "cancelled" => "Cancelled".to_string(),
        "failed" => format!(
            "Failed: {}",
            record
                .message
                .as_deref()
                .and_then(|m| m.lines().next())
                .unwrap_or("the server ended")
        ),
        _ => "Ended".to_string(),
    };
    let mut events = recorded_events(record);
    if let (Some(t), None) = (record.ended_at, &record.events) {
        events.push(Event::at(t, message.clone()));
    }
    Progress {
        progress: 100,
        message,
        ready: false,
        url: None,
        state: "ended".into(),
        failed,
        warning: None,
        log: failed.then(|| record.message.clone()).flatten(),
        events,
    }
}

/// The warning while Slurm does not answer.
const SLURM_UNKNOWN: &str = "Slurm is not answering: this session's state is unknown for now.";

/// Follow the session until it ends, then record how. Its files are reached as its
/// user (`None` when the user has no identity: nothing is read on a compute node
/// then, and the session does not get ready there).
pub(super) async fn follow(sessions: Sessions, route: Arc<Route>, custom: bool) {
    let Some(job) = route.job else { return };
    let user = sessions
        .as_user(&route.owner)
        .await
        .inspect_err(|e| {
            tracing::error!(session = route.id, error = %e, "the session's user has no identity")
        })
        .ok();
    let end = run(&sessions, &route, job, custom, user.as_ref()).await;
    finish(&sessions, &route, end, user.as_ref()).await;
}

/// How the job ended, as far as the watcher saw.
struct End {
    state: JobState,
    message: Option<String>,
}

async fn run(
    sessions: &Sessions,
    route: &Route,
    job: JobId,
    custom: bool,
    user: Option<&Identity>,
) -> End {
    let host = &sessions.inner.host;
    let on_node = !host.is_local();
    let store = &sessions.inner.store;
    let scheduler = &sessions.inner.scheduler;
    let ready_timeout = sessions.inner.config.sessions.ready_timeout.0;
    let warning = sessions.inner.config.sessions.time_limit_warning.0;
    let probe = match (custom, route.app.ready()) {
        (true, _) => Some(route.upstream_path(&route.prefix).into_owned()),
        (false, Ready::Socket) => None,
        (false, Ready::Path(p)) => Some(
            route
                .upstream_path(&format!("{}{p}", route.prefix))
                .into_owned(),
        ),
    };
    let mut socket_seen = false;
    let mut starting_since: Option<tokio::time::Instant> = None;
    let mut warned = false;
    let mut last_queue_look: Option<tokio::time::Instant> = None;
    loop {
        let view = match scheduler.job(&portal(), job).await {
            Ok(v) => v,
            Err(SchedError::NotFound) => {
                // Forgotten by the scheduler: the row has the end.
                let row = store.job(job.job as i64, -1).await.ok();
                return End {
                    state: row
                        .as_ref()
                        .and_then(|r| JobState::parse(&r.state))
                        .unwrap_or(JobState::Failed),
                    message: row.and_then(|r| r.message),
                };
            }
            Err(_) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        match view.state {
            JobState::Pending if on_node => {
                // Slurm's own words: its state and why the job waits.
                let message = match view.reason {
                    Some(r) => format!("Queued in Slurm: PENDING ({})", r.name()),
                    None => "Queued in Slurm: PENDING".to_string(),
                };
                set(route, 10, &message, "pending");
                tokio::time::sleep(QUEUED_EVERY).await;
            }
            JobState::Pending => {
                if last_queue_look.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    last_queue_look = Some(tokio::time::Instant::now());
                    let position = queue_position(sessions, job, &view.partition).await;
                    let reason = view.reason.map(|r| r.name().to_string());
                    let mut message = match position {
                        Some(p) => format!("Queued: position {p}"),
                        None => "Queued".to_string(),
                    };
                    if let Some(r) = &reason {
                        message.push_str(&format!(" (waiting for {r})"));
                    }
                    set(route, 10, &message, "pending");
                }
                tokio::time::sleep(QUEUED_EVERY).await;
            }
            // Slurm does not answer: the session is neither ended nor stopped for it.
            JobState::Unknown => {
                if route.progress().warning.is_none() {
                    let mut p = route.progress();
                    p.warning = Some(SLURM_UNKNOWN.into());
                    route.set_progress(p);
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            // Ready before a portal restart: where it listens is read again.
            JobState::Running if route.upstream().is_none() && route.is_ready() => {
                clear_unknown(route);
                locate(host, user, route, &view.nodelist).await;
                tokio::time::sleep(QUEUED_EVERY).await;
            }
            JobState::Running if !route.is_ready() => {
                clear_unknown(route);
                let since = *starting_since.get_or_insert_with(|| {
                    let id = route.id;
                    let store = store.clone();
                    tokio::spawn(async move {
                        let _ = store.set_session_state(id, "starting", now_ms()).await;
                    });
                    let message = format!(
                        "Allocated {} on {}; starting the {}",
                        if view.gres.is_empty() {
                            "CPUs".to_string()
                        } else {
                            view.gres.clone()
                        },
                        view.nodelist,
                        if on_node { "server" } else { "container" }
                    );
                    event(route, &format!("Placed on {}", view.nodelist));
                    event(route, &message);
                    set(route, 40, &message, "starting");
                    tokio::time::Instant::now()
                });
                if route.upstream().is_none() {
                    locate(host, user, route, &view.nodelist).await;
                }
                let probed = match (route.upstream(), &probe) {
                    (Some(up), Some(path)) => {
                        upstream::get(up, path, &route.authorization, Duration::from_secs(5), 0)
                            .await
                    }
                    // Ready when its socket accepts a connection.
                    (Some(up), None) => up
                        .connect()
                        .await
                        .map(|_| (hyper::StatusCode::OK, bytes::Bytes::new())),
                    (None, _) => Err(upstream::UpstreamError::NotListening),
                };
                if !socket_seen
                    && !matches!(probed, Err(upstream::UpstreamError::NoSocket))
                    && route.upstream().is_some()
                {
                    socket_seen = true;
                    event(
                        route,
                        &format!(
                            "The server started; waiting for {} to answer",
                            route.app.config.title
                        ),
                    );
                }
                match probed {
                    Ok((status, _)) if answers(status, custom) => {
                        if route.app.config.open_terminal && !custom {
                            open_on_a_terminal(route).await;
                        }
                        if let Err(e) = store.set_session_state(route.id, "ready", now_ms()).await {
                            tracing::error!(session = route.id, error = %e, "recording a ready session failed");
                        }
                        route.touch();
                        sessions
                            .inner
                            .metrics
                            .ready_after((now_ms() - route.created_at) as f64 / 1000.0);
                        let mut events = route.progress().events;
                        events.push(Event::at(now_ms(), "Ready"));
                        route.set_progress(Progress {
                            progress: 100,
                            message: "Ready".into(),
                            ready: true,
                            url: Some(url(&route.prefix, &route.app)),
                            state: "ready".into(),
                            events,
                            ..Default::default()
                        });
                        tracing::info!(session = route.id, user = %route.owner, "session ready");
                        tell_ready(sessions, route, job, &view);
                        continue;
                    }
                    Err(
                        upstream::UpstreamError::NoSocket | upstream::UpstreamError::NotListening,
                    ) => {}
                    _ => {
                        if route.progress().progress < 70 {
                            set(route, 70, &server_wait_message(&route.app), "starting");
                        }
                    }
                }
                if since.elapsed() > ready_timeout {
                    let message = format!(
                        "its server did not answer within {}",
                        humantime::format_duration(ready_timeout)
                    );
                    let _ = store.stopping_session(route.id, "failed").await;
                    let _ = scheduler.cancel(&portal(), job).await;
                    let _ = store
                        .end_session(route.id, "failed", Some(&message), now_ms())
                        .await;
                }
                // Each look at a connection file is a process run as the user.
                tokio::time::sleep(if on_node && route.upstream().is_none() {
                    QUEUED_EVERY
                } else {
                    PROBE_EVERY
                })
                .await;
            }
            JobState::Running => {
                clear_unknown(route);
                if let (false, Some(start), TimeLimit::Seconds(limit)) =
                    (warned, view.start_time, view.time_limit)
                {
                    let left = (start + limit as i64) - now_ms() / 1000;
                    if left <= warning.as_secs() as i64 {
                        warned = true;
                        let mut p = route.progress();
                        p.warning = Some(format!(
                            "This session reaches its time limit in {}: save your work.",
                            humantime::format_duration(Duration::from_secs(left.max(0) as u64))
                        ));
                        route.set_progress(p);
                    }
                }
                tokio::time::sleep(RUNNING_EVERY).await;
            }
            JobState::Completing => {
                if route.progress().state != "stopping" {
                    let mut p = route.progress();
                    p.state = "stopping".into();
                    p.ready = false;
                    p.message = "Stopping".into();
                    route.set_progress(p);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            state => {
                let row = store.job(job.job as i64, -1).await.ok();
                return End {
                    state,
                    message: row.and_then(|r| r.message),
                };
            }
        }
    }
}

/// A session that waited in the queue at least `sessions.ready_mail_after` is told to
/// its user once ready (mail and webhook, where `[notify]` has them).
fn tell_ready(sessions: &Sessions, route: &Route, job: JobId, view: &scheduler::JobView) {
    let after = sessions.inner.config.sessions.ready_mail_after.0;
    let queued = view
        .start_time
        .map_or(0, |start| (start - view.submit_time).max(0));
    if after.is_zero() || (queued as u64) < after.as_secs() {
        return;
    }
    let link = sessions.inner.config.public_url.as_deref().map(|base| {
        format!(
            "{}{}",
            base.trim_end_matches('/'),
            url(&route.prefix, &route.app)
        )
    });
    sessions.inner.notifier.send(crate::notifications::Notice {
        job: job.to_string(),
        job_id: job.job,
        name: route.name.clone(),
        user: route.owner.clone(),
        mail_user: None,
        event: crate::notifications::NoticeEvent::SessionReady,
        state: view.state.name().to_string(),
        exit_code: None,
        exit_signal: None,
        seconds: Some(queued),
        link,
    });
}

/// A terminal session opens JupyterLab on a terminal: its `terminal` workspace has
/// one, in the main area.
async fn open_on_a_terminal(route: &Route) {
    let Some(up) = route.upstream() else { return };
    // "Open a terminal here": terminal 1 is made in the folder, and the workspace
    // below opens it (without one, JupyterLab makes it in the home).
    if let Some(folder) = &route.folder {
        let terminal = serde_json::json!({"name": "1", "cwd": folder});
        tell_jupyter(route, up, hyper::Method::POST, "api/terminals", terminal).await;
    }
    let workspace = serde_json::json!({
        "data": {
            "layout-restorer:data": {
                "main": {
                    "dock": {"type": "tab-area", "currentIndex": 0, "widgets": ["terminal:1"]},
                    "current": "terminal:1"
                }
            },
            "terminal:1": {"data": {"name": "1"}}
        },
        "metadata": {"id": "terminal"}
    });
    let path = "lab/api/workspaces/terminal";
    tell_jupyter(route, up, hyper::Method::PUT, path, workspace).await;
}

/// Send `body` to the session's Jupyter at `path` under its prefix; a refusal or a
/// failure is logged (the session opens all the same, on a plain JupyterLab).
async fn tell_jupyter(
    route: &Route,
    up: &upstream::Upstream,
    method: hyper::Method,
    path: &str,
    body: serde_json::Value,
) {
    let result = upstream::send(
        up,
        method,
        &format!("{}{path}", route.prefix),
        &route.authorization,
        Some(body.to_string().into()),
        Duration::from_secs(5),
        0,
    )
    .await;
    match result {
        Ok((status, _)) if status.is_success() => {}
        Ok((status, _)) => {
            tracing::warn!(session = route.id, %status, path, "the session's Jupyter refused the terminal's set-up")
        }
        Err(e) => {
            tracing::warn!(session = route.id, error = %e, path, "setting up the session's terminal failed")
        }
    }
}

/// Whether the probe's answer means the server is up and serves the session's prefix:
/// Jupyter's `api/status` and TensorBoard's `data/environment` answer 2xx (a 404 is a
/// server on the wrong base URL); an administrator's own server anything but an error.
fn answers(status: hyper::StatusCode, custom: bool) -> bool {
    if custom {
        status.as_u16() < 500
    } else {
        status.is_success() || status.is_redirection()
    }
}

/// Find where a server on a compute node listens: the port from its connection file,
/// on the node its job runs on. (On this machine it is known from the start.)
async fn locate(host: &SessionHost, user: Option<&Identity>, route: &Route, nodelist: &str) {
    let (SessionHost::Node(on), Some(user)) = (host, user) else {
        return;
    };
    let path = route.dir.join(script::CONNECTION_FILE);
    let read = on
        .nodes
        .read(user, &path, CONNECTION_BYTES)
        .await
        .map_err(|e| e.to_string())
        .and_then(|text| {
            script::connection_port(&text).map_err(|m| format!("{}: {m}", path.display()))
        });
    let port = match read {
        Ok(Some(port)) => port,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(session = route.id, error = %e, "reading the session's connection file failed");
            return;
        }
    };
    // A session is one node; its name is the node list.
    let node = nodelist.split(',').next().unwrap_or_default();
    match on.nodes.address(node, port).await {
        Ok(addr) => {
            tracing::info!(session = route.id, node, %addr, "the session's server listens");
            let token = route
                .authorization
                .strip_prefix("token ")
                .unwrap_or_default();
            let _ = route.upstream.set(upstream::Upstream::Tcp {
                addr,
                proof: upstream::Proof::under(&route.prefix, token),
            });
        }
        Err(e) => {
            tracing::warn!(session = route.id, node, error = %e, "finding the session's node failed")
        }
    }
}

/// Slurm answers again: drop the warning that it did not.
fn clear_unknown(route: &Route) {
    let mut p = route.progress();
    if p.warning.as_deref() == Some(SLURM_UNKNOWN) {
        p.warning = None;
        route.set_progress(p);
    }
}

fn server_wait_message(app: &App) -> String {
    format!("Waiting for {}", app.config.title)
}

fn set(route: &Route, progress: u8, message: &str, state: &str) {
    let mut p = route.progress();
    if p.progress == progress && p.message == message && p.state == state {
        return;
    }
    p.progress = progress;
    p.message = message.to_string();
    p.state = state.to_string();
    route.set_progress(p);
}

/// 1-based place among the partition's pending jobs (in the scheduler's order).
async fn queue_position(sessions: &Sessions, job: JobId, partition: &str) -> Option<usize> {
    let filter = SqueueFilter {
        partition: Some(partition.to_string()),
        states: vec![JobState::Pending],
        ..Default::default()
    };
    let queue = sessions.inner.scheduler.squeue(filter).await.ok()?;
    let mut pending: Vec<_> = queue.iter().collect();
    pending.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.submit_time.cmp(&b.submit_time))
    });
    pending.iter().position(|v| v.id == job).map(|p| p + 1)
}

/// Record the end, tell the followers, and drop the route.
async fn finish(sessions: &Sessions, route: &Route, end: End, user: Option<&Identity>) {
    let store = &sessions.inner.store;
    let host = &sessions.inner.host;
    let record = store.session(route.id).await.ok();
    let asked = record.as_ref().and_then(|r| r.end_reason.clone());
    let was_ready = record.as_ref().is_some_and(|r| r.ready_at.is_some());
    let reason = match (asked.as_deref(), end.state) {
        (Some(r), _) => r.to_string(),
        (None, JobState::Timeout) => "time_limit".into(),
        (None, JobState::Cancelled) => "cancelled".into(),
        (None, _) if !was_ready => "failed".into(),
        (None, JobState::Completed) => "ended".into(),
        (None, _) => "failed".into(),
    };
    let dir = &route.dir;
    let message = if reason == "failed" {
        let why = record
            .as_ref()
            .and_then(|r| r.message.clone())
            .or(end.message)
            .unwrap_or_else(|| format!("its job ended {}", end.state.name()));
        let log = host.tail(user, &dir.join("session.log"), LOG_LINES).await;
        Some(match log {
            Some(log) if !log.trim().is_empty() => format!("{why}\n\n{log}"),
            _ => why,
        })
    } else {
        None
    };
    if let Err(e) = store
        .end_session(route.id, &reason, message.as_deref(), now_ms())
        .await
    {
        tracing::error!(session = route.id, error = %e, "recording the end of a session failed");
    }
    tracing::info!(session = route.id, user = %route.owner, %reason, "session ended");
    sessions.forget(route);
    let record = store.session(route.id).await.ok();
    let mut last = match record {
        Some(r) => final_progress(&r),
        None => Progress {
            progress: 100,
            message: "Ended".into(),
            state: "ended".into(),
            ..Default::default()
        },
    };
    // What the watcher saw, then how it ended; kept for the page shown afterwards.
    let mut events = route.progress().events;
    events.truncate(MAX_EVENTS - 1);
    events.push(Event::at(now_ms(), last.message.clone()));
    if let Ok(json) = serde_json::to_string(&events) {
        if let Err(e) = store.set_session_events(route.id, &json).await {
            tracing::warn!(session = route.id, error = %e, "recording a session's events failed");
        }
    }
    last.events = events;
    route.set_progress(last);
    host.remove(user, dir).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_on_the_wrong_base_url_is_not_ready() {
        assert!(answers(hyper::StatusCode::OK, false));
        assert!(!answers(hyper::StatusCode::NOT_FOUND, false));
        assert!(!answers(hyper::StatusCode::FORBIDDEN, false));
        assert!(answers(hyper::StatusCode::NOT_FOUND, true));
        assert!(!answers(hyper::StatusCode::BAD_GATEWAY, true));
    }
}
