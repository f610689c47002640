//! Where rows and index entries sit: [`RowKey`] (a table's row: the partition key's hash, then
//! the keys), [`SortKey`] and [`IndexEntry`] (an index partition's entries, in sort order), the
//! [`Edge`] bounds that ranges over composite keys need, and the hash that places a
//! partition-key value among a table's partitions.

use crate::value::KeyValue;

/// A value, or a bound below or above every value (for ranges over composite keys).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Edge<T> {
    Min,
    At(T),
    Max,
}

impl<T> Edge<T> {
    pub fn value(&self) -> Option<&T> {
        match self {
            Edge::At(v) => Some(v),
            _ => None,
        }
    }
}

/// Where a row lives: the partition key's hash first, so rows (and scans) run in hash order and
/// a partition is a contiguous hash range.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowKey {
    pub hash: u64,
    pub pk: Edge<KeyValue>,
    pub sk: Edge<KeyValue>,
}

/// An index's sort-key value, with an inline order key so that comparing two entries rarely
/// follows a pointer: `prefix` orders as the value does (an order-preserving encoding of the
/// number's nearest f64, or the first 8 bytes of a string or binary), and the value itself
/// breaks ties. `settled` says equal prefixes already mean equal values (integers below 10^15).
#[derive(Debug, Clone)]
pub struct SortKey {
    rank: u8,
    prefix: u64,
    settled: bool,
    value: Option<KeyValue>,
}

impl SortKey {
    pub fn min() -> SortKey {
        SortKey {
            rank: 0,
            prefix: 0,
            settled: true,
            value: None,
        }
    }

    pub fn max() -> SortKey {
        SortKey {
            rank: 2,
            prefix: u64::MAX,
            settled: true,
            value: None,
        }
    }

    pub fn new(value: KeyValue) -> SortKey {
        let (prefix, settled) = match &value {
            KeyValue::N(n) => {
                let text = n.as_str();
                let f: f64 = text.parse().unwrap_or(0.0);
                let bits = f.to_bits();
                let prefix = if f.is_sign_negative() {
                    !bits
                } else {
                    bits | (1 << 63)
                };
                let digits = text.trim_start_matches('-');
                (prefix, !digits.contains('.') && digits.len() <= 15)
            }
            KeyValue::S(_) | KeyValue::B(_) => {
                let mut head = [0u8; 8];
                let bytes = value.bytes();
                let n = bytes.len().min(8);
                head[..n].copy_from_slice(&bytes[..n]);
                (u64::from_be_bytes(head), false)
            }
        };
        SortKey {
            rank: 1,
            prefix,
            settled,
            value: Some(value),
        }
    }

    pub fn value(&self) -> Option<&KeyValue> {
        self.value.as_ref()
    }
}

impl PartialEq for SortKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for SortKey {}

impl PartialOrd for SortKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SortKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank
            .cmp(&other.rank)
            .then(self.prefix.cmp(&other.prefix))
            .then_with(|| {
                if self.settled && other.settled {
                    std::cmp::Ordering::Equal
                } else {
                    self.value.cmp(&other.value)
                }
            })
    }
}

impl RowKey {
    pub fn min() -> RowKey {
        RowKey {
            hash: 0,
            pk: Edge::Min,
            sk: Edge::Min,
        }
    }

    pub fn max() -> RowKey {
        RowKey {
            hash: u64::MAX,
            pk: Edge::Max,
            sk: Edge::Max,
        }
    }
}

/// An index entry within one index partition: the index's sort key, then the table's key
/// (whose hash comes first, so ties between equal sort keys are settled inline too).
pub type IndexEntry = (SortKey, RowKey);

/// 64-bit FNV-1a over the type and bytes, then a finalizer so the high bits are well mixed.
pub fn hash_key(value: &KeyValue) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let tag = value.scalar_type() as u8;
    for b in std::iter::once(&tag).chain(value.bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Which of `partitions` even slices of the hash space `hash` falls in.
pub fn partition_among(hash: u64, partitions: usize) -> usize {
    ((u128::from(hash) * partitions as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_spread_similar_keys_over_partitions() {
        let mut counts = [0u32; 40];
        for i in 0..40_000 {
            let h = hash_key(&KeyValue::S(format!("item-{i:06}").into()));
            counts[((u128::from(h) * 40) >> 64) as usize] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 850 && *max < 1150, "{counts:?}");
    }
}
