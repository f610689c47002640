//! A worker's shard leases: heartbeats that renew what it holds and take or steal toward an even
//! split ([`precise_ttl_core::lease`] decides), and the set of lanes it may read, published as it
//! changes.
//!
//! Safety does not rest on leases: every delete is conditional, so two workers reading one shard
//! for a moment cost only skipped deletes. Leases split the work and hand it over. A lease whose
//! renewal has not succeeded for half a lease duration is no longer used, so its reader stops
//! well before another worker may take it (a full duration with the counter unmoved, on that
//! worker's clock), or at once when the owner is proven dead ([`OwnerCheck`]: a predecessor on
//! the same host that is no longer running).
//!
//! A lease whose counter this worker has seen unmoved for half a lease duration, and that it does
//! not hold, is *unattended*: nobody reads that shard. The set is published for the daemon,
//! which looks whether such shards hold due items (a stall; see `daemon::stall`).

use crate::metrics as m;
use crate::store::StoreError;
use futures_util::StreamExt;
use precise_ttl_core::lease::{LeaseRecord, LeaseView, Moves, plan};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

/// Retries of the lease table while it is unreachable: at most a second apart.
const RETRY: precise_ttl_core::Backoff = precise_ttl_core::Backoff {
    base: Duration::from_millis(100),
    cap: Duration::from_secs(1),
    max_attempts: u32::MAX,
};

/// The lease table, through conditional writes only.
pub trait LeaseStore: Send + Sync + 'static {
    /// Creates each lease of `keys` that does not exist yet, unowned with counter 0.
    fn ensure(&self, keys: &[String]) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The leases of `keys` as stored now.
    fn list(
        &self,
        keys: &[String],
    ) -> impl Future<Output = Result<Vec<LeaseRecord>, StoreError>> + Send;

    /// Sets `key`'s owner (`None`: release) and bumps its counter, if the counter is still
    /// `expected`. `Ok(false)`: another worker moved it first.
    fn write(
        &self,
        key: &str,
        expected: u64,
        owner: Option<&str>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

/// Tells whether a lease's owner is proven no longer running. Proof only: an owner that cannot
/// be judged (another host, a name given by hand) is not dead, and its leases expire by the
/// counter rule.
pub trait OwnerCheck: Send + Sync + 'static {
    fn proven_dead(&self, owner: &str) -> bool;
}

/// Proves nothing: every lease expires by the counter rule alone.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoOwnerCheck;

impl OwnerCheck for NoOwnerCheck {
    fn proven_dead(&self, _owner: &str) -> bool {
        false
    }
}

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// This worker's name in the lease table.
    pub worker: String,
    /// How long a lease's counter must stay unmoved before another worker may take it.
    pub duration: Duration,
    /// How often leases are renewed, taken and balanced.
    pub heartbeat: Duration,
    /// How often, between heartbeats, the lease table is read for released and expired leases
    /// (one read, no write unless one is free): a worker stopped with SIGTERM hands its shards
    /// over within this, not within a heartbeat, and a dead worker's are taken within a lease
    /// duration and this of its last renewal.
    pub watch_interval: Duration,
}

impl LeaseConfig {
    /// A heartbeat of a third of the duration: two renewals may fail before a lease is dropped.
    pub fn new(worker: impl Into<String>, duration: Duration) -> Self {
        LeaseConfig {
            worker: worker.into(),
            duration,
            heartbeat: duration / 3,
            watch_interval: (duration / 3).min(Duration::from_millis(500)),
        }
    }
}

/// Lease writes of one heartbeat or take in flight at once. One at a time, renewing 128 leases
/// on a saturated host took longer than half a lease duration: a sole worker dropped its own
/// shards 49 times in a 5-million-item catch-up on the simulated table.
const WRITES_IN_FLIGHT: usize = 16;

/// Counts of lease changes, for metrics and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseCounts {
    pub acquired: u64,
    pub stolen: u64,
    pub lost: u64,
    pub released: u64,
}

/// A lease this worker holds: the counter it wrote and when the write succeeded.
#[derive(Debug, Clone, Copy)]
struct Held {
    counter: u64,
    renewed: Instant,
}

struct State {
    view: LeaseView<Instant>,
    held: BTreeMap<usize, Held>,
    counts: LeaseCounts,
    /// Owners proven dead: once dead, for good (a restart is a new name).
    dead: HashSet<String>,
}

/// One worker's leases over `keys` (lane `i` is `keys[i]`).
pub struct Leases<S: LeaseStore> {
    store: Arc<S>,
    keys: Vec<String>,
    config: LeaseConfig,
    state: Mutex<State>,
    usable: watch::Sender<BTreeSet<usize>>,
    /// Lanes nobody has attended for half a lease duration, as this worker last read them.
    unattended: watch::Sender<BTreeSet<usize>>,
    owners: Arc<dyn OwnerCheck>,
    /// Told of every successful heartbeat, for `/healthz` of a worker that holds no lease.
    handle: Option<crate::DaemonHandle>,
}

impl<S: LeaseStore> std::fmt::Debug for Leases<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leases")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S: LeaseStore> Leases<S> {
    pub fn new(store: Arc<S>, keys: Vec<String>, config: LeaseConfig) -> Self {
        Leases {
            store,
            keys,
            config,
            state: Mutex::new(State {
                view: LeaseView::new(),
                held: BTreeMap::new(),
                counts: LeaseCounts::default(),
                dead: HashSet::new(),
            }),
            usable: watch::Sender::new(BTreeSet::new()),
            unattended: watch::Sender::new(BTreeSet::new()),
            owners: Arc::new(NoOwnerCheck),
            handle: None,
        }
    }

    /// Takes at once the leases of owners that `owners` proves dead (a predecessor on this host).
    pub fn with_owner_check(mut self, owners: Arc<dyn OwnerCheck>) -> Self {
        self.owners = owners;
        self
    }

    /// Reports each successful heartbeat and the leases held to `handle`: a standby worker
    /// (no lease to read) is healthy while its heartbeats succeed.
    pub fn with_handle(mut self, handle: crate::DaemonHandle) -> Self {
        self.handle = Some(handle);
        self
    }

    /// The lanes this worker may read right now.
    pub fn usable(&self) -> watch::Receiver<BTreeSet<usize>> {
        self.usable.subscribe()
    }

    /// The lanes whose lease this worker does not hold and has seen unmoved for half a lease
    /// duration (a live holder renews three times in a duration, and stops reading a lease
    /// it could not renew for half of one): nobody reads them.
    pub fn unattended(&self) -> watch::Receiver<BTreeSet<usize>> {
        self.unattended.subscribe()
    }

    /// The lease table as just read at `now`: remembers its counters, judges owners not yet
    /// proven dead, and publishes the lanes nobody attends.
    fn observe(&self, records: &[LeaseRecord], now: Instant) {
        let unknown: Vec<String> = {
            let state = self.lock();
            let me = self.config.worker.as_str();
            let mut owners: Vec<String> = records
                .iter()
                .filter_map(|r| r.owner.clone())
                .filter(|o| o != me && !state.dead.contains(o))
                .collect();
            owners.sort();
            owners.dedup();
            owners
        };
        // Outside the lock: the check reads the process table.
        let newly_dead: Vec<String> = unknown
            .into_iter()
            .filter(|o| self.owners.proven_dead(o))
            .collect();
        let mut state = self.lock();
        for owner in newly_dead {
            tracing::info!(owner = %owner, "a lease owner is no longer running on this host; its leases are free");
            state.dead.insert(owner);
        }
        state.view.observe(records, now);
        let half = self.config.duration / 2;
        let unattended: BTreeSet<usize> = records
            .iter()
            .filter(|r| state.view.unmoved_for(r, now) >= half)
            .filter_map(|r| self.keys.iter().position(|k| *k == r.key))
            .filter(|lane| !state.held.contains_key(lane))
            .collect();
        drop(state);
        self.unattended.send_if_modified(|current| {
            let changed = *current != unattended;
            *current = unattended;
            changed
        });
    }

    pub fn counts(&self) -> LeaseCounts {
        self.lock().counts
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates the missing leases, then beats until `stop` completes. Call
    /// [`Leases::release_all`] afterwards (once in-flight deletes have drained) to hand over at
    /// once instead of after a lease duration.
    pub async fn run(&self, stop: impl Future<Output = ()>) -> Result<(), StoreError> {
        tokio::pin!(stop);
        // A store down at start is waited for (the daemon rides it out too); only a fatal
        // answer (no lease table, access denied) ends the worker.
        let mut failures = 0;
        loop {
            match self.store.ensure(&self.keys).await {
                Ok(()) => break,
                Err(e) if e.class == precise_ttl_core::ErrorClass::Fatal => return Err(e),
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, "cannot reach the lease table; trying again");
                }
            }
            tokio::select! {
                _ = &mut stop => return Ok(()),
                _ = tokio::time::sleep(RETRY.delay(failures, fastrand::f64())) => {}
            }
        }
        let mut failures = 0;
        let mut first = true;
        loop {
            // ±10 % jitter: workers started together must not beat in lockstep, or a steal can
            // lose the same race with the victim's renewal at every heartbeat. After a failed
            // heartbeat the next comes within a second: a store back from an outage must give
            // the worker its leases again at once, not a heartbeat later.
            let pause = match failures {
                _ if first => Duration::ZERO,
                0 => self.config.heartbeat.mul_f64(0.9 + 0.2 * fastrand::f64()),
                n => RETRY.delay(n, fastrand::f64()).min(self.config.heartbeat),
            };
            let beat_at = Instant::now() + pause;
            loop {
                let next = if failures == 0 && !first {
                    beat_at.min(Instant::now() + self.config.watch_interval)
                } else {
                    beat_at
                };
                tokio::select! {
                    _ = &mut stop => return Ok(()),
                    _ = tokio::time::sleep_until(next) => {}
                }
                if next >= beat_at {
                    break;
                }
                if let Err(e) = self.take_free().await {
                    tracing::debug!(error = %e, "looking for released leases failed");
                }
            }
            first = false;
            // A store that hangs must not keep a stale lease in use: a heartbeat gets one
            // interval, then the staleness check runs regardless.
            failures = match tokio::time::timeout(self.config.heartbeat, self.heartbeat()).await {
                Ok(Err(e)) if e.class == precise_ttl_core::ErrorClass::Fatal => return Err(e),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "lease heartbeat failed; trying again");
                    failures + 1
                }
                Err(_) => {
                    tracing::warn!("lease heartbeat timed out; trying again");
                    failures + 1
                }
                Ok(Ok(())) => {
                    if let Some(handle) = &self.handle {
                        handle.lease_heartbeat_ok(self.lock().held.len());
                    }
                    0
                }
            };
            self.drop_stale(Instant::now());
        }
    }

    /// This worker's takes and steal given the table as just read (the victim's lease drawn at
    /// random).
    fn plan(&self, records: &[LeaseRecord], state: &State, now: Instant) -> Moves {
        plan(
            records,
            &state.view,
            &self.config.worker,
            now,
            self.config.duration,
            fastrand::u64(..),
            &state.dead,
        )
    }

    /// Between heartbeats: notes every counter it sees and takes leases that are free
    /// (released by a stopped worker) or expired (a dead worker's, judged by the same rule as at
    /// a heartbeat), up to this worker's share; renews and steals nothing. Seeing counters every
    /// `watch_interval` instead of every heartbeat is what brings a takeover within a lease
    /// duration and a look of the dead worker's last renewal, not a duration and two heartbeats.
    async fn take_free(&self) -> Result<(), StoreError> {
        let records = self.store.list(&self.keys).await?;
        let now = Instant::now();
        self.observe(&records, now);
        let moves = {
            let state = self.lock();
            self.plan(&records, &state, now)
        };
        if moves.take.is_empty() {
            return Ok(());
        }
        self.take_all(moves.take.iter().map(|r| (r, false))).await?;
        self.publish();
        Ok(())
    }

    pub async fn heartbeat(&self) -> Result<(), StoreError> {
        let me = self.config.worker.as_str();
        let mut records = self.store.list(&self.keys).await?;
        let now = Instant::now();
        self.observe(&records, now);

        let held: Vec<(usize, Held)> = self.lock().held.iter().map(|(l, h)| (*l, *h)).collect();
        let mut renew = Vec::with_capacity(held.len());
        for (lane, h) in held {
            let key = &self.keys[lane];
            let still_mine = records
                .iter()
                .any(|r| &r.key == key && r.owner.as_deref() == Some(me) && r.counter == h.counter);
            if still_mine {
                renew.push((lane, h));
            } else {
                self.lose(lane, "taken by another worker");
            }
        }
        // Collected first: a stream over a borrowing closure is not `Send` across the await.
        let writes: Vec<_> = renew
            .iter()
            .map(|(lane, h)| self.store.write(&self.keys[*lane], h.counter, Some(me)))
            .collect();
        let results: Vec<Result<bool, StoreError>> = futures_util::stream::iter(writes)
            .buffered(WRITES_IN_FLIGHT)
            .collect()
            .await;
        for ((lane, h), result) in renew.into_iter().zip(results) {
            let key = &self.keys[lane];
            match result {
                Ok(true) => {
                    let mut state = self.lock();
                    if let Some(held) = state.held.get_mut(&lane) {
                        held.counter += 1;
                        held.renewed = Instant::now();
                    }
                    if let Some(r) = records.iter_mut().find(|r| &r.key == key) {
                        r.counter = h.counter + 1;
                    }
                }
                Ok(false) => self.lose(lane, "taken by another worker"),
                // Kept until it is stale: a passing error must not drop every lease.
                Err(e) => tracing::warn!(lease = %key, error = %e, "lease renewal failed"),
            }
        }

        let (moves, orphans) = {
            let state = self.lock();
            // Leases under this worker's name that it does not hold: a previous incarnation's
            // (a restart with the same --worker-id). They are taken back at once.
            let orphans: Vec<LeaseRecord> = records
                .iter()
                .filter(|r| r.owner.as_deref() == Some(me))
                .filter(|r| {
                    self.keys
                        .iter()
                        .position(|k| *k == r.key)
                        .is_some_and(|lane| !state.held.contains_key(&lane))
                })
                .cloned()
                .collect();
            (self.plan(&records, &state, now), orphans)
        };
        let stealing = moves.steal.iter().map(|r| (r, true));
        let takes = orphans.iter().chain(moves.take.iter()).map(|r| (r, false));
        self.take_all(takes.chain(stealing)).await?;
        self.publish();
        Ok(())
    }

    /// Takes each lease (conditional on the counter read); `true` marks a steal. Every take is
    /// tried and every success kept; the first error, if any, is returned after.
    async fn take_all(
        &self,
        leases: impl Iterator<Item = (&LeaseRecord, bool)>,
    ) -> Result<(), StoreError> {
        let me = self.config.worker.as_str();
        let takes: Vec<(usize, &LeaseRecord, bool)> = leases
            .filter_map(|(record, stolen)| {
                let lane = self.keys.iter().position(|k| *k == record.key)?;
                Some((lane, record, stolen))
            })
            .collect();
        let writes: Vec<_> = takes
            .iter()
            .map(|(_, record, _)| self.store.write(&record.key, record.counter, Some(me)))
            .collect();
        let results: Vec<Result<bool, StoreError>> = futures_util::stream::iter(writes)
            .buffered(WRITES_IN_FLIGHT)
            .collect()
            .await;
        let mut first_error = None;
        for ((lane, record, stolen), result) in takes.into_iter().zip(results) {
            match result {
                Ok(true) => {
                    let mut state = self.lock();
                    state.held.insert(
                        lane,
                        Held {
                            counter: record.counter + 1,
                            renewed: Instant::now(),
                        },
                    );
                    let change = if stolen {
                        state.counts.stolen += 1;
                        "stolen"
                    } else {
                        state.counts.acquired += 1;
                        "acquired"
                    };
                    metrics::counter!(m::LEASE_CHANGES, "change" => change).increment(1);
                    tracing::info!(lease = %record.key, from = ?record.owner, stolen, "lease taken");
                }
                Ok(false) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Stops using every lease whose renewal has not succeeded for half a lease duration: its
    /// reader must stop before another worker may take it.
    fn drop_stale(&self, now: Instant) {
        let limit = self.config.duration / 2;
        let stale: Vec<usize> = self
            .lock()
            .held
            .iter()
            .filter(|(_, h)| now.duration_since(h.renewed) > limit)
            .map(|(l, _)| *l)
            .collect();
        for lane in stale {
            self.lose(lane, "not renewed for half a lease duration");
        }
        self.publish();
    }

    fn lose(&self, lane: usize, why: &str) {
        let mut state = self.lock();
        if state.held.remove(&lane).is_some() {
            state.counts.lost += 1;
            metrics::counter!(m::LEASE_CHANGES, "change" => "lost").increment(1);
            tracing::warn!(lease = %self.keys[lane], why, "lease lost");
        }
    }

    fn publish(&self) {
        let lanes: BTreeSet<usize> = self.lock().held.keys().copied().collect();
        metrics::gauge!(m::LEASES_HELD).set(lanes.len() as f64);
        metrics::gauge!(m::LEASES).set(self.keys.len() as f64);
        if let Some(handle) = &self.handle {
            handle.leases_held(lanes.len());
        }
        // A lane taken since the last read is attended now.
        self.unattended.send_if_modified(|current| {
            let before = current.len();
            current.retain(|lane| !lanes.contains(lane));
            current.len() != before
        });
        self.usable.send_if_modified(|current| {
            let changed = *current != lanes;
            *current = lanes;
            changed
        });
    }

    /// Beats in a task of its own until [`Beating::stop`].
    pub fn start(self: Arc<Self>) -> Beating<S> {
        let (stop, stopped) = oneshot::channel::<()>();
        let (failed, failure) = oneshot::channel();
        let task = tokio::spawn({
            let leases = Arc::clone(&self);
            async move {
                let stopped = async {
                    let _ = stopped.await;
                };
                if let Err(e) = leases.run(stopped).await {
                    tracing::error!(error = %e, "the lease table failed; stopping");
                    let _ = failed.send(e);
                }
            }
        });
        Beating {
            leases: self,
            stop: Some(stop),
            failure: Some(failure),
            task,
        }
    }

    /// Releases every held lease (conditional on this worker's counter), so another worker
    /// takes it within its `watch_interval`.
    pub async fn release_all(&self) {
        let held: Vec<(usize, Held)> = std::mem::take(&mut self.lock().held).into_iter().collect();
        self.publish();
        for (lane, h) in held {
            match self.store.write(&self.keys[lane], h.counter, None).await {
                Ok(true) => {
                    self.lock().counts.released += 1;
                    metrics::counter!(m::LEASE_CHANGES, "change" => "released").increment(1);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(lease = %self.keys[lane], error = %e, "lease release failed; it expires instead");
                }
            }
        }
    }
}

/// A worker's leases beating in their own task. Dropped, it stops beating without releasing
/// anything, as a crash would: the leases expire for others to take.
#[derive(Debug)]
pub struct Beating<S: LeaseStore> {
    leases: Arc<Leases<S>>,
    stop: Option<oneshot::Sender<()>>,
    failure: Option<oneshot::Receiver<StoreError>>,
    task: tokio::task::JoinHandle<()>,
}

impl<S: LeaseStore> Beating<S> {
    pub fn leases(&self) -> &Arc<Leases<S>> {
        &self.leases
    }

    /// Resolves with the error if the heartbeats stop on their own (a fatal lease-table
    /// error); `None` the second time it is asked for.
    pub fn failure(&mut self) -> Option<oneshot::Receiver<StoreError>> {
        self.failure.take()
    }

    /// Stops beating, then releases every lease: call it once the deletes in flight are done.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
        self.leases.release_all().await;
    }
}

/// Resolves with the lease-table error that stopped the heartbeats on their own (from
/// [`Beating::failure`]); never when there is no such error to wait for, as a worker without
/// leases or with heartbeats that ended without one has.
pub async fn failed(failure: Option<oneshot::Receiver<StoreError>>) -> StoreError {
    match failure {
        Some(failure) => match failure.await {
            Ok(e) => e,
            Err(_) => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}
