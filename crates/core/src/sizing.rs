//! How many shards the expiry index needs for an expiry rate. Every value of the shard attribute
//! is one partition of the index, and a partition takes about 1,000 write units per second
//! (AWS's documented per-partition limit). Each expiring item writes its shard's partition twice:
//! once when it is written into the index, once when it is deleted. A shard whose partition runs
//! near its limit throttles the deletes (and the application's writes) of that shard.

/// Write units per second one index partition takes (AWS documentation: partition limits).
pub const PARTITION_WCU_PER_S: f64 = 1000.0;

/// The share of a partition's limit the advice plans for, leaving room for bursts and uneven
/// shards.
pub const TARGET_SHARE: f64 = 0.7;

/// Index writes per expiring item: its insert into the index and its delete.
pub const INDEX_WRITES_PER_ITEM: f64 = 2.0;

/// The index load at an expiry rate, and the shard count it needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShardAdvice {
    pub expiries_per_s: f64,
    /// Write units per second on the busiest shard's partition.
    pub busiest_partition_wcu: f64,
    /// Write units per second on a shard's partition if the shards were even.
    pub mean_partition_wcu: f64,
    /// Shards that keep every partition under [`TARGET_SHARE`] of its limit, if even.
    pub shards_needed: u64,
    /// The shards in use are enough: the busiest partition is under the target share.
    pub enough: bool,
}

/// `upcoming[s]`: items of shard `s` due in the next `window_s` seconds.
pub fn advise(upcoming: &[u64], window_s: f64) -> ShardAdvice {
    let window_s = window_s.max(1e-9);
    let total: u64 = upcoming.iter().sum();
    let busiest = upcoming.iter().copied().max().unwrap_or(0);
    let expiries_per_s = total as f64 / window_s;
    let per_item = INDEX_WRITES_PER_ITEM / window_s;
    let busiest_partition_wcu = busiest as f64 * per_item;
    let mean_partition_wcu = total as f64 * per_item / upcoming.len().max(1) as f64;
    let budget = PARTITION_WCU_PER_S * TARGET_SHARE;
    let shards_needed = ((expiries_per_s * INDEX_WRITES_PER_ITEM / budget).ceil() as u64).max(1);
    ShardAdvice {
        expiries_per_s,
        busiest_partition_wcu,
        mean_partition_wcu,
        shards_needed,
        enough: busiest_partition_wcu <= budget,
    }
}

impl ShardAdvice {
    /// One line for `status` and `doctor`.
    pub fn describe(&self, shards: u64) -> String {
        let head = format!(
            "at the next minute's expiry rate ({:.0}/s), {shards} shards put ~{:.0} write units/s on each index partition (busiest {:.0}; a partition takes ~{:.0})",
            self.expiries_per_s,
            self.mean_partition_wcu,
            self.busiest_partition_wcu,
            PARTITION_WCU_PER_S
        );
        if self.enough {
            format!("{head}: enough")
        } else if self.shards_needed <= shards {
            format!(
                "{head}: the shards are uneven; writers should pick the shard at random, or deletes and writes on the busiest shard are throttled"
            )
        } else {
            format!(
                "{head}: use >= {} shards (writers and --shards together), or deletes and writes on the busiest shards are throttled",
                self.shards_needed
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_thousand_a_second_on_sixteen_shards_needs_twenty_three() {
        let upcoming = vec![30_000; 16]; // 480 000 in a minute: 8 000/s
        let a = advise(&upcoming, 60.0);
        assert_eq!(a.expiries_per_s, 8000.0);
        assert_eq!(a.mean_partition_wcu, 1000.0);
        assert_eq!(a.shards_needed, 23);
        assert!(!a.enough);
        assert!(
            a.describe(16).contains("use >= 23 shards"),
            "{}",
            a.describe(16)
        );
    }

    #[test]
    fn a_quiet_table_needs_one_shard_and_has_enough() {
        let a = advise(&[10, 0, 5, 0], 60.0);
        assert_eq!(a.shards_needed, 1);
        assert!(a.enough);
        assert!(a.describe(4).ends_with("enough"));
    }

    #[test]
    fn one_hot_shard_is_not_enough_even_when_the_mean_is_low() {
        let mut upcoming = vec![0; 64];
        upcoming[3] = 30_000; // 500/s, all on one shard: 1 000 WCU/s there
        let a = advise(&upcoming, 60.0);
        assert!(!a.enough);
        assert_eq!(a.busiest_partition_wcu, 1000.0);
        assert!(a.describe(64).contains("uneven"), "{}", a.describe(64));
    }
}
