//! One pass over every partition of the expiry index (`sweep`): page through the due items and
//! delete each one conditionally, through the daemon's own dispatcher ([`Daemon::pass`]), so a
//! pass batches, answers refusals and retries exactly as `run` and the Lambda do.
//!
//! Memory stays bounded whatever the backlog: a partition read holds at most one page of keys,
//! and admission takes in only what the requests in flight can carry.

use super::{Daemon, DaemonConfig, DaemonError};
use crate::clock::Clock;
use crate::observe::{NoopObserver, Observer};
use crate::partition::Partitioning;
use crate::retry::with_backoff;
use crate::store::{DueQuery, ExpiryStore, StoreError};
use precise_ttl_core::{Backoff, DueWindow, ErrorClass, Timestamp};
use std::sync::Arc;
use thiserror::Error;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// Keys asked for per index query; bounds the memory a partition holds.
    pub page_size: u32,
    /// Delete requests in flight at most (as `run`'s `--concurrency`).
    pub concurrency: usize,
    /// Partitions paged through at the same time.
    pub shard_parallelism: usize,
    pub backoff: Backoff,
    /// Also look for due items on the partitions writers may use by mistake (shard values from
    /// `shards` up to 1023, the largest shard count), and sweep any found: lowering `--shards`
    /// then strands nothing. One single-item query per value, so about 1 000 small reads.
    pub probe_strays: bool,
}

impl Default for SweepConfig {
    fn default() -> Self {
        // `sweep` and `run` share --page-size, --concurrency and --max-attempts: one default each.
        let settings = crate::settings::DaemonSettings::default();
        SweepConfig {
            page_size: settings.page_size,
            concurrency: settings.concurrency as usize,
            shard_parallelism: 4,
            backoff: Backoff {
                max_attempts: settings.max_attempts,
                ..Backoff::default()
            },
            probe_strays: true,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepReport<P> {
    /// The instant the pass looked for due items.
    pub now: Timestamp,
    pub deleted: u64,
    /// Conditional deletes that found the item changed (TTL extended or removed) or gone.
    pub skipped: u64,
    /// Gone on a retry after a lost answer (see [`crate::metrics::UNCONFIRMED`]).
    pub unconfirmed: u64,
    /// Items whose delete still failed after every retry; they stay due for the next pass.
    pub errors: u64,
    /// Calls that were throttled and retried.
    pub throttled: u64,
    /// Index pages read.
    pub pages: u64,
    /// Partitions read.
    pub partitions: u64,
    /// Largest delay between an item's expiry and the moment its delete was sent, in ms.
    pub max_lag_ms: Option<i64>,
    /// Partitions outside the layout (shard values outside `0..shards`) that held due items,
    /// swept too.
    pub strays: Vec<P>,
}

#[derive(Debug, Error)]
pub enum SweepError {
    /// Retrying cannot help: the table or index is missing, access is denied, the request is
    /// invalid, or the store stayed unreachable through every retry of an index query.
    #[error("sweep stopped: {0}")]
    Fatal(#[source] StoreError),
}

/// Where a store's due items are: a shard count, or the blog layout's windows.
pub type SharedPartitioning<P> = Arc<dyn Partitioning<Partition = P>>;

pub struct Sweeper<S: ExpiryStore, C: Clock> {
    store: Arc<S>,
    clock: Arc<C>,
    partitioning: SharedPartitioning<S::Partition>,
    config: SweepConfig,
    observer: Arc<dyn Observer<S::Key>>,
}

impl<S: ExpiryStore, C: Clock> std::fmt::Debug for Sweeper<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sweeper")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S: ExpiryStore, C: Clock> Sweeper<S, C> {
    pub fn new(
        store: Arc<S>,
        clock: Arc<C>,
        partitioning: SharedPartitioning<S::Partition>,
        config: SweepConfig,
    ) -> Self {
        Sweeper {
            store,
            clock,
            partitioning,
            config,
            observer: Arc::new(NoopObserver),
        }
    }

    pub fn with_observer(mut self, observer: Arc<dyn Observer<S::Key>>) -> Self {
        self.observer = observer;
        self
    }

    pub fn config(&self) -> &SweepConfig {
        &self.config
    }

    /// Deletes every item that is due now, on every partition (and every stray one, see
    /// [`SweepConfig::probe_strays`]), and reports what happened.
    pub async fn sweep_once(&self) -> Result<SweepReport<S::Partition>, SweepError> {
        let window = DueWindow::at(self.clock.now());
        let strays = if self.config.probe_strays {
            self.find_strays(window).await?
        } else {
            Vec::new()
        };
        let lanes = self.partitioning.lanes().max(1);
        let mut partitions: Vec<(usize, S::Partition)> = (0..lanes)
            .flat_map(|lane| {
                self.partitioning
                    .partitions(lane, window)
                    .into_iter()
                    .map(move |p| (lane, p))
            })
            .collect();
        // A stray partition has no lane of its own; admission only needs one to queue it under.
        partitions.extend(
            strays
                .iter()
                .cloned()
                .enumerate()
                .map(|(i, p)| (i % lanes, p)),
        );
        let mut report = self.pass(window, partitions).await?;
        report.strays = strays;
        Ok(report)
    }

    /// The stray partitions (see [`Partitioning::strays`]) with at least one item due in
    /// `window`.
    pub async fn find_strays(&self, window: DueWindow) -> Result<Vec<S::Partition>, SweepError> {
        let mut probes = JoinSet::new();
        // As many probes in flight as partitions read at once: the probe is background work.
        let permits = Arc::new(Semaphore::new(self.config.shard_parallelism.max(1)));
        for (i, partition) in self.partitioning.strays().into_iter().enumerate() {
            let store = Arc::clone(&self.store);
            let backoff = self.config.backoff;
            let permits = Arc::clone(&permits);
            probes.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let page = with_backoff(
                    &backoff,
                    || {},
                    || store.due_page(DueQuery::probe(&partition, window)),
                )
                .await;
                (i, partition, page.map(|p| !p.items.is_empty()))
            });
        }
        let mut found = Vec::new();
        while let Some(joined) = probes.join_next().await {
            match joined {
                Ok((i, partition, Ok(true))) => found.push((i, partition)),
                Ok((_, _, Ok(false))) => {}
                Ok((_, _, Err(e))) if e.class == ErrorClass::Fatal => {
                    probes.abort_all();
                    return Err(SweepError::Fatal(e));
                }
                Ok((_, partition, Err(e))) => {
                    tracing::warn!(%partition, error = %e, "stray partition probe failed; the next pass tries again");
                }
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => {}
            }
        }
        found.sort_by_key(|(i, _)| *i);
        let found: Vec<S::Partition> = found.into_iter().map(|(_, p)| p).collect();
        if !found.is_empty() {
            tracing::warn!(
                partitions = ?found.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "due items on index partitions outside the layout (shard values outside 0..shards): swept, but raise --shards or rewrite them"
            );
        }
        Ok(found)
    }

    /// Deletes every item due in `window` on `partitions`, each filed under the lane of its
    /// position (partition `i` under lane `i` modulo the lanes: a shard count's partitions are
    /// its lanes, in order).
    pub async fn sweep_partitions(
        &self,
        window: DueWindow,
        partitions: &[S::Partition],
    ) -> Result<SweepReport<S::Partition>, SweepError> {
        let lanes = self.partitioning.lanes().max(1);
        let laned = partitions
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, p)| (i % lanes, p))
            .collect();
        self.pass(window, laned).await
    }

    /// The pass itself: the daemon's dispatcher over these partitions' due items
    /// ([`Daemon::pass`]), so `sweep`, `run` and the Lambda delete through one admission.
    async fn pass(
        &self,
        window: DueWindow,
        partitions: Vec<(usize, S::Partition)>,
    ) -> Result<SweepReport<S::Partition>, SweepError> {
        let count = partitions.len() as u64;
        // The daemon's settings for what a pass sets (one meaning per flag: `--concurrency` is
        // requests in flight for both), its own constants for the rest.
        let settings = crate::settings::DaemonSettings {
            concurrency: self.config.concurrency.max(1) as u64,
            page_size: self.config.page_size,
            max_attempts: self.config.backoff.max_attempts,
            ..crate::settings::DaemonSettings::default()
        };
        let config = DaemonConfig {
            backoff: self.config.backoff,
            stray_check_interval: None,
            ..DaemonConfig::from_settings(&settings)
        };
        let report = Daemon::new(
            Arc::clone(&self.store),
            Arc::clone(&self.clock),
            Arc::clone(&self.partitioning),
            config,
        )
        .with_observer(Arc::clone(&self.observer))
        .pass(partitions, window, self.config.shard_parallelism)
        .await
        .map_err(|DaemonError::Fatal(e)| SweepError::Fatal(e))?;
        Ok(SweepReport {
            now: window.until,
            deleted: report.deleted,
            skipped: report.skipped,
            unconfirmed: report.unconfirmed,
            errors: report.errors,
            throttled: report.throttled,
            pages: report.queries,
            partitions: count,
            max_lag_ms: report.lag.map(|l| l.max_ms as i64),
            strays: Vec::new(),
        })
    }
}
