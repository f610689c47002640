//! The dispatcher: holds read-ahead items until their expiry instant, serves on-time items
//! before backlog items, forms batches (with a short linger), caps requests in flight (AIMD, a
//! backlog share, an optional token bucket), settles each delete's outcome, and sends items
//! whose delete failed retryably again after their backoff.

use super::schedule::{Next, Schedule};
use super::{Shared, Work, lock, stopped};
use crate::clock::Clock;
use crate::metrics as m;
use crate::store::{DeleteOutcome, ExpiryStore, StoreError};
use precise_ttl_core::{DueWindow, ErrorClass, Timestamp};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

type Outcomes<K> = Vec<(Work<K>, Result<DeleteOutcome, StoreError>, Timestamp)>;

/// A finished delete request: how many backlog items it carried (a request carries items of
/// one queue only, so none: due items), the outcomes of the items it settled, and the items to
/// send again.
struct Done<K> {
    backlog_items: usize,
    outcomes: Outcomes<K>,
    /// Items to send again, each after its backoff.
    retry: Vec<(Work<K>, Duration)>,
}

pub(super) async fn run<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    mut timely_rx: mpsc::Receiver<Work<S::Key>>,
    mut backlog_rx: mpsc::Receiver<Work<S::Key>>,
    mut stop: watch::Receiver<bool>,
) {
    let config = shared.config.clone();
    let mut schedule = Schedule::new(&config, shared.store.max_batch());
    let mut in_flight: JoinSet<Done<S::Key>> = JoinSet::new();
    let mut timely_open = true;
    let mut backlog_open = true;

    loop {
        if *stop.borrow() {
            break;
        }
        // Take in what the readers sent, without waiting.
        while schedule.has_room() {
            match timely_rx.try_recv() {
                Ok(w) => schedule.schedule(w),
                Err(_) => break,
            }
        }
        let now = shared.clock.now();
        schedule.promote_due(now, Instant::now());
        while let Some(done) = in_flight.try_join_next() {
            settle(&shared, done, &mut schedule);
        }
        shared.due_waiting_ms.store(
            schedule.due_waiting(now).as_millis() as u64,
            Ordering::Relaxed,
        );
        let limit = lock(&shared.aimd).limit();
        metrics::gauge!(m::CONCURRENCY_LIMIT).set(limit as f64);
        let slot_free = shared.active() < limit;
        while schedule.wants_backlog(slot_free) {
            match backlog_rx.try_recv() {
                Ok(w) => schedule.add_backlog(w),
                Err(_) => break,
            }
        }
        let (wake_in, take_backlog) = match schedule.next(now, Instant::now(), slot_free) {
            Next::Send { batch, backlog } => {
                let backlog_items = if backlog { batch.len() } else { 0 };
                // The slot is taken here, before the task runs, so the loop cannot over-dispatch.
                shared.active.fetch_add(1, Ordering::SeqCst);
                let task = delete_batch(Arc::clone(&shared), batch);
                in_flight.spawn(async move {
                    let (outcomes, retry) = task.await;
                    Done {
                        backlog_items,
                        outcomes,
                        retry,
                    }
                });
                continue;
            }
            Next::Throttle(wait) => {
                tokio::select! {
                    _ = stopped(&mut stop) => break,
                    _ = tokio::time::sleep(wait) => {}
                }
                continue;
            }
            Next::Idle {
                wake_in,
                take_backlog,
            } => (wake_in, take_backlog),
        };
        // Nothing to send right now: wait for the next event.
        tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            Some(done) = in_flight.join_next(), if !in_flight.is_empty() => settle(&shared, done, &mut schedule),
            _ = sleep_opt(wake_in) => {}
            _ = shared.slot_freed.notified() => {}
            w = timely_rx.recv(), if timely_open && schedule.has_room() => match w {
                Some(w) => schedule.schedule(w),
                None => timely_open = false,
            },
            w = backlog_rx.recv(), if take_backlog && backlog_open => match w {
                Some(w) => schedule.add_backlog(w),
                None => backlog_open = false,
            },
        }
    }

    // Shutdown: no new deletes; let the ones in flight finish.
    let deadline = Instant::now() + config.drain_timeout;
    while !in_flight.is_empty() {
        match tokio::time::timeout_at(deadline, in_flight.join_next()).await {
            Ok(Some(done)) => settle(&shared, done, &mut schedule),
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
    schedule: &mut Schedule<S::Key>,
) {
    let Done {
        backlog_items,
        outcomes,
        retry,
    } = match done {
        Ok(done) => done,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => return,
    };
    let resolved_at = Instant::now();
    schedule.settled(backlog_items, outcomes.len(), resolved_at);
    for (work, wait) in retry {
        schedule.retry(work, backlog_items > 0, resolved_at + wait);
    }
    // One line per request, not per key: a batch that failed as a whole fails 25 times alike.
    let mut failed: Option<(String, usize)> = None;
    let mut answered = 0;
    {
        let mut pending = lock(&shared.pending);
        for (work, result, _) in &outcomes {
            pending.resolve(&work.item.key, resolved_at);
            if let Err(e) = result
                && e.class != ErrorClass::Fatal
            {
                pending.coverage[work.lane].failed(work.item.expiry);
            }
        }
    }
    for (work, result, acked) in outcomes {
        match result {
            Ok(DeleteOutcome::Deleted) => {
                answered += 1;
                shared.counters.deleted();
                shared
                    .counters
                    .lag(acked.millis_since(work.item.expiry.at()).max(0) as u64);
                shared
                    .observer
                    .deleted(&work.item.key, work.item.expiry, acked);
            }
            Ok(DeleteOutcome::NotDue) => {
                answered += 1;
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
    if answered > 0 {
        lock(&shared.aimd).on_successes(answered);
    }
    if let Some((first, n)) = failed {
        tracing::warn!(
            failed = n,
            first = %first,
            "deletes failed after retries; the backlog reader will find them again"
        );
    }
}

/// Sends one delete request for a batch. Items that failed in a way worth retrying come back
/// to the dispatcher, which sends them again after their backoff, oldest first and with other
/// items: a retry loop here would send a throttled item alone and hold its whole request's
/// share of the backlog cap until the last retry ended (seen on the simulated table: 8 500
/// one-item requests for 1.2 million deletes, and a catch-up held at three quarters of the
/// table's limit).
async fn delete_batch<S: ExpiryStore, C: Clock>(
    shared: Arc<Shared<S, C>>,
    batch: Vec<Work<S::Key>>,
) -> (Outcomes<S::Key>, Vec<(Work<S::Key>, Duration)>) {
    let window = DueWindow::at(shared.clock.now());
    let keys: Vec<S::Key> = batch.iter().map(|w| w.item.key.clone()).collect();
    let results = if keys.len() == 1 {
        vec![shared.store.delete_if_due(&keys[0], window).await]
    } else {
        shared.store.delete_many_if_due(&keys, window).await
    };
    let acked = shared.clock.now();
    let mut done = Vec::with_capacity(batch.len());
    let mut retry = Vec::new();
    let items = batch.len();
    let mut throttled = 0;
    let mut lost = false;
    for (mut work, result) in batch.into_iter().zip(results) {
        let backoff = &shared.config.backoff;
        let again = result.as_ref().err().and_then(|e| {
            backoff
                .retry_as(e.class, work.failed_attempts + 1)
                .map(|steps| (e.class, steps))
        });
        match again {
            Some((class, steps)) => {
                throttled += usize::from(class == ErrorClass::Throttled);
                // A throttled call was refused; any other retryable failure may have been
                // applied before its answer was lost.
                lost |= class != ErrorClass::Throttled;
                work.answer_lost |= class != ErrorClass::Throttled;
                work.failed_attempts += 1;
                retry.push((work, backoff.delay(steps, fastrand::f64())));
            }
            None => done.push((work, result, acked)),
        }
    }
    if throttled > 0 {
        shared.throttled(throttled as f64 / items as f64);
    }
    if lost {
        // A timeout or a 5xx says the store is saturated as surely as a throttle does, and
        // each retry of a timed-out request adds to work the store is still doing: back off
        // (seen on a cold DynamoDB Local with two daemons racing: every batch timed out).
        shared.congested();
    }
    shared.release_slot();
    (done, retry)
}
