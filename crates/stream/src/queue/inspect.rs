//! What `doctor` and `status` say about an expiry queue: how many entries are due, and a sample
//! of entries checked against their items — an entry whose item is gone, or whose item's TTL is
//! no longer the entry's, is harmless (the sweeper removes it when it reads it, without touching
//! the item), but many of them say the queue costs more than it should.

use super::{DUE, KEY, QueueTable};
use crate::stream_tail::StreamBacklog;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes};
use precise_ttl_core::Expiry;
use precise_ttl_core::queue::EntryKey;
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::{AdapterError, store_error};
use precise_ttl_dynamodb::item::ItemKey;
use precise_ttl_dynamodb::table::TableShape;
use precise_ttl_engine::StoreError;
use std::collections::HashMap;

/// The most keys one BatchGetItem takes.
const MAX_BATCH_GET: usize = 100;
/// Tries of a BatchGetItem's unprocessed keys before the sample gives up on them.
const GET_TRIES: usize = 5;

/// A sample of the queue's entries, each checked against its item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueSample {
    pub entries: u64,
    /// The item is there with the entry's TTL.
    pub live: u64,
    /// The item is gone (deleted by anyone): the entry waits for the sweeper to remove it.
    pub item_gone: u64,
    /// The item's TTL is no longer the entry's (extended, changed or removed): a newer entry
    /// has it, if it can come due.
    pub ttl_changed: u64,
    /// Items the store did not answer for within a few tries.
    pub unread: u64,
}

impl QueueTable {
    /// Reads up to `limit` entries (one Scan page) and their items in `table`, whose TTL is
    /// `ttl_attribute` and whose key attributes are `key_names`.
    pub async fn sample(
        &self,
        table: &str,
        ttl_attribute: &str,
        key_names: &[String],
        limit: u32,
    ) -> Result<QueueSample, StoreError> {
        let page = self
            .dynamo
            .query
            .scan()
            .table_name(&self.name)
            .limit(i32::try_from(limit).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| store_error("Scan", e))?;
        let mut sample = QueueSample::default();
        let mut wanted: Vec<(ItemKey, Option<Expiry>)> = Vec::new();
        for mut entry in page.items.unwrap_or_default() {
            let expiry = match entry.get(DUE) {
                Some(AttributeValue::S(sort)) => EntryKey::expiry_of(sort),
                _ => None,
            };
            let Some(AttributeValue::M(mut key)) = entry.remove(KEY) else {
                continue;
            };
            let attributes: Option<Vec<_>> = key_names
                .iter()
                .map(|n| key.remove(n).map(|v| (n.clone(), v)))
                .collect();
            if let Some(attributes) = attributes {
                sample.entries += 1;
                wanted.push((ItemKey::new(attributes), expiry));
            }
        }
        for chunk in wanted.chunks(MAX_BATCH_GET) {
            let found = self
                .get_items(table, ttl_attribute, key_names, chunk)
                .await?;
            for (key, expiry) in chunk {
                match found.get(key) {
                    Some(None) => sample.unread += 1,
                    None => sample.item_gone += 1,
                    Some(Some(item)) => {
                        let ttl = match item.get(ttl_attribute) {
                            Some(AttributeValue::N(n)) => Expiry::parse_number(n).ok(),
                            _ => None,
                        };
                        if ttl.is_some() && ttl == *expiry {
                            sample.live += 1;
                        } else {
                            sample.ttl_changed += 1;
                        }
                    }
                }
            }
        }
        Ok(sample)
    }

    /// The items of `keys` that exist, by key (`Some(None)`: not answered for).
    async fn get_items(
        &self,
        table: &str,
        ttl_attribute: &str,
        key_names: &[String],
        keys: &[(ItemKey, Option<Expiry>)],
    ) -> Result<HashMap<ItemKey, Option<HashMap<String, AttributeValue>>>, StoreError> {
        let mut names = HashMap::from([("#ttl".to_string(), ttl_attribute.to_string())]);
        let mut projection = vec!["#ttl".to_string()];
        for (i, name) in key_names.iter().enumerate() {
            names.insert(format!("#k{i}"), name.clone());
            projection.push(format!("#k{i}"));
        }
        let mut pending: Vec<HashMap<String, AttributeValue>> =
            keys.iter().map(|(k, _)| k.to_map()).collect();
        let mut found = HashMap::new();
        for _ in 0..GET_TRIES {
            if pending.is_empty() {
                break;
            }
            let request = KeysAndAttributes::builder()
                .set_keys(Some(std::mem::take(&mut pending)))
                .projection_expression(projection.join(", "))
                .set_expression_attribute_names(Some(names.clone()))
                .build()
                .map_err(|e| StoreError::new(precise_ttl_core::ErrorClass::Fatal, e.to_string()))?;
            let out = self
                .dynamo
                .query
                .batch_get_item()
                .request_items(table, request)
                .send()
                .await
                .map_err(|e| store_error("BatchGetItem", e))?;
            for item in out
                .responses
                .and_then(|mut r| r.remove(table))
                .unwrap_or_default()
            {
                found.insert(key_of(&item, key_names), Some(item));
            }
            pending = out
                .unprocessed_keys
                .and_then(|mut u| u.remove(table))
                .map(|k| k.keys)
                .unwrap_or_default();
        }
        for key in pending {
            found.insert(key_of(&key, key_names), None);
        }
        Ok(found)
    }
}

/// The expiry queue's parts, as `doctor` and `status` check them.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueParts {
    /// The application table's stream view type (`None`: no stream).
    pub stream_view: Option<String>,
    /// Whether that stream carries the new images the indexer needs.
    pub stream_usable: bool,
    /// Whether the queue table exists with the queue's keys.
    pub queue_present: bool,
    /// How far the indexer is behind the stream (`None` without a usable stream).
    pub indexer: Option<StreamBacklog>,
}

impl QueueParts {
    /// One line on the stream and the indexer, at `now` (epoch seconds).
    pub fn describe(&self, now: f64) -> String {
        let stream = match &self.stream_view {
            None => "no stream".to_string(),
            Some(view) => format!("stream {view}"),
        };
        let indexer = match &self.indexer {
            None => "the indexer cannot read it".to_string(),
            Some(b) if b.behind == 0 => format!(
                "indexer caught up on its {} stream shard(s)",
                b.shards
            ),
            Some(b) => format!(
                "indexer behind on {} of {} stream shard(s){}",
                b.behind,
                b.shards,
                b.oldest_unconsumed.map_or(String::new(), |t| format!(
                    ", the oldest record not indexed written about {:.0} s ago (the stream dates records to the second, DynamoDB Local to the minute)",
                    (now - t).max(0.0)
                ))
            ),
        };
        format!("{stream}; {indexer}")
    }

    /// What keeps items from being deleted on time: (kind, what to do), for `doctor`.
    pub fn problems(&self, table: &str, queue_table: &str) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !self.stream_usable {
            let why = match &self.stream_view {
                None => AdapterError::NoStream {
                    table: table.to_string(),
                },
                Some(view) => AdapterError::StreamView {
                    table: table.to_string(),
                    view: view.clone(),
                },
            };
            out.push(("stream_unusable", why.to_string()));
        }
        if !self.queue_present {
            out.push((
                "queue_missing",
                format!("the expiry queue table {queue_table:?} is missing (or has other keys): run `precise-ttl setup --table {table} --index-layout stream-queue`"),
            ));
        }
        out
    }
}

/// Reads the stream, the queue table and the indexer's checkpoints; changes nothing.
pub async fn parts(
    dynamo: &Dynamo,
    table: &str,
    queue_table: &str,
    checkpoint_table: &str,
) -> Result<QueueParts, AdapterError> {
    let (view, arn) = crate::stream::current_stream(dynamo, table).await?;
    let stream_usable = super::indexer::check_view(table, view.clone()).is_ok();
    let queue_present = match TableShape::describe(dynamo, queue_table).await? {
        Some(shape) => super::check_keys(&shape).is_ok(),
        None => false,
    };
    let indexer = match (stream_usable, arn) {
        (true, Some(arn)) => {
            Some(crate::stream_tail::backlog(dynamo, &arn, checkpoint_table).await?)
        }
        _ => None,
    };
    Ok(QueueParts {
        stream_view: view.map(|v| v.as_str().to_string()),
        stream_usable,
        queue_present,
        indexer,
    })
}

/// The key of an item (or of a key map), in the table's key order.
fn key_of(item: &HashMap<String, AttributeValue>, key_names: &[String]) -> ItemKey {
    ItemKey::new(
        key_names
            .iter()
            .filter_map(|n| item.get(n).map(|v| (n.clone(), v.clone())))
            .collect(),
    )
}
