//! Inline capture: every successful expiry delete returns the item's old image (`ALL_OLD`, or
//! `RETURNING ALL OLD *` in a PartiQL batch: no extra read, no extra capacity), and its
//! [`ExpiryRecord`] goes to the archive sink before the delete is reported done. A slow sink
//! slows deletes; a failing one stops them with the reason (the item is gone, so its record must
//! not be dropped silently: `precise-ttl archive` recovers it from the stream).

use crate::record::{DeletedBy, ExpiryRecord};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_archive::Sink;
use precise_ttl_core::{ErrorClass, Expiry};
use precise_ttl_engine::{Clock, StoreError};
use std::collections::HashMap;
use std::sync::Arc;

type Item = HashMap<String, AttributeValue>;

/// Where one store's expiry records go.
#[derive(Clone)]
pub struct Archive {
    sink: Sink,
    table: String,
    ttl_attribute: String,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archive")
            .field("sink", &self.sink)
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl Archive {
    pub fn new(sink: Sink, table: &str, ttl_attribute: &str, clock: Arc<dyn Clock>) -> Archive {
        Archive {
            sink,
            table: table.to_string(),
            ttl_attribute: ttl_attribute.to_string(),
            clock,
        }
    }

    /// Makes the records of `deleted` (key, old image) durable.
    pub async fn record(&self, deleted: Vec<(Item, Item)>) -> Result<(), StoreError> {
        let now = self.clock.now();
        let lines = deleted
            .into_iter()
            .map(|(keys, old_image)| {
                let lag_ms = match old_image.get(&self.ttl_attribute) {
                    Some(AttributeValue::N(n)) => Expiry::parse_number(n)
                        .ok()
                        .map(|e| now.millis_since(e.at())),
                    _ => None,
                };
                ExpiryRecord {
                    table: self.table.clone(),
                    keys,
                    old_image,
                    deleted_at_ms: now.as_millis(),
                    sequence_number: None,
                    deleted_by: DeletedBy::PreciseTtl,
                    lag_ms,
                }
                .to_json()
                .to_string()
            })
            .collect();
        self.sink.write(lines).await.map_err(|e| {
            StoreError::new(
                ErrorClass::Fatal,
                format!("the archive failed, so deleting stops (records of deletes already made are on the table's stream: precise-ttl archive recovers them): {e}"),
            )
        })
    }
}
