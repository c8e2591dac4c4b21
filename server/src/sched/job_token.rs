//! Job tokens: the credential a running job is given (`ATRIUM_JOB_TOKEN`) so that
//! its `srun` can record the job's steps through the API. A token is HMAC-SHA256 of
//! the job's id and the start time of its run (kept in the job's row) under the
//! portal's key (the one that signs logins), so it is never stored and a copy of the
//! database gives none; it names one run of one job, and the jobs service accepts it
//! only while that run goes on and only for that job's steps. An id alone would not
//! do: ids come back (a requeued job runs again under its id; after `atrium restore`
//! of an older backup, another user's new job gets the id of a job whose processes
//! are still about). It is not a user's token: it can do nothing else.
//! Must not touch: the database, HTTP, processes.

use hmac::{Hmac, Mac};
use scheduler::JobId;
use sha2::Sha256;

/// The most bytes of a presented token looked at (a token is 64 hex digits).
pub const MAX_TOKEN_BYTES: usize = 128;

/// Derives and checks job tokens. Cheap to clone.
#[derive(Clone)]
pub struct JobTokens {
    key: std::sync::Arc<[u8]>,
}

impl std::fmt::Debug for JobTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobTokens(..)")
    }
}

impl JobTokens {
    pub fn new(key: &[u8]) -> JobTokens {
        JobTokens { key: key.into() }
    }

    fn mac(&self, job: JobId, started_ms: i64) -> Option<Hmac<Sha256>> {
        // HMAC takes a key of any length.
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).ok()?;
        mac.update(b"atrium job token\0");
        mac.update(job.to_string().as_bytes());
        mac.update(b"\0");
        mac.update(started_ms.to_string().as_bytes());
        Some(mac)
    }

    /// The token of the run of `job` (`123` or `123_4`) that started at `started_ms`.
    pub fn token(&self, job: JobId, started_ms: i64) -> String {
        self.mac(job, started_ms)
            .map(|m| hex::encode(m.finalize().into_bytes()))
            .unwrap_or_default()
    }

    /// Whether `presented` is the token of the run of `job` that started at
    /// `started_ms` (compared in constant time).
    pub fn verify(&self, job: JobId, started_ms: i64, presented: &str) -> bool {
        if presented.len() > MAX_TOKEN_BYTES {
            return false;
        }
        let Ok(bytes) = hex::decode(presented.trim()) else {
            return false;
        };
        self.mac(job, started_ms)
            .is_some_and(|m| m.verify_slice(&bytes).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_names_one_run_of_one_job_of_one_portal() {
        let a = JobTokens::new(b"a key of the portal, long enough to sign");
        let b = JobTokens::new(b"another portal's key, just as long as it");
        let started = 1_700_000_000_123;
        let token = a.token(JobId::new(7), started);
        assert_eq!(token.len(), 64);
        assert!(a.verify(JobId::new(7), started, &token));
        assert!(!a.verify(JobId::new(7), started + 1, &token), "another run");
        assert!(!a.verify(JobId::new(8), started, &token), "another job");
        assert!(
            !a.verify(JobId::task(7, 0), started, &token),
            "an array task of it"
        );
        assert!(!b.verify(JobId::new(7), started, &token), "another portal");
        assert!(!a.verify(JobId::new(7), started, ""));
        assert!(!a.verify(JobId::new(7), started, &token[..62]));
        assert!(!a.verify(JobId::new(7), started, &"0".repeat(4096)));
        assert!(!format!("{a:?}").contains("key"));
    }
}
