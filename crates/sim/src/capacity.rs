//! Capacity: token buckets per partition (the table's partitions, one per partition-key value
//! of an index) and per table or index as a whole, the unit costs of reads and writes, and the
//! tallies of units consumed and requests throttled.
//!
//! A bucket refills at its rate and holds at most `burst_seconds` of it. A write is admitted when
//! every bucket it touches holds its cost, and then takes the cost from all of them; a read is
//! admitted while its buckets are not empty and pays afterwards (its size is known only once
//! read), as DynamoDB meters reads.

use crate::error::Throttle;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

/// One kilobyte: a write unit's size.
pub const WRITE_UNIT_BYTES: usize = 1024;
/// Four kilobytes: a read unit's size.
pub const READ_UNIT_BYTES: usize = 4096;

/// Write units for an item of `bytes`: one per started kilobyte, at least one.
pub fn write_units(bytes: usize) -> f64 {
    bytes.div_ceil(WRITE_UNIT_BYTES).max(1) as f64
}

/// Read units for `bytes` read at once: one per started 4 KB (at least one), halved when
/// eventually consistent.
pub fn read_units(bytes: usize, consistent: bool) -> f64 {
    let units = bytes.div_ceil(READ_UNIT_BYTES).max(1) as f64;
    if consistent { units } else { units / 2.0 }
}

/// Rates and limits of a table or an index.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Limits {
    /// Write units per second of one partition.
    pub partition_wcu: f64,
    /// Read units per second of one partition.
    pub partition_rcu: f64,
    /// Write units per second of the whole table (or index).
    pub total_wcu: f64,
    /// Read units per second of the whole table (or index).
    pub total_rcu: f64,
    /// Seconds of unused capacity a bucket keeps.
    pub burst_seconds: f64,
}

impl Limits {
    pub fn unlimited() -> Limits {
        Limits {
            partition_wcu: f64::INFINITY,
            partition_rcu: f64::INFINITY,
            total_wcu: f64::INFINITY,
            total_rcu: f64::INFINITY,
            burst_seconds: 1.0,
        }
    }
}

/// A partition's (or a table's, or an index's) bucket: the one token bucket's burst credit on
/// the simulator's clock.
pub use precise_ttl_core::bucket::InstantBucket as Bucket;

/// A partition's two buckets.
#[derive(Debug, Clone)]
pub struct PartitionBuckets {
    pub write: Bucket,
    pub read: Bucket,
}

impl PartitionBuckets {
    pub fn new(limits: &Limits, now: Instant) -> Self {
        PartitionBuckets {
            write: Bucket::new(limits.partition_wcu, limits.burst_seconds, now),
            read: Bucket::new(limits.partition_rcu, limits.burst_seconds, now),
        }
    }
}

/// Units consumed and requests throttled, for one table, index or partition.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    pub write_units: f64,
    pub read_units: f64,
    /// Writes (single calls, batch statements and batch-write items) refused for capacity.
    pub throttled_writes: u64,
    /// Reads refused for capacity.
    pub throttled_reads: u64,
}

/// Throttles by DynamoDB's reason (`TableWriteKeyRangeThroughputExceeded`, ...).
pub type ThrottleReasons = BTreeMap<String, u64>;

/// Whether the table bills on demand or by provisioned capacity: decides the throttle's
/// exception and reason names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Billing {
    OnDemand,
    Provisioned { read: i64, write: i64 },
}

impl Billing {
    pub fn limit_reason(self) -> &'static str {
        match self {
            Billing::OnDemand => "AccountLimitExceeded",
            Billing::Provisioned { .. } => "ProvisionedThroughputExceeded",
        }
    }

    /// The throttle for `resource` (`Table` or `Index`), `op` (`Read` or `Write`) and `limit`.
    pub fn throttle(self, resource: &str, op: &str, limit: &str, arn: &str) -> Throttle {
        Throttle {
            reason: format!("{resource}{op}{limit}"),
            resource: arn.to_string(),
            provisioned: matches!(self, Billing::Provisioned { .. }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn units_round_up() {
        assert_eq!(write_units(0), 1.0);
        assert_eq!(write_units(1024), 1.0);
        assert_eq!(write_units(1025), 2.0);
        assert_eq!(read_units(100, false), 0.5);
        assert_eq!(read_units(4097, true), 2.0);
    }

    #[test]
    fn a_bucket_refills_at_its_rate_up_to_its_burst() {
        let t0 = Instant::now();
        let mut b = Bucket::new(1000.0, 1.0, t0);
        assert!(b.admits(Some(1000.0), t0));
        b.take(1000.0);
        assert!(!b.admits(Some(1.0), t0));
        let t1 = t0 + Duration::from_millis(10);
        assert!(b.admits(Some(10.0), t1));
        assert!(!b.admits(Some(11.0), t1));
        let later = t0 + Duration::from_secs(60);
        assert!(
            (b.tokens(later) - 1000.0).abs() < 1e-6,
            "capped at one second"
        );
        b.take(1500.0);
        assert!(!b.admits(None, later), "reads go into debt and wait it out");
        assert!(b.admits(None, later + Duration::from_millis(501)));
    }

    #[test]
    fn unlimited_buckets_admit_everything() {
        let t0 = Instant::now();
        let mut b = Bucket::new(f64::INFINITY, 1.0, t0);
        b.take(1e12);
        assert!(b.admits(Some(1e12), t0));
    }
}
