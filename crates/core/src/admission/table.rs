//! A send rate for the whole table: engaged when a large share of what the table is sent is
//! refused, held a margin above what the table accepts, probed upwards, and lifted once
//! refusals stop. Admission keeps two: one for refusals of the whole table or index, held near
//! what the table accepts, and a looser one for refusals of table partitions, which admission
//! applies to retries only (see the admission module's header).
//!
//! Why a rate and not fewer requests in flight: at the table's capacity, the items the store
//! refuses go back and race the fresh ones of their partition for each token, so an unlucky
//! item is refused again and again while newer ones pass (the store serves them in random
//! order, not oldest first). Sent at about what the table accepts, the items wait here
//! instead, in order of expiry, and each partition receives its items oldest first.

use crate::time::Timestamp;
use std::time::Duration;

/// The refused share of a period above which the rate is cut (and engaged). At a full table
/// some partition is always over its limit for a moment, so a few refusals are the price of
/// keeping every partition busy; chosen on the deterministic load tests of the engine (see
/// docs/benchmarks.md), where 5 % left the table under-used and 30 % let refused items race.
const TARGET_SHARE: f64 = 0.1;
/// How often the rate is adjusted.
const PERIOD: Duration = Duration::from_millis(100);
/// A period over the target sets the rate this far above what the table accepted.
const OVER_ACCEPTED: f64 = 1.05;
/// For table partitions' refusals: a full partition refuses most of its own items while the
/// others accept theirs, so the rate engages only when half of what is sent is refused, and
/// then lets retries go at twice what the table accepts (it holds back retries only, see the
/// admission module's header). Chosen on the engine's deterministic load tests at full capacity
/// with the simulator's round trips (docs/benchmarks.md): 0.3-0.65 and 1.3-4 traded the median
/// against the worst lag, and these two gave the lowest worst lag.
const PARTITIONS_TARGET_SHARE: f64 = 0.5;
const PARTITIONS_OVER_ACCEPTED: f64 = 2.0;
/// A period at or under the target raises the rate by this share, times the number of such
/// periods in a row (capped at [`PROBE_MAX_STEPS`]): a rate cut during a burst, when the table
/// accepted little in its first period, comes back to the table's capacity within about a
/// second, and one period over the target starts the probe over.
const PROBE: f64 = 0.05;
const PROBE_MAX_STEPS: u32 = 10;
/// The rate is lifted after this long without a period over the target.
const LIFT_AFTER: Duration = Duration::from_secs(2);
/// Tokens the rate may spend at once: one request's worth at any rate worth limiting.
const BURST: Duration = Duration::from_millis(10);
/// Never below this (items/s).
const MIN_RATE: f64 = 10.0;

#[derive(Debug, Clone, PartialEq)]
pub struct TableRate {
    target: f64,
    over: f64,
    rate: Option<f64>,
    tokens: f64,
    refilled: Option<Timestamp>,
    period_start: Option<Timestamp>,
    sent: u64,
    refused: u64,
    last_over: Option<Timestamp>,
    /// Periods at or under the target in a row.
    under: u32,
    /// The most the table accepted in one period over the last [`PEAK_MEMORY`] (items/s, when).
    peak: Option<(f64, Timestamp)>,
}

/// How long the most the table accepted is remembered: the rate is never cut below
/// [`PEAK_SHARE`] of it. Refusals that sending less does not reduce (one hot table partition's
/// keys, retried) would otherwise cut the rate, and so what the table accepts, period after
/// period.
const PEAK_MEMORY: Duration = Duration::from_secs(10);
const PEAK_SHARE: f64 = 0.95;

impl TableRate {
    /// The rate for refusals of the whole table or index.
    pub fn for_table() -> Self {
        TableRate::new(TARGET_SHARE, OVER_ACCEPTED)
    }

    /// The rate for refusals of table partitions.
    pub fn for_partitions() -> Self {
        TableRate::new(PARTITIONS_TARGET_SHARE, PARTITIONS_OVER_ACCEPTED)
    }

    fn new(target: f64, over: f64) -> Self {
        TableRate {
            target,
            over,
            rate: None,
            tokens: 0.0,
            refilled: None,
            period_start: None,
            sent: 0,
            refused: 0,
            last_over: None,
            under: 0,
            peak: None,
        }
    }

    /// Items/s, `None` when not engaged.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// A request of `sent` items was answered at `now`, `refused` of them by the table or its
    /// partitions (not by one lane's index partition).
    pub fn answered(&mut self, now: Timestamp, sent: usize, refused: usize) {
        let start = *self.period_start.get_or_insert(now);
        self.sent += sent as u64;
        self.refused += refused as u64;
        let elapsed = now.millis_since(start);
        if elapsed < PERIOD.as_millis() as i64 || self.sent == 0 {
            return;
        }
        let share = self.refused as f64 / self.sent as f64;
        let accepted = (self.sent - self.refused) as f64 * 1000.0 / elapsed as f64;
        if self.peak.is_none_or(|(p, at)| {
            accepted >= p || now.millis_since(at) > PEAK_MEMORY.as_millis() as i64
        }) {
            self.peak = Some((accepted, now));
        }
        let floor = self.peak.map_or(0.0, |(p, _)| p * PEAK_SHARE);
        if share > self.target {
            self.last_over = Some(now);
            let rate = (accepted * self.over).max(floor).max(MIN_RATE);
            if self.rate.is_none() {
                self.tokens = rate * BURST.as_secs_f64();
                self.refilled = Some(now);
            }
            self.rate = Some(self.rate.map_or(rate, |r| r.min(rate)));
            self.under = 0;
        } else if let Some(rate) = self.rate {
            let lift = self
                .last_over
                .is_none_or(|t| now.millis_since(t) >= LIFT_AFTER.as_millis() as i64);
            self.under = (self.under + 1).min(PROBE_MAX_STEPS);
            self.rate = (!lift).then_some(rate * (1.0 + PROBE * f64::from(self.under)));
            if lift {
                self.under = 0;
            }
        }
        self.sent = 0;
        self.refused = 0;
        self.period_start = Some(now);
    }

    /// How many of `wanted` items may go at `now` (taken at once by [`TableRate::took`]).
    pub fn available(&mut self, now: Timestamp, wanted: usize) -> usize {
        let Some(rate) = self.rate else {
            return wanted;
        };
        let burst = (rate * BURST.as_secs_f64()).max(1.0);
        if let Some(last) = self.refilled {
            let elapsed = now.millis_since(last).max(0) as f64 / 1000.0;
            self.tokens = (self.tokens + elapsed * rate).min(burst);
        }
        self.refilled = Some(now);
        (self.tokens.max(0.0).floor() as usize).min(wanted)
    }

    /// `n` items went.
    pub fn took(&mut self, n: usize) {
        if self.rate.is_some() {
            self.tokens -= n as f64;
        }
    }

    /// When the next item may go, if none may now.
    pub fn next_at(&self, now: Timestamp) -> Option<Timestamp> {
        let rate = self.rate?;
        let missing = (1.0 - self.tokens).max(0.0);
        let ms = (missing / rate * 1000.0).ceil().max(1.0);
        Some(now.saturating_add(Duration::from_millis(ms as u64)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(5_000_000 + ms)
    }

    #[test]
    fn engaged_near_what_the_table_accepts_probed_up_and_lifted() {
        let mut t = TableRate::for_table();
        t.answered(at(0), 0, 0);
        // 1,000 items in 100 ms, 20 % refused: accepted 8,000/s.
        t.answered(at(100), 1000, 200);
        let rate = t.rate().unwrap();
        assert!((8000.0..=8400.0).contains(&rate), "{rate}");
        // A period under the target probes up.
        t.answered(at(200), 800, 10);
        assert!(t.rate().unwrap() > rate);
        // Within a second at most about the rate goes.
        let mut sent = 0;
        for ms in 200..1200 {
            let n = t.available(at(ms), 25);
            t.took(n);
            sent += n;
        }
        assert!((sent as f64) < t.rate().unwrap() * 1.1, "{sent}");
        // No period over the target for LIFT_AFTER: lifted.
        for p in 3..60 {
            t.answered(at(p * 100), 100, 0);
        }
        assert_eq!(t.rate(), None);
        assert_eq!(t.available(at(7000), 25), 25);
    }

    #[test]
    fn a_few_refusals_engage_nothing() {
        let mut t = TableRate::for_table();
        for p in 0..50 {
            t.answered(at(p * 100), 1000, 30);
        }
        assert_eq!(t.rate(), None);
    }
}
