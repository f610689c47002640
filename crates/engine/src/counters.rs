//! The tallies of a run, one type for the daemon and the one-pass sweep: each increment also
//! feeds the matching metric, so a report and `/metrics` cannot disagree.

use crate::metrics as m;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct Counters {
    deleted: AtomicU64,
    skipped: AtomicU64,
    unconfirmed: AtomicU64,
    errors: AtomicU64,
    throttled: AtomicU64,
    queries: AtomicU64,
    /// Lag of each delete of ours, in ms (`None` until the first).
    lags: Mutex<Option<hdrhistogram::Histogram<u64>>>,
}

/// One more of `tally`, and of the metric `name` that mirrors it.
fn count(tally: &AtomicU64, name: &'static str) {
    tally.fetch_add(1, Ordering::Relaxed);
    metrics::counter!(name).increment(1);
}

/// Lag percentiles of a run's deletes, in ms from each item's TTL to the acknowledgement of its
/// delete (3 significant digits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LagSummary {
    pub count: u64,
    pub p50_ms: u64,
    pub p90_ms: u64,
    pub p99_ms: u64,
    pub max_ms: u64,
}

/// A reading of [`Counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub deleted: u64,
    pub skipped: u64,
    pub unconfirmed: u64,
    pub errors: u64,
    pub throttled: u64,
    pub queries: u64,
}

impl Counters {
    pub fn deleted(&self) {
        count(&self.deleted, m::DELETED);
    }

    pub fn skipped(&self) {
        count(&self.skipped, m::SKIPPED);
    }

    /// Gone when a delete was retried after an attempt whose answer was lost: neither
    /// "deleted" (another worker may have deleted it) nor "skipped" (we may have).
    pub fn unconfirmed(&self) {
        count(&self.unconfirmed, m::UNCONFIRMED);
    }

    pub fn error(&self) {
        count(&self.errors, m::ERRORS);
    }

    pub fn throttled(&self) {
        count(&self.throttled, m::THROTTLED);
    }

    /// A delete of ours acknowledged `lag_ms` after the item's TTL.
    pub fn lag(&self, lag_ms: u64) {
        metrics::histogram!(m::LAG_SECONDS).record(lag_ms as f64 / 1000.0);
        let mut lags = self.lags.lock().unwrap_or_else(|p| p.into_inner());
        let h = lags.get_or_insert_with(|| {
            hdrhistogram::Histogram::new(3).expect("3 significant digits is a valid precision")
        });
        // `record` grows the histogram; it fails only for values beyond u64 range.
        let _ = h.record(lag_ms);
    }

    pub fn lag_summary(&self) -> Option<LagSummary> {
        let lags = self.lags.lock().unwrap_or_else(|p| p.into_inner());
        let h = lags.as_ref()?;
        Some(LagSummary {
            count: h.len(),
            p50_ms: h.value_at_quantile(0.5),
            p90_ms: h.value_at_quantile(0.9),
            p99_ms: h.value_at_quantile(0.99),
            max_ms: h.max(),
        })
    }

    /// An index query sent by `reader` (`head`, `backlog` or `sweep`).
    pub fn query(&self, reader: &'static str) {
        self.queries.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(m::QUERIES, "reader" => reader).increment(1);
    }

    pub fn tally(&self) -> Tally {
        Tally {
            deleted: self.deleted.load(Ordering::Relaxed),
            skipped: self.skipped.load(Ordering::Relaxed),
            unconfirmed: self.unconfirmed.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            throttled: self.throttled.load(Ordering::Relaxed),
            queries: self.queries.load(Ordering::Relaxed),
        }
    }
}

impl Counters {
    /// Adds what another run (the daemon's stray sweeps) counted; its metrics were already
    /// emitted when it counted them.
    pub fn absorb(&self, t: Tally) {
        self.deleted.fetch_add(t.deleted, Ordering::Relaxed);
        self.skipped.fetch_add(t.skipped, Ordering::Relaxed);
        self.unconfirmed.fetch_add(t.unconfirmed, Ordering::Relaxed);
        self.errors.fetch_add(t.errors, Ordering::Relaxed);
        self.throttled.fetch_add(t.throttled, Ordering::Relaxed);
        self.queries.fetch_add(t.queries, Ordering::Relaxed);
    }
}
