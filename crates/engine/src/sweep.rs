//! One pass over every shard: page through the due items and delete each one conditionally.
//!
//! Memory stays bounded whatever the backlog: a shard holds at most one page of keys, and the
//! number of deletes in flight is capped by a semaphore shared by all shards, so a huge shard
//! cannot starve the others of more than its share of permits.

use crate::clock::Clock;
use crate::counters::Counters;
use crate::observe::{NoopObserver, Observer};
use crate::retry::with_backoff;
use crate::store::{DeleteOutcome, DueItem, ExpiryStore, StoreError};
use precise_ttl_core::{Backoff, DueWindow, ErrorClass, Shard, ShardCount, SweepPlan, Timestamp};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use thiserror::Error;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

#[derive(Debug, Clone)]
pub struct SweepConfig {
    pub shards: ShardCount,
    /// Keys asked for per index query; bounds the memory a shard holds.
    pub page_size: u32,
    /// Deletes in flight across all shards.
    pub concurrency: usize,
    /// Shards paged through at the same time.
    pub shard_parallelism: usize,
    pub backoff: Backoff,
    /// Also look for due items on shard values from `shards` up to 1023 (the largest shard
    /// count), and sweep any found: lowering `--shards` then strands nothing. One single-item
    /// query per value, so about 1 000 small reads per pass.
    pub probe_strays: bool,
}

/// The largest shard value a writer using any valid shard count can produce.
pub const MAX_SHARD_VALUE: u16 = 1023;

impl SweepConfig {
    pub fn new(shards: ShardCount) -> Self {
        SweepConfig {
            shards,
            page_size: 500,
            concurrency: 32,
            shard_parallelism: 4,
            backoff: Backoff::default(),
            probe_strays: true,
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// The instant the pass looked for due items.
    pub now: Timestamp,
    pub deleted: u64,
    /// Conditional deletes that found the item changed (TTL extended or removed) or gone.
    pub skipped: u64,
    /// Items whose delete still failed after every retry; they stay due for the next pass.
    pub errors: u64,
    /// Calls that were throttled and retried.
    pub throttled: u64,
    /// Index pages read.
    pub pages: u64,
    /// Largest delay between an item's expiry and the moment its delete was sent, in ms.
    pub max_lag_ms: Option<i64>,
    /// Shard values outside `0..shards` that held due items, swept too.
    pub stray_shards: Vec<Shard>,
}

#[derive(Debug, Error)]
pub enum SweepError {
    /// Retrying cannot help: the table or index is missing, access is denied, the request is
    /// invalid, or the store stayed unreachable through every retry of an index query.
    #[error("sweep stopped: {0}")]
    Fatal(#[source] StoreError),
}

pub struct Sweeper<S: ExpiryStore, C: Clock> {
    store: Arc<S>,
    clock: Arc<C>,
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
    pub fn new(store: Arc<S>, clock: Arc<C>, config: SweepConfig) -> Self {
        Sweeper {
            store,
            clock,
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

    /// Deletes every item that is due now, on every shard (and every stray shard value, see
    /// [`SweepConfig::probe_strays`]), and reports what happened.
    pub async fn sweep_once(&self) -> Result<SweepReport, SweepError> {
        let plan = SweepPlan::new(self.clock.now(), self.config.shards);
        let strays = if self.config.probe_strays {
            self.find_stray_shards(plan.window).await?
        } else {
            Vec::new()
        };
        let mut shards = plan.shards.clone();
        shards.extend(strays.iter().copied());
        let mut report = self.sweep_shards(plan.window, &shards).await?;
        report.stray_shards = strays;
        Ok(report)
    }

    /// The shard values from `shards` to [`MAX_SHARD_VALUE`] with at least one item due in
    /// `window`.
    pub async fn find_stray_shards(&self, window: DueWindow) -> Result<Vec<Shard>, SweepError> {
        let first = self.config.shards.get();
        let mut probes = JoinSet::new();
        // As many probes in flight as shards read at once: the probe is background work.
        let permits = Arc::new(Semaphore::new(self.config.shard_parallelism.max(1)));
        for value in first..=MAX_SHARD_VALUE {
            let store = Arc::clone(&self.store);
            let backoff = self.config.backoff;
            let permits = Arc::clone(&permits);
            probes.spawn(async move {
                let _permit = permits.acquire_owned().await;
                let shard = Shard(value);
                let page =
                    with_backoff(&backoff, || {}, || store.due_page(shard, window, None, 1)).await;
                (shard, page.map(|p| !p.items.is_empty()))
            });
        }
        let mut found = Vec::new();
        while let Some(joined) = probes.join_next().await {
            match joined {
                Ok((shard, Ok(true))) => found.push(shard),
                Ok((_, Ok(false))) => {}
                Ok((_, Err(e))) if e.class == ErrorClass::Fatal => {
                    probes.abort_all();
                    return Err(SweepError::Fatal(e));
                }
                Ok((shard, Err(e))) => {
                    tracing::warn!(%shard, error = %e, "stray shard probe failed; the next pass tries again");
                }
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => {}
            }
        }
        found.sort();
        if !found.is_empty() {
            tracing::warn!(
                shards = ?found.iter().map(|s| s.0).collect::<Vec<_>>(),
                "due items on shard values outside 0..{first}: swept, but raise --shards or rewrite them"
            );
        }
        Ok(found)
    }

    /// Deletes every item due in `window` on `shards`.
    pub async fn sweep_shards(
        &self,
        window: DueWindow,
        shards_to_sweep: &[Shard],
    ) -> Result<SweepReport, SweepError> {
        let counters = Arc::new(PassState::default());
        let delete_permits = Arc::new(Semaphore::new(self.config.concurrency.max(1)));
        let shard_permits = Arc::new(Semaphore::new(self.config.shard_parallelism.max(1)));
        let mut shards = JoinSet::new();
        for shard in shards_to_sweep.iter().copied() {
            let pass = ShardPass {
                store: Arc::clone(&self.store),
                clock: Arc::clone(&self.clock),
                observer: Arc::clone(&self.observer),
                counters: Arc::clone(&counters),
                delete_permits: Arc::clone(&delete_permits),
                config: self.config.clone(),
                shard,
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
            errors: tally.errors,
            throttled: tally.throttled,
            pages: tally.queries,
            max_lag_ms: *counters
                .max_lag_ms
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
            stray_shards: Vec::new(),
        })
    }
}

struct ShardPass<S: ExpiryStore, C: Clock> {
    store: Arc<S>,
    clock: Arc<C>,
    observer: Arc<dyn Observer<S::Key>>,
    counters: Arc<PassState>,
    delete_permits: Arc<Semaphore>,
    config: SweepConfig,
    shard: Shard,
    window: DueWindow,
}

impl<S: ExpiryStore, C: Clock> ShardPass<S, C> {
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
                        self.shard,
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
                    // Without the index we cannot make progress on this shard; say so loudly.
                    self.counters.fail(e);
                    break;
                }
            };
            self.counters.counts.query("sweep");
            self.observer.page(self.shard, page.items.len());
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
        let result = with_backoff(
            &self.backoff,
            || {
                self.counters.counts.throttled();
                self.observer.throttled();
            },
            || {
                // The window is taken afresh for every attempt: an item is due when the delete
                // reaches the store, not when the index was read.
                self.store
                    .delete_if_due(&item.key, DueWindow::at(self.clock.now()))
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
