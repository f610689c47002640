//! Two daemons sharing one table through leases, on paused time.

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
            .filter(|(_, at, _)| (NOW_S * 1000 + from..NOW_S * 1000 + to).contains(&at.as_millis()))
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
