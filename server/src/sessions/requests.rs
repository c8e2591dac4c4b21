//! Sessions as the API and the pages ask for them: started and stopped for a caller,
//! with the audit entry, and shown with their live progress and job.
//!
//! Owns: what is audited of sessions (every start and stop, by whom), the owner a
//! session runs as, and the view of a session. Must not touch: HTTP types, SQL.

use serde::Serialize;
use utoipa::ToSchema;

use super::{Progress, SessionError, Sessions, StartRequest};
use crate::auth::Principal;
use crate::store::SessionRecord;
use crate::util::rfc3339;

/// A session.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionInfo {
    pub id: i64,
    pub name: String,
    pub user: String,
    /// The app's id (`notebook`, `vscode`).
    pub kind: String,
    /// The app's title (`JupyterLab`).
    pub app_title: String,
    pub environment: String,
    /// `pending`, `starting`, `ready`, `stopping` or `ended`.
    pub state: String,
    pub ready: bool,
    /// Where it opens (`/user/alice/default/lab`), once ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[schema(value_type = Object)]
    pub progress: Progress,
    /// The job that runs it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<i64>,
    /// What it was given (`gpu:2`), empty for none.
    pub gres: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_visible_devices: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodelist: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logdir: Option<String>,
    /// The folder its terminal opens in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub folder: Option<String>,
    pub created_at: String,
    /// When its job started on a node (while it is queued: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ready_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// Seconds until its time limit (while it runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_left: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<String>,
    /// `stopped`, `idle`, `time_limit`, `cancelled`, `failed`, `ended`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Sessions {
    /// A session as the API shows it: its row, its live progress and its job.
    pub async fn info(&self, record: SessionRecord) -> SessionInfo {
        let progress = self.progress_of(&record);
        let view = if record.ended_at.is_none() {
            self.job_view(&record).await
        } else {
            None
        };
        let now = crate::util::now_ms() / 1000;
        let (time_left, time_limit) = match view.as_ref() {
            Some(v) => match (v.start_time, v.time_limit) {
                (Some(start), scheduler::TimeLimit::Seconds(s)) => {
                    (Some((start + s as i64 - now).max(0)), Some(s))
                }
                (None, scheduler::TimeLimit::Seconds(s)) => (None, Some(s)),
                _ => (None, None),
            },
            None => (None, None),
        };
        let node = view
            .as_ref()
            .and_then(|v| v.allocation.as_ref())
            .and_then(|a| a.nodes.first().cloned());
        let app_title = self
            .app(&record.kind)
            .map_or_else(|| record.kind.clone(), |a| a.config.title);
        let started_at = view
            .as_ref()
            .and_then(|v| v.start_time)
            .map(|s| rfc3339(s * 1000));
        SessionInfo {
            id: record.id,
            name: record.name,
            user: record.user_name,
            kind: record.kind,
            app_title,
            environment: record.environment,
            state: progress.state.clone(),
            ready: progress.ready,
            url: progress.url.clone(),
            progress,
            job_id: record.job_id,
            gres: crate::domain::gres::text_of(record.gpus.as_ref()),
            cuda_visible_devices: node
                .as_ref()
                .filter(|n| !n.slices.is_empty())
                .map(|n| n.cuda_visible_devices()),
            nodelist: view
                .as_ref()
                .map(|v| v.nodelist.clone())
                .filter(|n| !n.is_empty()),
            logdir: record.logdir,
            folder: record.folder,
            created_at: rfc3339(record.created_at),
            started_at,
            ready_at: record.ready_at.map(rfc3339),
            ended_at: record.ended_at.map(rfc3339),
            time_left,
            time_limit,
            last_activity: record.last_activity.map(rfc3339),
            end_reason: record.end_reason,
            message: record.message,
        }
    }

    /// Each of `rows` as [`Sessions::info`] shows it.
    pub async fn infos(&self, rows: Vec<SessionRecord>) -> Vec<SessionInfo> {
        let mut sessions = Vec::with_capacity(rows.len());
        for r in rows {
            sessions.push(self.info(r).await);
        }
        sessions
    }

    /// Every user's sessions that have not ended, oldest first.
    pub async fn running(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let rows = self.inner.store.active_sessions().await?;
        Ok(self.infos(rows).await)
    }

    /// Start a session as `caller` and write it to the audit log: the one path for the API
    /// and the pages.
    pub async fn start_as(
        &self,
        caller: &Principal,
        client_addr: &str,
        request: StartRequest,
    ) -> Result<SessionRecord, SessionError> {
        let owner = self
            .inner
            .identities
            .owner_facts(caller.user_id, &caller.username)
            .await?
            .owner(&caller.username);
        let record = self.launch(owner, request).await?;
        let detail = serde_json::json!({
            "name": record.name,
            "kind": record.kind,
            "gres": crate::domain::gres::text_of(record.gpus.as_ref()),
        });
        self.inner
            .audit
            .record(
                &caller.username,
                client_addr,
                "session.start",
                &record.id.to_string(),
                detail,
            )
            .await?;
        Ok(record)
    }

    /// Stop session `id` for `caller` (its owner: `stopped`; an administrator: `cancelled`)
    /// and write it to the audit log: the one path for the API and the pages.
    pub async fn stop_as(
        &self,
        caller: &Principal,
        client_addr: &str,
        id: i64,
    ) -> Result<(), SessionError> {
        let record = self
            .get(&caller.username, caller.acts_as_admin(), id)
            .await?;
        let reason = if record.user_name == caller.username {
            "stopped"
        } else {
            "cancelled"
        };
        self.stop(id, reason).await?;
        let after = self.inner.store.session(id).await?;
        let detail = serde_json::json!({
            "user": record.user_name,
            "name": record.name,
            "before": {"state": record.state},
            "after": {"state": after.state, "end_reason": after.end_reason},
        });
        self.inner
            .audit
            .record(
                &caller.username,
                client_addr,
                "session.stop",
                &id.to_string(),
                detail,
            )
            .await?;
        Ok(())
    }
}
