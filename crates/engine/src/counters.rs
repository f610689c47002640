//! The tallies of a run, one type for the daemon and the one-pass sweep: each increment also
//! feeds the matching metric, so a report and `/metrics` cannot disagree.

use crate::metrics as m;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub(crate) struct Counters {
    deleted: AtomicU64,
    skipped: AtomicU64,
    errors: AtomicU64,
    throttled: AtomicU64,
    queries: AtomicU64,
}

/// A reading of [`Counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    pub deleted: u64,
    pub skipped: u64,
    pub errors: u64,
    pub throttled: u64,
    pub queries: u64,
}

impl Counters {
    pub fn deleted(&self) {
        self.deleted.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(m::DELETED).increment(1);
    }

    pub fn skipped(&self) {
        self.skipped.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(m::SKIPPED).increment(1);
    }

    pub fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(m::ERRORS).increment(1);
    }

    pub fn throttled(&self) {
        self.throttled.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(m::THROTTLED).increment(1);
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
        self.errors.fetch_add(t.errors, Ordering::Relaxed);
        self.throttled.fetch_add(t.throttled, Ordering::Relaxed);
        self.queries.fetch_add(t.queries, Ordering::Relaxed);
    }
}
