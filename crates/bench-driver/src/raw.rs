//! The store's raw conditional-delete rates on this machine, the yardstick for the sweeper's
//! throughput.

use crate::config::BenchIndex;
use crate::error::BenchError;
use crate::items::{ItemWriter, epoch_seconds};
use precise_ttl_core::{DueWindow, TtlLayout};
use precise_ttl_dynamodb::bulk::{in_flight, put_all};
use precise_ttl_dynamodb::{DeleteMode, Dynamo, DynamoStore, IndexPartition, ItemKey};
use precise_ttl_engine::{Clock, DeleteOutcome, ExpiryStore, SystemClock};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RawRates {
    /// Items per second with one conditional DeleteItem per item, 64 in flight.
    pub single_per_s: f64,
    /// Items per second with PartiQL batches of 25, 8 in flight.
    pub batch_per_s: f64,
}

/// Loads items that are all due and deletes them as fast as the store allows, once per mode.
/// Unmeasured rounds before and after warm the store up: DynamoDB Local is slow on a table's
/// first few thousand operations, which would otherwise land in a measured window.
pub async fn measure(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    index: &BenchIndex,
    items: &ItemWriter,
    count: u64,
) -> Result<RawRates, BenchError> {
    match index {
        BenchIndex::Sharded => {
            let store = DynamoStore::open(dynamo.clone(), table, layout.clone()).await?;
            measure_on(store, dynamo, table, layout, items, count).await
        }
        BenchIndex::BlogWindow { attribute, .. } => {
            let layout = TtlLayout {
                shard_attribute: attribute.clone(),
                ..layout.clone()
            };
            let store =
                DynamoStore::open_blog_windows(dynamo.clone(), table, layout.clone()).await?;
            measure_on(store, dynamo, table, &layout, items, count).await
        }
        // The same conditional deletes by key, which the queue's store makes too; the bench
        // measures them before the table's stream is on, so the indexer never sees these items.
        BenchIndex::StreamQueue => {
            let store =
                DynamoStore::open_for_deletes(dynamo.clone(), table, layout.clone()).await?;
            measure_on(store, dynamo, table, layout, items, count).await
        }
    }
}

async fn measure_on<P: IndexPartition>(
    store: DynamoStore<P>,
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    items: &ItemWriter,
    count: u64,
) -> Result<RawRates, BenchError> {
    let store = Arc::new(store.with_delete_mode(DeleteMode::Batch));
    let due = SystemClock.now().saturating_sub(Duration::from_secs(60));
    let shards = layout.shards.get();
    let mut rates = Vec::new();
    for (round, batch, measured) in [
        ("warm", 1, false),
        ("single", 1, true),
        ("batch", 25, true),
        ("warm-2", 1, false),
    ] {
        let names: Vec<String> = (0..count).map(|i| format!("{round}-{i}")).collect();
        let written = names
            .iter()
            .map(|k| items.item(k, Some(epoch_seconds(due)), Some(fastrand::u16(0..shards))))
            .collect();
        put_all(dynamo, table, written, |_| {}).await?;
        let keys: Vec<ItemKey> = names
            .iter()
            .map(|k| ItemKey::new(vec![items.key(k)]))
            .collect();
        let started = Instant::now();
        let deleted = delete_all(Arc::clone(&store), keys, batch).await?;
        let secs = started.elapsed().as_secs_f64();
        if deleted != count {
            return Err(BenchError::RawIncomplete { deleted, count });
        }
        if measured {
            rates.push(count as f64 / secs.max(0.001));
        }
    }
    Ok(RawRates {
        single_per_s: rates[0],
        batch_per_s: rates[1],
    })
}

async fn delete_all<P: IndexPartition>(
    store: Arc<DynamoStore<P>>,
    keys: Vec<ItemKey>,
    batch: usize,
) -> Result<u64, BenchError> {
    let at_once = if batch == 1 { 64 } else { 8 };
    let deleted = Arc::new(AtomicU64::new(0));
    let call = |chunk: Vec<ItemKey>| {
        let store = Arc::clone(&store);
        let deleted = Arc::clone(&deleted);
        async move {
            let window = DueWindow::at(SystemClock.now());
            let results = if chunk.len() == 1 {
                vec![store.delete_if_due(&chunk[0], window).await]
            } else {
                store.delete_many_if_due(&chunk, window).await
            };
            for r in results {
                if r? == DeleteOutcome::Deleted {
                    deleted.fetch_add(1, Ordering::Relaxed);
                }
            }
            Ok::<(), BenchError>(())
        }
    };
    in_flight(&keys, batch, at_once, call, |()| {}, BenchError::from).await?;
    Ok(deleted.load(Ordering::Relaxed))
}
