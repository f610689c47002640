//! The physical bound of a workload: the lag a sweeper with perfect knowledge would get on the
//! same store. It knows every key and TTL in advance and deletes each item the instant it is due,
//! oldest first, as fast as the store's capacity allows: a token bucket refilled at
//! `per_second` items/s, holding at most `burst_items` (the store's burst credit; full at the
//! start), plus `floor_ms`, the one round trip every delete needs. With integer TTLs every item
//! of a second is due at once, so the last of them waits about (items per second) / capacity:
//! no sweeper can do better, and a report states our lag as a ratio to this. A backlog (items
//! already expired at the start) gets the capacity the expiring items leave, and the time the
//! perfect sweeper takes to clear it is the bound of a catch-up's rate
//! ([`perfect_sweep_by_item`]).
//!
//! Writes by others during the run ([`AppWrite`]: the bench's TTL extensions and the accepted
//! writes of the application sharing the table, `bench --app-writes`) take the same capacity: each takes its write units from the buckets it writes at the instant it
//! was sent, ahead of the deletes waiting then, so the perfect sweeper meets the store as loaded
//! as ours did. Conditional deletes that fail (an item whose TTL was just extended) cost a write
//! unit on DynamoDB too, but a perfect sweeper never sends them: they are not counted.

use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::Duration;

/// What the store can do, as measured (DynamoDB Local) or configured (the simulator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreCapacity {
    /// Deletes per second, sustained.
    pub per_second: f64,
    /// Deletes the store takes at once on top of its rate (burst credit); 0 for none.
    pub burst_items: f64,
    /// The least time from a delete's sending to its commit, ms.
    pub floor_ms: f64,
    /// Where the figures come from, for the reader.
    pub source: String,
    /// The limit of each partition a delete writes (its table partition and its index
    /// partition), when the store has them and the run knows where each item lives: the
    /// perfect sweeper is held to it as well. An item expiring on a partition that is already
    /// at its limit waits, however idle the rest of the table is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<PartitionLimit>,
}

/// One partition's write limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionLimit {
    pub per_second: f64,
    pub burst_items: f64,
}

/// The perfect sweeper's lag over the workload's expiring items, and ours against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    pub capacity: StoreCapacity,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Our lag p99 / the bound's p99 (1.0: at the limit; `None` when the bound is 0).
    pub ratio_p99: Option<f64>,
    /// Our max lag / the bound's max.
    pub ratio_max: Option<f64>,
    /// The writes by others during the run ([`AppWrite`]) the perfect sweeper shared the store
    /// with, counted as capacity taken ahead of its deletes: the bench's TTL extensions and the
    /// application's accepted writes (`bench --app-writes`; refused ones took nothing).
    #[serde(default)]
    pub app_writes: u64,
}

/// An item the perfect sweeper deletes: when it expires, and the partitions its delete writes
/// (`None`: unknown or no limit of their own), each a token bucket of [`PartitionLimit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiring {
    pub ttl_ms: i64,
    /// The item's table partition and its index partition.
    pub partitions: [Option<u32>; 2],
}

impl Expiring {
    pub fn at(ttl_ms: i64) -> Self {
        Expiring {
            ttl_ms,
            partitions: [None; 2],
        }
    }
}

/// A write by others during the run (the bench extending a TTL, or the application sharing the
/// table writing an item): not an item with a lag, but capacity taken. It takes `units[0]` from the table-wide bucket and its table
/// partition's, and `units[1]` from its index partition's, at `at_ms`, the instant it was sent
/// (the attempt the store accepted), ahead of any delete waiting then: the application's writes
/// are not the sweeper's to reorder. The bucket may go below zero; the deletes then wait for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppWrite {
    pub at_ms: i64,
    /// The item's table partition and its index partition, as in [`Expiring`] (`None`: unknown
    /// or no limit of their own).
    pub partitions: [Option<u32>; 2],
    /// Write units taken from the table (table-wide and its table partition) and from its index
    /// partition (0 when the write leaves the index as it was).
    pub units: [u32; 2],
}

/// A token bucket on whole milliseconds: [`precise_ttl_core::bucket::Bucket`], which refills
/// a whole number of them exactly. Time moves in whole milliseconds, so it holds one step's
/// refill on top of its burst: a store slower than one delete a millisecond would otherwise
/// lose the fractions. It admits a token only when a whole one is there (no tolerance: the
/// bound's figures are exact).
///
/// Public so the engine's load tests can check it against the simulator's bucket and the
/// engine's partitioned test store: the bound is only a bound if it meters as they do.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    bucket: precise_ttl_core::bucket::Bucket,
    /// The instant (ms) the bucket was full at: its origin.
    origin: i64,
}

impl Bucket {
    /// Full (its burst, or one token) at `at`.
    pub fn full(per_second: f64, burst_items: f64, at: i64) -> Self {
        let per_second = per_second.max(1e-9);
        let burst = burst_items.max(1.0);
        let depth = burst + per_second / 1000.0;
        Bucket {
            bucket: precise_ttl_core::bucket::Bucket::holding(
                per_second,
                depth,
                burst,
                Duration::ZERO,
            ),
            origin: at,
        }
    }

    fn since_origin(&self, t: i64) -> Duration {
        Duration::from_millis(u64::try_from(t.saturating_sub(self.origin)).unwrap_or(0))
    }

    pub fn has_token(&self, t: i64) -> bool {
        self.available(t) >= 1.0
    }

    pub fn available(&self, t: i64) -> f64 {
        self.bucket.available(self.since_origin(t))
    }

    pub fn take(&mut self, t: i64) {
        self.take_units(t, 1.0);
    }

    /// Takes `units` tokens at `t`, room or not (an application's write the store took): the
    /// bucket may go below zero.
    pub fn take_units(&mut self, t: i64, units: f64) {
        self.bucket.take_at(self.since_origin(t), units);
    }
}

/// The perfect sweeper's lags (ms), one per item, in the order it deletes them. Millisecond by
/// millisecond it deletes due items oldest first while the store-wide bucket holds a token,
/// passing over an item whose table or index partition has none (all buckets full at the
/// start): partitions work in parallel, each at its own limit.
pub fn perfect_lags_of(items: &[Expiring], capacity: &StoreCapacity) -> Vec<f64> {
    perfect_lags_with_writes(items, &[], capacity)
}

/// [`perfect_lags_of`] on a store that also takes the application's `writes` (in any order).
pub fn perfect_lags_with_writes(
    items: &[Expiring],
    writes: &[AppWrite],
    capacity: &StoreCapacity,
) -> Vec<f64> {
    perfect_lags_indexed(items, writes, capacity)
        .into_iter()
        .map(|(_, lag)| lag)
        .collect()
}

/// The perfect sweeper's lag of each item, in `items`' order: a part of the workload (one
/// shard's items) is then judged against what the perfect sweeper did for that part while it
/// deleted the whole workload, store-wide limit shared.
pub fn perfect_lags_by_item(items: &[Expiring], capacity: &StoreCapacity) -> Vec<f64> {
    perfect_lags_by_item_with_writes(items, &[], capacity)
}

/// [`perfect_lags_by_item`] on a store that also takes the application's `writes`.
pub fn perfect_lags_by_item_with_writes(
    items: &[Expiring],
    writes: &[AppWrite],
    capacity: &StoreCapacity,
) -> Vec<f64> {
    perfect_sweep_by_item(items, None, writes, capacity).lags
}

/// (index in `items`, lag) of every item, in the order the perfect sweeper deletes them.
fn perfect_lags_indexed(
    all: &[Expiring],
    writes: &[AppWrite],
    capacity: &StoreCapacity,
) -> Vec<(usize, f64)> {
    perfect_sweep(all, None, writes, capacity).lags
}

/// A backlog beside the workload's expiring items: items already expired when the sweeper
/// starts, which the perfect sweeper knows from `from_ms` on (the sweeper's start).
#[derive(Debug, Clone, Copy)]
pub struct Backlog<'a> {
    pub items: &'a [Expiring],
    pub from_ms: i64,
}

/// What the perfect sweeper did for a workload and, when there is one, a backlog beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfectSweep {
    /// The lag of each expiring item, in `items`' order (as [`perfect_lags_by_item`]).
    pub lags: Vec<f64>,
    /// When it committed the last backlog item (epoch ms, its round trip included; `None`
    /// without a backlog).
    pub backlog_done_ms: Option<f64>,
}

/// The perfect sweeper over `items` and `backlog` on a store that also takes `writes`, in one
/// pass. It serves every expiring item first, the instant it is due (their lags are those
/// without the backlog), and gives the backlog only the capacity they leave, oldest first, each
/// partition at its own limit: a catch-up no sweeper clears sooner without making on-time items
/// late. A run's backlog rate is judged against it.
pub fn perfect_sweep_by_item(
    items: &[Expiring],
    backlog: Option<Backlog<'_>>,
    writes: &[AppWrite],
    capacity: &StoreCapacity,
) -> PerfectSweep {
    let sweep = perfect_sweep(items, backlog, writes, capacity);
    let mut lags = vec![0.0; items.len()];
    for (i, lag) in sweep.lags {
        lags[i] = lag;
    }
    PerfectSweep {
        lags,
        backlog_done_ms: sweep.backlog_done_ms,
    }
}

/// What [`perfect_sweep`] did.
struct Sweep {
    /// (index in `items`, lag) of every expiring item, in the order they were deleted.
    lags: Vec<(usize, f64)>,
    /// The instant the last backlog item was committed.
    backlog_done_ms: Option<f64>,
}

/// The perfect sweeper, millisecond by millisecond.
///
/// Waiting items are queued by their class (on time, then backlog) and the partitions they
/// write, oldest first (ties in `items`' order): when a queue's oldest item finds no room, none
/// behind it would, so each millisecond looks only at the queues' heads, on-time items before
/// backlog ones and oldest first. This is exact however long a hot partition's queue grows;
/// scanning all waiting items in TTL order (up to a fixed number a millisecond, as before) left
/// items on idle partitions unseen behind a long queue on a full one.
///
/// The application's writes due by each millisecond take their units first, each at its own
/// instant (the buckets refill lazily, so a write between two instants the loop visits is taken
/// when it happened). The store is idle and its buckets full at the first arrival (an item's TTL,
/// the backlog's start) or the first write, whichever is earliest.
fn perfect_sweep(
    all: &[Expiring],
    backlog: Option<Backlog<'_>>,
    writes: &[AppWrite],
    capacity: &StoreCapacity,
) -> Sweep {
    // Ranks: on-time items by TTL, then backlog items by TTL; `rank_of[r]` is (class, index).
    let mut ranked: Vec<(bool, usize)> = (0..all.len()).map(|i| (false, i)).collect();
    ranked.sort_by_key(|&(_, i)| all[i].ttl_ms);
    let backlog_items = backlog.map_or(&[][..], |b| b.items);
    let mut late: Vec<(bool, usize)> = (0..backlog_items.len()).map(|i| (true, i)).collect();
    late.sort_by_key(|&(_, i)| backlog_items[i].ttl_ms);
    ranked.extend(late);
    let item = |(is_backlog, i): (bool, usize)| {
        if is_backlog { backlog_items[i] } else { all[i] }
    };
    // When each rank becomes due: its TTL, or the backlog's start.
    let arrival = |r: usize| match ranked[r] {
        (true, _) => backlog.map_or(0, |b| b.from_ms),
        (false, i) => all[i].ttl_ms,
    };
    let mut arrivals: Vec<usize> = (0..ranked.len()).collect();
    arrivals.sort_by_key(|&r| (arrival(r), r));
    let Some(&first) = arrivals.first() else {
        return Sweep {
            lags: Vec::new(),
            backlog_done_ms: None,
        };
    };
    let mut writes = writes.to_vec();
    writes.sort_by_key(|w| w.at_ms);
    let mut t = arrival(first);
    if let Some(w) = writes.first() {
        t = t.min(w.at_ms);
    }
    let mut table = Bucket::full(capacity.per_second, capacity.burst_items, t);
    let start = t;
    let partition =
        |limit: &PartitionLimit| Bucket::full(limit.per_second, limit.burst_items, start);
    let mut partitions: [HashMap<u32, Bucket>; 2] = Default::default();
    let mut lags = Vec::with_capacity(all.len());
    let mut backlog_done_ms = None;
    // Without partition limits every item of a class is in one queue.
    let queue_key = |r: usize| {
        let (is_backlog, _) = ranked[r];
        match capacity.partition {
            Some(_) => (is_backlog, item(ranked[r]).partitions),
            None => (is_backlog, [None; 2]),
        }
    };
    let mut queue_of: HashMap<(bool, [Option<u32>; 2]), usize> = HashMap::new();
    // Each queue holds ranks; each non-empty queue's head is in `heads` once.
    let mut queues: Vec<VecDeque<usize>> = Vec::new();
    let mut heads: BinaryHeap<Reverse<(usize, usize)>> = BinaryHeap::new();
    let mut live = 0usize;
    let mut next = 0;
    let mut next_write = 0;
    loop {
        while let Some(w) = writes.get(next_write).filter(|w| w.at_ms <= t) {
            table.take_units(w.at_ms, f64::from(w.units[0]));
            if let Some(limit) = &capacity.partition {
                for (i, id) in w.partitions.iter().enumerate() {
                    if let Some(id) = id.filter(|_| w.units[i] > 0) {
                        partitions[i]
                            .entry(id)
                            .or_insert_with(|| partition(limit))
                            .take_units(w.at_ms, f64::from(w.units[i]));
                    }
                }
            }
            next_write += 1;
        }
        while next < arrivals.len() && arrival(arrivals[next]) <= t {
            let r = arrivals[next];
            let q = *queue_of.entry(queue_key(r)).or_insert_with(|| {
                queues.push(VecDeque::new());
                queues.len() - 1
            });
            if queues[q].is_empty() {
                heads.push(Reverse((r, q)));
            }
            queues[q].push_back(r);
            live += 1;
            next += 1;
        }
        let mut blocked = Vec::new();
        while table.has_token(t) {
            let Some(Reverse((r, q))) = heads.pop() else {
                break;
            };
            let it = item(ranked[r]);
            if let Some(limit) = &capacity.partition {
                let has_room = it.partitions.iter().enumerate().all(|(i, id)| {
                    id.is_none_or(|id| {
                        partitions[i]
                            .entry(id)
                            .or_insert_with(|| partition(limit))
                            .has_token(t)
                    })
                });
                if !has_room {
                    blocked.push(Reverse((r, q)));
                    continue;
                }
                for (i, id) in it.partitions.iter().enumerate() {
                    if let Some(b) = id.and_then(|id| partitions[i].get_mut(&id)) {
                        b.take(t);
                    }
                }
            }
            table.take(t);
            match ranked[r] {
                (false, i) => lags.push((i, (t - it.ttl_ms) as f64 + capacity.floor_ms)),
                (true, _) => backlog_done_ms = Some(t as f64 + capacity.floor_ms),
            }
            queues[q].pop_front();
            if let Some(&head) = queues[q].front() {
                heads.push(Reverse((head, q)));
            }
            live -= 1;
        }
        heads.extend(blocked);
        if live > 0 {
            t += 1;
        } else if next < arrivals.len() {
            t = arrival(arrivals[next]);
        } else {
            return Sweep {
                lags,
                backlog_done_ms,
            };
        }
    }
}

/// The bound over `items`, with our own p99 and max for the ratios.
pub fn bound(items: &[Expiring], capacity: &StoreCapacity, ours_p99: u64, ours_max: u64) -> Bound {
    bound_of_lags(
        perfect_lags_of(items, capacity),
        capacity,
        ours_p99,
        ours_max,
    )
}

/// The bound whose perfect lags are `lags` (from [`perfect_lags_of`] or a part of
/// [`perfect_lags_by_item`]), with our own p99 and max for the ratios.
pub fn bound_of_lags(
    mut lags: Vec<f64>,
    capacity: &StoreCapacity,
    ours_p99: u64,
    ours_max: u64,
) -> Bound {
    lags.sort_by(f64::total_cmp);
    let at = |q: f64| -> f64 {
        if lags.is_empty() {
            return 0.0;
        }
        let i = ((q * lags.len() as f64).ceil() as usize).clamp(1, lags.len()) - 1;
        lags[i]
    };
    let round = |v: f64| (v * 10.0).round() / 10.0;
    let ratio = |ours: u64, bound: f64| {
        (bound > 0.0).then(|| (ours as f64 / bound * 100.0).round() / 100.0)
    };
    let (p50, p99, max) = (at(0.5), at(0.99), at(1.0));
    Bound {
        capacity: capacity.clone(),
        p50_ms: round(p50),
        p99_ms: round(p99),
        max_ms: round(max),
        ratio_p99: ratio(ours_p99, p99),
        ratio_max: ratio(ours_max, max),
        app_writes: 0,
    }
}

#[cfg(test)]
mod tests;
