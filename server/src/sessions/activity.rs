//! Activity and culling: a session is active while the proxy carries its traffic,
//! while Jupyter reports kernel or terminal activity (a kernel computing with no
//! browser attached counts), or while its GPUs are busy (where `nvidia-smi` exists).
//! A session idle for longer than `sessions.idle_timeout` is stopped.
//! Must not touch: HTTP types or SQL (through the store only).

use std::collections::HashMap;
use std::time::Duration;

use serde::Deserialize;

use super::apps::Protocol;
use super::{upstream, Route, Sessions};
use crate::util::now_ms;

/// GPU utilisation (percent) at or above which a session's GPU counts as busy: where
/// the jobs' usage samples stop counting it idle.
const GPU_BUSY_PERCENT: u32 = crate::launch::usage::GPU_IDLE_PERCENT;

#[derive(Debug, Deserialize)]
struct Kernel {
    #[serde(default)]
    last_activity: Option<String>,
    #[serde(default)]
    execution_state: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Terminal {
    #[serde(default)]
    last_activity: Option<String>,
}

/// What Jupyter says of its own activity.
#[derive(Debug, Default, PartialEq, Eq)]
struct JupyterActivity {
    /// Unix milliseconds of the latest kernel or terminal activity.
    last: Option<i64>,
    /// A kernel is executing.
    busy: bool,
}

fn parse_time(s: &str) -> Option<i64> {
    s.parse::<jiff::Timestamp>()
        .ok()
        .map(|t| t.as_millisecond())
}

fn jupyter_activity(kernels: &[u8], terminals: &[u8]) -> JupyterActivity {
    let kernels: Vec<Kernel> = serde_json::from_slice(kernels).unwrap_or_default();
    let terminals: Vec<Terminal> = serde_json::from_slice(terminals).unwrap_or_default();
    let busy = kernels
        .iter()
        .any(|k| matches!(k.execution_state.as_deref(), Some("busy" | "starting")));
    let last = kernels
        .iter()
        .filter_map(|k| k.last_activity.as_deref())
        .chain(terminals.iter().filter_map(|t| t.last_activity.as_deref()))
        .filter_map(parse_time)
        .max();
    JupyterActivity { last, busy }
}

async fn ask_jupyter(route: &Route) -> Option<JupyterActivity> {
    let up = route.upstream()?;
    let get = |path: String| async move {
        match upstream::get(
            up,
            &path,
            &route.authorization,
            Duration::from_secs(5),
            1 << 20,
        )
        .await
        {
            Ok((status, body)) if status.is_success() => Some(body),
            _ => None,
        }
    };
    let kernels = get(format!("{}api/kernels", route.prefix)).await?;
    let terminals = get(format!("{}api/terminals", route.prefix))
        .await
        .unwrap_or_default();
    Some(jupyter_activity(&kernels, &terminals))
}

/// Utilisation by GPU index, from `nvidia-smi`; empty where there is none.
async fn gpu_utilisation() -> HashMap<u32, u32> {
    crate::launch::usage::nvidia_smi(&[
        "--query-gpu=index,utilization.gpu",
        "--format=csv,noheader,nounits",
    ])
    .await
    .map(|text| parse_utilisation(&text))
    .unwrap_or_default()
}

fn parse_utilisation(text: &str) -> HashMap<u32, u32> {
    text.lines()
        .filter_map(|l| {
            let (i, u) = l.split_once(',')?;
            Some((i.trim().parse().ok()?, u.trim().parse().ok()?))
        })
        .collect()
}

/// Check every ready session each `cull_interval`; stop the idle ones.
pub(super) async fn cull(sessions: Sessions) {
    let every = sessions.config().cull_interval.0;
    let idle_timeout = sessions.config().idle_timeout.0;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    let has_gpus = crate::launch::usage::nvidia_smi(&["-L"]).await.is_some();
    loop {
        tick.tick().await;
        let routes: Vec<_> = sessions
            .all_routes()
            .into_iter()
            .filter(|r| r.is_ready())
            .collect();
        if routes.is_empty() {
            continue;
        }
        let utilisation = if has_gpus {
            gpu_utilisation().await
        } else {
            HashMap::new()
        };
        let now = now_ms();
        let mut seen = Vec::with_capacity(routes.len());
        for route in routes {
            let mut last = route.last_activity();
            let mut busy = false;
            if route.app.protocol == Protocol::Jupyter {
                if let Some(a) = ask_jupyter(&route).await {
                    last = last.max(a.last.unwrap_or(0));
                    busy |= a.busy;
                }
            }
            if !utilisation.is_empty() {
                busy |= session_gpus(&sessions, &route)
                    .await
                    .iter()
                    .any(|i| utilisation.get(i).is_some_and(|u| *u >= GPU_BUSY_PERCENT));
            }
            if busy {
                last = now;
                route.touch();
            }
            seen.push((route.id, last));
            let idle_for = Duration::from_millis((now - last).max(0) as u64);
            if !idle_timeout.is_zero() && idle_for > idle_timeout {
                tracing::info!(session = route.id, user = %route.owner, idle = %humantime::format_duration(Duration::from_secs(idle_for.as_secs())), "stopping an idle session");
                if let Err(e) = sessions.stop(route.id, "idle").await {
                    tracing::warn!(session = route.id, error = %e, "stopping an idle session failed");
                }
            }
        }
        if let Err(e) = sessions.inner.store.touch_sessions(&seen).await {
            tracing::warn!(error = %e, "recording session activity failed");
        }
    }
}

/// Physical GPU indices allocated to the session's job.
async fn session_gpus(sessions: &Sessions, route: &Route) -> Vec<u32> {
    let Some(job) = route.job else {
        return Vec::new();
    };
    let Ok(view) = sessions.inner.scheduler.job(&super::portal(), job).await else {
        return Vec::new();
    };
    view.allocation
        .as_ref()
        .and_then(|a| a.nodes.first())
        .map(crate::sched::step_env::gpu_indices)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_kernel_and_the_latest_activity_count() {
        let kernels = br#"[{"id":"a","last_activity":"2026-11-23T02:00:00.000000Z","execution_state":"idle"},
                           {"id":"b","last_activity":"2026-11-23T02:05:00.5Z","execution_state":"busy"}]"#;
        let terminals = br#"[{"name":"1","last_activity":"2026-11-23T02:06:00Z"}]"#;
        let a = jupyter_activity(kernels, terminals);
        assert!(a.busy);
        assert_eq!(a.last, parse_time("2026-11-23T02:06:00Z"));
        let idle = jupyter_activity(br#"[{"execution_state":"idle"}]"#, b"");
        assert_eq!(
            idle,
            JupyterActivity {
                last: None,
                busy: false
            }
        );
    }

    #[test]
    fn nvidia_smi_utilisation_lines() {
        let u = parse_utilisation("0, 97\n1, 0\nbad\n");
        assert_eq!(u.get(&0), Some(&97));
        assert_eq!(u.get(&1), Some(&0));
        assert_eq!(u.len(), 2);
    }
}
