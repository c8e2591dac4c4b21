//! `spawn_app()`: start the real `atrium` binary on port 0 with its own data directory
//! and database, and talk to it over HTTP.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use reqwest::header::HeaderMap;
use serde_json::Value;

/// `atrium <args>` with no `ATRIUM_*` variable of the test environment leaking into
/// its configuration.
pub fn atrium_command() -> Command {
    without_atrium_env(Command::new(atrium_bin()))
}

fn without_atrium_env(mut command: Command) -> Command {
    for (name, _) in std::env::vars() {
        if name.starts_with("ATRIUM_") {
            command.env_remove(name);
        }
    }
    command
}

/// The `atrium` binary built next to this test binary (or `ATRIUM_BIN`).
pub fn atrium_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("ATRIUM_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let bin = dir.join("atrium");
    assert!(
        bin.exists(),
        "{} is missing: build it first (`cargo build -p atrium`), as tests/run does",
        bin.display()
    );
    bin
}

#[derive(Default, Clone)]
pub struct Options {
    /// A database URL; default: SQLite in the data directory.
    pub database_url: Option<String>,
    /// Extra TOML appended to the generated configuration.
    pub extra_config: String,
}

pub struct TestApp {
    pub base: String,
    pub data_dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub admin_password: Option<String>,
    /// The binary and the environment it runs with (restarts run the same).
    program: PathBuf,
    env: Vec<(String, std::ffi::OsString)>,
    child: Option<Child>,
    stderr: mpsc::Receiver<String>,
}

pub async fn spawn_app() -> TestApp {
    spawn_with(Options::default()).await
}

pub async fn spawn_with(options: Options) -> TestApp {
    let data_dir = tempfile::tempdir().expect("tempdir");
    let config_path = data_dir.path().join("atrium.toml");
    let mut config = format!(
        "listen = \"127.0.0.1:0\"\ndata_dir = \"{}\"\n",
        data_dir.path().join("var").display()
    );
    if let Some(url) = &options.database_url {
        config.push_str(&format!("[database]\nurl = \"{url}\"\n"));
    }
    config.push_str(&options.extra_config);
    if !options.extra_config.contains("[accounts]") {
        // Logins here must not make homes on this machine (the LDAP fixture's are in
        // /home): tests that want homes configure [accounts] themselves.
        config.push_str("[accounts]\ncreate_homes = false\n");
    }
    std::fs::write(&config_path, config).expect("write config");
    start(data_dir, config_path).await
}

/// A portal on the configuration at `config_path` (its data directory and whatever
/// else the test made under `data_dir`, which the portal owns from now on).
pub async fn spawn_on_config(data_dir: tempfile::TempDir, config_path: PathBuf) -> TestApp {
    start(data_dir, config_path).await
}

/// A portal run by `program` (an installed copy of the binary) on the configuration at
/// `config_path`, with `env` (`ATRIUM_…` overrides) set; `dir` is the test's, owned by
/// the portal from now on.
pub async fn spawn_program(
    program: &Path,
    config_path: PathBuf,
    env: &[(&str, &Path)],
    dir: tempfile::TempDir,
) -> TestApp {
    let env = env
        .iter()
        .map(|(name, value)| (name.to_string(), value.as_os_str().to_owned()))
        .collect();
    launch_app(program.to_path_buf(), env, dir, config_path)
}

async fn start(data_dir: tempfile::TempDir, config_path: PathBuf) -> TestApp {
    launch_app(atrium_bin(), Vec::new(), data_dir, config_path)
}

fn launch_app(
    program: PathBuf,
    env: Vec<(String, std::ffi::OsString)>,
    data_dir: tempfile::TempDir,
    config_path: PathBuf,
) -> TestApp {
    let (child, stderr, base, admin_password) = launch(&program, &env, &config_path);
    TestApp {
        base,
        data_dir,
        config_path,
        admin_password,
        program,
        env,
        child: Some(child),
        stderr,
    }
}

/// Start `program serve` (`atrium`) with `env` and wait until it listens.
fn launch(
    program: &Path,
    env: &[(String, std::ffi::OsString)],
    config_path: &Path,
) -> (Child, mpsc::Receiver<String>, String, Option<String>) {
    // The portal starts with descriptor 9 open and inheritable, as a service manager or
    // a shell may leave one: no job may ever see it (checked by the job tests).
    let mut shell = Command::new("/bin/sh");
    shell
        .arg("-c")
        .arg("exec 9</dev/null; exec \"$0\" \"$@\"")
        .arg(program);
    let mut child = without_atrium_env(shell)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .arg("--config")
        .arg(config_path)
        .arg("serve")
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start atrium");
    let stdout = child.stdout.take().expect("stdout");
    let stderr = child.stderr.take().expect("stderr");
    let (out_tx, out_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if out_tx.send(line).is_err() {
                break;
            }
        }
    });
    let (err_tx, err_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if err_tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut admin_password = None;
    let port = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match out_rx.recv_timeout(left) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                let log: Vec<String> = err_rx.try_iter().collect();
                panic!("atrium did not start listening:\n{}", log.join("\n"));
            }
        };
        if let Some(pw) = line.trim().strip_prefix("password: ") {
            admin_password = Some(pw.to_string());
        }
        if let Some(rest) = line.strip_prefix("atrium: listening on ") {
            let (scheme, port) = rest
                .trim()
                .split_once("://127.0.0.1:")
                .expect("scheme://127.0.0.1:port");
            break (scheme.to_string(), port.parse::<u16>().expect("port"));
        }
    };
    let (scheme, port) = port;
    (
        child,
        err_rx,
        format!("{scheme}://127.0.0.1:{port}"),
        admin_password,
    )
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A client with its own cookie jar that does not follow redirects.
    pub fn browser_like_client(&self) -> reqwest::Client {
        reqwest::Client::builder()
            .cookie_store(true)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client")
    }

    /// Run `atrium <args>` against this app's configuration, with `stdin` as input.
    pub fn cli(&self, args: &[&str], stdin: &str) -> std::process::Output {
        use std::io::Write;
        let mut child = atrium_command()
            .arg("--config")
            .arg(&self.config_path)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run atrium cli");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("cli output")
    }

    /// Create a local user through the CLI.
    pub fn add_user(&self, username: &str, password: &str, admin: bool) {
        let mut args = vec!["user", "add", username];
        if admin {
            args.push("--admin");
        }
        let out = self.cli(&args, &format!("{password}\n"));
        assert!(
            out.status.success(),
            "user add failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Log in through the form; returns the client holding the session cookie.
    pub async fn login(&self, username: &str, password: &str) -> reqwest::Client {
        let client = self.browser_like_client();
        let res = self.post_login(&client, username, password).await;
        assert_eq!(res.status(), 303, "login of {username} failed");
        client
    }

    /// GET the login page (setting its CSRF cookie) and post the form.
    pub async fn post_login(
        &self,
        client: &reqwest::Client,
        username: &str,
        password: &str,
    ) -> reqwest::Response {
        let csrf = self.login_form(client).await;
        client
            .post(self.url("/login"))
            .form(&[
                ("username", username),
                ("password", password),
                ("csrf", &csrf),
                ("next", "/"),
            ])
            .send()
            .await
            .expect("post login")
    }

    /// GET the login page (setting its CSRF cookie in `client`); the form's CSRF token.
    pub async fn login_form(&self, client: &reqwest::Client) -> String {
        let page = client
            .get(self.url("/login"))
            .send()
            .await
            .expect("login page")
            .text()
            .await
            .expect("body");
        hidden_field(&page, "csrf").expect("csrf field")
    }

    /// The CSRF token of the logged-in session, read from the home page.
    pub async fn session_csrf(&self, client: &reqwest::Client) -> String {
        let page = client
            .get(self.url("/"))
            .send()
            .await
            .expect("home")
            .text()
            .await
            .expect("body");
        hidden_field(&page, "csrf").expect("csrf on home page")
    }

    /// Create an API token with `scopes` for the logged-in client; returns the secret.
    pub async fn create_token(
        &self,
        client: &reqwest::Client,
        name: &str,
        scopes: &[&str],
    ) -> String {
        let csrf = self.session_csrf(client).await;
        let res = client
            .post(self.url("/api/v1/tokens"))
            .header("x-csrf-token", csrf)
            .json(&serde_json::json!({ "name": name, "scopes": scopes }))
            .send()
            .await
            .expect("create token");
        assert_eq!(res.status(), 201);
        let body: Value = res.json().await.expect("json");
        body["secret"].as_str().expect("secret").to_string()
    }

    /// `GET path` with a bearer token.
    pub async fn get_bearer(&self, path: &str, token: &str) -> reqwest::Response {
        reqwest::Client::new()
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .expect("request")
    }

    /// Send SIGTERM and wait for the process to exit; returns its exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let pid = child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = child.try_wait().expect("wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "atrium did not stop after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kill the portal with SIGKILL (no chance to clean up), as a crash would.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start the portal again on the same configuration and data (a new port).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the portal first");
        let (child, stderr, base, _) = launch(&self.program, &self.env, &self.config_path);
        self.child = Some(child);
        self.stderr = stderr;
        self.base = base;
    }

    /// The portal's process id while it runs (the shell that starts it `exec`s it).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Log lines written so far.
    pub fn log(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The value of `<input … name="NAME" value="VALUE">` in a page.
pub fn hidden_field(html: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    let end = html[start..].find('"')?;
    Some(html[start..start + end].to_string())
}

/// The `Set-Cookie` value for `name`, if the response sets it.
pub fn set_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_string)
}

/// Poll `check` until it returns true or `within` passes (panics naming `what`).
pub async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    atrium_tests::support::until(what, within, || {
        let attempt = check();
        async move { attempt.await.then_some(()) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}"));
}

/// Run `openssl` with space-separated arguments (paths in temp dirs have no spaces);
/// it must succeed.
pub fn openssl(args: &str) {
    let out = Command::new("openssl")
        .args(args.split(' '))
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
