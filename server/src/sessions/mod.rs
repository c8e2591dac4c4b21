//! Interactive sessions: JupyterLab, a terminal, or TensorBoard, run as the user by the
//! scheduler like any job (same queue, step supervisor and re-adoption), listening on
//! a unix socket in a per-session 0700 directory that the proxy reaches. Under the
//! Slurm backend the session is a Slurm job on a compute node, its directory is in the
//! user's home on shared storage, and the proxy reaches it over TCP (`remote`).
//!
//! Owns: starting (validation, the session's directory, the job), the routes the proxy
//! follows (rebuilt from the database at startup), progress, activity and culling,
//! stopping. Must not touch: HTTP types (the handlers map errors), SQL (the store),
//! process details (`launch`).

mod activity;
mod remote;
pub mod script;
mod secret;

pub use secret::SessionSecrets;
pub mod upstream;
mod watch;

use std::collections::{BTreeMap, HashMap};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use scheduler::{JobId, Owner};
use serde::Serialize;
use tokio::sync::watch as progress_channel;

use crate::config::{Config, EnvironmentConfig};
use crate::launch::{self, Container, Mount, RuntimeKind};
use crate::privilege::Identity;
use crate::sched::{submission, Requester, SchedError, Scheduler};
use crate::store::{NewSession, SessionRecord, Store, StoreError};
use crate::util::now_ms;

pub use upstream::Upstream;

/// What a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// JupyterLab with the environment's kernels; its terminal is the shell.
    Notebook,
    /// JupyterLab opened on a terminal.
    Terminal,
    /// TensorBoard on a log folder of the user's.
    Tensorboard,
}

impl Kind {
    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "notebook" => Some(Kind::Notebook),
            "terminal" => Some(Kind::Terminal),
            "tensorboard" => Some(Kind::Tensorboard),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Notebook => "notebook",
            Kind::Terminal => "terminal",
            Kind::Tensorboard => "tensorboard",
        }
    }

    /// Where the browser is sent once the server is ready, under the session's prefix.
    fn landing(self) -> &'static str {
        match self {
            Kind::Notebook => "lab",
            Kind::Terminal => "lab/workspaces/terminal",
            Kind::Tensorboard => "",
        }
    }

    /// What the portal asks to know the server answers.
    fn probe(self, prefix: &str, custom: bool) -> String {
        match (self, custom) {
            (_, true) => prefix.to_string(),
            (Kind::Tensorboard, _) => format!("{prefix}data/environment"),
            _ => format!("{prefix}api/status"),
        }
    }
}

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
}

/// What the proxy needs of a running session.
#[derive(Debug)]
pub struct Route {
    pub id: i64,
    pub owner: String,
    pub name: String,
    pub kind: Kind,
    /// `/user/<owner>/<name>/`.
    pub prefix: String,
    /// Where its server listens: known from the start on this machine, once the
    /// server names its port on a compute node.
    upstream: OnceLock<Upstream>,
    /// The session's directory (its log, its socket or connection file).
    dir: PathBuf,
    /// The uid its files must belong to (`None`: not checked; single-user mode).
    uid: Option<u32>,
    /// `token <secret>`: added to every proxied request.
    pub authorization: String,
    pub job: Option<JobId>,
    ready: AtomicBool,
    /// Unix milliseconds of the last proxied request or websocket message.
    last_activity: AtomicI64,
    progress: progress_channel::Sender<Progress>,
}

impl Route {
    /// Where its server listens, once known.
    pub fn upstream(&self) -> Option<&Upstream> {
        self.upstream.get()
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Note traffic through the proxy.
    pub fn touch(&self) {
        self.last_activity.store(now_ms(), Ordering::Relaxed);
    }

    pub fn last_activity(&self) -> i64 {
        self.last_activity.load(Ordering::Relaxed)
    }

    pub fn subscribe(&self) -> progress_channel::Receiver<Progress> {
        self.progress.subscribe()
    }

    pub fn progress(&self) -> Progress {
        self.progress.borrow().clone()
    }

    fn set_progress(&self, p: Progress) {
        self.ready.store(p.ready, Ordering::Release);
        self.progress.send_replace(p);
    }
}

#[derive(Default)]
struct Routes {
    by_id: HashMap<i64, Arc<Route>>,
    by_name: HashMap<(String, String), Arc<Route>>,
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
    /// `<spool>/sessions`: one 0700 directory per session, owned by its user.
    socket_root: PathBuf,
    /// Under the Slurm backend: sessions run on compute nodes.
    remote: Option<remote::Remote>,
    drop_privileges: bool,
    /// Session tokens from their stored nonces.
    secrets: SessionSecrets,
    routes: RwLock<Routes>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("socket_root", &self.inner.socket_root)
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
        spool_dir: &Path,
        jobs_runtime: RuntimeKind,
        drop_privileges: bool,
        secrets: SessionSecrets,
    ) -> anyhow::Result<(Sessions, tokio::task::JoinHandle<()>)> {
        let socket_root = spool_dir.join("sessions");
        std::fs::create_dir_all(&socket_root)?;
        std::fs::set_permissions(&socket_root, std::fs::Permissions::from_mode(0o711))?;
        let mut environments = Vec::new();
        for e in config.environments() {
            let runtime = environment_runtime(&e, &jobs_runtime)
                .map_err(|m| anyhow::anyhow!("environment {}: {m}", e.name))?;
            tracing::info!(environment = %e.name, ?runtime, image = ?e.image, "session environment");
            environments.push(Environment { config: e, runtime });
        }
        let remote = config
            .scheduler
            .is_slurm()
            .then(|| remote::Remote::new(&config, drop_privileges));
        let sessions = Sessions {
            inner: Arc::new(Inner {
                store,
                scheduler,
                quotas,
                config,
                environments,
                socket_root,
                remote,
                drop_privileges,
                secrets,
                routes: RwLock::new(Routes::default()),
            }),
        };
        sessions.restore().await?;
        let culler = tokio::spawn(activity::cull(sessions.clone()));
        Ok((sessions, culler))
    }

    pub fn environments(&self) -> &[Environment] {
        &self.inner.environments
    }

    pub fn config(&self) -> &crate::config::SessionsConfig {
        &self.inner.config.sessions
    }

    fn routes(&self) -> std::sync::RwLockReadGuard<'_, Routes> {
        // Writers only insert or remove whole entries: a poisoned map is still whole.
        self.inner
            .routes
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn routes_mut(&self) -> std::sync::RwLockWriteGuard<'_, Routes> {
        self.inner
            .routes
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The route of `owner`'s session `name`, if it is running or starting.
    pub fn route(&self, owner: &str, name: &str) -> Option<Arc<Route>> {
        self.routes()
            .by_name
            .get(&(owner.to_string(), name.to_string()))
            .cloned()
    }

    pub fn route_by_id(&self, id: i64) -> Option<Arc<Route>> {
        self.routes().by_id.get(&id).cloned()
    }

    fn all_routes(&self) -> Vec<Arc<Route>> {
        self.routes().by_id.values().cloned().collect()
    }

    /// Whether `user` may use (open, stop, watch) the session of `owner`.
    pub fn may_use(&self, user: &str, is_admin: bool, owner: &str) -> bool {
        user == owner || (is_admin && self.inner.config.sessions.admin_access)
    }

    /// Start a session for `owner`; returns its row once its job is queued.
    #[tracing::instrument(skip_all, fields(user = %owner.user), err)]
    pub async fn launch(
        &self,
        owner: Owner,
        request: StartRequest,
    ) -> Result<SessionRecord, SessionError> {
        let cfg = &self.inner.config.sessions;
        let name = request.name.clone().unwrap_or_else(|| "default".into());
        if !crate::config::is_session_name(&name) {
            return Err(invalid(
                "name",
                "use 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit",
            ));
        }
        let kind = match request.kind.as_deref() {
            None => Kind::Notebook,
            Some(k) => Kind::parse(k).ok_or_else(|| {
                invalid(
                    "kind",
                    format!("{k:?} is not notebook, terminal or tensorboard"),
                )
            })?,
        };
        let env = match request.environment.as_deref() {
            None => self.inner.environments.first(),
            Some(e) => self.inner.environments.iter().find(|x| x.config.name == e),
        }
        .ok_or_else(|| {
            invalid(
                "environment",
                format!(
                    "no environment {:?}; choose one of {}",
                    request.environment.as_deref().unwrap_or(""),
                    self.inner
                        .environments
                        .iter()
                        .map(|e| e.config.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?
        .clone();
        if self.inner.remote.is_some()
            && (env.config.image.is_some() || env.config.command.is_some())
        {
            return Err(SessionError::Conflict(format!(
                "environment {}: under Slurm, sessions run in the compute nodes' own software; \
                 an environment with an image or its own server command cannot start there",
                env.config.name
            )));
        }
        let hours = request.hours.unwrap_or(f64::from(cfg.default_hours));
        if !(hours > 0.0 && hours <= f64::from(cfg.max_hours)) {
            return Err(invalid(
                "hours",
                format!("must be more than 0 and at most {}", cfg.max_hours),
            ));
        }
        let seconds = (hours * 3600.0).ceil().max(1.0) as u64;
        let (gpus, gres) = gres(request.gpus, request.slice.as_deref())?;
        // A session is never left waiting for quota: over one, it does not start.
        self.inner
            .quotas
            .check_session(&owner, gpus, request.slice.as_deref(), hours)
            .await?;
        let identity = self.as_user(&owner.user).await?;
        let logdir = match kind {
            Kind::Tensorboard => Some(
                crate::homes::confine(
                    request.logdir.as_deref().unwrap_or("tensorboard"),
                    &identity.home,
                    &self.user_roots(),
                )
                .map_err(|m| invalid("logdir", m))?,
            ),
            _ => None,
        };
        let secret = SessionSecrets::new_nonce();
        let now = now_ms();
        let root = match &self.inner.remote {
            Some(_) => identity.home.join(".atrium").join("sessions"),
            None => self.inner.socket_root.clone(),
        };
        let record = self
            .inner
            .store
            .create_session(
                &NewSession {
                    user_name: &owner.user,
                    name: &name,
                    kind: kind.as_str(),
                    environment: &env.config.name,
                    gres: &gres,
                    logdir: logdir.as_ref().and_then(|l| l.to_str()),
                    secret: &secret,
                },
                &root.display().to_string(),
                i64::from(cfg.max_per_user),
                now,
            )
            .await?;
        match self
            .submit(
                &record,
                owner,
                &identity,
                kind,
                &env,
                seconds,
                logdir.as_deref(),
            )
            .await
        {
            Ok(job) => {
                self.inner
                    .store
                    .set_session_job(record.id, job.job as i64)
                    .await?;
                let mut record = record;
                record.job_id = Some(job.job as i64);
                self.follow(&record, self.inner.drop_privileges.then_some(identity.uid));
                Ok(record)
            }
            Err(e) => {
                let message = e.to_string();
                let _ = self
                    .inner
                    .store
                    .end_session(record.id, "failed", Some(&message), now_ms())
                    .await;
                let dir = Path::new(&record.socket_dir);
                match &self.inner.remote {
                    Some(remote) => remote.remove(&identity, dir).await,
                    None => {
                        let _ = std::fs::remove_dir_all(dir);
                    }
                }
                Err(e)
            }
        }
    }

    /// Whom the session's files and processes belong to: the user, as steps and Slurm
    /// commands run (the portal's own ids when unprivileged).
    async fn as_user(&self, user: &str) -> Result<Identity, SessionError> {
        if !self.inner.drop_privileges {
            let (uid, gid) = launch::current_ids();
            let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
            return Ok(Identity {
                user: user.to_string(),
                uid,
                gid,
                groups: Vec::new(),
                home,
            });
        }
        let id = self
            .inner
            .store
            .posix_identity(user)
            .await?
            .ok_or_else(|| {
                SessionError::Forbidden(format!(
                    "account {user} has no POSIX identity (uid); ask an administrator"
                ))
            })?;
        Ok(Identity::from_posix(user, id))
    }

    /// Folders a user's paths may name: their home is added by the caller; project
    /// spaces and data sets as the sessions see them.
    fn user_roots(&self) -> Vec<PathBuf> {
        launch::storage_mounts(&self.inner.config.storage)
            .into_iter()
            .map(|m| m.target)
            .collect()
    }

    /// Make the session's directory and queue its job.
    #[allow(clippy::too_many_arguments)]
    async fn submit(
        &self,
        record: &SessionRecord,
        owner: Owner,
        identity: &Identity,
        kind: Kind,
        env: &Environment,
        seconds: u64,
        logdir: Option<&Path>,
    ) -> Result<JobId, SessionError> {
        let dir = PathBuf::from(&record.socket_dir);
        let remote = self.inner.remote.as_ref();
        match remote {
            Some(r) => r
                .prepare(
                    identity,
                    &dir,
                    &self.inner.secrets.token(&record.secret),
                    kind == Kind::Tensorboard,
                )
                .await
                .map_err(|e| {
                    SessionError::Internal(format!("preparing the session directory: {e}"))
                })?,
            None => prepare_dir(
                &dir,
                kind,
                identity,
                self.inner.drop_privileges,
                &self.inner.secrets.token(&record.secret),
            )
            .map_err(|e| SessionError::Internal(format!("preparing the session directory: {e}")))?,
        }
        let text = script::script(&script::ScriptInput {
            kind,
            listen: match remote {
                Some(_) => script::Listen::Tcp,
                None => script::Listen::Socket,
            },
            kernels: &env.config.kernels,
            command: env.config.command.as_deref(),
        });
        let prefix = prefix(&record.user_name, &record.name);
        let mut options: BTreeMap<String, serde_json::Value> = BTreeMap::new();
        options.insert(
            "job-name".into(),
            format!("{}:{}", kind.as_str(), record.name).into(),
        );
        options.insert(
            "time".into(),
            format!(
                "{}:{:02}:{:02}",
                seconds / 3600,
                seconds / 60 % 60,
                seconds % 60
            )
            .into(),
        );
        options.insert(
            "output".into(),
            dir.join("session.log").display().to_string().into(),
        );
        if !record.gres.is_empty() {
            options.insert("gres".into(), record.gres.clone().into());
        }
        let partition = match remote {
            Some(r) => r.partition.as_ref(),
            None => self.inner.config.sessions.partition.as_ref(),
        };
        if let Some(p) = partition {
            options.insert("partition".into(), p.clone().into());
        }
        let logdir = logdir.and_then(|l| l.to_str());
        let environment: BTreeMap<String, String> = match remote {
            // No container on a compute node: the environment's variables (its
            // `PATH` to Jupyter) go to the job itself.
            Some(r) => env
                .config
                .env
                .clone()
                .into_iter()
                .chain(script::tcp_environment(&dir, &prefix, &r.listen, logdir))
                .collect(),
            None => script::environment(&dir, &prefix, logdir)
                .into_iter()
                .collect(),
        };
        let home = identity.home.display().to_string();
        let limits = self.inner.config.jobs.submission_limits();
        let mut sub = submission::build(
            Some(&text),
            None,
            &options,
            environment,
            Some(home),
            &limits,
        )
        .map_err(|e| SessionError::Invalid {
            field: "gpus",
            message: e.to_string(),
        })?;
        // On this machine the server runs in the environment's container.
        if remote.is_none() {
            let mut mounts: Vec<Mount> = env
                .config
                .mounts
                .iter()
                .map(|m| Mount::from_config(m, false))
                .collect();
            mounts.push(Mount {
                source: dir.clone(),
                target: dir.clone(),
                read_only: false,
            });
            sub.container = Some(Container {
                runtime: env.runtime.clone(),
                image: env.config.image.clone(),
                mounts,
                env: env.config.env.clone().into_iter().collect(),
            });
        }
        Ok(self
            .inner
            .scheduler
            .submit(owner, sub, identity.home.clone())
            .await?)
    }

    /// Register the session's route and watch it until it ends.
    fn follow(&self, record: &SessionRecord, uid: Option<u32>) {
        let Some(kind) = Kind::parse(&record.kind) else {
            return;
        };
        let prefix = prefix(&record.user_name, &record.name);
        let (progress, _) = progress_channel::channel(watch::initial(record, &prefix, kind));
        let route = Arc::new(Route {
            id: record.id,
            owner: record.user_name.clone(),
            name: record.name.clone(),
            kind,
            prefix: prefix.clone(),
            upstream: match &self.inner.remote {
                Some(_) => OnceLock::new(),
                None => OnceLock::from(Upstream::Unix {
                    path: Path::new(&record.socket_dir).join(script::SOCKET),
                    owner: uid,
                }),
            },
            dir: PathBuf::from(&record.socket_dir),
            uid,
            authorization: format!("token {}", self.inner.secrets.token(&record.secret)),
            job: record.job_id.map(|j| JobId::new(j as u64)),
            ready: AtomicBool::new(record.state == "ready"),
            last_activity: AtomicI64::new(record.last_activity.unwrap_or(record.created_at)),
            progress,
        });
        {
            let mut routes = self.routes_mut();
            routes.by_id.insert(record.id, route.clone());
            routes.by_name.insert(
                (record.user_name.clone(), record.name.clone()),
                route.clone(),
            );
        }
        let custom = self
            .inner
            .environments
            .iter()
            .find(|e| e.config.name == record.environment)
            .is_some_and(|e| e.config.command.is_some());
        tokio::spawn(watch::follow(self.clone(), route, custom));
    }

    fn forget(&self, route: &Route) {
        let mut routes = self.routes_mut();
        routes.by_id.remove(&route.id);
        let key = (route.owner.clone(), route.name.clone());
        if routes.by_name.get(&key).is_some_and(|r| r.id == route.id) {
            routes.by_name.remove(&key);
        }
    }

    /// Routes for every session the database says is not over (after a restart).
    async fn restore(&self) -> anyhow::Result<()> {
        for record in self.inner.store.active_sessions().await? {
            if record.job_id.is_none() {
                self.inner
                    .store
                    .end_session(
                        record.id,
                        "failed",
                        Some("the portal stopped before the session was queued"),
                        now_ms(),
                    )
                    .await?;
                continue;
            }
            let uid = if self.inner.drop_privileges {
                self.inner
                    .store
                    .posix_identity(&record.user_name)
                    .await?
                    .map(|i| i.uid)
            } else {
                None
            };
            tracing::info!(session = record.id, user = %record.user_name, name = %record.name, "following the session again");
            self.follow(&record, uid);
        }
        Ok(())
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

    /// A user's sessions not over, then their last ended ones.
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
            launch::detect_runtime("apptainer")
        }
        ("" | "auto", Some(image)) if Path::new(image).is_dir() => {
            launch::detect_runtime("bubblewrap")
        }
        ("" | "auto", Some(_)) => {
            launch::detect_runtime("podman").or_else(|_| launch::detect_runtime("docker"))
        }
        (named, _) => launch::detect_runtime(named),
    }
}

/// `/user/<owner>/<name>/`.
pub fn prefix(owner: &str, name: &str) -> String {
    format!("/user/{owner}/{name}/")
}

/// The `--gres` of a request: `gpu:N`, `gpu:TYPE:N` or `shard:N`.
fn gres(gpus: Option<u32>, slice: Option<&str>) -> Result<(u32, String), SessionError> {
    let n = gpus.unwrap_or(if slice.is_some() { 1 } else { 0 });
    if n > 64 {
        return Err(invalid("gpus", "at most 64"));
    }
    let gres = match slice.map(str::trim).filter(|s| !s.is_empty()) {
        None if n == 0 => Ok(String::new()),
        None => Ok(format!("gpu:{n}")),
        Some(_) if n == 0 => Err(invalid("gpus", "a slice needs at least 1")),
        Some("shard") => Ok(format!("shard:{n}")),
        Some(t)
            if t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_') =>
        {
            Ok(format!("gpu:{t}:{n}"))
        }
        Some(t) => Err(invalid(
            "slice",
            format!("{t:?} is not a GPU type or MIG profile"),
        )),
    }?;
    Ok((n, gres))
}

/// Create the session's directory: the user's, mode 0700, with the server's runtime
/// folder, its token file (0600) and (for TensorBoard) its launcher.
fn prepare_dir(
    dir: &Path,
    kind: Kind,
    id: &Identity,
    chown: bool,
    token: &str,
) -> std::io::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let runtime = dir.join("runtime");
    std::fs::create_dir(&runtime)?;
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))?;
    let token_file = dir.join(script::TOKEN_FILE);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&token_file)
        .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{token}\n").as_bytes()))?;
    let mut owned = vec![dir.to_path_buf(), runtime, token_file];
    if kind == Kind::Tensorboard {
        let launcher = dir.join(script::TENSORBOARD_LAUNCHER);
        std::fs::write(&launcher, script::TENSORBOARD_LAUNCHER_SOURCE)?;
        std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o644))?;
        owned.push(launcher);
    }
    if chown {
        for p in owned {
            std::os::unix::fs::chown(&p, Some(id.uid), Some(id.gid))?;
        }
    }
    Ok(())
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

    #[test]
    fn gres_from_gpus_and_slices() {
        assert_eq!(gres(None, None).ok().map(|(_, g)| g), Some(String::new()));
        assert_eq!(
            gres(Some(2), None).ok().map(|(_, g)| g),
            Some("gpu:2".into())
        );
        assert_eq!(
            gres(None, Some("1g.10gb")).ok().map(|(_, g)| g),
            Some("gpu:1g.10gb:1".into())
        );
        assert_eq!(
            gres(Some(2), Some("shard")).ok().map(|(_, g)| g),
            Some("shard:2".into())
        );
        assert!(gres(Some(0), Some("a100")).is_err());
        assert!(gres(Some(1), Some("a;b")).is_err());
    }
}
