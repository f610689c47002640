//! The daemon on paused time: tokio's clock and the daemon's wall clock ([`TokioClock`]) move
//! together and only when every task waits, so these tests assert exact outcomes in test-clock
//! time and run in milliseconds whatever the machine's load.

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
    let store = Arc::new(
        Hooked::new(MemoryStore::new()).after_query(Box::new(|_, shard, _| match shard.0 {
            0 => Ok(()),
            _ => Err(StoreError::new(ErrorClass::Fatal, "access denied")),
        })),
    );
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
