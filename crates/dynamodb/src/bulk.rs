//! Writing many items at once with BatchWriteItem: the demo's items, the test bench's loads and
//! the expiry queue's entries; and running any calls over chunks of items, a few in flight (the
//! bench's raw delete rate uses it too). Nothing here is on the delete path.

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
    in_flight(
        &items,
        PER_CALL,
        IN_FLIGHT,
        |chunk| {
            let dynamo = dynamo.clone();
            let table = table.to_string();
            async move { write_chunk(&dynamo, &table, chunk).await }
        },
        |(n, consumed)| {
            units += consumed;
            written(n);
        },
        |e| failed(e.to_string()),
    )
    .await?;
    Ok(units)
}

/// Runs `call` on `items` in chunks of `per_call`, `in_flight` chunks at a time, each in a task
/// of its own, and hands `done` each chunk's answer as it comes. Stops at the first error (the
/// tasks still running are dropped with the set, and so aborted); `task_failed` turns a task
/// that panicked into the caller's error.
pub async fn in_flight<T, R, E, Fut>(
    items: &[T],
    per_call: usize,
    in_flight: usize,
    call: impl Fn(Vec<T>) -> Fut,
    mut done: impl FnMut(R),
    task_failed: impl Fn(tokio::task::JoinError) -> E,
) -> Result<(), E>
where
    T: Clone,
    Fut: std::future::Future<Output = Result<R, E>> + Send + 'static,
    R: Send + 'static,
    E: Send + 'static,
{
    let mut chunks = items.chunks(per_call).map(<[T]>::to_vec);
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        while tasks.len() < in_flight {
            let Some(chunk) = chunks.next() else { break };
            tasks.spawn(call(chunk));
        }
        match tasks.join_next().await {
            Some(answer) => done(answer.map_err(&task_failed)??),
            None => return Ok(()),
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
