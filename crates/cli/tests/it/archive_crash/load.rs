//! The crash test's own DynamoDB calls: planting the load in batches, retried while DynamoDB
//! Local is busy with a killed daemon's deletes, warming a fresh instance up, and counting what
//! is left due.

use super::SHARDS;
use crate::support::{create_indexed_table, item, n, s};
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, PutRequest, ScalarAttributeType, WriteRequest,
};
use precise_ttl_dynamodb::Dynamo;
use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub(super) fn epoch_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// The monotonic instant of the epoch second `secs`.
pub(super) fn instant_of(secs: u64) -> Instant {
    let ms = i64::try_from(secs).unwrap() * 1000 - epoch_ms();
    Instant::now() + Duration::from_millis(u64::try_from(ms.max(0)).unwrap())
}

pub(super) type Item = HashMap<String, AttributeValue>;

/// Calls `call` until it succeeds, five retries at most. DynamoDB Local serves a table's
/// requests one at a time, so under this load (a daemon's 64 delete batches in flight, and those
/// of the one just killed, which DynamoDB Local still carries out) a request can wait past the
/// client's 10 s attempt timeout. Every call made through here is idempotent.
pub(super) async fn retried<
    T,
    E: std::fmt::Debug,
    F: std::future::Future<Output = Result<T, E>>,
>(
    what: &str,
    mut call: impl FnMut() -> F,
) -> T {
    let mut retries = 0;
    loop {
        match call().await {
            Ok(out) => return out,
            Err(e) if retries < 5 => {
                retries += 1;
                eprintln!("{what} failed, trying again: {e:?}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => panic!("{what}: {e:?}"),
        }
    }
}

/// Writes `requests` in BatchWriteItem calls of 25 from `writers` tasks at once, in order: task
/// k sends chunks k, k + writers, ... so the first requests land first.
pub(super) async fn write_all(
    dynamo: &Dynamo,
    table: &str,
    requests: Vec<WriteRequest>,
    writers: usize,
) {
    let chunks: Vec<Vec<WriteRequest>> = requests.chunks(25).map(<[_]>::to_vec).collect();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..writers {
        let mine: Vec<Vec<WriteRequest>> =
            chunks.iter().skip(w).step_by(writers).cloned().collect();
        let dynamo = dynamo.clone();
        let table = table.to_string();
        tasks.spawn(async move {
            for mut chunk in mine {
                loop {
                    let out = retried("batch write", || {
                        dynamo
                            .write
                            .batch_write_item()
                            .request_items(&table, chunk.clone())
                            .send()
                    })
                    .await;
                    match out.unprocessed_items.and_then(|mut u| u.remove(&table)) {
                        Some(rest) if !rest.is_empty() => chunk = rest,
                        _ => break,
                    }
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

pub(super) fn puts(items: Vec<Item>) -> Vec<WriteRequest> {
    items
        .into_iter()
        .map(|i| {
            WriteRequest::builder()
                .put_request(PutRequest::builder().set_item(Some(i)).build().unwrap())
                .build()
        })
        .collect()
}

/// A fresh DynamoDB Local runs slowly for its first few thousand operations: put and delete
/// 4 000 items in a table of the same shape before measuring anything.
pub(super) async fn warm_up(dynamo: &Dynamo) {
    let table = "precise-ttl-crash-warm-up";
    create_indexed_table(dynamo, table, "ttl_shard", ScalarAttributeType::N).await;
    let keys: Vec<String> = (0..4_000).map(|i| format!("warm-{i}")).collect();
    let items = keys
        .iter()
        .enumerate()
        .map(|(i, k)| item(k, &[("ttl", n(4_000_000_000u64)), ("ttl_shard", n(i % 16))]))
        .collect();
    write_all(dynamo, table, puts(items), 4).await;
    let deletes = keys
        .iter()
        .map(|k| {
            WriteRequest::builder()
                .delete_request(DeleteRequest::builder().key("pk", s(k)).build().unwrap())
                .build()
        })
        .collect();
    write_all(dynamo, table, deletes, 4).await;
    dynamo
        .query
        .delete_table()
        .table_name(table)
        .send()
        .await
        .expect("delete the warm-up table");
}

pub(super) async fn exists(dynamo: &Dynamo, table: &str, key: &str) -> bool {
    retried("get item", || {
        dynamo
            .query
            .get_item()
            .table_name(table)
            .key("pk", s(key))
            .consistent_read(true)
            .send()
    })
    .await
    .item
    .is_some()
}

/// Items of the expiry index due now, over every shard the daemon reads.
pub(super) async fn due_count(dynamo: &Dynamo, table: &str) -> u64 {
    let now = epoch_ms() / 1000;
    let mut total = 0;
    for shard in 0..SHARDS {
        let mut start = None;
        loop {
            let out = retried("count due items", || {
                dynamo
                    .query
                    .query()
                    .table_name(table)
                    .index_name("precise-ttl")
                    .key_condition_expression("#s = :s AND #t <= :now")
                    .expression_attribute_names("#s", "ttl_shard")
                    .expression_attribute_names("#t", "ttl")
                    .expression_attribute_values(":s", n(shard))
                    .expression_attribute_values(":now", n(now))
                    .select(aws_sdk_dynamodb::types::Select::Count)
                    .set_exclusive_start_key(start.clone())
                    .send()
            })
            .await;
            total += u64::try_from(out.count).unwrap();
            start = out.last_evaluated_key;
            if start.is_none() {
                break;
            }
        }
    }
    total
}
