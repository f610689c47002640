//! The long-running sweeper: deletes each item at its expiry instant, catches up any backlog,
//! and keeps a watermark of what is known deleted.
//!
//! Per lane (a shard of our layout; the window labels of the blog's, see [`crate::partition`]),
//! two readers feed one dispatcher:
//! - the **head reader** polls the index every `poll_interval` for items expiring in
//!   `[now − lookback, now + horizon]`. Items not yet due wait in a timer heap and are deleted at
//!   their exact expiry instant; `lookback ≥ poll_interval` means an item written after one read
//!   with an expiry before the next is caught by the next.
//! - the **backlog reader** pages through everything older (`[now − 5 years, now − lookback]`),
//!   oldest first, into a bounded queue: downtime, bursts, failed deletes and late index entries
//!   are caught up at full speed with memory bounded whatever the backlog size.
//!
//! While a lane's due items wait longer than `BEHIND` for a request, both its readers read only
//! time not read yet: re-reading recent time would list items already waiting and take the CPU the
//! deletes need. A head read with time in hand waits (up to `READ_YIELD_MAX`) while due items
//! wait: deleting the present goes before reading the future.
//!
//! The dispatcher is a thin shell around `precise_ttl_core::admission`: on-time items before
//! backlog items, oldest first across lanes, each refusal answered by the controller of what
//! refused (a lane's own limit for its index partition, the requests in flight for the table).
//!
//! The parts: [`config`] (settings, report, error), [`readers`] (head, backlog, stray),
//! [`dispatch`] (admission's I/O shell and the delete requests), [`status`] (watermark and
//! health, published for `/healthz`, `/metrics` and `status`), [`stall`] (due items in shards
//! nobody attends, for a fleet worker); the watermark's bookkeeping is
//! pure and lives in `precise_ttl_core::watermark`. Monotonic time and sleeping are tokio's (so
//! tests can pause it); wall time comes only from the injected [`Clock`].

mod config;
mod dispatch;
mod readers;
mod stall;
mod status;
pub mod sweep;

pub use config::{DaemonConfig, DaemonError, DaemonReport};
pub use status::{DaemonHandle, DaemonStatus, Health};

use crate::clock::Clock;
use crate::counters::Counters;
use crate::observe::{NoopObserver, Observer};
use crate::store::{DueItem, DueQuery, ExpiryStore, StoreError};
use precise_ttl_core::watermark::{Pending, Read};
use precise_ttl_core::{DueWindow, ErrorClass, Expiry, Timestamp};
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use sweep::SharedPartitioning;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

pub struct Daemon<S: ExpiryStore, C: Clock> {
    store: Arc<S>,
    clock: Arc<C>,
    partitioning: SharedPartitioning<S::Partition>,
    ownership: Option<watch::Receiver<BTreeSet<usize>>>,
    unattended: Option<watch::Receiver<BTreeSet<usize>>>,
    config: DaemonConfig,
    observer: Arc<dyn Observer<S::Key>>,
    handle: DaemonHandle,
}

impl<S: ExpiryStore, C: Clock> std::fmt::Debug for Daemon<S, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An item on its way through the daemon.
#[derive(Debug, Clone)]
struct Work<K> {
    lane: usize,
    item: DueItem<K>,
    /// An attempt failed in a way that may have deleted the item anyway (its answer was lost):
    /// a retry that finds the item gone cannot say who deleted it.
    answer_lost: bool,
    /// Requests this item was in that failed retryably.
    failed_attempts: u32,
}

/// How long a resolved key is remembered. A read that started before the key was resolved may
/// still list it (the index had not caught up, or the delete landed while the page was in
/// transit); admitting it again would cost a second, failing, conditional delete.
const REMEMBER_RESOLVED: Duration = Duration::from_secs(15);

/// How long a lane's due items may wait for a request before its readers count the lane as
/// behind. Behind, re-reading recent time only lists items already waiting (at the simulated
/// table's full speed the re-reads outnumbered the deletes and took CPU the deletes needed, which
/// put the daemon further behind); the readers then read only time not read yet.
const BEHIND: Duration = Duration::from_millis(250);

/// How long due items may wait for a request before a head read that has time in hand (its
/// last read reached far enough ahead) waits for them instead of competing for the CPU: with
/// whole-second TTLs every item of a second is due at once, and the reads of the next seconds
/// ran while the burst was being deleted, on a machine the burst already kept busy.
const YIELD_WHEN_WAITING: Duration = Duration::from_millis(20);

/// The longest a head read yields to waiting deletes; a read of recent time is also what finds
/// a late write, so it is delayed, never skipped.
const READ_YIELD_MAX: Duration = Duration::from_millis(500);

/// The reader of a pass ([`Daemon::pass`]), as `/metrics` counts its queries.
const PASS_READER: &str = "sweep";

/// How far beyond one poll interval the re-read of recent time reaches.
const NEAR_MARGIN: Duration = Duration::from_millis(150);

/// State shared by readers, dispatcher and delete tasks.
struct Shared<S: ExpiryStore, C: Clock> {
    store: Arc<S>,
    clock: Arc<C>,
    partitioning: SharedPartitioning<S::Partition>,
    /// The lanes this worker may read (its leases); `None`: all of them.
    ownership: Option<watch::Receiver<BTreeSet<usize>>>,
    config: DaemonConfig,
    observer: Arc<dyn Observer<S::Key>>,
    pending: Mutex<Pending<S::Key, Instant>>,
    counters: Counters,
    fatal: Mutex<Option<StoreError>>,
    stop: watch::Sender<bool>,
    handle: DaemonHandle,
    /// Per lane, how long (ms) its oldest on-time item not yet sent has waited, set by the
    /// dispatcher at each turn: each lane's readers judge "behind" by their own lane.
    lane_waiting_ms: Vec<AtomicU64>,
    /// The one random source of the daemon (jitter of reads and backoffs, admission's order
    /// of ties), seeded from the configuration when a test needs a reproducible run.
    rng: Mutex<fastrand::Rng>,
    /// Whether admission's controllers go to `/metrics` (a daemon's, not a pass's: a pass run
    /// inside a daemon, its stray sweep, must not overwrite the daemon's gauges).
    gauges: bool,
    /// The last number given to a head read ([`Read::seq`]).
    reads: AtomicU64,
}

impl<S: ExpiryStore, C: Clock> Shared<S, C> {
    /// Whether this worker may read `lane` now.
    fn owns(&self, lane: usize) -> bool {
        self.ownership
            .as_ref()
            .is_none_or(|o| o.borrow().contains(&lane))
    }

    /// Publishes, per lane, the expiry of its oldest on-time item waiting (see
    /// [`Shared::lane_waiting_ms`]).
    fn publish_waiting(&self, oldest: &[Option<Expiry>], now: Timestamp) {
        for (slot, oldest) in self.lane_waiting_ms.iter().zip(oldest) {
            let ms = oldest.map_or(0, |e| now.millis_since(e.at()).max(0) as u64);
            slot.store(ms, Ordering::Relaxed);
        }
    }

    /// Due items of `lane` wait longer than [`BEHIND`] for a request.
    fn behind(&self, lane: usize) -> bool {
        self.waiting_at_least(lane, BEHIND)
    }

    /// Due items of `lane` wait at least `d` for a request.
    fn waiting_at_least(&self, lane: usize, d: Duration) -> bool {
        self.lane_waiting_ms
            .get(lane)
            .is_some_and(|w| w.load(Ordering::Relaxed) >= d.as_millis() as u64)
    }

    /// The number of a head read about to be sent ([`Read::seq`]).
    fn next_read(&self) -> u64 {
        self.reads.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn random_unit(&self) -> f64 {
        lock(&self.rng).f64()
    }

    fn random_u64(&self) -> u64 {
        lock(&self.rng).u64(..)
    }

    fn fail(&self, e: StoreError) {
        tracing::error!(error = %e, "fatal store error; stopping");
        lock(&self.fatal).get_or_insert(e);
        let _ = self.stop.send(true);
    }

    /// A call was throttled (admission answers the refusal; this counts it).
    fn throttled(&self) {
        self.counters.throttled();
        self.observer.throttled();
    }

    /// Reads one window of a lane completely (every partition it spans), handing each new
    /// item to `sink`.
    /// `Ok(n)`: pages read to the end, `n` new items. `Err`: transient trouble already logged,
    /// or a fatal error already reported.
    async fn read_window<F, Fut>(
        &self,
        lane: usize,
        window: DueWindow,
        reader: &'static str,
        seq: u64,
        mut sink: F,
    ) -> Result<usize, ()>
    where
        F: FnMut(Work<S::Key>) -> Fut,
        Fut: Future<Output = bool>,
    {
        let mut admitted = 0;
        for partition in self.partitioning.partitions(lane, window) {
            admitted += self
                .read_partition(lane, &partition, window, reader, seq, &mut sink)
                .await?;
        }
        Ok(admitted)
    }

    /// Reads one partition to its end, handing each new item to `sink`. An index read that still
    /// fails after its retries is logged for the next poll, or, in a pass (`reader` "sweep"),
    /// which has no next poll, ends the pass as a fatal error.
    async fn read_partition<F, Fut>(
        &self,
        lane: usize,
        partition: &S::Partition,
        window: DueWindow,
        reader: &'static str,
        seq: u64,
        sink: &mut F,
    ) -> Result<usize, ()>
    where
        F: FnMut(Work<S::Key>) -> Fut,
        Fut: Future<Output = bool>,
    {
        let mut cursor = None;
        let mut admitted = 0;
        loop {
            let read_at = Instant::now();
            let page = crate::retry::with_backoff(
                &self.config.backoff,
                || self.throttled(),
                || {
                    self.counters.query(reader);
                    self.store.due_page(DueQuery {
                        partition,
                        window,
                        cursor: cursor.clone(),
                        limit: self.config.page_size,
                    })
                },
            )
            .await;
            let page = match page {
                Ok(p) => p,
                Err(e) if e.class == ErrorClass::Fatal || reader == PASS_READER => {
                    self.fail(e);
                    return Err(());
                }
                Err(e) => {
                    tracing::warn!(%partition, reader, error = %e, "index read failed; trying again at the next poll");
                    return Err(());
                }
            };
            self.observer.page(page.items.len());
            let fresh: Vec<_> = {
                let mut pending = lock(&self.pending);
                let read = Read { at: read_at, seq };
                page.items
                    .into_iter()
                    .filter(|item| pending.admit_listed(lane, &item.key, item.expiry, read))
                    .collect()
            };
            for item in fresh {
                admitted += 1;
                if !sink(Work {
                    lane,
                    item,
                    answer_lost: false,
                    failed_attempts: 0,
                })
                .await
                {
                    return Err(());
                }
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => return Ok(admitted),
            }
        }
    }
}

impl<S: ExpiryStore, C: Clock> Daemon<S, C> {
    /// A daemon over `store`, whose due items `partitioning` locates (a [`ShardCount`] for our
    /// layout, [`Windows`] for the blog's).
    ///
    /// [`ShardCount`]: precise_ttl_core::ShardCount
    /// [`Windows`]: crate::partition::Windows
    pub fn new(
        store: Arc<S>,
        clock: Arc<C>,
        partitioning: SharedPartitioning<S::Partition>,
        config: DaemonConfig,
    ) -> Self {
        Daemon {
            store,
            clock,
            partitioning,
            ownership: None,
            unattended: None,
            config,
            observer: Arc::new(NoopObserver),
            handle: DaemonHandle::default(),
        }
    }

    pub fn with_observer(mut self, observer: Arc<dyn Observer<S::Key>>) -> Self {
        self.observer = observer;
        self
    }

    /// Reads only the lanes in `lanes` as it changes (a worker's leases, see [`crate::lease`]).
    /// A lane that comes back is read afresh: its watermark restarts from the new reads. The
    /// stray probe runs on the worker that holds lane 0, so a fleet probes once.
    pub fn with_ownership(mut self, lanes: watch::Receiver<BTreeSet<usize>>) -> Self {
        self.ownership = Some(lanes);
        self
    }

    /// Watches `lanes` (those nobody attends, see [`crate::lease::Leases::unattended`]) for due
    /// items: a stall, reported in the log, `/metrics` and the handle's status.
    pub fn with_unattended(mut self, lanes: watch::Receiver<BTreeSet<usize>>) -> Self {
        self.unattended = Some(lanes);
        self
    }

    /// Publishes into `handle`, made before the daemon (so `/healthz` can answer "starting"
    /// while the store is still being reached).
    pub fn with_handle(mut self, handle: DaemonHandle) -> Self {
        self.handle = handle;
        self
    }

    /// A handle that shows the daemon's status while it runs.
    pub fn handle(&self) -> DaemonHandle {
        self.handle.clone()
    }

    /// Runs until `shutdown` completes (a signal, a deadline) or a fatal error. On shutdown it
    /// stops reading, lets in-flight deletes finish (up to `drain_timeout`), and reports.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<DaemonReport, DaemonError> {
        let unattended = self.unattended.clone();
        let (shared, stop_rx) = self.start(true);
        let lanes = shared.partitioning.lanes();
        let (timely_tx, timely_rx) = mpsc::channel(1024);
        let (backlog_tx, backlog_rx) = mpsc::channel(shared.config.backlog_buffer.max(1));
        let mut readers = JoinSet::new();
        for lane in 0..lanes {
            readers.spawn(readers::head(
                Arc::clone(&shared),
                lane,
                timely_tx.clone(),
                stop_rx.clone(),
            ));
            readers.spawn(readers::backlog(
                Arc::clone(&shared),
                lane,
                backlog_tx.clone(),
                stop_rx.clone(),
            ));
        }
        drop((timely_tx, backlog_tx));
        readers.spawn(status::publish_every(Arc::clone(&shared), stop_rx.clone()));
        if let Some(unattended) = unattended {
            readers.spawn(stall::watch_stalls(
                Arc::clone(&shared),
                unattended,
                stop_rx.clone(),
            ));
        }
        if let Some(every) = shared.config.stray_check_interval {
            readers.spawn(readers::strays(Arc::clone(&shared), every, stop_rx.clone()));
        }

        let dispatcher = tokio::spawn(dispatch::run(
            Arc::clone(&shared),
            timely_rx,
            backlog_rx,
            stop_rx.clone(),
        ));
        let mut stop_rx2 = stop_rx.clone();
        tokio::select! {
            _ = shutdown => tracing::info!("shutting down: finishing deletes in flight"),
            _ = stop_rx2.wait_for(|s| *s) => {}
        }
        let _ = shared.stop.send(true);
        readers.abort_all();
        while readers.join_next().await.is_some() {}
        match dispatcher.await {
            Ok(()) => {}
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {}
        }
        status::publish(&shared);
        report(&shared)
    }

    /// One pass, what `sweep` runs: every item due in `window` on `partitions` (each with the
    /// lane admission files it under), read page by page, at most `parallelism` partitions at a
    /// time, and deleted through the same dispatcher as [`Daemon::run`]'s: admission, batches,
    /// each refusal answered by its controller, retries up to the configured attempts (an item
    /// still failing then is counted in `errors` and stays due for the next pass). It ends once
    /// every partition has been read to its end and every item is settled; an index read that
    /// still fails after its retries ends it with that error, as there is no next poll.
    pub async fn pass(
        self,
        partitions: Vec<(usize, S::Partition)>,
        window: DueWindow,
        parallelism: usize,
    ) -> Result<DaemonReport, DaemonError> {
        let (shared, stop_rx) = self.start(false);
        let lanes = shared.partitioning.lanes().max(1);
        // Nothing is read ahead: every item of a pass is due already, and goes as backlog.
        let (_, timely_rx) = mpsc::channel(1);
        let (backlog_tx, backlog_rx) = mpsc::channel(shared.config.backlog_buffer.max(1));
        let permits = Arc::new(tokio::sync::Semaphore::new(parallelism.max(1)));
        let mut readers = JoinSet::new();
        for (lane, partition) in partitions {
            let (shared, tx, permits) = (
                Arc::clone(&shared),
                backlog_tx.clone(),
                Arc::clone(&permits),
            );
            readers.spawn(async move {
                let Ok(_permit) = permits.acquire_owned().await else {
                    return;
                };
                if *shared.stop.borrow() {
                    return;
                }
                let mut sink = |w: Work<S::Key>| {
                    let tx = tx.clone();
                    async move { tx.send(w).await.is_ok() }
                };
                let _ = shared
                    .read_partition(
                        lane.min(lanes - 1),
                        &partition,
                        window,
                        PASS_READER,
                        0,
                        &mut sink,
                    )
                    .await;
            });
        }
        drop(backlog_tx);
        // Settled keys are remembered for de-duplication; a daemon forgets them as it publishes
        // its status, which a pass does not.
        let forget = tokio::spawn({
            let shared = Arc::clone(&shared);
            async move {
                loop {
                    tokio::time::sleep(REMEMBER_RESOLVED).await;
                    if let Some(before) = Instant::now().checked_sub(REMEMBER_RESOLVED) {
                        lock(&shared.pending).forget_resolved_before(before);
                    }
                }
            }
        });
        // The dispatcher ends once the readers are done and every item is settled, or at a
        // fatal error.
        dispatch::run(Arc::clone(&shared), timely_rx, backlog_rx, stop_rx).await;
        let _ = shared.stop.send(true);
        readers.abort_all();
        while let Some(joined) = readers.join_next().await {
            if let Err(e) = joined
                && e.is_panic()
            {
                std::panic::resume_unwind(e.into_panic());
            }
        }
        forget.abort();
        report(&shared)
    }

    /// The state readers, dispatcher and delete tasks share; `gauges`: whether admission's
    /// controllers go to `/metrics`.
    fn start(self, gauges: bool) -> (Arc<Shared<S, C>>, watch::Receiver<bool>) {
        let config = self.config.clone();
        let lanes = self.partitioning.lanes();
        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            store: self.store,
            clock: self.clock,
            partitioning: self.partitioning,
            ownership: self.ownership,
            observer: self.observer,
            pending: Mutex::new(Pending::new(lanes)),
            reads: AtomicU64::new(0),
            counters: Counters::default(),
            lane_waiting_ms: (0..lanes).map(|_| AtomicU64::new(0)).collect(),
            rng: Mutex::new(match config.seed {
                Some(seed) => fastrand::Rng::with_seed(seed),
                None => fastrand::Rng::new(),
            }),
            fatal: Mutex::new(None),
            stop,
            handle: self.handle,
            config,
            gauges,
        });
        (shared, stop_rx)
    }
}

/// What a run or a pass did, or the fatal error that stopped it.
fn report<S: ExpiryStore, C: Clock>(shared: &Shared<S, C>) -> Result<DaemonReport, DaemonError> {
    if let Some(e) = lock(&shared.fatal).take() {
        return Err(DaemonError::Fatal(e));
    }
    let c = shared.counters.tally();
    Ok(DaemonReport {
        deleted: c.deleted,
        skipped: c.skipped,
        unconfirmed: c.unconfirmed,
        errors: c.errors,
        throttled: c.throttled,
        queries: c.queries,
        watermark: shared.handle.status().watermark,
        lag: shared.counters.lag_summary(),
    })
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}
