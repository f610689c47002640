//! What `doctor` calls a problem: the TTL and shard values that keep an item from being deleted
//! on time, judged by the same rules the sweeper uses.

use crate::expiry::{TtlValue, Verdict};
use crate::shard::ShardCount;
use crate::time::Timestamp;
use std::collections::BTreeMap;

/// A TTL that will never be deleted by its owner's intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TtlProblem {
    /// Not a Number: native TTL and precise-ttl both ignore it, forever.
    NotANumber,
    /// A Number too large to be epoch seconds (at least 10^11 s, the year 5138): almost
    /// certainly milliseconds or microseconds, so it expires thousands of years late.
    LooksLikeMilliseconds,
    /// More than five years in the past (or negative): native TTL ignores it, and so do we.
    TooOld,
}

/// 10^11 seconds: no real expiry is that far out, and every millisecond timestamp since 1973 is
/// beyond it.
const MILLISECONDS_THRESHOLD_SECS: f64 = 1e11;

pub fn ttl_problem(value: &TtlValue<'_>, now: Timestamp) -> Option<TtlProblem> {
    if let TtlValue::Number(text) = value
        && text
            .parse::<f64>()
            .is_ok_and(|v| v >= MILLISECONDS_THRESHOLD_SECS)
    {
        return Some(TtlProblem::LooksLikeMilliseconds);
    }
    match Verdict::of(value, now) {
        Verdict::NotANumber => Some(TtlProblem::NotANumber),
        Verdict::TooOld(_) => Some(TtlProblem::TooOld),
        Verdict::Due(_) | Verdict::NotYetDue(_) | Verdict::Missing => None,
    }
}

/// How an item's shard attribute looks to the sweeper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardValue<'a> {
    Missing,
    Number(&'a str),
    Other(&'a str),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardProblem {
    /// A TTL but no shard: the index does not list the item (run `backfill`).
    Missing,
    /// An integer at or above the shard count (a stray, e.g. after lowering `--shards`).
    OutOfRange(u64),
    /// Negative, fractional, or not a Number: no sweep ever reads it.
    Invalid,
}

/// Problems only matter for items with a Number TTL: others are never deleted anyway.
pub fn shard_problem(shard: ShardValue<'_>, shards: ShardCount) -> Option<ShardProblem> {
    match shard {
        ShardValue::Missing => Some(ShardProblem::Missing),
        ShardValue::Other(_) => Some(ShardProblem::Invalid),
        ShardValue::Number(text) => match text.parse::<u64>() {
            Ok(n) if n < u64::from(shards.get()) => None,
            Ok(n) => Some(ShardProblem::OutOfRange(n)),
            Err(_) => Some(ShardProblem::Invalid),
        },
    }
}

/// What a scan of a table found, kind by kind, with a few example keys each: the pure part of
/// `doctor`, fed one item at a time.
#[derive(Debug, Default)]
pub struct Tally {
    pub scanned: u64,
    pub with_ttl: u64,
    /// Per finding kind: how many items, and up to `keep` of their keys.
    pub counts: BTreeMap<&'static str, (u64, Vec<String>)>,
    /// The types of TTL values that are not Numbers.
    pub ttl_types: BTreeMap<String, u64>,
    /// Shard values outside `0..shards`, with how many items hold each.
    pub strays: BTreeMap<u64, u64>,
}

/// One scanned item, as the tally needs it.
pub struct Inspected<'a> {
    pub key: &'a dyn std::fmt::Display,
    pub ttl: TtlValue<'a>,
    pub shard: ShardValue<'a>,
}

impl std::fmt::Debug for Inspected<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspected")
            .field("key", &self.key.to_string())
            .field("ttl", &self.ttl)
            .field("shard", &self.shard)
            .finish()
    }
}

impl Tally {
    fn add(&mut self, kind: &'static str, example: &dyn std::fmt::Display, keep: usize) {
        let entry = self.counts.entry(kind).or_default();
        entry.0 += 1;
        if entry.1.len() < keep {
            entry.1.push(example.to_string());
        }
    }

    /// Counts what is wrong with one item, keeping at most `keep` example keys per kind.
    pub fn inspect(
        &mut self,
        item: Inspected<'_>,
        shards: ShardCount,
        now: Timestamp,
        keep: usize,
    ) {
        if !matches!(item.ttl, TtlValue::Missing) {
            self.with_ttl += 1;
        }
        let key = item.key;
        match ttl_problem(&item.ttl, now) {
            Some(TtlProblem::NotANumber) => {
                if let TtlValue::Other(t) = item.ttl {
                    *self.ttl_types.entry(t.to_string()).or_default() += 1;
                }
                self.add("ttl_not_a_number", key, keep);
                return;
            }
            Some(TtlProblem::LooksLikeMilliseconds) => self.add("ttl_in_milliseconds", key, keep),
            Some(TtlProblem::TooOld) => self.add("ttl_more_than_5_years_old", key, keep),
            None => {}
        }
        if matches!(item.ttl, TtlValue::Missing) {
            return; // a shard without a TTL is harmless: the sparse index skips the item
        }
        match shard_problem(item.shard, shards) {
            Some(ShardProblem::Missing) => self.add("ttl_without_shard", key, keep),
            Some(ShardProblem::OutOfRange(n)) => {
                *self.strays.entry(n).or_default() += 1;
                self.add("shard_out_of_range", key, keep);
            }
            Some(ShardProblem::Invalid) => self.add("shard_invalid", key, keep),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_problems() {
        let now = Timestamp::from_secs(1_800_000_000);
        let p = |v: TtlValue| ttl_problem(&v, now);
        assert_eq!(p(TtlValue::Number("1800000000")), None);
        assert_eq!(p(TtlValue::Number("1900000000.5")), None);
        assert_eq!(p(TtlValue::Missing), None);
        assert_eq!(p(TtlValue::Other("S")), Some(TtlProblem::NotANumber));
        assert_eq!(
            p(TtlValue::Number("1800000000000")),
            Some(TtlProblem::LooksLikeMilliseconds)
        );
        assert_eq!(
            p(TtlValue::Number("1E+125")),
            Some(TtlProblem::LooksLikeMilliseconds)
        );
        assert_eq!(p(TtlValue::Number("-1")), Some(TtlProblem::TooOld));
        assert_eq!(p(TtlValue::Number("1000")), Some(TtlProblem::TooOld));
    }

    #[test]
    fn shard_problems() {
        let n = ShardCount::new(16).unwrap();
        assert_eq!(shard_problem(ShardValue::Number("15"), n), None);
        assert_eq!(
            shard_problem(ShardValue::Number("16"), n),
            Some(ShardProblem::OutOfRange(16))
        );
        assert_eq!(
            shard_problem(ShardValue::Number("1.5"), n),
            Some(ShardProblem::Invalid)
        );
        assert_eq!(
            shard_problem(ShardValue::Number("-1"), n),
            Some(ShardProblem::Invalid)
        );
        assert_eq!(
            shard_problem(ShardValue::Other("S"), n),
            Some(ShardProblem::Invalid)
        );
        assert_eq!(
            shard_problem(ShardValue::Missing, n),
            Some(ShardProblem::Missing)
        );
    }

    #[test]
    fn the_tally_counts_each_kind_with_bounded_examples() {
        let now = Timestamp::from_secs(1_800_000_000);
        let shards = ShardCount::new(16).unwrap();
        let mut t = Tally::default();
        let items = [
            ("a", TtlValue::Other("S"), ShardValue::Number("1")),
            ("b", TtlValue::Other("S"), ShardValue::Missing),
            (
                "c",
                TtlValue::Number("1800000000000"),
                ShardValue::Number("1"),
            ),
            ("d", TtlValue::Number("1799999000"), ShardValue::Missing),
            (
                "e",
                TtlValue::Number("1799999000"),
                ShardValue::Number("700"),
            ),
            ("f", TtlValue::Number("1799999000"), ShardValue::Number("2")),
            ("g", TtlValue::Missing, ShardValue::Number("900")),
        ];
        for (key, ttl, shard) in items {
            t.inspect(
                Inspected {
                    key: &key,
                    ttl,
                    shard,
                },
                shards,
                now,
                1,
            );
        }
        assert_eq!(t.with_ttl, 6);
        assert_eq!(t.counts["ttl_not_a_number"], (2, vec!["a".to_string()]));
        assert_eq!(t.counts["ttl_in_milliseconds"].0, 1);
        assert_eq!(t.counts["ttl_without_shard"], (1, vec!["d".to_string()]));
        assert_eq!(t.counts["shard_out_of_range"].0, 1);
        assert_eq!(t.strays.get(&700), Some(&1));
        assert_eq!(t.ttl_types.get("S"), Some(&2));
        assert_eq!(t.counts.len(), 4, "f is fine, g has no TTL: {:?}", t.counts);
    }
}
