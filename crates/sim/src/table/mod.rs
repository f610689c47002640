//! Tables: their schema, their rows (ordered by the hash of the partition key, then the keys,
//! as DynamoDB lays items out), their global secondary indexes, their capacity buckets and
//! tallies. This module holds the table itself and its keys as requests name them; the
//! submodules hold the rest: `key` (row and index-entry keys, partition hashing), `index` (global
//! secondary indexes), `schema` (creating tables and indexes from their definitions, billing)
//! and `write` (the planning, admission and commit of one write).

mod index;
mod key;
mod schema;
mod write;

pub use index::{Index, IndexSlot, KeyDef, Projection};
pub use key::{Edge, IndexEntry, RowKey, SortKey, hash_key, partition_among};
pub use schema::{billing, validate_table_name};
pub use write::{Charged, IndexChange, WritePlan};

use crate::capacity::{Billing, Bucket, Limits, PartitionBuckets, ThrottleReasons, Usage};
use crate::error::DbError;
use crate::value::{Item, KeyValue, Name, ScalarType};
use std::collections::{BTreeMap, HashSet};

/// The largest item DynamoDB stores.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// A table and everything the simulator keeps about it.
#[derive(Debug)]
pub struct Table {
    pub name: String,
    pub arn: String,
    pub hash: KeyDef,
    pub range: Option<KeyDef>,
    pub attribute_types: BTreeMap<String, ScalarType>,
    pub rows: BTreeMap<RowKey, Item>,
    pub indexes: Vec<Index>,
    pub partitions: Vec<PartitionBuckets>,
    pub partition_usage: Vec<Usage>,
    pub total_write: Bucket,
    pub total_read: Bucket,
    pub limits: Limits,
    pub billing: Billing,
    pub usage: Usage,
    pub throttles: ThrottleReasons,
    pub created_at: f64,
    pub stream_view: Option<String>,
    /// Native TTL's attribute and whether it is enabled (recorded only; nothing expires).
    pub ttl: Option<(String, bool)>,
    pub deletes: u64,
    names: HashSet<Name>,
}

pub fn arn(table: &str) -> String {
    format!("arn:aws:dynamodb:us-east-1:000000000000:table/{table}")
}

/// What table-wide settings the simulator applies to new tables.
#[derive(Debug, Clone, Copy)]
pub struct TableDefaults {
    pub partitions: usize,
    pub limits: Limits,
}

impl Table {
    pub fn index_named(&self, name: &str) -> Result<usize, DbError> {
        self.indexes
            .iter()
            .position(|i| i.name == name)
            .ok_or_else(|| {
                DbError::validation(format!(
                    "The table does not have the specified index: {name}"
                ))
            })
    }

    /// The partition of the table a hash falls in: partitions split the hash space evenly.
    pub fn partition_of(&self, hash: u64) -> usize {
        partition_among(hash, self.partitions.len())
    }

    fn key_value(
        &self,
        def: &KeyDef,
        v: &crate::value::Value,
        what: &str,
    ) -> Result<KeyValue, DbError> {
        match v.as_key() {
            Some(k) if k.scalar_type() == def.kind => {
                if k.is_empty() {
                    return Err(DbError::validation(format!(
                        "One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty {} value. Key: {}",
                        if def.kind == ScalarType::S {
                            "string"
                        } else {
                            "binary"
                        },
                        def.name
                    )));
                }
                Ok(k)
            }
            _ if what == "key" => Err(DbError::validation(
                "The provided key element does not match the schema",
            )),
            _ => Err(DbError::validation(format!(
                "One or more parameter values were invalid: Type mismatch for key {} expected: {} actual: {}",
                def.name,
                def.kind.as_str(),
                v.type_name()
            ))),
        }
    }

    /// The row key of a `Key` parameter, which must hold the key attributes and nothing else.
    pub fn key_of(&self, key: &Item) -> Result<RowKey, DbError> {
        let expected = 1 + usize::from(self.range.is_some());
        if key.len() != expected {
            return Err(DbError::validation(
                "The provided key element does not match the schema",
            ));
        }
        self.row_key(key, "key")
    }

    /// The row key of a whole item.
    pub fn item_key(&self, item: &Item) -> Result<RowKey, DbError> {
        self.row_key(item, "item")
    }

    fn row_key(&self, item: &Item, what: &str) -> Result<RowKey, DbError> {
        let get = |def: &KeyDef| -> Result<KeyValue, DbError> {
            match item.get(&def.name) {
                Some(v) => self.key_value(def, v, what),
                None if what == "key" => Err(DbError::validation(
                    "The provided key element does not match the schema",
                )),
                None => Err(DbError::validation(format!(
                    "One or more parameter values were invalid: Missing the key {} in the item",
                    def.name
                ))),
            }
        };
        let pk = get(&self.hash)?;
        let sk = match &self.range {
            Some(def) => Edge::At(get(def)?),
            None => Edge::Min,
        };
        Ok(RowKey {
            hash: hash_key(&pk),
            pk: Edge::At(pk),
            sk,
        })
    }

    /// The key attributes of a row as an item.
    pub fn key_item(&self, key: &RowKey) -> Item {
        let mut item = Item::new();
        if let Some(pk) = key.pk.value() {
            item.set(self.hash.name.clone(), pk.to_value());
        }
        if let (Some(def), Some(sk)) = (&self.range, key.sk.value()) {
            item.set(def.name.clone(), sk.to_value());
        }
        item
    }

    pub fn describe(&self, status: &str) -> serde_json::Value {
        let mut keys =
            vec![serde_json::json!({"AttributeName": &*self.hash.name, "KeyType": "HASH"})];
        if let Some(r) = &self.range {
            keys.push(serde_json::json!({"AttributeName": &*r.name, "KeyType": "RANGE"}));
        }
        let definitions: Vec<serde_json::Value> = self
            .attribute_types
            .iter()
            .map(|(n, t)| serde_json::json!({"AttributeName": n, "AttributeType": t.as_str()}))
            .collect();
        let (read, write, mode) = match self.billing {
            Billing::OnDemand => (0, 0, "PAY_PER_REQUEST"),
            Billing::Provisioned { read, write } => (read, write, "PROVISIONED"),
        };
        let mut d = serde_json::json!({
            "TableName": self.name,
            "TableArn": self.arn,
            "TableId": format!("{:016x}", hash_key(&KeyValue::S(self.name.as_str().into()))),
            "TableStatus": status,
            "CreationDateTime": self.created_at,
            "KeySchema": keys,
            "AttributeDefinitions": definitions,
            "ItemCount": self.rows.len(),
            "TableSizeBytes": 0,
            "ProvisionedThroughput": {
                "ReadCapacityUnits": read,
                "WriteCapacityUnits": write,
                "NumberOfDecreasesToday": 0
            },
            "BillingModeSummary": {"BillingMode": mode, "LastUpdateToPayPerRequestDateTime": self.created_at},
            "DeletionProtectionEnabled": false,
        });
        if !self.indexes.is_empty() {
            d["GlobalSecondaryIndexes"] =
                serde_json::Value::Array(self.indexes.iter().map(Index::describe).collect());
        }
        if let Some(view) = &self.stream_view {
            d["StreamSpecification"] =
                serde_json::json!({"StreamEnabled": true, "StreamViewType": view});
            let label = "2026-01-01T00:00:00.000";
            d["LatestStreamLabel"] = label.into();
            d["LatestStreamArn"] = format!("{}/stream/{label}", self.arn).into();
        }
        d
    }
}
