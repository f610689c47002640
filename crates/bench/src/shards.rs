//! A skewed load's two halves: the hot shard's expiring items and the other shards', each with
//! its lag and its own physical bound.
//!
//! A hot shard's index partition takes its own limit (1,000 write units/s on DynamoDB) however
//! idle the rest of the table is, so its items wait where the others' need not; the overall lag
//! mixes the two and hides either. Each half's bound is the perfect sweeper's lags *of that
//! half's items while it deleted the whole workload* (one run of [`crate::bound`], split by
//! item), not a run over the half alone: the halves share the table-wide limit.

use serde::{Deserialize, Serialize};

use crate::bound::{Bound, StoreCapacity, bound_of_lags};

/// The lag of one part of the expiring items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardGroup {
    /// The hot shard's number; `None` for the other shards' group.
    pub shard: Option<u16>,
    /// Expiring items planted in this group.
    pub items: u64,
    /// How many of them were deleted (the percentiles are over these; 0 ms when none was).
    pub deleted: u64,
    /// Median lag, ms.
    pub p50_ms: u64,
    /// 99th percentile lag, ms.
    pub p99_ms: u64,
    /// Largest lag, ms.
    pub max_ms: u64,
    /// The perfect sweeper's lag of these items in the same workload, and ours against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<Bound>,
}

/// One expiring item: its shard, its lag (clamped at 0; `None`: never deleted) and, when the run
/// has a bound, the perfect sweeper's lag of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ItemLag {
    pub shard: Option<u16>,
    pub lag_ms: Option<u64>,
    pub perfect_ms: Option<f64>,
}

/// The hot shard's group and the other shards' (items without a shard go with the others).
pub fn split(
    hot: u16,
    items: &[ItemLag],
    capacity: Option<&StoreCapacity>,
) -> (ShardGroup, ShardGroup) {
    let (hot_items, others): (Vec<ItemLag>, Vec<ItemLag>) =
        items.iter().partition(|i| i.shard == Some(hot));
    (
        group(Some(hot), &hot_items, capacity),
        group(None, &others, capacity),
    )
}

fn group(shard: Option<u16>, items: &[ItemLag], capacity: Option<&StoreCapacity>) -> ShardGroup {
    let lags: Vec<u64> = items.iter().filter_map(|i| i.lag_ms).collect();
    let stats = crate::lag_stats::lag_stats(&lags, 0);
    let (p50, p99, max) = stats
        .as_ref()
        .map_or((0, 0, 0), |l| (l.p50_ms, l.p99_ms, l.max_ms));
    let bound = capacity.map(|c| {
        let perfect: Vec<f64> = items.iter().filter_map(|i| i.perfect_ms).collect();
        bound_of_lags(perfect, c, p99, max)
    });
    ShardGroup {
        shard,
        items: items.len() as u64,
        deleted: lags.len() as u64,
        p50_ms: p50,
        p99_ms: p99,
        max_ms: max,
        bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bound::{Expiring, PartitionLimit, perfect_lags_by_item};

    fn item(shard: u16, lag_ms: Option<u64>) -> ItemLag {
        ItemLag {
            shard: Some(shard),
            lag_ms,
            perfect_ms: None,
        }
    }

    #[test]
    fn each_group_has_its_own_percentiles_and_counts() {
        let mut items: Vec<ItemLag> = (1..=100).map(|i| item(0, Some(1000 + i))).collect();
        items.extend((1..=300).map(|i| item(1 + (i % 7) as u16, Some(i % 50))));
        items.push(item(0, None));
        let (hot, others) = split(0, &items, None);
        assert_eq!((hot.shard, hot.items, hot.deleted), (Some(0), 101, 100));
        assert_eq!((hot.p50_ms, hot.p99_ms, hot.max_ms), (1050, 1099, 1100));
        assert_eq!(
            (others.shard, others.items, others.deleted),
            (None, 300, 300)
        );
        assert_eq!(others.max_ms, 49);
        assert!(hot.bound.is_none() && others.bound.is_none());
    }

    #[test]
    fn the_hot_shards_bound_is_held_to_its_index_partition_and_the_others_are_not() {
        // 1 500/s to shard 0 and 6 500/s over shards 1..=7 for 4 s, fractional TTLs, a table of
        // 40 000/s whose index partitions take 1 000/s each: the perfect sweeper falls 500
        // behind a second on shard 0 only.
        let capacity = StoreCapacity {
            per_second: 40_000.0,
            burst_items: 0.0,
            floor_ms: 0.0,
            source: "test".into(),
            partition: Some(PartitionLimit {
                per_second: 1000.0,
                burst_items: 0.0,
            }),
        };
        let mut workload = Vec::new();
        for ms in 0..4000i64 {
            for k in 0..8 {
                // 8 items a ms; 1.5 of them (3 every 2 ms) to shard 0.
                let hot = k < 1 || (k == 1 && ms % 2 == 0);
                let shard = if hot {
                    0
                } else {
                    1 + (k as u32 + ms as u32) % 7
                };
                workload.push((shard as u16, ms));
            }
        }
        let expiring: Vec<Expiring> = workload
            .iter()
            .map(|&(shard, ttl_ms)| Expiring {
                ttl_ms,
                partitions: [None, Some(u32::from(shard))],
            })
            .collect();
        let perfect = perfect_lags_by_item(&expiring, &capacity);
        let items: Vec<ItemLag> = workload
            .iter()
            .zip(&perfect)
            .map(|(&(shard, _), &p)| ItemLag {
                shard: Some(shard),
                lag_ms: Some(p as u64 + 100),
                perfect_ms: Some(p),
            })
            .collect();
        let (hot, others) = split(0, &items, Some(&capacity));
        let (hb, ob) = (hot.bound.unwrap(), others.bound.unwrap());
        assert_eq!(hot.items, 6000);
        // The last hot item waits 2 000 of 6 000 items at 1 000/s: 2 s.
        assert!((hb.max_ms - 2000.0).abs() < 10.0, "{hb:?}");
        assert!(ob.max_ms < 2.0, "{ob:?}");
        assert_eq!(others.items, 26_000);
        // Our lag is the perfect one plus 100 ms: the hot shard's ratio is near 1.
        assert!(hb.ratio_max.unwrap() < 1.06, "{hb:?}");
    }
}
