//! The physical bound of a workload: the lag a sweeper with perfect knowledge would get on the
//! same store. It knows every key and TTL in advance and deletes each item the instant it is due,
//! oldest first, as fast as the store's capacity allows: a token bucket refilled at
//! `per_second` items/s, holding at most `burst_items` (the store's burst credit; full at the
//! start), plus `floor_ms`, the one round trip every delete needs. With integer TTLs every item
//! of a second is due at once, so the last of them waits about (items per second) / capacity:
//! no sweeper can do better, and a report states our lag as a ratio to this.
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
    let mut lags = vec![0.0; items.len()];
    for (i, lag) in perfect_lags_indexed(items, writes, capacity) {
        lags[i] = lag;
    }
    lags
}

/// (index in `items`, lag) of every item, in the order the perfect sweeper deletes them.
///
/// Waiting items are queued by the partitions they write, oldest first (ties in `items`'
/// order): when a queue's oldest item finds no room, none behind it would, so each millisecond
/// looks only at the queues' heads, oldest first. This is exact however long a hot partition's
/// queue grows; scanning all waiting items in TTL order (up to a fixed number a millisecond, as
/// before) left items on idle partitions unseen behind a long queue on a full one.
///
/// The application's writes due by each millisecond take their units first, each at its own
/// instant (the buckets refill lazily, so a write between two instants the loop visits is taken
/// when it happened). The store is idle and its buckets full at the first item's TTL or the
/// first write, whichever is earlier.
fn perfect_lags_indexed(
    all: &[Expiring],
    writes: &[AppWrite],
    capacity: &StoreCapacity,
) -> Vec<(usize, f64)> {
    let mut order: Vec<usize> = (0..all.len()).collect();
    order.sort_by_key(|&i| all[i].ttl_ms);
    let Some(&first) = order.first() else {
        return Vec::new();
    };
    let mut writes = writes.to_vec();
    writes.sort_by_key(|w| w.at_ms);
    let mut t = all[first].ttl_ms;
    if let Some(w) = writes.first() {
        t = t.min(w.at_ms);
    }
    let mut table = Bucket::full(capacity.per_second, capacity.burst_items, t);
    let start = t;
    let partition =
        |limit: &PartitionLimit| Bucket::full(limit.per_second, limit.burst_items, start);
    let mut partitions: [HashMap<u32, Bucket>; 2] = Default::default();
    let mut lags = Vec::with_capacity(all.len());
    // Without partition limits every item is in one queue.
    let queue_key = |e: &Expiring| match capacity.partition {
        Some(_) => e.partitions,
        None => [None; 2],
    };
    let mut queue_of: HashMap<[Option<u32>; 2], usize> = HashMap::new();
    // Each queue holds positions in `order`; each non-empty queue's head is in `heads` once.
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
        while next < order.len() && all[order[next]].ttl_ms <= t {
            let q = *queue_of
                .entry(queue_key(&all[order[next]]))
                .or_insert_with(|| {
                    queues.push(VecDeque::new());
                    queues.len() - 1
                });
            if queues[q].is_empty() {
                heads.push(Reverse((next, q)));
            }
            queues[q].push_back(next);
            live += 1;
            next += 1;
        }
        let mut blocked = Vec::new();
        while table.has_token(t) {
            let Some(Reverse((pos, q))) = heads.pop() else {
                break;
            };
            let item = all[order[pos]];
            if let Some(limit) = &capacity.partition {
                let has_room = item.partitions.iter().enumerate().all(|(i, id)| {
                    id.is_none_or(|id| {
                        partitions[i]
                            .entry(id)
                            .or_insert_with(|| partition(limit))
                            .has_token(t)
                    })
                });
                if !has_room {
                    blocked.push(Reverse((pos, q)));
                    continue;
                }
                for (i, id) in item.partitions.iter().enumerate() {
                    if let Some(b) = id.and_then(|id| partitions[i].get_mut(&id)) {
                        b.take(t);
                    }
                }
            }
            table.take(t);
            lags.push((order[pos], (t - item.ttl_ms) as f64 + capacity.floor_ms));
            queues[q].pop_front();
            if let Some(&head) = queues[q].front() {
                heads.push(Reverse((head, q)));
            }
            live -= 1;
        }
        heads.extend(blocked);
        if live > 0 {
            t += 1;
        } else if next < order.len() {
            t = all[order[next]].ttl_ms;
        } else {
            return lags;
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
mod tests {
    use super::*;

    fn capacity(per_second: f64, burst_items: f64) -> StoreCapacity {
        StoreCapacity {
            per_second,
            burst_items,
            floor_ms: 0.0,
            source: "test".into(),
            partition: None,
        }
    }

    /// A table of 10 000/s with `burst_items` of credit, each partition of it held to 1 000/s
    /// without burst: where the partitions' limits are the ones that bite.
    fn partition_limited(burst_items: f64) -> StoreCapacity {
        StoreCapacity {
            partition: Some(PartitionLimit {
                per_second: 1000.0,
                burst_items: 0.0,
            }),
            ..capacity(10_000.0, burst_items)
        }
    }

    fn at(ttls: &[i64]) -> Vec<Expiring> {
        ttls.iter().map(|t| Expiring::at(*t)).collect()
    }

    /// `each` items due at each of the first `seconds` whole seconds.
    fn each_second(seconds: i64, each: usize) -> Vec<Expiring> {
        let ttls: Vec<i64> = (0..seconds)
            .flat_map(|s| std::iter::repeat_n(s * 1000, each))
            .collect();
        at(&ttls)
    }

    #[test]
    fn integer_ttls_wait_for_their_seconds_burst_to_drain() {
        // 500 items due at each of 10 whole seconds, a store of 1 000/s: the last of each
        // second waits 0.5 s, the first none.
        let b = bound(&each_second(10, 500), &capacity(1000.0, 0.0), 600, 700);
        assert!((b.max_ms - 499.0).abs() < 1.5, "{b:?}");
        assert!((b.p50_ms - 250.0).abs() < 2.0, "{b:?}");
        assert_eq!(b.ratio_max, Some(1.4));
    }

    #[test]
    fn fractional_ttls_below_capacity_wait_for_nothing_but_the_round_trip() {
        let ttls: Vec<i64> = (0..5000).map(|i| i * 2).collect(); // 500/s
        let c = StoreCapacity {
            floor_ms: 4.0,
            ..capacity(1000.0, 0.0)
        };
        let b = bound(&at(&ttls), &c, 8, 12);
        assert_eq!((b.p50_ms, b.p99_ms, b.max_ms), (4.0, 4.0, 4.0));
        assert_eq!(b.ratio_p99, Some(2.0));
    }

    #[test]
    fn burst_credit_absorbs_a_burst_up_to_its_size() {
        let ttls = vec![0; 1500];
        let lags = perfect_lags_of(&at(&ttls), &capacity(1000.0, 1000.0));
        assert_eq!(lags.iter().filter(|&&l| l == 0.0).count(), 1000);
        assert!((lags[1499] - 500.0).abs() < 1.5, "{}", lags[1499]);
    }

    #[test]
    fn over_capacity_the_queue_grows_and_the_bound_says_so() {
        // 2 000/s for 5 s on a 1 000/s store: the last item waits about 5 s.
        let ttls: Vec<i64> = (0..10_000).map(|i| i / 2).collect();
        let b = bound(&at(&ttls), &capacity(1000.0, 0.0), 0, 0);
        assert!((b.max_ms - 5000.0).abs() < 5.0, "{b:?}");
        assert_eq!(b.ratio_p99, Some(0.0));
    }

    #[test]
    fn a_partition_at_its_limit_holds_its_items_back_however_idle_the_table() {
        // 1 500/s on a 10 000/s table, all of it on one partition of 1 000/s, for 2 s: the
        // partition falls 500 behind each second. Spread over two partitions: no wait.
        let limited = partition_limited(0.0);
        let one: Vec<Expiring> = (0..3000)
            .map(|i| Expiring {
                ttl_ms: i * 2 / 3,
                partitions: [Some(7), None],
            })
            .collect();
        let b = bound(&one, &limited, 0, 0);
        assert!((b.max_ms - 1000.0).abs() < 5.0, "{b:?}");
        let two: Vec<Expiring> = one
            .iter()
            .enumerate()
            .map(|(i, e)| Expiring {
                partitions: [Some(i as u32 % 2), Some(3)],
                ..*e
            })
            .collect();
        let index_limited = bound(&two, &limited, 0, 0);
        assert!(
            (index_limited.max_ms - 1000.0).abs() < 5.0,
            "the index partition (3) holds them all: {index_limited:?}"
        );
        let spread: Vec<Expiring> = one
            .iter()
            .enumerate()
            .map(|(i, e)| Expiring {
                partitions: [Some(i as u32 % 2), Some(i as u32 % 2)],
                ..*e
            })
            .collect();
        assert!(bound(&spread, &limited, 0, 0).max_ms < 2.0);
    }

    #[test]
    fn a_store_slower_than_one_delete_a_millisecond_keeps_its_rate() {
        // 600 items due at each of 5 seconds on a 647/s store: each second's burst drains in
        // 0.93 s, no queue carries over.
        let b = bound(&each_second(5, 600), &capacity(647.0, 0.0), 0, 0);
        assert!((b.max_ms - 926.0).abs() < 3.0, "{b:?}");
    }

    #[test]
    fn lags_by_item_are_the_same_lags_in_the_items_order() {
        // Two partitions, one over its limit; the input out of TTL order.
        let limited = partition_limited(0.0);
        let items: Vec<Expiring> = (0..4000i64)
            .rev()
            .map(|i| Expiring {
                ttl_ms: i / 2,
                partitions: [None, Some((i % 4 == 0) as u32)],
            })
            .collect();
        let by_item = perfect_lags_by_item(&items, &limited);
        let mut sorted = by_item.clone();
        sorted.sort_by(f64::total_cmp);
        let mut in_order = perfect_lags_of(&items, &limited);
        in_order.sort_by(f64::total_cmp);
        assert_eq!(sorted, in_order);
        // Partition 1 takes 500/s: it waits only for the table's first token (1 ms). Partition
        // 0 takes 1 500/s at 1 000/s: 500 a second behind.
        let worst = |p: u32| {
            items
                .iter()
                .zip(&by_item)
                .filter(|(e, _)| e.partitions[1] == Some(p))
                .map(|(_, l)| *l)
                .fold(0.0, f64::max)
        };
        assert!(worst(1) <= 1.0, "{}", worst(1));
        assert!((worst(0) - 1000.0).abs() < 5.0, "{}", worst(0));
    }

    #[test]
    fn the_applications_writes_on_a_partition_at_its_limit_hold_its_deletes_back() {
        // Partition 7 takes 1 000/s of deletes at its limit of 1 000/s for 2 s; the application
        // writes 200 more to it (2 index units each) over the first second. Without them no
        // delete waits; with them the partition runs 400 units behind, and its deletes wait
        // about 0.4 s. The same writes on partition 8, where nothing expires, change nothing
        // (the table has burst credit to spare: its own bucket is not what is tested here).
        let limited = partition_limited(1000.0);
        let items: Vec<Expiring> = (0..2000)
            .map(|i| Expiring {
                ttl_ms: i,
                partitions: [Some(i as u32 % 4), Some(7)],
            })
            .collect();
        let on = |index: u32| -> Vec<AppWrite> {
            (0..200)
                .map(|i| AppWrite {
                    at_ms: i * 5,
                    partitions: [Some(100 + i as u32 % 4), Some(index)],
                    units: [1, 2],
                })
                .collect()
        };
        let max = |lags: Vec<f64>| lags.into_iter().fold(0.0, f64::max);
        let without = perfect_lags_by_item(&items, &limited);
        assert!(max(without.clone()) <= 1.0, "{}", max(without.clone()));
        let with = perfect_lags_by_item_with_writes(&items, &on(7), &limited);
        assert!(
            (max(with.clone()) - 400.0).abs() < 5.0,
            "{}",
            max(with.clone())
        );
        assert!(with.iter().zip(&without).all(|(w, o)| w >= o));
        let idle = perfect_lags_by_item_with_writes(&items, &on(8), &limited);
        assert!(
            idle == without,
            "a write on an idle partition changes nothing"
        );
    }

    #[test]
    fn the_applications_writes_take_the_table_wide_limit_too() {
        // No partition limits (DynamoDB Local): 1 000 writes in the first second on a table at
        // its 1 000/s with its deletes double the table's load, and the last delete waits
        // about 1 s; a write before the first TTL, the bucket refilled since, costs nothing.
        let c = capacity(1000.0, 0.0);
        let items = at(&(0..1000).collect::<Vec<i64>>());
        let writes: Vec<AppWrite> = (0..1000)
            .map(|i| AppWrite {
                at_ms: i,
                partitions: [None; 2],
                units: [1, 0],
            })
            .collect();
        let lags = |w: &[AppWrite]| perfect_lags_with_writes(&items, w, &c);
        let max = |l: Vec<f64>| l.into_iter().fold(0.0, f64::max);
        assert!(max(lags(&[])) <= 1.0);
        assert!(
            (max(lags(&writes)) - 1000.0).abs() < 5.0,
            "{}",
            max(lags(&writes))
        );
        let early = AppWrite {
            at_ms: -5000,
            partitions: [None; 2],
            units: [1, 0],
        };
        assert_eq!(lags(&[early]), lags(&[]));
    }

    #[test]
    fn no_items_no_bound() {
        let b = bound(&[], &capacity(1000.0, 0.0), 0, 0);
        assert_eq!((b.p99_ms, b.ratio_p99), (0.0, None));
    }
}
