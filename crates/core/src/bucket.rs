//! The one token bucket: DynamoDB's burst credit, metered the same way wherever a rate is
//! limited or modelled — the daemon's `--max-deletes-per-second` cap ([`crate::TokenBucket`]),
//! the engine's partitioned test store, the simulator's partitions and the bench's
//! perfect-knowledge bound all keep their tokens in a [`Bucket`], so the bound's ratio to what
//! the stores admit cannot drift through a difference in metering.
//!
//! Time is an argument, a [`Duration`] since an origin the owner picks (its creation, the first
//! instant it sees): fine enough for `Instant`s (nanoseconds), and exact for whole milliseconds,
//! which the bound steps in (a refill over `k` ms is `k * rate_per_ms`, computed from `k` as a
//! whole number, so it is the same to the bit as the bound's own arithmetic always was).

use std::time::{Duration, Instant};

/// Tokens refilled at a rate, up to a depth; full (or as told) at the start. An infinite rate
/// admits everything and never runs down. Tokens may go below zero (a cost taken into debt, as
/// DynamoDB meters reads and as an application's writes land whatever the deletes wait for):
/// the bucket then admits nothing until the refill has paid the debt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    per_ms: f64,
    depth: f64,
    tokens: f64,
    at: Duration,
}

/// What float error of many small refills may leave short of a whole token:
/// [`Bucket::admits`] forgives it.
pub const TOLERANCE: f64 = 1e-9;

impl Bucket {
    /// DynamoDB's burst credit: full at `at`, refilled at `rate` per second, holding `rate *
    /// burst_seconds` at most — at least a millisecond's worth, so a zero burst still admits.
    pub fn burst_credit(rate: f64, burst_seconds: f64, at: Duration) -> Bucket {
        let depth = rate * burst_seconds.max(0.001);
        Bucket::holding(rate, depth, depth, at)
    }

    /// A bucket refilled at `rate` per second up to `depth`, holding `tokens` at `at`.
    pub fn holding(rate: f64, depth: f64, tokens: f64, at: Duration) -> Bucket {
        Bucket {
            per_ms: rate / 1000.0,
            depth,
            tokens,
            at,
        }
    }

    /// Whether the rate is infinite: everything is admitted, nothing taken.
    pub fn is_unlimited(&self) -> bool {
        self.per_ms.is_infinite()
    }

    /// The most it holds.
    pub fn depth(&self) -> f64 {
        self.depth
    }

    /// The tokens held at `t`, without changing the bucket (an instant before the last one it
    /// saw counts as that one: time never runs backwards for a bucket).
    pub fn available(&self, t: Duration) -> f64 {
        if self.is_unlimited() {
            return f64::INFINITY;
        }
        let elapsed_ms = millis(t.saturating_sub(self.at));
        (self.tokens + elapsed_ms * self.per_ms).min(self.depth)
    }

    /// Refills up to `t` and says what the bucket holds then.
    pub fn tokens(&mut self, t: Duration) -> f64 {
        if !self.is_unlimited() {
            self.tokens = self.available(t);
            self.at = self.at.max(t);
        }
        self.available(t)
    }

    /// Whether `cost` can be taken at `t` (refilling up to `t`), forgiving [`TOLERANCE`].
    pub fn admits(&mut self, cost: f64, t: Duration) -> bool {
        self.is_unlimited() || self.tokens(t) + TOLERANCE >= cost
    }

    /// Takes `cost` from what the bucket holds at the last instant it saw, room or not.
    pub fn take(&mut self, cost: f64) {
        if !self.is_unlimited() {
            self.tokens -= cost;
        }
    }

    /// Refills up to `t`, then takes `cost`, room or not.
    pub fn take_at(&mut self, t: Duration, cost: f64) {
        self.tokens(t);
        self.take(cost);
    }

    /// How long from the last instant the bucket saw until it holds `cost` (zero when it does).
    pub fn wait_for(&self, cost: f64) -> Duration {
        let short = cost - self.tokens;
        if self.is_unlimited() || short <= 0.0 {
            return Duration::ZERO;
        }
        // A rate too slow to say (a vanishing one): as good as never.
        Duration::try_from_secs_f64(short / self.per_ms / 1000.0).unwrap_or(Duration::MAX)
    }
}

/// [`Bucket::burst_credit`] on `Instant`s (the caller's: a simulated or paused clock is as good
/// as the wall's), its origin the instant it was made.
#[derive(Debug, Clone)]
pub struct InstantBucket {
    bucket: Bucket,
    origin: Instant,
}

impl InstantBucket {
    /// A full bucket; an infinite `rate` admits everything.
    pub fn new(rate: f64, burst_seconds: f64, now: Instant) -> InstantBucket {
        InstantBucket {
            bucket: Bucket::burst_credit(rate, burst_seconds, Duration::ZERO),
            origin: now,
        }
    }

    /// The tokens held at `now`.
    pub fn tokens(&mut self, now: Instant) -> f64 {
        self.bucket
            .tokens(now.saturating_duration_since(self.origin))
    }

    /// Whether `cost` can be taken at `now`; `None`, a cost not known until it is paid (a
    /// read's: DynamoDB admits it on any positive balance and charges it afterwards).
    pub fn admits(&mut self, cost: Option<f64>, now: Instant) -> bool {
        match cost {
            Some(cost) => self
                .bucket
                .admits(cost, now.saturating_duration_since(self.origin)),
            None => self.bucket.is_unlimited() || self.tokens(now) > 0.0,
        }
    }

    /// Takes `cost`, possibly into debt.
    pub fn take(&mut self, cost: f64) {
        self.bucket.take(cost);
    }
}

/// `d` in milliseconds, exact for a whole number of them.
fn millis(d: Duration) -> f64 {
    d.as_secs() as f64 * 1000.0 + f64::from(d.subsec_nanos()) / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn burst_credit_is_full_at_the_start_refills_at_its_rate_and_is_capped() {
        let mut b = Bucket::burst_credit(1000.0, 0.5, ms(0));
        assert_eq!(b.tokens(ms(0)), 500.0, "full: rate * burst_seconds");
        assert!(b.admits(500.0, ms(0)));
        b.take(500.0);
        assert!(!b.admits(1.0, ms(0)));
        assert_eq!(b.tokens(ms(10)), 10.0, "refilled at rate per second");
        assert!(b.admits(10.0, ms(10)) && !b.admits(11.0, ms(10)));
        assert_eq!(b.tokens(ms(60_000)), 500.0, "capped at its burst");
        // Time never runs backwards: an earlier instant refills nothing and undoes nothing.
        b.take(500.0);
        assert_eq!(b.tokens(ms(1000)), 0.0);
        assert_eq!(b.tokens(ms(60_001)), 1.0);
    }

    #[test]
    fn a_zero_burst_still_holds_a_milliseconds_worth() {
        let mut b = Bucket::burst_credit(2000.0, 0.0, ms(0));
        assert_eq!(b.tokens(ms(0)), 2.0);
        b.take_at(ms(0), 2.0);
        assert_eq!(b.tokens(ms(1000)), 2.0, "capped at a millisecond's worth");
    }

    #[test]
    fn costs_go_into_debt_and_the_refill_pays_it_first() {
        let mut b = Bucket::burst_credit(1000.0, 1.0, ms(0));
        b.take(1500.0);
        assert!(!b.admits(f64::MIN_POSITIVE, ms(0)));
        assert_eq!(b.wait_for(1.0), ms(501));
        assert_eq!(
            Bucket::holding(f64::MIN_POSITIVE, 1.0, 0.0, ms(0)).wait_for(1.0),
            Duration::MAX
        );
        assert!(!b.admits(1.0, ms(500)) && b.admits(1.0, ms(501)));
    }

    #[test]
    fn an_infinite_rate_admits_everything() {
        let mut b = Bucket::burst_credit(f64::INFINITY, 1.0, ms(0));
        b.take(1e12);
        b.take_at(ms(5), 1e12);
        assert!(b.admits(1e12, ms(0)));
        assert_eq!(b.available(ms(0)), f64::INFINITY);
        assert_eq!(b.wait_for(1e12), Duration::ZERO);
    }

    #[test]
    fn whole_milliseconds_refill_exactly_as_steps_of_rate_per_ms() {
        // The bound's arithmetic: tokens + k * (rate / 1000), k a whole number of ms.
        let (rate, depth) = (647.0, 1e9);
        let mut b = Bucket::holding(rate, depth, 0.0, ms(3));
        let mut tokens = 0.0f64;
        let mut at = 3i64;
        for k in [1i64, 7, 1000, 12_345, 3_600_000] {
            let t = at + k;
            tokens = (tokens + (t - at) as f64 * (rate / 1000.0)).min(depth) - 1.0;
            b.take_at(ms(t as u64), 1.0);
            at = t;
            assert_eq!(b.available(ms(at as u64)).to_bits(), tokens.to_bits());
        }
    }

    #[test]
    fn on_instants_reads_are_admitted_on_any_positive_balance_and_paid_after() {
        let t0 = Instant::now();
        let mut b = InstantBucket::new(1000.0, 1.0, t0);
        assert!(b.admits(Some(1000.0), t0) && !b.admits(Some(1001.0), t0));
        b.take(1500.0);
        assert!(!b.admits(None, t0 + ms(500)));
        assert!(b.admits(None, t0 + ms(501)));
        assert!((b.tokens(t0 + ms(60_000)) - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn finer_instants_refill_in_proportion() {
        let mut b = Bucket::holding(1000.0, 10.0, 0.0, Duration::ZERO);
        let t = Duration::from_micros(2500);
        assert!((b.tokens(t) - 2.5).abs() < 1e-12);
    }
}
