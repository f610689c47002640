//! The dispatcher: holds read-ahead items until their expiry instant, serves on-time items
//! before backlog items, forms batches (with a short linger), caps requests in flight (AIMD, a
//! backlog share, an optional token bucket), and settles each delete's outcome.

use super::{Shared, Work, lock, stopped};
use crate::clock::Clock;
use crate::metrics as m;
use crate::store::{DeleteOutcome, ExpiryStore, StoreError};
use precise_ttl_core::{DueWindow, ErrorClass, Expiry, Timestamp, TokenBucket};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

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

pub(super) async fn run<S: ExpiryStore, C: Clock>(
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
    let mut ready_since: Option<Instant> = None;
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
            ready_since = Some(Instant::now());
        }
        // Hold a short run of due items back to share one request, unless a request's worth
        // is already there.
        let lingering = ready_since
            .filter(|_| ready.len() < max_batch && !linger.is_zero())
            .map(|since| since + linger)
            .filter(|until| *until > Instant::now());
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
                ready_since = (!ready.is_empty()).then(Instant::now);
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
            let d = until.saturating_duration_since(Instant::now());
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
    let deadline = Instant::now() + config.drain_timeout;
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
                shared.counters.deleted();
                let lag = acked.millis_since(work.item.expiry.at()).max(0) as f64 / 1000.0;
                metrics::histogram!(m::LAG_SECONDS).record(lag);
                lock(&shared.aimd).on_success();
                shared
                    .observer
                    .deleted(&work.item.key, work.item.expiry, acked);
            }
            Ok(DeleteOutcome::NotDue) => {
                drop(pending);
                shared.counters.skipped();
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
                shared.counters.error();
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
