//! The expiry queue's operator tools: `setup` (the queue table, the stream, the leases),
//! `status` per queue shard, and `backfill` of the entries of items written before the
//! indexer ran. The queue itself (its table, store and indexer) is `precise_ttl_stream::queue`.

pub mod backfill;
pub mod setup;
pub mod status;

/// The expiry queue that `doctor` and `status` read, and the indexer's checkpoint table.
#[derive(Debug, Clone)]
pub struct QueueCheck {
    pub queue_table: String,
    pub checkpoint_table: String,
}
