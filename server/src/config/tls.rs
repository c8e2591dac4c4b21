//! `[tls]`: serving HTTPS directly.
//!
//! Owns: [`TlsConfig`] and its checks (both files named, both readable).
//! Must not touch: the certificate and key themselves (loading them is `startup`'s).

use std::path::PathBuf;

use serde::Deserialize;

use super::check::readable_file;

/// Serve HTTPS directly (otherwise plain HTTP, e.g. behind a TLS-terminating proxy).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default)]
pub struct TlsConfig {
    /// PEM certificate chain.
    pub cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
}

impl TlsConfig {
    pub fn enabled(&self) -> bool {
        self.cert_file.is_some() || self.key_file.is_some()
    }

    pub(super) fn check(&self, problem: &mut impl FnMut(&str, String)) {
        match (&self.cert_file, &self.key_file) {
            (None, None) => {}
            (Some(_), None) => problem("tls.key_file", "required when tls.cert_file is set".into()),
            (None, Some(_)) => problem("tls.cert_file", "required when tls.key_file is set".into()),
            (Some(cert), Some(key)) => {
                readable_file(problem, "tls.cert_file", cert);
                readable_file(problem, "tls.key_file", key);
            }
        }
    }
}
