//! The backlog's budget: how fast items that are already late may be deleted, so that a
//! catch-up takes only the write capacity the application leaves.
//!
//! Native TTL deletes cost no write capacity; ours do, on the same table and index partitions
//! the application writes to, and a partition over its limit refuses the application's writes
//! as well as ours. On-time items are few (the table's expiry rate) and must go at once; the
//! backlog can be millions of items after an outage and can wait. So the backlog alone is
//! budgeted:
//! - **A ceiling**: a share of the table's write capacity (provisioned, the on-demand maximum,
//!   or AWS's default per-table limit), which the user sets. The application's own use is not
//!   visible to a client in real time (CloudWatch reports by the minute), so the ceiling is
//!   what a user can promise, and the refusals below are what the table says.
//! - **Refusals cut it**: any refusal while the budget is in use (of a backlog request or an
//!   on-time one: both say a partition is full) multiplies the rate by [`CUT`] and holds it for
//!   [`HOLD`]; it then grows back by [`GROWTH`] of the ceiling per second. The rate settles
//!   below the point where partitions refuse, where the application's writes are refused
//!   only at the rare moments the budget probes past it.

use crate::time::Timestamp;
use std::time::Duration;

/// The share of the rate a refusal leaves (multiplicative decrease). A refusal means some
/// partition is full and the application's writes there are refused too. Chosen on the
/// simulator with the application at half the table (docs/benchmarks.md, "A good neighbour"):
/// halving, then a quarter off, left the backlog's rate well under the refusal point for most of
/// each cycle; a tenth off keeps it near that point while the application's refusals stay under
/// the 0.1 % aimed at.
pub(crate) const CUT: f64 = 0.9;
/// After a cut, the rate does not grow for this long: refusals of requests already in flight
/// answer the same excess, and a cut only counts once per hold.
const HOLD: Duration = Duration::from_secs(1);
/// Each second after the hold, the rate grows by this share of the rate it was cut from (additive
/// increase; of the ceiling before any cut): back in about 9 s, so probes past the refusal point
/// are a few a minute at most. The step follows where refusals were met, not the ceiling: on an
/// on-demand table without a maximum the ceiling is half of AWS's default 40,000/s, far above
/// what the table's partitions may take, and a step of the ceiling would overshoot at every
/// probe.
const GROWTH: f64 = 0.03;
/// The share of the ceiling the budget starts at, growing from there as after a cut (slow start):
/// a catch-up that began at the ceiling would meet the application's writes with its whole
/// excess at once, where the ceiling is far above what the partitions take (an on-demand table
/// without a maximum: half of AWS's default 40,000/s), and cut after cut to come down.
const START: f64 = 0.25;
/// Tokens the budget may spend at once: about one request at the rates worth budgeting.
const BURST: Duration = Duration::from_millis(20);
/// Never below this (items/s): the backlog keeps moving, and keeps probing.
pub const MIN_BACKLOG_RATE: f64 = 10.0;

#[derive(Debug, Clone, PartialEq)]
pub struct BacklogBudget {
    /// The most the backlog may send (items/s); `None`: no budget.
    ceiling: Option<f64>,
    rate: f64,
    tokens: f64,
    refilled: Option<Timestamp>,
    last_cut: Option<Timestamp>,
    /// The rate the last cut was made from: where refusals were met.
    cut_from: Option<f64>,
    cuts: u64,
}

impl BacklogBudget {
    /// A budget with this ceiling (items/s); `None`: unlimited.
    pub fn new(ceiling: Option<f64>) -> Self {
        let ceiling = ceiling.map(|c| c.max(MIN_BACKLOG_RATE));
        BacklogBudget {
            ceiling,
            rate: ceiling.map_or(f64::INFINITY, |c| (c * START).max(MIN_BACKLOG_RATE)),
            tokens: 0.0,
            refilled: None,
            last_cut: None,
            cut_from: None,
            cuts: 0,
        }
    }

    /// The current rate (items/s), `None` without a budget.
    pub fn rate(&self) -> Option<f64> {
        self.ceiling.map(|_| self.rate)
    }

    /// The ceiling (items/s), `None` without a budget.
    pub fn ceiling(&self) -> Option<f64> {
        self.ceiling
    }

    /// Cuts so far.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// A refusal (or a timeout) came back at `now` while backlog items were in flight or
    /// waiting.
    pub fn refused(&mut self, now: Timestamp) {
        if self.ceiling.is_none() {
            return;
        }
        self.grow(now);
        // One cut per hold: the refusals of requests sent before the cut answer the old rate.
        if self
            .last_cut
            .is_some_and(|t| now.millis_since(t) < HOLD.as_millis() as i64)
        {
            return;
        }
        self.cut_from = Some(self.rate);
        self.rate = (self.rate * CUT).max(MIN_BACKLOG_RATE);
        self.tokens = self.tokens.min(self.burst());
        self.last_cut = Some(now);
        self.cuts += 1;
    }

    /// How many of `wanted` backlog items may go at `now` (take them with
    /// [`BacklogBudget::took`]).
    pub fn available(&mut self, now: Timestamp, wanted: usize) -> usize {
        if self.ceiling.is_none() {
            return wanted;
        }
        self.grow(now);
        (self.tokens.max(0.0).floor() as usize).min(wanted)
    }

    /// `n` backlog items went.
    pub fn took(&mut self, n: usize) {
        if self.ceiling.is_some() {
            self.tokens -= n as f64;
        }
    }

    /// When the next backlog item may go, if none may now.
    pub fn next_at(&self, now: Timestamp) -> Option<Timestamp> {
        self.ceiling?;
        let missing = (1.0 - self.tokens).max(0.0);
        let ms = (missing / self.rate * 1000.0).ceil().max(1.0);
        Some(now.saturating_add(Duration::from_millis(ms as u64)))
    }

    fn burst(&self) -> f64 {
        (self.rate * BURST.as_secs_f64()).max(1.0)
    }

    /// Refills the tokens and, past the hold, grows the rate, up to `now`.
    fn grow(&mut self, now: Timestamp) {
        let Some(ceiling) = self.ceiling else {
            return;
        };
        let Some(last) = self.refilled.replace(now) else {
            self.tokens = self.burst();
            return;
        };
        let elapsed = now.millis_since(last).max(0) as f64 / 1000.0;
        let growing_since = self
            .last_cut
            .map(|t| t.saturating_add(HOLD))
            .map_or(last, |t| t.max(last));
        let growing = now.millis_since(growing_since).max(0) as f64 / 1000.0;
        let step = GROWTH * self.cut_from.unwrap_or(ceiling);
        self.rate = (self.rate + growing * step).min(ceiling);
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(7_000_000 + ms)
    }

    /// Items the budget lets go from `from` to `to`, asking every millisecond.
    fn sent(b: &mut BacklogBudget, from: i64, to: i64) -> usize {
        let mut n = 0;
        for ms in from..to {
            let k = b.available(at(ms), 25);
            b.took(k);
            n += k;
        }
        n
    }

    #[test]
    fn no_ceiling_means_no_limit() {
        let mut b = BacklogBudget::new(None);
        assert_eq!(b.available(at(0), 25), 25);
        b.refused(at(1));
        assert_eq!(b.available(at(2), 25), 25);
        assert_eq!(b.rate(), None);
    }

    #[test]
    fn it_starts_at_a_quarter_and_grows_to_the_ceiling_without_refusals() {
        let mut b = BacklogBudget::new(Some(2_000.0));
        // The first second: from 500/s, +60/s each second.
        let first = sent(&mut b, 0, 1_000);
        assert!((500..=560).contains(&first), "{first}");
        // At the ceiling after 25 s; then 10 s at 2,000/s, give or take the burst.
        sent(&mut b, 1_000, 30_000);
        let n = sent(&mut b, 30_000, 40_000);
        assert!((19_900..=20_100).contains(&n), "{n}");
    }

    #[test]
    fn a_refusal_cuts_the_rate_holds_it_and_it_grows_back() {
        let mut b = BacklogBudget::new(Some(2_000.0));
        sent(&mut b, 0, 30_000);
        assert_eq!(b.rate(), Some(2_000.0));
        b.refused(at(30_000));
        let cut = 2_000.0 * CUT;
        assert_eq!(b.rate(), Some(cut));
        // Refusals within the hold answer the old rate: no second cut.
        b.refused(at(30_500));
        assert_eq!(b.rate(), Some(cut));
        let held = sent(&mut b, 30_000, 31_000) as f64;
        assert!((held - cut).abs() <= 50.0, "{held}");
        // After the hold, +3 % of the rate it was cut from (60/s) per second.
        sent(&mut b, 31_000, 33_000);
        let rate = b.rate().unwrap();
        assert!((rate - (cut + 120.0)).abs() <= 10.0, "{rate}");
        sent(&mut b, 36_000, 90_000);
        assert_eq!(b.rate(), Some(2_000.0));
        assert_eq!(b.cuts(), 1);
    }

    #[test]
    fn growth_follows_where_refusals_were_met_not_a_far_ceiling() {
        // On demand without a maximum: a ceiling of 20,000/s, refusals near 4,000/s.
        let mut b = BacklogBudget::new(Some(20_000.0));
        let mut t = 0;
        while b.rate().unwrap() > 4_000.0 {
            b.refused(at(t));
            t += 1_000;
        }
        let cut_from = b.cut_from.unwrap();
        b.refused(at(t));
        let after_cut = b.rate().unwrap();
        assert_eq!(after_cut, b.cut_from.unwrap() * CUT);
        // Held 1 s, then +3 % of the rate it was cut from, per second: not 600/s.
        sent(&mut b, t, t + 6_000);
        let grown = b.rate().unwrap() - after_cut;
        let step = 0.03 * b.cut_from.unwrap();
        assert!((grown - 5.0 * step).abs() < step * 0.1, "{grown} {step}");
        assert!(cut_from > b.cut_from.unwrap());
    }

    #[test]
    fn repeated_refusals_never_stop_the_backlog() {
        let mut b = BacklogBudget::new(Some(1_000.0));
        for s in 0..100 {
            b.refused(at(s * 1_000));
        }
        assert_eq!(b.rate(), Some(MIN_BACKLOG_RATE));
        assert!(b.next_at(at(100_000)).is_some());
        assert!(sent(&mut b, 100_000, 101_000) >= 10);
    }
}
