//! Writing many items at once with BatchWriteItem: the demo's items, the test bench's loads and
//! the expiry queue's entries. Nothing here is on the delete path.

use crate::connect::Dynamo;
use crate::error::AdapterError;
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, ReturnConsumedCapacity, WriteRequest};
use precise_ttl_core::ErrorClass;
use std::collections::HashMap;

/// One item as BatchWriteItem takes it.
pub type Item = HashMap<String, AttributeValue>;

/// BatchWriteItem's limit of requests per call.
const PER_CALL: usize = 25;

/// The first pause before unprocessed requests go again, and the longest.
const UNPROCESSED_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
const UNPROCESSED_PAUSE_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Calls in flight: enough to keep a local store busy without queueing behind the SDK's pool.
const IN_FLIGHT: usize = 4;

/// Writes `items` with BatchWriteItem, four requests of 25 in flight, until none is left
/// unprocessed. `written` is told how many each finished request wrote. Returns the write units
/// the table says it consumed (0 from a store that does not say).
pub async fn put_all(
    dynamo: &Dynamo,
    table: &str,
    items: Vec<Item>,
    mut written: impl FnMut(u64),
) -> Result<f64, AdapterError> {
    let mut units = 0.0;
    let mut chunks = items
        .chunks(PER_CALL)
        .map(|c| c.to_vec())
        .collect::<Vec<_>>()
        .into_iter();
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.len() < IN_FLIGHT {
            let Some(chunk) = chunks.next() else { break };
            let dynamo = dynamo.clone();
            let table = table.to_string();
            tasks.spawn(async move { write_chunk(&dynamo, &table, chunk).await });
        }
        match tasks.join_next().await {
            Some(done) => {
                let (n, consumed) = done.map_err(|e| failed(e.to_string()))??;
                units += consumed;
                written(n);
            }
            None => return Ok(units),
        }
    }
}

/// Writes one chunk; returns how many items and the units consumed.
async fn write_chunk(
    dynamo: &Dynamo,
    table: &str,
    chunk: Vec<Item>,
) -> Result<(u64, f64), AdapterError> {
    let n = chunk.len() as u64;
    let mut requests = Vec::with_capacity(chunk.len());
    for item in chunk {
        let put = PutRequest::builder()
            .set_item(Some(item))
            .build()
            .map_err(|e| failed(e.to_string()))?;
        requests.push(WriteRequest::builder().put_request(put).build());
    }
    let mut pause = UNPROCESSED_PAUSE;
    let mut units = 0.0;
    loop {
        let out = dynamo
            .write
            .batch_write_item()
            .request_items(table, requests)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await
            .map_err(|e| {
                AdapterError::from_sdk("BatchWriteItem", &dynamo.describe_endpoint(), e)
            })?;
        units += out
            .consumed_capacity()
            .iter()
            .filter_map(|c| c.capacity_units())
            .sum::<f64>();
        requests = out
            .unprocessed_items
            .and_then(|mut u| u.remove(table))
            .unwrap_or_default();
        if requests.is_empty() {
            return Ok((n, units));
        }
        // What the table left unprocessed goes again after a growing pause, as AWS advises for
        // BatchWriteItem.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(UNPROCESSED_PAUSE_MAX);
    }
}

fn failed(message: String) -> AdapterError {
    AdapterError::Call {
        operation: "BatchWriteItem",
        class: ErrorClass::Fatal,
        message,
    }
}
