//! Failed-login rate limit, per username and per client address.
//!
//! Each key may fail `limit` times within a sliding window; after that, attempts are
//! refused until the oldest failure leaves the window. Success clears the username's
//! record. State is in memory: a restart forgets it, which only ever lets a few more
//! attempts through.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

const MAX_KEYS: usize = 100_000;

#[derive(Debug)]
pub struct LoginLimiter {
    per_user: usize,
    per_address: usize,
    window_ms: i64,
    failures: Mutex<HashMap<String, VecDeque<i64>>>,
}

impl LoginLimiter {
    pub fn new(per_user: u32, per_address: u32, window: Duration) -> Self {
        Self {
            per_user: per_user as usize,
            per_address: per_address as usize,
            window_ms: window.as_millis() as i64,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// `Err(retry_after)` when the user or the address has failed too often.
    pub fn check(&self, username: &str, address: &str, now: i64) -> Result<(), Duration> {
        let mut failures = self.lock();
        let user = self.blocked_for(&mut failures, &user_key(username), self.per_user, now);
        let addr = self.blocked_for(&mut failures, &addr_key(address), self.per_address, now);
        match user.max(addr) {
            Some(wait) => Err(wait),
            None => Ok(()),
        }
    }

    pub fn record_failure(&self, username: &str, address: &str, now: i64) {
        let mut failures = self.lock();
        if failures.len() >= MAX_KEYS {
            let window = self.window_ms;
            failures.retain(|_, times| times.back().is_some_and(|t| now - t < window));
        }
        for key in [user_key(username), addr_key(address)] {
            failures.entry(key).or_default().push_back(now);
        }
    }

    pub fn record_success(&self, username: &str) {
        self.lock().remove(&user_key(username));
    }

    fn blocked_for(
        &self,
        failures: &mut HashMap<String, VecDeque<i64>>,
        key: &str,
        limit: usize,
        now: i64,
    ) -> Option<Duration> {
        let times = failures.get_mut(key)?;
        while times.front().is_some_and(|t| now - t >= self.window_ms) {
            times.pop_front();
        }
        if times.len() < limit {
            return None;
        }
        // Refused until enough failures leave the window to drop below the limit.
        let freeing = times[times.len() - limit];
        let wait_ms = (freeing + self.window_ms - now).max(1000);
        Some(Duration::from_millis(wait_ms as u64))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<i64>>> {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn user_key(username: &str) -> String {
    format!("u:{username}")
}

fn addr_key(address: &str) -> String {
    format!("a:{address}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_is_limited_then_freed_by_the_window() {
        let limiter = LoginLimiter::new(3, 100, Duration::from_secs(60));
        for i in 0..3 {
            assert!(limiter.check("alice", "10.0.0.1", i).is_ok());
            limiter.record_failure("alice", "10.0.0.1", i);
        }
        let wait = limiter.check("alice", "10.0.0.2", 10).expect_err("limited");
        assert!(wait >= Duration::from_secs(59));
        assert!(limiter.check("bob", "10.0.0.1", 10).is_ok());
        assert!(limiter.check("alice", "10.0.0.1", 60_000).is_ok());
    }

    #[test]
    fn address_is_limited_across_usernames() {
        let limiter = LoginLimiter::new(100, 2, Duration::from_secs(60));
        limiter.record_failure("a", "10.0.0.9", 0);
        limiter.record_failure("b", "10.0.0.9", 0);
        assert!(limiter.check("c", "10.0.0.9", 1).is_err());
        assert!(limiter.check("c", "10.0.0.8", 1).is_ok());
    }

    #[test]
    fn success_clears_the_user() {
        let limiter = LoginLimiter::new(1, 100, Duration::from_secs(60));
        limiter.record_failure("alice", "x", 0);
        assert!(limiter.check("alice", "y", 1).is_err());
        limiter.record_success("alice");
        assert!(limiter.check("alice", "y", 1).is_ok());
    }
}
