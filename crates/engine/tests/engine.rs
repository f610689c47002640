//! The engine against the in-memory reference store: what a pass deletes, what it leaves, how it
//! retries and when it stops.

use precise_ttl_core::{Backoff, DueWindow, ErrorClass, Shard, ShardCount, Timestamp};
use precise_ttl_engine::memory::{Call, MemItem, MemTtl, MemoryStore};
use precise_ttl_engine::{
    Clock, DeleteOutcome, DueItem, DuePage, DuePageOf, DueQuery, DueQueryOf, ExpiryStore,
    SharedPartitioning, StoreError, SweepConfig, SweepError, Sweeper, TokioClock,
};
use std::sync::Arc;
use std::time::Duration;

const NOW_S: i64 = 1_800_000_000;

/// Wall time from `NOW_S` on, moving with tokio's clock: a pass's admission times its retries by
/// it, and the tests take milliseconds, so an item due a second from `NOW_S` stays not due.
fn clock() -> Arc<TokioClock> {
    Arc::new(TokioClock::starting_at(Timestamp::from_secs(NOW_S)))
}

fn shards(n: u64) -> SharedPartitioning<Shard> {
    Arc::new(ShardCount::new(n).unwrap())
}

fn config() -> SweepConfig {
    SweepConfig {
        page_size: 7,
        concurrency: 5,
        backoff: Backoff {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(4),
            max_attempts: 4,
        },
        // The fault tests count calls; stray probing has its own test.
        probe_strays: false,
        ..SweepConfig::default()
    }
}

/// The reference store with `count` items, `k0` up, due a second ago on shard 0.
fn due_now(count: usize) -> Arc<MemoryStore> {
    let store = Arc::new(MemoryStore::new());
    for i in 0..count {
        store.put(format!("k{i}"), num(NOW_S - 1, 0));
    }
    store
}

fn num(n: impl ToString, shard: u16) -> MemItem {
    MemItem {
        ttl: MemTtl::Number(n.to_string()),
        shard: Some(shard),
    }
}

// Paused: the pass's window is taken from a clock that starts at `NOW_S`; on a loaded machine a
// real millisecond between the two made the item due 1 ms after `NOW_S` due as well.
#[tokio::test(start_paused = true)]
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

    let report = Sweeper::new(Arc::clone(&store), clock(), shards(4), config())
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

/// What a test does after each index read: change the store, or fail the read.
type AfterQuery =
    Box<dyn Fn(&MemoryStore, Shard, &[DueItem<String>]) -> Result<(), StoreError> + Send + Sync>;

/// Where a read of a partition goes: a shard of the reference store and the part of the
/// window to read there, or `None` for an empty page.
type Route<P> = Box<dyn Fn(&P, DueWindow) -> Option<(Shard, DueWindow)> + Send + Sync>;

/// What a delete answers, given the reference store's answer.
type AfterDelete = Box<
    dyn Fn(Result<DeleteOutcome, StoreError>) -> Result<DeleteOutcome, StoreError> + Send + Sync,
>;

/// The reference store behind hooks: the one test double of these tests, so that each test
/// says only what differs from the reference store. A hook after every index read is the
/// deterministic form of a writer racing the sweeper, or of a read that fails for some shards
/// only; a hook on the deletes' answers loses one; a route reads another kind of partition
/// (a window index's labels) off the reference store's shards.
struct Hooked<P = Shard> {
    inner: MemoryStore,
    route: Route<P>,
    after_query: AfterQuery,
    after_delete: AfterDelete,
}

impl Hooked {
    /// On the reference store's own shards, nothing hooked yet.
    fn new(inner: MemoryStore) -> Hooked {
        Hooked::routed(inner, Box::new(|shard, window| Some((*shard, window))))
    }
}

impl<P> Hooked<P> {
    fn routed(inner: MemoryStore, route: Route<P>) -> Hooked<P> {
        Hooked {
            inner,
            route,
            after_query: Box::new(|_, _, _| Ok(())),
            after_delete: Box::new(|outcome| outcome),
        }
    }

    fn after_query(self, after_query: AfterQuery) -> Hooked<P> {
        Hooked {
            after_query,
            ..self
        }
    }

    fn after_delete(self, after_delete: AfterDelete) -> Hooked<P> {
        Hooked {
            after_delete,
            ..self
        }
    }
}

impl<P> ExpiryStore for Hooked<P>
where
    P: Clone + Send + Sync + std::fmt::Debug + std::fmt::Display + 'static,
{
    type Key = String;
    type Cursor = <MemoryStore as ExpiryStore>::Cursor;
    type Partition = P;

    async fn due_page(&self, query: DueQueryOf<'_, Self>) -> Result<DuePageOf<Self>, StoreError> {
        let Some((shard, window)) = (self.route)(query.partition, query.window) else {
            return Ok(DuePage::empty());
        };
        let routed = DueQuery {
            partition: &shard,
            window,
            cursor: query.cursor,
            limit: query.limit,
        };
        let page = self.inner.due_page(routed).await?;
        (self.after_query)(&self.inner, shard, &page.items)?;
        Ok(page)
    }

    async fn delete_if_due(
        &self,
        key: &String,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        (self.after_delete)(self.inner.delete_if_due(key, window).await)
    }
}

#[tokio::test]
async fn an_item_extended_between_query_and_delete_survives_and_counts_as_skipped() {
    let inner = MemoryStore::new();
    inner.put("extended-1", num(NOW_S - 1, 0));
    inner.put("plain", num(NOW_S - 1, 0));
    // Extends the TTL of every "extended" item a read returns, before any delete.
    let store = Arc::new(
        Hooked::new(inner).after_query(Box::new(|store, shard, items| {
            for item in items.iter().filter(|i| i.key.starts_with("extended")) {
                store.put(item.key.clone(), num(NOW_S + 3600, shard.0));
            }
            Ok(())
        })),
    );
    let report = Sweeper::new(Arc::clone(&store), clock(), shards(1), config())
        .sweep_once()
        .await
        .unwrap();
    assert_eq!((report.deleted, report.skipped), (1, 1));
    assert_eq!(store.inner.get("extended-1"), Some(num(NOW_S + 3600, 0)));
    assert!(store.inner.get("plain").is_none());
}

#[tokio::test]
async fn stray_shard_values_are_found_and_swept_after_lowering_the_shard_count() {
    let store = Arc::new(MemoryStore::new());
    store.put("in-range", num(NOW_S - 5, 3));
    store.put("stray-9", num(NOW_S - 5, 9));
    store.put("stray-1023", num(NOW_S - 5, 1023));
    store.put("stray-not-due", num(NOW_S + 60, 700));
    let mut c = config();
    c.probe_strays = true;
    let report = Sweeper::new(Arc::clone(&store), clock(), shards(4), c)
        .sweep_once()
        .await
        .unwrap();
    assert_eq!(report.deleted, 3);
    assert_eq!(report.strays, vec![Shard(9), Shard(1023)]);
    assert_eq!(store.len(), 1);
    assert!(store.get("stray-not-due").is_some());
}

#[tokio::test]
async fn throttling_and_transient_errors_are_retried() {
    let store = due_now(20);
    store.inject(Call::Query, ErrorClass::Throttled, 2);
    store.inject(Call::Delete, ErrorClass::Throttled, 3);
    store.inject(Call::Delete, ErrorClass::Transient, 3);
    let report = Sweeper::new(Arc::clone(&store), clock(), shards(1), config())
        .sweep_once()
        .await
        .unwrap();
    assert_eq!(report.deleted, 20);
    assert_eq!(report.errors, 0);
    assert_eq!(report.throttled, 5);
    assert!(store.is_empty());
}

#[tokio::test]
async fn an_item_gone_after_a_lost_answer_is_unconfirmed_not_skipped() {
    // Applies the first delete and loses its answer, as a timed-out request that did reach the
    // store.
    let lost = std::sync::atomic::AtomicBool::new(false);
    let store = Arc::new(
        Hooked::new(MemoryStore::new()).after_delete(Box::new(move |outcome| {
            match lost.swap(true, std::sync::atomic::Ordering::SeqCst) {
                false => Err(StoreError::new(
                    ErrorClass::Transient,
                    "the request timed out",
                )),
                true => outcome,
            }
        })),
    );
    store.inner.put("k", num(NOW_S - 1, 0));
    let report = Sweeper::new(Arc::clone(&store), clock(), shards(1), config())
        .sweep_once()
        .await
        .unwrap();
    assert_eq!(
        (
            report.deleted,
            report.skipped,
            report.unconfirmed,
            report.errors
        ),
        (0, 0, 1, 0)
    );
    assert!(store.inner.is_empty());
}

#[tokio::test]
async fn deletes_that_keep_failing_are_counted_and_left_for_the_next_pass() {
    let store = Arc::new(MemoryStore::new());
    store.put("k", num(NOW_S - 1, 0));
    store.inject(Call::Delete, ErrorClass::Transient, 4);
    let sweeper = Sweeper::new(Arc::clone(&store), clock(), shards(1), config());
    let report = sweeper.sweep_once().await.unwrap();
    assert_eq!((report.deleted, report.errors), (0, 1));
    assert_eq!(store.calls(Call::Delete), 4);
    assert!(store.get("k").is_some());
    let report = sweeper.sweep_once().await.unwrap();
    assert_eq!((report.deleted, report.errors), (1, 0));
}

#[tokio::test]
async fn a_fatal_error_stops_the_pass() {
    let store = due_now(50);
    store.inject(Call::Query, ErrorClass::Fatal, 1);
    let err = Sweeper::new(Arc::clone(&store), clock(), shards(1), config())
        .sweep_once()
        .await
        .unwrap_err();
    let SweepError::Fatal(e) = err;
    assert_eq!(e.class, ErrorClass::Fatal);
    assert_eq!(store.calls(Call::Query), 1, "a fatal error is not retried");
    assert_eq!(store.len(), 50);

    store.inject(Call::Delete, ErrorClass::Fatal, 1);
    assert!(
        Sweeper::new(Arc::clone(&store), clock(), shards(1), config())
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
    let result = Sweeper::new(Arc::clone(&store), clock(), shards(1), config())
        .sweep_once()
        .await;
    assert!(matches!(result, Err(SweepError::Fatal(ref e)) if e.class == ErrorClass::Transient));
    assert_eq!(store.calls(Call::Query), 4);
}

#[path = "engine/daemon.rs"]
mod daemon;

#[path = "engine/faults.rs"]
mod faults;

#[path = "engine/windows.rs"]
mod windows;

#[path = "engine/leases.rs"]
mod leases;

#[path = "engine/fleet.rs"]
mod fleet;

#[path = "engine/lease_restart.rs"]
mod lease_restart;

#[path = "engine/restart_and_stall.rs"]
mod restart_and_stall;

/// Deterministic load tests on paused time against the partitioned store (issue 26).
mod load;
