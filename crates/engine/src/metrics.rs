//! Every metric the engine emits, by name, in one place. The binary installs the recorder
//! (Prometheus); without one, emitting is a no-op.

use metrics::Unit;

/// Items deleted by us.
pub const DELETED: &str = "precise_ttl_deleted_total";
/// Conditional deletes that found the item changed (TTL extended, removed) or gone.
pub const SKIPPED: &str = "precise_ttl_skipped_total";
/// Items found gone by a delete retried after an attempt whose answer was lost (a timeout, a
/// dropped connection): that attempt may have deleted them, or another worker did.
pub const UNCONFIRMED: &str = "precise_ttl_unconfirmed_total";
/// Deletes that still failed after every retry; the items stay due and are read again.
pub const ERRORS: &str = "precise_ttl_errors_total";
/// Calls the store throttled (each retried after a backoff).
pub const THROTTLED: &str = "precise_ttl_throttled_total";
/// Index queries sent, labelled `reader` = `head` (read-ahead) or `backlog`.
pub const QUERIES: &str = "precise_ttl_queries_total";
/// Seconds between an item's TTL and the acknowledgement of its delete.
pub const LAG_SECONDS: &str = "precise_ttl_lag_seconds";
/// Items known due and not yet deleted.
pub const BACKLOG: &str = "precise_ttl_backlog_items";
/// Items read ahead and waiting for their expiry instant.
pub const SCHEDULED: &str = "precise_ttl_scheduled_items";
/// Epoch seconds T such that every due item with TTL ≤ T is known deleted; label `shard`
/// (a shard number, `windows` for the blog layout, or `all` for the minimum).
pub const WATERMARK: &str = "precise_ttl_watermark_seconds";
/// Seconds the overall watermark trails the clock.
pub const WATERMARK_DELAY: &str = "precise_ttl_watermark_delay_seconds";
/// Capacity units the store reported as consumed, in hundredths, labelled
/// `op` = `query` or `delete`. Divide by 100 for capacity units.
pub const CAPACITY_UNITS: &str = "precise_ttl_capacity_centiunits_total";
/// Capacity units consumed per second, averaged over about 10 s, labelled `op` = `query` (read
/// units) or `delete` (write units, the table's and its indexes'); see
/// [`crate::capacity_rate`].
pub const CAPACITY_UNITS_PER_SECOND: &str = "precise_ttl_capacity_units_per_second";
/// The `op` label values of the capacity metrics: index reads (read units), deletes (write
/// units: the items', and in the expiry queue layout its entries'), and the expiry queue's entry
/// puts (write units: what the shard index's writes cost the writers in the other layout).
pub const CAPACITY_OPS: [&str; 3] = ["query", "delete", "queue_put"];
/// The adaptive limit on delete requests in flight: the table-wide controller, cut only by
/// table- or index-wide refusals (or unknown ones over several shards) and timeouts.
pub const CONCURRENCY_LIMIT: &str = "precise_ttl_concurrency_limit";
/// Throttled deletes by what refused them, label `scope` = `table_partition`, `table`,
/// `index_partition`, `index` or `unknown` (DynamoDB's `ThrottlingReasons`).
pub const THROTTLED_BY_SCOPE: &str = "precise_ttl_throttled_deletes_total";
/// The table's send rate (items/s) while engaged (a large share of deletes refused by the
/// whole table or index); 0 when not engaged.
pub const TABLE_RATE_LIMIT: &str = "precise_ttl_table_rate_limit";
/// The rate refused items are sent again at (items/s) while table partitions' refusals engage
/// it (half of what is sent refused); 0 when not engaged. First attempts never wait for it.
pub const RETRY_RATE_LIMIT: &str = "precise_ttl_retry_rate_limit";
/// The backlog's send rate (items/s) under its budget (a share of the table's write capacity,
/// cut by refusals); 0 without a budget.
pub const BACKLOG_RATE_LIMIT: &str = "precise_ttl_backlog_rate_limit";
/// Shards whose own index partition refused deletes, now sending under a limit of their own.
pub const LANES_LIMITED: &str = "precise_ttl_shards_limited";
/// A shard's own delete limit (items/s), label `shard`; 0 once lifted. Only shards that were
/// ever limited have a series, so the cardinality is bounded by the shard count.
pub const LANE_RATE_LIMIT: &str = "precise_ttl_shard_rate_limit";

/// Times the store refused PartiQL batches and `auto` delete mode fell back to one
/// `DeleteItem` per item (for good: at most once per process).
pub const DELETE_MODE_FALLBACKS: &str = "precise_ttl_delete_mode_fallbacks_total";
/// Shard leases this worker holds and reads.
pub const LEASES_HELD: &str = "precise_ttl_leases_held";
/// Shard leases in the lease table (the lanes a fleet shares): the fleet holds them all when
/// the sum of [`LEASES_HELD`] equals it.
pub const LEASES: &str = "precise_ttl_leases";
/// The shard count this worker was started with (`--shards`), published at start with or
/// without leases: alerts and panels compare lease counts with it instead of a number written
/// into them. Not published for the blog's window index (its lanes are windows, not shards).
pub const SHARDS: &str = "precise_ttl_shards";
/// Shards that have due items while nobody has attended their lease for half a lease duration,
/// as this worker sees them: nothing deletes those items.
pub const SHARDS_STALLED: &str = "precise_ttl_shards_stalled";
/// Lease changes of this worker, labelled `change` = `acquired` (free or expired), `stolen`
/// (taken from a busier worker), `lost` (taken by another, or not renewed in time) or
/// `released` (on shutdown).
pub const LEASE_CHANGES: &str = "precise_ttl_lease_changes_total";

/// How far this host's clock is ahead of the store's, at most (an upper bound from the `Date`
/// headers of its answers, 1 s resolution combined over many); deletes are held back by it.
pub const CLOCK_LEAD: &str = "precise_ttl_clock_lead_seconds";
/// The store's clock minus this host's: the middle of the interval the `Date` headers allow.
pub const CLOCK_OFFSET: &str = "precise_ttl_clock_offset_seconds";

/// `precise-ttl archive` (and the Lambda function as the stream's consumer): expiry records
/// written to the sink and made durable, ours and native TTL's.
pub const ARCHIVE_RECORDS: &str = "precise_ttl_archive_records_total";
/// Of [`ARCHIVE_RECORDS`], native TTL's deletes.
pub const ARCHIVE_NATIVE_RECORDS: &str = "precise_ttl_archive_native_records_total";
/// Stream REMOVE records left out as not expiries, labelled `reason` (the labels of
/// `precise_ttl_core::removal::LeftOut`: `not_due`, `no_ttl`, `ttl_not_a_number`, `too_old`,
/// `no_record_time`). A rise of `not_due` while a sweeper runs means the record-time resolution
/// is finer than the stream's.
pub const ARCHIVE_LEFT_OUT: &str = "precise_ttl_archive_left_out_removes_total";
/// The record-time resolution the archive classifies with now.
pub const ARCHIVE_RESOLUTION: &str = "precise_ttl_archive_record_time_resolution_seconds";

/// Registers the archive's descriptions and its counters at zero, each `reason` too (as
/// [`describe`] does for the daemon's).
pub fn describe_archive() {
    metrics::counter!(ARCHIVE_RECORDS).increment(0);
    metrics::counter!(ARCHIVE_NATIVE_RECORDS).increment(0);
    for reason in precise_ttl_core::removal::LeftOut::ALL {
        metrics::counter!(ARCHIVE_LEFT_OUT, "reason" => reason.label()).increment(0);
    }
    use metrics::{Unit, describe_counter, describe_gauge};
    describe_counter!(
        ARCHIVE_RECORDS,
        "Expiry records archived from the table's stream (ours and native TTL's)"
    );
    describe_counter!(
        ARCHIVE_NATIVE_RECORDS,
        "Of the archived expiry records, native TTL's"
    );
    describe_counter!(
        ARCHIVE_LEFT_OUT,
        "Stream REMOVE records left out of the archive as not expiries, by reason"
    );
    describe_gauge!(
        ARCHIVE_RESOLUTION,
        Unit::Seconds,
        "How finely the archive takes the stream to date its records"
    );
}

/// Publishes [`SHARDS`]: `run` calls it once, at start, for the sharded index.
pub fn configured_shards(count: u64) {
    metrics::gauge!(SHARDS).set(count as f64);
}

/// Histogram buckets for [`LAG_SECONDS`], dense where the product's promise lies (≤ 100 ms).
pub const LAG_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 600.0,
];

/// Registers the descriptions shown in `/metrics`, and every counter at zero (each label value
/// too): a dashboard or alert then sees the series from the first scrape, not from its first
/// event, and `rate` counts that first event.
pub fn describe() {
    for counter in [
        DELETED,
        SKIPPED,
        UNCONFIRMED,
        ERRORS,
        THROTTLED,
        DELETE_MODE_FALLBACKS,
    ] {
        metrics::counter!(counter).increment(0);
    }
    for reader in ["head", "backlog", "stall"] {
        metrics::counter!(QUERIES, "reader" => reader).increment(0);
    }
    for scope in [
        "table_partition",
        "table",
        "index_partition",
        "index",
        "unknown",
    ] {
        metrics::counter!(THROTTLED_BY_SCOPE, "scope" => scope).increment(0);
    }
    metrics::gauge!(LANES_LIMITED).set(0.0);
    metrics::gauge!(TABLE_RATE_LIMIT).set(0.0);
    metrics::gauge!(RETRY_RATE_LIMIT).set(0.0);
    metrics::gauge!(BACKLOG_RATE_LIMIT).set(0.0);
    for op in CAPACITY_OPS {
        metrics::counter!(CAPACITY_UNITS, "op" => op).increment(0);
        metrics::gauge!(CAPACITY_UNITS_PER_SECOND, "op" => op).set(0.0);
    }
    for change in ["acquired", "stolen", "lost", "released"] {
        metrics::counter!(LEASE_CHANGES, "change" => change).increment(0);
    }
    let _ = metrics::histogram!(LAG_SECONDS);
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    for &(name, help) in COUNTER_HELP {
        describe_counter!(name, help);
    }
    for &(name, help) in GAUGE_HELP {
        describe_gauge!(name, help);
    }
    for &(name, help) in SECONDS_GAUGE_HELP {
        describe_gauge!(name, Unit::Seconds, help);
    }
    describe_histogram!(
        LAG_SECONDS,
        Unit::Seconds,
        "Delay between an item's TTL and its deletion"
    );
}

/// Each counter's description in `/metrics`.
const COUNTER_HELP: &[(&str, &str)] = &[
    (DELETED, "Items deleted by precise-ttl"),
    (
        SKIPPED,
        "Conditional deletes that found the item changed or gone",
    ),
    (
        UNCONFIRMED,
        "Items found gone on a retry after a lost answer: deleted by that attempt or by another worker",
    ),
    (
        ERRORS,
        "Deletes that failed after every retry (items stay due)",
    ),
    (THROTTLED, "Store calls that were throttled and retried"),
    (QUERIES, "Index queries sent"),
    (
        DELETE_MODE_FALLBACKS,
        "Falls back from PartiQL batches to DeleteItem after the store refused PartiQL",
    ),
    (
        LEASE_CHANGES,
        "Lease changes of this worker: acquired, stolen, lost, released",
    ),
    (
        THROTTLED_BY_SCOPE,
        "Throttled deletes by what refused them (DynamoDB's ThrottlingReasons)",
    ),
];

/// Each gauge's description in `/metrics`.
const GAUGE_HELP: &[(&str, &str)] = &[
    (BACKLOG, "Items known due and not yet deleted"),
    (SCHEDULED, "Items read ahead, waiting for their expiry"),
    (LEASES_HELD, "Shard leases this worker holds and reads"),
    (
        LEASES,
        "Shard leases in the lease table (the fleet's shards)",
    ),
    (
        SHARDS,
        "The shard count this worker was started with (--shards)",
    ),
    (
        SHARDS_STALLED,
        "Shards with due items and no lease holder for half a lease duration, seen by this worker",
    ),
    (
        CONCURRENCY_LIMIT,
        "Adaptive limit on delete requests in flight (table-wide refusals and timeouts cut it)",
    ),
    (
        TABLE_RATE_LIMIT,
        "The table's send rate in items/s while whole-table refusals engage it (0: not engaged)",
    ),
    (
        RETRY_RATE_LIMIT,
        "The rate refused items go again in items/s while table partitions' refusals engage it (0: not engaged)",
    ),
    (
        CAPACITY_UNITS_PER_SECOND,
        "Capacity units consumed per second (ConsumedCapacity), averaged over about 10 s",
    ),
    (
        BACKLOG_RATE_LIMIT,
        "The backlog's delete rate in items/s under its capacity budget (0: no budget)",
    ),
    (
        LANES_LIMITED,
        "Shards sending under a limit of their own after their index partition refused deletes",
    ),
    (
        LANE_RATE_LIMIT,
        "A shard's own delete limit in items/s (0: lifted)",
    ),
];

/// Each gauge in seconds, and its description in `/metrics`.
const SECONDS_GAUGE_HELP: &[(&str, &str)] = &[
    (
        WATERMARK,
        "Every due item with TTL at or before this epoch second is deleted",
    ),
    (
        WATERMARK_DELAY,
        "How far the overall watermark trails the clock",
    ),
    (
        CLOCK_LEAD,
        "Upper bound of this host's clock lead over the store's; deletes are held back by it",
    ),
    (
        CLOCK_OFFSET,
        "Estimated store clock minus this host's clock",
    ),
];
