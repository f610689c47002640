//! Retry timing: capped exponential backoff with full jitter.
//!
//! Full jitter (a uniform draw in `[0, min(cap, base·2^n)]`) spreads retries of many concurrent
//! deletes so they do not hit a throttled partition again in lockstep. The random draw is an
//! argument so the policy stays pure and testable.

use crate::ErrorClass;
use std::time::Duration;

/// A throttled delete's delay grows for this many refusals, then stays (25, 50 ms by default).
const THROTTLED_STEPS: u32 = 2;

/// The mean wait of an item the store refused before admission sends it again (uniform in half
/// to one and a half of it). Short: a refused item keeps its place by expiry, and every
/// millisecond it waits its partition may serve newer items first; admission's rates, not this
/// sleep, keep the load down. Chosen on the engine's deterministic load tests and the simulator
/// (docs/benchmarks.md): with items sent for the first time never held back, 2 ms gave the lowest
/// worst lags; 8 ms let newer items win more of a full partition's tokens, and 25 to 50 ms (a
/// throttle's backoff) doubled the worst lag.
pub const REFUSED_RETRY: Duration = Duration::from_millis(2);

/// The wait of a refused item before admission sends it again, given a uniform draw `unit` in
/// `[0, 1)`.
pub fn refused_delay(unit: f64) -> Duration {
    REFUSED_RETRY.mul_f64(0.5 + unit.clamp(0.0, 1.0))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay ceiling for the first retry.
    pub base: Duration,
    /// No delay ever exceeds this.
    pub cap: Duration,
    /// Attempts in total, the first one included. `1` means never retry.
    pub max_attempts: u32,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(25),
            // Precision is the product: after an outage the store must be asked again within a
            // second of coming back, not after a sleep that grew through the outage. Throttling
            // is answered by the AIMD limit, not by long sleeps.
            cap: Duration::from_secs(1),
            max_attempts: 10,
        }
    }
}

impl Backoff {
    /// Whether attempt number `attempt` (1-based) may be followed by another one.
    pub fn may_retry_after(&self, attempt: u32) -> bool {
        attempt < self.max_attempts
    }

    /// Whether a delete whose attempt number `attempt` (1-based) failed with `class` goes again,
    /// and after which attempt's delay. A throttle always goes again: the store refused the
    /// delete, so nothing is lost by trying, and giving up leaves the item to a backlog pass that
    /// may be 30 s away, a lag of tens of seconds for that item. Its delay
    /// stops growing after a few refusals: the concurrency limit, not its sleep, keeps the load
    /// down, and a delay grown over many refusals leaves it waiting long after its partition has
    /// room again. Other retryable failures go again up to `max_attempts`.
    pub fn retry_as(&self, class: ErrorClass, attempt: u32) -> Option<u32> {
        match class {
            ErrorClass::Throttled => Some(attempt.min(THROTTLED_STEPS)),
            c if c.is_retryable() && self.may_retry_after(attempt) => Some(attempt),
            _ => None,
        }
    }

    /// The ceiling of the delay after failed attempt number `attempt` (1-based).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let shift = attempt.saturating_sub(1).min(30);
        self.base.saturating_mul(1u32 << shift).min(self.cap)
    }

    /// The delay after failed attempt `attempt`, given a uniform draw `unit` in `[0, 1)`.
    pub fn delay(&self, attempt: u32, unit: f64) -> Duration {
        self.ceiling(attempt).mul_f64(unit.clamp(0.0, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_then_caps() {
        let b = Backoff {
            base: Duration::from_millis(10),
            cap: Duration::from_millis(100),
            max_attempts: 5,
        };
        let c: Vec<_> = (1..=6).map(|a| b.ceiling(a).as_millis()).collect();
        assert_eq!(c, vec![10, 20, 40, 80, 100, 100]);
        assert_eq!(b.delay(3, 0.5), Duration::from_millis(20));
        assert_eq!(b.delay(3, 7.0), Duration::from_millis(40));
        assert!(b.may_retry_after(4));
        assert!(!b.may_retry_after(5));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_millis(100));
    }

    #[test]
    fn a_throttle_always_goes_again_soon_other_failures_until_the_attempts_run_out() {
        let b = Backoff::default();
        assert_eq!(b.retry_as(ErrorClass::Throttled, 1), Some(1));
        assert_eq!(b.retry_as(ErrorClass::Throttled, 50), Some(2));
        assert_eq!(b.ceiling(2), Duration::from_millis(50));
        assert_eq!(b.retry_as(ErrorClass::Transient, 9), Some(9));
        assert_eq!(b.retry_as(ErrorClass::Transient, 10), None);
        assert_eq!(b.retry_as(ErrorClass::ConditionFailed, 1), None);
        assert_eq!(b.retry_as(ErrorClass::Fatal, 1), None);
    }
}
