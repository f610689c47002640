//! The bench's items, written with the configured attribute names.

use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{Expiry, Timestamp, TtlLayout, WindowSpec};
use std::collections::HashMap;

pub type Item = HashMap<String, AttributeValue>;

/// Builds raw items (any TTL value, any shard, or none) for a table keyed by `key_attribute`.
#[derive(Debug, Clone)]
pub struct ItemWriter {
    pub key_attribute: String,
    pub ttl_attribute: String,
    pub shard_attribute: String,
    /// For the 2022 blog's layout: the window attribute and how writers label windows. An item
    /// given a shard then carries its TTL's window label instead of the shard number.
    pub windows: Option<(String, WindowSpec)>,
    /// Whether items given a shard carry it (or its window label). `false` for the expiry
    /// queue's layout, whose writers set only the TTL: the shard drawn for an item is dropped.
    pub writes_shards: bool,
}

impl ItemWriter {
    pub fn new(key_attribute: &str, layout: &TtlLayout) -> Self {
        ItemWriter {
            key_attribute: key_attribute.to_string(),
            ttl_attribute: layout.ttl_attribute.clone(),
            shard_attribute: layout.shard_attribute.clone(),
            windows: None,
            writes_shards: true,
        }
    }

    /// Items in the expiry queue's layout: the TTL alone, no shard and no window label.
    pub fn without_shards(mut self) -> Self {
        self.writes_shards = false;
        self
    }

    /// Items in the blog's layout: `attribute` holds the window label of each item's TTL.
    pub fn with_windows(mut self, attribute: &str, spec: WindowSpec) -> Self {
        self.windows = Some((attribute.to_string(), spec));
        self
    }

    pub fn item(&self, key: &str, ttl: Option<AttributeValue>, shard: Option<u16>) -> Item {
        let mut m = HashMap::from([(self.key_attribute.clone(), AttributeValue::S(key.into()))]);
        let shard = shard.filter(|_| self.writes_shards);
        if let (Some(s), Some((attribute, spec))) = (shard, &self.windows) {
            // A writer labels the window its TTL falls in; a TTL it cannot read as epoch
            // seconds gets a label spread by the shard draw (never a window the sweeper reads).
            let at = match &ttl {
                Some(AttributeValue::N(n)) => Expiry::parse_number(n).ok().map(|e| e.at()),
                _ => None,
            }
            .unwrap_or(Timestamp::from_secs(i64::from(s)));
            m.insert(
                attribute.clone(),
                AttributeValue::S(spec.label(spec.index_of(at))),
            );
        } else if let Some(s) = shard {
            m.insert(
                self.shard_attribute.clone(),
                AttributeValue::N(s.to_string()),
            );
        }
        if let Some(ttl) = ttl {
            m.insert(self.ttl_attribute.clone(), ttl);
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

    /// The attribute names of `item`, sorted.
    fn names(item: &Item) -> Vec<String> {
        let mut names: Vec<_> = item.keys().cloned().collect();
        names.sort();
        names
    }

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
        assert_eq!(names(&item), ["bucket", "expires_at", "id"]);
        assert_eq!(item["expires_at"], AttributeValue::N("5".into()));
        assert_eq!(item["bucket"], AttributeValue::N("3".into()));
    }

    #[test]
    fn in_the_blog_layout_items_carry_their_ttls_window_label() {
        let spec = WindowSpec::new(
            std::time::Duration::from_secs(60),
            precise_ttl_core::WindowFormat::Millis,
        )
        .unwrap();
        let w = ItemWriter::new("pk", &TtlLayout::default()).with_windows("expirationWindow", spec);
        let at = Timestamp::from_millis(1_658_311_230_500);
        let item = w.item("a", Some(epoch_seconds(at)), Some(3));
        assert_eq!(
            item["expirationWindow"],
            AttributeValue::S("2022-07-20T10:00:00.000Z_2022-07-20T10:01:00.000Z".into())
        );
        assert!(!item.contains_key("ttl_shard"));
        assert!(
            !w.item("b", Some(epoch_seconds(at)), None)
                .contains_key("expirationWindow")
        );
    }

    #[test]
    fn in_the_queue_layout_items_carry_only_their_ttl() {
        let w = ItemWriter::new("pk", &TtlLayout::default()).without_shards();
        let item = w.item(
            "a",
            Some(epoch_seconds(Timestamp::from_millis(5000))),
            Some(3),
        );
        assert_eq!(names(&item), ["pk", "ttl"]);
    }
}
