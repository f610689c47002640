//! The expiry queue seen from outside the daemon (`bench --index-layout stream-queue`): how long
//! after an item's write its queue entry exists (the stream-to-entry delay, which the queue
//! layout's lag adds to the shard index's), whether the indexer is tailing the stream before the
//! load starts, and whether any entry is missing at the end.
//!
//! Decisions:
//! - **From outside, by reading the queue.** A sampled item is written with its own PutItem; once
//!   the write is acknowledged, GetItem asks for the entry the product's own rules expect
//!   ([`precise_ttl_stream::queue::entry_key`], [`precise_ttl_core::queue::decide`]) until it
//!   exists. The delay is acknowledgement to the answer that showed the entry: an upper bound,
//!   by at most one poll interval and one GetItem. DynamoDB Local rounds a stream record's
//!   creation time to the minute, so the stream cannot say when the change happened.
//! - **Few samples, spaced through the load.** Every [`SAMPLE_EVERY`]th item of the main load
//!   (more apart in big loads, at most [`MOST_SAMPLES`]), written when the bulk load has reached
//!   its place, so samples see the indexer under the load's own pressure. Only items whose TTL
//!   writes an entry are sampled.
//! - **Polls that grow with the wait.** Every [`POLL`] at first, then a tenth of the time waited
//!   (at most [`POLL_MAX`]): a tenth's resolution, and an indexer far behind does not meet a
//!   storm of GetItems on a store that serves about a thousand calls a second.
//! - **An entry may go before it is seen.** Once its item is due, the daemon deletes the item
//!   and then the entry; a sample whose item is gone before its entry was seen counts apart
//!   (`deleted_before_seen`), neither delayed nor missing. One not seen within [`GIVE_UP`] is
//!   missing.
//! - **At the end, every item that can come due has its entry.** Each item left in the table
//!   whose TTL writes an entry by the product's rule (the surviving future TTLs, the extended
//!   ones at their new TTL, anything left behind) is looked up: an entry missing there is an
//!   expiration the queue layout would never carry out, so the run fails.

use crate::error::BenchError;
use crate::items::Item;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::queue::{EntryKey, Indexing, decide};
use precise_ttl_core::{Expiry, ShardCount, Timestamp};
use precise_ttl_dynamodb::item::ttl_value;
use precise_ttl_dynamodb::{Dynamo, ItemKey};
use precise_ttl_engine::{Clock, SystemClock};
use precise_ttl_stream::queue::{DUE, SHARD, entry_key};
use serde::Serialize;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One sample per this many items of the main load.
pub const SAMPLE_EVERY: usize = 50;
/// At most this many samples, however big the load.
pub const MOST_SAMPLES: usize = 500;
/// The first pause between two reads of a sample's entry.
pub const POLL: Duration = Duration::from_millis(50);
/// The longest pause between two reads.
pub const POLL_MAX: Duration = Duration::from_secs(1);
/// A sample whose entry is not there this long after its write is missing.
pub const GIVE_UP: Duration = Duration::from_secs(30);
/// GetItems in flight in the end's check.
const CHECK_IN_FLIGHT: usize = 16;
/// Keys of missing entries the report names.
const EXAMPLES: usize = 10;

/// The bench table's queue and how an item's entry is found in it.
#[derive(Debug, Clone)]
pub struct QueueProbe {
    pub dynamo: Dynamo,
    pub table: String,
    pub queue_table: String,
    pub key_attribute: String,
    pub ttl_attribute: String,
    pub shards: ShardCount,
}

/// How one sample ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampled {
    /// The entry was seen this long after the item's write was acknowledged.
    Seen(Duration),
    /// The item was deleted (it was due) before its entry was seen.
    DeletedFirst,
    /// Not seen within [`GIVE_UP`].
    Missing,
}

/// The stream-to-entry delay over the samples, in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntryDelay {
    /// Samples whose entry was seen.
    pub samples: u64,
    pub p50_ms: Option<u64>,
    pub p99_ms: Option<u64>,
    pub max_ms: Option<u64>,
    /// Samples whose entry was not seen within the give-up time.
    pub missing: u64,
    /// Samples whose item the daemon deleted before their entry was seen.
    pub deleted_before_seen: u64,
    pub poll_ms: u64,
    pub give_up_ms: u64,
}

impl EntryDelay {
    pub fn of(results: &[Sampled]) -> EntryDelay {
        let mut ms: Vec<u64> = results
            .iter()
            .filter_map(|r| match r {
                Sampled::Seen(d) => Some(d.as_millis() as u64),
                _ => None,
            })
            .collect();
        ms.sort_unstable();
        let at =
            |q: f64| (!ms.is_empty()).then(|| ms[((ms.len() - 1) as f64 * q).round() as usize]);
        let count = |what: Sampled| results.iter().filter(|r| **r == what).count() as u64;
        EntryDelay {
            samples: ms.len() as u64,
            p50_ms: at(0.5),
            p99_ms: at(0.99),
            max_ms: ms.last().copied(),
            missing: count(Sampled::Missing),
            deleted_before_seen: count(Sampled::DeletedFirst),
            poll_ms: POLL.as_millis() as u64,
            give_up_ms: GIVE_UP.as_millis() as u64,
        }
    }
}

/// The end's check of the queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntryCheck {
    /// Items left in the table whose TTL writes an entry.
    pub checked: u64,
    /// Of those, items without the entry of their current TTL (must be 0).
    pub missing: u64,
    /// A few of their keys.
    pub missing_keys: Vec<String>,
}

/// What the stream-queue layout adds to the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueReport {
    pub queue_table: String,
    /// From the daemon's start until the indexer's first entry was seen.
    pub indexer_ready_ms: u64,
    pub entry_delay: EntryDelay,
    /// Items left at the end that can come due, checked for their entry.
    pub entries_checked: u64,
    /// Of those, without their entry: expirations the queue would never carry out (must be 0).
    pub entries_missing: u64,
    pub entries_missing_keys: Vec<String>,
}

impl QueueReport {
    pub fn to_markdown(&self) -> String {
        let ms = |v: Option<u64>| v.map_or("—".to_string(), |v| v.to_string());
        let d = &self.entry_delay;
        let mut md = format!(
            "\n#### Expiry queue (`{}`), fed from the table's stream by the daemon's indexer\n\n| measure | value |\n|---|---|\n",
            self.queue_table
        );
        md.push_str(&format!(
            "| indexer ready (first entry seen after the daemon's start) | {} ms |\n",
            self.indexer_ready_ms
        ));
        md.push_str(&format!(
            "| stream-to-entry delay p50 / p99 / max (write acknowledged → entry read, polled every {}+ ms) | {} / {} / {} ms over {} samples |\n",
            d.poll_ms,
            ms(d.p50_ms),
            ms(d.p99_ms),
            ms(d.max_ms),
            d.samples
        ));
        md.push_str(&format!(
            "| samples whose entry was not seen within {} s | {} |\n",
            d.give_up_ms / 1000,
            d.missing
        ));
        if d.deleted_before_seen > 0 {
            md.push_str(&format!(
                "| samples deleted (due) before their entry was seen | {} |\n",
                d.deleted_before_seen
            ));
        }
        md.push_str(&format!(
            "| entries missing at the end (items left that can come due) | **{}** of {} |\n",
            self.entries_missing, self.entries_checked
        ));
        if !self.entries_missing_keys.is_empty() {
            md.push_str(&format!(
                "\nItems without their entry (first {}): {}\n",
                self.entries_missing_keys.len(),
                self.entries_missing_keys
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        md
    }
}

/// Every how many items of a load of `len` one is sampled.
pub fn sample_stride(len: usize) -> usize {
    SAMPLE_EVERY.max(len.div_ceil(MOST_SAMPLES))
}

/// The pause before the next read, `waited` after the write.
pub fn next_poll(waited: Duration) -> Duration {
    (waited / 10).clamp(POLL, POLL_MAX)
}

impl QueueProbe {
    fn key_of(&self, key: &str) -> ItemKey {
        ItemKey::new(vec![(
            self.key_attribute.clone(),
            AttributeValue::S(key.into()),
        )])
    }

    /// The entry the indexer writes for `item` as written at `now`, if its TTL writes one, and
    /// the TTL's expiry.
    pub fn expected_entry(&self, item: &Item, now: Timestamp) -> Option<(EntryKey, Expiry)> {
        let Some(AttributeValue::S(key)) = item.get(&self.key_attribute) else {
            return None;
        };
        match decide(None, &ttl_value(item.get(&self.ttl_attribute)), now) {
            Indexing::Put(expiry) => {
                Some((entry_key(&self.key_of(key), expiry, self.shards), expiry))
            }
            Indexing::Skip(_) => None,
        }
    }

    /// Whether the entry is in the queue table.
    pub async fn entry_exists(&self, entry: &EntryKey) -> Result<bool, BenchError> {
        let out = self
            .dynamo
            .query
            .get_item()
            .table_name(&self.queue_table)
            .key(SHARD, AttributeValue::N(entry.shard.0.to_string()))
            .key(DUE, AttributeValue::S(entry.sort.clone()))
            .projection_expression("#s")
            .expression_attribute_names("#s", SHARD)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| BenchError::call("reading a queue entry", DisplayErrorContext(e)))?;
        Ok(out.item.is_some())
    }

    /// Writes `item` to the application table; `what` names the write in an error.
    async fn put(&self, item: Item, what: &'static str) -> Result<(), BenchError> {
        self.dynamo
            .write
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(|e| BenchError::call(what, DisplayErrorContext(e)))?;
        Ok(())
    }

    async fn item_exists(&self, key: &str) -> Result<bool, BenchError> {
        let out = self
            .dynamo
            .query
            .get_item()
            .table_name(&self.table)
            .set_key(Some(self.key_of(key).to_map()))
            .projection_expression("#k")
            .expression_attribute_names("#k", &self.key_attribute)
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| BenchError::call("reading a sampled item", DisplayErrorContext(e)))?;
        Ok(out.item.is_some())
    }

    /// Writes `item` (one of the load's), then reads its entry until it is there.
    pub async fn sample(&self, item: Item) -> Result<Sampled, BenchError> {
        let Some((entry, expiry)) = self.expected_entry(&item, SystemClock.now()) else {
            return Err(BenchError::call(
                "sampling the queue",
                "a sampled item writes no entry",
            ));
        };
        let key = match item.get(&self.key_attribute) {
            Some(AttributeValue::S(k)) => k.clone(),
            _ => String::new(),
        };
        self.put(item, "writing a sampled item").await?;
        let written = Instant::now();
        loop {
            if self.entry_exists(&entry).await? {
                return Ok(Sampled::Seen(written.elapsed()));
            }
            let waited = written.elapsed();
            if waited >= GIVE_UP {
                return Ok(Sampled::Missing);
            }
            if SystemClock.now() >= expiry.at() && !self.item_exists(&key).await? {
                return Ok(Sampled::DeletedFirst);
            }
            tokio::time::sleep(next_poll(waited)).await;
        }
    }

    /// Writes each sample once the bulk load reports as many items written through `loaded` as
    /// came before it in the load (all that are left once the channel closes), and measures
    /// each.
    pub async fn sample_through(
        self,
        samples: Vec<(u64, Item)>,
        mut loaded: watch::Receiver<u64>,
    ) -> Result<Vec<Sampled>, BenchError> {
        let mut tasks = tokio::task::JoinSet::new();
        for (place, item) in samples {
            // A closed channel: the load is over, the rest go at once.
            let _ = loaded.wait_for(|n| *n >= place).await;
            let probe = self.clone();
            tasks.spawn(async move { probe.sample(item).await });
        }
        let mut results = Vec::new();
        while let Some(done) = tasks.join_next().await {
            results.push(done??);
        }
        Ok(results)
    }

    /// Every item of the table (consistent reads), its key and TTL only.
    pub async fn scan_left(&self) -> Result<Vec<Item>, BenchError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .dynamo
                .query
                .scan()
                .table_name(&self.table)
                .projection_expression("#k, #t")
                .expression_attribute_names("#k", &self.key_attribute)
                .expression_attribute_names("#t", &self.ttl_attribute)
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| BenchError::call("scanning what is left", DisplayErrorContext(e)))?;
            start = out.last_evaluated_key;
            items.extend(out.items.unwrap_or_default());
            if start.is_none() {
                return Ok(items);
            }
        }
    }

    /// Writes a probe item with a TTL a day ahead, waits until its entry is there (the indexer
    /// is tailing the stream), then deletes it. `alive` is asked between reads, so a daemon that
    /// exited fails the wait at once.
    pub async fn wait_until_indexing(
        &self,
        mut alive: impl FnMut() -> Result<(), BenchError>,
        give_up: Duration,
    ) -> Result<(), BenchError> {
        let key = "probe-indexer";
        let ttl = SystemClock
            .now()
            .saturating_add(Duration::from_secs(86_400));
        let item: Item = [
            (self.key_attribute.clone(), AttributeValue::S(key.into())),
            (self.ttl_attribute.clone(), crate::items::epoch_seconds(ttl)),
        ]
        .into();
        let (entry, _) = self
            .expected_entry(&item, SystemClock.now())
            .expect("a TTL a day ahead writes an entry");
        let started = Instant::now();
        self.put(item, "writing the indexer's probe").await?;
        while !self.entry_exists(&entry).await? {
            alive()?;
            if started.elapsed() > give_up {
                return Err(BenchError::IndexerNotReady {
                    seconds: give_up.as_secs(),
                });
            }
            tokio::time::sleep(POLL).await;
        }
        // Its entry stays: a day ahead, never read in the run.
        self.dynamo
            .write
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(self.key_of(key).to_map()))
            .send()
            .await
            .map_err(|e| {
                BenchError::call("deleting the indexer's probe", DisplayErrorContext(e))
            })?;
        Ok(())
    }

    /// Looks up the entry of every item in `left` (items as scanned: key and TTL) whose TTL
    /// writes one, at `now`.
    pub async fn check_entries(
        &self,
        left: Vec<Item>,
        now: Timestamp,
    ) -> Result<EntryCheck, BenchError> {
        let expected: Vec<(String, EntryKey)> = left
            .iter()
            .filter_map(|item| {
                let (entry, _) = self.expected_entry(item, now)?;
                match item.get(&self.key_attribute) {
                    Some(AttributeValue::S(k)) => Some((k.clone(), entry)),
                    _ => None,
                }
            })
            .collect();
        let checked = expected.len() as u64;
        let mut pending = expected.into_iter();
        let mut tasks = tokio::task::JoinSet::new();
        let mut missing_keys = Vec::new();
        loop {
            while tasks.len() < CHECK_IN_FLIGHT {
                let Some((key, entry)) = pending.next() else {
                    break;
                };
                let probe = self.clone();
                tasks.spawn(async move {
                    Ok::<_, BenchError>((key, probe.entry_exists(&entry).await?))
                });
            }
            match tasks.join_next().await {
                Some(done) => {
                    let (key, exists) = done??;
                    if !exists {
                        missing_keys.push(key);
                    }
                }
                None => break,
            }
        }
        missing_keys.sort();
        let missing = missing_keys.len() as u64;
        missing_keys.truncate(EXAMPLES);
        Ok(EntryCheck {
            checked,
            missing,
            missing_keys,
        })
    }
}

/// Splits every `stride`th item whose TTL writes an entry off `writes`: (the rest, the samples,
/// each with the number of the rest's items before it).
pub fn take_samples(
    probe: &QueueProbe,
    writes: Vec<Item>,
    stride: usize,
    now: Timestamp,
) -> (Vec<Item>, Vec<(u64, Item)>) {
    let (mut rest, mut samples) = (Vec::with_capacity(writes.len()), Vec::new());
    for (i, item) in writes.into_iter().enumerate() {
        if i % stride == stride - 1 && probe.expected_entry(&item, now).is_some() {
            samples.push((rest.len() as u64, item));
        } else {
            rest.push(item);
        }
    }
    (rest, samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::items::{ItemWriter, epoch_seconds};
    use precise_ttl_core::TtlLayout;

    const NOW: Timestamp = Timestamp::from_secs(1_800_000_000);

    fn probe() -> QueueProbe {
        QueueProbe {
            dynamo: Dynamo::local("http://127.0.0.1:1"),
            table: "t".into(),
            queue_table: "t-queue".into(),
            key_attribute: "pk".into(),
            ttl_attribute: "ttl".into(),
            shards: ShardCount::new(8).unwrap(),
        }
    }

    #[test]
    fn the_delay_summary_counts_what_was_seen_and_apart_what_was_not() {
        let ms = |v| Sampled::Seen(Duration::from_millis(v));
        let mut results: Vec<Sampled> = (1..=100).map(ms).collect();
        results.extend([Sampled::Missing, Sampled::DeletedFirst, Sampled::Missing]);
        let d = EntryDelay::of(&results);
        assert_eq!(d.samples, 100);
        assert_eq!(
            (d.p50_ms, d.p99_ms, d.max_ms),
            (Some(51), Some(99), Some(100))
        );
        assert_eq!((d.missing, d.deleted_before_seen), (2, 1));
        let none = EntryDelay::of(&[Sampled::Missing]);
        assert_eq!((none.samples, none.p99_ms, none.missing), (0, None, 1));
    }

    #[test]
    fn polls_start_at_the_poll_interval_and_grow_with_the_wait() {
        assert_eq!(next_poll(Duration::ZERO), POLL);
        assert_eq!(
            next_poll(Duration::from_secs(2)),
            Duration::from_millis(200)
        );
        assert_eq!(next_poll(Duration::from_secs(29)), POLL_MAX);
        assert_eq!(sample_stride(2_000), SAMPLE_EVERY);
        assert_eq!(sample_stride(1_000_000), 2_000);
    }

    #[test]
    fn only_items_whose_ttl_writes_an_entry_are_sampled_or_checked() {
        let p = probe();
        let w = ItemWriter::new("pk", &TtlLayout::default()).without_shards();
        let soon = epoch_seconds(NOW.saturating_add(Duration::from_secs(60)));
        let (entry, expiry) = p
            .expected_entry(&w.item("a", Some(soon), None), NOW)
            .unwrap();
        assert_eq!(expiry.at(), NOW.saturating_add(Duration::from_secs(60)));
        assert_eq!(
            entry,
            entry_key(
                &ItemKey::new(vec![("pk".into(), AttributeValue::S("a".into()))]),
                expiry,
                p.shards
            )
        );
        let string = AttributeValue::S("1800000060".into());
        let too_old = AttributeValue::N("-100".into());
        for ttl in [None, Some(string), Some(too_old)] {
            assert!(p.expected_entry(&w.item("b", ttl, None), NOW).is_none());
        }
        // Every 50th item with an entry is sampled, placed after the items written before it.
        let writes: Vec<Item> = (0..200)
            .map(|i| {
                let ttl = (i != 99).then(|| epoch_seconds(NOW));
                w.item(&format!("k{i}"), ttl, None)
            })
            .collect();
        let (rest, samples) = take_samples(&p, writes, 50, NOW);
        let places: Vec<u64> = samples.iter().map(|(at, _)| *at).collect();
        assert_eq!(places, [49, 148, 197]);
        assert_eq!(rest.len() + samples.len(), 200);
        assert_eq!(samples[1].1["pk"], AttributeValue::S("k149".into()));
    }
}
