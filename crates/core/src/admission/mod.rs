//! Admission: which due items go into the next delete request, and when — one pure state
//! machine, fed with events (items read ahead, backlog items, answers with each item's outcome
//! and the throttle's scope, time) and asked for decisions (send these items now, or wait).
//!
//! What it does, and why:
//! - **Queues per lane, earliest deadline first across lanes.** A lane is one shard, one
//!   partition of the expiry index. Items read ahead wait until their expiry instant, then join
//!   their lane's queue, ordered by expiry (items of one instant in random order, so a second's
//!   items of whole-second TTLs do not go out lane after lane). A request takes the oldest items
//!   over all lanes that may send.
//! - **On-time items first.** Backlog items (found by the backlog reader, already late) go only
//!   when no on-time item waits, and the backlog in flight is capped to what the store clears in
//!   [`BACKLOG_QUEUE_TIME`] at its measured rate: every backlog item at the store delays an item
//!   expiring now.
//! - **Refused items keep their place.** A refused item goes back by its expiry once its short
//!   backoff ends; each request carries at most half its items from those retries, the oldest
//!   first. A client cannot see which table partition a key lives on, and serving retries
//!   oldest first across the table is the nearest it gets to serving each table partition
//!   oldest first; the bound keeps a request from filling with the keys of one refusing
//!   partition.
//! - **Each controller answers its own refusals.** An index partition's refusal limits that
//!   lane alone ([`lane::LaneLimit`]). Refusals of the whole table or index engage the table's
//!   send rate once they are a tenth of what it is sent ([`table::TableRate::for_table`]): the
//!   items then wait here in order of expiry instead of racing at the store. Refusals of table
//!   partitions (named, or of unknown scope spread over the lanes, as a batch statement's are)
//!   engage a looser rate only once they are half of what is sent, and it lets retries go at
//!   twice what the table accepts ([`table::TableRate::for_partitions`]). It holds back retries
//!   only: an item sent for the first time goes when it is due, so a partition with room never
//!   waits behind another one's refused items (a rate over every item held every partition's
//!   items back while one was full, and the capacity they left unused was lost for good, on the
//!   simulator most of all); no rate at all lets a full partition's refused items be sent again
//!   and again, at random against its newer ones (docs/benchmarks.md has both). A timeout or a
//!   5xx cuts the requests in flight ([`Aimd`]).
//! - **"Behind" is judged per lane** ([`Admission::oldest_waiting`]).
//!
//! Time is an argument (wall time of the engine's clock), and the random order of ties comes from
//! a seeded generator: the same events give the same decisions.

pub mod budget;
mod io;
pub mod lane;
mod share;
pub mod table;
#[cfg(test)]
mod tests;

use crate::expiry::Expiry;
use crate::rate::{Aimd, TokenBucket};
use crate::throttle::ThrottleScope;
use crate::time::Timestamp;
use budget::BacklogBudget;
use lane::LaneLimit;
use share::Share;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use table::TableRate;

pub use io::{Again, Answer, Decision, Settings, Snapshot};

/// How long, at the store's measured delete rate, the backlog in flight may take to clear.
pub const BACKLOG_QUEUE_TIME: Duration = Duration::from_millis(50);
/// A burst of timeouts from requests already in flight is one signal: the requests in flight
/// are cut at most once per this.
const TABLE_CUT_COOLDOWN: Duration = Duration::from_millis(200);

/// An item admission schedules: it knows its lane and its expiry.
pub trait Ticket {
    fn lane(&self) -> usize;
    fn expiry(&self) -> Expiry;
}

/// Whether an item is due on time (read ahead, or just due) or from the backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    OnTime,
    Backlog,
}

type Key = (Class, Expiry, u64);

/// The first key of `class`.
fn class_start(class: Class) -> Key {
    (
        class,
        Expiry::at_instant(Timestamp::from_millis(i64::MIN)),
        0,
    )
}

#[derive(Debug)]
struct Lane<T> {
    queue: BTreeMap<Key, T>,
    limit: LaneLimit,
    share: Share,
    paused_until: Option<Timestamp>,
    /// This lane's entry in `heads`, if any.
    head: Option<Key>,
}

#[derive(Debug)]
pub struct Admission<T> {
    settings: Settings,
    held: BTreeMap<Expiry, Vec<T>>,
    held_count: usize,
    lanes: Vec<Lane<T>>,
    /// The first item of every lane that may send now.
    heads: BTreeSet<(Key, usize)>,
    /// Lanes out of tokens, by the instant they have one again.
    paused: BTreeSet<(Timestamp, usize)>,
    /// Items waiting out a backoff, by the instant it ends.
    backoff: BTreeMap<(Timestamp, u64), (Class, T)>,
    /// Items whose backoff ended, oldest first.
    retries: BTreeMap<Key, T>,
    /// On-time items in lanes and retries (sendable or paused).
    on_time: usize,
    backlog: usize,
    /// When the oldest on-time item waiting became ready, for the linger.
    on_time_since: Option<Timestamp>,
    table: Aimd,
    /// The table's send rate, engaged by whole-table (or whole-index) refusals.
    table_rate: TableRate,
    /// The send rate engaged when most of what is sent is refused by table partitions.
    partitions_rate: TableRate,
    budget: BacklogBudget,
    bucket: Option<TokenBucket>,
    in_flight: usize,
    backlog_in_flight: usize,
    max_backlog: usize,
    done_in_window: usize,
    window_start: Option<Timestamp>,
    refusals: BTreeMap<ThrottleScope, u64>,
    share: Share,
    rng: u64,
    seq: u64,
}

impl<T: Ticket> Admission<T> {
    /// Admission for `lanes` lanes; `seed` orders items of one instant.
    pub fn new(lanes: usize, settings: Settings, seed: u64) -> Self {
        let max_batch = settings.max_batch.max(1);
        Admission {
            held: BTreeMap::new(),
            held_count: 0,
            lanes: (0..lanes.max(1))
                .map(|_| Lane {
                    queue: BTreeMap::new(),
                    limit: LaneLimit::default(),
                    share: Share::default(),
                    paused_until: None,
                    head: None,
                })
                .collect(),
            heads: BTreeSet::new(),
            paused: BTreeSet::new(),
            backoff: BTreeMap::new(),
            retries: BTreeMap::new(),
            on_time: 0,
            backlog: 0,
            on_time_since: None,
            table: Aimd::new(
                settings.min_concurrency,
                settings.initial_concurrency,
                settings.max_concurrency,
                TABLE_CUT_COOLDOWN,
            ),
            table_rate: TableRate::for_table(),
            partitions_rate: TableRate::for_partitions(),
            budget: BacklogBudget::new(settings.backlog_ceiling),
            bucket: settings
                .max_per_second
                .map(|r| TokenBucket::new(r, (r / 10.0).max(max_batch as f64))),
            in_flight: 0,
            backlog_in_flight: 0,
            max_backlog: settings.min_backlog_in_flight.max(1),
            done_in_window: 0,
            window_start: None,
            refusals: BTreeMap::new(),
            share: Share::default(),
            rng: seed ^ 0x9E37_79B9_7F4A_7C15,
            seq: 0,
            settings: Settings {
                max_batch,
                ..settings
            },
        }
    }

    /// Whether more items read ahead may be held.
    pub fn has_room(&self) -> bool {
        self.held_count < self.settings.max_held
    }

    /// An item read ahead (or just due): it becomes ready at its expiry instant.
    pub fn hold(&mut self, item: T) {
        self.held_count += 1;
        self.held.entry(item.expiry()).or_default().push(item);
    }

    /// A backlog item, ready now.
    pub fn add_backlog(&mut self, item: T) {
        self.backlog += 1;
        let key = self.key(Class::Backlog, item.expiry());
        let lane = self.lane_of(&item);
        self.lanes[lane].queue.insert(key, item);
        self.refresh_head(lane);
    }

    /// Whether the backlog reader's next items are wanted now: nothing on time waits, less than
    /// a request's worth of backlog waits, and the backlog's share of the store has room.
    pub fn wants_backlog(&self) -> bool {
        self.on_time == 0
            && self.backlog < self.settings.max_batch
            && self.in_flight < self.table.limit()
            && self.backlog_in_flight < self.max_backlog
    }

    /// Requests in flight (sent, not yet answered).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The expiry of the oldest on-time item waiting in each lane (`None`: none waits), written
    /// into `out` (one slot per lane).
    pub fn oldest_waiting(&self, out: &mut [Option<Expiry>]) {
        for slot in out.iter_mut() {
            *slot = None;
        }
        for (lane, state) in self.lanes.iter().enumerate() {
            if let (Some(slot), Some(((Class::OnTime, expiry, _), _))) =
                (out.get_mut(lane), state.queue.first_key_value())
            {
                *slot = Some(*expiry);
            }
        }
        for ((class, expiry, _), item) in &self.retries {
            if *class != Class::OnTime {
                break;
            }
            if let Some(slot) = out.get_mut(item.lane())
                && slot.is_none_or(|e| *expiry < e)
            {
                *slot = Some(*expiry);
            }
        }
    }

    /// The decision at wall time `now`.
    pub fn next(&mut self, now: Timestamp) -> Decision<T> {
        self.promote(now);
        if self.in_flight >= self.table.limit() {
            return Decision::Wait { until: None };
        }
        let lingering = self.linger_until(now);
        let on_time_ready = self.has_ready(Class::OnTime);
        let class = if on_time_ready && lingering.is_none() {
            Some(Class::OnTime)
        } else if self.backlog_in_flight < self.max_backlog && self.has_ready(Class::Backlog) {
            Some(Class::Backlog)
        } else {
            None
        };
        let Some(class) = class else {
            return Decision::Wait {
                until: self.wake_at(lingering),
            };
        };
        let mut cap = self.settings.max_batch;
        if class == Class::Backlog {
            cap = cap.min(self.max_backlog - self.backlog_in_flight);
        }
        let waiting = match class {
            Class::OnTime => self.on_time,
            Class::Backlog => self.backlog,
        };
        cap = cap.min(waiting.max(1));
        if class == Class::Backlog {
            cap = self.budget.available(now, cap);
            if cap == 0 {
                return self.wait_for(self.budget.next_at(now), lingering);
            }
        }
        cap = self.table_rate.available(now, cap);
        // The partitions' rate holds back retries only: an item sent for the first time goes
        // when it is due (see the module's header).
        let retry_cap = self.partitions_rate.available(now, cap);
        if cap == 0 {
            return self.wait_for(self.table_rate.next_at(now), lingering);
        }
        if let Some(bucket) = self.bucket.as_mut()
            && let Err(wait) = bucket.take(now, cap as f64)
        {
            return Decision::Wait {
                until: Some(now.saturating_add(wait)),
            };
        }
        let (items, retried) = self.form(class, cap, retry_cap, now);
        if items.is_empty() {
            return self.wait_for(self.partitions_rate.next_at(now), lingering);
        }
        self.table_rate.took(items.len());
        self.partitions_rate.took(retried);
        match class {
            Class::OnTime => {
                self.on_time -= items.len();
                self.on_time_since = (self.on_time > 0).then_some(now);
            }
            Class::Backlog => {
                self.backlog -= items.len();
                self.backlog_in_flight += items.len();
                self.budget.took(items.len());
            }
        }
        self.in_flight += 1;
        Decision::Send { items, class }
    }

    /// A request was answered at `now`.
    pub fn answered(&mut self, now: Timestamp, answer: Answer<T>) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if answer.class == Class::Backlog {
            self.backlog_in_flight = self.backlog_in_flight.saturating_sub(answer.items);
        }
        self.measure(answer.items, now);
        // Per lane: items answered, refused, refused with no scope given.
        let mut per_lane: BTreeMap<usize, (usize, usize, usize)> = BTreeMap::new();
        for lane in &answer.settled_lanes {
            per_lane.entry(*lane).or_default().0 += 1;
        }
        self.table.on_successes(answer.settled_lanes.len());
        let mut refused = 0usize;
        // Refusals of the whole table or index, and of table partitions.
        let mut table_refused = 0usize;
        let mut partitions_refused = 0usize;
        for again in &answer.again {
            let lane = self.lane_of(&again.item);
            let Some(scope) = again.refused else {
                per_lane.entry(lane).or_default().0 += 1;
                continue;
            };
            refused += 1;
            *self.refusals.entry(scope).or_default() += 1;
            let entry = per_lane.entry(lane).or_default();
            entry.1 += 1;
            match scope {
                ThrottleScope::IndexPartition => self.lanes[lane].limit.refused(now),
                ThrottleScope::Unknown => entry.2 += 1,
                ThrottleScope::Table | ThrottleScope::Index => table_refused += 1,
                ThrottleScope::TablePartition => partitions_refused += 1,
            }
        }
        self.share.add(now, answer.items as f64, refused as f64);
        for (&lane, &(answered, refused, unknown)) in &per_lane {
            let state = &mut self.lanes[lane];
            state
                .share
                .add(now, (answered + refused) as f64, refused as f64);
            if answered > 0 {
                state.limit.accepted(answered, now);
            }
            if unknown == 0 {
                continue;
            }
            // Refusals with no scope given (a batch statement's): one lane's index partition when
            // that lane is refused far more than the others ([`share`]); spread over the lanes,
            // the table's partitions'.
            if state.share.is_hot_lane(&self.share) {
                state.limit.refused(now);
            } else {
                partitions_refused += unknown;
            }
        }
        self.table_rate.answered(now, answer.items, table_refused);
        self.partitions_rate
            .answered(now, answer.items, partitions_refused);
        if answer.congested {
            self.table.on_throttle(now, 1.0);
        }
        // Any refusal says some partition is full, whichever class was refused: the backlog
        // yields first.
        let backlog_busy =
            answer.class == Class::Backlog || self.backlog > 0 || self.backlog_in_flight > 0;
        if (refused > 0 || answer.congested) && backlog_busy {
            self.budget.refused(now);
        }
        for again in answer.again {
            let at = now.saturating_add(again.after);
            self.seq += 1;
            self.backoff
                .insert((at, self.seq), (answer.class, again.item));
        }
    }

    /// What admission is doing now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            concurrency_limit: self.table.limit(),
            in_flight: self.in_flight,
            table_rate: self.table_rate.rate(),
            retry_rate: self.partitions_rate.rate(),
            limited_lanes: self
                .lanes
                .iter()
                .enumerate()
                .filter_map(|(i, l)| l.limit.rate().map(|r| (i, r)))
                .collect(),
            refusals: self.refusals.iter().map(|(s, n)| (*s, *n)).collect(),
            backlog_rate: self.budget.rate(),
            backlog_ceiling: self.budget.ceiling(),
        }
    }

    /// Items held, waiting in queues, or backing off (not those in flight).
    pub fn len(&self) -> usize {
        self.held_count + self.on_time + self.backlog + self.backoff.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lane_of(&self, item: &T) -> usize {
        item.lane().min(self.lanes.len() - 1)
    }

    fn key(&mut self, class: Class, expiry: Expiry) -> Key {
        // splitmix64: ties of one instant in random order, reproducible from the seed.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (class, expiry, z ^ (z >> 31))
    }

    /// Moves held items whose expiry has come, retries whose backoff has ended, and lanes whose
    /// tokens are back into play.
    fn promote(&mut self, now: Timestamp) {
        while let Some(entry) = self.held.first_entry()
            && entry.key().at() <= now
        {
            let due = entry.remove();
            self.held_count -= due.len();
            for item in due {
                self.on_time += 1;
                self.on_time_since.get_or_insert(now);
                let key = self.key(Class::OnTime, item.expiry());
                let lane = self.lane_of(&item);
                self.lanes[lane].queue.insert(key, item);
                self.refresh_head(lane);
            }
        }
        while let Some(entry) = self.backoff.first_entry()
            && entry.key().0 <= now
        {
            let (class, item) = entry.remove();
            match class {
                Class::OnTime => {
                    self.on_time += 1;
                    self.on_time_since.get_or_insert(now);
                }
                Class::Backlog => self.backlog += 1,
            }
            let key = self.key(class, item.expiry());
            self.retries.insert(key, item);
        }
        while let Some(&(at, lane)) = self.paused.first()
            && at <= now
        {
            self.paused.pop_first();
            self.lanes[lane].paused_until = None;
            self.refresh_head(lane);
        }
    }

    fn refresh_head(&mut self, lane: usize) {
        let state = &mut self.lanes[lane];
        if let Some(old) = state.head.take() {
            self.heads.remove(&(old, lane));
        }
        if state.paused_until.is_none()
            && let Some((key, _)) = state.queue.first_key_value()
        {
            state.head = Some(*key);
            self.heads.insert((*key, lane));
        }
    }

    fn pause(&mut self, lane: usize, until: Timestamp) {
        self.lanes[lane].paused_until = Some(until);
        self.paused.insert((until, lane));
        self.refresh_head(lane);
    }

    /// Whether an item of `class` may be sent now (its lane not paused).
    fn has_ready(&self, class: Class) -> bool {
        self.heads
            .range((class_start(class), 0)..)
            .next()
            .is_some_and(|((c, _, _), _)| *c == class)
            || self
                .retries
                .range(class_start(class)..)
                .take_while(|((c, _, _), _)| *c == class)
                .take(64)
                .any(|(_, item)| self.lane_ready(item.lane()))
    }

    fn lane_ready(&self, lane: usize) -> bool {
        self.lanes
            .get(lane)
            .is_some_and(|l| l.paused_until.is_none())
    }

    /// Until when a short run of on-time items lingers to share one request (`None`: it does
    /// not): only with batching on, while less than a request's worth waits and no backlog
    /// item would go first meanwhile.
    fn linger_until(&self, now: Timestamp) -> Option<Timestamp> {
        let since = self.on_time_since?;
        if self.settings.linger.is_zero()
            || self.settings.max_batch <= 1
            || self.on_time >= self.settings.max_batch
            || self.backlog > 0
        {
            return None;
        }
        let until = since.saturating_add(self.settings.linger);
        (until > now).then_some(until)
    }

    /// Waits until a limit lets more go (`limit`: a rate's next token, the budget's) or until
    /// [`Self::wake_at`], whichever comes first.
    fn wait_for(&self, limit: Option<Timestamp>, lingering: Option<Timestamp>) -> Decision<T> {
        Decision::Wait {
            until: self.wake_at(lingering).into_iter().chain(limit).min(),
        }
    }

    fn wake_at(&self, lingering: Option<Timestamp>) -> Option<Timestamp> {
        [
            lingering,
            self.held.first_key_value().map(|(e, _)| e.at()),
            self.backoff.first_key_value().map(|((at, _), _)| *at),
            self.paused.first().map(|(at, _)| *at),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Takes up to `cap` items of `class`, of which at most `retry_cap` retries: retries first
    /// (at most half the request, oldest first), then the oldest items over all lanes, then more
    /// retries if room is left. Returns the items and how many of them are retries.
    fn form(
        &mut self,
        class: Class,
        cap: usize,
        retry_cap: usize,
        now: Timestamp,
    ) -> (Vec<T>, usize) {
        let mut items = Vec::with_capacity(cap);
        let retry_share = (self.settings.max_batch / 2).max(1);
        self.take_retries(class, retry_share.min(cap).min(retry_cap), now, &mut items);
        let first_retries = items.len();
        while items.len() < cap {
            let Some(&((c, _, _), lane)) = self.heads.range((class_start(class), 0)..).next()
            else {
                break;
            };
            if c != class {
                break;
            }
            self.take_head(lane, now, &mut items);
        }
        let fresh = items.len() - first_retries;
        if items.len() < cap {
            let left = (cap - items.len()).min(retry_cap.saturating_sub(first_retries));
            self.take_retries(class, left, now, &mut items);
        }
        let retried = items.len() - fresh;
        (items, retried)
    }

    /// Takes the first item of `lane` if its limit has a token; otherwise pauses the lane.
    fn take_head(&mut self, lane: usize, now: Timestamp, items: &mut Vec<T>) {
        match self.lanes[lane].limit.take(now) {
            Ok(()) => {
                if let Some((_, item)) = self.lanes[lane].queue.pop_first() {
                    items.push(item);
                }
                self.refresh_head(lane);
            }
            Err(until) => self.pause(lane, until),
        }
    }

    /// Takes up to `n` retries of `class`, oldest first, from lanes that may send.
    fn take_retries(&mut self, class: Class, n: usize, now: Timestamp, items: &mut Vec<T>) {
        let mut taken = 0;
        let mut looked = 0;
        let mut cursor = class_start(class);
        while taken < n && looked < 4 * n + 64 {
            let Some((&key, item)) = self
                .retries
                .range(cursor..)
                .next()
                .filter(|((c, _, _), _)| *c == class)
            else {
                break;
            };
            looked += 1;
            cursor = (key.0, key.1, key.2.wrapping_add(1));
            let lane = self.lane_of(item);
            if !self.lane_ready(lane) {
                if key.2 == u64::MAX {
                    break;
                }
                continue;
            }
            match self.lanes[lane].limit.take(now) {
                Ok(()) => {
                    if let Some(item) = self.retries.remove(&key) {
                        items.push(item);
                        taken += 1;
                    }
                }
                Err(until) => self.pause(lane, until),
            }
            if key.2 == u64::MAX {
                break;
            }
        }
    }

    /// The backlog's cap follows the store: [`BACKLOG_QUEUE_TIME`] of its answered items per
    /// second, never below the configured floor. On a store that works through requests one at
    /// a time (DynamoDB Local) that is the floor, so an item expiring now waits at most that long
    /// behind the backlog; a store that deletes in parallel (DynamoDB) clears its backlog at its
    /// own speed instead of a floor's worth per round trip.
    fn measure(&mut self, items: usize, now: Timestamp) {
        self.done_in_window += items;
        let start = *self.window_start.get_or_insert(now);
        let elapsed = now.millis_since(start);
        if elapsed >= 1000 {
            let rate = self.done_in_window as f64 * 1000.0 / elapsed as f64;
            self.max_backlog = self
                .settings
                .min_backlog_in_flight
                .max(1)
                .max((rate * BACKLOG_QUEUE_TIME.as_secs_f64()) as usize);
            self.done_in_window = 0;
            self.window_start = Some(now);
        }
    }
}
