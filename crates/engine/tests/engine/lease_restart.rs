//! The engine's lease restart tests.

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
