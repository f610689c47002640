//! Global secondary indexes: their key definitions and projection, their entries (one ordered
//! set per partition-key value, sparse: an item without the index's keys is not in it), their
//! capacity buckets and tallies, and how an item is placed in and projected into one.

use super::{IndexEntry, RowKey, SortKey, Table};
use crate::capacity::{Bucket, Limits, PartitionBuckets, ThrottleReasons, Usage};
use crate::error::DbError;
use crate::value::{Item, KeyValue, Name, ScalarType, Value};
use std::collections::{BTreeSet, HashMap};
use std::time::Instant;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyDef {
    pub name: Name,
    pub kind: ScalarType,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Projection {
    KeysOnly,
    All,
    Include(Vec<String>),
}

impl Projection {
    fn name(&self) -> &'static str {
        match self {
            Projection::KeysOnly => "KEYS_ONLY",
            Projection::All => "ALL",
            Projection::Include(_) => "INCLUDE",
        }
    }
}

/// A global secondary index.
#[derive(Debug)]
pub struct Index {
    pub name: String,
    pub arn: String,
    pub hash: KeyDef,
    pub range: Option<KeyDef>,
    pub projection: Projection,
    /// Entries per partition-key value, in sort order.
    pub entries: HashMap<KeyValue, BTreeSet<IndexEntry>>,
    pub len: u64,
    pub partitions: HashMap<KeyValue, PartitionBuckets>,
    pub partition_usage: HashMap<KeyValue, Usage>,
    pub total_write: Bucket,
    pub total_read: Bucket,
    pub limits: Limits,
    pub usage: Usage,
    pub throttles: ThrottleReasons,
    pub provisioned: Option<(i64, i64)>,
}

/// Where an item sits in an index: the partition-key value and the entry.
pub type IndexSlot = (KeyValue, IndexEntry);

impl Index {
    /// The item's slot in this index: `None` when it lacks the index's keys (sparse).
    /// Each index key attribute the item has must have the declared type, even when the item
    /// lacks the other one and so stays out of the index.
    pub fn slot(&self, item: &Item, key: &RowKey) -> Result<Option<IndexSlot>, DbError> {
        let hash = item
            .get(&self.hash.name)
            .map(|v| self.key_value(&self.hash, v))
            .transpose()?;
        let sort = match &self.range {
            None => Some(SortKey::min()),
            Some(def) => item
                .get(&def.name)
                .map(|v| self.key_value(def, v))
                .transpose()?
                .map(SortKey::new),
        };
        Ok(match (hash, sort) {
            (Some(hash), Some(sort)) => Some((hash, (sort, key.clone()))),
            _ => None,
        })
    }

    fn key_value(&self, def: &KeyDef, v: &Value) -> Result<KeyValue, DbError> {
        match v.as_key() {
            Some(k) if k.scalar_type() == def.kind => {
                if k.is_empty() {
                    return Err(DbError::validation(format!(
                        "One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: {}, IndexKey: {}",
                        self.name, def.name
                    )));
                }
                Ok(k)
            }
            _ => Err(DbError::validation(format!(
                "One or more parameter values were invalid: Type mismatch for Index Key {} Expected: {} Actual: {} IndexName: {}",
                def.name,
                def.kind.as_str(),
                v.type_name(),
                self.name
            ))),
        }
    }

    /// The item as this index holds it.
    pub fn project(&self, table: &Table, slot: &IndexSlot, full: Option<&Item>) -> Item {
        let (hash, (sort, RowKey { pk, sk, .. })) = slot;
        let keys = || {
            let mut item = Item::new();
            if let Some(pk) = pk.value() {
                item.set(table.hash.name.clone(), pk.to_value());
            }
            if let (Some(def), Some(sk)) = (&table.range, sk.value()) {
                item.set(def.name.clone(), sk.to_value());
            }
            item.set(self.hash.name.clone(), hash.to_value());
            if let (Some(def), Some(sort)) = (&self.range, sort.value()) {
                item.set(def.name.clone(), sort.to_value());
            }
            item
        };
        match (&self.projection, full) {
            (Projection::KeysOnly, _) | (_, None) => keys(),
            (Projection::All, Some(full)) => full.clone(),
            (Projection::Include(names), Some(full)) => {
                let mut item = keys();
                for name in names {
                    if let Some(v) = full.get(name) {
                        item.set(Name::from(name.as_str()), v.clone());
                    }
                }
                item
            }
        }
    }

    /// Size of the index's copy of an item, for its write cost.
    pub(super) fn entry_size(&self, table: &Table, slot: &IndexSlot, full: &Item) -> usize {
        match self.projection {
            Projection::All => full.size(),
            _ => self.project(table, slot, Some(full)).size(),
        }
    }

    pub(super) fn insert(&mut self, slot: IndexSlot) {
        if self.entries.entry(slot.0).or_default().insert(slot.1) {
            self.len += 1;
        }
    }

    pub(super) fn remove(&mut self, slot: &IndexSlot) {
        if let Some(set) = self.entries.get_mut(&slot.0)
            && set.remove(&slot.1)
        {
            self.len -= 1;
            if set.is_empty() {
                self.entries.remove(&slot.0);
            }
        }
    }

    /// The partition buckets of `value`, created full on first use.
    pub fn partition(&mut self, value: &KeyValue, now: Instant) -> &mut PartitionBuckets {
        if !self.partitions.contains_key(value) {
            self.partitions
                .insert(value.clone(), PartitionBuckets::new(&self.limits, now));
        }
        self.partitions.get_mut(value).expect("inserted above")
    }

    pub(super) fn describe(&self) -> serde_json::Value {
        let mut keys =
            vec![serde_json::json!({"AttributeName": &*self.hash.name, "KeyType": "HASH"})];
        if let Some(r) = &self.range {
            keys.push(serde_json::json!({"AttributeName": &*r.name, "KeyType": "RANGE"}));
        }
        let mut projection = serde_json::json!({"ProjectionType": self.projection.name()});
        if let Projection::Include(names) = &self.projection {
            projection["NonKeyAttributes"] = serde_json::json!(names);
        }
        let (read, write) = self.provisioned.unwrap_or((0, 0));
        serde_json::json!({
            "IndexName": self.name,
            "IndexArn": self.arn,
            "KeySchema": keys,
            "Projection": projection,
            "IndexStatus": "ACTIVE",
            "Backfilling": false,
            "ItemCount": self.len,
            "IndexSizeBytes": 0,
            "ProvisionedThroughput": {
                "ReadCapacityUnits": read,
                "WriteCapacityUnits": write,
                "NumberOfDecreasesToday": 0
            }
        })
    }
}
