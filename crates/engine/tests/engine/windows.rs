//! The 2022 blog's layout through the same daemon: one partition per window label.

use super::*;
use precise_ttl_core::{WindowFormat, WindowLabel, WindowSpec, window::parse_iso};
use precise_ttl_engine::{Daemon, TokioClock, Windows};

/// The reference store seen through a window index: a label's partition holds the items
/// whose expiry lies in that window (all items sit on shard 0 of the inner store).
fn window_index(store: MemoryStore) -> Hooked<WindowLabel> {
    Hooked::routed(
        store,
        Box::new(|label: &WindowLabel, window: DueWindow| {
            let (start, end) = label.0.split_once('_').unwrap();
            let start = parse_iso(start).unwrap().0;
            let last = Timestamp::from_millis(parse_iso(end).unwrap().0.as_millis() - 1);
            let inside = DueWindow::between(window.oldest.max(start), window.until.min(last));
            (inside.oldest <= inside.until).then_some((Shard(0), inside))
        }),
    )
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
    let store = Arc::new(window_index(store));
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
    assert!(store.inner.get("later").is_some());
    // The floor is where a first run starts (a checkpoint minus the lookback): older
    // windows are not read, as the blog's own sweeper never reads them.
    assert!(store.inner.get("below-the-floor").is_some());
    let lags = lags.0.lock().unwrap();
    let fresh = &lags[lags.len() - 400..];
    assert!(
        fresh.iter().all(|lag| (0..=5).contains(lag)),
        "fresh items go at their expiry instant: {fresh:?}"
    );
    // The floor followed the watermark: a restart would read from just behind the present.
    assert!(windows.floor() >= t(20_000), "floor {:?}", windows.floor());
}
