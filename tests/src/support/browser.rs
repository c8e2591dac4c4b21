//! Headless Chromium driven over WebDriver (chromedriver + fantoccini).
//!
//! ```text
//! let b = browser().await?;
//! b.goto(&format!("{base}/login")).await?;          // Browser derefs to fantoccini::Client
//! b.screenshot("/tmp/login.png").await?;
//! b.close().await?;                                   // or just drop it
//! ```
//!
//! chromedriver runs on a kernel-chosen loopback port (`--port=0`) under a [`Supervised`]
//! lifeline, so chromedriver and every Chromium process it started are killed, and the scratch
//! directory (profile, logs) removed, when the `Browser` is dropped or the test process dies.
//! Chromium is told to stay off the network: everything except loopback goes to a dead proxy.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use fantoccini::{Client, ClientBuilder};

use super::process::{find_binary, Supervised, SupervisedCommand};
use super::wait;

/// Overrides the Chromium binary.
pub const CHROMIUM_ENV: &str = "ATRIUM_TEST_CHROMIUM";
/// Overrides the chromedriver binary.
pub const CHROMEDRIVER_ENV: &str = "ATRIUM_TEST_CHROMEDRIVER";

const DRIVER_START_DEADLINE: Duration = Duration::from_secs(30);

/// A headless Chromium session. Derefs to [`fantoccini::Client`].
pub struct Browser {
    client: Option<Client>,
    // Dropped after `client` (field order): kills chromedriver and Chromium, removes `dir`.
    driver: Supervised,
    dir: PathBuf,
    webdriver_url: String,
}

impl Deref for Browser {
    type Target = Client;
    fn deref(&self) -> &Client {
        // Only `close(self)` takes the client out, and it consumes the Browser.
        self.client
            .as_ref()
            .expect("Browser client is present until close()")
    }
}

impl Browser {
    /// The WebDriver client (same as deref).
    pub fn client(&self) -> &Client {
        self
    }

    /// `http://127.0.0.1:PORT` of the chromedriver serving this session.
    pub fn webdriver_url(&self) -> &str {
        &self.webdriver_url
    }

    /// Scratch directory of this browser (Chromium profile, chromedriver log). Removed on drop.
    pub fn scratch_dir(&self) -> &Path {
        &self.dir
    }

    /// Pid of chromedriver (also the process group of every Chromium process it starts).
    pub fn driver_pid(&self) -> u32 {
        self.driver.pid()
    }

    /// Last lines of the chromedriver log (for failure diagnostics).
    pub fn driver_log_tail(&self, max_lines: usize) -> String {
        self.driver.log_tail(max_lines)
    }

    /// Saves a PNG screenshot of the current viewport to `path` (parent dirs are created).
    pub async fn screenshot(&self, path: impl AsRef<Path>) -> anyhow::Result<()> {
        let path = path.as_ref();
        let png = self
            .deref()
            .screenshot()
            .await
            .context("taking a screenshot")?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(parent)
                .await
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        tokio::fs::write(path, png)
            .await
            .with_context(|| format!("writing {}", path.display()))
    }

    /// Ends the WebDriver session gracefully, then stops chromedriver and Chromium.
    pub async fn close(mut self) -> anyhow::Result<()> {
        let closed = match self.client.take() {
            Some(client) => client
                .close()
                .await
                .context("closing the WebDriver session"),
            None => Ok(()),
        };
        let stopped = self.driver.stop();
        closed.and(stopped)
    }
}

/// Starts chromedriver and a fresh headless Chromium (new empty profile).
pub async fn browser() -> anyhow::Result<Browser> {
    // Two rustls crypto providers are linked into the tests (fantoccini's and reqwest's):
    // name one, or the WebDriver client cannot pick. Already installed is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let chromedriver = binary_from_env_or(CHROMEDRIVER_ENV, &["chromedriver"])?;
    let chromium = binary_from_env_or(
        CHROMIUM_ENV,
        &["chromium", "chromium-browser", "google-chrome"],
    )?;

    let dir = tempfile::Builder::new()
        .prefix("atrium-browser-")
        .tempdir()
        .context("creating browser scratch dir")?
        .keep();
    let profile = dir.join("profile");
    let log = dir.join("chromedriver.log");

    let mut spec = SupervisedCommand::new("chromedriver", &chromedriver, &log)
        .args(["--port=0", "--allowed-ips=127.0.0.1"]);
    // Keep Chromium (and its crashpad handler) out of the real $HOME: everything it writes
    // lands in the scratch dir.
    for (var, sub) in [
        ("HOME", "home"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_DATA_HOME", "data"),
    ] {
        spec.envs.push((var.into(), dir.join(sub).into_os_string()));
    }
    spec.remove_on_exit = Some(dir.clone());
    spec.current_dir = Some(dir.clone());
    let driver = match Supervised::spawn(spec) {
        Ok(d) => d,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };

    let port: u16 = wait::until(
        "chromedriver to report its port",
        DRIVER_START_DEADLINE,
        || async {
            if !driver.is_running() {
                return Some(Err(anyhow::anyhow!(
                    "chromedriver exited during startup:\n{}",
                    driver.log_tail(30)
                )));
            }
            parse_port(&std::fs::read_to_string(&log).ok()?).map(Ok)
        },
    )
    .await
    .with_context(|| format!("chromedriver log:\n{}", driver.log_tail(30)))??;
    let webdriver_url = format!("http://127.0.0.1:{port}");

    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .context("building HTTP client")?;
    let status_url = format!("{webdriver_url}/status");
    wait::until(
        "chromedriver /status to be ready",
        DRIVER_START_DEADLINE,
        || async {
            let v: serde_json::Value = http.get(&status_url).send().await?.json().await?;
            anyhow::ensure!(v["value"]["ready"] == true, "not ready: {v}");
            anyhow::Ok(())
        },
    )
    .await?;

    let caps = serde_json::json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": chromium,
            "args": chromium_args(&profile),
        },
        // The console's messages, for tests that check a page logs no error.
        "goog:loggingPrefs": { "browser": "ALL" },
    });
    let serde_json::Value::Object(caps) = caps else {
        anyhow::bail!("capabilities must be a JSON object");
    };
    let client = ClientBuilder::rustls()
        .context("building WebDriver HTTP connector")?
        .capabilities(caps)
        .connect(&webdriver_url)
        .await
        .with_context(|| {
            format!(
                "starting a Chromium session via chromedriver:\n{}",
                driver.log_tail(30)
            )
        })?;

    Ok(Browser {
        client: Some(client),
        driver,
        dir,
        webdriver_url,
    })
}

fn chromium_args(profile: &Path) -> Vec<String> {
    let mut args: Vec<String> = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-default-apps",
        "--disable-domain-reliability",
        "--disable-client-side-phishing-detection",
        "--disable-breakpad",
        "--no-pings",
        "--metrics-recording-only",
        "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication",
        // Nothing but loopback may leave the machine: non-loopback requests go to a dead proxy
        // (port 9, discard); loopback is bypassed implicitly.
        "--proxy-server=http://127.0.0.1:9",
        "--window-size=1280,900",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    args.push(format!("--user-data-dir={}", profile.display()));
    args
}

/// Parses "ChromeDriver was started successfully on port 12345." from the log.
fn parse_port(log: &str) -> Option<u16> {
    log.lines().find_map(|line| {
        let rest = line.split("started successfully on port ").nth(1)?;
        rest.trim_end_matches(['.', ' ', '\r']).parse().ok()
    })
}

fn binary_from_env_or(env: &str, names: &[&str]) -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return find_binary(
            p.to_str().with_context(|| format!("{env} is not UTF-8"))?,
            &[],
        );
    }
    let mut last_err = None;
    for name in names {
        match find_binary(name, &[]) {
            Ok(p) => return Ok(p),
            Err(e) => last_err = Some(e),
        }
    }
    Err(last_err.unwrap_or_else(|| anyhow::anyhow!("no binary names given")))
}
