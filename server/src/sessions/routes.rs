//! The registry of routes the proxy follows: one per session that is starting or
//! running, by id and by `(owner, name)`, rebuilt from the database at startup, each
//! with its live progress and a watcher (`watch`) that drops it when the session ends.
//!
//! Owns: `Route` (where a session's server listens once known, its readiness, its
//! activity and progress), registering, finding and forgetting routes.
//! Must not touch: HTTP types, SQL (the store), the session's lifecycle (`watch`), how
//! a session is started (`launch`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use scheduler::JobId;
use tokio::sync::watch as progress_channel;

use super::{prefix, script, watch, App, Progress, Sessions, Upstream};
use crate::store::SessionRecord;
use crate::util::now_ms;

/// What the proxy needs of a running session.
#[derive(Debug)]
pub struct Route {
    pub id: i64,
    pub owner: String,
    pub name: String,
    /// The app it runs.
    pub app: App,
    /// `/user/<owner>/<name>/`.
    pub prefix: String,
    /// Where its server listens: known from the start on this machine, once the
    /// server names its port on a compute node.
    pub(super) upstream: OnceLock<Upstream>,
    /// The session's directory (its log, its socket or connection file).
    pub(super) dir: PathBuf,
    /// `token <secret>`: added to every proxied request.
    pub authorization: String,
    /// `<name>=<secret>`, for an app that checks a cookie (`token_cookie`): sent on
    /// every proxied request in place of any of that name from the browser.
    pub token_cookie: Option<String>,
    pub job: Option<JobId>,
    /// The folder its terminal opens in (`open_terminal` apps; `None`: the home).
    pub folder: Option<String>,
    /// Unix milliseconds it was asked for.
    pub created_at: i64,
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

    /// The path the session's server gets for the browser's `path` (which starts
    /// with the prefix): the same, or for an app that cannot be told its base URL
    /// the part after the prefix.
    pub fn upstream_path<'a>(&self, path: &'a str) -> std::borrow::Cow<'a, str> {
        if !self.app.config.strip_base_path {
            return path.into();
        }
        match path.strip_prefix(self.prefix.trim_end_matches('/')) {
            Some(rest) if rest.starts_with('/') => rest.into(),
            Some(rest) => format!("/{rest}").into(),
            None => path.into(),
        }
    }

    pub fn subscribe(&self) -> progress_channel::Receiver<Progress> {
        self.progress.subscribe()
    }

    pub fn progress(&self) -> Progress {
        self.progress.borrow().clone()
    }

    pub(super) fn set_progress(&self, p: Progress) {
        self.ready.store(p.ready, Ordering::Release);
        self.progress.send_replace(p);
    }
}

#[derive(Default)]
pub(super) struct Routes {
    by_id: HashMap<i64, Arc<Route>>,
    by_name: HashMap<(String, String), Arc<Route>>,
}

impl Sessions {
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

    pub(super) fn all_routes(&self) -> Vec<Arc<Route>> {
        self.routes().by_id.values().cloned().collect()
    }

    /// Whether `user` may use (open, stop, watch) the session of `owner`.
    pub fn may_use(&self, user: &str, is_admin: bool, owner: &str) -> bool {
        user == owner || (is_admin && self.inner.config.sessions.admin_access)
    }

    /// Register the session's route and watch it until it ends; on this machine its
    /// socket must belong to `uid` (`None`: not checked; single-user mode).
    pub(super) fn follow(&self, record: &SessionRecord, uid: Option<u32>) {
        let Some(app) = self.app(&record.kind) else {
            tracing::error!(session = record.id, app = %record.kind, "the session's app is not configured: it is not followed");
            return;
        };
        let prefix = prefix(&record.user_name, &record.name);
        let token = self.inner.secrets.token(&record.secret);
        let token_cookie = (!app.config.token_cookie.is_empty())
            .then(|| format!("{}={token}", app.config.token_cookie));
        let (progress, _) = progress_channel::channel(watch::initial(record, &prefix, &app));
        let route = Arc::new(Route {
            id: record.id,
            owner: record.user_name.clone(),
            name: record.name.clone(),
            app,
            prefix: prefix.clone(),
            // On this machine the server listens on its socket; on a node, where is
            // read once it runs (`watch`).
            upstream: if self.inner.host.is_local() {
                OnceLock::from(Upstream::Unix {
                    path: Path::new(&record.socket_dir).join(script::SOCKET),
                    owner: uid,
                })
            } else {
                OnceLock::new()
            },
            dir: PathBuf::from(&record.socket_dir),
            authorization: format!("token {token}"),
            token_cookie,
            job: record.job_id.map(|j| JobId::new(j as u64)),
            folder: record.folder.clone(),
            created_at: record.created_at,
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

    pub(super) fn forget(&self, route: &Route) {
        let mut routes = self.routes_mut();
        routes.by_id.remove(&route.id);
        let key = (route.owner.clone(), route.name.clone());
        if routes.by_name.get(&key).is_some_and(|r| r.id == route.id) {
            routes.by_name.remove(&key);
        }
    }

    /// Routes for every session the database says is not over (after a restart).
    pub(super) async fn restore(&self) -> anyhow::Result<()> {
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
                    .identities
                    .posix(&record.user_name)
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
}
