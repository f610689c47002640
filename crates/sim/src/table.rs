//! Tables: their schema, their rows (ordered by the hash of the partition key, then the keys,
//! as DynamoDB lays items out), their global secondary indexes (one ordered set of entries per
//! partition-key value, sparse: an item without the index's keys is not in it), their capacity
//! buckets and tallies, and the planning of one write: which partitions it touches and what it
//! costs on each.
//!
//! Over 700 lines: schema, rows, indexes and write planning still share one file; the split by
//! responsibility is issue 28's (the simulator's files over 700 lines), not done yet.

use crate::capacity::{
    Billing, Bucket, Limits, PartitionBuckets, ThrottleReasons, Usage, write_units,
};
use crate::codec::{CreateTableInput, IndexInput, KeySchemaElement};
use crate::error::{DbError, Throttle};
use crate::value::{Item, KeyValue, Name, ScalarType};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Instant;

/// The largest item DynamoDB stores.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

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

    fn key_value(&self, def: &KeyDef, v: &crate::value::Value) -> Result<KeyValue, DbError> {
        match v.as_key() {
            Some(k) if k.scalar_type() == def.kind => {
                if matches!(&k, KeyValue::S(s) if s.is_empty())
                    || matches!(&k, KeyValue::B(b) if b.is_empty())
                {
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
    fn entry_size(&self, table: &Table, slot: &IndexSlot, full: &Item) -> usize {
        match self.projection {
            Projection::All => full.size(),
            _ => self.project(table, slot, Some(full)).size(),
        }
    }

    fn insert(&mut self, slot: IndexSlot) {
        if self.entries.entry(slot.0).or_default().insert(slot.1) {
            self.len += 1;
        }
    }

    fn remove(&mut self, slot: &IndexSlot) {
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

    fn describe(&self) -> serde_json::Value {
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

fn key_schema(
    elements: &[KeySchemaElement],
    types: &BTreeMap<String, ScalarType>,
    what: &str,
) -> Result<(KeyDef, Option<KeyDef>), DbError> {
    let def = |e: &KeySchemaElement| -> Result<KeyDef, DbError> {
        let kind = types.get(&e.attribute_name).copied().ok_or_else(|| {
            DbError::validation(format!(
                "One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions. Keys: [{}], AttributeDefinitions: [{}]",
                e.attribute_name,
                types.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?;
        Ok(KeyDef {
            name: Name::from(e.attribute_name.as_str()),
            kind,
        })
    };
    match elements {
        [h] if h.key_type == "HASH" => Ok((def(h)?, None)),
        [h, r] if h.key_type == "HASH" && r.key_type == "RANGE" => Ok((def(h)?, Some(def(r)?))),
        _ => Err(DbError::validation(format!(
            "1 validation error detected: Value at '{what}keySchema' failed to satisfy constraint: a HASH key first, then at most one RANGE key"
        ))),
    }
}

impl Table {
    pub fn create(
        input: &CreateTableInput,
        defaults: TableDefaults,
        now: Instant,
        wall_secs: f64,
    ) -> Result<Table, DbError> {
        validate_table_name(&input.table_name)?;
        if input.local_secondary_indexes.is_some() {
            return Err(DbError::validation(
                "local secondary indexes are not supported by the simulator",
            ));
        }
        let mut types = BTreeMap::new();
        for d in &input.attribute_definitions {
            let kind = ScalarType::parse(&d.attribute_type).ok_or_else(|| {
                DbError::validation(format!(
                    "1 validation error detected: Value '{}' at 'attributeDefinitions.member.attributeType' failed to satisfy constraint: Member must satisfy enum value set: [B, N, S]",
                    d.attribute_type
                ))
            })?;
            types.insert(d.attribute_name.clone(), kind);
        }
        let (hash, range) = key_schema(&input.key_schema, &types, "")?;
        let billing = billing(
            input.billing_mode.as_deref(),
            input.provisioned_throughput.as_ref(),
        )?;
        let limits = table_limits(defaults.limits, billing);
        let name = input.table_name.clone();
        let mut table = Table {
            arn: arn(&name),
            name,
            hash,
            range,
            attribute_types: types,
            rows: BTreeMap::new(),
            indexes: Vec::new(),
            partitions: (0..defaults.partitions.max(1))
                .map(|_| PartitionBuckets::new(&limits, now))
                .collect(),
            partition_usage: vec![Usage::default(); defaults.partitions.max(1)],
            total_write: Bucket::new(limits.total_wcu, limits.burst_seconds, now),
            total_read: Bucket::new(limits.total_rcu, limits.burst_seconds, now),
            limits,
            billing,
            usage: Usage::default(),
            throttles: ThrottleReasons::new(),
            created_at: wall_secs,
            stream_view: input
                .stream_specification
                .as_ref()
                .filter(|s| s.stream_enabled)
                .map(|s| {
                    s.stream_view_type
                        .clone()
                        .unwrap_or_else(|| "KEYS_ONLY".into())
                }),
            ttl: None,
            deletes: 0,
            names: HashSet::new(),
        };
        for index in input.global_secondary_indexes.iter().flatten() {
            table.add_index(index, defaults.limits, now)?;
        }
        table.check_definitions_used()?;
        Ok(table)
    }

    fn check_definitions_used(&self) -> Result<(), DbError> {
        let mut used: HashSet<&str> = HashSet::new();
        used.insert(&self.hash.name);
        if let Some(r) = &self.range {
            used.insert(&r.name);
        }
        for i in &self.indexes {
            used.insert(&i.hash.name);
            if let Some(r) = &i.range {
                used.insert(&r.name);
            }
        }
        if let Some(extra) = self
            .attribute_types
            .keys()
            .find(|k| !used.contains(k.as_str()))
        {
            return Err(DbError::validation(format!(
                "One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions ({extra} is unused)"
            )));
        }
        Ok(())
    }

    /// Adds a global secondary index and fills it from the rows (items whose index keys have
    /// another type are left out, as DynamoDB's backfill leaves them out).
    pub fn add_index(
        &mut self,
        input: &IndexInput,
        defaults: Limits,
        now: Instant,
    ) -> Result<(), DbError> {
        if self.indexes.iter().any(|i| i.name == input.index_name) {
            return Err(DbError::validation(format!(
                "One or more parameter values were invalid: Index {} already exists",
                input.index_name
            )));
        }
        let (hash, range) = key_schema(
            &input.key_schema,
            &self.attribute_types,
            "globalSecondaryIndexes.member.",
        )?;
        let projection = match input.projection.projection_type.as_deref() {
            Some("KEYS_ONLY") => Projection::KeysOnly,
            Some("ALL") | None => Projection::All,
            Some("INCLUDE") => Projection::Include(
                input
                    .projection
                    .non_key_attributes
                    .clone()
                    .unwrap_or_default(),
            ),
            Some(other) => {
                return Err(DbError::validation(format!(
                    "1 validation error detected: Value '{other}' at 'projection.projectionType' failed to satisfy constraint: Member must satisfy enum value set: [ALL, INCLUDE, KEYS_ONLY]"
                )));
            }
        };
        let provisioned = match (self.billing, &input.provisioned_throughput) {
            (Billing::Provisioned { .. }, Some(t)) => Some((
                t.read_capacity_units.unwrap_or(1),
                t.write_capacity_units.unwrap_or(1),
            )),
            (Billing::Provisioned { .. }, None) => {
                return Err(DbError::validation(
                    "One or more parameter values were invalid: ProvisionedThroughput must be specified for index: ".to_string()
                        + &input.index_name,
                ));
            }
            _ => None,
        };
        let limits = match provisioned {
            Some((read, write)) => Limits {
                total_rcu: read as f64,
                total_wcu: write as f64,
                ..defaults
            },
            None => defaults,
        };
        let mut index = Index {
            arn: format!("{}/index/{}", self.arn, input.index_name),
            name: input.index_name.clone(),
            hash,
            range,
            projection,
            entries: HashMap::new(),
            len: 0,
            partitions: HashMap::new(),
            partition_usage: HashMap::new(),
            total_write: Bucket::new(limits.total_wcu, limits.burst_seconds, now),
            total_read: Bucket::new(limits.total_rcu, limits.burst_seconds, now),
            limits,
            usage: Usage::default(),
            throttles: ThrottleReasons::new(),
            provisioned,
        };
        for (key, item) in &self.rows {
            if let Ok(Some(slot)) = index.slot(item, key) {
                index.insert(slot);
            }
        }
        self.indexes.push(index);
        Ok(())
    }

    pub fn remove_index(&mut self, name: &str) -> Result<(), DbError> {
        let at = self
            .indexes
            .iter()
            .position(|i| i.name == name)
            .ok_or(DbError::ResourceNotFound(None))?;
        self.indexes.remove(at);
        Ok(())
    }

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
                if matches!(&k, KeyValue::S(s) if s.is_empty())
                    || matches!(&k, KeyValue::B(b) if b.is_empty())
                {
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

    /// Checks a new item's size and index key types.
    pub fn check_item(&self, item: &Item, key: &RowKey) -> Result<(), DbError> {
        if item.size() > MAX_ITEM_BYTES {
            return Err(DbError::validation(
                "Item size has exceeded the maximum allowed size",
            ));
        }
        for index in &self.indexes {
            index.slot(item, key)?;
        }
        Ok(())
    }

    /// What writing `new` over `old` at `key` touches and costs. `effective` is false for a
    /// write whose condition failed: it costs the table's write units and changes nothing.
    pub fn plan(
        &self,
        key: RowKey,
        old: Option<&Item>,
        new: Option<&Item>,
        effective: bool,
    ) -> Result<WritePlan, DbError> {
        let size = old.map_or(0, Item::size).max(new.map_or(0, Item::size));
        let partition = self.partition_of(key.hash);
        let mut plan = WritePlan {
            partition,
            base_units: write_units(size),
            index: Vec::new(),
            key,
        };
        if !effective {
            return Ok(plan);
        }
        for (i, index) in self.indexes.iter().enumerate() {
            let old_slot = match old {
                Some(o) => index.slot(o, &plan.key).ok().flatten(),
                None => None,
            };
            let new_slot = match new {
                Some(n) => index.slot(n, &plan.key)?,
                None => None,
            };
            let mut charges = Vec::new();
            match (&old_slot, &new_slot, old, new) {
                (Some(o), Some(n), Some(old_item), Some(new_item)) if o == n => {
                    // Same place in the index: only a projection that carries other attributes
                    // needs rewriting, and only if they changed.
                    let changed = match &index.projection {
                        Projection::KeysOnly => false,
                        Projection::All => old_item != new_item,
                        Projection::Include(_) => {
                            index.project(self, o, Some(old_item))
                                != index.project(self, n, Some(new_item))
                        }
                    };
                    if changed {
                        charges.push((
                            n.0.clone(),
                            write_units(index.entry_size(self, n, new_item)),
                        ));
                    }
                }
                _ => {
                    if let (Some(o), Some(old_item)) = (&old_slot, old) {
                        charges.push((
                            o.0.clone(),
                            write_units(index.entry_size(self, o, old_item)),
                        ));
                    }
                    if let (Some(n), Some(new_item)) = (&new_slot, new) {
                        charges.push((
                            n.0.clone(),
                            write_units(index.entry_size(self, n, new_item)),
                        ));
                    }
                }
            }
            if old_slot.is_some() || new_slot.is_some() || !charges.is_empty() {
                plan.index.push(IndexChange {
                    index: i,
                    old: old_slot,
                    new: new_slot,
                    charges,
                });
            }
        }
        Ok(plan)
    }

    /// Whether every bucket the plan touches has room; the first one that has none says why not.
    pub fn admit(&mut self, plan: &WritePlan, now: Instant) -> Result<(), Throttle> {
        let billing = self.billing;
        if !self.partitions[plan.partition]
            .write
            .admits(Some(plan.base_units), now)
        {
            return Err(billing.throttle(
                "Table",
                "Write",
                "KeyRangeThroughputExceeded",
                &self.arn,
            ));
        }
        if !self.total_write.admits(Some(plan.base_units), now) {
            return Err(billing.throttle("Table", "Write", billing.limit_reason(), &self.arn));
        }
        for change in &plan.index {
            let index = &mut self.indexes[change.index];
            let mut total = 0.0;
            for (value, units) in &change.charges {
                total += units;
                if !index.partition(value, now).write.admits(Some(*units), now) {
                    return Err(billing.throttle(
                        "Index",
                        "Write",
                        "KeyRangeThroughputExceeded",
                        &index.arn,
                    ));
                }
            }
            if !index.total_write.admits(Some(total), now) {
                return Err(billing.throttle("Index", "Write", billing.limit_reason(), &index.arn));
            }
        }
        Ok(())
    }

    /// Records a refused write against the table or index it names.
    pub fn count_throttle(&mut self, throttle: &Throttle, write: bool) {
        let usage_of = |u: &mut Usage| {
            if write {
                u.throttled_writes += 1;
            } else {
                u.throttled_reads += 1;
            }
        };
        match self.indexes.iter_mut().find(|i| i.arn == throttle.resource) {
            Some(index) => {
                usage_of(&mut index.usage);
                *index.throttles.entry(throttle.reason.clone()).or_default() += 1;
            }
            None => {
                usage_of(&mut self.usage);
                *self.throttles.entry(throttle.reason.clone()).or_default() += 1;
            }
        }
    }

    /// Takes the plan's units from its buckets and tallies them; returns the units for the
    /// table and for each index touched.
    pub fn charge(&mut self, plan: &WritePlan) -> Charged {
        self.partitions[plan.partition].write.take(plan.base_units);
        self.total_write.take(plan.base_units);
        self.usage.write_units += plan.base_units;
        self.partition_usage[plan.partition].write_units += plan.base_units;
        let mut charged = Charged {
            table: plan.base_units,
            indexes: Vec::new(),
        };
        for change in &plan.index {
            let index = &mut self.indexes[change.index];
            let mut total = 0.0;
            for (value, units) in &change.charges {
                if let Some(p) = index.partitions.get_mut(value) {
                    p.write.take(*units);
                }
                match index.partition_usage.get_mut(value) {
                    Some(usage) => usage.write_units += units,
                    None => {
                        let usage = Usage {
                            write_units: *units,
                            ..Usage::default()
                        };
                        index.partition_usage.insert(value.clone(), usage);
                    }
                }
                total += units;
            }
            index.total_write.take(total);
            index.usage.write_units += total;
            if total > 0.0 {
                charged.indexes.push((change.index, total));
            }
        }
        charged
    }

    /// Applies the plan: stores `new` (or removes the row) and moves the index entries.
    /// Returns the old item.
    pub fn commit(&mut self, mut plan: WritePlan, new: Option<Item>) -> Option<Item> {
        self.commit_indexes(&mut plan);
        match new {
            Some(mut item) => {
                item.intern(|name| match self.names.get(name) {
                    Some(shared) => shared.clone(),
                    None => {
                        self.names.insert(name.clone());
                        name.clone()
                    }
                });
                self.rows.insert(plan.key, item)
            }
            None => {
                let old = self.rows.remove(&plan.key);
                if old.is_some() {
                    self.deletes += 1;
                }
                old
            }
        }
    }

    /// Moves the plan's index entries (the row itself is the caller's).
    pub fn commit_indexes(&mut self, plan: &mut WritePlan) {
        for change in plan.index.drain(..) {
            let index = &mut self.indexes[change.index];
            if change.old != change.new {
                if let Some(old) = &change.old {
                    index.remove(old);
                }
                if let Some(new) = change.new {
                    index.insert(new);
                }
            }
        }
    }

    /// Stores an item without capacity, latency or conditions (the planting fast path).
    pub fn plant(&mut self, item: Item) -> Result<(), DbError> {
        let key = self.item_key(&item)?;
        self.check_item(&item, &key)?;
        let old = self.rows.get(&key);
        let plan = self.plan(key, old, Some(&item), true)?;
        self.commit(plan, Some(item));
        Ok(())
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
            "TableId": format!("{:016x}", crate::table::hash_key(&KeyValue::S(self.name.as_str().into()))),
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

    pub fn set_billing(&mut self, billing: Billing, defaults: Limits, now: Instant) {
        self.billing = billing;
        self.limits = table_limits(defaults, billing);
        self.total_write = Bucket::new(self.limits.total_wcu, self.limits.burst_seconds, now);
        self.total_read = Bucket::new(self.limits.total_rcu, self.limits.burst_seconds, now);
    }
}

/// A write's footprint.
#[derive(Debug)]
pub struct WritePlan {
    pub key: RowKey,
    pub partition: usize,
    pub base_units: f64,
    pub index: Vec<IndexChange>,
}

/// What one write does to one index.
#[derive(Debug)]
pub struct IndexChange {
    pub index: usize,
    pub old: Option<IndexSlot>,
    pub new: Option<IndexSlot>,
    /// Write units per index partition.
    pub charges: Vec<(KeyValue, f64)>,
}

/// Units a write took, on the table and per index (by position).
#[derive(Debug, Clone, Default)]
pub struct Charged {
    pub table: f64,
    pub indexes: Vec<(usize, f64)>,
}

pub fn billing(
    mode: Option<&str>,
    throughput: Option<&crate::codec::ThroughputInput>,
) -> Result<Billing, DbError> {
    match (mode, throughput) {
        (Some("PAY_PER_REQUEST"), None) => Ok(Billing::OnDemand),
        (Some("PAY_PER_REQUEST"), Some(_)) => Err(DbError::validation(
            "One or more parameter values were invalid: Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST",
        )),
        (Some("PROVISIONED") | None, Some(t)) => Ok(Billing::Provisioned {
            read: t.read_capacity_units.unwrap_or(1).max(1),
            write: t.write_capacity_units.unwrap_or(1).max(1),
        }),
        (Some("PROVISIONED") | None, None) => Err(DbError::validation(
            "One or more parameter values were invalid: ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode is PROVISIONED",
        )),
        (Some(other), _) => Err(DbError::validation(format!(
            "1 validation error detected: Value '{other}' at 'billingMode' failed to satisfy constraint: Member must satisfy enum value set: [PROVISIONED, PAY_PER_REQUEST]"
        ))),
    }
}

fn table_limits(defaults: Limits, billing: Billing) -> Limits {
    match billing {
        Billing::OnDemand => defaults,
        Billing::Provisioned { read, write } => Limits {
            total_rcu: read as f64,
            total_wcu: write as f64,
            ..defaults
        },
    }
}

pub fn validate_table_name(name: &str) -> Result<(), DbError> {
    let ok = (3..=255).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(DbError::validation(format!(
            "1 validation error detected: Value '{name}' at 'tableName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+ and have length between 3 and 255"
        )))
    }
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
