//! Polling with a deadline: the only sanctioned way for tests to wait for something.
//!
//! ```text
//! let port = wait::until("server to print its port", Duration::from_secs(10), || async {
//!     read_port(&log)            // Option<u16>: None means "not yet"
//! }).await?;
//! ```

use std::fmt::Write as _;
use std::future::Future;
use std::time::{Duration, Instant};

/// First delay between two attempts.
const FIRST_BACKOFF: Duration = Duration::from_millis(5);
/// Largest delay between two attempts.
const MAX_BACKOFF: Duration = Duration::from_millis(100);

/// The outcome of one polling attempt: either a value (done) or "not yet".
///
/// Implemented for `Option<T>` (`None` = not yet) and for `Result<T, E>` (`Err` = not yet; the last
/// error is reported if the deadline passes). Note that for `Result<Option<T>, E>`, `Ok(None)` is a
/// *value*: flatten it to `Option` or `Result<T, E>` if `None` should mean "not yet".
pub trait Attempt {
    /// The value produced once the condition holds.
    type Value;
    /// `Ok(value)` when done, `Err(Some(reason))` / `Err(None)` when not yet.
    fn into_attempt(self) -> Result<Self::Value, Option<anyhow::Error>>;
}

impl<T> Attempt for Option<T> {
    type Value = T;
    fn into_attempt(self) -> Result<T, Option<anyhow::Error>> {
        self.ok_or(None)
    }
}

impl<T, E: Into<anyhow::Error>> Attempt for Result<T, E> {
    type Value = T;
    fn into_attempt(self) -> Result<T, Option<anyhow::Error>> {
        self.map_err(|e| Some(e.into()))
    }
}

/// Calls `f` until it yields a value, backing off from 5 ms to 100 ms between attempts.
///
/// `f` is always called at least once, even with a zero deadline. On timeout, the error names
/// `what` (phrase it as "<thing> to <happen>", e.g. "postgres to accept connections") and carries
/// the last error returned by `f`, if any.
pub async fn until<F, Fut, A>(what: &str, deadline: Duration, mut f: F) -> anyhow::Result<A::Value>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = A>,
    A: Attempt,
{
    let start = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    let mut attempts: u64 = 0;
    loop {
        attempts += 1;
        let last_error = match f().await.into_attempt() {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        let elapsed = start.elapsed();
        if elapsed >= deadline {
            let mut msg =
                format!("timed out after {elapsed:.1?} ({attempts} attempts) waiting for {what}");
            if let Some(e) = last_error {
                let _ = write!(msg, "; last error: {e:#}");
            }
            anyhow::bail!(msg);
        }
        tokio::time::sleep(backoff.min(deadline - elapsed)).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Blocking twin of [`until`] for synchronous contexts (`Drop` impls, std threads).
pub fn until_blocking<F, A>(what: &str, deadline: Duration, mut f: F) -> anyhow::Result<A::Value>
where
    F: FnMut() -> A,
    A: Attempt,
{
    let start = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    let mut attempts: u64 = 0;
    loop {
        attempts += 1;
        let last_error = match f().into_attempt() {
            Ok(value) => return Ok(value),
            Err(e) => e,
        };
        let elapsed = start.elapsed();
        if elapsed >= deadline {
            let mut msg =
                format!("timed out after {elapsed:.1?} ({attempts} attempts) waiting for {what}");
            if let Some(e) = last_error {
                let _ = write!(msg, "; last error: {e:#}");
            }
            anyhow::bail!(msg);
        }
        std::thread::sleep(backoff.min(deadline - elapsed));
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
