//! The dispatcher: the I/O shell around [`Admission`] (which items go in the next delete
//! request, and when). It feeds admission with what the readers send and what each request's
//! answer says, sends the requests admission decides on, settles each delete's outcome, and
//! publishes admission's state (per-lane waiting, controllers) for the readers, `/metrics` and
//! `status`.

use super::{Shared, Work, lock, stopped};
use crate::clock::Clock;
use crate::metrics as m;
use crate::store::{DeleteOutcome, ExpiryStore, StoreError};
use precise_ttl_core::admission::{
    Admission, Again, Answer, Class, Decision, Settings, Snapshot, Ticket,
};
use precise_ttl_core::{DueWindow, ErrorClass, Expiry, Timestamp};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

type Outcomes<K> = Vec<(Work<K>, Result<DeleteOutcome, StoreError>, Timestamp)>;

impl<K> Ticket for Work<K> {
    fn lane(&self) -> usize {
        self.lane
    }
    fn expiry(&self) -> Expiry {
        self.item.expiry
    }
}

/// A finished delete request: its class and size, the outcomes of the items it settled, the
/// items to send again, whether a failure said the store is saturated, and the items withdrawn
/// before it was sent (moved in the index since they were read).
struct Done<K> {
    class: Class,
    items: usize,
    outcomes: Outcomes<K>,
    again: Vec<Again<Work<K>>>,
    congested: bool,
    withdrawn: Vec<Work<K>>,
}

/// How often each shard's waiting is published for its readers.
const WAITING_EVERY: Duration = Duration::from_millis(5);

/// How often admission's controllers are published to `/metrics` and `status`.
const PUBLISH_EVERY: Duration = Duration::from_millis(250);

pub(super) fn settings(config: &super::DaemonConfig, store_batch: usize) -> Settings {
    let max_batch = config.max_batch.clamp(1, store_batch.max(1));
    Settings {
        max_batch,
        linger: if max_batch > 1 {
            config.batch_linger
        } else {
            Duration::ZERO
        },
        max_held: config.max_scheduled,
        min_concurrency: config.min_concurrency,
        initial_concurrency: config.initial_concurrency,
        max_concurrency: config.max_concurrency,
        min_backlog_in_flight: config.max_backlog_in_flight,
        max_per_second: config.max_deletes_per_second,
        backlog_ceiling: config.backlog_ceiling,
    }
}

pub(super) async fn run<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    mut timely_rx: mpsc::Receiver<Work<S::Key>>,
    mut backlog_rx: mpsc::Receiver<Work<S::Key>>,
    mut stop: watch::Receiver<bool>,
) {
    let config = shared.config.clone();
    let lanes = shared.partitioning.lanes();
    let mut admission = Admission::new(
        lanes,
        settings(&config, shared.store.max_batch()),
        shared.random_u64(),
    );
    let mut in_flight: JoinSet<Done<S::Key>> = JoinSet::new();
    let mut timely_open = true;
    let mut backlog_open = true;
    let mut waiting = vec![None; lanes];
    // Published from the start and then at least every PUBLISH_EVERY, idle or not: a scrape of
    // a daemon with nothing to delete still sees every gauge.
    publish(&shared, &admission);
    let mut published = Instant::now();
    let mut waited = Instant::now();

    loop {
        if *stop.borrow() {
            break;
        }
        // Take in what the readers sent and what the store answered, without waiting.
        while admission.has_room() {
            match timely_rx.try_recv() {
                Ok(w) => admission.hold(w),
                Err(_) => break,
            }
        }
        while let Some(done) = in_flight.try_join_next() {
            settle(&shared, done, &mut admission);
        }
        while admission.wants_backlog() {
            match backlog_rx.try_recv() {
                Ok(w) => admission.add_backlog(w),
                Err(_) => break,
            }
        }
        // Both feeds closed (a pass's readers are done; a daemon's readers hold theirs until
        // it stops) and everything settled: the work is done.
        if !timely_open && !backlog_open && admission.is_empty() && in_flight.is_empty() {
            break;
        }
        let now = shared.clock.now();
        let decision = admission.next(now);
        // Per-shard waiting for the readers: a pass over every shard and every retry, so not at
        // every turn (hundreds a second under load); the readers' thresholds are 20 and 250 ms.
        if waited.elapsed() >= WAITING_EVERY {
            waited = Instant::now();
            admission.oldest_waiting(&mut waiting);
            shared.publish_waiting(&waiting, now);
        }
        if published.elapsed() >= PUBLISH_EVERY {
            published = Instant::now();
            publish(&shared, &admission);
        }
        let until = match decision {
            Decision::Send { items, class } => {
                let task = delete_batch(Arc::clone(&shared), items, class);
                in_flight.spawn(task);
                continue;
            }
            Decision::Wait { until } => until,
        };
        let wake_in = until
            .map(|t| Duration::from_millis(t.millis_since(now).max(0) as u64))
            .map_or(PUBLISH_EVERY, |d| d.min(PUBLISH_EVERY));
        // Nothing to send right now: wait for the next event.
        tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => settle(&shared, done, &mut admission),
            _ = tokio::time::sleep(wake_in) => {}
            w = timely_rx.recv(), if timely_open && admission.has_room() => match w {
                Some(w) => admission.hold(w),
                None => timely_open = false,
            },
            w = backlog_rx.recv(), if backlog_open && admission.wants_backlog() => match w {
                Some(w) => admission.add_backlog(w),
                None => backlog_open = false,
            },
        }
    }

    // Shutdown: no new deletes; let the ones in flight finish.
    let deadline = Instant::now() + config.drain_timeout;
    while !in_flight.is_empty() {
        match tokio::time::timeout_at(deadline, in_flight.join_next()).await {
            Ok(Some(done)) => settle(&shared, done, &mut admission),
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
    publish(&shared, &admission);
}

/// Admission's controllers, to the status `status` shows and (a daemon's) to `/metrics`.
fn publish<S: ExpiryStore, C: Clock, K>(shared: &Shared<S, C>, admission: &Admission<Work<K>>) {
    let snapshot = admission.snapshot();
    if shared.gauges {
        gauges(shared, &snapshot);
    }
    let mut status = lock(&shared.handle.status);
    status.concurrency_limit = snapshot.concurrency_limit;
    status.table_rate = snapshot.table_rate;
    status.retry_rate = snapshot.retry_rate;
    status.backlog_rate = snapshot.backlog_rate;
    status.backlog_ceiling = snapshot.backlog_ceiling;
    status.limited_lanes = snapshot.limited_lanes;
    status.refusals = snapshot
        .refusals
        .iter()
        .map(|(scope, n)| (scope.as_str().to_string(), *n))
        .collect();
}

/// Admission's controllers as `/metrics` gauges.
fn gauges<S: ExpiryStore, C: Clock>(shared: &Shared<S, C>, snapshot: &Snapshot) {
    metrics::gauge!(m::CONCURRENCY_LIMIT).set(snapshot.concurrency_limit as f64);
    metrics::gauge!(m::LANES_LIMITED).set(snapshot.limited_lanes.len() as f64);
    metrics::gauge!(m::TABLE_RATE_LIMIT).set(snapshot.table_rate.unwrap_or(0.0));
    metrics::gauge!(m::RETRY_RATE_LIMIT).set(snapshot.retry_rate.unwrap_or(0.0));
    metrics::gauge!(m::BACKLOG_RATE_LIMIT).set(snapshot.backlog_rate.unwrap_or(0.0));
    crate::capacity_rate::publish(std::time::Instant::now());
    // A lane that was limited and is no longer shows 0 (no limit of its own), so the series of a
    // lifted limit does not keep its last value; only lanes ever limited have a series.
    for (lane, _) in &lock(&shared.handle.status).limited_lanes {
        if !snapshot.limited_lanes.iter().any(|(l, _)| l == lane) {
            metrics::gauge!(m::LANE_RATE_LIMIT, "shard" => lane.to_string()).set(0.0);
        }
    }
    for (lane, rate) in &snapshot.limited_lanes {
        metrics::gauge!(m::LANE_RATE_LIMIT, "shard" => lane.to_string()).set(*rate);
    }
}

fn settle<S: ExpiryStore, C: Clock>(
    shared: &Shared<S, C>,
    done: Result<Done<S::Key>, tokio::task::JoinError>,
    admission: &mut Admission<Work<S::Key>>,
) {
    let Done {
        class,
        items,
        outcomes,
        again,
        congested,
        withdrawn,
    } = match done {
        Ok(done) => done,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => return,
    };
    let resolved_at = Instant::now();
    admission.answered(
        shared.clock.now(),
        Answer {
            class,
            items,
            settled_lanes: outcomes.iter().map(|(w, _, _)| w.lane).collect(),
            again,
            congested,
        },
    );
    // One line per request, not per key: a batch that failed as a whole fails 25 times alike.
    let mut failed: Option<(String, usize)> = None;
    {
        let mut pending = lock(&shared.pending);
        for work in &withdrawn {
            pending.resolve(&work.item.key, resolved_at);
        }
        for (work, result, _) in &outcomes {
            pending.resolve(&work.item.key, resolved_at);
            if let Err(e) = result
                && e.class != ErrorClass::Fatal
            {
                pending.coverage[work.lane].failed(work.item.expiry);
            }
        }
    }
    // Changed since the query, as a failed condition says of the items sent: skipped.
    for work in withdrawn {
        shared.counters.skipped();
        shared.observer.skipped(&work.item.key, work.item.expiry);
    }
    for (work, result, acked) in outcomes {
        match result {
            Ok(DeleteOutcome::Deleted) => {
                shared.counters.deleted();
                shared
                    .counters
                    .lag(acked.millis_since(work.item.expiry.at()).max(0) as u64);
                shared
                    .observer
                    .deleted(&work.item.key, work.item.expiry, acked);
            }
            Ok(DeleteOutcome::NotDue) => {
                if work.answer_lost {
                    shared.counters.unconfirmed();
                } else {
                    shared.counters.skipped();
                }
                shared.observer.skipped(&work.item.key, work.item.expiry);
            }
            Err(e) if e.class == ErrorClass::Fatal => shared.fail(e),
            Err(e) => {
                shared.counters.error();
                match &mut failed {
                    Some((_, n)) => *n += 1,
                    None => failed = Some((format!("{:?}: {e}", work.item.key), 1)),
                }
            }
        }
    }
    if let Some((first, n)) = failed {
        tracing::warn!(
            failed = n,
            first = %first,
            "deletes failed after retries; the backlog reader will find them again"
        );
    }
}

/// Sends one delete request, without the items withdrawn since admission chose them (moved in
/// the index, see `Pending::withdraw_unlisted`). Items that failed in a way worth retrying go back to admission,
/// which sends them again after their backoff, oldest first and with other items: a retry loop
/// here would send a throttled item alone and hold its request's share of the store.
async fn delete_batch<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    batch: Vec<Work<S::Key>>,
    class: Class,
) -> Done<S::Key> {
    let items = batch.len();
    let (withdrawn, batch): (Vec<_>, Vec<_>) = {
        let pending = lock(&shared.pending);
        batch
            .into_iter()
            .partition(|w| pending.is_withdrawn(&w.item.key))
    };
    let window = DueWindow::at(shared.clock.now());
    let keys: Vec<S::Key> = batch.iter().map(|w| w.item.key.clone()).collect();
    let results = match keys.len() {
        0 => Vec::new(),
        1 => vec![shared.store.delete_if_due(&keys[0], window).await],
        _ => shared.store.delete_many_if_due(&keys, window).await,
    };
    let acked = shared.clock.now();
    let mut outcomes = Vec::with_capacity(items);
    let mut again = Vec::new();
    let mut throttled = 0;
    let mut congested = false;
    for (mut work, result) in batch.into_iter().zip(results) {
        let backoff = &shared.config.backoff;
        let retry = result.as_ref().err().and_then(|e| {
            backoff
                .retry_as(e.class, work.failed_attempts + 1)
                .map(|steps| (e.class, e.throttle, steps))
        });
        match retry {
            Some((class, scope, steps)) => {
                let refused = class == ErrorClass::Throttled;
                throttled += usize::from(refused);
                // A throttled call was refused; any other retryable failure may have been
                // applied before its answer was lost, and says the store is saturated as surely
                // as a throttle does (a timeout, a 5xx).
                congested |= !refused;
                work.answer_lost |= !refused;
                work.failed_attempts += 1;
                if let Some(scope) = scope.filter(|_| refused) {
                    metrics::counter!(m::THROTTLED_BY_SCOPE, "scope" => scope.as_str())
                        .increment(1);
                }
                let after = if refused {
                    precise_ttl_core::backoff::refused_delay(shared.random_unit())
                } else {
                    backoff.delay(steps, shared.random_unit())
                };
                again.push(Again {
                    after,
                    refused: refused
                        .then(|| scope.unwrap_or(precise_ttl_core::ThrottleScope::Unknown)),
                    item: work,
                });
            }
            None => outcomes.push((work, result, acked)),
        }
    }
    if throttled > 0 {
        shared.throttled();
    }
    Done {
        class,
        items,
        outcomes,
        again,
        congested,
        withdrawn,
    }
}
