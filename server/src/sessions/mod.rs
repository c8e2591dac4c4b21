//! Interactive sessions: the apps of `[[apps]]` (JupyterLab, a terminal, TensorBoard,
//! VS Code by default), run as the user by the scheduler like any job (same queue, step supervisor and re-adoption). Where the
//! server lives is the [`SessionHost`]'s to say: on this machine it listens on a unix
//! socket in a per-session 0700 directory that the proxy reaches; on a cluster's
//! compute node (the Slurm backend) its directory is in the user's home on shared
//! storage and the proxy reaches it over TCP once it proves it knows its token.
//!
//! Owns: the service (`Sessions`), its vocabulary (`StartRequest`, `Progress`,
//! `SessionError`), reading and stopping sessions, the apps it offers (`apps`: what
//! each is, its fields checked), what one GPU brings on the start form. Starting one is `launch`, the
//! routes the proxy follows `routes`, following one to its end `watch`, idle culling
//! `activity`.
//! Must not touch: HTTP types (the handlers map errors), SQL (the store), process
//! details (`launch` of the crate), any scheduler backend's own types: the host is a
//! `crate::sched::host::SessionHost`.

mod activity;
pub mod apps;
mod launch;
pub mod requests;
mod routes;
pub mod script;
mod secret;

pub use secret::SessionSecrets;
pub mod upstream;
mod watch;

use std::path::Path;
use std::sync::{Arc, RwLock};

use scheduler::JobId;
use serde::Serialize;

use crate::config::{Config, EnvironmentConfig};
use crate::launch::RuntimeKind;
use crate::sched::host::SessionHost;
use crate::sched::{Requester, SchedError, Scheduler};
use crate::store::{SessionRecord, Store, StoreError};
use crate::util::now_ms;

pub use apps::{App, AppSummary};
pub use routes::Route;
pub use upstream::Upstream;

/// A request to start a session.
#[derive(Debug, Clone, Default)]
pub struct StartRequest {
    pub name: Option<String>,
    pub kind: Option<String>,
    pub environment: Option<String>,
    pub gpus: Option<u32>,
    /// A GPU slice type (`1g.10gb`, `a100`) or `shard`; `gpus` says how many.
    pub slice: Option<String>,
    /// Time limit in hours (fractions allowed).
    pub hours: Option<f64>,
    pub logdir: Option<String>,
    /// The folder a terminal opens in (an app with `open_terminal`): under the
    /// user's home or project spaces.
    pub folder: Option<String>,
    /// The app's form fields, by name (checked against the app's fields).
    pub fields: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Bad input, naming the field.
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error("{0}")]
    Conflict(String),
    #[error("no such session")]
    NotFound,
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Scheduler(#[from] SchedError),
    #[error(transparent)]
    Store(StoreError),
    /// Over a quota: names it, its value and the use now.
    #[error(transparent)]
    Quota(#[from] crate::services::quotas::QuotaError),
    #[error("{0}")]
    Internal(String),
}

/// A session's refusal as every service's: the table from there to HTTP is one
/// (`http::error`). A bad field keeps its name, and its message says it.
impl From<SessionError> for crate::services::ServiceError {
    fn from(e: SessionError) -> Self {
        use crate::services::ServiceError as E;
        match e {
            SessionError::Invalid { field, .. } => E::Invalid {
                field,
                message: e.to_string(),
            },
            SessionError::Conflict(m) => E::Conflict(m),
            SessionError::NotFound => E::NotFound,
            SessionError::Forbidden(m) => E::Forbidden(m),
            SessionError::Scheduler(e) => e.into(),
            SessionError::Store(e) => e.into(),
            SessionError::Quota(e) => e.into(),
            SessionError::Internal(m) => E::Internal(m),
        }
    }
}

impl From<crate::identities::IdentityError> for SessionError {
    fn from(e: crate::identities::IdentityError) -> Self {
        match e {
            crate::identities::IdentityError::Missing(_) => Self::Forbidden(e.to_string()),
            crate::identities::IdentityError::Store(e) => e.into(),
        }
    }
}

impl From<StoreError> for SessionError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(m) => SessionError::Conflict(m),
            StoreError::NotFound => SessionError::NotFound,
            e => SessionError::Store(e),
        }
    }
}

fn invalid(field: &'static str, message: impl Into<String>) -> SessionError {
    SessionError::Invalid {
        field,
        message: message.into(),
    }
}

/// Where a session stands, as the progress stream and the pages show it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct Progress {
    /// 0 to 100.
    pub progress: u8,
    pub message: String,
    pub ready: bool,
    /// Where to open it (once ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `pending`, `starting`, `ready`, `stopping` or `ended`.
    pub state: String,
    /// It ended without becoming ready, or its server died.
    pub failed: bool,
    /// A warning for the user (the time limit is near).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// The end of the server's log, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// What happened so far, oldest first (queued, placed on a node, the server
    /// started, ready; or how it failed), as JupyterHub's progress page lists it.
    pub events: Vec<Event>,
}

/// One step of a session's start or end, with when it happened.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Event {
    /// RFC 3339, UTC.
    pub at: String,
    pub message: String,
}

impl Event {
    pub fn at(ms: i64, message: impl Into<String>) -> Event {
        Event {
            at: crate::util::rfc3339(ms),
            message: message.into(),
        }
    }
}

/// What one GPU brings and how many are free now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuOffer {
    pub cpus_per_gpu: u32,
    pub mem_per_gpu_mb: u64,
    /// GPUs (and slices) free in the partition now, of `total` (unknown when the
    /// scheduler does not answer).
    pub free: Option<u32>,
    pub total: Option<u32>,
    /// Each kind of slice of the partition (a whole GPU type, a MIG profile,
    /// `shard`) with how many are free now and how many there are: what a
    /// session can start on at once.
    pub kinds: Vec<SliceFree>,
}

/// One kind of slice of the sessions' partition: its `--gres` type, free and total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceFree {
    pub r#type: String,
    pub free: u32,
    pub total: u32,
}

impl SliceFree {
    /// A MIG profile (`1g.10gb`), not a whole GPU type or a share.
    pub fn is_mig(&self) -> bool {
        crate::services::reasons::is_mig(&self.r#type)
    }
}

/// An environment as sessions use it.
#[derive(Debug, Clone)]
pub struct Environment {
    pub config: EnvironmentConfig,
    pub runtime: RuntimeKind,
}

/// The sessions service. Cheap to clone.
#[derive(Clone)]
pub struct Sessions {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    scheduler: Scheduler,
    quotas: crate::services::Quotas,
    config: Arc<Config>,
    environments: Vec<Environment>,
    /// The apps users may start.
    apps: Vec<App>,
    /// Where sessions' servers run, and how their directories are reached.
    host: SessionHost,
    drop_privileges: bool,
    /// Session tokens from their stored nonces.
    secrets: SessionSecrets,
    identities: crate::identities::Identities,
    audit: crate::services::Audit,
    routes: RwLock<routes::Routes>,
    metrics: crate::metrics::SessionMetrics,
    /// Tells a user that a session which waited in the queue is ready.
    notifier: crate::notifications::Notifier,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("host", &self.inner.host)
            .finish()
    }
}

/// The administrator's view that the service uses to read and cancel jobs.
fn portal() -> Requester {
    Requester {
        user: String::new(),
        admin: true,
    }
}

impl Sessions {
    /// Set up the service and bring back every session the database says is not over.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        store: Store,
        scheduler: Scheduler,
        quotas: crate::services::Quotas,
        config: Arc<Config>,
        host: SessionHost,
        jobs_runtime: RuntimeKind,
        drop_privileges: bool,
        secrets: SessionSecrets,
        identities: crate::identities::Identities,
        audit: crate::services::Audit,
        metrics: crate::metrics::SessionMetrics,
        notifier: crate::notifications::Notifier,
    ) -> anyhow::Result<(Sessions, tokio::task::JoinHandle<()>)> {
        let mut environments = Vec::new();
        for e in config.environments() {
            let runtime = environment_runtime(&e, &jobs_runtime)
                .map_err(|m| anyhow::anyhow!("environment {}: {m}", e.name))?;
            tracing::info!(environment = %e.name, ?runtime, image = ?e.image, "session environment");
            environments.push(Environment { config: e, runtime });
        }
        let apps = config.apps().into_iter().map(App::new).collect();
        let sessions = Sessions {
            inner: Arc::new(Inner {
                store,
                scheduler,
                quotas,
                config,
                environments,
                apps,
                host,
                drop_privileges,
                secrets,
                identities,
                audit,
                routes: RwLock::new(routes::Routes::default()),
                metrics,
                notifier,
            }),
        };
        sessions.restore().await?;
        let culler = tokio::spawn(activity::cull(sessions.clone()));
        Ok((sessions, culler))
    }

    pub fn environments(&self) -> &[Environment] {
        &self.inner.environments
    }

    /// The apps users may start, in the configuration's order.
    pub fn apps(&self) -> Vec<AppSummary> {
        self.inner.apps.iter().map(App::summary).collect()
    }

    /// The apps with their fields, for the start form.
    pub fn app_configs(&self) -> &[App] {
        &self.inner.apps
    }

    /// The apps that open on a terminal, in a folder when asked (`folder`).
    pub fn terminal_apps(&self) -> Vec<String> {
        self.inner
            .apps
            .iter()
            .filter(|a| a.config.open_terminal)
            .map(|a| a.id().to_string())
            .collect()
    }

    /// The app `id` names: a configured one, else a built-in one (a session
    /// recorded before the site defined its own `[[apps]]` still routes).
    pub fn app(&self, id: &str) -> Option<App> {
        self.inner
            .apps
            .iter()
            .find(|a| a.id() == id)
            .cloned()
            .or_else(|| {
                crate::config::Config::default()
                    .apps()
                    .into_iter()
                    .find(|a| a.id == id)
                    .map(App::new)
            })
    }

    /// What one GPU brings in the sessions' partition (its cores and memory) and how
    /// many are free now, for the start form.
    pub async fn gpu_offer(&self) -> GpuOffer {
        let cluster = &self.inner.config.cluster;
        let wanted = self.inner.host.partition().map(str::to_string);
        let partition = cluster
            .partitions
            .iter()
            .find(|p| Some(&p.name) == wanted.as_ref())
            .or_else(|| cluster.partitions.iter().find(|p| p.default))
            .or_else(|| cluster.partitions.first());
        let (cpus_per_gpu, mem_per_gpu_mb) = match partition {
            Some(p) => (p.cpus_per_gpu, p.mem_per_gpu_mb),
            None => {
                let d = crate::config::PartitionSection::default();
                (d.cpus_per_gpu, d.mem_per_gpu_mb)
            }
        };
        let (mut free, mut total, mut kinds) = (None, None, Vec::new());
        if let Ok((_, partitions)) = self.inner.scheduler.nodes().await {
            let view = partitions
                .iter()
                .find(|p| Some(&p.name) == wanted.as_ref())
                .or_else(|| partitions.iter().find(|p| p.default));
            if let Some(v) = view {
                for s in &v.slices {
                    let free = s.total.saturating_sub(s.used);
                    match kinds
                        .iter_mut()
                        .find(|k: &&mut SliceFree| k.r#type == s.r#type)
                    {
                        Some(k) => {
                            k.free += free;
                            k.total += s.total;
                        }
                        None => kinds.push(SliceFree {
                            r#type: s.r#type.clone(),
                            free,
                            total: s.total,
                        }),
                    }
                }
                // Whole GPUs: slices and shares are not GPUs to count.
                let whole = kinds
                    .iter()
                    .filter(|k| crate::services::reasons::is_whole_gpu(&k.r#type));
                let (f, t) = whole.fold((0, 0), |(f, t), k| (f + k.free, t + k.total));
                free = Some(f);
                total = Some(t);
            }
        }
        GpuOffer {
            cpus_per_gpu,
            mem_per_gpu_mb,
            free,
            total,
            kinds,
        }
    }

    pub fn config(&self) -> &crate::config::SessionsConfig {
        &self.inner.config.sessions
    }

    /// Stop a session: its job is cancelled and its slices freed.
    #[tracing::instrument(skip_all, fields(id, reason), err)]
    pub async fn stop(&self, id: i64, reason: &str) -> Result<(), SessionError> {
        let record = self.inner.store.session(id).await?;
        if record.ended_at.is_some() {
            return Ok(());
        }
        self.inner.store.stopping_session(id, reason).await?;
        if let Some(route) = self.route_by_id(id) {
            let mut p = route.progress();
            p.state = "stopping".into();
            p.ready = false;
            p.message = "Stopping".into();
            p.events
                .push(Event::at(now_ms(), format!("Stopping ({reason})")));
            route.set_progress(p);
        }
        match record.job_id {
            Some(job) => match self
                .inner
                .scheduler
                .cancel(&portal(), JobId::new(job as u64))
                .await
            {
                Ok(()) | Err(SchedError::NotFound) | Err(SchedError::Conflict(_)) => Ok(()),
                Err(e) => Err(e.into()),
            },
            None => {
                self.inner
                    .store
                    .end_session(id, reason, None, now_ms())
                    .await?;
                Ok(())
            }
        }
    }

    /// A session row, if `user` may see it.
    pub async fn get(
        &self,
        user: &str,
        is_admin: bool,
        id: i64,
    ) -> Result<SessionRecord, SessionError> {
        let record = self.inner.store.session(id).await?;
        if record.user_name != user && !is_admin {
            return Err(SessionError::NotFound);
        }
        Ok(record)
    }

    /// Take `user`'s ended session `id` off their dashboard.
    pub async fn dismiss(&self, user: &str, id: i64) -> Result<(), SessionError> {
        if self.inner.store.dismiss_session(id, user, now_ms()).await? {
            Ok(())
        } else {
            Err(SessionError::NotFound)
        }
    }

    /// A user's sessions not over, then their last ended ones.
    /// How many sessions have not ended, by app kind and state (for the metrics).
    pub async fn counts(&self) -> Result<Vec<(String, String, i64)>, SessionError> {
        Ok(self.inner.store.session_counts().await?)
    }

    pub async fn list(&self, user: &str, ended: i64) -> Result<Vec<SessionRecord>, SessionError> {
        Ok(self.inner.store.sessions_of(user, ended).await?)
    }

    /// Progress of a session: live while it runs, else from its row.
    pub fn progress_of(&self, record: &SessionRecord) -> Progress {
        match self.route_by_id(record.id) {
            Some(r) => r.progress(),
            None => watch::final_progress(record),
        }
    }

    /// The job behind a session, as the scheduler sees it now.
    pub async fn job_view(&self, record: &SessionRecord) -> Option<scheduler::JobView> {
        let job = JobId::new(record.job_id? as u64);
        self.inner.scheduler.job(&portal(), job).await.ok()
    }
}

/// The runtime of an environment: the one it names, or for `auto` the one its image
/// calls for (a `.sif` apptainer, a directory bubblewrap, an OCI image podman or else
/// docker), and without an image the jobs' own.
fn environment_runtime(
    e: &EnvironmentConfig,
    jobs_runtime: &RuntimeKind,
) -> Result<RuntimeKind, String> {
    match (e.runtime.as_str(), e.image.as_deref()) {
        ("" | "auto", None) => Ok(jobs_runtime.clone()),
        ("" | "auto", Some(image)) if image.ends_with(".sif") => {
            crate::launch::detect_runtime("apptainer")
        }
        ("" | "auto", Some(image)) if Path::new(image).is_dir() => {
            crate::launch::detect_runtime("bubblewrap")
        }
        ("" | "auto", Some(_)) => crate::launch::detect_runtime("podman")
            .or_else(|_| crate::launch::detect_runtime("docker")),
        (named, _) => crate::launch::detect_runtime(named),
    }
}

/// `/user/<owner>/<name>/`.
pub fn prefix(owner: &str, name: &str) -> String {
    format!("/user/{owner}/{name}/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_environment_without_an_image_runs_in_the_jobs_runtime() {
        let mut e = EnvironmentConfig::host();
        assert_eq!(
            environment_runtime(&e, &RuntimeKind::Bubblewrap),
            Ok(RuntimeKind::Bubblewrap)
        );
        e.runtime = "none".into();
        assert_eq!(
            environment_runtime(&e, &RuntimeKind::Bubblewrap),
            Ok(RuntimeKind::Plain)
        );
        e.runtime = "lxc".into();
        assert!(environment_runtime(&e, &RuntimeKind::Plain).is_err());
    }
}
