//! Shard leases against DynamoDB Local: the lease table's conditional writes under the engine's
//! lease rules (acquire, steal to an even split, lost renewal, expiry after a kill, release).

use crate::support::{delete_table_if_any, dynamo, endpoint};
use precise_ttl_dynamodb::{AdapterError, Dynamo, LeaseTable, create_lease_table};
use precise_ttl_engine::lease::{Beating, LeaseConfig, Leases};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LEASE: Duration = Duration::from_secs(2);

struct Worker {
    leases: Arc<Leases<LeaseTable>>,
    beating: Beating<LeaseTable>,
}

impl Worker {
    async fn start(dynamo: Dynamo, lease_table: &str, name: &str) -> Worker {
        let table = LeaseTable::open(dynamo, lease_table, "swept", "idx")
            .await
            .unwrap();
        let keys = (0..4).map(|i| i.to_string()).collect();
        let leases = Arc::new(Leases::new(
            Arc::new(table),
            keys,
            LeaseConfig::new(name, LEASE),
        ));
        Worker {
            beating: Arc::clone(&leases).start(),
            leases,
        }
    }

    fn usable(&self) -> usize {
        self.leases.usable().borrow().len()
    }

    async fn stop(self) {
        self.beating.stop().await;
    }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(30), "{what}: never");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_split_fail_over_and_hand_over_through_the_lease_table() {
    let name = format!("precise-ttl-test-leases-{:08x}", fastrand::u32(..));
    let missing = LeaseTable::open(dynamo(), &name, "swept", "idx").await;
    assert!(matches!(
        missing,
        Err(AdapterError::LeaseTableMissing { .. })
    ));
    assert!(create_lease_table(&dynamo(), &name).await.unwrap());
    assert!(
        !create_lease_table(&dynamo(), &name).await.unwrap(),
        "idempotent"
    );

    // Worker a talks through a proxy that can cut it off from the store.
    let proxy = crate::proxy::FaultProxy::start(endpoint()).await;
    let a = Worker::start(Dynamo::local(&proxy.url), &name, "a").await;
    until("a lone worker takes all", || a.usable() == 4).await;
    let b = Worker::start(dynamo(), &name, "b").await;
    until("an even split", || a.usable() == 2 && b.usable() == 2).await;
    let table = LeaseTable::open(dynamo(), &name, "swept", "idx")
        .await
        .unwrap();
    let stored = table.all().await.unwrap();
    assert_eq!(stored.len(), 4);
    assert!(stored.iter().all(|l| l.renewed_at_ms.is_some()));

    // a loses the store: it stops using its leases before b may take them.
    proxy.set(crate::proxy::Faults {
        down: true,
        ..Default::default()
    });
    let cut = Instant::now();
    until("a drops its leases", || a.usable() == 0).await;
    let dropped = cut.elapsed();
    until("b takes them over", || b.usable() == 4).await;
    let taken = cut.elapsed();
    assert!(dropped < taken, "dropped {dropped:?}, taken {taken:?}");
    assert!(
        // A full lease after a's last renewal, at most one heartbeat (+10 % jitter) before the cut.
        taken >= LEASE - (LEASE / 3).mul_f64(1.1),
        "taken {taken:?}: before a full lease duration without renewal"
    );

    // a comes back and rejoins; then b stops and hands everything over at a's next heartbeat.
    proxy.set(crate::proxy::Faults::default());
    until("a rejoins", || a.usable() == 2 && b.usable() == 2).await;
    b.stop().await;
    let handed = until("a takes b's released leases", || a.usable() == 4).await;
    assert!(
        handed < LEASE,
        "handed over in {handed:?}, not after a lease duration"
    );
    a.stop().await;
    assert!(
        table
            .all()
            .await
            .unwrap()
            .iter()
            .all(|l| l.record.owner.is_none()),
        "all released"
    );
    delete_table_if_any(&dynamo(), &name).await;
}

/// A metric without labels, read from a `/metrics` page.
fn metric(page: &str, name: &str) -> Option<f64> {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// Two `run` processes on one table: they split the shards, each deletes its share, and when
/// one is killed the other takes its shards over and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_run_processes_split_a_table_and_one_takes_over_from_a_killed_one() {
    use crate::support::{at, item, n, table_with_index};
    let table = table_with_index().await;
    // Items expire from 4 s to 10.4 s after they were written, 100 a second.
    let written = Instant::now();
    let items: Vec<_> = (0..640)
        .map(|i| {
            item(
                &format!("k{i}"),
                &[("ttl", at(4_000 + i * 10)), ("ttl_shard", n(i % 16))],
            )
        })
        .collect();
    table.put_many(items).await;
    let fleet = ["--lease-duration", "2s", "--worker-id"];
    let args =
        |id: &'static str| -> Vec<&'static str> { fleet.iter().copied().chain([id]).collect() };
    let (mut a, _a_lines, a_url) =
        crate::daemon::daemon_with_metrics(&table.name, endpoint(), &args("a"));
    let (mut b, _b_lines, b_url) =
        crate::daemon::daemon_with_metrics(&table.name, endpoint(), &args("b"));
    let page = |url: &str| crate::daemon::http_get(&format!("{url}/metrics"));
    let held = |url: &str| metric(&page(url), "precise_ttl_leases_held");
    let started = Instant::now();
    while !(held(&a_url) == Some(8.0) && held(&b_url) == Some(8.0)) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no even split: a {:?}, b {:?}\n{}",
            held(&a_url),
            held(&b_url),
            page(&a_url)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let split = Instant::now();
    let status = crate::support::json_report("status", &table);
    assert_eq!(
        status["workers"],
        serde_json::json!([{"worker": "a", "shards": 8}, {"worker": "b", "shards": 8}]),
        "{status}"
    );
    assert!(
        status["shards"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["owner"].is_string() && s["lease_age_seconds"].as_f64() < Some(5.0)),
        "{status}"
    );
    // Kill b half way through the expiries, and no sooner than 5 s after the split (a split
    // slowed by a busy machine still leaves b its share of deletes before it dies).
    let kill_at = (written + Duration::from_millis(7_200)).max(split + Duration::from_secs(5));
    tokio::time::sleep_until(kill_at.into()).await;
    let deleted_by = |url: &str| metric(&page(url), "precise_ttl_deleted_total").unwrap_or(0.0);
    let (da, db) = (deleted_by(&a_url), deleted_by(&b_url));
    assert!(
        da >= 64.0 && db >= 64.0,
        "both delete their share: a {da}, b {db}"
    );
    crate::support::signal(&b, nix::sys::signal::Signal::SIGKILL);
    let _ = b.wait();
    until("a takes every shard", || held(&a_url) == Some(16.0)).await;
    table.drains_to(0, 30, "items left behind").await;
    crate::support::terminate(&a);
    assert!(a.wait().unwrap().success());
}

/// More workers than shards: the one without a lease is a standby, and `/healthz` says it is
/// fine (a Kubernetes readiness probe on it must not fail for ever, nor restart it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_worker_without_a_lease_is_healthy() {
    let table = crate::support::table_with_index().await;
    let args = |id: &'static str| -> Vec<&'static str> {
        vec!["--shards", "1", "--lease-duration", "2s", "--worker-id", id]
    };
    let (mut a, _a_lines, a_url) =
        crate::daemon::daemon_with_metrics(&table.name, endpoint(), &args("a"));
    let page = |url: &str| crate::daemon::http_get(&format!("{url}/metrics"));
    let held = |url: &str| metric(&page(url), "precise_ttl_leases_held");
    until("a holds the one shard", || held(&a_url) == Some(1.0)).await;
    let (mut b, _b_lines, b_url) =
        crate::daemon::daemon_with_metrics(&table.name, endpoint(), &args("b"));
    let health = |url: &str| crate::daemon::http_get(&format!("{url}/healthz"));
    until("b says it is a standby", || {
        health(&b_url).contains("200 OK") && health(&b_url).contains("standby")
    })
    .await;
    assert_eq!(held(&b_url), Some(0.0));
    assert!(health(&a_url).contains("200 OK"));
    // a stops: b takes the shard within a second and reads it.
    crate::support::terminate(&a);
    assert!(a.wait().unwrap().success());
    let took = until("b takes the released shard", || held(&b_url) == Some(1.0)).await;
    assert!(took < Duration::from_secs(2), "handed over in {took:?}");
    crate::support::terminate(&b);
    assert!(b.wait().unwrap().success());
}

/// A fleet that stopped deleting, seen from a worker that cannot take the shards: worker a is
/// killed holding every lease, items fall due, and worker b's lease writes are throttled, so
/// nobody holds the shards. b's `/healthz` and `precise_ttl_shards_stalled` turn red within
/// one lease duration; once its writes pass, b takes the shards and deletes everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn due_items_with_no_lease_holder_turn_healthz_and_the_stall_metric_red() {
    use crate::support::{at, item, n, table_with_index};
    const LEASE_S: u64 = 4;
    let table = table_with_index().await;
    let args = |id: &'static str| ["--shards", "4", "--lease-duration", "4s", "--worker-id", id];
    let (mut a, _a_lines, a_url) =
        crate::daemon::daemon_with_metrics(&table.name, endpoint(), &args("a"));
    let page = |url: &str| crate::daemon::http_get(&format!("{url}/metrics"));
    let held = |url: &str| metric(&page(url), "precise_ttl_leases_held");
    until("a holds every shard", || held(&a_url) == Some(4.0)).await;
    crate::support::signal(&a, nix::sys::signal::Signal::SIGKILL);
    let _ = a.wait();
    table
        .put_many(
            (0..40)
                .map(|i| {
                    item(
                        &format!("k{i}"),
                        &[("ttl", at(-2_000)), ("ttl_shard", n(i % 4))],
                    )
                })
                .collect(),
        )
        .await;

    let proxy = crate::proxy::FaultProxy::start(endpoint()).await;
    proxy.set(crate::proxy::Faults {
        throttle_writes_to: Some("precise-ttl-leases"),
        ..Default::default()
    });
    let started = Instant::now();
    let (mut b, _b_lines, b_url) =
        crate::daemon::daemon_with_metrics(&table.name, &proxy.url, &args("b"));
    let health = |url: &str| crate::daemon::http_get(&format!("{url}/healthz"));
    until("b reports the stall", || {
        let h = health(&b_url);
        h.contains("503") && h.contains("stalled")
    })
    .await;
    let red_after = started.elapsed();
    // Half a lease duration unrenewed, then a probe each second; the process's own start (a
    // debug build connecting) comes on top.
    assert!(
        red_after <= Duration::from_secs(LEASE_S + 2),
        "red after {red_after:?}"
    );
    assert_eq!(
        metric(&page(&b_url), "precise_ttl_shards_stalled"),
        Some(4.0)
    );
    assert_eq!(held(&b_url), Some(0.0));
    assert_eq!(table.count().await, 40, "nothing deleted while stalled");

    proxy.set(crate::proxy::Faults::default());
    until("b takes the shards", || held(&b_url) == Some(4.0)).await;
    table.drains_to(0, 30, "items left behind").await;
    until("green again", || health(&b_url).contains("200 OK")).await;
    until("the stall metric clears", || {
        metric(&page(&b_url), "precise_ttl_shards_stalled") == Some(0.0)
    })
    .await;
    crate::support::terminate(&b);
    assert!(b.wait().unwrap().success());
}
