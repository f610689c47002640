//! The dispatcher's scheduling policy, without tasks or channels: which items go into the next
//! delete request, and when. Items read ahead wait in a timer queue until their expiry instant;
//! due items go before backlog items; a short run of due items may linger to share a request;
//! backlog items in flight are capped (every one queued at the store delays an item expiring
//! now); items whose request failed retryably wait out their backoff here and go again, oldest
//! first, in a request with other items; an optional token bucket caps the rate. Many items due
//! at one instant go out in random order, so no request goes to a single partition.

use super::Work;
use super::config::DaemonConfig;
use precise_ttl_core::{Expiry, Timestamp, TokenBucket};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;
use tokio::time::Instant;

/// How long, at the store's measured delete rate, the backlog in flight may take to clear.
pub(super) const BACKLOG_QUEUE_TIME: Duration = Duration::from_millis(50);

/// What to do next.
#[derive(Debug)]
pub(super) enum Next<K> {
    /// Send these items in one request.
    Send { batch: Vec<Work<K>>, backlog: bool },
    /// The rate cap says wait this long before sending.
    Throttle(Duration),
    /// Nothing to send now: wake within `wake_in` (a timer or the linger ends; `None`: only an
    /// event can change that), and take more backlog items if `take_backlog`.
    Idle {
        wake_in: Option<Duration>,
        take_backlog: bool,
    },
}

pub(super) struct Schedule<K> {
    /// Read-ahead items by expiry instant, in arrival order within one. Keyed by instant, not
    /// one heap entry per item: integer TTLs put a whole second's items under one key, and at
    /// 40 000 items/s a binary heap's sifting showed in profiles.
    timers: BTreeMap<Expiry, Vec<Work<K>>>,
    scheduled: usize,
    /// Items to send again once their backoff ends, by that instant; `true`: a backlog item.
    /// They wait here, not in a task of their own, so a throttled item rejoins a full request
    /// instead of going alone, and its request's share of the backlog cap is freed at once.
    retries: BTreeMap<Instant, Vec<(bool, Work<K>)>>,
    ready: VecDeque<Work<K>>,
    backlog: VecDeque<Work<K>>,
    bucket: Option<TokenBucket>,
    max_batch: usize,
    max_scheduled: usize,
    /// The configured floor of `max_backlog`, which grows with the store's measured rate.
    min_backlog: usize,
    max_backlog: usize,
    backlog_in_flight: usize,
    /// Items whose requests finished since `window_start`, for the store's delete rate.
    done_in_window: usize,
    window_start: Option<Instant>,
    linger: Duration,
    /// When the oldest item in `ready` became due, for the linger.
    ready_since: Option<Instant>,
}

impl<K> Schedule<K> {
    /// `store_batch`: the most items the store takes in one request.
    pub fn new(config: &DaemonConfig, store_batch: usize) -> Self {
        let max_batch = config.max_batch.clamp(1, store_batch.max(1));
        Schedule {
            timers: BTreeMap::new(),
            scheduled: 0,
            retries: BTreeMap::new(),
            ready: VecDeque::new(),
            backlog: VecDeque::new(),
            bucket: config
                .max_deletes_per_second
                .map(|r| TokenBucket::new(r, (r / 10.0).max(max_batch as f64))),
            max_batch,
            max_scheduled: config.max_scheduled,
            min_backlog: config.max_backlog_in_flight.max(1),
            max_backlog: config.max_backlog_in_flight.max(1),
            backlog_in_flight: 0,
            done_in_window: 0,
            window_start: None,
            linger: if max_batch > 1 {
                config.batch_linger
            } else {
                Duration::ZERO
            },
            ready_since: None,
        }
    }

    /// Whether the timer queue takes more read-ahead items.
    pub fn has_room(&self) -> bool {
        self.scheduled < self.max_scheduled
    }

    /// An item read ahead (or just due): it waits for its expiry instant.
    pub fn schedule(&mut self, work: Work<K>) {
        self.scheduled += 1;
        self.timers.entry(work.item.expiry).or_default().push(work);
    }

    pub fn add_backlog(&mut self, work: Work<K>) {
        self.backlog.push_back(work);
    }

    /// An item to send again at `at`, after its request failed retryably.
    pub fn retry(&mut self, work: Work<K>, from_backlog: bool, at: Instant) {
        self.retries
            .entry(at)
            .or_default()
            .push((from_backlog, work));
    }

    /// Moves every item whose expiry has come (by `now`, the wall clock) to the ready queue, and
    /// every retry whose backoff has ended (by `mono`) to the front of its queue: it is older
    /// than what waits there.
    pub fn promote_due(&mut self, now: Timestamp, mono: Instant) {
        let mut again = Vec::new();
        while let Some(entry) = self.retries.first_entry()
            && *entry.key() <= mono
        {
            again.extend(entry.remove());
        }
        for (from_backlog, work) in again.into_iter().rev() {
            if from_backlog {
                self.backlog.push_front(work);
            } else {
                self.ready.push_front(work);
            }
        }
        while let Some(entry) = self.timers.first_entry()
            && entry.key().at() <= now
        {
            let mut due = entry.remove();
            self.scheduled -= due.len();
            if due.len() > self.max_batch {
                // In random order: a reader hands over its lane's items together, and a lane
                // lists the items of one instant in table-key order, so a second's items of
                // whole-second TTLs went out lane after lane, each request of 25 to one shard
                // (170 000 statements refused by index partitions in a run of 600 000 deletes
                // on the simulated table); taken one of each lane in turn instead, each request
                // went to one table partition (805 000 refused). Shuffled, a request spreads
                // over both.
                fastrand::shuffle(&mut due);
            }
            self.ready.extend(due);
        }
        if self.ready.is_empty() {
            self.ready_since = None;
        } else if self.ready_since.is_none() {
            self.ready_since = Some(mono);
        }
    }

    /// How long the oldest due item not yet sent has been due at `now` (zero when none waits).
    pub fn due_waiting(&self, now: Timestamp) -> Duration {
        self.ready.front().map_or(Duration::ZERO, |w| {
            Duration::from_millis(now.millis_since(w.item.expiry.at()).max(0) as u64)
        })
    }

    /// Whether backlog items should be taken in now: nothing due is waiting, a request slot is
    /// free, the backlog's share of requests in flight has room, and less than a batch is queued.
    pub fn wants_backlog(&self, slot_free: bool) -> bool {
        self.ready.is_empty()
            && self.backlog.len() < self.max_batch
            && slot_free
            && self.backlog_in_flight < self.max_backlog
    }

    /// The decision, at wall time `now` and monotonic `mono`, with or without a free slot.
    pub fn next(&mut self, now: Timestamp, mono: Instant, slot_free: bool) -> Next<K> {
        // Hold a short run of due items back to share one request, unless a request's worth is
        // already there, or backlog items are waiting: those would go first meanwhile, and due
        // items must never wait behind the backlog.
        let lingering = self
            .ready_since
            .filter(|_| {
                self.ready.len() < self.max_batch
                    && !self.linger.is_zero()
                    && self.backlog.is_empty()
            })
            .map(|since| since + self.linger)
            .filter(|until| *until > mono);
        let backlog_room = self.backlog_in_flight < self.max_backlog;
        let source = if !self.ready.is_empty() && lingering.is_none() {
            Some(false)
        } else if !self.backlog.is_empty() && backlog_room {
            Some(true)
        } else {
            None
        };
        if let (Some(backlog), true) = (source, slot_free) {
            let queue = if backlog {
                &mut self.backlog
            } else {
                &mut self.ready
            };
            let mut n = queue.len().min(self.max_batch);
            if backlog {
                n = n.min(self.max_backlog - self.backlog_in_flight);
            }
            if let Some(bucket) = self.bucket.as_mut()
                && let Err(wait) = bucket.take(now, n as f64)
            {
                return Next::Throttle(wait);
            }
            let batch: Vec<_> = queue.drain(..n).collect();
            if backlog {
                self.backlog_in_flight += n;
            } else {
                self.ready_since = (!self.ready.is_empty()).then_some(mono);
            }
            return Next::Send { batch, backlog };
        }
        let next_expiry = self.timers.first_key_value().map(|(e, _)| e.at());
        let mut wake_in =
            next_expiry.map(|t| Duration::from_millis(t.millis_since(now).max(0) as u64));
        let retry_at = self.retries.first_key_value().map(|(at, _)| *at);
        for until in [lingering, retry_at].into_iter().flatten() {
            let d = until.saturating_duration_since(mono);
            wake_in = Some(wake_in.map_or(d, |w| w.min(d)));
        }
        Next::Idle {
            wake_in,
            take_backlog: self.backlog.len() < self.max_batch
                && self.ready.is_empty()
                && lingering.is_none()
                && slot_free
                && backlog_room,
        }
    }

    /// A request of `items` items, `backlog_items` of them from the backlog, has finished.
    ///
    /// The backlog's cap follows the store: [`BACKLOG_QUEUE_TIME`] of its delete rate over the
    /// last second, never below the configured cap. On a store that works through requests one
    /// at a time (DynamoDB Local: about 1,000/s) that is the configured 50 items, so an item
    /// expiring now waits at most that long behind the backlog; a store that deletes in parallel
    /// (DynamoDB: tens of thousands a second across partitions) clears its backlog at its own
    /// speed instead of 50 items per round trip.
    pub fn settled(&mut self, backlog_items: usize, items: usize, mono: Instant) {
        self.backlog_in_flight -= backlog_items;
        self.done_in_window += items;
        let start = *self.window_start.get_or_insert(mono);
        let elapsed = mono.saturating_duration_since(start);
        if elapsed >= Duration::from_secs(1) {
            let rate = self.done_in_window as f64 / elapsed.as_secs_f64();
            self.max_backlog = self
                .min_backlog
                .max((rate * BACKLOG_QUEUE_TIME.as_secs_f64()) as usize);
            self.done_in_window = 0;
            self.window_start = Some(mono);
        }
    }
}

#[cfg(test)]
mod tests;
