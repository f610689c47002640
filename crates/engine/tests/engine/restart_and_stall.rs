//! A restart under a new name on the same host (the default worker id), and what a fleet that
//! stopped deleting looks like from a worker that holds nothing.

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
