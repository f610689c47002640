//! `backfill` for the expiry queue: one Scan of the application table writes the entry of every
//! item already there whose TTL can come due, through the same resumable, segmented backfill as
//! the shard index's ([`crate::backfill`]). An entry is idempotent, so a page read again after a
//! stop writes the same entries; an item the stream indexes meanwhile gets the same entry too.

use crate::backfill::BackfillTable;
use crate::scan::{ScanCursor, ScanFilter, ScanPage, ScannedItem, Segment, ShardWrite, TableScan};
use precise_ttl_core::ShardCount;
use precise_ttl_core::queue::{Indexing, decide};
use precise_ttl_dynamodb::item::ttl_value;
use precise_ttl_engine::{Clock, StoreError};
use precise_ttl_stream::queue::QueueTable;

/// The application table's scan and its queue, as a backfill target.
#[derive(Debug, Clone)]
pub struct QueueBackfill {
    scan: TableScan,
    queue: QueueTable,
    shards: ShardCount,
}

impl QueueBackfill {
    /// Entries for the items `scan` reads, in `queue`, spread over `shards`.
    pub fn new(scan: TableScan, queue: QueueTable, shards: ShardCount) -> QueueBackfill {
        QueueBackfill {
            scan,
            queue,
            shards,
        }
    }
}

impl BackfillTable for QueueBackfill {
    async fn unsharded_page(
        &self,
        segment: Segment,
        cursor: Option<ScanCursor>,
        limit: u32,
    ) -> Result<ScanPage, StoreError> {
        self.scan
            .page(segment, ScanFilter::Ttl, cursor, limit)
            .await
    }

    /// `Added`: the entry is written; `Changed`: the TTL can never come due (more than five
    /// years old), so no entry.
    async fn write(&self, item: &ScannedItem) -> Result<ShardWrite, StoreError> {
        let now = self.queue.dynamo().store_clock.now();
        match decide(None, &ttl_value(item.ttl.as_ref()), now) {
            Indexing::Put(expiry) => {
                self.queue.put(&item.key, expiry, self.shards).await?;
                Ok(ShardWrite::Added)
            }
            Indexing::Skip(_) => Ok(ShardWrite::Changed),
        }
    }
}
