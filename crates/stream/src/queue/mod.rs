//! The expiry queue layout's store (issue 29): precise-ttl's own table of entries, one per
//! (item, expiry), read by the engine as it reads the shard index, for application tables whose
//! writers set only the TTL. The rules (which changes write an entry, the keys) are
//! [`precise_ttl_core::queue`]'s; this module holds the table and the [`ExpiryStore`].
//!
//! The queue table: partition key `shard` (Number), sort key `due` (String: the expiry's
//! milliseconds, zero-padded, `#`, the item key's digest), and `key`, a Map of the application
//! item's key attributes. A delete goes to the application item first, under the same condition
//! as the shard index's (its stored TTL still due), then removes the entry whatever the item's
//! answer: deleted, or no longer due (its TTL extended, removed or changed, or the item gone).
//! Application items are never written.

pub mod indexer;
pub mod inspect;
pub mod running;

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, BillingMode, DeleteRequest, KeyType, ReturnConsumedCapacity,
    ScalarAttributeType, WriteRequest,
};
use precise_ttl_core::queue::{EntryKey, KeyDigest, sort_bounds};
use precise_ttl_core::{DueWindow, ErrorClass, Expiry, Shard, ShardCount, TtlLayout};
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::{AdapterError, store_error};
use precise_ttl_dynamodb::item::ItemKey;
use precise_ttl_dynamodb::store::{DynamoStore, record_capacity, send_page};
use precise_ttl_dynamodb::table::{TableShape, attribute, key_element};
use precise_ttl_engine::{
    DeleteOutcome, DueItem, DuePage, DuePageOf, DueQueryOf, ExpiryStore, StoreError,
};
use std::collections::HashMap;

/// The queue table's partition key: the entry's shard.
pub const SHARD: &str = "shard";
/// The queue table's sort key: see [`precise_ttl_core::queue::EntryKey`].
pub const DUE: &str = "due";
/// The application item's key attributes, as a Map.
pub const KEY: &str = "key";

/// The most requests one BatchWriteItem takes.
const MAX_BATCH_WRITE: usize = 25;
/// Tries of a batch's unprocessed entry deletes; an entry left is harmless (read again, its
/// item's delete finds nothing due and it goes then).
const ENTRY_DELETE_TRIES: usize = 3;

/// The default name of the queue table of `table`: a setting's default, defined with the
/// setting in the engine (`run` and the Lambda name it alike).
pub use precise_ttl_engine::settings::default_queue_table;

/// One queue table.
#[derive(Debug, Clone)]
pub struct QueueTable {
    dynamo: Dynamo,
    name: String,
}

impl QueueTable {
    pub fn new(dynamo: Dynamo, name: &str) -> QueueTable {
        QueueTable {
            dynamo,
            name: name.to_string(),
        }
    }

    pub fn dynamo(&self) -> &Dynamo {
        &self.dynamo
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Creates the queue table (on demand) unless it exists with the queue's keys; a table of
    /// that name with other keys is an error, never changed. Returns whether it created it.
    pub async fn create(&self) -> Result<bool, AdapterError> {
        if let Some(shape) = TableShape::describe(&self.dynamo, &self.name).await? {
            return check_keys(&shape).map(|()| false);
        }
        self.dynamo
            .query
            .create_table()
            .table_name(&self.name)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attribute(SHARD, ScalarAttributeType::N))
            .attribute_definitions(attribute(DUE, ScalarAttributeType::S))
            .key_schema(key_element(SHARD, KeyType::Hash))
            .key_schema(key_element(DUE, KeyType::Range))
            .send()
            .await
            .map_err(|e| {
                AdapterError::from_sdk("CreateTable", &self.dynamo.describe_endpoint(), e)
            })?;
        // Setup's next step (backfill, run) writes to it at once.
        precise_ttl_dynamodb::control::wait_active(
            &self.dynamo,
            &self.name,
            "the expiry queue table",
        )
        .await?;
        Ok(true)
    }

    /// Checks that the queue table exists with the queue's keys (one DescribeTable).
    pub async fn check(&self) -> Result<(), AdapterError> {
        check_keys(&TableShape::require(&self.dynamo, &self.name).await?)
    }

    /// Writes the entry of `item` expiring at `expiry` (idempotent: the same item and expiry
    /// always make the same entry).
    pub async fn put(
        &self,
        item: &ItemKey,
        expiry: Expiry,
        shards: ShardCount,
    ) -> Result<(), StoreError> {
        self.dynamo
            .write
            .put_item()
            .table_name(&self.name)
            .set_item(Some(entry_item(item, expiry, shards)))
            .send()
            .await
            .map_err(|e| store_error("PutItem", e))?;
        Ok(())
    }

    /// Entries of `shard` whose expiry lies in `window`, counted page by page, at most
    /// `max_pages` pages.
    pub async fn count_between(
        &self,
        shard: Shard,
        window: DueWindow,
        max_pages: Option<u64>,
    ) -> Result<precise_ttl_dynamodb::count::DueCount, StoreError> {
        precise_ttl_dynamodb::count::count_query(
            |start| self.due_query(shard, window).set_exclusive_start_key(start),
            max_pages,
        )
        .await
    }

    /// The Query of `shard`'s entries whose expiry lies in `window`, oldest first.
    pub fn due_query(&self, shard: Shard, window: DueWindow) -> QueryFluentBuilder {
        let (low, high) = sort_bounds(window);
        self.dynamo
            .query
            .query()
            .table_name(&self.name)
            .key_condition_expression("#shard = :shard AND #due BETWEEN :low AND :high")
            .expression_attribute_names("#shard", SHARD)
            .expression_attribute_names("#due", DUE)
            .expression_attribute_values(":shard", AttributeValue::N(shard.0.to_string()))
            .expression_attribute_values(":low", AttributeValue::S(low))
            .expression_attribute_values(":high", AttributeValue::S(high))
    }

    /// Removes entries; what a batch leaves unprocessed is tried again a few times, then left
    /// (see [`ENTRY_DELETE_TRIES`]).
    async fn delete_entries(&self, entries: Vec<(Shard, String)>) {
        for chunk in entries.chunks(MAX_BATCH_WRITE) {
            let mut requests: Vec<WriteRequest> = chunk
                .iter()
                .map(|(shard, due)| {
                    let delete = DeleteRequest::builder()
                        .key(SHARD, AttributeValue::N(shard.0.to_string()))
                        .key(DUE, AttributeValue::S(due.clone()))
                        .build()
                        .expect("the key is set");
                    WriteRequest::builder().delete_request(delete).build()
                })
                .collect();
            for _ in 0..ENTRY_DELETE_TRIES {
                let answer = self
                    .dynamo
                    .write
                    .batch_write_item()
                    .request_items(&self.name, requests.clone())
                    .return_consumed_capacity(ReturnConsumedCapacity::Total)
                    .send()
                    .await;
                match answer {
                    Ok(out) => {
                        for c in out.consumed_capacity() {
                            record_capacity("delete", c.capacity_units());
                        }
                        requests = out
                            .unprocessed_items
                            .and_then(|mut u| u.remove(&self.name))
                            .unwrap_or_default();
                        if requests.is_empty() {
                            break;
                        }
                    }
                    Err(e) => {
                        let e = store_error("BatchWriteItem", e);
                        tracing::warn!(queue = %self.name, error = %e, "queue entries not removed; they go when read again");
                        break;
                    }
                }
            }
        }
    }
}

pub fn check_keys(shape: &TableShape) -> Result<(), AdapterError> {
    let ok = shape.partition.name == SHARD
        && shape.attribute_types.get(SHARD).map(String::as_str) == Some("N")
        && shape.sort.as_ref().is_some_and(|s| s.name == DUE)
        && shape.attribute_types.get(DUE).map(String::as_str) == Some("S");
    if ok {
        Ok(())
    } else {
        Err(AdapterError::QueueTableKeys {
            table: shape.name.clone(),
            found: shape.describe_key(),
        })
    }
}

/// The entry of `item` expiring at `expiry`.
pub fn entry_key(item: &ItemKey, expiry: Expiry, shards: ShardCount) -> EntryKey {
    let sort = item
        .attributes()
        .get(1)
        .map(|(_, v)| precise_ttl_dynamodb::item::key_bytes(v));
    EntryKey::new(
        KeyDigest::of(&item.partition_bytes(), sort.as_deref()),
        expiry,
        shards,
    )
}

/// The queue entry of `item` expiring at `expiry`, as an item of the queue table.
fn entry_item(
    item: &ItemKey,
    expiry: Expiry,
    shards: ShardCount,
) -> HashMap<String, AttributeValue> {
    let entry = entry_key(item, expiry, shards);
    queue_item(&QueueKey {
        item: item.clone(),
        shard: entry.shard,
        due: entry.sort,
    })
}

/// `entry` as an item of the queue table.
fn queue_item(entry: &QueueKey) -> HashMap<String, AttributeValue> {
    HashMap::from([
        (
            SHARD.to_string(),
            AttributeValue::N(entry.shard.0.to_string()),
        ),
        (DUE.to_string(), AttributeValue::S(entry.due.clone())),
        (KEY.to_string(), AttributeValue::M(entry.item.to_map())),
    ])
}

/// An entry as the engine handles it: the application item's key and where its entry lies.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueKey {
    pub item: ItemKey,
    pub shard: Shard,
    pub due: String,
}

/// The engine's store for the queue layout.
#[derive(Debug, Clone)]
pub struct QueueStore {
    items: DynamoStore<Shard>,
    queue: QueueTable,
    key_names: Vec<String>,
}

impl QueueStore {
    /// Checks the application table and the queue table, then returns a store ready to sweep.
    pub async fn open(
        dynamo: Dynamo,
        table: &str,
        queue_table: &str,
        layout: TtlLayout,
    ) -> Result<QueueStore, AdapterError> {
        let shape = TableShape::require(&dynamo, queue_table).await?;
        check_keys(&shape)?;
        // One description of the application table serves the keys and the deletes.
        let items = TableShape::require(&dynamo, table).await?;
        let key_names = items.key_names();
        Ok(QueueStore {
            items: DynamoStore::from_shape(dynamo.clone(), table, &items, layout),
            queue: QueueTable::new(dynamo, queue_table),
            key_names,
        })
    }

    /// The application table's deletes (delete mode, archive) are configured on it.
    pub fn map_items(mut self, f: impl FnOnce(DynamoStore<Shard>) -> DynamoStore<Shard>) -> Self {
        self.items = f(self.items);
        self
    }

    /// The application table's write capacity (the deletes' budget is the table's).
    pub fn write_capacity(&self) -> precise_ttl_core::capacity::WriteCapacity {
        self.items.write_capacity()
    }

    fn item_of(&self, mut raw: HashMap<String, AttributeValue>) -> Option<QueueKey> {
        let shard = match raw.get(SHARD) {
            Some(AttributeValue::N(n)) => Shard(n.parse().ok()?),
            _ => return None,
        };
        let due = match raw.remove(DUE) {
            Some(AttributeValue::S(s)) => s,
            _ => return None,
        };
        let mut key = match raw.remove(KEY) {
            Some(AttributeValue::M(m)) => m,
            _ => return None,
        };
        let attributes: Option<Vec<_>> = self
            .key_names
            .iter()
            .map(|name| key.remove(name).map(|v| (name.clone(), v)))
            .collect();
        Some(QueueKey {
            item: ItemKey::new(attributes?),
            shard,
            due,
        })
    }

    async fn settle(&self, keys: &[QueueKey], outcomes: &[Result<DeleteOutcome, StoreError>]) {
        let done: Vec<(Shard, String)> = keys
            .iter()
            .zip(outcomes)
            .filter(|(_, outcome)| outcome.is_ok())
            .map(|(key, _)| (key.shard, key.due.clone()))
            .collect();
        if !done.is_empty() {
            self.queue.delete_entries(done).await;
        }
    }
}

impl ExpiryStore for QueueStore {
    type Key = QueueKey;
    type Cursor = HashMap<String, AttributeValue>;
    type Partition = Shard;

    async fn due_page(&self, query: DueQueryOf<'_, Self>) -> Result<DuePageOf<Self>, StoreError> {
        let request = self.queue.due_query(*query.partition, query.window);
        let out = send_page(request, query.cursor, query.limit).await?;
        let mut items = Vec::with_capacity(out.items().len());
        for raw in out.items.unwrap_or_default() {
            let key = self.item_of(raw);
            let expiry = key.as_ref().and_then(|k| EntryKey::expiry_of(&k.due));
            match (key, expiry) {
                (Some(key), Some(expiry)) => items.push(DueItem { key, expiry }),
                _ => {
                    return Err(StoreError::new(
                        ErrorClass::Fatal,
                        format!(
                            "queue table {:?} holds an entry that is not one of ours (its keys, or its {KEY:?} map without the table's key)",
                            self.queue.name
                        ),
                    ));
                }
            }
        }
        Ok(DuePage {
            items,
            next: out.last_evaluated_key,
        })
    }

    async fn delete_if_due(
        &self,
        key: &QueueKey,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        let outcome = self.items.delete_if_due(&key.item, window).await;
        self.settle(std::slice::from_ref(key), std::slice::from_ref(&outcome))
            .await;
        outcome
    }

    async fn delete_many_if_due(
        &self,
        keys: &[QueueKey],
        window: DueWindow,
    ) -> Vec<Result<DeleteOutcome, StoreError>> {
        let items: Vec<ItemKey> = keys.iter().map(|k| k.item.clone()).collect();
        let outcomes = self.items.delete_many_if_due(&items, window).await;
        self.settle(keys, &outcomes).await;
        outcomes
    }

    fn max_batch(&self) -> usize {
        self.items.max_batch()
    }
}
