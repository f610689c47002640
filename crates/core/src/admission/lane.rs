//! One lane's own rate limit: set by that lane's index-partition refusals, probed back up while
//! none come, and lifted once the lane has gone long enough without one.
//!
//! A lane is one shard, that is, one partition key value of the expiry index: its index
//! partition takes a fixed number of writes a second (1,000 on DynamoDB), the application's
//! inserts included. Refused there, the lane sends at what it was accepting, less a margin, and
//! grows back additively; the rest of the table is not slowed for it.

use crate::time::Timestamp;
use std::time::Duration;

/// A limit is never set below this (items/s): a lane must keep probing.
pub const MIN_LANE_RATE: f64 = 10.0;
/// A lane's first limit is cut from at least this (items/s): what one DynamoDB index partition
/// takes (1,000 writes/s). The first refusal may come before the lane's rate could be measured;
/// a partition refuses once it is full, so the lane was sending about this much, and further
/// refusals cut from the rate measured by then. Half of it, as it was, left a lane refused at its
/// start limited to under half its partition, growing back by a few percent a second while the
/// other lanes ran full: with every lane over its partition, that lane's items were the run's
/// tail (docs/benchmarks.md, "Every lane over its index partition").
const FIRST_LIMIT_FLOOR: f64 = 1000.0;
/// The share of the accepted rate a refusal leaves (multiplicative decrease).
const CUT: f64 = 0.85;
/// One refusal cuts at most once per this: refusals of requests already in flight answer the
/// same excess, not a new one.
const CUT_COOLDOWN: Duration = Duration::from_millis(100);
/// Each second without a refusal adds this share of the limit (at least [`MIN_LANE_RATE`]).
const GROWTH: f64 = 0.05;
/// A lane this long without a refusal loses its limit.
const LIFT_AFTER: Duration = Duration::from_secs(10);
/// The window over which the lane's accepted rate is measured.
const WINDOW: Duration = Duration::from_millis(500);
/// Tokens a limited lane may spend at once: a short burst, so a request can carry a few of its
/// items without the rate being exceeded for long.
const BURST: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, PartialEq)]
pub struct LaneLimit {
    /// Items per second while limited; `None`: unlimited.
    rate: Option<f64>,
    tokens: f64,
    refilled: Option<Timestamp>,
    last_cut: Option<Timestamp>,
    last_refusal: Option<Timestamp>,
    last_growth: Option<Timestamp>,
    /// Accepted items in the current and the previous window.
    accepted: u64,
    window_start: Option<Timestamp>,
    accepted_rate: f64,
    refusals: u64,
}

impl Default for LaneLimit {
    fn default() -> Self {
        LaneLimit {
            rate: None,
            tokens: 0.0,
            refilled: None,
            last_cut: None,
            last_refusal: None,
            last_growth: None,
            accepted: 0,
            window_start: None,
            accepted_rate: 0.0,
            refusals: 0,
        }
    }
}

impl LaneLimit {
    /// The current limit (items/s), `None` when unlimited.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Refusals by this lane's index partition so far.
    pub fn refusals(&self) -> u64 {
        self.refusals
    }

    /// `n` of the lane's items were answered (not refused) at `now`.
    pub fn accepted(&mut self, n: usize, now: Timestamp) {
        let start = *self.window_start.get_or_insert(now);
        self.accepted += n as u64;
        let elapsed = now.millis_since(start);
        if elapsed >= WINDOW.as_millis() as i64 {
            self.accepted_rate = self.accepted as f64 * 1000.0 / elapsed as f64;
            self.accepted = 0;
            self.window_start = Some(now);
        }
        self.grow(now);
    }

    /// The lane's index partition refused an item at `now`.
    pub fn refused(&mut self, now: Timestamp) {
        self.refusals += 1;
        self.last_refusal = Some(now);
        let cooled = self
            .last_cut
            .is_none_or(|t| now.millis_since(t) >= CUT_COOLDOWN.as_millis() as i64);
        if !cooled {
            return;
        }
        let base = match self.rate {
            // What the partition was taking, measured, is where the limit starts.
            None => self.current_rate(now).max(FIRST_LIMIT_FLOOR),
            Some(rate) => rate.min(self.current_rate(now).max(MIN_LANE_RATE)),
        };
        let rate = (base * CUT).max(MIN_LANE_RATE);
        if self.rate.is_none() {
            self.tokens = rate * BURST.as_secs_f64();
            self.refilled = Some(now);
        }
        self.rate = Some(rate);
        self.last_cut = Some(now);
        self.last_growth = Some(now);
    }

    /// The accepted rate, from the window in progress if it has run long enough.
    fn current_rate(&self, now: Timestamp) -> f64 {
        let in_window = self.window_start.map_or(0, |s| now.millis_since(s));
        if in_window >= 100 {
            let current = self.accepted as f64 * 1000.0 / in_window as f64;
            current.max(self.accepted_rate)
        } else {
            self.accepted_rate
        }
    }

    fn grow(&mut self, now: Timestamp) {
        let Some(rate) = self.rate else { return };
        if self
            .last_refusal
            .is_some_and(|t| now.millis_since(t) >= LIFT_AFTER.as_millis() as i64)
        {
            self.rate = None;
            return;
        }
        let last = *self.last_growth.get_or_insert(now);
        let elapsed = now.millis_since(last);
        if elapsed >= 1000 {
            let seconds = elapsed as f64 / 1000.0;
            self.rate = Some(rate + (rate * GROWTH).max(MIN_LANE_RATE) * seconds);
            self.last_growth = Some(now);
        }
    }

    /// Takes one token at `now`; `Err(at)`: none until `at`.
    pub fn take(&mut self, now: Timestamp) -> Result<(), Timestamp> {
        self.grow(now);
        let Some(rate) = self.rate else {
            return Ok(());
        };
        let burst = (rate * BURST.as_secs_f64()).max(1.0);
        if let Some(last) = self.refilled {
            let elapsed = now.millis_since(last).max(0) as f64 / 1000.0;
            self.tokens = (self.tokens + elapsed * rate).min(burst);
        }
        self.refilled = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            let wait_ms = ((1.0 - self.tokens) / rate * 1000.0).ceil().max(1.0);
            Err(now.saturating_add(Duration::from_millis(wait_ms as u64)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(1_000_000 + ms)
    }

    #[test]
    fn an_unrefused_lane_is_never_limited() {
        let mut l = LaneLimit::default();
        for ms in 0..1000 {
            assert!(l.take(at(ms)).is_ok());
            l.accepted(5, at(ms));
        }
        assert_eq!(l.rate(), None);
    }

    #[test]
    fn a_refusal_limits_the_lane_below_what_it_was_accepting_and_it_grows_back_then_lifts() {
        let mut l = LaneLimit::default();
        // 1,200 items/s accepted for a second.
        for ms in 0..1000 {
            l.accepted(if ms % 5 == 0 { 6 } else { 0 }, at(ms));
        }
        l.refused(at(1000));
        let rate = l.rate().unwrap();
        assert!((950.0..=1100.0).contains(&rate), "{rate}");
        // A second refusal within the cooldown: no further cut.
        l.refused(at(1050));
        assert_eq!(l.rate(), Some(rate));
        // Over one second the lane hands out about its rate.
        let mut taken = 0;
        for ms in 1000..2000 {
            while l.take(at(ms)).is_ok() {
                taken += 1;
            }
        }
        assert!((taken as f64) < rate * 1.1 + 60.0, "{taken} at {rate}");
        // Grows while no refusal comes, lifted after LIFT_AFTER.
        l.accepted(1, at(4000));
        assert!(l.rate().unwrap() > rate);
        l.accepted(1, at(12_000));
        assert_eq!(l.rate(), None);
    }

    #[test]
    fn repeated_refusals_never_take_a_lane_below_the_floor() {
        let mut l = LaneLimit::default();
        l.refused(at(-1));
        assert_eq!(
            l.rate(),
            Some(FIRST_LIMIT_FLOOR * CUT),
            "unmeasured: from the first floor"
        );
        for i in 0..200 {
            l.refused(at(i * 200));
        }
        assert_eq!(l.rate(), Some(MIN_LANE_RATE));
        let Err(next) = l.take(at(40_000)).and_then(|_| l.take(at(40_000))) else {
            panic!("a lane at its floor has no second token at once");
        };
        assert!(next > at(40_000));
    }
}
