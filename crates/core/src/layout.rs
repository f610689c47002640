//! How precise-ttl's data sits in a user's table: attribute names, shard count, index name, and
//! the attributes a writer adds to an item that has a TTL.

use crate::expiry::Expiry;
use crate::shard::{Shard, ShardCount};
use crate::time::Timestamp;
use thiserror::Error;

pub const DEFAULT_TTL_ATTRIBUTE: &str = "ttl";
pub const DEFAULT_SHARD_ATTRIBUTE: &str = "ttl_shard";
pub const DEFAULT_INDEX_NAME: &str = "precise-ttl";
pub const DEFAULT_SHARDS: u16 = 16;

/// The names and numbers every command and every writer must agree on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TtlLayout {
    pub ttl_attribute: String,
    pub shard_attribute: String,
    pub index_name: String,
    pub shards: ShardCount,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    #[error("the {what} must not be empty")]
    Empty { what: &'static str },
    #[error("the {what} {name:?} is longer than {max} bytes")]
    TooLong {
        what: &'static str,
        name: String,
        max: usize,
    },
    #[error(
        "the index name {0:?} may only contain letters, digits, '_', '-' and '.', 3 to 255 of them"
    )]
    BadIndexName(String),
    #[error("the TTL attribute and the shard attribute must differ (both are {0:?})")]
    SameAttribute(String),
}

impl TtlLayout {
    pub fn new(
        ttl_attribute: impl Into<String>,
        shard_attribute: impl Into<String>,
        index_name: impl Into<String>,
        shards: ShardCount,
    ) -> Result<Self, LayoutError> {
        let layout = TtlLayout {
            ttl_attribute: ttl_attribute.into(),
            shard_attribute: shard_attribute.into(),
            index_name: index_name.into(),
            shards,
        };
        for (what, name) in [
            ("TTL attribute", &layout.ttl_attribute),
            ("shard attribute", &layout.shard_attribute),
        ] {
            if name.is_empty() {
                return Err(LayoutError::Empty { what });
            }
            // DynamoDB's limit for attribute names that are index keys.
            if name.len() > 255 {
                return Err(LayoutError::TooLong {
                    what,
                    name: name.clone(),
                    max: 255,
                });
            }
        }
        if layout.ttl_attribute == layout.shard_attribute {
            return Err(LayoutError::SameAttribute(layout.ttl_attribute));
        }
        let n = &layout.index_name;
        if !(3..=255).contains(&n.len())
            || !n
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(LayoutError::BadIndexName(n.clone()));
        }
        Ok(layout)
    }

    /// The attributes a writer sets on an item whose partition key is `partition_key` (as bytes,
    /// see [`ShardCount::shard_for_key`]) and that expires at `expires_at`.
    pub fn writer_attributes(
        &self,
        partition_key: &[u8],
        expires_at: Timestamp,
    ) -> WriterAttributes {
        WriterAttributes {
            ttl_attribute: self.ttl_attribute.clone(),
            ttl: Expiry::at_instant(expires_at),
            shard_attribute: self.shard_attribute.clone(),
            shard: self.shards.shard_for_key(partition_key),
        }
    }
}

impl Default for TtlLayout {
    fn default() -> Self {
        TtlLayout {
            ttl_attribute: DEFAULT_TTL_ATTRIBUTE.into(),
            shard_attribute: DEFAULT_SHARD_ATTRIBUTE.into(),
            index_name: DEFAULT_INDEX_NAME.into(),
            shards: ShardCount::new(u64::from(DEFAULT_SHARDS)).expect("default is in range"),
        }
    }
}

/// The two Number attributes a writer adds: the TTL and the shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterAttributes {
    pub ttl_attribute: String,
    pub ttl: Expiry,
    pub shard_attribute: String,
    pub shard: Shard,
}

impl WriterAttributes {
    /// `(name, DynamoDB Number text)` pairs, ready for any SDK.
    pub fn as_numbers(&self) -> [(&str, String); 2] {
        [
            (&self.ttl_attribute, self.ttl.at().to_epoch_seconds_text()),
            (&self.shard_attribute, self.shard.0.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_names() {
        let s = ShardCount::new(4).unwrap();
        assert!(TtlLayout::new("ttl", "ttl_shard", "precise-ttl", s).is_ok());
        assert!(matches!(
            TtlLayout::new("", "x", "idx", s),
            Err(LayoutError::Empty { .. })
        ));
        assert!(matches!(
            TtlLayout::new("a", "a", "idx", s),
            Err(LayoutError::SameAttribute(_))
        ));
        assert!(matches!(
            TtlLayout::new("a", "b", "no spaces", s),
            Err(LayoutError::BadIndexName(_))
        ));
        assert!(matches!(
            TtlLayout::new("a", "b", "ab", s),
            Err(LayoutError::BadIndexName(_))
        ));
    }

    #[test]
    fn writer_attributes_are_numbers() {
        let l = TtlLayout::default();
        let w = l.writer_attributes(b"user#42", Timestamp::from_millis(1_800_000_000_250));
        assert_eq!(
            w.as_numbers(),
            [
                ("ttl", "1800000000.25".to_string()),
                ("ttl_shard", "12".to_string())
            ]
        );
    }
}
