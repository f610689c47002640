//! What `doctor` calls a problem: the TTL and shard values that keep an item from being deleted
//! on time, judged by the same rules the sweeper uses.

use crate::expiry::{TtlValue, Verdict};
use crate::shard::ShardCount;
use crate::time::Timestamp;

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
}
