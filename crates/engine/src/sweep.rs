//! One pass over every partition of the expiry index: page through the due items and delete
//! each one conditionally.
//!
//! Memory stays bounded whatever the backlog: a partition holds at most one page of keys, and the
//! number of deletes in flight is capped by a semaphore shared by all partitions, so a huge one
//! cannot starve the others of more than its share of permits.

use crate::clock::Clock;
use crate::counters::Counters;
use crate::observe::{NoopObserver, Observer};
use crate::partition::Partitioning;
use crate::retry::with_backoff;
use crate::store::{DeleteOutcome, DueItem, ExpiryStore, StoreError};
use precise_ttl_core::{Backoff, DueWindow, ErrorClass, Timestamp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use thiserror::Error;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// Keys asked for per index query; bounds the memory a partition holds.
    pub page_size: u32,
    /// Deletes in flight across all partitions.
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

/// A pass's tallies, and what stops it.
#[derive(Default)]
struct PassState {
    counts: Counters,
    max_lag_ms: Mutex<Option<i64>>,
    stop: AtomicBool,
    fatal: Mutex<Option<StoreError>>,
}

impl PassState {
    fn fail(&self, e: StoreError) {
        self.stop.store(true, Ordering::SeqCst);
        let mut slot = self.fatal.lock().unwrap_or_else(|p| p.into_inner());
        slot.get_or_insert(e);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
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
        let mut partitions: Vec<S::Partition> = (0..self.partitioning.lanes())
            .flat_map(|lane| self.partitioning.partitions(lane, window))
            .collect();
        partitions.extend(strays.iter().cloned());
        let mut report = self.sweep_partitions(window, &partitions).await?;
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
                    || store.due_page(&partition, window, None, 1),
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

    /// Deletes every item due in `window` on `partitions`.
    pub async fn sweep_partitions(
        &self,
        window: DueWindow,
        partitions: &[S::Partition],
    ) -> Result<SweepReport<S::Partition>, SweepError> {
        let counters = Arc::new(PassState::default());
        let delete_permits = Arc::new(Semaphore::new(self.config.concurrency.max(1)));
        let shard_permits = Arc::new(Semaphore::new(self.config.shard_parallelism.max(1)));
        let mut shards = JoinSet::new();
        for partition in partitions.iter().cloned() {
            let pass = PartitionPass {
                store: Arc::clone(&self.store),
                clock: Arc::clone(&self.clock),
                observer: Arc::clone(&self.observer),
                counters: Arc::clone(&counters),
                delete_permits: Arc::clone(&delete_permits),
                config: self.config.clone(),
                partition,
                window,
            };
            let shard_permits = Arc::clone(&shard_permits);
            shards.spawn(async move {
                let _permit = shard_permits.acquire_owned().await;
                pass.run().await;
            });
        }
        while let Some(joined) = shards.join_next().await {
            if let Err(e) = joined {
                // A panicking task is a bug; surface it rather than report a clean pass.
                std::panic::resume_unwind(e.into_panic());
            }
        }
        if let Some(e) = counters
            .fatal
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            return Err(SweepError::Fatal(e));
        }
        let tally = counters.counts.tally();
        Ok(SweepReport {
            now: window.until,
            deleted: tally.deleted,
            skipped: tally.skipped,
            unconfirmed: tally.unconfirmed,
            errors: tally.errors,
            throttled: tally.throttled,
            pages: tally.queries,
            partitions: partitions.len() as u64,
            max_lag_ms: *counters
                .max_lag_ms
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
            strays: Vec::new(),
        })
    }
}

struct PartitionPass<S: ExpiryStore, C: Clock> {
    store: Arc<S>,
    clock: Arc<C>,
    observer: Arc<dyn Observer<S::Key>>,
    counters: Arc<PassState>,
    delete_permits: Arc<Semaphore>,
    config: SweepConfig,
    partition: S::Partition,
    window: DueWindow,
}

impl<S: ExpiryStore, C: Clock> PartitionPass<S, C> {
    async fn run(self) {
        let mut deletes = JoinSet::new();
        let mut cursor = None;
        loop {
            if self.counters.stopped() {
                break;
            }
            let page = with_backoff(
                &self.config.backoff,
                || self.note_throttle(),
                || {
                    self.store.due_page(
                        &self.partition,
                        self.window,
                        cursor.clone(),
                        self.config.page_size,
                    )
                },
            )
            .await;
            let page = match page {
                Ok(p) => p,
                Err(e) => {
                    // Without the index we cannot make progress on this partition; say so loudly.
                    self.counters.fail(e);
                    break;
                }
            };
            self.counters.counts.query("sweep");
            self.observer.page(page.items.len());
            for item in page.items {
                if self.counters.stopped() {
                    break;
                }
                let Ok(permit) = Arc::clone(&self.delete_permits).acquire_owned().await else {
                    break;
                };
                let task = DeleteTask {
                    store: Arc::clone(&self.store),
                    clock: Arc::clone(&self.clock),
                    observer: Arc::clone(&self.observer),
                    counters: Arc::clone(&self.counters),
                    backoff: self.config.backoff,
                };
                deletes.spawn(async move {
                    task.run(item).await;
                    drop(permit);
                });
                while let Some(done) = deletes.try_join_next() {
                    if let Err(e) = done {
                        std::panic::resume_unwind(e.into_panic());
                    }
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        while let Some(done) = deletes.join_next().await {
            if let Err(e) = done {
                std::panic::resume_unwind(e.into_panic());
            }
        }
    }

    fn note_throttle(&self) {
        self.counters.counts.throttled();
        self.observer.throttled();
    }
}

struct DeleteTask<S: ExpiryStore, C: Clock> {
    store: Arc<S>,
    clock: Arc<C>,
    observer: Arc<dyn Observer<S::Key>>,
    counters: Arc<PassState>,
    backoff: Backoff,
}

impl<S: ExpiryStore, C: Clock> DeleteTask<S, C> {
    async fn run(self, item: DueItem<S::Key>) {
        // As in the daemon: after a lost answer, "gone" cannot say who deleted the item.
        let answer_lost = std::sync::atomic::AtomicBool::new(false);
        let result = with_backoff(
            &self.backoff,
            || {
                self.counters.counts.throttled();
                self.observer.throttled();
            },
            || {
                // The window is taken afresh for every attempt: an item is due when the delete
                // reaches the store, not when the index was read.
                let attempt = self
                    .store
                    .delete_if_due(&item.key, DueWindow::at(self.clock.now()));
                async {
                    let result = attempt.await;
                    if matches!(&result, Err(e) if e.class.is_retryable() && e.class != ErrorClass::Throttled)
                    {
                        answer_lost.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    result
                }
            },
        )
        .await;
        match result {
            Ok(DeleteOutcome::Deleted) => {
                self.counters.counts.deleted();
                let acked = self.clock.now();
                let lag = acked.millis_since(item.expiry.at());
                let mut max = self
                    .counters
                    .max_lag_ms
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                *max = Some(max.map_or(lag, |m| m.max(lag)));
                drop(max);
                self.observer.deleted(&item.key, item.expiry, acked);
            }
            Ok(DeleteOutcome::NotDue) if answer_lost.into_inner() => {
                self.counters.counts.unconfirmed();
                self.observer.skipped(&item.key, item.expiry);
            }
            Ok(DeleteOutcome::NotDue) => {
                self.counters.counts.skipped();
                self.observer.skipped(&item.key, item.expiry);
            }
            Err(e) if e.class == ErrorClass::Fatal => self.counters.fail(e),
            Err(e) => {
                tracing::warn!(key = ?item.key, error = %e, "delete failed after retries; the item stays due");
                self.counters.counts.error();
            }
        }
    }
}
