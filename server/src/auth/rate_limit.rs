//! Failed-login rate limit, per username and per client address.
//!
//! Each key may fail `limit` times within a sliding window; after that, attempts are
//! refused until the oldest failure leaves the window. An attempt is reserved before
//! its password is checked: the reservation counts as a failure from that moment, in
//! the same critical section as the check, so that concurrent guesses cannot all pass
//! the check before any of them is recorded. A success takes the reservation back and
//! clears the username's record; an attempt that could not be checked (directory down,
//! portal busy) takes it back too. An attempt whose request is abandoned mid-check
//! stays counted. State is in memory: a restart forgets it, which only ever lets a few
//! more attempts through.

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

/// A login attempt counted against its username and address while it is checked.
/// Settle it with [`LoginLimiter::failed`], [`LoginLimiter::succeeded`] or
/// [`LoginLimiter::release`]; dropped unsettled, it stays counted as a failure.
#[derive(Debug)]
#[must_use = "settle the attempt: failed, succeeded or release"]
pub struct Attempt {
    user: String,
    address: String,
    at: i64,
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

    /// Reserve an attempt for `username` from `address`, or `Err(retry_after)` when
    /// either has failed (or has attempts in flight) `limit` times within the window.
    pub fn reserve(&self, username: &str, address: &str, now: i64) -> Result<Attempt, Duration> {
        let (user, address) = (user_key(username), addr_key(address));
        let mut failures = self.lock();
        let user_wait = self.blocked_for(&mut failures, &user, self.per_user, now);
        let addr_wait = self.blocked_for(&mut failures, &address, self.per_address, now);
        if let Some(wait) = user_wait.max(addr_wait) {
            return Err(wait);
        }
        if failures.len() >= MAX_KEYS {
            let window = self.window_ms;
            failures.retain(|_, times| times.back().is_some_and(|t| now - t < window));
        }
        for key in [&user, &address] {
            failures.entry(key.clone()).or_default().push_back(now);
        }
        Ok(Attempt {
            user,
            address,
            at: now,
        })
    }

    /// The password was wrong: the attempt stays counted.
    pub fn failed(&self, attempt: Attempt) {
        drop(attempt);
    }

    /// The password was right: the attempt is taken back and the username's record
    /// cleared.
    pub fn succeeded(&self, attempt: Attempt) {
        let mut failures = self.lock();
        failures.remove(&attempt.user);
        Self::take_back(&mut failures, &attempt.address, attempt.at);
    }

    /// The attempt could not be checked: it is taken back, as if never made.
    pub fn release(&self, attempt: Attempt) {
        let mut failures = self.lock();
        Self::take_back(&mut failures, &attempt.user, attempt.at);
        Self::take_back(&mut failures, &attempt.address, attempt.at);
    }

    fn take_back(failures: &mut HashMap<String, VecDeque<i64>>, key: &str, at: i64) {
        if let Some(times) = failures.get_mut(key) {
            if let Some(i) = times.iter().position(|t| *t == at) {
                times.remove(i);
            }
            if times.is_empty() {
                failures.remove(key);
            }
        }
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
            let attempt = limiter.reserve("alice", "10.0.0.1", i).expect("allowed");
            limiter.failed(attempt);
        }
        let wait = limiter
            .reserve("alice", "10.0.0.2", 10)
            .expect_err("limited");
        assert!(wait >= Duration::from_secs(59));
        assert!(limiter.reserve("bob", "10.0.0.1", 10).is_ok());
        assert!(limiter.reserve("alice", "10.0.0.1", 60_000).is_ok());
    }

    #[test]
    fn address_is_limited_across_usernames() {
        let limiter = LoginLimiter::new(100, 2, Duration::from_secs(60));
        limiter.failed(limiter.reserve("a", "10.0.0.9", 0).expect("a"));
        limiter.failed(limiter.reserve("b", "10.0.0.9", 0).expect("b"));
        assert!(limiter.reserve("c", "10.0.0.9", 1).is_err());
        assert!(limiter.reserve("c", "10.0.0.8", 1).is_ok());
    }

    #[test]
    fn success_clears_the_user_and_takes_back_the_address_attempt() {
        let limiter = LoginLimiter::new(1, 2, Duration::from_secs(60));
        limiter.failed(limiter.reserve("alice", "x", 0).expect("first"));
        assert!(limiter.reserve("alice", "y", 1).is_err());
        limiter.succeeded(limiter.reserve("carol", "y", 1).expect("carol"));
        limiter.succeeded(limiter.reserve("dave", "y", 1).expect("dave"));
        // Two successes from y left nothing counted against it.
        assert!(limiter.reserve("erin", "y", 2).is_ok());
    }

    #[test]
    fn attempts_in_flight_count_before_they_are_settled() {
        let limiter = LoginLimiter::new(5, 1000, Duration::from_secs(60));
        // Sixty concurrent guesses: each reserves before any is checked.
        let reserved: Vec<Attempt> = (0..60)
            .filter_map(|_| limiter.reserve("alice", "10.0.0.1", 0).ok())
            .collect();
        assert_eq!(reserved.len(), 5);
        for attempt in reserved {
            limiter.failed(attempt);
        }
        assert!(limiter.reserve("alice", "10.0.0.1", 1).is_err());
    }

    #[test]
    fn concurrent_reservations_from_threads_never_exceed_the_limit() {
        let limiter = std::sync::Arc::new(LoginLimiter::new(5, 1000, Duration::from_secs(60)));
        let threads: Vec<_> = (0..32)
            .map(|_| {
                let limiter = limiter.clone();
                std::thread::spawn(move || limiter.reserve("alice", "10.0.0.1", 0).ok())
            })
            .collect();
        let granted = threads
            .into_iter()
            .filter_map(|t| t.join().expect("thread"))
            .count();
        assert_eq!(granted, 5);
    }

    #[test]
    fn released_attempts_do_not_count() {
        let limiter = LoginLimiter::new(2, 2, Duration::from_secs(60));
        let first = limiter.reserve("alice", "x", 0).expect("first");
        let second = limiter.reserve("alice", "x", 0).expect("second");
        assert!(limiter.reserve("alice", "x", 0).is_err(), "two in flight");
        limiter.release(first);
        let third = limiter.reserve("alice", "x", 0).expect("a slot came back");
        limiter.release(second);
        limiter.release(third);
        assert!(limiter.failures.lock().expect("lock").is_empty());
    }
}
