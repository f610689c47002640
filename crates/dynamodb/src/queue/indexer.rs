//! The expiry queue's indexer: tails the application table's stream ([`crate::stream_tail`],
//! with checkpoints, so a restart loses nothing and skips nothing) and writes one queue entry
//! for every insert or change whose new image has a TTL that can come due and differs from the
//! old image's ([`precise_ttl_core::queue::decide`]). A page is checkpointed past only once its
//! entries are written.
//!
//! With a stream of new images only (`NEW_IMAGE`) the old TTL is unknown, so every write of an
//! item with a TTL writes its entry again (the same entry: harmless, one write unit); with new
//! and old images (`NEW_AND_OLD_IMAGES`) a write that leaves the TTL as it was writes nothing.

use super::{QueueTable, entry_item};
use crate::archive_stream::convert::convert;
use crate::connect::Dynamo;
use crate::error::AdapterError;
use crate::item::{ItemKey, ttl_value};
use crate::lease::LeaseTable;
use crate::stream_tail::{PageConsumer, StreamTail};
use crate::table::TableShape;
use aws_sdk_dynamodb::types::StreamViewType;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, OperationType, Record};
use precise_ttl_core::queue::{INDEXER_BUCKETS, stream_bucket};
use precise_ttl_core::queue::{Indexing, SkipReason, decide};
use precise_ttl_core::{ErrorClass, ShardCount};
use precise_ttl_engine::Clock;
use precise_ttl_engine::lease::{LeaseConfig, Leases};
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

pub const DEFAULT_INDEXER_CHECKPOINT_TABLE: &str = "precise-ttl-queue-checkpoints";
/// The indexer's leases stand in the lease table under `<table>/<this>`.
const LEASE_SCOPE: &str = "#stream-indexer";

#[derive(Debug, Clone)]
pub struct IndexerOptions {
    pub ttl_attribute: String,
    pub shards: ShardCount,
    pub checkpoint_table: String,
    /// Pause between passes over the stream's shards when nothing new came.
    pub poll_interval: Duration,
}

/// What a run of the indexer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IndexerReport {
    /// Entries written.
    pub entries: u64,
    /// Inserts and changes without a TTL that can come due.
    pub no_ttl: u64,
    /// Changes that left the TTL as it was.
    pub unchanged: u64,
}

/// The indexer of one table's stream into its queue, ready to run.
#[derive(Debug)]
pub struct Indexer {
    tail: StreamTail,
    writer: EntryWriter,
    poll_interval: Duration,
}

impl Indexer {
    /// Checks that `table`'s stream carries new images, creates the checkpoint table if missing
    /// and loads the checkpoints.
    pub async fn open(
        dynamo: &Dynamo,
        table: &str,
        queue: QueueTable,
        options: &IndexerOptions,
    ) -> Result<Indexer, AdapterError> {
        let (view, arn) = crate::stream::current_stream(dynamo, table).await?;
        check_view(table, view)?;
        let arn = arn.ok_or_else(|| fatal(format!("table {table:?} has no stream ARN")))?;
        let key_names = TableShape::require(dynamo, table).await?.key_names();
        let tail = StreamTail::open(
            dynamo,
            &arn,
            &options.checkpoint_table,
            "the expiry queue's checkpoint table",
        )
        .await?;
        Ok(Indexer {
            tail,
            writer: EntryWriter {
                dynamo: dynamo.clone(),
                queue,
                key_names,
                ttl_attribute: options.ttl_attribute.clone(),
                shards: options.shards,
                report: IndexerReport::default(),
            },
            poll_interval: options.poll_interval,
        })
    }

    /// Reads only the stream shards of the buckets `usable` holds ([`stream_bucket`]): a fleet's
    /// workers split the stream by [`indexer_leases`].
    pub fn shared(mut self, usable: watch::Receiver<BTreeSet<usize>>) -> Indexer {
        self.tail = self.tail.with_owner(Box::new(move |shard| {
            usable
                .borrow()
                .contains(&stream_bucket(shard, INDEXER_BUCKETS))
        }));
        self
    }

    /// Indexes until `stop` completes; returns what this run did.
    pub async fn run(
        mut self,
        stop: impl Future<Output = ()>,
    ) -> Result<IndexerReport, AdapterError> {
        self.tail
            .run(&mut self.writer, self.poll_interval, stop)
            .await?;
        Ok(self.writer.report)
    }
}

/// The indexer as a consumer of the stream's pages.
#[derive(Debug)]
struct EntryWriter {
    dynamo: Dynamo,
    queue: QueueTable,
    key_names: Vec<String>,
    ttl_attribute: String,
    shards: ShardCount,
    report: IndexerReport,
}

impl PageConsumer for EntryWriter {
    async fn consume(&mut self, records: &[Record]) -> Result<(), AdapterError> {
        let now = self.dynamo.store_clock.now();
        let mut puts = Vec::new();
        for record in records {
            if !matches!(
                record.event_name(),
                Some(OperationType::Insert | OperationType::Modify)
            ) {
                continue;
            }
            let Some(change) = record.dynamodb() else {
                continue;
            };
            let ttl = |image: Option<&HashMap<String, StreamValue>>| {
                image.map(|i| i.get(&self.ttl_attribute).map(convert))
            };
            let Some(new) = ttl(change.new_image()) else {
                continue;
            };
            let old = ttl(change.old_image());
            let new_value = ttl_value(new.as_ref());
            let old_value = old.as_ref().map(|o| ttl_value(o.as_ref()));
            match decide(old_value.as_ref(), &new_value, now) {
                Indexing::Put(expiry) => {
                    let Some(key) = self.item_key(change.keys()) else {
                        return Err(fatal(format!(
                            "a stream record of the table lacks its key attributes {:?}",
                            self.key_names
                        )));
                    };
                    puts.push(entry_item(&key, expiry, self.shards));
                }
                Indexing::Skip(SkipReason::Unchanged) => self.report.unchanged += 1,
                Indexing::Skip(SkipReason::NoTtl | SkipReason::TooOld) => self.report.no_ttl += 1,
            }
        }
        let written = puts.len() as u64;
        let units = crate::bulk::put_all(&self.dynamo, self.queue.name(), puts, |_| {}).await?;
        crate::store::record_capacity("queue_put", Some(units));
        self.report.entries += written;
        Ok(())
    }
}

impl EntryWriter {
    fn item_key(&self, keys: Option<&HashMap<String, StreamValue>>) -> Option<ItemKey> {
        let keys = keys?;
        let attributes: Option<Vec<_>> = self
            .key_names
            .iter()
            .map(|name| keys.get(name).map(|v| (name.clone(), convert(v))))
            .collect();
        Some(ItemKey::new(attributes?))
    }
}

/// One worker's leases over the indexer's buckets of `table`'s stream, in the lease table
/// `lease_table` (which must exist), beside the queue's own shard leases.
pub async fn indexer_leases(
    dynamo: &Dynamo,
    lease_table: &str,
    table: &str,
    config: LeaseConfig,
) -> Result<Leases<LeaseTable>, AdapterError> {
    let leases = LeaseTable::open(dynamo.clone(), lease_table, table, LEASE_SCOPE).await?;
    let keys = (0..INDEXER_BUCKETS)
        .map(|b| format!("stream-{b}"))
        .collect();
    Ok(Leases::new(Arc::new(leases), keys, config))
}

/// The expiry queue needs the new image of every change.
pub(crate) fn check_view(table: &str, view: Option<StreamViewType>) -> Result<(), AdapterError> {
    match view {
        Some(StreamViewType::NewImage | StreamViewType::NewAndOldImages) => Ok(()),
        None => Err(AdapterError::NoStream {
            table: table.to_string(),
        }),
        Some(other) => Err(AdapterError::StreamView {
            table: table.to_string(),
            view: other.as_str().to_string(),
        }),
    }
}

fn fatal(message: String) -> AdapterError {
    AdapterError::Call {
        operation: "indexer",
        class: ErrorClass::Fatal,
        message,
    }
}
