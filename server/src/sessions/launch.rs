//! Starting a session: the request checked field by field, the quota, the row, the
//! session's directory on its host, and its job, built as a typed request (the GPUs,
//! the time limit in seconds) that the scheduler takes as it is.
//!
//! Owns: validation of a [`StartRequest`], the session's job request and directory
//! files, undoing a start that failed.
//! Must not touch: HTTP types, SQL (the store), the routes once registered (`routes`),
//! the session's lifecycle after it is queued (`watch`), a backend's own types.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use scheduler::{GpuPer, GpuRequest, JobId, JobRequest, Owner, SliceKind, TimeLimit};

use super::apps::{App, Protocol};
use super::{invalid, prefix, script, Environment, SessionError, Sessions, StartRequest};
use crate::launch::{self, Container, Mount};
use crate::privilege::Identity;
use crate::sched::host::{HostFile, SessionHost};
use crate::sched::{Submission, SubmissionError};
use crate::store::{NewSession, SessionRecord};
use crate::util::now_ms;

/// Most GPUs (or slices) a session may ask for.
const MAX_GPUS: u32 = 64;

impl Sessions {
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
        let app = self.app_to_start(request.kind.as_deref())?;
        let env = self.environment(&app, request.environment.as_deref())?;
        if !self.inner.host.is_local()
            && (env.config.image.is_some() || env.config.command.is_some())
        {
            return Err(SessionError::Conflict(format!(
                "environment {}: under Slurm, sessions run in the compute nodes' own software; \
                 an environment with an image or its own server command cannot start there",
                env.config.name
            )));
        }
        if !self.inner.host.is_local() && app.config.node_command.is_empty() {
            return Err(SessionError::Conflict(format!(
                "{} does not run on the cluster's compute nodes here",
                app.config.title
            )));
        }
        // Every value is checked (and bounded) before anything is stored or expanded.
        let fields = app.values(&request.fields)?;
        let hours = request.hours.unwrap_or(f64::from(cfg.default_hours));
        if !(hours > 0.0 && hours <= f64::from(cfg.max_hours)) {
            return Err(invalid(
                "hours",
                format!("must be more than 0 and at most {}", cfg.max_hours),
            ));
        }
        let seconds = (hours * 3600.0).ceil().max(1.0) as u64;
        let gpus = gpu_request(request.gpus, request.slice.as_deref())?;
        // A session is never left waiting for quota: over one, it does not start.
        self.inner
            .quotas
            .check_session(
                &owner,
                gpus.as_ref().map_or(0, |g| g.count),
                request.slice.as_deref(),
                hours,
            )
            .await?;
        let identity = self.as_user(&owner.user).await?;
        let logdir = match app.config.logdir {
            true => Some(
                crate::homes::confine(
                    request.logdir.as_deref().unwrap_or("tensorboard"),
                    &identity.home,
                    &self.user_roots(),
                )
                .map_err(|m| invalid("logdir", m))?,
            ),
            _ => None,
        };
        // "Open a terminal here": the folder its terminal opens in.
        let folder = match (&request.folder, app.config.open_terminal) {
            (None, _) => None,
            (Some(f), true) => Some(
                crate::homes::confine(f, &identity.home, &self.user_roots())
                    .map_err(|m| invalid("folder", m))?,
            ),
            (Some(_), false) => {
                return Err(invalid(
                    "folder",
                    format!(
                        "{} does not open in a folder; a terminal does",
                        app.config.title
                    ),
                ))
            }
        };
        let secret = super::SessionSecrets::new_nonce();
        let root = self.inner.host.root(&identity.home);
        let record = self
            .inner
            .store
            .create_session(
                &NewSession {
                    user_name: &owner.user,
                    name: &name,
                    kind: app.id(),
                    environment: &env.config.name,
                    gpus: gpus.as_ref(),
                    logdir: logdir.as_ref().and_then(|l| l.to_str()),
                    folder: folder.as_ref().and_then(|f| f.to_str()),
                    secret: &secret,
                },
                &root.display().to_string(),
                i64::from(cfg.max_per_user),
                now_ms(),
            )
            .await?;
        let submitted = self
            .submit(
                &record,
                owner,
                &identity,
                &app,
                &env,
                seconds,
                logdir.as_deref(),
                &fields,
            )
            .await;
        match submitted {
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
                // Refused before it was queued: the answer says why; no card of it.
                let _ = self
                    .inner
                    .store
                    .dismiss_session(record.id, &record.user_name, now_ms())
                    .await;
                self.inner
                    .host
                    .remove(Some(&identity), Path::new(&record.socket_dir))
                    .await;
                Err(e)
            }
        }
    }

    /// The app a request names (`kind`; JupyterLab's `notebook`, else the first app,
    /// when it names none).
    fn app_to_start(&self, id: Option<&str>) -> Result<App, SessionError> {
        let apps = &self.inner.apps;
        match id {
            None => apps
                .iter()
                .find(|a| a.id() == "notebook")
                .or_else(|| apps.first()),
            Some(id) => apps.iter().find(|a| a.id() == id),
        }
        .cloned()
        .ok_or_else(|| {
            let id: String = id.unwrap_or("").chars().take(64).collect();
            invalid(
                "kind",
                format!(
                    "{id:?} is not an app here; choose one of {}",
                    apps.iter().map(App::id).collect::<Vec<_>>().join(", ")
                ),
            )
        })
    }

    /// The environment a request names (the first the app may run in when it names
    /// none).
    fn environment(&self, app: &App, name: Option<&str>) -> Result<Environment, SessionError> {
        let environments: Vec<&Environment> = self
            .inner
            .environments
            .iter()
            .filter(|e| app.offers(&e.config.name))
            .collect();
        match name {
            None => environments.first(),
            Some(e) => environments.iter().find(|x| x.config.name == e),
        }
        .map(|e| (*e).clone())
        .ok_or_else(|| {
            invalid(
                "environment",
                format!(
                    "no environment {:?} for {}; choose one of {}",
                    name.unwrap_or("").chars().take(64).collect::<String>(),
                    app.config.title,
                    environments
                        .iter()
                        .map(|e| e.config.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
    }

    /// Whom the session's files and processes belong to: the user, as steps and Slurm
    /// commands run (the portal's own ids when unprivileged).
    pub(super) async fn as_user(&self, user: &str) -> Result<Identity, SessionError> {
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
        Ok(self.inner.identities.require(user).await?)
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
        app: &App,
        env: &Environment,
        seconds: u64,
        logdir: Option<&Path>,
        fields: &[(String, String)],
    ) -> Result<JobId, SessionError> {
        let host = &self.inner.host;
        let dir = PathBuf::from(&record.socket_dir);
        let token = format!("{}\n", self.inner.secrets.token(&record.secret));
        host.prepare(identity, &dir, &files(host, app.protocol, &token))
            .await
            .map_err(|e| SessionError::Internal(format!("preparing the session directory: {e}")))?;
        let kernels = app.kernels(&env.config.kernels);
        let text = script::script(&script::ScriptInput {
            app,
            listen: match host {
                SessionHost::Local(_) => script::Listen::Socket,
                SessionHost::Node(_) => script::Listen::Tcp,
            },
            kernels: &kernels,
            command: env.config.command.as_deref(),
        });
        let prefix = prefix(&record.user_name, &record.name);
        let logdir = logdir.and_then(|l| l.to_str());
        // The fields' values reach the server as variables, never as script text.
        let mut environment: BTreeMap<String, String> = match host {
            SessionHost::Local(_) => script::environment(&dir, &prefix, logdir)
                .into_iter()
                .collect(),
            // No container on a compute node: the environment's variables (its
            // `PATH` to Jupyter) go to the job itself.
            SessionHost::Node(node) => env
                .config
                .env
                .clone()
                .into_iter()
                .chain(script::tcp_environment(&dir, &prefix, &node.listen, logdir))
                .collect(),
        };
        environment.extend(fields.iter().cloned());
        let request = job_request(
            app.id(),
            &record.name,
            record.gpus.clone(),
            seconds,
            &dir,
            host.partition(),
        );
        let limits = self.inner.config.jobs.submission_limits();
        let mut sub = Submission::from_request(
            text,
            request,
            environment,
            Some(identity.home.display().to_string()),
            &limits,
        )
        .map_err(request_error)?;
        // On this machine the server runs in the environment's container.
        if host.is_local() {
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
}

/// The GPUs a request asks for: `gpus` whole GPUs, or `gpus` slices of the `slice`
/// type (a GPU type, a MIG profile, or `shard`; one when `gpus` is not given).
fn gpu_request(gpus: Option<u32>, slice: Option<&str>) -> Result<Option<GpuRequest>, SessionError> {
    let n = gpus.unwrap_or(if slice.is_some() { 1 } else { 0 });
    if n > MAX_GPUS {
        return Err(invalid("gpus", format!("at most {MAX_GPUS}")));
    }
    let kind = match slice.map(str::trim).filter(|s| !s.is_empty()) {
        None if n == 0 => return Ok(None),
        None => SliceKind::Gpu { r#type: None },
        Some(_) if n == 0 => return Err(invalid("gpus", "a slice needs at least 1")),
        Some("shard") => SliceKind::Shard,
        Some(t)
            if t.len() <= 64
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_') =>
        {
            SliceKind::Gpu {
                r#type: Some(t.to_string()),
            }
        }
        Some(t) => {
            return Err(invalid(
                "slice",
                format!("{t:?} is not a GPU type or MIG profile"),
            ))
        }
    };
    Ok(Some(GpuRequest {
        kind,
        count: n,
        per: GpuPer::Node,
    }))
}

/// The session's job: named `<kind>:<name>`, its GPUs per node (a session is one
/// node), its time limit, its log in its directory, in the sessions' partition.
fn job_request(
    app: &str,
    name: &str,
    gpus: Option<GpuRequest>,
    seconds: u64,
    dir: &Path,
    partition: Option<&str>,
) -> JobRequest {
    JobRequest {
        name: Some(format!("{app}:{name}")),
        partition: partition.map(str::to_string),
        gpus,
        time_limit: Some(TimeLimit::Seconds(seconds)),
        output: Some(dir.join("session.log").display().to_string()),
        ..Default::default()
    }
}

/// The files of a session's directory: its token (0600), and what answers the
/// proxy's challenge with it on a compute node (TensorBoard's launcher, or Jupyter's
/// proof extension); on this machine TensorBoard's unix-socket launcher.
fn files<'a>(host: &SessionHost, protocol: Protocol, token: &'a str) -> Vec<HostFile<'a>> {
    let mut files = vec![HostFile {
        name: script::TOKEN_FILE,
        contents: token,
        private: true,
    }];
    let code = match (host, protocol) {
        (_, Protocol::Tensorboard) => Some((
            script::TENSORBOARD_LAUNCHER,
            script::TENSORBOARD_LAUNCHER_SOURCE,
        )),
        (SessionHost::Node(_), Protocol::Jupyter) => {
            Some((script::PROOF_EXTENSION, script::PROOF_EXTENSION_SOURCE))
        }
        _ => None,
    };
    if let Some((name, contents)) = code {
        files.push(HostFile {
            name,
            contents,
            private: false,
        });
    }
    files
}

/// A request the submission refused, named by the session request's field.
fn request_error(e: SubmissionError) -> SessionError {
    let field = match e.field() {
        "time" => "hours",
        "gres" => "gpus",
        other => other,
    };
    let message = match &e {
        SubmissionError::Field { message, .. } => message.clone(),
        SubmissionError::Directive { .. } => e.to_string(),
    };
    invalid(field, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gres(gpus: Option<u32>, slice: Option<&str>) -> Option<String> {
        gpu_request(gpus, slice)
            .ok()
            .map(|g| crate::domain::gres::text_of(g.as_ref()))
    }

    fn field(gpus: Option<u32>, slice: Option<&str>) -> Option<&'static str> {
        match gpu_request(gpus, slice) {
            Err(SessionError::Invalid { field, .. }) => Some(field),
            _ => None,
        }
    }

    #[test]
    fn gres_from_gpus_and_slices() {
        assert_eq!(gres(None, None), Some(String::new()));
        assert_eq!(gres(Some(2), None), Some("gpu:2".into()));
        assert_eq!(gres(None, Some("1g.10gb")), Some("gpu:1g.10gb:1".into()));
        assert_eq!(gres(Some(2), Some("shard")), Some("shard:2".into()));
        assert_eq!(field(Some(0), Some("a100")), Some("gpus"));
        assert_eq!(field(Some(65), None), Some("gpus"));
        assert_eq!(field(Some(1), Some("a;b")), Some("slice"));
        assert_eq!(field(Some(1), Some(&"x".repeat(65))), Some("slice"));
    }

    #[test]
    fn a_session_job_is_a_typed_request() {
        let gpus = gpu_request(Some(2), Some("a100")).ok().flatten();
        let r = job_request(
            "terminal",
            "dev",
            gpus.clone(),
            5400,
            Path::new("/spool/sessions/9"),
            Some("interactive"),
        );
        assert_eq!(r.name.as_deref(), Some("terminal:dev"));
        assert_eq!(r.partition.as_deref(), Some("interactive"));
        assert_eq!(r.gpus, gpus);
        assert_eq!(r.time_limit, Some(TimeLimit::Seconds(5400)));
        assert_eq!(r.output.as_deref(), Some("/spool/sessions/9/session.log"));
        // What the submission makes of it is the same request.
        let sub = Submission::from_request(
            "#!/bin/sh\ntrue\n".into(),
            r.clone(),
            BTreeMap::new(),
            Some("/home/a".into()),
            &Default::default(),
        )
        .expect("submission");
        assert_eq!(sub.request, r);
    }

    #[test]
    fn refusals_name_the_session_request_field() {
        let refused = |field: &'static str| match request_error(SubmissionError::Field {
            field,
            message: "no".into(),
        }) {
            SessionError::Invalid { field, .. } => field,
            _ => "",
        };
        assert_eq!(refused("time"), "hours");
        assert_eq!(refused("gpus"), "gpus");
        assert_eq!(refused("partition"), "partition");
        assert_eq!(refused("environment"), "environment");
    }
}
