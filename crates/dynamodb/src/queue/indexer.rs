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
use crate::stream_tail::{PageConsumer, StreamTail};
use crate::table::TableShape;
use aws_sdk_dynamodb::types::StreamViewType;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, OperationType, Record};
use precise_ttl_core::queue::{Indexing, SkipReason, decide};
use precise_ttl_core::{ErrorClass, ShardCount};
use precise_ttl_engine::Clock;
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

pub const DEFAULT_INDEXER_CHECKPOINT_TABLE: &str = "precise-ttl-queue-checkpoints";

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
        match view {
            Some(StreamViewType::NewImage | StreamViewType::NewAndOldImages) => {}
            None => {
                return Err(fatal(format!(
                    "table {table:?} has no stream: the expiry queue is fed from it; turn one on with new and old images (NEW_AND_OLD_IMAGES)"
                )));
            }
            Some(other) => {
                return Err(fatal(format!(
                    "table {table:?}'s stream carries no new images ({}): the expiry queue needs NEW_AND_OLD_IMAGES (or NEW_IMAGE); a stream's view type cannot be changed in place, so turning it off and on again starts a new stream, which every other consumer of the old one must follow",
                    other.as_str()
                )));
            }
        }
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
        crate::bulk::put_all(&self.dynamo, self.queue.name(), puts, |_| {}).await?;
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

fn fatal(message: String) -> AdapterError {
    AdapterError::Call {
        operation: "indexer",
        class: ErrorClass::Fatal,
        message,
    }
}
