//! Item keys and number values as DynamoDB carries them.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// The primary key of one item: its partition key and, if the table has one, its sort key.
///
/// Shared, not copied: the daemon holds each key in its timer heap, its pending set and the
/// request that deletes it, tens of thousands of times a second.
#[derive(Clone, PartialEq)]
pub struct ItemKey(pub(crate) Arc<[(String, AttributeValue)]>);

impl ItemKey {
    pub fn new(attributes: Vec<(String, AttributeValue)>) -> Self {
        ItemKey(attributes.into())
    }

    pub fn attributes(&self) -> &[(String, AttributeValue)] {
        &self.0
    }

    pub fn to_map(&self) -> HashMap<String, AttributeValue> {
        self.0.iter().cloned().collect()
    }

    /// The partition key's bytes for the stable shard rule: UTF-8 of a String, the decimal text
    /// of a Number as DynamoDB returns it, the raw bytes of a Binary.
    pub fn partition_bytes(&self) -> Vec<u8> {
        self.0
            .first()
            .map(|(_, v)| key_bytes(v))
            .unwrap_or_default()
    }

    /// The first key attribute (the partition key) rendered as text, for messages.
    pub fn partition_text(&self) -> String {
        self.0.first().map(|(_, v)| render(v)).unwrap_or_default()
    }
}

/// A key attribute's bytes: UTF-8 of a String, the decimal text of a Number as DynamoDB returns
/// it, the raw bytes of a Binary (nothing for other types, which keys cannot have).
pub fn key_bytes(v: &AttributeValue) -> Vec<u8> {
    match v {
        AttributeValue::S(s) => s.as_bytes().to_vec(),
        AttributeValue::N(n) => n.as_bytes().to_vec(),
        AttributeValue::B(b) => b.as_ref().to_vec(),
        _ => Vec::new(),
    }
}

// Key attributes are S, N or B, whose equality is reflexive; that makes `Eq` sound. Numbers are
// compared as DynamoDB returned them: the index and the table return one canonical text.
impl Eq for ItemKey {}

impl std::hash::Hash for ItemKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for (name, value) in self.0.iter() {
            name.hash(state);
            match value {
                AttributeValue::S(s) => (0u8, s.as_bytes()).hash(state),
                AttributeValue::N(n) => (1u8, n.as_bytes()).hash(state),
                AttributeValue::B(b) => (2u8, b.as_ref()).hash(state),
                other => (3u8, format!("{other:?}")).hash(state),
            }
        }
    }
}

impl fmt::Debug for ItemKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (name, value)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}={}", render(value))?;
        }
        f.write_str("}")
    }
}

impl fmt::Display for ItemKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A key attribute value as short text: `"abc"`, `42`, `b64:AAEC`.
pub fn render(v: &AttributeValue) -> String {
    match v {
        AttributeValue::S(s) => format!("{s:?}"),
        AttributeValue::N(n) => n.clone(),
        AttributeValue::B(b) => format!("<{} bytes>", b.as_ref().len()),
        other => format!("{other:?}"),
    }
}

pub use precise_ttl_read::{ttl_value, type_name};

/// The writer's two attributes as DynamoDB values, ready to merge into a PutItem or UpdateItem.
pub fn writer_values(w: &precise_ttl_core::WriterAttributes) -> HashMap<String, AttributeValue> {
    w.as_numbers()
        .into_iter()
        .map(|(name, text)| (name.to_string(), AttributeValue::N(text)))
        .collect()
}
