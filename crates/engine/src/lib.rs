//! Orchestration of expiry deletes on tokio, generic over a small store trait.
//!
//! The engine knows nothing about AWS: it asks an [`ExpiryStore`] for the due items of a
//! partition (a shard, or a window label of the 2022 blog's layout, see [`partition`])
//! and asks it to delete each one on the condition that it is still due. Everything that decides
//! *what* is due lives in `precise-ttl-core`; everything that talks to DynamoDB lives in the
//! adapter crate. With the `test-util` feature,
//! `memory::MemoryStore` (a reference implementation) and `faulty::FaultyStore` (fault injection)
//! serve the tests of this crate and of the crates built on it.

pub mod capacity_rate;
pub mod clock;
mod counters;
pub mod daemon;
#[cfg(feature = "test-util")]
pub mod faulty;
pub mod host;
pub mod lease;
#[cfg(feature = "test-util")]
pub mod lease_memory;
#[cfg(feature = "test-util")]
pub mod memory;
pub mod metrics;
pub mod metrics_page;
pub mod observe;
pub mod partition;
#[cfg(feature = "test-util")]
pub mod partitioned;
pub mod retry;
pub mod settings;
pub mod skew;
pub mod store;
/// `sweep`: one pass of the daemon's pipeline over every partition (it lives in `daemon`, whose
/// stray check runs one); here under its own name.
pub use daemon::sweep;
pub mod worker;

#[cfg(feature = "test-util")]
pub use clock::TokioClock;
pub use clock::{Clock, SystemClock};
pub use counters::LagSummary;
pub use daemon::{
    Daemon, DaemonConfig, DaemonError, DaemonHandle, DaemonReport, DaemonStatus, Health,
};
pub use observe::{NoopObserver, Observer};
pub use partition::{Partitioning, Windows};
pub use settings::{DaemonSettings, SettingError};
pub use store::{
    DeleteOutcome, DueItem, DuePage, DuePageOf, DueQuery, DueQueryOf, ExpiryStore, StoreError,
};
pub use sweep::{SharedPartitioning, SweepConfig, SweepError, SweepReport, Sweeper};
