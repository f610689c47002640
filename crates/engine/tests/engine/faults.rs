//! The engine's faults tests.

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
