//! The long-running sweeper: deletes each item at its expiry instant, catches up any backlog,
//! and keeps a watermark of what is known deleted.
//!
//! Per shard, two readers feed one dispatcher:
//! - the **head reader** polls the index every `poll_interval` for items expiring in
//!   `[now − lookback, now + horizon]`. Items not yet due wait in a timer heap and are deleted at
//!   their exact expiry instant; `lookback ≥ poll_interval` means an item written after one read
//!   with an expiry before the next is caught by the next.
//! - the **backlog reader** pages through everything older (`[now − 5 years, now − lookback]`),
//!   oldest first, into a bounded queue: downtime, bursts, failed deletes and late index entries
//!   are caught up at full speed with memory bounded whatever the backlog size.
//!
//! The dispatcher always serves items that are due on time before backlog items, so a backlog
//! never starves fresh expirations, and caps requests in flight with AIMD (halved on throttling,
//! grown back additively) and optionally a token bucket.

use crate::clock::Clock;
use crate::metrics as m;
use crate::observe::{NoopObserver, Observer};
use crate::store::{DeleteOutcome, DueItem, ExpiryStore, StoreError};
use precise_ttl_core::{
    Aimd, Backoff, DueWindow, ErrorClass, Expiry, NATIVE_TTL_MAX_AGE, Shard, ShardCount, Timestamp,
    TokenBucket,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use thiserror::Error;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

#[derive(Debug, Clone)]
pub struct DaemonConfig {
    pub shards: ShardCount,
    /// How often each shard's index is read.
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
    /// Items per delete request when several are ready (capped by the store's batch size).
    pub max_batch: usize,
    /// With batching, how long the first due item may wait for others to share its request.
    /// A few milliseconds turn a steady stream of expiries into batches, which costs the store
    /// fewer requests; zero sends each item the moment it is due.
    pub batch_linger: Duration,
    /// Read-ahead items held in memory at most.
    pub max_scheduled: usize,
    /// Backlog items buffered between readers and dispatcher.
    pub backlog_buffer: usize,
    /// Backlog items in delete requests in flight at most. The store works through requests
    /// in order, so every backlog item queued ahead delays an item expiring now; two batches'
    /// worth keep a serialized store busy.
    pub max_backlog_in_flight: usize,
    /// How long the backlog reader waits after a pass that found nothing. It catches what the
    /// head reads cannot: items written with an expiry already past the lookback, deletes that
    /// failed, index entries that arrived late.
    pub backlog_idle_interval: Duration,
    pub backoff: Backoff,
    /// On shutdown, how long in-flight deletes may take to finish.
    pub drain_timeout: Duration,
    /// How often to look for due items on shard values outside `0..shards` (left by writers
    /// with a larger shard count) and sweep them; `None`: never. These few items bypass the
    /// dispatcher and its rate cap: a stray is a mistake to fix, not a load to budget.
    pub stray_check_interval: Option<Duration>,
}

impl DaemonConfig {
    pub fn new(shards: ShardCount) -> Self {
        DaemonConfig {
            shards,
            poll_interval: Duration::from_secs(1),
            horizon: Duration::from_secs(5),
            lookback: Duration::from_secs(2),
            page_size: 500,
            min_concurrency: 2,
            initial_concurrency: 32,
            max_concurrency: 128,
            max_deletes_per_second: None,
            max_batch: 25,
            batch_linger: Duration::from_millis(5),
            max_scheduled: 100_000,
            backlog_buffer: 2_000,
            max_backlog_in_flight: 50,
            backlog_idle_interval: Duration::from_secs(5),
            backoff: Backoff::default(),
            drain_timeout: Duration::from_secs(5),
            stray_check_interval: Some(Duration::from_secs(300)),
        }
    }
}

/// What a run did, when it ends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonReport {
    pub deleted: u64,
    pub skipped: u64,
    pub errors: u64,
    pub throttled: u64,
    pub queries: u64,
    /// Every due item with TTL ≤ this is known deleted (`None`: no complete read yet).
    pub watermark: Option<Timestamp>,
}

#[derive(Debug, Error)]
pub enum DaemonError {
    #[error("stopped: {0}")]
    Fatal(#[source] StoreError),
}

/// A point-in-time view of the daemon, for health checks and `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonStatus {
    pub backlog: u64,
    pub scheduled: u64,
    pub watermark: Option<Timestamp>,
    pub shard_watermarks: Vec<Option<Timestamp>>,
    /// When a head read last succeeded (monotonic), for `/healthz`.
    pub last_read_ok: Option<Instant>,
}

/// Shared view of a running daemon.
#[derive(Debug, Clone, Default)]
pub struct DaemonHandle {
    status: Arc<Mutex<DaemonStatus>>,
}

impl DaemonHandle {
    pub fn status(&self) -> DaemonStatus {
        lock(&self.status).clone()
    }
}

pub struct Daemon<S: ExpiryStore, C: Clock> {
    store: Arc<S>,
    clock: Arc<C>,
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// An item on its way through the daemon.
#[derive(Debug, Clone)]
struct Work<K> {
    shard: Shard,
    item: DueItem<K>,
}

/// What each shard has read completely, for the watermark.
#[derive(Debug, Clone, Default)]
struct Coverage {
    /// Everything with TTL ≤ this was read by a completed backlog pass and is resolved or pending.
    backlog_bound: Option<Timestamp>,
    /// Head reads have covered `[head_from, head_to]` without a gap.
    head_from: Option<Timestamp>,
    head_to: Option<Timestamp>,
    /// Bumped by every failed delete; a backlog pass that saw a bump cannot vouch for its range.
    error_generation: u64,
}

impl Coverage {
    fn head_read(&mut self, from: Timestamp, to: Timestamp) {
        match self.head_to {
            Some(prev) if from <= prev => self.head_to = Some(to.max(prev)),
            _ => {
                self.head_from = Some(from);
                self.head_to = Some(to);
            }
        }
    }

    fn covered(&self) -> Option<Timestamp> {
        let bound = self.backlog_bound?;
        Some(match (self.head_from, self.head_to) {
            (Some(from), Some(to)) if from <= bound => bound.max(to),
            _ => bound,
        })
    }

    fn failed(&mut self, expiry: Expiry) {
        self.error_generation += 1;
        let below = Timestamp::from_millis(expiry.at().as_millis().saturating_sub(1));
        self.backlog_bound = self.backlog_bound.map(|b| b.min(below));
        // The failed item sits inside head-covered time: that range is no longer gap-free.
        self.head_from = None;
        self.head_to = None;
    }
}

/// How long a resolved key is remembered. A read that started before the key was resolved may
/// still list it (the index had not caught up, or the delete landed while the page was in
/// transit); admitting it again would cost a second, failing, conditional delete.
const REMEMBER_RESOLVED: Duration = Duration::from_secs(15);

/// How far beyond one poll interval the re-read of recent time reaches.
const NEAR_MARGIN: Duration = Duration::from_millis(150);

/// Items read and not yet resolved: for de-duplication between readers and for the watermark.
#[derive(Debug)]
struct Pending<K> {
    keys: HashMap<K, (Shard, Expiry)>,
    /// Keys resolved recently, with when, oldest first in `resolved_order`.
    resolved: HashMap<K, Instant>,
    resolved_order: VecDeque<(Instant, K)>,
    /// Per shard, a multiset of pending expiries.
    expiries: Vec<BTreeMap<Expiry, usize>>,
    coverage: Vec<Coverage>,
}

impl<K: Eq + std::hash::Hash + Clone> Pending<K> {
    fn new(shards: usize) -> Self {
        Pending {
            keys: HashMap::new(),
            resolved: HashMap::new(),
            resolved_order: VecDeque::new(),
            expiries: vec![BTreeMap::new(); shards],
            coverage: vec![Coverage::default(); shards],
        }
    }

    /// Records an item, from a read sent at `read_at`, as pending; false if it already was, or
    /// was resolved after that read was sent.
    fn admit(&mut self, shard: Shard, item: &DueItem<K>, read_at: Instant) -> bool {
        if self.keys.contains_key(&item.key)
            || self.resolved.get(&item.key).is_some_and(|t| *t >= read_at)
        {
            return false;
        }
        self.keys.insert(item.key.clone(), (shard, item.expiry));
        *self.expiries[shard.0 as usize]
            .entry(item.expiry)
            .or_default() += 1;
        true
    }

    fn resolve(&mut self, key: &K, at: Instant) {
        self.resolved.insert(key.clone(), at);
        self.resolved_order.push_back((at, key.clone()));
        if let Some((shard, expiry)) = self.keys.remove(key) {
            let map = &mut self.expiries[shard.0 as usize];
            if let Some(n) = map.get_mut(&expiry) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&expiry);
                }
            }
        }
    }

    fn forget_resolved_before(&mut self, before: Instant) {
        while let Some((at, _)) = self.resolved_order.front() {
            if *at >= before {
                break;
            }
            let (at, key) = self.resolved_order.pop_front().expect("front exists");
            if self.resolved.get(&key) == Some(&at) {
                self.resolved.remove(&key);
            }
        }
    }

    fn watermark(&self, shard: usize, now: Timestamp) -> Option<Timestamp> {
        let covered = self.coverage[shard].covered()?.min(now);
        let pending_min = self.expiries[shard].keys().next().map(|e| e.at());
        Some(match pending_min {
            Some(p) if p <= covered => Timestamp::from_millis(p.as_millis().saturating_sub(1)),
            _ => covered,
        })
    }

    fn due_count(&self, now: Timestamp) -> (u64, u64) {
        let mut due = 0;
        let mut later = 0;
        for map in &self.expiries {
            for (e, n) in map {
                if e.at() <= now {
                    due += *n as u64;
                } else {
                    later += *n as u64;
                }
            }
        }
        (due, later)
    }
}

#[derive(Default)]
struct Counters {
    deleted: AtomicU64,
    skipped: AtomicU64,
    errors: AtomicU64,
    throttled: AtomicU64,
    queries: AtomicU64,
}

/// State shared by readers, dispatcher and delete tasks.
struct Shared<S: ExpiryStore, C: Clock> {
    store: Arc<S>,
    clock: Arc<C>,
    config: DaemonConfig,
    observer: Arc<dyn Observer<S::Key>>,
    pending: Mutex<Pending<S::Key>>,
    aimd: Mutex<Aimd>,
    counters: Counters,
    fatal: Mutex<Option<StoreError>>,
    stop: watch::Sender<bool>,
    handle: DaemonHandle,
    /// Delete requests at the store right now. A request waiting out a backoff does not count:
    /// holding its slot while it sleeps would let a few throttled requests block everything.
    active: std::sync::atomic::AtomicUsize,
    /// Told whenever `active` drops, so the dispatcher can use the freed slot.
    slot_freed: tokio::sync::Notify,
}

impl<S: ExpiryStore, C: Clock> Shared<S, C> {
    fn release_slot(&self) {
        self.active.fetch_sub(1, Ordering::SeqCst);
        self.slot_freed.notify_one();
    }

    fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    fn fail(&self, e: StoreError) {
        tracing::error!(error = %e, "fatal store error; stopping");
        lock(&self.fatal).get_or_insert(e);
        let _ = self.stop.send(true);
    }

    fn throttled(&self) {
        self.counters.throttled.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(m::THROTTLED).increment(1);
        self.observer.throttled();
        lock(&self.aimd).on_throttle(self.clock.now());
    }

    /// Reads one window of a shard completely, handing each new item to `sink`.
    /// `Ok(n)`: pages read to the end, `n` new items. `Err`: transient trouble already logged,
    /// or a fatal error already reported.
    async fn read_window<F, Fut>(
        &self,
        shard: Shard,
        window: DueWindow,
        reader: &'static str,
        mut sink: F,
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
                    self.counters.queries.fetch_add(1, Ordering::Relaxed);
                    metrics::counter!(m::QUERIES, "reader" => reader).increment(1);
                    self.store
                        .due_page(shard, window, cursor.clone(), self.config.page_size)
                },
            )
            .await;
            let page = match page {
                Ok(p) => p,
                Err(e) if e.class == ErrorClass::Fatal => {
                    self.fail(e);
                    return Err(());
                }
                Err(e) => {
                    tracing::warn!(%shard, reader, error = %e, "index read failed; trying again at the next poll");
                    return Err(());
                }
            };
            self.observer.page(shard, page.items.len());
            for item in page.items {
                if !lock(&self.pending).admit(shard, &item, read_at) {
                    continue;
                }
                admitted += 1;
                if !sink(Work { shard, item }).await {
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
    pub fn new(store: Arc<S>, clock: Arc<C>, config: DaemonConfig) -> Self {
        Daemon {
            store,
            clock,
            config,
            observer: Arc::new(NoopObserver),
            handle: DaemonHandle::default(),
        }
    }

    pub fn with_observer(mut self, observer: Arc<dyn Observer<S::Key>>) -> Self {
        self.observer = observer;
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
        let config = self.config.clone();
        let shards = config.shards.get() as usize;
        let (stop, stop_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            store: self.store,
            clock: self.clock,
            observer: self.observer,
            pending: Mutex::new(Pending::new(shards)),
            aimd: Mutex::new(Aimd::new(
                config.min_concurrency,
                config.initial_concurrency,
                config.max_concurrency,
                Duration::from_millis(200),
            )),
            counters: Counters::default(),
            active: std::sync::atomic::AtomicUsize::new(0),
            slot_freed: tokio::sync::Notify::new(),
            fatal: Mutex::new(None),
            stop,
            handle: self.handle,
            config,
        });
        let (timely_tx, timely_rx) = mpsc::channel(1024);
        let (backlog_tx, backlog_rx) = mpsc::channel(shared.config.backlog_buffer.max(1));
        let mut readers = JoinSet::new();
        for shard in shared.config.shards.all() {
            readers.spawn(head_reader(
                Arc::clone(&shared),
                shard,
                timely_tx.clone(),
                stop_rx.clone(),
            ));
            readers.spawn(backlog_reader(
                Arc::clone(&shared),
                shard,
                backlog_tx.clone(),
                stop_rx.clone(),
            ));
        }
        drop((timely_tx, backlog_tx));
        readers.spawn(status_loop(Arc::clone(&shared), stop_rx.clone()));
        if let Some(every) = shared.config.stray_check_interval {
            readers.spawn(stray_loop(Arc::clone(&shared), every, stop_rx.clone()));
        }

        let dispatcher = tokio::spawn(dispatch(
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
        publish_status(&shared);
        if let Some(e) = lock(&shared.fatal).take() {
            return Err(DaemonError::Fatal(e));
        }
        let c = &shared.counters;
        Ok(DaemonReport {
            deleted: c.deleted.load(Ordering::Relaxed),
            skipped: c.skipped.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            throttled: c.throttled.load(Ordering::Relaxed),
            queries: c.queries.load(Ordering::Relaxed),
            watermark: shared.handle.status().watermark,
        })
    }
}

/// Sweeps stray shard values at start and then every `every`.
async fn stray_loop<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut config = crate::sweep::SweepConfig::new(shared.config.shards);
    // One probe at a time: strays are rare, and the probe must not compete with on-time deletes
    // (about 1 000 queries, a second or two on DynamoDB Local).
    config.concurrency = 8;
    config.shard_parallelism = 1;
    config.page_size = shared.config.page_size;
    config.backoff = shared.config.backoff;
    let sweeper =
        crate::sweep::Sweeper::new(Arc::clone(&shared.store), Arc::clone(&shared.clock), config);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tick.tick() => {}
        }
        let window = DueWindow::at(shared.clock.now());
        let strays = match sweeper.find_stray_shards(window).await {
            Ok(s) => s,
            Err(crate::sweep::SweepError::Fatal(e)) if e.class == ErrorClass::Fatal => {
                // Access denied or a vanished index stops the daemon, whichever reader sees it.
                shared.fail(e);
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "stray shard probe failed");
                continue;
            }
        };
        if strays.is_empty() {
            continue;
        }
        match sweeper.sweep_shards(window, &strays).await {
            Ok(report) => {
                let c = &shared.counters;
                c.deleted.fetch_add(report.deleted, Ordering::Relaxed);
                c.skipped.fetch_add(report.skipped, Ordering::Relaxed);
                c.errors.fetch_add(report.errors, Ordering::Relaxed);
            }
            Err(crate::sweep::SweepError::Fatal(e)) if e.class == ErrorClass::Fatal => {
                shared.fail(e);
                return;
            }
            Err(e) => tracing::warn!(error = %e, "stray shard sweep failed"),
        }
    }
}

async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

async fn head_reader<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    shard: Shard,
    timely: mpsc::Sender<Work<S::Key>>,
    mut stop: watch::Receiver<bool>,
) {
    let config = &shared.config;
    let lookback = config.lookback.max(config.poll_interval);
    // Items written late, with an expiry before what an earlier read already covered, are found
    // by re-reading only up to one poll (and a margin) ahead: the read that sees such an item
    // comes at least `NEAR_MARGIN` before its expiry. Further ahead, each read fetches only the
    // time no read has covered yet, instead of the whole horizon again.
    let near_ahead = config.poll_interval + NEAR_MARGIN;
    let mut far_until: Option<Timestamp> = None;
    let mut tick = tokio::time::interval(config.poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tick.tick() => {}
        }
        let now = shared.clock.now();
        let horizon_end = now.saturating_add(config.horizon.max(near_ahead));
        let near_end = now.saturating_add(near_ahead);
        let from = now.saturating_sub(lookback);
        let windows = match far_until {
            // Contiguous: one read does it all.
            Some(until) if until > near_end => vec![
                DueWindow::between(from, near_end),
                DueWindow::between(Timestamp::from_millis(until.as_millis() + 1), horizon_end),
            ],
            _ => vec![DueWindow::between(from, horizon_end)],
        };
        let mut ok = true;
        for window in windows {
            if window.oldest > window.until {
                continue;
            }
            let read = shared
                .read_window(shard, window, "head", |w| {
                    let timely = timely.clone();
                    async move { timely.send(w).await.is_ok() }
                })
                .await;
            ok &= read.is_ok();
        }
        if ok {
            far_until = Some(horizon_end);
            lock(&shared.pending).coverage[shard.0 as usize].head_read(from, now);
            lock(&shared.handle.status).last_read_ok = Some(Instant::now());
        } else {
            far_until = None;
        }
    }
}

async fn backlog_reader<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    shard: Shard,
    backlog: mpsc::Sender<Work<S::Key>>,
    mut stop: watch::Receiver<bool>,
) {
    let config = &shared.config;
    let lookback = config.lookback.max(config.poll_interval);
    // An empty backlog costs one query per shard and pass, and the head reads already cover the
    // recent past; with nothing found, look again after `backlog_idle_interval`.
    let idle = config.poll_interval.max(config.backlog_idle_interval);
    let mut pause = Duration::ZERO;
    let mut generation = lock(&shared.pending).coverage[shard.0 as usize].error_generation;
    loop {
        // Wait out the pause, but come back at the next poll if a delete of this shard failed
        // meanwhile: its item needs this reader to find it again.
        let waiting = Instant::now();
        loop {
            let step = pause
                .saturating_sub(waiting.elapsed())
                .min(config.poll_interval);
            tokio::select! {
                _ = stopped(&mut stop) => return,
                _ = tokio::time::sleep(step) => {}
            }
            let failed =
                lock(&shared.pending).coverage[shard.0 as usize].error_generation != generation;
            if failed || waiting.elapsed() >= pause {
                break;
            }
        }
        let now = shared.clock.now();
        let bound = now.saturating_sub(lookback);
        let window = DueWindow::between(now.saturating_sub(NATIVE_TTL_MAX_AGE), bound);
        generation = lock(&shared.pending).coverage[shard.0 as usize].error_generation;
        let read = shared
            .read_window(shard, window, "backlog", |w| {
                let backlog = backlog.clone();
                async move { backlog.send(w).await.is_ok() }
            })
            .await;
        pause = match read {
            Ok(found) => {
                let mut pending = lock(&shared.pending);
                let coverage = &mut pending.coverage[shard.0 as usize];
                if coverage.error_generation == generation {
                    coverage.backlog_bound =
                        Some(coverage.backlog_bound.map_or(bound, |b| b.max(bound)));
                }
                if found > 0 {
                    config.poll_interval
                } else {
                    idle
                }
            }
            Err(()) => config.poll_interval,
        };
    }
}

/// Scheduled read-ahead item, ordered by expiry.
struct Scheduled<K> {
    expiry: Expiry,
    seq: u64,
    work: Work<K>,
}

impl<K> PartialEq for Scheduled<K> {
    fn eq(&self, other: &Self) -> bool {
        (self.expiry, self.seq) == (other.expiry, other.seq)
    }
}
impl<K> Eq for Scheduled<K> {}
impl<K> PartialOrd for Scheduled<K> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Scheduled<K> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.expiry, self.seq).cmp(&(other.expiry, other.seq))
    }
}

type Outcomes<K> = Vec<(Work<K>, Result<DeleteOutcome, StoreError>, Timestamp)>;

/// A finished delete request: how many backlog items it carried, and its outcomes.
type Done<K> = (usize, Outcomes<K>);

async fn dispatch<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    mut timely_rx: mpsc::Receiver<Work<S::Key>>,
    mut backlog_rx: mpsc::Receiver<Work<S::Key>>,
    mut stop: watch::Receiver<bool>,
) {
    let config = shared.config.clone();
    let max_batch = config.max_batch.clamp(1, shared.store.max_batch().max(1));
    let mut heap: BinaryHeap<Reverse<Scheduled<S::Key>>> = BinaryHeap::new();
    let mut ready: VecDeque<Work<S::Key>> = VecDeque::new();
    let mut backlog: VecDeque<Work<S::Key>> = VecDeque::new();
    let mut seq = 0u64;
    let mut bucket = config
        .max_deletes_per_second
        .map(|r| TokenBucket::new(r, (r / 10.0).max(max_batch as f64)));
    let mut in_flight: JoinSet<Done<S::Key>> = JoinSet::new();
    let mut backlog_in_flight = 0usize;
    let max_backlog = config.max_backlog_in_flight.max(1);
    let linger = if max_batch > 1 {
        config.batch_linger
    } else {
        Duration::ZERO
    };
    // When the oldest item in `ready` became due, for the linger.
    let mut ready_since: Option<tokio::time::Instant> = None;
    let mut timely_open = true;
    let mut backlog_open = true;

    loop {
        if *stop.borrow() {
            break;
        }
        // Take in what the readers sent, without waiting.
        while heap.len() < config.max_scheduled {
            match timely_rx.try_recv() {
                Ok(w) => {
                    seq += 1;
                    heap.push(Reverse(Scheduled {
                        expiry: w.item.expiry,
                        seq,
                        work: w,
                    }));
                }
                Err(_) => break,
            }
        }
        let now = shared.clock.now();
        while heap.peek().is_some_and(|Reverse(s)| s.expiry.at() <= now) {
            let Reverse(s) = heap.pop().expect("peeked");
            ready.push_back(s.work);
        }
        if ready.is_empty() {
            ready_since = None;
        } else if ready_since.is_none() {
            ready_since = Some(tokio::time::Instant::now());
        }
        // Hold a short run of due items back to share one request, unless a request's worth
        // is already there.
        let lingering = ready_since
            .filter(|_| ready.len() < max_batch && !linger.is_zero())
            .map(|since| since + linger)
            .filter(|until| *until > tokio::time::Instant::now());
        while let Some(done) = in_flight.try_join_next() {
            settle(&shared, done, &mut backlog_in_flight);
        }

        let limit = lock(&shared.aimd).limit();
        metrics::gauge!(m::CONCURRENCY_LIMIT).set(limit as f64);
        let backlog_room = backlog_in_flight < max_backlog;
        if ready.is_empty() && backlog.len() < max_batch && shared.active() < limit && backlog_room
        {
            while backlog.len() < max_batch {
                match backlog_rx.try_recv() {
                    Ok(w) => backlog.push_back(w),
                    Err(_) => break,
                }
            }
        }
        let (source, is_backlog) = if !ready.is_empty() && lingering.is_none() {
            (Some(&mut ready), false)
        } else if !backlog.is_empty() && backlog_room {
            (Some(&mut backlog), true)
        } else {
            (None, false)
        };
        if let (Some(queue), true) = (source, shared.active() < limit) {
            let mut n = queue.len().min(max_batch);
            if is_backlog {
                n = n.min(max_backlog - backlog_in_flight);
            }
            if let Some(bucket) = bucket.as_mut()
                && let Err(wait) = bucket.take(now, n as f64)
            {
                tokio::select! {
                    _ = stopped(&mut stop) => break,
                    _ = tokio::time::sleep(wait) => {}
                }
                continue;
            }
            let batch: Vec<_> = queue.drain(..n).collect();
            if !is_backlog {
                ready_since = (!ready.is_empty()).then(tokio::time::Instant::now);
            }
            // The slot is taken here, before the task runs, so the loop cannot over-dispatch.
            shared.active.fetch_add(1, Ordering::SeqCst);
            let task = delete_batch(Arc::clone(&shared), batch);
            let backlog_items = if is_backlog { n } else { 0 };
            in_flight.spawn(async move { (backlog_items, task.await) });
            backlog_in_flight += backlog_items;
            continue;
        }

        // Nothing to send right now: wait for the next event.
        let next_expiry = heap.peek().map(|Reverse(s)| s.expiry.at());
        let mut sleep_for = next_expiry
            .map(|t| Duration::from_millis(t.millis_since(shared.clock.now()).max(0) as u64));
        if let Some(until) = lingering {
            let d = until.saturating_duration_since(tokio::time::Instant::now());
            sleep_for = Some(sleep_for.map_or(d, |s| s.min(d)));
        }
        let can_take_backlog = backlog.len() < max_batch
            && ready.is_empty()
            && lingering.is_none()
            && shared.active() < limit
            && backlog_room
            && backlog_open;
        tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => settle(&shared, done, &mut backlog_in_flight),
            _ = sleep_opt(sleep_for) => {}
            _ = shared.slot_freed.notified() => {}
            w = timely_rx.recv(), if timely_open && heap.len() < config.max_scheduled => match w {
                Some(w) => {
                    seq += 1;
                    heap.push(Reverse(Scheduled { expiry: w.item.expiry, seq, work: w }));
                }
                None => timely_open = false,
            },
            w = backlog_rx.recv(), if can_take_backlog => match w {
                Some(w) => backlog.push_back(w),
                None => backlog_open = false,
            },
        }
    }

    // Shutdown: no new deletes; let the ones in flight finish.
    let deadline = tokio::time::Instant::now() + config.drain_timeout;
    while !in_flight.is_empty() {
        match tokio::time::timeout_at(deadline, in_flight.join_next()).await {
            Ok(Some(done)) => settle(&shared, done, &mut backlog_in_flight),
            Ok(None) => break,
            Err(_) => {
                tracing::warn!(
                    in_flight = in_flight.len(),
                    "deletes still in flight at the drain timeout; abandoning them (they are idempotent)"
                );
                in_flight.abort_all();
                break;
            }
        }
    }
}

async fn sleep_opt(d: Option<Duration>) {
    match d {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

fn settle<S: ExpiryStore, C: Clock>(
    shared: &Shared<S, C>,
    done: Result<Done<S::Key>, tokio::task::JoinError>,
    backlog_in_flight: &mut usize,
) {
    let outcomes = match done {
        Ok((backlog_items, o)) => {
            *backlog_in_flight -= backlog_items;
            o
        }
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => return,
    };
    let resolved_at = Instant::now();
    for (work, result, acked) in outcomes {
        let mut pending = lock(&shared.pending);
        pending.resolve(&work.item.key, resolved_at);
        match result {
            Ok(DeleteOutcome::Deleted) => {
                drop(pending);
                shared.counters.deleted.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(m::DELETED).increment(1);
                let lag = acked.millis_since(work.item.expiry.at()).max(0) as f64 / 1000.0;
                metrics::histogram!(m::LAG_SECONDS).record(lag);
                lock(&shared.aimd).on_success();
                shared
                    .observer
                    .deleted(&work.item.key, work.item.expiry, acked);
            }
            Ok(DeleteOutcome::NotDue) => {
                drop(pending);
                shared.counters.skipped.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(m::SKIPPED).increment(1);
                lock(&shared.aimd).on_success();
                shared.observer.skipped(&work.item.key, work.item.expiry);
            }
            Err(e) if e.class == ErrorClass::Fatal => {
                drop(pending);
                shared.fail(e);
            }
            Err(e) => {
                pending.coverage[work.shard.0 as usize].failed(work.item.expiry);
                drop(pending);
                shared.counters.errors.fetch_add(1, Ordering::Relaxed);
                metrics::counter!(m::ERRORS).increment(1);
                tracing::warn!(key = ?work.item.key, error = %e, "delete failed after retries; the backlog reader will find it again");
            }
        }
    }
}

/// Deletes a batch, retrying the items whose failure is retryable, each with a fresh window.
async fn delete_batch<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    batch: Vec<Work<S::Key>>,
) -> Outcomes<S::Key> {
    let mut done = Vec::with_capacity(batch.len());
    let mut todo = batch;
    let mut attempt = 1;
    loop {
        let window = DueWindow::at(shared.clock.now());
        let keys: Vec<S::Key> = todo.iter().map(|w| w.item.key.clone()).collect();
        let results = if keys.len() == 1 {
            vec![shared.store.delete_if_due(&keys[0], window).await]
        } else {
            shared.store.delete_many_if_due(&keys, window).await
        };
        let acked = shared.clock.now();
        let mut retry = Vec::new();
        let mut throttled = false;
        for (work, result) in todo.into_iter().zip(results) {
            match result {
                Err(e)
                    if e.class.is_retryable() && shared.config.backoff.may_retry_after(attempt) =>
                {
                    throttled |= e.class == ErrorClass::Throttled;
                    retry.push(work);
                }
                other => done.push((work, other, acked)),
            }
        }
        shared.release_slot();
        if retry.is_empty() {
            return done;
        }
        if throttled {
            shared.throttled();
        }
        tokio::time::sleep(shared.config.backoff.delay(attempt, fastrand::f64())).await;
        shared.active.fetch_add(1, Ordering::SeqCst);
        attempt += 1;
        todo = retry;
    }
}

fn publish_status<S: ExpiryStore, C: Clock>(shared: &Shared<S, C>) {
    let now = shared.clock.now();
    let mut pending = lock(&shared.pending);
    if let Some(before) = Instant::now().checked_sub(REMEMBER_RESOLVED) {
        pending.forget_resolved_before(before);
    }
    let shard_watermarks: Vec<Option<Timestamp>> = (0..pending.coverage.len())
        .map(|s| pending.watermark(s, now))
        .collect();
    let (backlog, scheduled) = pending.due_count(now);
    drop(pending);
    let overall = if shard_watermarks.iter().all(Option::is_some) {
        shard_watermarks.iter().flatten().min().copied()
    } else {
        None
    };
    metrics::gauge!(m::BACKLOG).set(backlog as f64);
    metrics::gauge!(m::SCHEDULED).set(scheduled as f64);
    for (s, w) in shard_watermarks.iter().enumerate() {
        if let Some(w) = w {
            metrics::gauge!(m::WATERMARK, "shard" => s.to_string()).set(w.as_secs_f64());
        }
    }
    if let Some(w) = overall {
        metrics::gauge!(m::WATERMARK, "shard" => "all").set(w.as_secs_f64());
        metrics::gauge!(m::WATERMARK_DELAY).set(now.millis_since(w).max(0) as f64 / 1000.0);
    }
    let mut status = lock(&shared.handle.status);
    status.backlog = backlog;
    status.scheduled = scheduled;
    status.watermark = overall;
    status.shard_watermarks = shard_watermarks;
}

async fn status_loop<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        publish_status(&shared);
        tokio::select! {
            _ = stopped(&mut stop) => return,
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_joins_backlog_and_contiguous_head_reads() {
        let t = |s| Timestamp::from_secs(s);
        let mut c = Coverage::default();
        assert_eq!(c.covered(), None);
        c.head_read(t(98), t(100));
        assert_eq!(
            c.covered(),
            None,
            "nothing older is known until a backlog pass completes"
        );
        c.backlog_bound = Some(t(99));
        assert_eq!(c.covered(), Some(t(100)));
        c.head_read(t(99), t(101));
        assert_eq!(c.covered(), Some(t(101)));
        c.head_read(t(105), t(107)); // a gap: 101..105 was never read
        assert_eq!(c.covered(), Some(t(99)));
        c.failed(Expiry::at_instant(t(50)));
        assert_eq!(c.covered(), Some(Timestamp::from_millis(49_999)));
    }

    #[test]
    fn watermark_stops_below_the_oldest_pending_item() {
        let mut p: Pending<&str> = Pending::new(1);
        let t = |s| Timestamp::from_secs(s);
        p.coverage[0].backlog_bound = Some(t(100));
        let item = DueItem {
            key: "a",
            expiry: Expiry::at_instant(t(90)),
        };
        let read = Instant::now();
        assert!(p.admit(Shard(0), &item, read));
        assert!(!p.admit(Shard(0), &item, read), "already pending");
        assert_eq!(p.watermark(0, t(200)), Some(Timestamp::from_millis(89_999)));
        assert_eq!(p.due_count(t(200)), (1, 0));
        let resolved = Instant::now();
        p.resolve(&"a", resolved);
        assert_eq!(p.watermark(0, t(200)), Some(t(100)));
        assert!(
            !p.admit(Shard(0), &item, read),
            "a read sent before the delete may still list it"
        );
        let later = Instant::now() + Duration::from_millis(1);
        assert!(
            p.admit(Shard(0), &item, later),
            "a read sent after it means the item came back"
        );
        p.resolve(&"a", later);
        p.forget_resolved_before(later + Duration::from_millis(1));
        assert!(p.resolved.is_empty() && p.resolved_order.is_empty());
        assert_eq!(
            p.watermark(0, t(50)),
            Some(t(50)),
            "never ahead of the clock"
        );
    }
}
