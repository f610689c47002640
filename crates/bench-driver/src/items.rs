//! The bench's items, written with the configured attribute names.

use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{Timestamp, TtlLayout};
use std::collections::HashMap;

pub type Item = HashMap<String, AttributeValue>;

/// Builds raw items (any TTL value, any shard, or none) for a table keyed by `key_attribute`.
#[derive(Debug, Clone)]
pub struct ItemWriter {
    pub key_attribute: String,
    pub ttl_attribute: String,
    pub shard_attribute: String,
}

impl ItemWriter {
    pub fn new(key_attribute: &str, layout: &TtlLayout) -> Self {
        ItemWriter {
            key_attribute: key_attribute.to_string(),
            ttl_attribute: layout.ttl_attribute.clone(),
            shard_attribute: layout.shard_attribute.clone(),
        }
    }

    pub fn item(&self, key: &str, ttl: Option<AttributeValue>, shard: Option<u16>) -> Item {
        let mut m = HashMap::from([(self.key_attribute.clone(), AttributeValue::S(key.into()))]);
        if let Some(ttl) = ttl {
            m.insert(self.ttl_attribute.clone(), ttl);
        }
        if let Some(s) = shard {
            m.insert(
                self.shard_attribute.clone(),
                AttributeValue::N(s.to_string()),
            );
        }
        m
    }

    pub fn key(&self, key: &str) -> (String, AttributeValue) {
        (self.key_attribute.clone(), AttributeValue::S(key.into()))
    }
}

/// A TTL as DynamoDB's TTL wants it: a Number of epoch seconds.
pub fn epoch_seconds(t: Timestamp) -> AttributeValue {
    AttributeValue::N(t.to_epoch_seconds_text())
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_core::ShardCount;

    #[test]
    fn items_carry_the_layouts_attribute_names() {
        let layout =
            TtlLayout::new("expires_at", "bucket", "idx", ShardCount::new(4).unwrap()).unwrap();
        let w = ItemWriter::new("id", &layout);
        let item = w.item(
            "a",
            Some(epoch_seconds(Timestamp::from_millis(5000))),
            Some(3),
        );
        let mut names: Vec<_> = item.keys().cloned().collect();
        names.sort();
        assert_eq!(names, ["bucket", "expires_at", "id"]);
        assert_eq!(item["expires_at"], AttributeValue::N("5".into()));
        assert_eq!(item["bucket"], AttributeValue::N("3".into()));
    }
}
