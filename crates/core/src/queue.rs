//! The expiry queue's rules (issue 29's layout, for tables whose writers set only the TTL):
//! precise-ttl keeps its own table of entries, one per (item, expiry), fed from the application
//! table's stream, and reads it as it reads the shard index. This module is what that layout
//! decides without I/O: which stream changes write an entry, and the entry's keys.
//!
//! - **Keys.** An entry's partition key is a shard (the MD5 of the item's whole primary key,
//!   modulo the shard count: items of one partition key with many sort keys spread over the
//!   shards, unlike the writer's rule in [`crate::shard`], which sees the partition key alone);
//!   its sort key is the expiry in milliseconds since the epoch, zero-padded so that text order
//!   is time order, then `#` and the key's digest in hex. One Query per shard between two sort
//!   keys returns the due entries oldest first, and the same change seen twice (a stream replayed
//!   after a restart) writes the same entry again: a put is idempotent.
//! - **What writes an entry.** An insert or a change whose new image has a TTL that can come due
//!   (a Number, not more than [`NATIVE_TTL_MAX_AGE`] before now) and whose expiry differs from
//!   the old image's. A change that leaves the TTL as it was writes nothing: a session store that
//!   touches its items on every request pays nothing per request. A removed or changed TTL
//!   leaves the old entry where it is: reading it, the sweeper's conditional delete finds the
//!   item no longer due and removes the entry without touching the item.

use crate::expiry::{Expiry, TtlValue};
use crate::plan::DueWindow;
use crate::shard::{Shard, ShardCount};
use crate::time::{NATIVE_TTL_MAX_AGE, Timestamp};
use md5::{Digest, Md5};
use std::fmt::Write;

/// Digits of the expiry in a sort key: milliseconds up to year 2286 fit in 13, and 16 leave room
/// while keeping every key the same length (text order is then time order).
const EXPIRY_DIGITS: usize = 16;

/// The digest of an item's primary key: the MD5 of the partition key's bytes and, if the table
/// has one, the sort key's, each preceded by its length (so no two keys share a digest by where
/// one part ends). Key bytes as [`ShardCount::shard_for_key`] takes them: the UTF-8 of a String,
/// a Number's decimal text as stored, a Binary's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyDigest([u8; 16]);

impl KeyDigest {
    pub fn of(partition_key: &[u8], sort_key: Option<&[u8]>) -> KeyDigest {
        let mut md5 = Md5::new();
        for part in std::iter::once(partition_key).chain(sort_key) {
            md5.update((part.len() as u64).to_be_bytes());
            md5.update(part);
        }
        KeyDigest(md5.finalize().into())
    }

    /// The queue shard of the item: the first four bytes, big-endian, modulo the shard count.
    pub fn shard(&self, shards: ShardCount) -> Shard {
        let n = u32::from_be_bytes([self.0[0], self.0[1], self.0[2], self.0[3]]);
        Shard((n % u32::from(shards.get())) as u16)
    }

    fn hex(&self) -> String {
        self.0.iter().fold(String::with_capacity(32), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }
}

/// An entry's keys in the queue table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryKey {
    pub shard: Shard,
    pub sort: String,
}

impl EntryKey {
    /// The entry of the item with key digest `key` expiring at `expiry` (never before the epoch:
    /// see [`decide`]).
    pub fn new(key: KeyDigest, expiry: Expiry, shards: ShardCount) -> EntryKey {
        EntryKey {
            shard: key.shard(shards),
            sort: format!(
                "{:0width$}#{}",
                expiry.at().as_millis().max(0),
                key.hex(),
                width = EXPIRY_DIGITS
            ),
        }
    }

    /// The expiry a sort key names; `None` when the text is not one of ours.
    pub fn expiry_of(sort: &str) -> Option<Expiry> {
        let (millis, digest) = sort.split_once('#')?;
        if millis.len() != EXPIRY_DIGITS || digest.len() != 32 {
            return None;
        }
        let millis: i64 = millis.parse().ok()?;
        Some(Expiry::at_instant(Timestamp::from_millis(millis)))
    }
}

/// How many leases a fleet's indexers split a stream by: each stream shard belongs to one of
/// them ([`stream_bucket`]). More than a table has stream shards at any scale this project
/// targets is harmless (an empty bucket costs a lease's heartbeat); fewer would cap the workers
/// that index at once.
pub const INDEXER_BUCKETS: usize = 16;

/// The lease bucket of the stream shard `shard_id`, `0..buckets`: FNV-1a of its id, so every
/// worker of every version agrees.
pub fn stream_bucket(shard_id: &str, buckets: usize) -> usize {
    let hash = shard_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % buckets.max(1) as u64) as usize
}

/// The sort keys that bound `window`'s entries, both inclusive: `BETWEEN low AND high`.
pub fn sort_bounds(window: DueWindow) -> (String, String) {
    let ms = |t: Timestamp| t.as_millis().max(0);
    (
        format!("{:0width$}#", ms(window.oldest), width = EXPIRY_DIGITS),
        // `~` sorts after every hex digit, so the bound takes each entry of the last millisecond.
        format!("{:0width$}#~", ms(window.until), width = EXPIRY_DIGITS),
    )
}

/// What the indexer does for one stream record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexing {
    /// Write the entry for this expiry.
    Put(Expiry),
    /// Nothing to write; why, for counters.
    Skip(SkipReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// The new image has no TTL attribute, or one that is not a Number: never due.
    NoTtl,
    /// The TTL lies more than five years before now: never due, however long it waits.
    TooOld,
    /// The TTL is the one the old image had: its entry exists already.
    Unchanged,
}

/// What a change from `old` (absent for an insert) to `new` writes, at `now`. A REMOVE record
/// writes nothing and is not asked about.
pub fn decide(old: Option<&TtlValue<'_>>, new: &TtlValue<'_>, now: Timestamp) -> Indexing {
    let parse = |v: &TtlValue<'_>| match v {
        TtlValue::Number(text) => Expiry::parse_number(text).ok(),
        TtlValue::Missing | TtlValue::Other(_) => None,
    };
    let Some(expiry) = parse(new) else {
        return Indexing::Skip(SkipReason::NoTtl);
    };
    if expiry.at() < now.saturating_sub(NATIVE_TTL_MAX_AGE) {
        return Indexing::Skip(SkipReason::TooOld);
    }
    if old.and_then(parse) == Some(expiry) {
        return Indexing::Skip(SkipReason::Unchanged);
    }
    Indexing::Put(expiry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NOW: Timestamp = Timestamp::from_secs(1_800_000_000);

    #[test]
    fn stream_shards_fall_in_stable_buckets() {
        // FNV-1a's published value for "a": the bucket must not change between versions.
        assert_eq!(
            stream_bucket("a", usize::MAX),
            0xaf63_dc4c_8601_ec8c % usize::MAX
        );
        let ids: Vec<String> = (0..1000)
            .map(|i| format!("shardId-00000001700000000000-{i:08x}"))
            .collect();
        let mut counts = [0u32; INDEXER_BUCKETS];
        for id in &ids {
            counts[stream_bucket(id, INDEXER_BUCKETS)] += 1;
        }
        assert!(counts.iter().all(|&c| c > 30), "{counts:?}");
        assert_eq!(stream_bucket("x", 0), 0);
    }

    fn shards(n: u64) -> ShardCount {
        ShardCount::new(n).unwrap()
    }

    #[test]
    fn an_insert_or_a_new_ttl_writes_an_entry_and_a_touch_does_not() {
        let n = |s| TtlValue::Number(s);
        let at = |s: &str| Indexing::Put(Expiry::parse_number(s).unwrap());
        assert_eq!(decide(None, &n("1800000060"), NOW), at("1800000060"));
        assert_eq!(
            decide(Some(&n("1800000060")), &n("1800000120"), NOW),
            at("1800000120")
        );
        // The same instant written another way is the same expiry.
        assert_eq!(
            decide(Some(&n("1800000060")), &n("1.80000006e9"), NOW),
            Indexing::Skip(SkipReason::Unchanged)
        );
        assert_eq!(
            decide(Some(&TtlValue::Other("S")), &n("1800000060"), NOW),
            at("1800000060")
        );
        // Already due when indexed: written, and deleted as soon as it is read.
        assert_eq!(decide(None, &n("1799999000"), NOW), at("1799999000"));
    }

    #[test]
    fn values_that_never_come_due_write_nothing() {
        let skip = |v: TtlValue| decide(None, &v, NOW);
        for (value, reason) in [
            (TtlValue::Missing, SkipReason::NoTtl),
            (TtlValue::Other("S"), SkipReason::NoTtl),
            (TtlValue::Number("not a number"), SkipReason::NoTtl),
            (TtlValue::Number("1600000000"), SkipReason::TooOld),
            (TtlValue::Number("-5"), SkipReason::TooOld),
        ] {
            assert_eq!(skip(value.clone()), Indexing::Skip(reason), "{value:?}");
        }
        // Milliseconds by mistake: far in the future, written (and never due, as natively).
        assert!(matches!(
            skip(TtlValue::Number("1800000000000")),
            Indexing::Put(_)
        ));
    }

    #[test]
    fn the_key_digest_tells_where_the_partition_key_ends() {
        assert_ne!(
            KeyDigest::of(b"a\0", Some(b"b")),
            KeyDigest::of(b"a", Some(b"\0b"))
        );
        assert_ne!(KeyDigest::of(b"ab", None), KeyDigest::of(b"a", Some(b"b")));
        assert_eq!(
            KeyDigest::of(b"a", Some(b"b")),
            KeyDigest::of(b"a", Some(b"b"))
        );
    }

    #[test]
    fn items_of_one_partition_key_spread_over_the_shards() {
        let count = shards(16);
        let used: std::collections::BTreeSet<Shard> = (0..200)
            .map(|i| {
                KeyDigest::of(b"tenant#1", Some(format!("session#{i}").as_bytes())).shard(count)
            })
            .collect();
        assert_eq!(used.len(), 16);
    }

    proptest! {
        #[test]
        fn sort_keys_order_by_expiry_and_name_it(
            a in 0i64..10_000_000_000_000,
            b in 0i64..10_000_000_000_000,
            ka in any::<Vec<u8>>(),
            kb in any::<Vec<u8>>(),
        ) {
            let entry = |ms: i64, key: &[u8]| EntryKey::new(
                KeyDigest::of(key, None),
                Expiry::at_instant(Timestamp::from_millis(ms)),
                shards(8),
            );
            let (ea, eb) = (entry(a, &ka), entry(b, &kb));
            if a < b {
                prop_assert!(ea.sort < eb.sort);
            }
            prop_assert_eq!(EntryKey::expiry_of(&ea.sort).map(|e| e.at().as_millis()), Some(a));
            // A window holds exactly the entries whose expiry it contains.
            let window = DueWindow::between(Timestamp::from_millis(a.min(b)), Timestamp::from_millis(a.max(b)));
            let (low, high) = sort_bounds(window);
            for e in [&ea, &eb] {
                prop_assert!(low <= e.sort && e.sort <= high);
            }
            if a > 0 {
                let before = DueWindow::between(Timestamp::from_millis(0), Timestamp::from_millis(a - 1));
                let (low, high) = sort_bounds(before);
                prop_assert!(!(low <= ea.sort && ea.sort <= high));
            }
        }
    }
}
