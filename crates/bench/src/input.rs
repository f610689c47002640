//! The event log a benchmark run produces: what was planted, what the stream saw removed, and what
//! was still in the table at the end.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

/// What the bench planted, per item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Expectation {
    /// Must be deleted, not before `ttl_ms` (epoch milliseconds).
    Expire {
        /// Expiry instant, epoch milliseconds.
        ttl_ms: i64,
    },
    /// Already expired when the sweeper started (catch-up backlog): must be deleted. Its lag says
    /// nothing about precision, so it is reported separately, as time to clear.
    Backlog {
        /// Expiry instant, epoch milliseconds (before the run started).
        ttl_ms: i64,
    },
    /// Must never be deleted (TTL extended before expiry, String/millisecond/negative/too-old TTL,
    /// no TTL at all).
    Survive {
        /// Short label of why it must survive, e.g. `"extended"`, `"string-ttl"`.
        why: String,
    },
}

/// One planted item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planted {
    /// The item's key, as the stream reports it.
    pub key: String,
    /// What must happen to it.
    pub expect: Expectation,
    /// The shard it was written with: its index partition, for the physical bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u16>,
    /// Its table partition, when the run knows where the store keeps it (the simulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_partition: Option<u32>,
}

/// One REMOVE record seen on the stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Removal {
    /// The removed item's key.
    pub key: String,
    /// Wall-clock time the observer saw the record, epoch milliseconds.
    pub seen_ms: i64,
}

/// Everything a run produced, the input of [`crate::analyze`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inputs {
    /// Every planted item.
    pub planted: Vec<Planted>,
    /// Every REMOVE record seen, in any order, duplicates included.
    pub removals: Vec<Removal>,
    /// Keys still present in the table after the grace period (from a final scan).
    pub present_at_end: HashSet<String>,
    /// When the sweeper started, epoch milliseconds.
    pub run_started_ms: i64,
    /// When the run (including the grace period) ended, epoch milliseconds.
    pub run_ended_ms: i64,
    /// Measured stream observation delay in ms, reported as-is.
    pub observer_error_ms: Option<f64>,
    /// What the store can do, for the physical bound ([`crate::bound`]); `None`: no bound.
    #[serde(default)]
    pub capacity: Option<crate::StoreCapacity>,
    /// The shard the bench sent a set share of the expiring items to (`bench
    /// --hot-shard-share`): the report then gives the lag of that shard's items and of the other
    /// shards' apart. `None`: shards drawn uniformly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_shard: Option<u16>,
    /// The store's raw delete rate in PartiQL batches, measured in the run (DynamoDB Local): the
    /// yardstick of the deletion rate while behind ([`crate::Behind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_batch_per_s: Option<f64>,
    /// The bench's own writes to the table during the run besides the application's (TTL
    /// extensions of items that must survive): the bound counts them as capacity taken
    /// ([`crate::AppWrite`]), and the application's accepted writes ([`Inputs::app`]) with them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub app_writes: Vec<crate::AppWrite>,
    /// The application sharing the table (`bench --app-writes`): its writes, reported under
    /// [`crate::Report::app`]; `None` when it did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<crate::AppLoad>,
}
