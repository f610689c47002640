//! The lease table in memory, with the same conditional-write rules as the DynamoDB one, and a
//! switch that makes one worker's view of it unreachable (for lost-renewal tests).

use crate::lease::LeaseStore;
use crate::store::StoreError;
use precise_ttl_core::ErrorClass;
use precise_ttl_core::lease::LeaseRecord;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One lease table shared by every worker of a test.
#[derive(Debug, Default)]
pub struct MemoryLeaseTable {
    leases: Mutex<BTreeMap<String, LeaseRecord>>,
}

impl MemoryLeaseTable {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn get(&self, key: &str) -> Option<LeaseRecord> {
        self.leases.lock().unwrap().get(key).cloned()
    }

    /// How many leases `worker` owns.
    pub fn owned_by(&self, worker: &str) -> usize {
        let leases = self.leases.lock().unwrap();
        leases
            .values()
            .filter(|r| r.owner.as_deref() == Some(worker))
            .count()
    }
}

/// One worker's connection to a [`MemoryLeaseTable`].
#[derive(Debug)]
pub struct MemoryLeases {
    table: Arc<MemoryLeaseTable>,
    down: AtomicBool,
    writes_throttled: AtomicBool,
    write_latency: std::sync::Mutex<std::time::Duration>,
}

impl MemoryLeases {
    pub fn new(table: &Arc<MemoryLeaseTable>) -> Self {
        MemoryLeases {
            table: Arc::clone(table),
            down: AtomicBool::new(false),
            writes_throttled: AtomicBool::new(false),
            write_latency: std::sync::Mutex::new(std::time::Duration::ZERO),
        }
    }

    /// While down, every call of this worker fails as a transient error.
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// While set, every lease write of this worker is throttled (reads still answer): a lease
    /// table without the write capacity a fleet's heartbeats need.
    pub fn set_writes_throttled(&self, throttled: bool) {
        self.writes_throttled.store(throttled, Ordering::SeqCst);
    }

    /// From now on, every write of this worker takes this long (a slow or saturated store).
    pub fn set_write_latency(&self, latency: std::time::Duration) {
        *self.write_latency.lock().unwrap() = latency;
    }

    fn reachable(&self) -> Result<(), StoreError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(StoreError::new(
                ErrorClass::Transient,
                "injected: lease table unreachable",
            ));
        }
        Ok(())
    }
}

impl LeaseStore for MemoryLeases {
    async fn ensure(&self, keys: &[String]) -> Result<(), StoreError> {
        self.reachable()?;
        let mut leases = self.table.leases.lock().unwrap();
        for key in keys {
            leases.entry(key.clone()).or_insert_with(|| LeaseRecord {
                key: key.clone(),
                owner: None,
                counter: 0,
            });
        }
        Ok(())
    }

    async fn list(&self, keys: &[String]) -> Result<Vec<LeaseRecord>, StoreError> {
        self.reachable()?;
        let leases = self.table.leases.lock().unwrap();
        Ok(keys.iter().filter_map(|k| leases.get(k).cloned()).collect())
    }

    async fn write(
        &self,
        key: &str,
        expected: u64,
        owner: Option<&str>,
    ) -> Result<bool, StoreError> {
        let latency = *self.write_latency.lock().unwrap();
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        self.reachable()?;
        if self.writes_throttled.load(Ordering::SeqCst) {
            return Err(StoreError::new(
                ErrorClass::Throttled,
                "injected: lease write throttled",
            ));
        }
        let mut leases = self.table.leases.lock().unwrap();
        match leases.get_mut(key) {
            Some(r) if r.counter == expected => {
                r.counter += 1;
                r.owner = owner.map(Into::into);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
