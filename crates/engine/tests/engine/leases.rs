//! Shard leases on paused time: acquire, renew, expire, steal, release, lost renewal.

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

    /// [`Worker::stop`], and none of `name`'s leases is owned any more.
    async fn stop_releasing(self, table: &MemoryLeaseTable, name: &str) {
        self.stop().await;
        assert_eq!(table.owned_by(name), 0, "released on stop");
    }

    /// A worker started alone on `n` leases, once it holds them all.
    async fn holding_all(table: &Arc<MemoryLeaseTable>, name: &str, n: usize) -> Worker {
        let worker = Worker::start(table, name, n);
        until(|| worker.usable() == n).await;
        worker
    }

    /// SIGKILL: nothing released.
    fn kill(self) {
        drop(self.beating);
    }
}

/// Worker a alone on four leases until it holds them all, then b, until it has stolen its two.
async fn split_four(table: &Arc<MemoryLeaseTable>) -> (Worker, Worker) {
    let a = Worker::holding_all(table, "a", 4).await;
    let b = Worker::start(table, "b", 4);
    until(|| b.usable() == 2).await;
    (a, b)
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
    a.stop_releasing(&table, "a").await;
}

#[tokio::test(start_paused = true)]
async fn a_lone_worker_acquires_every_lease_and_keeps_it_by_renewing() {
    let table = MemoryLeaseTable::new();
    let a = Worker::holding_all(&table, "a", 4).await;
    let counter = table.get("t/idx/0").unwrap().counter;
    tokio::time::sleep(LEASE * 3).await;
    assert_eq!(a.usable(), 4);
    assert!(
        table.get("t/idx/0").unwrap().counter >= counter + 8,
        "renewed"
    );
    assert_eq!(a.leases.counts().acquired, 4);
    a.stop_releasing(&table, "a").await;
}

#[tokio::test(start_paused = true)]
async fn a_second_worker_steals_one_lease_per_heartbeat_up_to_an_even_split() {
    let table = MemoryLeaseTable::new();
    let a = Worker::holding_all(&table, "a", 16).await;
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
    let (a, b) = split_four(&table).await;
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
    let (a, b) = split_four(&table).await;
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
    let (a, b) = split_four(&table).await;
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
