//! The daemon's configuration (the user's settings, from [`crate::settings`], and the daemon's
//! own constants), the report of a finished run, and how a run fails.

use crate::settings::DaemonSettings;
use crate::store::StoreError;
use precise_ttl_core::{Backoff, Timestamp};
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// How often each lane's index partitions are read.
    pub poll_interval: Duration,
    /// How far ahead a read looks, so items are deleted at their expiry, not at the next read.
    pub horizon: Duration,
    /// How far back the head read reaches; at least one poll interval.
    pub lookback: Duration,
    /// Keys per index query.
    pub page_size: u32,
    pub min_concurrency: usize,
    pub initial_concurrency: usize,
    pub max_concurrency: usize,
    /// Hard cap on items deleted per second, for users who budget write capacity.
    pub max_deletes_per_second: Option<f64>,
    /// The most backlog items deleted per second (a share of the table's write capacity, see
    /// `precise_ttl_core::capacity`); refusals cut the backlog below it first
    /// (`precise_ttl_core::admission::budget`). `None`: the backlog goes as fast as the table
    /// accepts.
    pub backlog_ceiling: Option<f64>,
    /// Items per delete request when several are ready (capped by the store's batch size).
    pub max_batch: usize,
    /// With batching, how long the first due item may wait for others to share its request.
    /// Zero (the default) sends each item the moment it is due: batches still form whenever
    /// items wait for a request slot or for the table's rate, and a linger adds its whole length
    /// to every item's lag when the store has room (see docs/benchmarks.md). A few milliseconds
    /// cost a serial store (DynamoDB Local) fewer requests for a steady trickle.
    pub batch_linger: Duration,
    /// Read-ahead items held in memory at most.
    pub max_scheduled: usize,
    /// Backlog items buffered between readers and dispatcher.
    pub backlog_buffer: usize,
    /// Backlog items in delete requests in flight at most. The store works through requests
    /// in order, so every backlog item queued ahead delays an item expiring now; two batches'
    /// worth keep a serialized store busy.
    pub max_backlog_in_flight: usize,
    /// Backlog items one lane's reader hands over per second at most. A lane is one index
    /// partition (a shard value, or a window label), which takes about 1,000 writes a second
    /// on DynamoDB, its share of deletes, inserts and updates included; a reader that pushes a
    /// page of 500 at once only earns throttles (seen on the simulated table: a catch-up with
    /// 11 % of its deletes refused by index partitions while the table had room).
    pub backlog_per_lane_per_second: f64,
    /// How long the backlog reader waits after a pass that found nothing. It catches what the
    /// head reads cannot: items written with an expiry already past the lookback, deletes that
    /// failed, index entries that arrived late.
    pub backlog_idle_interval: Duration,
    pub backoff: Backoff,
    /// On shutdown, how long in-flight deletes may take to finish.
    pub drain_timeout: Duration,
    /// How often to look for due items on stray partitions (shard values outside `0..shards`,
    /// left by writers with a larger shard count) and sweep them; `None`: never. These few items bypass the
    /// dispatcher and its rate cap: a stray is a mistake to fix, not a load to budget.
    pub stray_check_interval: Option<Duration>,
    /// Seeds the daemon's one random source (jitter, order of ties); `None`: from the OS. Tests
    /// set it to replay a run.
    pub seed: Option<u64>,
}

impl Default for DaemonConfig {
    /// The settings' defaults ([`crate::settings`], where `run` and the Lambda take theirs), no
    /// backlog ceiling (it needs a table's capacity), and the daemon's own constants.
    fn default() -> Self {
        DaemonConfig::from_settings(&DaemonSettings::default())
    }
}

impl DaemonConfig {
    /// `settings` over the daemon's own constants (what no user sets), without a backlog ceiling:
    /// [`DaemonSettings::daemon_config`] adds the table's.
    pub(crate) fn from_settings(settings: &DaemonSettings) -> Self {
        let max_concurrency = settings.concurrency as usize;
        DaemonConfig {
            poll_interval: settings.poll_interval,
            horizon: settings.horizon,
            lookback: settings.lookback,
            page_size: settings.page_size,
            // A limit of requests in flight below these would not be a limit the AIMD can work
            // in; a smaller --concurrency lowers them with it.
            min_concurrency: 2.min(max_concurrency),
            initial_concurrency: 32.min(max_concurrency),
            max_concurrency,
            max_deletes_per_second: settings.max_deletes_per_second,
            backlog_ceiling: None,
            max_batch: 25,
            batch_linger: settings.batch_linger,
            max_scheduled: 100_000,
            backlog_buffer: 2_000,
            max_backlog_in_flight: 50,
            backlog_per_lane_per_second: 700.0,
            backlog_idle_interval: Duration::from_secs(5),
            backoff: Backoff {
                max_attempts: settings.max_attempts,
                ..Backoff::default()
            },
            drain_timeout: Duration::from_secs(5),
            stray_check_interval: (!settings.stray_check_interval.is_zero())
                .then_some(settings.stray_check_interval),
            seed: None,
        }
    }
}

/// What a run did, when it ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonReport {
    pub deleted: u64,
    pub skipped: u64,
    /// Gone on a retry after a lost answer (see [`crate::metrics::UNCONFIRMED`]).
    pub unconfirmed: u64,
    pub errors: u64,
    pub throttled: u64,
    pub queries: u64,
    /// Every due item with TTL ≤ this is known deleted (`None`: no complete read yet).
    pub watermark: Option<Timestamp>,
    /// Lag of this run's deletes (`None`: nothing deleted).
    pub lag: Option<crate::counters::LagSummary>,
}

#[derive(Debug, Error)]
pub enum DaemonError {
    #[error("stopped: {0}")]
    Fatal(#[source] StoreError),
}
