//! `status`'s view of a table from outside: per shard what is due, how old, what comes next,
//! each shard's lease owner when `run` works as a fleet, the expiry queue's parts (stream,
//! indexer) in the stream-queue layout, and the store's clock as its answers dated it.

use crate::error::OpsError;
use crate::queue::QueueCheck;
use crate::status::{ShardStatus, UPCOMING, shard_status};
use precise_ttl_core::sizing::ShardAdvice;
use precise_ttl_core::{Timestamp, TtlLayout};
use precise_ttl_dynamodb::{
    AdapterError, Dynamo, DynamoStore, LeaseTable, StoredLease, TableShape,
};
use precise_ttl_engine::Clock;
use precise_ttl_stream::queue::indexer::indexer_owners;
use precise_ttl_stream::queue::inspect::{QueueParts, parts};
use precise_ttl_stream::queue::{QueueStore, QueueTable};
use std::collections::BTreeMap;

/// What `status` reads of a table.
#[derive(Debug, Clone)]
pub struct TableStatus {
    pub shape: TableShape,
    /// The stream-queue layout's stream, queue table and indexer.
    pub queue: Option<QueueParts>,
    /// Now by the store's clock: this host's, held back by any lead its answers revealed.
    pub now: Timestamp,
    pub shards: Vec<ShardStatus>,
    /// The shards' leases by shard; `None` without a lease table (no fleet).
    pub leases: Option<BTreeMap<String, StoredLease>>,
    /// The queue's indexers and how many stream buckets each holds.
    pub indexers: Option<BTreeMap<String, usize>>,
    /// The lower bound of the store's clock minus this host's, in seconds, if its answers were
    /// dated.
    pub store_offset_s: Option<f64>,
    /// How far this host's clock is ahead of the store's, in seconds.
    pub host_lead_s: f64,
}

impl TableStatus {
    /// Every due item with an older TTL is gone.
    pub fn watermark(&self) -> Timestamp {
        self.shards
            .iter()
            .map(|s| s.watermark(self.now))
            .min()
            .unwrap_or(self.now)
    }

    /// Items due and not yet deleted, over the shards.
    pub fn due(&self) -> u64 {
        self.shards.iter().map(|s| s.due).sum()
    }

    /// The shards against the next [`UPCOMING`]'s expiries.
    pub fn advice(&self) -> ShardAdvice {
        let upcoming: Vec<u64> = self.shards.iter().map(|s| s.upcoming).collect();
        precise_ttl_core::sizing::advise(&upcoming, UPCOMING.as_secs_f64())
    }

    /// The workers holding leases, with how many shards each.
    pub fn workers(&self) -> BTreeMap<&str, usize> {
        let mut workers: BTreeMap<&str, usize> = BTreeMap::new();
        for l in self.leases.iter().flat_map(|l| l.values()) {
            if let Some(owner) = l.record.owner.as_deref() {
                *workers.entry(owner).or_default() += 1;
            }
        }
        workers
    }
}

/// Reads `table`'s status (its index, or with `queue` its expiry queue); changes nothing.
/// Fails as the sweeper would on a missing table, index or queue.
pub async fn table_status(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    queue: Option<&QueueCheck>,
    lease_table: &str,
) -> Result<TableStatus, OpsError> {
    let parts = match queue {
        Some(q) => {
            QueueStore::open(dynamo.clone(), table, &q.queue_table, layout.clone()).await?;
            Some(parts(dynamo, table, &q.queue_table, &q.checkpoint_table).await?)
        }
        None => {
            DynamoStore::open(dynamo.clone(), table, layout.clone()).await?;
            None
        }
    };
    let shape = TableShape::require(dynamo, table).await?;
    let clock = dynamo.store_clock.clone();
    let now = clock.now();
    let mut shards = Vec::new();
    for shard in layout.shards.all() {
        shards.push(match queue {
            Some(q) => {
                crate::queue::status::shard_status(
                    &QueueTable::new(dynamo.clone(), &q.queue_table),
                    shard,
                    now,
                )
                .await?
            }
            None => shard_status(dynamo, table, layout, shard, now).await?,
        });
    }
    let index = queue.map_or(layout.index_name.as_str(), |q| q.queue_table.as_str());
    let leases = match LeaseTable::open(dynamo.clone(), lease_table, table, index).await {
        Ok(t) => Some(
            t.all()
                .await?
                .into_iter()
                .map(|l| (l.record.key.clone(), l))
                .collect(),
        ),
        Err(AdapterError::LeaseTableMissing { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let indexers = match queue {
        Some(_) => indexer_owners(dynamo, lease_table, table).await?,
        None => None,
    };
    Ok(TableStatus {
        shape,
        queue: parts,
        now,
        shards,
        leases,
        indexers,
        store_offset_s: clock.offset_ms().map(|ms| ms as f64 / 1000.0),
        host_lead_s: clock.lead().as_secs_f64(),
    })
}
