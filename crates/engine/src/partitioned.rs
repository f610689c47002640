//! An in-memory [`ExpiryStore`] with DynamoDB's partitioned capacity, for deterministic load
//! tests of the engine on tokio's paused clock.
//!
//! Each key hashes (a fixed, seeded FNV-1a, stable across Rust releases, unlike `DefaultHasher`)
//! to one of N table partitions; each item's shard is its index partition. Deletes draw one write
//! unit from a token bucket per table partition, the table, the index partition and the index
//! (each [`precise_ttl_core::bucket::Bucket`]'s burst credit, as the simulator's). A delete is
//! admitted only when every bucket it touches holds a token; a refused one writes nothing and
//! fails with [`StoreError::throttled`] of the refusing scope.
//! [`ExpiryStore::delete_many_if_due`] is a batch of up to 25 with one outcome per item, as DynamoDB's `BatchExecuteStatement` answers.
//! Every request takes a round trip (`tokio::time::sleep`; fixed, or log-normal from a seeded
//! source as the simulator's), a delete taking effect half way, and buckets read
//! `tokio::time::Instant`, so under `tokio::time::pause()` a run is the same on every machine.
//!
//! It reimplements the reference store's rules ([`crate::memory`]: the index holds only items
//! with a shard and a Number TTL; a delete succeeds only if the stored TTL is inside the window)
//! with an ordered index per shard, since the load tests hold ~100,000 items and a full scan per
//! query would dominate the run.
//!
//! Not modelled, on purpose: the application's own writes (`put`) take no capacity, and index
//! reads take none either (the daemon reads little next to what it deletes).

use crate::memory::{MemItem, ordered_page};
use crate::store::{DeleteOutcome, DuePage, DuePageOf, DueQueryOf, ExpiryStore, StoreError};
use precise_ttl_core::bucket::InstantBucket;
use precise_ttl_core::{DueWindow, ErrorClass, Expiry, Shard, ThrottleScope};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A token bucket: [`precise_ttl_core::bucket::InstantBucket`] (full at the start, refilled at
/// `rate` per second, holding `rate * burst_seconds` at most) on tokio's clock. The simulator's
/// `Bucket` is that one too, the bench bound's keeps its tokens in the same
/// [`precise_ttl_core::bucket::Bucket`], and the engine's load tests check the three admit the
/// same.
#[derive(Debug, Clone)]
pub struct Bucket(InstantBucket);

impl Bucket {
    /// A full bucket; an infinite `rate` admits everything.
    pub fn new(rate: f64, burst_seconds: f64, now: Instant) -> Bucket {
        Bucket(InstantBucket::new(rate, burst_seconds, now.into_std()))
    }

    /// The tokens held at `now` (time never runs backwards for a bucket).
    pub fn tokens(&mut self, now: Instant) -> f64 {
        self.0.tokens(now.into_std())
    }

    /// Whether one token is there at `now` (within the float error of many small refills).
    pub fn has_token(&mut self, now: Instant) -> bool {
        self.0.admits(Some(1.0), now.into_std())
    }

    /// Takes one token (call [`Bucket::has_token`] first).
    pub fn take(&mut self) {
        self.0.take(1.0);
    }
}

/// Capacities and behaviour of a [`PartitionedStore`]. Rates are write units (deletes of items
/// up to 1 KB) per second; `f64::INFINITY` for no limit.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionedConfig {
    /// Table partitions keys hash to (at least 1).
    pub table_partitions: u32,
    /// Write units per second of one table partition (DynamoDB: 1,000).
    pub table_partition_wcu: f64,
    /// Write units per second of the whole table.
    pub table_wcu: f64,
    /// Write units per second of one index partition, i.e. one shard (DynamoDB: 1,000).
    pub index_partition_wcu: f64,
    /// Write units per second of the whole index.
    pub index_wcu: f64,
    /// Seconds of unused capacity a bucket keeps (0.1, as `bench --simulated`).
    pub burst_seconds: f64,
    /// The median time a request (query or delete batch) takes, end to end.
    pub latency: Duration,
    /// Its 99th percentile: equal to `latency`, every request takes exactly that long; above
    /// it, a seeded log-normal draw as the simulator's (`precise_ttl_sim::Latency`). A delete
    /// takes effect half way through its request, as one reaches the service about half way
    /// through its round trip.
    pub latency_p99: Duration,
    /// Keys per `delete_many_if_due` (BatchExecuteStatement: 25).
    pub max_batch: usize,
    /// Seed of the key hash: which table partition each key lands on.
    pub hash_seed: u64,
    /// Whether a batch's refused items name the refusing resource. DynamoDB's
    /// `BatchExecuteStatement` does not (a statement's error has a code and a message only), so
    /// by default they do not here either; single deletes always do (`ThrottlingReasons`).
    pub batch_scope: bool,
}

impl Default for PartitionedConfig {
    fn default() -> Self {
        PartitionedConfig {
            table_partitions: 10,
            table_partition_wcu: 1000.0,
            table_wcu: 10_000.0,
            index_partition_wcu: 1000.0,
            index_wcu: f64::INFINITY,
            burst_seconds: 0.1,
            latency: Duration::from_millis(5),
            latency_p99: Duration::from_millis(5),
            max_batch: 25,
            hash_seed: 0,
            batch_scope: false,
        }
    }
}

/// What the store admitted and refused so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionedCounts {
    /// Deletes refused, by the scope reported.
    pub refused: BTreeMap<ThrottleScope, u64>,
    /// Admitted deletes (writes) per table partition, indexed by partition.
    pub table_partition_writes: Vec<u64>,
    /// Admitted deletes that removed an index entry, per index partition (shard).
    pub index_partition_writes: BTreeMap<u16, u64>,
    /// Query requests served.
    pub queries: u64,
    /// Delete requests (single or batch) served.
    pub delete_requests: u64,
}

impl PartitionedCounts {
    pub fn refused(&self, scope: ThrottleScope) -> u64 {
        self.refused.get(&scope).copied().unwrap_or(0)
    }
}

#[derive(Debug)]
struct State {
    items: HashMap<String, MemItem>,
    /// (expiry, key) per shard, for items the index holds.
    index: HashMap<u16, BTreeSet<(Expiry, String)>>,
    table_partitions: Vec<Bucket>,
    table: Bucket,
    index_partitions: HashMap<u16, Bucket>,
    index_total: Bucket,
    counts: PartitionedCounts,
    rng: fastrand::Rng,
}

/// The in-memory store with partitioned capacity; see the module's documentation.
#[derive(Debug)]
pub struct PartitionedStore {
    config: PartitionedConfig,
    start: Instant,
    state: Mutex<State>,
}

impl PartitionedStore {
    /// An empty store, its buckets full now (`tokio::time::Instant::now()`).
    pub fn new(config: PartitionedConfig) -> Self {
        let now = Instant::now();
        let n = config.table_partitions.max(1) as usize;
        let state = State {
            items: HashMap::new(),
            index: HashMap::new(),
            table_partitions: (0..n)
                .map(|_| Bucket::new(config.table_partition_wcu, config.burst_seconds, now))
                .collect(),
            table: Bucket::new(config.table_wcu, config.burst_seconds, now),
            index_partitions: HashMap::new(),
            index_total: Bucket::new(config.index_wcu, config.burst_seconds, now),
            counts: PartitionedCounts {
                table_partition_writes: vec![0; n],
                ..PartitionedCounts::default()
            },
            rng: fastrand::Rng::with_seed(config.hash_seed ^ 0x5DEE_CE66),
        };
        PartitionedStore {
            config,
            start: now,
            state: Mutex::new(state),
        }
    }

    pub fn config(&self) -> &PartitionedConfig {
        &self.config
    }

    /// One request's round trip, split where the request takes effect: half way, on whole
    /// milliseconds (tokio's timer rounds a sleep up to the next one, so a fixed round trip
    /// stays exactly its length).
    fn halves(&self) -> (Duration, Duration) {
        let trip = self.round_trip();
        let first = Duration::from_millis((trip / 2).as_millis() as u64);
        (first, trip - first)
    }

    /// One request's round trip, drawn from the store's seeded source.
    fn round_trip(&self) -> Duration {
        let (p50, p99) = (self.config.latency, self.config.latency_p99);
        if p99 <= p50 || p50.is_zero() {
            return p50;
        }
        // Box-Muller; the 99th percentile of the standard normal is 2.326.
        let mut s = self.lock();
        let u1 = s.rng.f64().max(f64::MIN_POSITIVE);
        let u2 = s.rng.f64();
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        let sigma = (p99.as_secs_f64() / p50.as_secs_f64()).ln() / 2.326_347_874;
        Duration::from_secs_f64((p50.as_secs_f64() * (sigma * z).exp()).min(1.0))
    }

    /// The table partition of `key`: seeded FNV-1a of its bytes, modulo the partition count.
    pub fn table_partition(&self, key: &str) -> u32 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ self.config.hash_seed;
        for b in key.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // FNV's low bits mix poorly for short keys differing in their last byte; fold the high
        // half in before the modulo.
        h ^= h >> 32;
        (h % u64::from(self.config.table_partitions.max(1))) as u32
    }

    /// Writes (or overwrites) an item, as the application does; takes no capacity.
    pub fn put(&self, key: impl Into<String>, item: MemItem) {
        let key = key.into();
        let mut s = self.lock();
        s.unindex(&key);
        if let Some(e) = item.indexed_expiry() {
            let shard = item.shard.expect("indexed items have a shard");
            s.index.entry(shard).or_default().insert((e, key.clone()));
        }
        s.items.insert(key, item);
    }

    pub fn get(&self, key: &str) -> Option<MemItem> {
        self.lock().items.get(key).cloned()
    }

    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A snapshot of the counts.
    pub fn counts(&self) -> PartitionedCounts {
        self.lock().counts.clone()
    }

    /// One delete request: `apply` takes effect half way through its round trip, on the state
    /// then, and its answer comes back at the end.
    async fn delete_request<T>(&self, apply: impl FnOnce(&mut State, Instant) -> T) -> T {
        let (there, back) = self.halves();
        tokio::time::sleep(there).await;
        let result = {
            let now = Instant::now();
            let mut s = self.lock();
            s.counts.delete_requests += 1;
            apply(&mut s, now)
        };
        tokio::time::sleep(back).await;
        result
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One conditional delete at `now`, admission first: a refused delete writes nothing.
    fn delete_one(
        &self,
        s: &mut State,
        key: &str,
        window: DueWindow,
        now: Instant,
    ) -> Result<DeleteOutcome, StoreError> {
        let tp = self.table_partition(key) as usize;
        let item = s.items.get(key);
        let due = item.is_some_and(|i| i.is_due(window));
        // A delete that removes an index entry writes the index partition too; a failed
        // condition (or an item gone) costs the table a unit, as DynamoDB charges it, and the
        // index nothing.
        let shard = item
            .filter(|i| due && i.indexed_expiry().is_some())
            .and_then(|i| i.shard);
        let burst = self.config.burst_seconds;
        let ip_rate = self.config.index_partition_wcu;
        // The widest refusing scope is reported, as `ThrottleScope::of_reasons` reads several.
        let refused = if !s.table.has_token(now) {
            Some(ThrottleScope::Table)
        } else if shard.is_some() && !s.index_total.has_token(now) {
            Some(ThrottleScope::Index)
        } else if !s.table_partitions[tp].has_token(now) {
            Some(ThrottleScope::TablePartition)
        } else if shard.is_some_and(|sh| {
            !s.index_partitions
                .entry(sh)
                .or_insert_with(|| Bucket::new(ip_rate, burst, self.start))
                .has_token(now)
        }) {
            Some(ThrottleScope::IndexPartition)
        } else {
            None
        };
        if let Some(scope) = refused {
            *s.counts.refused.entry(scope).or_default() += 1;
            return Err(StoreError::throttled(
                scope,
                format!("{} throttled {key}", scope.as_str()),
            ));
        }
        s.table.take();
        s.table_partitions[tp].take();
        s.counts.table_partition_writes[tp] += 1;
        if let Some(sh) = shard {
            s.index_total.take();
            s.index_partitions
                .get_mut(&sh)
                .expect("checked above")
                .take();
            *s.counts.index_partition_writes.entry(sh).or_default() += 1;
        }
        if !due {
            return Ok(DeleteOutcome::NotDue);
        }
        s.unindex(key);
        s.items.remove(key);
        Ok(DeleteOutcome::Deleted)
    }
}

impl State {
    fn unindex(&mut self, key: &str) {
        if let Some(old) = self.items.get(key)
            && let Some(e) = old.indexed_expiry()
            && let Some(set) = old.shard.and_then(|sh| self.index.get_mut(&sh))
        {
            set.remove(&(e, key.to_string()));
        }
    }
}

impl ExpiryStore for PartitionedStore {
    type Key = String;
    /// The last (expiry, key) returned.
    type Cursor = (Expiry, String);
    type Partition = Shard;

    async fn due_page(&self, query: DueQueryOf<'_, Self>) -> Result<DuePageOf<Self>, StoreError> {
        tokio::time::sleep(self.round_trip()).await;
        let mut s = self.lock();
        s.counts.queries += 1;
        let Some(set) = s.index.get(&query.partition.0) else {
            return Ok(DuePage::empty());
        };
        let window = query.window;
        let lower = match query.cursor {
            Some(c) => Excluded(c),
            None => Included((Expiry::at_instant(window.oldest), String::new())),
        };
        let due = set
            .range((lower, Unbounded))
            .take_while(|(e, _)| e.at() <= window.until)
            .filter(|(e, _)| window.contains(e.at()))
            .map(|(e, key)| (*e, key));
        Ok(ordered_page(due, query.limit))
    }

    async fn delete_if_due(
        &self,
        key: &String,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        self.delete_request(|s, now| self.delete_one(s, key, window, now))
            .await
    }

    /// One request for all `keys`: admitted or refused item by item, in order, at the instant
    /// the request completes.
    async fn delete_many_if_due(
        &self,
        keys: &[String],
        window: DueWindow,
    ) -> Vec<Result<DeleteOutcome, StoreError>> {
        self.delete_request(|s, now| {
            keys.iter()
                .map(|k| match self.delete_one(s, k, window, now) {
                    Err(e) if !self.config.batch_scope && e.throttle.is_some() => {
                        Err(StoreError::new(ErrorClass::Throttled, e.message))
                    }
                    r => r,
                })
                .collect()
        })
        .await
    }

    fn max_batch(&self) -> usize {
        self.config.max_batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemTtl;
    use precise_ttl_core::Timestamp;

    fn num(ttl_ms: i64, shard: u16) -> MemItem {
        MemItem {
            ttl: MemTtl::Number(Timestamp::from_millis(ttl_ms).to_epoch_seconds_text()),
            shard: Some(shard),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_partition_refuses_past_its_burst_and_refills_at_its_rate() {
        let store = PartitionedStore::new(PartitionedConfig {
            table_partitions: 1,
            latency: Duration::ZERO,
            batch_scope: true,
            ..PartitionedConfig::default()
        });
        for i in 0..300 {
            store.put(format!("k{i}"), num(1000, (i % 3) as u16));
        }
        let window = DueWindow::between(Timestamp::from_millis(0), Timestamp::from_millis(2000));
        let keys: Vec<String> = (0..300).map(|i| format!("k{i}")).collect();
        let mut deleted = 0;
        for chunk in keys.chunks(25) {
            let out = store.delete_many_if_due(chunk, window).await;
            deleted += out.iter().filter(|o| o.is_ok()).count();
            for o in out.iter().filter_map(|o| o.as_ref().err()) {
                assert_eq!(o.throttle, Some(ThrottleScope::TablePartition));
            }
        }
        assert_eq!(deleted, 100, "one partition's burst: 1,000/s x 0.1 s");
        assert_eq!(store.len(), 200, "refused deletes write nothing");
        tokio::time::advance(Duration::from_millis(50)).await;
        let out = store.delete_many_if_due(&keys[..25], window).await;
        assert!(
            out.iter().all(|o| matches!(o, Ok(DeleteOutcome::NotDue))),
            "gone already: a table unit each, refilled meanwhile"
        );
        let c = store.counts();
        assert_eq!(c.table_partition_writes, vec![125]);
        assert_eq!(c.refused(ThrottleScope::TablePartition), 200);
    }

    #[tokio::test(start_paused = true)]
    async fn an_index_partition_refuses_while_the_table_has_room() {
        let store = PartitionedStore::new(PartitionedConfig {
            latency: Duration::ZERO,
            index_partition_wcu: 100.0,
            batch_scope: true,
            ..PartitionedConfig::default()
        });
        for i in 0..50 {
            store.put(format!("k{i}"), num(1000, 7));
        }
        store.put("extended", num(9_000_000, 7));
        let window = DueWindow::between(Timestamp::from_millis(0), Timestamp::from_millis(2000));
        let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).collect();
        let out = store.delete_many_if_due(&keys[..25], window).await;
        let refused: Vec<_> = out.iter().filter_map(|o| o.as_ref().err()).collect();
        assert_eq!(out.len() - refused.len(), 10, "100/s x 0.1 s");
        assert!(
            refused
                .iter()
                .all(|e| e.throttle == Some(ThrottleScope::IndexPartition))
        );
        // Not due: no index entry goes, so the index partition's limit does not apply.
        let out = store
            .delete_many_if_due(&["extended".to_string()], window)
            .await;
        assert_eq!(out[0].as_ref().ok(), Some(&DeleteOutcome::NotDue));
        assert_eq!(store.counts().index_partition_writes[&7], 10);
    }

    #[test]
    fn the_hash_is_fixed_and_spreads_keys() {
        let store = PartitionedStore::new(PartitionedConfig::default());
        let mut per = [0u32; 10];
        for i in 0..10_000 {
            per[store.table_partition(&format!("k{i}")) as usize] += 1;
        }
        assert!(per.iter().all(|&n| (900..1100).contains(&n)), "{per:?}");
        assert_eq!(store.table_partition("k0"), store.table_partition("k0"));
    }
}
