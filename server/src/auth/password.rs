//! Password hashing with argon2id (the `argon2` crate's defaults: 19 MiB, 2 passes).
//! These functions are CPU-heavy: the portal calls them through [`off_thread`], on
//! threads of their own, never on the runtime's blocking pool, which anything else
//! may fill (a stalled download, a stopped helper): a login must not wait on those.

use std::sync::{Mutex, OnceLock};

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

#[derive(Debug, thiserror::Error)]
#[error("cannot hash password: {0}")]
pub struct HashError(String);

pub fn hash(password: &str) -> Result<String, HashError> {
    let salt = SaltString::encode_b64(&rand::random::<[u8; 16]>())
        .map_err(|e| HashError(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| HashError(e.to_string()))
}

/// Whether `password` matches `stored`. A malformed stored hash never matches.
pub fn verify(stored: &str, password: &str) -> bool {
    match PasswordHash::new(stored) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

/// Spend the same work as a real verification, for unknown users, so that response
/// times do not tell which usernames exist.
pub fn verify_dummy(password: &str) {
    static DUMMY: OnceLock<Option<String>> = OnceLock::new();
    if let Some(stored) = DUMMY.get_or_init(|| hash("atrium-dummy-password").ok()) {
        let _ = verify(stored, password);
    }
}

/// A unit of password work for the hashing threads.
type Work = Box<dyn FnOnce() + Send>;

/// The hashing threads: as many as the machine has cores (at least 2), fed by one
/// queue. Callers bound how much they queue (the login gate, `auth::login`).
fn pool() -> &'static Mutex<std::sync::mpsc::Sender<Work>> {
    static POOL: OnceLock<Mutex<std::sync::mpsc::Sender<Work>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Work>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
        for i in 0..threads {
            let rx = rx.clone();
            let started = std::thread::Builder::new()
                .name(format!("atrium-password-{i}"))
                .spawn(move || loop {
                    // A poisoned lock still holds a whole receiver.
                    let next = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match next {
                        Ok(work) => work(),
                        Err(_) => return,
                    }
                });
            if let Err(e) = started {
                tracing::error!(error = %e, "a password thread could not start");
            }
        }
        Mutex::new(tx)
    })
}

/// Run `work` (a hash or a verification) on the password threads.
pub async fn off_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, HashError> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Work = Box::new(move || {
        let _ = tx.send(work());
    });
    pool()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send(job)
        .map_err(|_| HashError("the password threads are gone".into()))?;
    rx.await
        .map_err(|_| HashError("a password thread failed".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_differ() {
        let a = hash("correct horse").expect("hash");
        let b = hash("correct horse").expect("hash");
        assert_ne!(a, b, "salted");
        assert!(a.starts_with("$argon2id$"));
        assert!(verify(&a, "correct horse"));
        assert!(!verify(&a, "correct horse "));
        assert!(!verify("not a hash", "x"));
    }

    #[tokio::test]
    async fn password_work_runs_while_the_blocking_pool_is_full() {
        // Every blocking thread of this runtime (its maximum is 512) is held up...
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = std::sync::Arc::new(Mutex::new(held));
        let mut stuck = Vec::new();
        for _ in 0..600 {
            let held = held.clone();
            stuck.push(tokio::task::spawn_blocking(move || {
                let _ = held
                    .lock()
                    .map(|h| h.recv_timeout(std::time::Duration::from_secs(30)));
            }));
        }
        // ... and a password is still checked.
        let stored = hash("correct horse").expect("hash");
        let checked = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            off_thread(move || verify(&stored, "correct horse")),
        )
        .await;
        for _ in 0..stuck.len() {
            let _ = release.send(());
        }
        assert!(matches!(checked, Ok(Ok(true))), "{checked:?}");
    }
}
