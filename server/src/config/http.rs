//! `[http]`: how the portal answers HTTP requests.
//!
//! Owns: [`HttpConfig`], its defaults and checks.
//! Must not touch: the server itself (binding and serving are `startup`'s and `http`'s).

use serde::Deserialize;

use super::check::{at_least, ip_address};

#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct HttpConfig {
    /// Largest accepted request body, in bytes.
    pub body_limit_bytes: usize,
    /// Worker threads (default: one per core).
    pub workers: Option<usize>,
    /// Peers whose `X-Forwarded-For` is trusted for the client address.
    pub trusted_proxies: Vec<String>,
    /// Serve `/metrics` without authentication (default: admins only).
    pub public_metrics: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit_bytes: 1024 * 1024,
            workers: None,
            trusted_proxies: Vec::new(),
            public_metrics: false,
        }
    }
}

impl HttpConfig {
    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        at_least(
            problem,
            "http.body_limit_bytes",
            self.body_limit_bytes,
            1024,
        );
        if let Some(workers) = self.workers {
            at_least(problem, "http.workers", workers, 1);
        }
        for (i, proxy) in self.trusted_proxies.iter().enumerate() {
            ip_address(problem, &format!("http.trusted_proxies[{i}]"), proxy);
        }
    }
}
