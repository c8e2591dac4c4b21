//! A small pool of directory connections, each used by one login at a time (a bind
//! changes the identity of the whole connection, so connections are never shared
//! between concurrent logins).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ldap3::{Ldap, LdapConnAsync, LdapConnSettings};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::DirectoryError;
use crate::config::LdapConfig;

pub struct Pool {
    url: String,
    settings: LdapConnSettings,
    idle: Arc<Mutex<Vec<Ldap>>>,
    permits: Arc<Semaphore>,
}

/// A connection lent by the pool. It goes back to the pool only when released after a
/// completed exchange; dropped otherwise (failed, or abandoned mid-operation by a
/// timeout), it is closed.
pub struct Conn {
    ldap: Option<Ldap>,
    /// Taken from the idle list rather than opened for this request.
    pub reused: bool,
    idle: Arc<Mutex<Vec<Ldap>>>,
    _permit: OwnedSemaphorePermit,
}

impl Conn {
    pub fn ldap(&mut self) -> &mut Ldap {
        self.ldap.as_mut().expect("present until dropped")
    }

    /// Give the connection back for reuse.
    pub fn release(mut self) {
        if let Some(mut ldap) = self.ldap.take() {
            if !ldap.is_closed() {
                self.idle
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(ldap);
            }
        }
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("url", &self.url).finish()
    }
}

impl Pool {
    pub fn new(config: &LdapConfig) -> anyhow::Result<Self> {
        let mut settings = LdapConnSettings::new()
            .set_conn_timeout(Duration::from_secs(config.timeout_seconds))
            .set_starttls(config.starttls);
        if !config.verify_tls {
            settings = settings.set_no_tls_verify(true);
        } else if let Some(ca) = &config.ca_file {
            settings = settings.set_config(Arc::new(client_config(ca)?));
        }
        Ok(Self {
            url: config.url.clone(),
            settings,
            idle: Arc::new(Mutex::new(Vec::new())),
            permits: Arc::new(Semaphore::new(config.pool_size)),
        })
    }

    /// An idle connection (unless `fresh`), or a new one. Waits for a free slot at
    /// most `timeout`.
    pub async fn get(&self, timeout: Duration, fresh: bool) -> Result<Conn, DirectoryError> {
        let permit = tokio::time::timeout(timeout, self.permits.clone().acquire_owned())
            .await
            .map_err(|_| DirectoryError::Unavailable("all directory connections are busy".into()))?
            .map_err(|_| DirectoryError::Unavailable("pool closed".into()))?;
        let idle = if fresh {
            None
        } else {
            self.idle
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop()
        };
        let (ldap, reused) = match idle.filter(|ldap| !ldap.clone().is_closed()) {
            Some(ldap) => (ldap, true),
            None => {
                let (conn, ldap) =
                    LdapConnAsync::with_settings(self.settings.clone(), &self.url).await?;
                ldap3::drive!(conn);
                (ldap, false)
            }
        };
        Ok(Conn {
            ldap: Some(ldap),
            reused,
            idle: self.idle.clone(),
            _permit: permit,
        })
    }
}

/// A rustls client configuration trusting only the CAs in `ca_file`.
fn client_config(ca_file: &std::path::Path) -> anyhow::Result<rustls::ClientConfig> {
    use anyhow::Context;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_file)
        .with_context(|| format!("reading {}", ca_file.display()))?
    {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}
