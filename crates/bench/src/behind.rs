//! How fast the sweeper deleted while it was behind: a load above what the store takes must
//! still be deleted at the store's rate, and this is the figure that says whether it was.
//!
//! Definition. The sweeper is *behind* at instant `t` when some item that must be deleted has
//! been due for more than [`BEHIND_AFTER_MS`] at `t` and is not yet deleted: each such item
//! contributes the interval from `max(TTL + BEHIND_AFTER_MS, run start)` to the instant its
//! REMOVE record was seen (the run's end when it never was). The union of these intervals is the
//! time behind, possibly several periods; the rate is the deletions seen inside them (first
//! removals of expiring and backlog items, whatever their own lag) over their total length.
//! Both ends of a period are moments the sweeper was surely busy: it starts when an item still
//! waiting crosses the threshold, it ends with a late item's deletion. The ramp-up before the
//! queue grows and the idle time after it drains are left out, so the rate is neither diluted by
//! seconds with nothing to delete nor flattered by picking the best seconds.

use serde::{Deserialize, Serialize};

/// An item waiting longer than this (ms) past its TTL means the sweeper is behind. One second:
/// with whole-second TTLs a store that keeps up clears each second's items within that second,
/// so only a growing queue waits longer.
pub const BEHIND_AFTER_MS: i64 = 1000;

/// A period is too short to be a rate under this many seconds in all.
const RATE_NEEDS_S: f64 = 1.0;

/// The sweeper's deletion rate while it was behind (see the module's definition).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Behind {
    /// The threshold: an item due longer than this without being deleted (ms).
    pub waited_over_ms: i64,
    /// When the first period began, epoch ms.
    pub from_ms: i64,
    /// When the last period ended (the last late item's deletion, or the run's end when one was
    /// never deleted), epoch ms.
    pub to_ms: i64,
    /// How many separate periods (the sweeper caught up in between).
    pub periods: u64,
    /// Their total length: the time the sweeper was behind, in seconds.
    pub seconds: f64,
    /// Deletions of expiring and backlog items seen inside the periods.
    pub deletions: u64,
    /// `deletions / seconds`; `None` when the periods add up to less than one second, too short
    /// for a rate.
    pub deletions_per_second: Option<f64>,
    /// The store's raw delete rate in PartiQL batches, measured in the same run; `None` when the
    /// run did not measure it (the simulator).
    pub raw_batch_per_s: Option<f64>,
    /// `deletions_per_second / raw_batch_per_s` (1.0: as fast as the store deletes when nothing
    /// else runs).
    pub ratio_to_raw: Option<f64>,
}

/// One item that must be deleted: its TTL and when its deletion was seen (`None`: never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    pub ttl_ms: i64,
    pub seen_ms: Option<i64>,
}

/// The rate while behind over `due` (every item that must be deleted), `deletions` the instants
/// of their first removals (any order). `None` when no item ever waited longer than
/// [`BEHIND_AFTER_MS`].
pub fn behind(
    due: &[Due],
    deletions: &[i64],
    run_started_ms: i64,
    run_ended_ms: i64,
    raw_batch_per_s: Option<f64>,
) -> Option<Behind> {
    let periods = periods(due, run_started_ms, run_ended_ms);
    let (first, last) = (periods.first()?.0, periods.last()?.1);
    let mut deletions = deletions.to_vec();
    deletions.sort_unstable();
    let inside: usize = periods
        .iter()
        .map(|&(from, to)| {
            deletions.partition_point(|&t| t <= to) - deletions.partition_point(|&t| t < from)
        })
        .sum();
    let seconds = periods.iter().map(|(f, t)| (t - f) as f64).sum::<f64>() / 1000.0;
    let rate = (seconds >= RATE_NEEDS_S).then(|| inside as f64 / seconds);
    let round2 = |x: f64| (x * 100.0).round() / 100.0;
    Some(Behind {
        waited_over_ms: BEHIND_AFTER_MS,
        from_ms: first,
        to_ms: last,
        periods: periods.len() as u64,
        seconds,
        deletions: inside as u64,
        deletions_per_second: rate.map(|r| (r * 10.0).round() / 10.0),
        raw_batch_per_s,
        ratio_to_raw: match (rate, raw_batch_per_s) {
            (Some(r), Some(raw)) if raw > 0.0 => Some(round2(r / raw)),
            _ => None,
        },
    })
}

/// The periods the sweeper was behind (see the module's definition), sorted and disjoint,
/// `(from, to)` in epoch ms; empty when it never was.
pub fn periods(due: &[Due], run_started_ms: i64, run_ended_ms: i64) -> Vec<(i64, i64)> {
    let mut late: Vec<(i64, i64)> = due
        .iter()
        .filter_map(|d| {
            let from = (d.ttl_ms + BEHIND_AFTER_MS).max(run_started_ms);
            let to = d.seen_ms.unwrap_or(run_ended_ms.max(from));
            (to > from).then_some((from, to))
        })
        .collect();
    late.sort_unstable();
    let mut periods: Vec<(i64, i64)> = Vec::new();
    for (from, to) in late {
        match periods.last_mut() {
            Some(last) if from <= last.1 => last.1 = last.1.max(to),
            _ => periods.push((from, to)),
        }
    }
    periods
}

#[cfg(test)]
mod tests {
    use super::*;

    fn due(ttl_ms: i64, seen_ms: i64) -> Due {
        Due {
            ttl_ms,
            seen_ms: Some(seen_ms),
        }
    }

    #[test]
    fn a_sweeper_that_keeps_up_is_never_behind() {
        let items: Vec<Due> = (0..1000).map(|i| due(i * 10, i * 10 + 999)).collect();
        let seen: Vec<i64> = items.iter().filter_map(|d| d.seen_ms).collect();
        assert_eq!(behind(&items, &seen, 0, 20_000, Some(500.0)), None);
    }

    #[test]
    fn over_capacity_the_rate_is_the_store_rate_while_items_wait_too_long() {
        // 1 300 items due at each of 10 whole seconds, deleted one by one at 1 000/s from the
        // first TTL on: the queue grows by 300 a second, the 13 000th deletion ends at 13 s.
        let mut items = Vec::new();
        let mut k = 0i64;
        for s in 0..10 {
            for _ in 0..1300 {
                items.push(due(s * 1000, k));
                k += 1;
            }
        }
        let seen: Vec<i64> = items.iter().filter_map(|d| d.seen_ms).collect();
        let b = behind(&items, &seen, -500, 20_000, Some(1000.0)).unwrap();
        // Second s's last items wait past 1 s from 1 000 s + 1 000 ms on while the carried-over
        // queue is under a second's worth (s < 4): [1.0, 1.3], [2.0, 2.6], [3.0, 3.9] s; from
        // 4 s on, without a gap, to the last deletion.
        assert_eq!(b.periods, 4, "{b:?}");
        assert_eq!((b.from_ms, b.to_ms), (1000, 12_999));
        assert_eq!(b.deletions, 300 + 600 + 900 + 9000);
        let rate = b.deletions_per_second.unwrap();
        assert!((rate - 1000.0).abs() < 1.0, "{b:?}");
        assert_eq!(b.ratio_to_raw, Some(1.0));
    }

    #[test]
    fn separate_periods_add_up_and_the_gap_between_them_is_left_out() {
        // Two late bursts, 2 s each, 10 s apart; 100 deletions in each, 500 in between.
        let mut items = Vec::new();
        for (ttl, from) in [(0, 1000), (10_000, 11_000)] {
            for i in 0..100 {
                items.push(due(ttl, from + 20 * (i + 1)));
            }
        }
        let mut seen: Vec<i64> = items.iter().filter_map(|d| d.seen_ms).collect();
        seen.extend((0..500).map(|i| 3100 + i * 10));
        let b = behind(&items, &seen, 0, 20_000, None).unwrap();
        assert_eq!(b.periods, 2);
        assert_eq!((b.from_ms, b.to_ms), (1000, 13_000));
        assert_eq!(b.seconds, 4.0);
        assert_eq!(b.deletions, 200);
        assert_eq!(b.deletions_per_second, Some(50.0));
        assert_eq!(b.ratio_to_raw, None, "no raw rate measured");
    }

    #[test]
    fn an_item_never_deleted_keeps_the_sweeper_behind_to_the_end() {
        let items = [
            Due {
                ttl_ms: 0,
                seen_ms: None,
            },
            due(0, 500),
        ];
        let b = behind(&items, &[500], 0, 5000, Some(100.0)).unwrap();
        assert_eq!((b.from_ms, b.to_ms, b.deletions), (1000, 5000, 0));
        assert_eq!(b.deletions_per_second, Some(0.0));
        assert_eq!(b.ratio_to_raw, Some(0.0));
    }

    #[test]
    fn a_backlog_is_behind_from_the_run_start_and_a_blip_is_too_short_for_a_rate() {
        let backlog = [due(-60_000, 5000), due(-60_000, 5500)];
        let b = behind(&backlog, &[5000, 5500], 2000, 9000, Some(1000.0)).unwrap();
        assert_eq!((b.from_ms, b.to_ms, b.seconds), (2000, 5500, 3.5));
        let blip = behind(&[due(0, 1200)], &[1200], 0, 9000, Some(1000.0)).unwrap();
        assert_eq!((blip.seconds, blip.deletions), (0.2, 1));
        assert_eq!((blip.deletions_per_second, blip.ratio_to_raw), (None, None));
    }
}
