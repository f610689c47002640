//! Shard leases against DynamoDB Local: the lease table's conditional writes under the engine's
//! lease rules (acquire, steal to an even split, lost renewal, expiry after a kill, release).

use crate::support::{dynamo, endpoint};
use precise_ttl_dynamodb::{AdapterError, Dynamo, LeaseTable, create_lease_table};
use precise_ttl_engine::lease::{LeaseConfig, Leases};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

const LEASE: Duration = Duration::from_secs(2);

struct Worker {
    leases: Arc<Leases<LeaseTable>>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
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
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn({
            let leases = Arc::clone(&leases);
            async move {
                let _ = leases
                    .run(async {
                        let _ = stopped.await;
                    })
                    .await;
                leases.release_all().await;
            }
        });
        Worker {
            leases,
            stop: Some(stop),
            task,
        }
    }

    fn usable(&self) -> usize {
        self.leases.usable().borrow().len()
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.await.unwrap();
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
        taken >= LEASE - LEASE / 3,
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
    let _ = dynamo().query.delete_table().table_name(&name).send().await;
}
