//! The store's clock, as the `Date` headers of its answers bound it.
//!
//! Every delete condition compares a TTL with "now"; if this host's clock runs ahead of the
//! store's, a condition can pass before the item's TTL by the store's time. A `Date` header
//! names the whole second in which the store wrote the answer, which came before the answer
//! arrived here; so `date − arrival` is a lower bound of the offset (store clock − host clock),
//! whatever the network did. The best of many answers (their arrivals fall at different points
//! of the store's second) is tight to about one answer's transit time. Using that lower bound
//! as the correction can only hold deletes back, never let them run ahead of the store's clock.
//!
//! Bounds age out after [`KEEP`] (a clock stepped by NTP is followed within that time).

use crate::Timestamp;
use std::collections::VecDeque;
use std::time::Duration;

/// Bounds are kept per bucket of arrival time, this long each.
const BUCKET_MS: i64 = 10_000;
/// How long a bound counts.
pub const KEEP: Duration = Duration::from_secs(300);

/// The best lower bound of (store clock − host clock), over the answers of the last [`KEEP`].
#[derive(Debug, Clone, Default)]
pub struct OffsetBound {
    /// (bucket of arrival, best bound in ms), oldest first.
    buckets: VecDeque<(i64, i64)>,
}

impl OffsetBound {
    pub fn new() -> Self {
        Self::default()
    }

    /// An answer dated `store_second` (epoch seconds, as the `Date` header says) arrived at
    /// `arrived` by this host's clock.
    pub fn observe(&mut self, store_second: i64, arrived: Timestamp) {
        let bound = store_second.saturating_mul(1000) - arrived.as_millis();
        let bucket = arrived.as_millis().div_euclid(BUCKET_MS);
        if self.buckets.back().is_some_and(|(b, _)| *b > bucket) {
            // This host's clock stepped back: the older bounds were taken on another clock.
            self.buckets.clear();
        }
        match self.buckets.back_mut() {
            Some((b, best)) if *b == bucket => *best = (*best).max(bound),
            _ => self.buckets.push_back((bucket, bound)),
        }
        self.expire(arrived);
    }

    fn expire(&mut self, now: Timestamp) {
        let oldest = Self::oldest_bucket(now);
        while self.buckets.front().is_some_and(|(b, _)| *b < oldest) {
            self.buckets.pop_front();
        }
    }

    fn oldest_bucket(now: Timestamp) -> i64 {
        (now.as_millis() - KEEP.as_millis() as i64).div_euclid(BUCKET_MS)
    }

    /// The lower bound of (store clock − host clock) in milliseconds, `None` before any answer
    /// (or after [`KEEP`] without one).
    pub fn offset_ms(&self, now: Timestamp) -> Option<i64> {
        let oldest = Self::oldest_bucket(now);
        self.buckets
            .iter()
            .filter(|(b, _)| *b >= oldest)
            .map(|(_, best)| *best)
            .max()
    }

    /// How far this host's clock may be ahead of the store's: what deletes are held back by.
    /// Zero when the host is known to be behind, or nothing is known.
    pub fn lead(&self, now: Timestamp) -> Duration {
        let offset = self.offset_ms(now).unwrap_or(0);
        Duration::from_millis(offset.min(0).unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T0: i64 = 1_800_000_000_000;

    /// An answer written by a store whose clock is `offset_ms` ahead of ours, `transit_ms` before
    /// it arrives at `arrived_ms` (host clock).
    fn answer(b: &mut OffsetBound, offset_ms: i64, arrived_ms: i64, transit_ms: i64) {
        let written_store_ms = arrived_ms - transit_ms + offset_ms;
        b.observe(
            written_store_ms.div_euclid(1000),
            Timestamp::from_millis(arrived_ms),
        );
    }

    #[test]
    fn a_host_five_seconds_ahead_is_held_back_at_least_five_seconds_from_the_first_answer() {
        let mut b = OffsetBound::new();
        answer(&mut b, -5_000, T0 + 420, 3);
        let lead = b.lead(Timestamp::from_millis(T0 + 420));
        assert!(lead >= Duration::from_secs(5), "{lead:?}");
        assert!(lead < Duration::from_secs(6), "{lead:?}");
    }

    #[test]
    fn answers_at_many_points_of_the_second_tighten_the_bound_to_the_transit_time() {
        let mut b = OffsetBound::new();
        for i in 0..200 {
            answer(&mut b, 0, T0 + i * 37, 2);
        }
        let now = Timestamp::from_millis(T0 + 200 * 37);
        let lead = b.lead(now);
        assert!(lead <= Duration::from_millis(40), "{lead:?}");
        assert!(b.offset_ms(now).unwrap() <= 0);
    }

    #[test]
    fn a_host_behind_the_store_is_not_held_back() {
        let mut b = OffsetBound::new();
        for i in 0..50 {
            answer(&mut b, 3_000, T0 + i * 71, 2);
        }
        assert_eq!(b.lead(Timestamp::from_millis(T0 + 4_000)), Duration::ZERO);
    }

    #[test]
    fn bounds_age_out_and_a_clock_stepped_back_starts_afresh() {
        let mut b = OffsetBound::new();
        answer(&mut b, -5_000, T0, 1);
        let later = T0 + KEEP.as_millis() as i64 + 2 * BUCKET_MS;
        assert_eq!(b.offset_ms(Timestamp::from_millis(later)), None);
        answer(&mut b, 0, later, 1);
        assert!(b.lead(Timestamp::from_millis(later)) <= Duration::from_secs(1));
        // Stepped back an hour: only the new answers count.
        answer(&mut b, -2_000, later - 3_600_000, 1);
        let lead = b.lead(Timestamp::from_millis(later - 3_600_000));
        assert!(lead >= Duration::from_secs(2), "{lead:?}");
    }

    proptest! {
        /// Whatever the offset, transit times and arrival points, the bound never exceeds the
        /// true offset: the corrected clock never runs ahead of the store's.
        #[test]
        fn the_bound_never_exceeds_the_true_offset(
            offset_ms in -20_000i64..20_000,
            answers in proptest::collection::vec((0i64..600_000, 0i64..500), 1..60),
        ) {
            let mut b = OffsetBound::new();
            let mut arrivals: Vec<(i64, i64)> = answers;
            arrivals.sort();
            for (at, transit) in &arrivals {
                answer(&mut b, offset_ms, T0 + at, *transit);
            }
            let now = Timestamp::from_millis(T0 + arrivals.last().unwrap().0);
            if let Some(bound) = b.offset_ms(now) {
                prop_assert!(bound <= offset_ms, "bound {} > offset {}", bound, offset_ms);
            }
        }
    }
}
