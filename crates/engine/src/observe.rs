//! Per-item events for whoever wants them (the demo's printout, metrics, benchmarks).

use precise_ttl_core::{Expiry, Timestamp};

pub trait Observer<K>: Send + Sync + 'static {
    /// An item was deleted; `at` is when the store acknowledged the delete (so `at` − expiry is
    /// the lag a reader could have seen the item for).
    fn deleted(&self, _key: &K, _expiry: Expiry, _at: Timestamp) {}
    /// A conditional delete found the item changed or gone.
    fn skipped(&self, _key: &K, _expiry: Expiry) {}
    /// A call was throttled and will be retried.
    fn throttled(&self) {}
    /// A page of due items came back from the index.
    fn page(&self, _items: usize) {}
}

#[derive(Debug, Clone, Copy, Default)]
pub struct NoopObserver;

impl<K> Observer<K> for NoopObserver {}
