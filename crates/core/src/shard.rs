//! Write sharding of the expiry index.
//!
//! Every item with a TTL carries a shard number in `0..shards`, the partition key of the index.
//! Spreading items over shards keeps one minute's expirations off a single hot partition and lets
//! the sweeper query shards in parallel. The sweeper is correct whatever shard a writer picks; the
//! rule below only matters for an even spread and for writers that want a stable choice.

use md5::{Digest, Md5};
use std::fmt;
use thiserror::Error;

/// The most shards we allow: each costs one index query per poll.
pub const MAX_SHARDS: u16 = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shard(pub u16);

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardCount(u16);

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("the number of shards must be between 1 and {MAX_SHARDS}, got {0}")]
pub struct ShardCountError(pub u64);

impl ShardCount {
    pub fn new(n: u64) -> Result<Self, ShardCountError> {
        if (1..=u64::from(MAX_SHARDS)).contains(&n) {
            Ok(ShardCount(n as u16))
        } else {
            Err(ShardCountError(n))
        }
    }

    pub fn get(self) -> u16 {
        self.0
    }

    pub fn all(self) -> impl Iterator<Item = Shard> + Clone {
        (0..self.0).map(Shard)
    }

    pub fn contains(self, shard: Shard) -> bool {
        shard.0 < self.0
    }

    /// The documented stable rule: the first four bytes of the MD5 of the item's partition key,
    /// read big-endian, modulo the shard count. The key bytes are the UTF-8 of a String key, the
    /// decimal text of a Number key as the writer sends it, or the raw bytes of a Binary key.
    ///
    /// Python: `int.from_bytes(hashlib.md5(pk.encode()).digest()[:4], "big") % 16`
    /// JavaScript: `crypto.createHash("md5").update(pk).digest().readUInt32BE(0) % 16`
    pub fn shard_for_key(self, partition_key: &[u8]) -> Shard {
        let digest = Md5::digest(partition_key);
        let n = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
        Shard((n % u32::from(self.0)) as u16)
    }

    /// A uniformly spread shard from a random draw (any `u32`), for writers that prefer random.
    pub fn shard_from_random(self, draw: u32) -> Shard {
        Shard(((u64::from(draw) * u64::from(self.0)) >> 32) as u16)
    }
}

impl fmt::Display for ShardCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_rule_matches_the_documented_python_and_javascript() {
        // Computed with the Python and JavaScript one-liners in the doc comment: both print 12.
        let s = ShardCount::new(16).unwrap();
        assert_eq!(s.shard_for_key(b"user#42"), Shard(12));
        assert!(ShardCount::new(0).is_err());
        assert!(ShardCount::new(1025).is_err());
        assert_eq!(ShardCount::new(1).unwrap().shard_for_key(b"x"), Shard(0));
    }

    #[test]
    fn spreads_evenly() {
        let s = ShardCount::new(16).unwrap();
        let mut counts = [0u32; 16];
        for i in 0..16_000 {
            counts[s.shard_for_key(format!("item-{i}").as_bytes()).0 as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(s.shard_from_random(0), Shard(0));
        assert_eq!(s.shard_from_random(u32::MAX), Shard(15));
    }
}
