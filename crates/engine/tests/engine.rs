//! The engine against the in-memory reference store: what a pass deletes, what it leaves, how it
//! retries and when it stops.

use precise_ttl_core::{Backoff, DueWindow, ErrorClass, Shard, ShardCount, Timestamp};
use precise_ttl_engine::memory::{Call, MemItem, MemTtl, MemoryStore};
use precise_ttl_engine::{
    Clock, DeleteOutcome, DuePage, ExpiryStore, StoreError, SweepConfig, SweepError, Sweeper,
};
use std::sync::Arc;
use std::time::Duration;

const NOW_S: i64 = 1_800_000_000;

struct FixedClock(Timestamp);
impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        self.0
    }
}

fn clock() -> Arc<FixedClock> {
    Arc::new(FixedClock(Timestamp::from_secs(NOW_S)))
}

fn config(shards: u64) -> SweepConfig {
    let mut c = SweepConfig::new(ShardCount::new(shards).unwrap());
    c.page_size = 7;
    c.concurrency = 5;
    c.backoff = Backoff {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(4),
        max_attempts: 4,
    };
    c
}

fn num(n: impl ToString, shard: u16) -> MemItem {
    MemItem {
        ttl: MemTtl::Number(n.to_string()),
        shard: Some(shard),
    }
}

#[tokio::test]
async fn deletes_every_due_item_across_pages_and_shards_and_nothing_else() {
    let store = Arc::new(MemoryStore::new());
    for i in 0..200u16 {
        store.put(format!("due-{i}"), num(NOW_S - i64::from(i), i % 4));
    }
    store.put("due-exactly-now", num(NOW_S, 0));
    store.put("due-decimal", num(format!("{}.999", NOW_S - 1), 1));
    store.put("future", num(NOW_S + 1, 0));
    store.put("future-by-a-ms", num(format!("{NOW_S}.001"), 0));
    store.put("millis", num(NOW_S * 1000, 0));
    store.put("negative", num(-5, 0));
    store.put("too-old", num(NOW_S - 6 * 365 * 86_400, 0));
    store.put(
        "string",
        MemItem {
            ttl: MemTtl::Other("S"),
            shard: Some(0),
        },
    );
    store.put(
        "no-ttl",
        MemItem {
            ttl: MemTtl::Missing,
            shard: Some(0),
        },
    );
    store.put(
        "no-shard",
        MemItem {
            ttl: MemTtl::Number((NOW_S - 10).to_string()),
            shard: None,
        },
    );
    store.put("shard-out-of-range", num(NOW_S - 10, 9));

    let report = Sweeper::new(Arc::clone(&store), clock(), config(4))
        .sweep_once()
        .await
        .unwrap();

    assert_eq!(report.deleted, 202);
    assert_eq!((report.skipped, report.errors), (0, 0));
    assert!(report.pages >= 200 / 7);
    for survivor in [
        "future",
        "future-by-a-ms",
        "millis",
        "negative",
        "too-old",
        "string",
        "no-ttl",
        "no-shard",
        "shard-out-of-range",
    ] {
        assert!(store.get(survivor).is_some(), "{survivor} must survive");
    }
    assert_eq!(store.len(), 9);
}

/// Extends the TTL of every item it returns, after the index read and before any delete: the
/// deterministic form of a writer racing the sweeper.
struct ExtendAfterQuery(MemoryStore);

impl ExpiryStore for ExtendAfterQuery {
    type Key = String;
    type Cursor = <MemoryStore as ExpiryStore>::Cursor;

    async fn due_page(
        &self,
        shard: Shard,
        window: DueWindow,
        cursor: Option<Self::Cursor>,
        limit: u32,
    ) -> Result<DuePage<String, Self::Cursor>, StoreError> {
        let page = self.0.due_page(shard, window, cursor, limit).await?;
        for item in &page.items {
            if item.key.starts_with("extended") {
                self.0.put(item.key.clone(), num(NOW_S + 3600, shard.0));
            }
        }
        Ok(page)
    }

    async fn delete_if_due(
        &self,
        key: &String,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        self.0.delete_if_due(key, window).await
    }
}

#[tokio::test]
async fn an_item_extended_between_query_and_delete_survives_and_counts_as_skipped() {
    let inner = MemoryStore::new();
    inner.put("extended-1", num(NOW_S - 1, 0));
    inner.put("plain", num(NOW_S - 1, 0));
    let store = Arc::new(ExtendAfterQuery(inner));
    let report = Sweeper::new(Arc::clone(&store), clock(), config(1))
        .sweep_once()
        .await
        .unwrap();
    assert_eq!((report.deleted, report.skipped), (1, 1));
    assert_eq!(store.0.get("extended-1"), Some(num(NOW_S + 3600, 0)));
    assert!(store.0.get("plain").is_none());
}

#[tokio::test]
async fn throttling_and_transient_errors_are_retried() {
    let store = Arc::new(MemoryStore::new());
    for i in 0..20 {
        store.put(format!("k{i}"), num(NOW_S - 1, 0));
    }
    store.inject(Call::Query, ErrorClass::Throttled, 2);
    store.inject(Call::Delete, ErrorClass::Throttled, 3);
    store.inject(Call::Delete, ErrorClass::Transient, 3);
    let report = Sweeper::new(Arc::clone(&store), clock(), config(1))
        .sweep_once()
        .await
        .unwrap();
    assert_eq!(report.deleted, 20);
    assert_eq!(report.errors, 0);
    assert_eq!(report.throttled, 5);
    assert!(store.is_empty());
}

#[tokio::test]
async fn deletes_that_keep_failing_are_counted_and_left_for_the_next_pass() {
    let store = Arc::new(MemoryStore::new());
    store.put("k", num(NOW_S - 1, 0));
    store.inject(Call::Delete, ErrorClass::Transient, 4);
    let sweeper = Sweeper::new(Arc::clone(&store), clock(), config(1));
    let report = sweeper.sweep_once().await.unwrap();
    assert_eq!((report.deleted, report.errors), (0, 1));
    assert_eq!(store.calls(Call::Delete), 4);
    assert!(store.get("k").is_some());
    let report = sweeper.sweep_once().await.unwrap();
    assert_eq!((report.deleted, report.errors), (1, 0));
}

#[tokio::test]
async fn a_fatal_error_stops_the_pass() {
    let store = Arc::new(MemoryStore::new());
    for i in 0..50 {
        store.put(format!("k{i}"), num(NOW_S - 1, 0));
    }
    store.inject(Call::Query, ErrorClass::Fatal, 1);
    let err = Sweeper::new(Arc::clone(&store), clock(), config(1))
        .sweep_once()
        .await
        .unwrap_err();
    let SweepError::Fatal(e) = err;
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(store.calls(Call::Query), 1, "a fatal error is not retried");
    assert_eq!(store.len(), 50);

    store.inject(Call::Delete, ErrorClass::Fatal, 1);
    assert!(
        Sweeper::new(Arc::clone(&store), clock(), config(1))
            .sweep_once()
            .await
            .is_err()
    );
}

#[tokio::test]
async fn an_index_that_stays_unreachable_is_fatal_after_the_retries() {
    let store = Arc::new(MemoryStore::new());
    store.put("k", num(NOW_S - 1, 0));
    store.inject(Call::Query, ErrorClass::Transient, 10);
    let result = Sweeper::new(Arc::clone(&store), clock(), config(1))
        .sweep_once()
        .await;
    assert!(matches!(result, Err(SweepError::Fatal(ref e)) if e.class == ErrorClass::Transient));
    assert_eq!(store.calls(Call::Query), 4);
}
