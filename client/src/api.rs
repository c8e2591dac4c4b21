//! The portal's job API as the client sees it: where the portal is, which token to
//! send, the HTTP calls, and the JSON shapes it reads (lenient: unknown fields are
//! ignored, missing ones take defaults). Owns no output formatting.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;

/// The portal's address when `ATRIUM_URL` is not set.
pub const DEFAULT_URL: &str = "http://127.0.0.1:8000";

/// One job (or array task, or an array's pending tasks) as `GET /jobs` lists it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct JobInfo {
    pub id: String,
    pub job_id: u64,
    pub array_task_id: Option<u32>,
    pub display_id: String,
    pub name: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    pub state: String,
    pub state_code: String,
    pub reason: Option<String>,
    pub time_used: u64,
    pub nodes: u32,
    pub nodelist: String,
    pub cpus: Option<u64>,
    pub memory_mb: Option<u64>,
    /// Generic resources per node (`gpu:2`).
    pub gres: String,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    /// RFC 3339.
    pub submit_time: String,
    pub start_time: Option<String>,
    pub end_time: Option<String>,
    /// Seconds; `None`: unlimited.
    pub time_limit: Option<u64>,
    /// Its steps (`srun` inside it), oldest first.
    pub steps: Vec<StepInfo>,
    /// A pending job's planned start (RFC 3339).
    pub expected_start: Option<String>,
    /// When it became eligible to start (RFC 3339); absent while held or waiting on a
    /// dependency.
    pub eligible_time: Option<String>,
    pub priority: Option<i64>,
    /// The remaining tasks of an array's pending record (`5-9%2`).
    pub array_spec: Option<String>,
    pub qos: Option<String>,
    /// What it waits for (`afterok:12`).
    pub dependency: Option<String>,
    pub comment: Option<String>,
    /// `--constraint`.
    pub features: Option<String>,
    /// `--nodelist` and `--exclude`.
    pub req_nodes: Option<String>,
    pub exc_nodes: Option<String>,
    /// CPUs asked for, in all.
    pub min_cpus: Option<u64>,
    pub cpus_per_task: Option<u64>,
    pub ntasks: Option<u64>,
    /// Memory asked for, as `--mem` or `--mem-per-cpu` spell it (`4G`, `2G/cpu`).
    pub min_memory: Option<String>,
    pub nice: Option<i64>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub group: Option<String>,
    pub workdir: Option<String>,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    /// The script's path, when it was submitted from a file.
    pub command: Option<String>,
    pub restarts: u32,
    pub cluster: Option<String>,
    /// Who cancelled it (uid), when it was cancelled.
    pub cancelled_by: Option<u32>,
    /// CPU time used and the largest resident memory, where sampled (`detail`).
    pub cpu_seconds: Option<f64>,
    pub max_rss_kb: Option<u64>,
}

impl JobInfo {
    /// An array's own record (not one of its tasks'): the tasks it still stands for.
    pub fn array_tasks(&self) -> Option<scheduler::ArraySpec> {
        self.array_spec
            .as_deref()
            .filter(|_| self.array_task_id.is_none())?
            .parse()
            .ok()
    }

    /// Whether this is an array's record that stands for task `t`.
    pub fn holds_task(&self, t: u32) -> bool {
        self.array_tasks().is_some_and(|spec| spec.contains(t))
    }

    /// When it ended, or is expected to end (its start or planned start, plus its
    /// limit).
    pub fn end_or_expected(&self) -> Option<jiff::Timestamp> {
        if let Some(end) = self.end_time.as_deref() {
            return end.parse().ok();
        }
        let start = self
            .start_time
            .as_deref()
            .or(self.expected_start.as_deref())?;
        let start = start.parse::<jiff::Timestamp>().ok()?;
        let limit = i64::try_from(self.time_limit?).ok()?;
        jiff::Timestamp::from_second(start.as_second().saturating_add(limit)).ok()
    }
}

#[cfg(test)]
impl JobInfo {
    /// Job 17 of alice, `train`, on one node `head`, for tests.
    pub fn sample(state: &str, code: &str) -> JobInfo {
        JobInfo {
            id: "17".into(),
            job_id: 17,
            display_id: "17".into(),
            name: "train".into(),
            user: "alice".into(),
            account: "lab".into(),
            partition: "gpu".into(),
            state: state.into(),
            state_code: code.into(),
            nodes: 1,
            nodelist: "head".into(),
            ..JobInfo::default()
        }
    }
}

/// `GET /jobs`: one page.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct JobPage {
    pub jobs: Vec<JobInfo>,
    pub total: u64,
}

/// One partition as `GET /partitions` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct PartitionInfo {
    pub name: String,
    pub default: bool,
    /// `UNLIMITED` or `D-HH:MM:SS` / `HH:MM:SS`.
    pub max_time: serde_json::Value,
}

#[derive(Debug, Deserialize)]
struct Me {
    username: String,
}

/// `POST /jobs`'s answer.
#[derive(Debug, Deserialize)]
pub struct Submitted {
    pub job_id: u64,
}

/// `POST /jobs?dry_run=true`'s answer.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct DryRun {
    /// RFC 3339; absent: no start can be planned (see `reason`).
    pub expected_start: Option<String>,
    pub ahead_of_queue: bool,
    pub nodes: Vec<String>,
    pub cpus: u32,
    pub partition: String,
    pub reason: Option<String>,
    pub ignored: Vec<Ignored>,
}

/// An option accepted and ignored by the portal, with why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Ignored {
    pub option: String,
    pub reason: String,
}

/// A failed call: what to print after `<cmd>: error: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    /// The HTTP status, when the portal answered.
    pub status: Option<u16>,
    pub message: String,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl CallError {
    fn local(message: impl Into<String>) -> Self {
        CallError {
            status: None,
            message: message.into(),
        }
    }
}

/// Where the client finds its settings: the environment and the home directory.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    pub url: String,
    pub token: String,
    pub ca_file: Option<PathBuf>,
}

impl Settings {
    /// `ATRIUM_URL`, `ATRIUM_TOKEN` (else the token file under `home`) and
    /// `ATRIUM_CA_FILE`, read through `var`.
    pub fn load(
        var: impl Fn(&str) -> Option<String>,
        home: Option<&Path>,
    ) -> Result<Settings, CallError> {
        let url = var("ATRIUM_URL")
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_URL.into());
        let token = match var("ATRIUM_TOKEN").filter(|t| !t.trim().is_empty()) {
            Some(token) => token.trim().to_string(),
            None => {
                let home = home.ok_or_else(|| {
                    CallError::local("no token: set ATRIUM_TOKEN (HOME is not set)")
                })?;
                read_token_file(&token_path(home))?
            }
        };
        Ok(Settings {
            url: url.trim_end_matches('/').to_string(),
            token,
            ca_file: var("ATRIUM_CA_FILE")
                .filter(|f| !f.is_empty())
                .map(PathBuf::from),
        })
    }
}

/// `~/.config/atrium/token`.
pub fn token_path(home: &Path) -> PathBuf {
    home.join(".config").join("atrium").join("token")
}

/// The first line of the token file, refused (as ssh refuses a private key) when
/// its group or others have any access to it.
pub fn read_token_file(path: &Path) -> Result<String, CallError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            CallError::local(format!(
                "no token: set ATRIUM_TOKEN or write one to {shown} (chmod 600); create tokens on the portal's home page"
            ))
        } else {
            CallError::local(format!("cannot read {shown}: {e}"))
        }
    })?;
    check_private(path, &meta)?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| CallError::local(format!("cannot read {shown}: {e}")))?;
    let token = text.lines().next().unwrap_or("").trim();
    if token.is_empty() {
        return Err(CallError::local(format!("{shown} is empty")));
    }
    Ok(token.to_string())
}

#[cfg(unix)]
fn check_private(path: &Path, meta: &std::fs::Metadata) -> Result<(), CallError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(CallError::local(format!(
            "permissions {mode:04o} for '{}' are too open: a token must not be accessible by others; run `chmod 600 {}`",
            path.display(),
            path.display()
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_path: &Path, _meta: &std::fs::Metadata) -> Result<(), CallError> {
    Ok(())
}

/// The message of an error answer: the body's `message`, else the status line.
pub fn error_message(status: u16, body: &str) -> String {
    #[derive(Deserialize)]
    struct ErrorBody {
        message: String,
    }
    match serde_json::from_str::<ErrorBody>(body) {
        Ok(e) if !e.message.is_empty() => e.message,
        _ => format!("the portal answered HTTP {status}"),
    }
}

/// A job's terminal ([`Portal::attach`]).
pub type Terminal = tokio_tungstenite::WebSocketStream<reqwest::Upgraded>;

/// A connection to the portal's `/api/v1`.
pub struct Portal {
    http: reqwest::Client,
    base: String,
    /// `ATRIUM_URL`, for messages.
    origin: String,
    token: String,
    /// The token is a job's (`ATRIUM_JOB_TOKEN`, sent as `Atrium-Job-Token`), not a
    /// user's.
    job_token: bool,
}

/// A step as the portal recorded it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct StepInfo {
    /// `123.0`.
    pub id: String,
    pub step_id: u32,
    pub name: String,
    pub state: String,
    pub ntasks: u32,
    pub gpus: String,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub start_time: String,
    pub end_time: Option<String>,
    pub time_used: u64,
}

/// The most a response's announced length makes the client reserve at once.
const MAX_PREALLOCATED: u64 = 64 << 20;

impl Portal {
    /// A client for `settings`, trusting the system's roots and `ca_file`. The roots are
    /// read only for an `https` portal: loading them costs more than a whole plain-HTTP
    /// call on loopback.
    pub fn new(settings: &Settings) -> Result<Portal, CallError> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_native_certs(settings.url.starts_with("https:"))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .user_agent(concat!("atrium-cli/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &settings.ca_file {
            let pem = std::fs::read(path)
                .map_err(|e| CallError::local(format!("ATRIUM_CA_FILE {}: {e}", path.display())))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| CallError::local(format!("ATRIUM_CA_FILE {}: {e}", path.display())))?;
            if certs.is_empty() {
                return Err(CallError::local(format!(
                    "ATRIUM_CA_FILE {}: no PEM certificate in it",
                    path.display()
                )));
            }
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder
            .build()
            .map_err(|e| CallError::local(format!("cannot set up HTTP: {e}")))?;
        Ok(Portal {
            http,
            base: format!("{}/api/v1", settings.url),
            origin: settings.url.clone(),
            token: settings.token.clone(),
            job_token: false,
        })
    }

    /// A client that acts for a running job with its token (`settings.token` is
    /// `ATRIUM_JOB_TOKEN`): it may record that job's steps and nothing else.
    pub fn for_job(settings: &Settings) -> Result<Portal, CallError> {
        let mut portal = Portal::new(settings)?;
        portal.job_token = true;
        Ok(portal)
    }

    /// `POST /jobs/{job}/steps`: a step starts; its number.
    pub async fn start_step(
        &self,
        job: &str,
        body: &serde_json::Value,
    ) -> Result<StepInfo, CallError> {
        self.call(
            self.http
                .post(self.url(&format!("/jobs/{job}/steps")))
                .json(body),
        )
        .await
    }

    /// `PUT /jobs/{job}/steps/{step}`: how the step ended.
    pub async fn end_step(
        &self,
        job: &str,
        step: u32,
        body: &serde_json::Value,
    ) -> Result<(), CallError> {
        let _: serde_json::Value = self
            .call(
                self.http
                    .put(self.url(&format!("/jobs/{job}/steps/{step}")))
                    .json(body),
            )
            .await?;
        Ok(())
    }

    async fn call<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, CallError> {
        let body = self.fetch(request).await?;
        // An empty answer (204) reads as JSON's null.
        let body: &[u8] = if body.is_empty() { b"null" } else { &body };
        serde_json::from_slice(body)
            .map_err(|e| CallError::local(format!("unexpected answer from the portal: {e}")))
    }

    /// Send `request` with the token; the body of a successful answer.
    async fn fetch(&self, request: reqwest::RequestBuilder) -> Result<Vec<u8>, CallError> {
        let request = if self.job_token {
            request.header("Atrium-Job-Token", &self.token)
        } else {
            request.bearer_auth(&self.token)
        };
        let response = request.send().await.map_err(|e| {
            // The innermost cause says what went wrong (refused, timed out, TLS).
            let mut cause: &dyn std::error::Error = &e;
            while let Some(inner) = cause.source() {
                cause = inner;
            }
            CallError::local(format!(
                "cannot reach the portal at {}: {cause}",
                self.origin
            ))
        })?;
        let status = response.status();
        // Into one buffer of the announced size: a listing of thousands of jobs is
        // hundreds of kilobytes, which growing by halves would copy several times.
        let mut response = response;
        let announced = response.content_length().unwrap_or(0).min(MAX_PREALLOCATED);
        let mut body = Vec::with_capacity(announced as usize);
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| CallError::local(format!("reading the portal's answer: {e}")))?
        {
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(CallError {
                status: Some(status.as_u16()),
                message: error_message(status.as_u16(), &String::from_utf8_lossy(&body)),
            });
        }
        Ok(body)
    }

    /// `GET path` (below `/api/v1`), as JSON.
    pub async fn get_json(&self, path: &str) -> Result<serde_json::Value, CallError> {
        self.call(self.http.get(self.url(path))).await
    }

    /// `GET path` (below `/api/v1`) with `query`, read as `T`.
    pub async fn get_query<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, CallError> {
        self.call(self.http.get(self.url(path)).query(query)).await
    }

    /// `POST path` with a JSON body; the answer as JSON.
    pub async fn post_json(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, CallError> {
        self.call(self.http.post(self.url(path)).json(body)).await
    }

    /// `GET path` as bytes (an export: HTML, CSV).
    pub async fn get_bytes(&self, path: &str) -> Result<Vec<u8>, CallError> {
        self.fetch(self.http.get(self.url(path))).await
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET /me`: the token's user name.
    pub async fn username(&self) -> Result<String, CallError> {
        let me: Me = self.call(self.http.get(self.url("/me"))).await?;
        Ok(me.username)
    }

    /// `POST /jobs`.
    pub async fn submit(&self, body: &serde_json::Value) -> Result<Submitted, CallError> {
        self.call(self.http.post(self.url("/jobs")).json(body))
            .await
    }

    /// `POST /jobs?dry_run=true`: what the submission would do.
    pub async fn dry_run(&self, body: &serde_json::Value) -> Result<DryRun, CallError> {
        self.call(
            self.http
                .post(self.url("/jobs"))
                .query(&[("dry_run", "true")])
                .json(body),
        )
        .await
    }

    /// `GET /jobs/{id}`.
    pub async fn job(&self, id: &str) -> Result<JobInfo, CallError> {
        self.call(self.http.get(self.url(&format!("/jobs/{id}"))))
            .await
    }

    /// `GET /jobs/{id}/efficiency`.
    pub async fn efficiency(&self, id: &str) -> Result<crate::seff::Efficiency, CallError> {
        self.call(self.http.get(self.url(&format!("/jobs/{id}/efficiency"))))
            .await
    }

    /// `GET /jobs` with `query`, every page.
    pub async fn jobs(&self, query: &[(&str, String)]) -> Result<Vec<JobInfo>, CallError> {
        const PER_PAGE: u64 = 10_000; // the portal's largest page: one call for a whole queue
        let mut jobs = Vec::new();
        for page in 1.. {
            let mut q: Vec<(&str, String)> = query.to_vec();
            q.push(("page", page.to_string()));
            q.push(("per_page", PER_PAGE.to_string()));
            let got: JobPage = self
                .call(self.http.get(self.url("/jobs")).query(&q))
                .await?;
            let done =
                got.jobs.is_empty() || jobs.len() as u64 + got.jobs.len() as u64 >= got.total;
            // The first page is the list (a thousand jobs are ~1 MB: not copied again).
            if jobs.is_empty() {
                jobs = got.jobs;
            } else {
                jobs.extend(got.jobs);
            }
            if done {
                break;
            }
        }
        Ok(jobs)
    }

    /// `DELETE /jobs/{id}`.
    pub async fn cancel(&self, id: &str) -> Result<(), CallError> {
        let _: serde_json::Value = self
            .call(self.http.delete(self.url(&format!("/jobs/{id}"))))
            .await?;
        Ok(())
    }

    /// `POST /jobs/{id}/cancel-waiting`: cancel what of an array waits; its running
    /// tasks go on.
    pub async fn cancel_waiting(&self, id: &str) -> Result<(), CallError> {
        let _: serde_json::Value = self
            .call(
                self.http
                    .post(self.url(&format!("/jobs/{id}/cancel-waiting"))),
            )
            .await?;
        Ok(())
    }

    /// `PATCH /jobs/{id}`: change a pending job (`time_limit`, `partition`,
    /// `dependency`, `nodes`, `name`, `comment`).
    pub async fn update_job(&self, id: &str, changes: &serde_json::Value) -> Result<(), CallError> {
        let _: serde_json::Value = self
            .call(
                self.http
                    .patch(self.url(&format!("/jobs/{id}")))
                    .json(changes),
            )
            .await?;
        Ok(())
    }

    /// `POST /jobs/{id}/signal`: `signal` to the job's processes (`whom`: `steps`,
    /// `batch` or `full`); the job goes on.
    pub async fn signal(&self, id: &str, signal: i32, whom: &str) -> Result<(), CallError> {
        let _: serde_json::Value = self
            .call(
                self.http
                    .post(self.url(&format!("/jobs/{id}/signal")))
                    .json(&serde_json::json!({"signal": signal, "whom": whom})),
            )
            .await?;
        Ok(())
    }

    /// `GET /jobs/{id}/attach`: the websocket of the job's terminal (an interactive
    /// job of the caller's that runs). Binary messages carry bytes both ways; a text
    /// message `{"rows": R, "cols": C}` sets the window's size.
    pub async fn attach(&self, id: &str) -> Result<Terminal, CallError> {
        use tokio_tungstenite::tungstenite::handshake::client::generate_key;
        use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
        let key = generate_key();
        let response = self
            .http
            .get(self.url(&format!("/jobs/{id}/attach")))
            .header(reqwest::header::CONNECTION, "Upgrade")
            .header(reqwest::header::UPGRADE, "websocket")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Key", &key)
            .bearer_auth(&self.token)
            // The terminal stays as long as its job: no deadline once it is open.
            .timeout(Duration::from_secs(u64::from(u32::MAX)))
            .send()
            .await
            .map_err(|e| {
                CallError::local(format!("cannot reach the portal at {}: {e}", self.origin))
            })?;
        let status = response.status();
        if status != reqwest::StatusCode::SWITCHING_PROTOCOLS {
            let body = response.text().await.unwrap_or_default();
            return Err(CallError {
                status: Some(status.as_u16()),
                message: error_message(status.as_u16(), &body),
            });
        }
        let accepted = response
            .headers()
            .get("sec-websocket-accept")
            .is_some_and(|v| v.as_bytes() == derive_accept_key(key.as_bytes()).as_bytes());
        if !accepted {
            return Err(CallError::local(
                "the portal's answer to the terminal's handshake is not a websocket's",
            ));
        }
        let upgraded = response
            .upgrade()
            .await
            .map_err(|e| CallError::local(format!("opening the job's terminal: {e}")))?;
        Ok(tokio_tungstenite::WebSocketStream::from_raw_socket(
            upgraded,
            tokio_tungstenite::tungstenite::protocol::Role::Client,
            None,
        )
        .await)
    }

    /// `POST /jobs/{id}/{action}`: `hold`, `release` or `requeue`.
    pub async fn act(&self, id: &str, action: &str) -> Result<(), CallError> {
        let _: serde_json::Value = self
            .call(self.http.post(self.url(&format!("/jobs/{id}/{action}"))))
            .await?;
        Ok(())
    }

    /// `POST /jobs/{job}/self/requeue`: a running job requeues itself (job token).
    pub async fn requeue_itself(&self, job: &str) -> Result<(), CallError> {
        let _: serde_json::Value = self
            .call(
                self.http
                    .post(self.url(&format!("/jobs/{job}/self/requeue"))),
            )
            .await?;
        Ok(())
    }

    /// `GET /nodes`: the nodes and the partitions.
    pub async fn cluster(&self) -> Result<crate::sinfo::Cluster, CallError> {
        let mut cluster: crate::sinfo::Cluster =
            self.call(self.http.get(self.url("/nodes"))).await?;
        let host = cluster.host.clone();
        for node in &mut cluster.nodes {
            node.host = host.clone().filter(|h| h.node == node.name);
        }
        Ok(cluster)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn settings_come_from_the_environment_first() {
        let s = Settings::load(
            vars(&[
                ("ATRIUM_TOKEN", "atr_abc\n"),
                ("ATRIUM_URL", "https://portal.example/"),
                ("ATRIUM_CA_FILE", "/etc/ca.pem"),
            ]),
            None,
        )
        .expect("settings");
        assert_eq!(s.token, "atr_abc");
        assert_eq!(s.url, "https://portal.example");
        assert_eq!(s.ca_file.as_deref(), Some(Path::new("/etc/ca.pem")));
        let s = Settings::load(vars(&[("ATRIUM_TOKEN", "atr_x")]), None).expect("settings");
        assert_eq!(s.url, DEFAULT_URL);
        assert_eq!(s.ca_file, None);
    }

    #[cfg(unix)]
    #[test]
    fn the_token_file_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().expect("tempdir");
        let err = Settings::load(vars(&[]), Some(home.path())).expect_err("no token");
        assert!(err.message.contains("ATRIUM_TOKEN"), "{}", err.message);

        let path = token_path(home.path());
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, "atr_secret\nsecond line\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let err = Settings::load(vars(&[]), Some(home.path())).expect_err("too open");
        assert!(
            err.message.contains("0644") && err.message.contains("too open"),
            "{}",
            err.message
        );

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        let s = Settings::load(vars(&[]), Some(home.path())).expect("settings");
        assert_eq!(s.token, "atr_secret");
        // The environment wins over the file.
        let s = Settings::load(vars(&[("ATRIUM_TOKEN", "atr_env")]), Some(home.path()))
            .expect("settings");
        assert_eq!(s.token, "atr_env");
    }

    #[test]
    fn error_answers_give_their_message() {
        assert_eq!(
            error_message(404, r#"{"error":"not_found","message":"no job 17"}"#),
            "no job 17"
        );
        assert_eq!(
            error_message(502, "<html>bad gateway</html>"),
            "the portal answered HTTP 502"
        );
    }

    #[test]
    fn job_info_reads_the_api_shape() {
        let job: JobInfo = serde_json::from_value(serde_json::json!({
            "id": "17_3", "job_id": 17, "array_task_id": 3, "display_id": "17_3",
            "name": "train", "user": "alice", "account": "lab", "partition": "gpu",
            "state": "RUNNING", "state_code": "R", "reason": null, "priority": 100,
            "submit_time": "2025-01-01T00:00:00Z", "start_time": null, "end_time": null,
            "time_limit": null, "time_used": 5, "nodes": 1, "nodelist": "head",
            "gres": "gpu:2", "cpus": 4, "memory_mb": 1024, "cuda_visible_devices": "0,1",
            "exit_code": null, "signal": null, "workdir": "/w", "stdout": "", "stderr": "",
            "message": "", "restarts": 0
        }))
        .expect("job");
        assert_eq!(job.id, "17_3");
        assert_eq!(job.array_task_id, Some(3));
        assert_eq!(job.cpus, Some(4));
        assert_eq!(job.time_used, 5);
    }
}
