//! A fault-injecting wrapper around any [`ExpiryStore`]: throttling, transient errors, lost
//! responses and added latency at configurable rates, for fast deterministic-enough tests of
//! what the engine does when the store misbehaves.

use crate::store::{DeleteOutcome, DuePageOf, DueQueryOf, ExpiryStore, StoreError};
use precise_ttl_core::{DueWindow, ErrorClass, ThrottleScope};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Probabilities per call, each in `[0, 1]`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FaultRates {
    /// The call is refused as throttled before it reaches the store.
    pub throttle: f64,
    /// What the injected throttles say refused them; `None` is
    /// [`ThrottleScope::Unknown`], as from a store that gives no reasons.
    pub throttle_scope: Option<ThrottleScope>,
    /// The call fails as transient (a 500) before it reaches the store.
    pub transient: f64,
    /// The call reaches the store and succeeds, but the caller sees a timeout: the retry then
    /// finds the item gone.
    pub lost_response: f64,
    /// Extra latency added to every call.
    pub latency: Duration,
}

#[derive(Debug, Default)]
pub struct FaultCounts {
    pub throttled: AtomicU64,
    pub transient: AtomicU64,
    pub lost: AtomicU64,
}

#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    rates: Mutex<FaultRates>,
    pub counts: FaultCounts,
}

impl<S> FaultyStore<S> {
    pub fn new(inner: S, rates: FaultRates) -> Self {
        FaultyStore {
            inner,
            rates: Mutex::new(rates),
            counts: FaultCounts::default(),
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Changes the rates from now on (e.g. to stop the faults mid-test).
    pub fn set_rates(&self, rates: FaultRates) {
        *self.rates.lock().unwrap_or_else(|p| p.into_inner()) = rates;
    }

    fn rates(&self) -> FaultRates {
        *self.rates.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Before the call: maybe refuse it.
    async fn before(&self, rates: &FaultRates) -> Result<(), StoreError> {
        if !rates.latency.is_zero() {
            tokio::time::sleep(rates.latency).await;
        }
        let roll = fastrand::f64();
        if roll < rates.throttle {
            self.counts.throttled.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::throttled(
                rates.throttle_scope.unwrap_or(ThrottleScope::Unknown),
                "injected: ThrottlingException",
            ));
        }
        if roll < rates.throttle + rates.transient {
            self.counts.transient.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::new(
                ErrorClass::Transient,
                "injected: InternalServerError",
            ));
        }
        Ok(())
    }

    fn lose(&self, rates: &FaultRates) -> bool {
        let lost = fastrand::f64() < rates.lost_response;
        if lost {
            self.counts.lost.fetch_add(1, Ordering::Relaxed);
        }
        lost
    }
}

impl<S: ExpiryStore> ExpiryStore for FaultyStore<S> {
    type Key = S::Key;
    type Cursor = S::Cursor;
    type Partition = S::Partition;

    async fn due_page(&self, query: DueQueryOf<'_, Self>) -> Result<DuePageOf<Self>, StoreError> {
        let rates = self.rates();
        self.before(&rates).await?;
        let page = self.inner.due_page(query).await?;
        if self.lose(&rates) {
            return Err(StoreError::new(
                ErrorClass::Transient,
                "injected: response lost",
            ));
        }
        Ok(page)
    }

    async fn delete_if_due(
        &self,
        key: &Self::Key,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        let rates = self.rates();
        self.before(&rates).await?;
        let outcome = self.inner.delete_if_due(key, window).await?;
        if self.lose(&rates) {
            return Err(StoreError::new(
                ErrorClass::Transient,
                "injected: response lost",
            ));
        }
        Ok(outcome)
    }

    fn max_batch(&self) -> usize {
        self.inner.max_batch()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_injected_throttle_has_the_configured_scope() {
        let refuse = |scope| FaultRates {
            throttle: 1.0,
            throttle_scope: scope,
            ..FaultRates::default()
        };
        let store = FaultyStore::new((), refuse(None));
        let err = store.before(&store.rates()).await.unwrap_err();
        assert_eq!(err.class, ErrorClass::Throttled);
        assert_eq!(err.throttle, Some(ThrottleScope::Unknown));
        store.set_rates(refuse(Some(ThrottleScope::IndexPartition)));
        let err = store.before(&store.rates()).await.unwrap_err();
        assert_eq!(err.throttle, Some(ThrottleScope::IndexPartition));
        assert_eq!(store.counts.throttled.load(Ordering::Relaxed), 2);
    }
}
