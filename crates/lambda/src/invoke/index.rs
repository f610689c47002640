//! The function's environment as the expiry queue's indexer: a stream batch's entries written
//! to the queue table (what a batch holds and the rule are [`crate::index_event`]'s).

use super::{Environment, InvokeError};
use crate::config::{IndexLayout, LambdaConfig};
use crate::index_event::{IndexBatch, IndexError, changes, table_of};
use precise_ttl_dynamodb::{AdapterError, TableShape};
use precise_ttl_stream::queue::QueueTable;
use precise_ttl_stream::queue::indexer::write_entries;
use serde_json::Value;
use std::collections::BTreeMap;

impl Environment {
    /// What this function does with a stream batch, by its layout setting.
    pub fn stream_role(&self) -> Result<crate::config::StreamRole, InvokeError> {
        Ok(crate::config::stream_role(&self.env)?)
    }

    /// A DynamoDB Streams batch of the application table, as the expiry queue's indexer: its
    /// entries written, or an error (the mapping retries the batch). Settings come from the
    /// environment alone (a stream event carries none).
    pub async fn index_batch(&self, event: &Value) -> Result<IndexBatch, InvokeError> {
        let config = LambdaConfig::resolve(&self.env, &BTreeMap::new())?;
        let IndexLayout::StreamQueue { queue_table } = &config.index else {
            return Err(IndexError::NotQueue.into());
        };
        if let Some(stream_table) = crate::stream_event::stream_arn(event).and_then(table_of)
            && stream_table != config.table
        {
            return Err(IndexError::OtherTable {
                stream_table: stream_table.to_string(),
                table: config.table.clone(),
            }
            .into());
        }
        let (changes, mut batch) = changes(event, &config.layout.ttl_attribute)?;
        if changes.is_empty() {
            return Ok(batch);
        }
        let dynamo = self.dynamo.clone().map_err(InvokeError::Client)?;
        // The table's key names, partition key first, and the queue table checked: once per
        // execution environment (its settings do not change), then every batch writes only.
        let key_names = self
            .queue_keys
            .get_or_try_init(|| async {
                QueueTable::new(dynamo.clone(), queue_table).check().await?;
                Ok::<_, AdapterError>(
                    TableShape::require(&dynamo, &config.table)
                        .await?
                        .key_names(),
                )
            })
            .await?;
        let written = write_entries(
            &dynamo,
            queue_table,
            key_names,
            config.layout.shards,
            &changes,
        )
        .await?;
        batch.entries = written.entries;
        batch.unchanged = written.unchanged;
        batch.no_ttl = written.no_ttl;
        Ok(batch)
    }
}
