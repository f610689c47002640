//! The expiry queue's indexer: tails the application table's stream ([`crate::stream_tail`],
//! with checkpoints, so a restart loses nothing and skips nothing) and writes one queue entry
//! for every insert or change whose new image has a TTL that can come due and differs from the
//! old image's ([`precise_ttl_core::queue::decide`]). A page is checkpointed past only once its
//! entries are written.
//!
//! The records → entries rule is [`entries_for`] and the write [`write_entries`], shared with
//! the Lambda function, which is handed the stream's records by an event source mapping instead
//! of tailing the stream (the mapping keeps the checkpoints).
//!
//! With a stream of new images only (`NEW_IMAGE`) the old TTL is unknown, so every write of an
//! item with a TTL writes its entry again (the same entry: harmless, one write unit); with new
//! and old images (`NEW_AND_OLD_IMAGES`) a write that leaves the TTL as it was writes nothing.

use super::{QueueKey, QueueTable, entry_key, queue_item};
use crate::archive_stream::convert::convert;
use crate::stream_tail::{PageConsumer, StreamTail};
use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, OperationType, Record};
use precise_ttl_core::queue::{INDEXER_BUCKETS, stream_bucket};
use precise_ttl_core::queue::{Indexing, SkipReason, decide};
use precise_ttl_core::{ErrorClass, ShardCount, Timestamp};
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::AdapterError;
use precise_ttl_dynamodb::item::{ItemKey, ttl_value};
use precise_ttl_dynamodb::lease::LeaseTable;
use precise_ttl_dynamodb::table::TableShape;
use precise_ttl_engine::Clock;
use precise_ttl_engine::lease::{LeaseConfig, Leases};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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

impl IndexerReport {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: IndexerReport) {
        self.entries += other.entries;
        self.no_ttl += other.no_ttl;
        self.unchanged += other.unchanged;
    }
}

/// One insert or change of an application item as its stream record tells it (a REMOVE is no
/// change to index): the input of [`entries_for`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TtlChange {
    /// The record's `Keys`: the item's key attributes, by name.
    pub keys: HashMap<String, AttributeValue>,
    /// The old image's TTL attribute; `None` without an old image (an insert, or a stream of new
    /// images only) or without the attribute in it: both mean "not this expiry already".
    pub old_ttl: Option<AttributeValue>,
    /// The new image's TTL attribute; `None` when the new image has none.
    pub new_ttl: Option<AttributeValue>,
}

/// The queue entries `changes` call for at `now` ([`decide`]), each once, in the order of the
/// changes, and the counts. `key_names` are the application table's key attributes, partition
/// key first (the entry's digest and shard depend on which is which, and a record's `Keys` map
/// does not say). A change that writes an entry without every key attribute in its `Keys` is an
/// error: the records are not the table's.
pub fn entries_for(
    changes: &[TtlChange],
    key_names: &[String],
    shards: ShardCount,
    now: Timestamp,
) -> Result<(Vec<QueueKey>, IndexerReport), AdapterError> {
    let mut report = IndexerReport::default();
    let mut entries: Vec<QueueKey> = Vec::new();
    // An item whose TTL goes A, B, A within one batch, or any write of it on a stream of new
    // images only, calls for the same entry twice: one BatchWriteItem refuses a key twice.
    let mut seen = std::collections::HashSet::new();
    for change in changes {
        let new = ttl_value(change.new_ttl.as_ref());
        let old = ttl_value(change.old_ttl.as_ref());
        match decide(Some(&old), &new, now) {
            Indexing::Put(expiry) => {
                let attributes: Option<Vec<_>> = key_names
                    .iter()
                    .map(|name| change.keys.get(name).map(|v| (name.clone(), v.clone())))
                    .collect();
                let Some(attributes) = attributes else {
                    return Err(fatal(format!(
                        "a stream record lacks the table's key attributes {key_names:?} (its keys: {:?})",
                        change.keys.keys().collect::<BTreeSet<_>>()
                    )));
                };
                let item = ItemKey::new(attributes);
                let entry = entry_key(&item, expiry, shards);
                if seen.insert((entry.shard, entry.sort.clone())) {
                    entries.push(QueueKey {
                        item,
                        shard: entry.shard,
                        due: entry.sort,
                    });
                }
            }
            Indexing::Skip(SkipReason::Unchanged) => report.unchanged += 1,
            Indexing::Skip(SkipReason::NoTtl | SkipReason::TooOld) => report.no_ttl += 1,
        }
    }
    report.entries = entries.len() as u64;
    Ok((entries, report))
}

/// Writes the entries `changes` call for into `queue` ([`entries_for`], at the store's clock),
/// in BatchWriteItem calls until none is left unprocessed; returns once every entry is durable.
/// Entries are idempotent: a batch written again (a retry after a failure) changes nothing.
pub async fn write_entries(
    dynamo: &Dynamo,
    queue: &str,
    key_names: &[String],
    shards: ShardCount,
    changes: &[TtlChange],
) -> Result<IndexerReport, AdapterError> {
    let now = dynamo.store_clock.now();
    let (entries, report) = entries_for(changes, key_names, shards, now)?;
    let items = entries.iter().map(queue_item).collect();
    let units = precise_ttl_dynamodb::bulk::put_all(dynamo, queue, items, |_| {}).await?;
    precise_ttl_dynamodb::store::record_capacity("queue_put", Some(units));
    Ok(report)
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
        let changes: Vec<TtlChange> = records
            .iter()
            .filter(|r| {
                matches!(
                    r.event_name(),
                    Some(OperationType::Insert | OperationType::Modify)
                )
            })
            .filter_map(|r| r.dynamodb())
            // Without a new image there is nothing to index (the stream's view is checked when
            // the indexer opens: this is a record of another shape, left as before).
            .filter_map(|change| {
                let ttl = |image: &HashMap<String, StreamValue>| {
                    image.get(&self.ttl_attribute).map(convert)
                };
                Some(TtlChange {
                    keys: change
                        .keys()
                        .into_iter()
                        .flatten()
                        .map(|(name, v)| (name.clone(), convert(v)))
                        .collect(),
                    old_ttl: change.old_image().and_then(ttl),
                    new_ttl: ttl(change.new_image()?),
                })
            })
            .collect();
        let written = write_entries(
            &self.dynamo,
            self.queue.name(),
            &self.key_names,
            self.shards,
            &changes,
        )
        .await?;
        self.report.add(written);
        Ok(())
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
pub fn check_view(table: &str, view: Option<StreamViewType>) -> Result<(), AdapterError> {
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

/// How many of the indexer's lease buckets each worker holds now, for `status` (`None`: no
/// lease table, so no fleet).
pub async fn indexer_owners(
    dynamo: &Dynamo,
    lease_table: &str,
    table: &str,
) -> Result<Option<BTreeMap<String, usize>>, AdapterError> {
    let leases = match LeaseTable::open(dynamo.clone(), lease_table, table, LEASE_SCOPE).await {
        Ok(leases) => leases,
        Err(AdapterError::LeaseTableMissing { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut owners = BTreeMap::new();
    let all = leases.all().await.map_err(|e| AdapterError::Call {
        operation: "Query",
        class: e.class,
        message: e.message,
    })?;
    for lease in all {
        if let Some(owner) = lease.record.owner {
            *owners.entry(owner).or_default() += 1;
        }
    }
    Ok(Some(owners))
}

fn fatal(message: String) -> AdapterError {
    AdapterError::Call {
        operation: "indexer",
        class: ErrorClass::Fatal,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_secs(1_800_000_000);

    fn change(pk: &str, old: Option<&str>, new: Option<&str>) -> TtlChange {
        let n = |v: &str| AttributeValue::N(v.to_string());
        TtlChange {
            keys: HashMap::from([
                ("pk".to_string(), AttributeValue::S(pk.to_string())),
                ("sk".to_string(), n("7")),
            ]),
            old_ttl: old.map(n),
            new_ttl: new.map(n),
        }
    }

    fn names() -> Vec<String> {
        vec!["pk".into(), "sk".into()]
    }

    #[test]
    fn changes_write_one_entry_per_new_expiry_and_count_the_rest() {
        let shards = ShardCount::new(8).unwrap();
        let changes = [
            change("a", None, Some("1800000060")),
            change("a", Some("1800000060"), Some("1800000120")),
            change("a", Some("1800000120"), Some("1800000120")),
            change("b", Some("1800000060"), None),
            change("c", None, Some("1500000000")),
            // The first entry again (A, B, A in one batch): written once.
            change("a", Some("1800000120"), Some("1800000060")),
        ];
        let (entries, report) = entries_for(&changes, &names(), shards, NOW).unwrap();
        assert_eq!(
            report,
            IndexerReport {
                entries: 2,
                no_ttl: 2,
                unchanged: 1
            }
        );
        assert_eq!(entries.len(), 2);
        let item = &entries[0].item;
        // Partition key first, whatever the order of the record's `Keys`.
        assert_eq!(item.attributes()[0].0, "pk");
        let expected = entry_key(
            item,
            precise_ttl_core::Expiry::parse_number("1800000060").unwrap(),
            shards,
        );
        assert_eq!(
            (entries[0].shard, &entries[0].due),
            (expected.shard, &expected.sort)
        );
        assert!(entries[1].due > entries[0].due);
    }

    #[test]
    fn a_change_without_the_tables_keys_is_an_error_only_when_it_writes() {
        let shards = ShardCount::new(8).unwrap();
        let mut keyless = change("a", None, Some("1800000060"));
        keyless.keys.remove("sk");
        let err = entries_for(&[keyless.clone()], &names(), shards, NOW).unwrap_err();
        assert!(err.to_string().contains("\"sk\""), "{err}");
        keyless.new_ttl = None;
        assert!(entries_for(&[keyless], &names(), shards, NOW).is_ok());
    }
}
