//! Pressure control: adaptive concurrency (AIMD) and the daemon's hard rate cap (a token
//! bucket on [`crate::bucket::Bucket`]).
//!
//! Both are pure state machines fed with outcomes and instants, so the engine's behaviour under
//! throttling can be tested without a store or a clock.

use crate::bucket::Bucket;
use crate::time::Timestamp;
use std::time::Duration;

/// Additive-increase, multiplicative-decrease limit on requests in flight.
///
/// A throttled request shrinks the limit by half the share of its items the store refused (a
/// request refused whole halves it, as in TCP; one refused item of 25 takes 2 %), at most once
/// per `cooldown` (one burst of throttles from requests already in flight is one signal, not
/// many). A few refused items among many say a partition is hot, not that the table is full:
/// the rest went through, and retrying the few is the answer. Every `limit` items answered
/// without a throttle raise the limit by one: a request carries up to 25 items, so the limit
/// regains in a round trip what a cut took. Counted per request instead (one step a round
/// trip), the limit stayed far below what the simulated table with headroom takes at full
/// speed (docs/benchmarks.md has the runs).
#[derive(Debug, Clone, PartialEq)]
pub struct Aimd {
    min: usize,
    max: usize,
    limit: usize,
    successes: usize,
    cooldown: Duration,
    last_decrease: Option<Timestamp>,
}

impl Aimd {
    pub fn new(min: usize, initial: usize, max: usize, cooldown: Duration) -> Self {
        let min = min.max(1);
        let max = max.max(min);
        Aimd {
            min,
            max,
            limit: initial.clamp(min, max),
            successes: 0,
            cooldown,
            last_decrease: None,
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn on_success(&mut self) {
        self.successes += 1;
        if self.successes >= self.limit {
            self.successes = 0;
            self.limit = (self.limit + 1).min(self.max);
        }
    }

    /// `n` items answered at once (one request's).
    pub fn on_successes(&mut self, n: usize) {
        for _ in 0..n {
            self.on_success();
        }
    }

    /// A request was throttled; `refused`: the share of its items the store refused, in
    /// `(0, 1]`.
    pub fn on_throttle(&mut self, now: Timestamp, refused: f64) {
        let cooled = self
            .last_decrease
            .is_none_or(|t| now.millis_since(t) >= self.cooldown.as_millis() as i64);
        if cooled {
            let kept = 1.0 - refused.clamp(0.0, 1.0) / 2.0;
            // `floor`: any refused share takes at least one off.
            self.limit = ((self.limit as f64 * kept).floor() as usize).max(self.min);
            self.successes = 0;
            self.last_decrease = Some(now);
        }
    }
}

/// The daemon's hard rate cap: at most `rate` tokens per second on average, bursts up to
/// `burst`, full until the first take. A [`Bucket`] kept on the caller's [`Timestamp`]s.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    bucket: Bucket,
    /// The first instant taken at: the bucket's origin.
    origin: Option<Timestamp>,
}

impl TokenBucket {
    pub fn new(rate_per_second: f64, burst: f64) -> Self {
        let burst = burst.max(1.0);
        let rate = rate_per_second.max(f64::MIN_POSITIVE);
        TokenBucket {
            bucket: Bucket::holding(rate, burst, burst, Duration::ZERO),
            origin: None,
        }
    }

    /// Takes `n` tokens if available; otherwise says how long to wait before asking again.
    pub fn take(&mut self, now: Timestamp, n: f64) -> Result<(), Duration> {
        let origin = *self.origin.get_or_insert(now);
        let t = Duration::from_millis(now.millis_since(origin).max(0) as u64);
        let n = n.min(self.bucket.depth());
        if self.bucket.tokens(t) >= n {
            self.bucket.take(n);
            Ok(())
        } else {
            Err(self.bucket.wait_for(n).max(Duration::from_millis(1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aimd_halves_on_throttle_once_per_cooldown_and_recovers_additively() {
        let mut a = Aimd::new(2, 32, 64, Duration::from_millis(100));
        let t = Timestamp::from_secs(1000);
        a.on_throttle(t, 1.0);
        assert_eq!(a.limit(), 16);
        a.on_throttle(t.saturating_add(Duration::from_millis(50)), 1.0);
        assert_eq!(a.limit(), 16, "same burst of throttles");
        a.on_throttle(t.saturating_add(Duration::from_millis(150)), 1.0);
        assert_eq!(a.limit(), 8);
        for _ in 0..8 {
            a.on_success();
        }
        assert_eq!(a.limit(), 9);
        for _ in 0..10 {
            a.on_throttle(t.saturating_add(Duration::from_secs(10 + 1)), 1.0);
            a.on_throttle(t.saturating_add(Duration::from_secs(20)), 1.0);
        }
        assert_eq!(a.limit(), 2, "never below min");
        for _ in 0..10_000 {
            a.on_success();
        }
        assert_eq!(a.limit(), 64, "never above max");
    }

    #[test]
    fn a_request_refused_in_part_shrinks_the_limit_by_half_that_share() {
        let mut a = Aimd::new(2, 40, 64, Duration::from_millis(100));
        let t = Timestamp::from_secs(1000);
        // One item of 25 refused: a hot partition, 2 % off (and at least one).
        a.on_throttle(t, 1.0 / 25.0);
        assert_eq!(a.limit(), 39);
        a.on_throttle(t.saturating_add(Duration::from_millis(100)), 0.5);
        assert_eq!(a.limit(), 29);
        a.on_throttle(t.saturating_add(Duration::from_millis(200)), 1.0);
        assert_eq!(a.limit(), 14);
    }

    #[test]
    fn token_bucket_enforces_the_rate() {
        let mut b = TokenBucket::new(100.0, 10.0);
        let t0 = Timestamp::from_secs(0);
        for _ in 0..10 {
            assert!(b.take(t0, 1.0).is_ok());
        }
        let wait = b.take(t0, 1.0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(10));
        assert!(
            b.take(t0.saturating_add(Duration::from_millis(10)), 1.0)
                .is_ok()
        );
        // Over one simulated second at most rate + burst tokens are handed out.
        let mut taken = 0;
        for ms in 0..1000 {
            while b.take(Timestamp::from_millis(10 + ms), 1.0).is_ok() {
                taken += 1;
            }
        }
        assert!((95..=111).contains(&taken), "{taken}");
    }
}
