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
//!
//! An address whose count is full only because of attempts still being checked (many
//! people behind one address logging in at the same moment: a classroom's NAT, a
//! proxy) is not refused: [`LoginLimiter::reserve_waiting`] waits, for a bounded time,
//! until one of them is settled, then tries again. No more than `per_address` attempts
//! from one address are ever unsettled or failed at once, as before.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;

const MAX_KEYS: usize = 100_000;

/// A reserved or failed attempt: when, and whether it is still being checked.
#[derive(Debug, Clone, Copy)]
struct Mark {
    at: i64,
    in_flight: bool,
}

#[derive(Debug)]
pub struct LoginLimiter {
    per_user: usize,
    per_address: usize,
    window_ms: i64,
    failures: Mutex<HashMap<String, VecDeque<Mark>>>,
    /// Woken whenever an attempt is settled.
    settled: Notify,
}

/// Why an attempt was not reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Too many failures (or, for a username, attempts in flight): try again after
    /// this long.
    Limited(Duration),
    /// The address's count is full with attempts still being checked: it frees up as
    /// soon as one of them succeeds.
    InFlight,
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
            settled: Notify::new(),
        }
    }

    /// Reserve an attempt for `username` from `address`, or say why not: either has
    /// failed (or, for the username, has attempts in flight) `limit` times within the
    /// window, or the address is full with attempts in flight.
    pub fn reserve(&self, username: &str, address: &str, now: i64) -> Result<Attempt, Refusal> {
        let (user, address) = (user_key(username), addr_key(address));
        let mut failures = self.lock();
        let user_wait = self.blocked_for(&mut failures, &user, self.per_user, now, true);
        let addr_wait = self.blocked_for(&mut failures, &address, self.per_address, now, false);
        if let Some(wait) = user_wait.max(addr_wait) {
            return Err(Refusal::Limited(wait));
        }
        if failures
            .get(&address)
            .is_some_and(|marks| marks.len() >= self.per_address)
        {
            return Err(Refusal::InFlight);
        }
        if failures.len() >= MAX_KEYS {
            let window = self.window_ms;
            failures.retain(|_, marks| marks.back().is_some_and(|m| now - m.at < window));
        }
        for key in [&user, &address] {
            failures.entry(key.clone()).or_default().push_back(Mark {
                at: now,
                in_flight: true,
            });
        }
        Ok(Attempt {
            user,
            address,
            at: now,
        })
    }

    /// [`Self::reserve`], waiting up to `wait` while the address is full only with
    /// attempts in flight (the clock read by `now` at each try). `Err(retry_after)`
    /// when refused.
    pub async fn reserve_waiting(
        &self,
        username: &str,
        address: &str,
        now: impl Fn() -> i64,
        wait: Duration,
    ) -> Result<Attempt, Duration> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            // Registered before the try, so that a settlement in between is not missed.
            let settled = self.settled.notified();
            tokio::pin!(settled);
            settled.as_mut().enable();
            match self.reserve(username, address, now()) {
                Ok(attempt) => return Ok(attempt),
                Err(Refusal::Limited(retry_after)) => return Err(retry_after),
                Err(Refusal::InFlight) => {
                    if tokio::time::timeout_at(deadline, settled).await.is_err() {
                        return Err(Duration::from_secs(1));
                    }
                }
            }
        }
    }

    /// The password was wrong: the attempt stays counted.
    pub fn failed(&self, attempt: Attempt) {
        let mut failures = self.lock();
        for key in [&attempt.user, &attempt.address] {
            if let Some(mark) = failures
                .get_mut(key)
                .and_then(|marks| marks.iter_mut().find(|m| m.in_flight && m.at == attempt.at))
            {
                mark.in_flight = false;
            }
        }
        drop(failures);
        self.settled.notify_waiters();
    }

    /// The password was right: the attempt is taken back and the username's record
    /// cleared.
    pub fn succeeded(&self, attempt: Attempt) {
        let mut failures = self.lock();
        failures.remove(&attempt.user);
        Self::take_back(&mut failures, &attempt.address, attempt.at);
        drop(failures);
        self.settled.notify_waiters();
    }

    /// The attempt could not be checked: it is taken back, as if never made.
    pub fn release(&self, attempt: Attempt) {
        let mut failures = self.lock();
        Self::take_back(&mut failures, &attempt.user, attempt.at);
        Self::take_back(&mut failures, &attempt.address, attempt.at);
        drop(failures);
        self.settled.notify_waiters();
    }

    fn take_back(failures: &mut HashMap<String, VecDeque<Mark>>, key: &str, at: i64) {
        if let Some(marks) = failures.get_mut(key) {
            if let Some(i) = marks.iter().position(|m| m.in_flight && m.at == at) {
                marks.remove(i);
            }
            if marks.is_empty() {
                failures.remove(key);
            }
        }
    }

    /// How long `key` is refused, if it is: `limit` marks within the window, counting
    /// those in flight only when `count_in_flight`.
    fn blocked_for(
        &self,
        failures: &mut HashMap<String, VecDeque<Mark>>,
        key: &str,
        limit: usize,
        now: i64,
        count_in_flight: bool,
    ) -> Option<Duration> {
        let marks = failures.get_mut(key)?;
        // Older than the window: a failure forgotten, or an attempt abandoned mid-check.
        while marks.front().is_some_and(|m| now - m.at >= self.window_ms) {
            marks.pop_front();
        }
        let counted: Vec<i64> = marks
            .iter()
            .filter(|m| count_in_flight || !m.in_flight)
            .map(|m| m.at)
            .collect();
        if counted.len() < limit {
            return None;
        }
        // Refused until enough failures leave the window to drop below the limit.
        let freeing = counted[counted.len() - limit];
        let wait_ms = (freeing + self.window_ms - now).max(1000);
        Some(Duration::from_millis(wait_ms as u64))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<Mark>>> {
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
        let Err(Refusal::Limited(wait)) = limiter.reserve("alice", "10.0.0.2", 10) else {
            panic!("limited");
        };
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

    #[test]
    fn an_address_full_of_attempts_in_flight_is_busy_not_limited() {
        let limiter = LoginLimiter::new(5, 3, Duration::from_secs(60));
        let in_flight: Vec<Attempt> = ["a", "b", "c"]
            .iter()
            .map(|u| limiter.reserve(u, "nat", 0).expect("reserved"))
            .collect();
        assert_eq!(
            limiter.reserve("d", "nat", 0).err(),
            Some(Refusal::InFlight)
        );
        let mut in_flight = in_flight.into_iter();
        limiter.succeeded(in_flight.next().expect("a"));
        let d = limiter.reserve("d", "nat", 1).expect("a slot came back");
        // Failures, not attempts in flight, are what limit an address.
        limiter.failed(d);
        for attempt in in_flight {
            limiter.failed(attempt);
        }
        assert!(matches!(
            limiter.reserve("e", "nat", 2),
            Err(Refusal::Limited(_))
        ));
    }

    #[tokio::test]
    async fn a_busy_address_waits_for_an_attempt_to_settle() {
        let limiter = std::sync::Arc::new(LoginLimiter::new(5, 2, Duration::from_secs(60)));
        let first = limiter.reserve("a", "nat", 0).expect("a");
        let second = limiter.reserve("b", "nat", 0).expect("b");
        let waiter = {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                limiter
                    .reserve_waiting("c", "nat", || 1, Duration::from_secs(30))
                    .await
            })
        };
        // The test's runtime has one thread: the waiter runs until it waits.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished(), "waits while both are in flight");
        limiter.succeeded(first);
        let third = waiter
            .await
            .expect("task")
            .expect("reserved once a slot came back");
        limiter.succeeded(second);
        limiter.succeeded(third);
        // With nothing settled in time, the wait ends with a refusal.
        let a = limiter.reserve("a", "nat", 2).expect("a");
        let b = limiter.reserve("b", "nat", 2).expect("b");
        let refused = limiter
            .reserve_waiting("c", "nat", || 2, Duration::from_millis(20))
            .await;
        assert!(refused.is_err());
        limiter.release(a);
        limiter.release(b);
    }
}
