//! The engine against the in-memory reference store: what a pass deletes, what it leaves, how it
//! retries and when it stops.

use precise_ttl_core::{Backoff, DueWindow, ErrorClass, Shard, ShardCount, Timestamp};
use precise_ttl_engine::memory::{Call, MemItem, MemTtl, MemoryStore};
use precise_ttl_engine::{
    Clock, DeleteOutcome, DueItem, DuePage, ExpiryStore, SharedPartitioning, StoreError,
    SweepConfig, SweepError, Sweeper,
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

/// The reference store with a hook after every index read: the deterministic form of a writer
/// racing the sweeper, or of a read that fails for some shards only.
struct Hooked {
    inner: MemoryStore,
    after_query: AfterQuery,
}

impl ExpiryStore for Hooked {
    type Key = String;
    type Cursor = <MemoryStore as ExpiryStore>::Cursor;
    type Partition = Shard;

    async fn due_page(
        &self,
        shard: &Shard,
        window: DueWindow,
        cursor: Option<Self::Cursor>,
        limit: u32,
    ) -> Result<DuePage<String, Self::Cursor>, StoreError> {
        let page = self.inner.due_page(shard, window, cursor, limit).await?;
        (self.after_query)(&self.inner, *shard, &page.items)?;
        Ok(page)
    }

    async fn delete_if_due(
        &self,
        key: &String,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        self.inner.delete_if_due(key, window).await
    }
}

#[tokio::test]
async fn an_item_extended_between_query_and_delete_survives_and_counts_as_skipped() {
    let inner = MemoryStore::new();
    inner.put("extended-1", num(NOW_S - 1, 0));
    inner.put("plain", num(NOW_S - 1, 0));
    // Extends the TTL of every "extended" item a read returns, before any delete.
    let store = Arc::new(Hooked {
        inner,
        after_query: Box::new(|store, shard, items| {
            for item in items.iter().filter(|i| i.key.starts_with("extended")) {
                store.put(item.key.clone(), num(NOW_S + 3600, shard.0));
            }
            Ok(())
        }),
    });
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
    let store = Arc::new(MemoryStore::new());
    for i in 0..20 {
        store.put(format!("k{i}"), num(NOW_S - 1, 0));
    }
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

/// Applies the first delete and loses its answer, as a timed-out request that did reach the store.
struct LosesFirstAnswer {
    inner: MemoryStore,
    lost: std::sync::atomic::AtomicBool,
}

impl ExpiryStore for LosesFirstAnswer {
    type Key = String;
    type Cursor = <MemoryStore as ExpiryStore>::Cursor;
    type Partition = Shard;

    async fn due_page(
        &self,
        shard: &Shard,
        window: DueWindow,
        cursor: Option<Self::Cursor>,
        limit: u32,
    ) -> Result<DuePage<String, Self::Cursor>, StoreError> {
        self.inner.due_page(shard, window, cursor, limit).await
    }

    async fn delete_if_due(
        &self,
        key: &String,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        let outcome = self.inner.delete_if_due(key, window).await;
        if !self.lost.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::new(
                ErrorClass::Transient,
                "the request timed out",
            ));
        }
        outcome
    }
}

#[tokio::test]
async fn an_item_gone_after_a_lost_answer_is_unconfirmed_not_skipped() {
    let store = Arc::new(LosesFirstAnswer {
        inner: MemoryStore::new(),
        lost: Default::default(),
    });
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
    let store = Arc::new(MemoryStore::new());
    for i in 0..50 {
        store.put(format!("k{i}"), num(NOW_S - 1, 0));
    }
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

/// The daemon on paused time: tokio's clock and the daemon's wall clock ([`TokioClock`]) move
/// together and only when every task waits, so these tests assert exact outcomes in test-clock
/// time and run in milliseconds whatever the machine's load.
mod daemon {
    use super::*;
    use precise_ttl_engine::{Daemon, DaemonConfig, TokioClock};

    fn clock() -> Arc<TokioClock> {
        Arc::new(TokioClock::starting_at(Timestamp::from_secs(NOW_S)))
    }

    /// An expiry `offset_ms` from the test's start.
    fn at(offset_ms: i64) -> String {
        Timestamp::from_millis(NOW_S * 1000 + offset_ms).to_epoch_seconds_text()
    }

    pub(super) fn config() -> DaemonConfig {
        DaemonConfig {
            poll_interval: Duration::from_millis(100),
            horizon: Duration::from_secs(2),
            lookback: Duration::from_millis(300),
            page_size: 50,
            backoff: Backoff {
                base: Duration::from_millis(1),
                cap: Duration::from_millis(20),
                max_attempts: 20,
            },
            // Scripted faults are for the readers under test; stray probing has its own tests.
            stray_check_interval: None,
            ..DaemonConfig::default()
        }
    }

    /// Each deletion: key, expiry and acknowledgement instant (test clock).
    #[derive(Default)]
    pub(super) struct Deletions(std::sync::Mutex<Vec<(String, Timestamp, Timestamp)>>);
    impl precise_ttl_engine::Observer<String> for Deletions {
        fn deleted(&self, key: &String, expiry: precise_ttl_core::Expiry, at: Timestamp) {
            self.0.lock().unwrap().push((key.clone(), expiry.at(), at));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn deletes_backlog_and_fresh_expirations_on_time_and_spares_the_rest() {
        let store = Arc::new(MemoryStore::new());
        for i in 0..3000u16 {
            store.put(
                format!("backlog-{i}"),
                num(at(-60_000 - i64::from(i)), i % 4),
            );
        }
        for i in 0..200u16 {
            store.put(format!("fresh-{i}"), num(at(300 + 5 * i64::from(i)), i % 4));
        }
        store.put("later", num(at(60_000), 1));
        store.put(
            "string",
            MemItem {
                ttl: MemTtl::Other("S"),
                shard: Some(0),
            },
        );
        let deletions = Arc::new(Deletions::default());
        let clock = clock();
        let mut config = config();
        config.batch_linger = Duration::from_millis(5);
        let daemon = Daemon::new(Arc::clone(&store), Arc::clone(&clock), shards(4), config)
            .with_observer(deletions.clone());
        let handle = daemon.handle();
        let report = daemon
            .run(tokio::time::sleep(Duration::from_millis(2500)))
            .await
            .unwrap();

        assert_eq!(report.deleted, 3200);
        assert_eq!((report.skipped, report.errors), (0, 0));
        assert_eq!(store.len(), 2);
        let deletions = deletions.0.lock().unwrap();
        let fresh: Vec<i64> = deletions
            .iter()
            .filter(|(k, ..)| k.starts_with("fresh"))
            .map(|(_, expiry, acked)| acked.millis_since(*expiry))
            .collect();
        assert_eq!(fresh.len(), 200);
        // A backlog of 3,000 is being cleared meanwhile; each fresh item still goes at its
        // expiry instant, held back at most by the batch linger.
        assert!(
            fresh.iter().all(|lag| (0..=5).contains(lag)),
            "lags {fresh:?}"
        );
        let status = handle.status();
        let watermark = status.watermark.expect("a watermark after complete reads");
        // Every item is gone, so the watermark reaches what the readers have covered: the last
        // head read (every 100 ms) of the present.
        assert!(
            clock.now().millis_since(watermark) <= 100,
            "watermark {watermark:?} at {:?}",
            clock.now()
        );
        assert_eq!(status.backlog, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_extended_before_its_expiry_survives_and_a_late_write_is_caught() {
        let store = Arc::new(MemoryStore::new());
        store.put("extended", num(at(800), 0));
        store.put("plain", num(at(800), 0));
        let deletions = Arc::new(Deletions::default());
        let daemon = Daemon::new(Arc::clone(&store), clock(), shards(1), config())
            .with_observer(deletions.clone());
        let writer = {
            let store = Arc::clone(&store);
            async move {
                // Read ahead already scheduled both; extend one of them, and write an item that
                // expires before the next poll.
                tokio::time::sleep(Duration::from_millis(400)).await;
                store.put("extended", num(at(3_600_000), 0));
                store.put("late", num(at(450), 0));
                tokio::time::sleep(Duration::from_millis(1600)).await;
            }
        };
        let report = daemon.run(writer).await.unwrap();
        assert_eq!(report.deleted, 2, "plain and late");
        assert!(store.get("extended").is_some());
        assert!(store.get("plain").is_none() && store.get("late").is_none());
        for (key, expiry, acked) in deletions.0.lock().unwrap().iter() {
            // The late item is found by the next head read (at most one poll after its write).
            assert!(
                (0..=100).contains(&acked.millis_since(*expiry)),
                "{key} deleted {} ms after its expiry",
                acked.millis_since(*expiry)
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lanes_backlog_is_handed_over_at_its_pace_not_a_page_at_once() {
        let store = Arc::new(MemoryStore::new());
        for i in 0..2000u16 {
            store.put(format!("k{i}"), num(at(-60_000 - i64::from(i)), i % 2));
        }
        let mut config = config();
        config.backlog_per_lane_per_second = 200.0;
        let report = Daemon::new(Arc::clone(&store), clock(), shards(2), config)
            .run(tokio::time::sleep(Duration::from_secs(2)))
            .await
            .unwrap();
        // Two lanes at 200 items/s for 2 s (and a few at once at the start of each).
        assert!(
            (700..=820).contains(&report.deleted),
            "{} deleted",
            report.deleted
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_delete_is_retried_past_the_attempt_limit_until_it_goes_through() {
        let store = Arc::new(MemoryStore::new());
        store.put("k", num(at(-1000), 0));
        // More refusals than `max_attempts` (20): a throttle never gives the item up.
        store.inject(Call::Delete, ErrorClass::Throttled, 30);
        let report = Daemon::new(Arc::clone(&store), clock(), shards(1), config())
            .run(tokio::time::sleep(Duration::from_secs(3)))
            .await
            .unwrap();
        assert!(store.is_empty());
        assert_eq!((report.deleted, report.errors), (1, 0));
        assert!(report.throttled >= 30, "{}", report.throttled);
    }

    #[tokio::test(start_paused = true)]
    async fn throttling_is_absorbed_and_every_item_still_goes() {
        let store = Arc::new(MemoryStore::new());
        for i in 0..300u16 {
            store.put(format!("k{i}"), num(at(-1000), i % 2));
        }
        store.inject(Call::Delete, ErrorClass::Throttled, 100);
        store.inject(Call::Query, ErrorClass::Throttled, 10);
        store.inject(Call::Delete, ErrorClass::Transient, 20);
        let report = Daemon::new(Arc::clone(&store), clock(), shards(2), config())
            .run(tokio::time::sleep(Duration::from_secs(3)))
            .await
            .unwrap();
        assert!(store.is_empty(), "{} left", store.len());
        assert_eq!(report.deleted, 300);
        assert!(report.throttled >= 10);
    }

    #[tokio::test(start_paused = true)]
    async fn while_due_items_wait_head_reads_with_time_in_hand_wait_too_but_still_come() {
        let store = Arc::new(MemoryStore::new());
        // Read at the start; from 200 ms on they are due, and the rate cap keeps most waiting.
        for i in 0..600u16 {
            store.put(format!("k{i}"), num(at(200), 0));
        }
        let mut c = config();
        c.max_deletes_per_second = Some(100.0);
        let queries = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sampler = tokio::spawn({
            let store = Arc::clone(&store);
            let queries = Arc::clone(&queries);
            async move {
                for _ in 0..2 {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    queries.lock().unwrap().push(store.calls(Call::Query));
                }
            }
        });
        // A write arriving late, due while the others still wait: found by a later read.
        let late = tokio::spawn({
            let store = Arc::clone(&store);
            async move {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                store.put("late", num(at(1600), 0));
            }
        });
        // 600 items at 100/s: done in about 6 s.
        Daemon::new(Arc::clone(&store), clock(), shards(1), c)
            .run(tokio::time::sleep(Duration::from_secs(8)))
            .await
            .unwrap();
        sampler.await.unwrap();
        late.await.unwrap();
        let q = queries.lock().unwrap().clone();
        // Polled every 100 ms, the head reader would read about ten times a second; with due
        // items waiting it reads at most every 600 ms (its poll, then up to 500 ms in hand).
        let reads = q[1] - q[0];
        assert!((1..=4).contains(&reads), "{reads} queries in one second");
        assert!(
            store.is_empty(),
            "{} left: the late write too was read and deleted",
            store.len()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_rate_cap_is_respected() {
        let store = Arc::new(MemoryStore::new());
        for i in 0..1000u16 {
            store.put(format!("k{i}"), num(at(-1000), 0));
        }
        let mut c = config();
        c.max_deletes_per_second = Some(200.0);
        let deletions = Arc::new(Deletions::default());
        let report = Daemon::new(Arc::clone(&store), clock(), shards(1), c)
            .with_observer(deletions.clone())
            .run(tokio::time::sleep(Duration::from_secs(3)))
            .await
            .unwrap();
        let times: Vec<i64> = deletions
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(.., acked)| acked.as_millis())
            .collect();
        assert_eq!(times.len() as u64, report.deleted);
        // Any one second of the clock: at most the rate plus the bucket's burst (one batch).
        for (i, start) in times.iter().enumerate() {
            let in_a_second = times[i..].iter().take_while(|t| **t < start + 1000).count();
            assert!(
                in_a_second <= 200 + 25,
                "{in_a_second} deletes in one second"
            );
        }
        // And the cap is a cap, not a stall: three seconds delete about three seconds' worth.
        assert!(report.deleted >= 3 * 200, "{}", report.deleted);
    }

    #[tokio::test(start_paused = true)]
    async fn a_fatal_error_seen_by_the_stray_probe_stops_the_daemon_too() {
        // Reads of shard values outside 0..1 (only the stray probe asks for them) fail for good;
        // the others succeed: the daemon can stop only because the probe saw the error.
        let store = Arc::new(Hooked {
            inner: MemoryStore::new(),
            after_query: Box::new(|_, shard, _| match shard.0 {
                0 => Ok(()),
                _ => Err(StoreError::new(ErrorClass::Fatal, "access denied")),
            }),
        });
        let mut c = config();
        c.stray_check_interval = Some(Duration::from_secs(60));
        let result = Daemon::new(store, clock(), shards(1), c)
            .run(tokio::time::sleep(Duration::from_secs(30)))
            .await;
        assert!(
            result.is_err(),
            "the probe's fatal error must stop the daemon"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stray_shard_values_are_swept_by_the_daemon() {
        let store = Arc::new(MemoryStore::new());
        store.put("stray", num(at(-1000), 700));
        store.put("stray-later", num(at(60_000), 700));
        let mut c = config();
        c.stray_check_interval = Some(Duration::from_secs(60));
        let report = Daemon::new(Arc::clone(&store), clock(), shards(2), c)
            .run(tokio::time::sleep(Duration::from_millis(800)))
            .await
            .unwrap();
        assert_eq!(report.deleted, 1);
        assert!(store.get("stray").is_none());
        assert!(store.get("stray-later").is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_fatal_error_stops_the_daemon() {
        let store = Arc::new(MemoryStore::new());
        store.inject(Call::Query, ErrorClass::Fatal, 1);
        let result = Daemon::new(Arc::clone(&store), clock(), shards(1), config())
            .run(tokio::time::sleep(Duration::from_secs(30)))
            .await;
        assert!(result.is_err());
    }
}

mod faults {
    use super::*;
    use precise_ttl_engine::faulty::{FaultRates, FaultyStore};
    use precise_ttl_engine::{Daemon, DaemonConfig, TokioClock};
    use std::sync::atomic::Ordering;

    fn at(offset_ms: i64) -> String {
        Timestamp::from_millis(NOW_S * 1000 + offset_ms).to_epoch_seconds_text()
    }

    #[tokio::test(start_paused = true)]
    async fn twenty_percent_throttling_still_deletes_every_due_item_and_nothing_else() {
        let inner = MemoryStore::new();
        for i in 0..1500u16 {
            // A backlog, items expiring during the faults, and items expiring after them.
            let offset = match i % 3 {
                0 => -30_000,
                1 => 200 + i64::from(i),
                _ => 2_600 + i64::from(i) / 2,
            };
            inner.put(format!("k{i}"), num(at(offset), i % 4));
        }
        inner.put("later", num(at(600_000), 0));
        let rates = FaultRates {
            throttle: 0.2,
            lost_response: 0.02,
            ..FaultRates::default()
        };
        let store = Arc::new(FaultyStore::new(inner, rates));
        let config = DaemonConfig {
            poll_interval: Duration::from_millis(100),
            lookback: Duration::from_millis(300),
            horizon: Duration::from_secs(2),
            backoff: Backoff {
                base: Duration::from_millis(2),
                cap: Duration::from_millis(50),
                max_attempts: 30,
            },
            ..DaemonConfig::default()
        };
        let faulty = Arc::clone(&store);
        let stop_faults = async move {
            tokio::time::sleep(Duration::from_millis(2500)).await;
            faulty.set_rates(FaultRates::default());
            tokio::time::sleep(Duration::from_millis(2000)).await;
        };
        let clock = Arc::new(TokioClock::starting_at(Timestamp::from_secs(NOW_S)));
        let report = Daemon::new(Arc::clone(&store), clock, shards(4), config)
            .run(stop_faults)
            .await
            .unwrap();
        assert!(
            store.counts.throttled.load(Ordering::Relaxed) > 50,
            "faults were injected"
        );
        assert_eq!(
            store.inner().len(),
            1,
            "only the item expiring later is left"
        );
        assert!(store.inner().get("later").is_some());
        // A lost response makes the retry find the item gone: counted as unconfirmed (that
        // attempt may have deleted it, or another worker did), never as deleted, skipped or an
        // error.
        assert!(
            store.counts.lost.load(Ordering::Relaxed) > 0,
            "responses were lost"
        );
        assert!(report.unconfirmed > 0, "{report:?}");
        assert_eq!(report.deleted + report.unconfirmed, 1500, "{report:?}");
        assert_eq!(report.skipped, 0, "{report:?}");
        assert_eq!(report.errors, 0);
    }
}

/// The 2022 blog's layout through the same daemon: one partition per window label.
mod windows {
    use super::*;
    use precise_ttl_core::{WindowFormat, WindowLabel, WindowSpec, window::parse_iso};
    use precise_ttl_engine::{Daemon, TokioClock, Windows};

    /// The reference store seen through a window index: a label's partition holds the items
    /// whose expiry lies in that window (all items sit on shard 0 of the inner store).
    struct WindowIndex(MemoryStore);

    impl ExpiryStore for WindowIndex {
        type Key = String;
        type Cursor = <MemoryStore as ExpiryStore>::Cursor;
        type Partition = WindowLabel;

        async fn due_page(
            &self,
            label: &WindowLabel,
            window: DueWindow,
            cursor: Option<Self::Cursor>,
            limit: u32,
        ) -> Result<DuePage<String, Self::Cursor>, StoreError> {
            let (start, end) = label.0.split_once('_').unwrap();
            let start = parse_iso(start).unwrap().0;
            let last = Timestamp::from_millis(parse_iso(end).unwrap().0.as_millis() - 1);
            let inside = DueWindow::between(window.oldest.max(start), window.until.min(last));
            if inside.oldest > inside.until {
                return Ok(DuePage {
                    items: Vec::new(),
                    next: None,
                });
            }
            self.0.due_page(&Shard(0), inside, cursor, limit).await
        }

        async fn delete_if_due(
            &self,
            key: &String,
            window: DueWindow,
        ) -> Result<DeleteOutcome, StoreError> {
            self.0.delete_if_due(key, window).await
        }
    }

    #[derive(Default)]
    struct Lags(std::sync::Mutex<Vec<i64>>);
    impl precise_ttl_engine::Observer<String> for Lags {
        fn deleted(&self, _key: &String, expiry: precise_ttl_core::Expiry, at: Timestamp) {
            self.0.lock().unwrap().push(at.millis_since(expiry.at()));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn window_labels_get_read_ahead_timers_a_backlog_and_a_rising_floor() {
        // Ten seconds before a minute boundary, so fresh expiries span two windows.
        let start = NOW_S - NOW_S % 60 + 50;
        let t = |offset_ms: i64| Timestamp::from_millis(start * 1000 + offset_ms);
        let store = MemoryStore::new();
        for i in 0..500i64 {
            // A backlog over the last five minutes, since the floor.
            store.put(
                format!("backlog-{i}"),
                num(t(-300_000 + i * 500).to_epoch_seconds_text(), 0),
            );
        }
        for i in 0..400i64 {
            // Integer TTLs, due across the minute boundary.
            let ttl = Timestamp::from_secs(start + 1 + i / 20);
            store.put(format!("fresh-{i}"), num(ttl.to_epoch_seconds_text(), 0));
        }
        store.put(
            "below-the-floor",
            num(t(-900_000).to_epoch_seconds_text(), 0),
        );
        store.put("later", num(t(600_000).to_epoch_seconds_text(), 0));
        let store = Arc::new(WindowIndex(store));
        let spec = WindowSpec::new(Duration::from_secs(60), WindowFormat::Millis).unwrap();
        let windows = Arc::new(Windows::new(spec, t(-360_000), Duration::from_secs(2)));
        let lags = Arc::new(Lags::default());
        let clock = Arc::new(TokioClock::starting_at(t(0)));
        let report = Daemon::new(Arc::clone(&store), clock, windows.clone(), daemon::config())
            .with_observer(lags.clone())
            .run(tokio::time::sleep(Duration::from_secs(25)))
            .await
            .unwrap();

        assert_eq!(report.deleted, 900);
        assert_eq!((report.skipped, report.errors), (0, 0));
        assert!(store.0.get("later").is_some());
        // The floor is where a first run starts (a checkpoint minus the lookback): older
        // windows are not read, as the blog's own sweeper never reads them.
        assert!(store.0.get("below-the-floor").is_some());
        let lags = lags.0.lock().unwrap();
        let fresh = &lags[lags.len() - 400..];
        assert!(
            fresh.iter().all(|lag| (0..=5).contains(lag)),
            "fresh items go at their expiry instant: {fresh:?}"
        );
        // The floor followed the watermark: a restart would read from just behind the present.
        assert!(windows.floor() >= t(20_000), "floor {:?}", windows.floor());
    }
}

/// Shard leases on paused time: acquire, renew, expire, steal, release, lost renewal.
mod leases {
    use super::*;
    use precise_ttl_engine::lease::{Beating, LeaseConfig, Leases};
    use precise_ttl_engine::lease_memory::{MemoryLeaseTable, MemoryLeases};
    use tokio::time::Instant;

    const LEASE: Duration = Duration::from_secs(10);

    /// The longest heartbeat interval: a third of the lease, +10 % jitter. A takeover comes a
    /// full lease after the victim's last renewal, which is at most one heartbeat before the
    /// kill, and is seen at the taker's next heartbeat.
    fn beat() -> Duration {
        (LEASE / 3).mul_f64(1.1)
    }

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("t/idx/{i}")).collect()
    }

    struct Worker {
        leases: Arc<Leases<MemoryLeases>>,
        store: Arc<MemoryLeases>,
        beating: Beating<MemoryLeases>,
    }

    impl Worker {
        fn start(table: &Arc<MemoryLeaseTable>, name: &str, n: usize) -> Worker {
            let store = Arc::new(MemoryLeases::new(table));
            let leases = Arc::new(Leases::new(
                Arc::clone(&store),
                keys(n),
                LeaseConfig::new(name, LEASE),
            ));
            Worker {
                beating: Arc::clone(&leases).start(),
                leases,
                store,
            }
        }

        fn usable(&self) -> usize {
            self.leases.usable().borrow().len()
        }

        /// SIGTERM: stop beating and release.
        async fn stop(self) {
            self.beating.stop().await;
        }

        /// SIGKILL: nothing released.
        fn kill(self) {
            drop(self.beating);
        }
    }

    /// Waits (test time) until `done`, checking every 100 ms; returns how long it took.
    async fn until(mut done: impl FnMut() -> bool) -> Duration {
        let started = Instant::now();
        while !done() {
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "never happened"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        started.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_worker_keeps_128_leases_when_each_write_takes_100_ms() {
        let table = MemoryLeaseTable::new();
        let a = Worker::start(&table, "a", 128);
        a.store.set_write_latency(Duration::from_millis(100));
        until(|| a.usable() == 128).await;
        tokio::time::sleep(LEASE * 3).await;
        // One write at a time, 128 renewals take 12.8 s, past half the 10 s lease: each heartbeat
        // would drop leases the worker still owns.
        assert_eq!(a.usable(), 128);
        assert_eq!(a.leases.counts().lost, 0);
        a.stop().await;
        assert_eq!(table.owned_by("a"), 0, "released on stop");
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_worker_acquires_every_lease_and_keeps_it_by_renewing() {
        let table = MemoryLeaseTable::new();
        let a = Worker::start(&table, "a", 4);
        until(|| a.usable() == 4).await;
        let counter = table.get("t/idx/0").unwrap().counter;
        tokio::time::sleep(LEASE * 3).await;
        assert_eq!(a.usable(), 4);
        assert!(
            table.get("t/idx/0").unwrap().counter >= counter + 8,
            "renewed"
        );
        assert_eq!(a.leases.counts().acquired, 4);
        a.stop().await;
        assert_eq!(table.owned_by("a"), 0, "released on stop");
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_worker_steals_one_lease_per_heartbeat_up_to_an_even_split() {
        let table = MemoryLeaseTable::new();
        let a = Worker::start(&table, "a", 16);
        until(|| a.usable() == 16).await;
        let b = Worker::start(&table, "b", 16);
        let c = Worker::start(&table, "c", 16);
        let took = until(|| {
            let mut held = [a.usable(), b.usable(), c.usable()];
            held.sort();
            held == [5, 5, 6]
        })
        .await;
        // 11 steals at one per heartbeat per worker: a few lease durations.
        assert!(took <= LEASE * 3, "converged in {took:?}");
        let stolen = b.leases.counts().stolen + c.leases.counts().stolen;
        assert!((10..=11).contains(&stolen), "{stolen} steals, none wasted");
        assert_eq!(a.leases.counts().lost, stolen);
        // Then it stays put.
        tokio::time::sleep(LEASE * 3).await;
        let mut held = [a.usable(), b.usable(), c.usable()];
        held.sort();
        assert_eq!(held, [5, 5, 6]);
        for w in [a, b, c] {
            w.stop().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_killed_workers_leases_are_taken_after_one_duration_not_before() {
        let table = MemoryLeaseTable::new();
        let a = Worker::start(&table, "a", 4);
        until(|| a.usable() == 4).await;
        let b = Worker::start(&table, "b", 4);
        until(|| b.usable() == 2).await;
        a.kill();
        let killed = Instant::now();
        let took = until(|| b.usable() == 4).await;
        // b sees a's last counter within half a second of its renewal (before the kill) and
        // looks again every half second.
        assert!(
            took >= LEASE - beat() && took <= LEASE + Duration::from_millis(1100),
            "taken over {:?} after the kill",
            killed.elapsed()
        );
        b.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_worker_hands_over_within_half_a_second_not_a_heartbeat() {
        let table = MemoryLeaseTable::new();
        let a = Worker::start(&table, "a", 4);
        until(|| a.usable() == 4).await;
        let b = Worker::start(&table, "b", 4);
        until(|| b.usable() == 2).await;
        // Just after b's heartbeat: without the look for released leases between heartbeats,
        // b would take a's two only at its next heartbeat, 3 s or more later.
        tokio::time::sleep(Duration::from_millis(50)).await;
        a.stop().await;
        let took = until(|| b.usable() == 4).await;
        assert!(took <= Duration::from_millis(600), "{took:?}");
        assert_eq!(
            b.leases.counts().stolen,
            2,
            "the two stolen to reach the split"
        );
        b.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_worker_that_cannot_renew_stops_using_its_leases_before_anyone_may_take_them() {
        let table = MemoryLeaseTable::new();
        let a = Worker::start(&table, "a", 4);
        until(|| a.usable() == 4).await;
        let b = Worker::start(&table, "b", 4);
        until(|| b.usable() == 2 && a.usable() == 2).await;
        let lost_before = a.leases.counts().lost;
        a.store.set_down(true);
        let dropped = until(|| a.usable() == 0).await;
        assert!(dropped <= LEASE / 2 + beat(), "dropped after {dropped:?}");
        let taken = dropped + until(|| b.usable() == 4).await;
        assert!(taken >= LEASE - beat(), "taken after {taken:?}");
        assert!(dropped < taken);
        assert_eq!(a.leases.counts().lost - lost_before, 2);
        a.store.set_down(false);
        // Back: it rejoins and the split evens out again.
        until(|| a.usable() == 2 && b.usable() == 2).await;
        for w in [a, b] {
            w.stop().await;
        }
    }

    /// After an outage longer than half a lease, a worker alone on its leases has dropped
    /// them; the store back, it takes them again within a second (a retry step), not at the
    /// next full heartbeat, and not before it starts (a store down at start is waited for).
    #[tokio::test(start_paused = true)]
    async fn after_an_outage_the_leases_come_back_within_a_second_of_the_store() {
        let table = MemoryLeaseTable::new();
        let store = Arc::new(MemoryLeases::new(&table));
        store.set_down(true);
        let leases = Arc::new(Leases::new(
            Arc::clone(&store),
            keys(4),
            LeaseConfig::new("a", LEASE),
        ));
        let beating = Arc::clone(&leases).start();
        tokio::time::sleep(LEASE).await;
        assert_eq!(leases.usable().borrow().len(), 0, "nothing while down");
        store.set_down(false);
        let back = until(|| leases.usable().borrow().len() == 4).await;
        assert!(back <= Duration::from_millis(1100), "at start: {back:?}");

        store.set_down(true);
        until(|| leases.usable().borrow().is_empty()).await;
        tokio::time::sleep(LEASE * 2).await;
        store.set_down(false);
        let back = until(|| leases.usable().borrow().len() == 4).await;
        assert!(
            back <= Duration::from_millis(1100),
            "after the outage: {back:?}"
        );
        beating.stop().await;
    }
}

/// Two daemons sharing one table through leases, on paused time.
mod fleet {
    use super::*;
    use precise_ttl_engine::lease::{LeaseConfig, Leases};
    use precise_ttl_engine::lease_memory::{MemoryLeaseTable, MemoryLeases};
    use precise_ttl_engine::{Daemon, DaemonReport, Observer, TokioClock};
    use std::sync::Mutex;
    use tokio::sync::oneshot;

    const LEASE: Duration = Duration::from_secs(3);

    /// Per deletion: the item's shard, when it was acknowledged, and its lag in ms.
    #[derive(Default)]
    struct Lags(Mutex<Vec<(u16, Timestamp, i64)>>);
    impl Observer<String> for Lags {
        fn deleted(&self, key: &String, expiry: precise_ttl_core::Expiry, at: Timestamp) {
            let i: u16 = key[1..].parse().unwrap();
            let lag = at.millis_since(expiry.at());
            self.0.lock().unwrap().push((i % 4, at, lag));
        }
    }

    /// A worker: its leases and its daemon, stopped by `stop` (then releasing) or killed by
    /// aborting the task (nothing released).
    fn worker(
        store: &Arc<MemoryStore>,
        table: &Arc<MemoryLeaseTable>,
        name: &str,
        lags: &Arc<Lags>,
    ) -> (oneshot::Sender<()>, tokio::task::JoinHandle<DaemonReport>) {
        let leases = Arc::new(Leases::new(
            Arc::new(MemoryLeases::new(table)),
            (0..4).map(|i| i.to_string()).collect(),
            LeaseConfig::new(name, LEASE),
        ));
        let clock = Arc::new(TokioClock::starting_at(Timestamp::from_secs(NOW_S)));
        let daemon = Daemon::new(
            Arc::clone(store),
            clock,
            Arc::new(ShardCount::new(4).unwrap()),
            daemon::config(),
        )
        .with_observer(lags.clone())
        .with_ownership(leases.usable());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            // Dropped with this task when it is aborted: beating stops, nothing is released.
            let beating = leases.start();
            let report = daemon
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
            beating.stop().await;
            report
        });
        (stop, task)
    }

    #[tokio::test(start_paused = true)]
    async fn two_workers_split_the_shards_and_one_takes_over_when_the_other_dies() {
        let store = Arc::new(MemoryStore::new());
        // 40 s of expirations, 50 a second, whole seconds, over 4 shards.
        for i in 0..2000i64 {
            let ttl = Timestamp::from_secs(NOW_S + 2 + i / 50);
            store.put(
                format!("k{i}"),
                num(ttl.to_epoch_seconds_text(), (i % 4) as u16),
            );
        }
        let table = MemoryLeaseTable::new();
        let lags_a = Arc::new(Lags::default());
        let lags_b = Arc::new(Lags::default());
        let (stop_a, a) = worker(&store, &table, "a", &lags_a);
        let (stop_b, b) = worker(&store, &table, "b", &lags_b);
        tokio::time::sleep(Duration::from_secs(20)).await;
        let shards_between = |lags: &Lags, from: i64, to: i64| -> std::collections::BTreeSet<u16> {
            let lags = lags.0.lock().unwrap();
            lags.iter()
                .filter(|(_, at, _)| {
                    (NOW_S * 1000 + from..NOW_S * 1000 + to).contains(&at.as_millis())
                })
                .map(|(shard, ..)| *shard)
                .collect()
        };
        // Once split, each worker deletes on its own two shards only.
        let (sa, sb) = (
            shards_between(&lags_a, 6_000, 20_000),
            shards_between(&lags_b, 6_000, 20_000),
        );
        assert_eq!((sa.len(), sb.len()), (2, 2), "a {sa:?}, b {sb:?}");
        assert!(sa.is_disjoint(&sb), "a {sa:?}, b {sb:?}");
        // b dies without releasing; a takes its shards after a lease duration.
        b.abort();
        drop(stop_b);
        tokio::time::sleep(Duration::from_secs(25)).await;
        let _ = stop_a.send(());
        let report = a.await.unwrap();
        assert!(store.is_empty(), "{} left", store.len());
        let lags: Vec<i64> = lags_a
            .0
            .lock()
            .unwrap()
            .iter()
            .chain(lags_b.0.lock().unwrap().iter())
            .map(|(_, _, lag)| *lag)
            .collect();
        assert_eq!(lags.len(), 2000, "each item deleted once");
        let max = lags.iter().max().unwrap();
        assert!(
            *max <= (LEASE + Duration::from_secs(2)).as_millis() as i64,
            "max lag {max} ms"
        );
        assert!(report.deleted as usize >= 1000);
    }
}

mod lease_restart {
    use super::*;
    use precise_ttl_engine::lease::{LeaseConfig, Leases};
    use precise_ttl_engine::lease_memory::{MemoryLeaseTable, MemoryLeases};

    /// A worker restarted under the same name (a StatefulSet pod, a fixed --worker-id) takes its
    /// leases back at its first heartbeat instead of waiting for them to expire.
    #[tokio::test(start_paused = true)]
    async fn a_worker_restarted_under_its_name_takes_its_leases_back_at_once() {
        let table = MemoryLeaseTable::new();
        let keys: Vec<String> = (0..4).map(|i| i.to_string()).collect();
        let config = LeaseConfig::new("w", Duration::from_secs(10));
        use precise_ttl_engine::lease::LeaseStore;
        MemoryLeases::new(&table).ensure(&keys).await.unwrap();
        let first = Leases::new(
            Arc::new(MemoryLeases::new(&table)),
            keys.clone(),
            config.clone(),
        );
        first.heartbeat().await.unwrap();
        assert_eq!(first.usable().borrow().len(), 4);
        drop(first); // killed: nothing released
        let second = Leases::new(Arc::new(MemoryLeases::new(&table)), keys, config);
        second.heartbeat().await.unwrap();
        assert_eq!(second.usable().borrow().len(), 4);
        assert_eq!(table.owned_by("w"), 4);
    }
}

/// A restart under a new name on the same host (the default worker id), and what a fleet that
/// stopped deleting looks like from a worker that holds nothing.
mod restart_and_stall {
    use super::*;
    use precise_ttl_engine::lease::{LeaseConfig, LeaseStore, Leases, OwnerCheck};
    use precise_ttl_engine::lease_memory::{MemoryLeaseTable, MemoryLeases};
    use precise_ttl_engine::{Daemon, DaemonHandle, Health, TokioClock};
    use std::collections::HashSet;
    use tokio::time::Instant;

    const LEASE: Duration = Duration::from_secs(10);

    /// Owners the test declares no longer running, as the process table would.
    struct Gone(HashSet<String>);
    impl OwnerCheck for Gone {
        fn proven_dead(&self, owner: &str) -> bool {
            self.0.contains(owner)
        }
    }

    /// Leases 0..4 held by `owner`, as a worker that was killed left them.
    async fn held_by(owner: &str) -> (Arc<MemoryLeaseTable>, Vec<String>) {
        let table = MemoryLeaseTable::new();
        let keys: Vec<String> = (0..4).map(|i| i.to_string()).collect();
        let store = MemoryLeases::new(&table);
        store.ensure(&keys).await.unwrap();
        for key in &keys {
            assert!(store.write(key, 0, Some(owner)).await.unwrap());
        }
        (table, keys)
    }

    #[tokio::test(start_paused = true)]
    async fn a_restart_under_a_new_name_takes_its_dead_predecessors_leases_at_once() {
        let (table, keys) = held_by("host/pid=1/start=2/uid=0/boot=000000000000/pidns=3").await;
        let dead = ["host/pid=1/start=2/uid=0/boot=000000000000/pidns=3".to_string()];
        let newcomer = Leases::new(
            Arc::new(MemoryLeases::new(&table)),
            keys.clone(),
            LeaseConfig::new("host/pid=9/start=8/uid=0/boot=000000000000/pidns=3", LEASE),
        )
        .with_owner_check(Arc::new(Gone(dead.into())));
        newcomer.heartbeat().await.unwrap();
        assert_eq!(
            newcomer.usable().borrow().len(),
            4,
            "at its first heartbeat"
        );

        // An owner that cannot be proven dead (another host) keeps KCL's rule.
        let (table, keys) = held_by("other-host").await;
        let stranger = Leases::new(
            Arc::new(MemoryLeases::new(&table)),
            keys,
            LeaseConfig::new("me", LEASE),
        )
        .with_owner_check(Arc::new(Gone(HashSet::new())));
        stranger.heartbeat().await.unwrap();
        assert_eq!(
            stranger.usable().borrow().len(),
            1,
            "one stolen toward an even split, nothing taken as free"
        );
    }

    /// Shards held by a worker that stopped renewing, with due items, and a newcomer whose lease
    /// writes are throttled, so it holds nothing: it reports them stalled (log, metric,
    /// `/healthz` red) within one lease duration, and once its writes go through it takes
    /// them, sweeps them and turns green.
    #[tokio::test(start_paused = true)]
    async fn a_worker_holding_no_lease_sees_due_items_nobody_attends_within_one_lease_duration() {
        let (table, keys) = held_by("vanished-worker").await;
        let store = Arc::new(MemoryStore::new());
        for i in 0..40i64 {
            store.put(format!("k{i}"), num(NOW_S - 60 + i, (i % 4) as u16));
        }
        let handle = DaemonHandle::default();
        let lease_store = Arc::new(MemoryLeases::new(&table));
        lease_store.set_writes_throttled(true);
        let leases = Arc::new(
            Leases::new(
                Arc::clone(&lease_store),
                keys,
                LeaseConfig::new("newcomer", LEASE),
            )
            .with_handle(handle.clone()),
        );
        let clock = Arc::new(TokioClock::starting_at(Timestamp::from_secs(NOW_S)));
        let daemon = Daemon::new(
            Arc::clone(&store),
            clock,
            Arc::new(ShardCount::new(4).unwrap()),
            daemon::config(),
        )
        .with_handle(handle.clone());
        let started = Instant::now();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = tokio::spawn(precise_ttl_engine::worker::run_worker(
            daemon,
            Some(leases),
            async {
                let _ = stopped.await;
            },
        ));
        let health = || {
            handle
                .status()
                .health(Instant::now(), Duration::from_secs(30))
        };
        let mut red_at = None;
        while started.elapsed() < LEASE * 2 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Health::Stalled(shards) = health() {
                assert_eq!(shards, ["0", "1", "2", "3"]);
                red_at.get_or_insert(started.elapsed());
            }
        }
        let red_at = red_at.expect("reported stalled");
        assert!(
            red_at >= LEASE / 2 && red_at <= LEASE,
            "stalled reported after {red_at:?}"
        );
        assert!(matches!(health(), Health::Stalled(_)), "red while it lasts");
        assert_eq!(store.len(), 40, "nothing deleted meanwhile");
        lease_store.set_writes_throttled(false);
        while !store.is_empty() && started.elapsed() < LEASE * 4 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            store.is_empty(),
            "taken over and swept: {} left",
            store.len()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(health(), Health::Reading, "green once the shards are read");
        assert!(handle.status().stalled.is_empty());
        let _ = stop.send(());
        run.await.unwrap().unwrap();
    }
}

/// Deterministic load tests on paused time against the partitioned store (issue 26).
mod load;
