//! Tables and indexes from their definitions: CreateTable's and UpdateTable's validation of
//! names, attribute definitions, key schemas, projections and billing, the limits a table or
//! index gets from its billing, and the backfill of a new index.

use super::{Index, KeyDef, Projection, Table, TableDefaults, arn};
use crate::capacity::{Billing, Bucket, Limits, PartitionBuckets, ThrottleReasons, Usage};
use crate::codec::{CreateTableInput, IndexInput, KeySchemaElement, ThroughputInput};
use crate::error::DbError;
use crate::value::{Name, ScalarType};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

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

    pub fn set_billing(&mut self, billing: Billing, defaults: Limits, now: Instant) {
        self.billing = billing;
        self.limits = table_limits(defaults, billing);
        self.total_write = Bucket::new(self.limits.total_wcu, self.limits.burst_seconds, now);
        self.total_read = Bucket::new(self.limits.total_rcu, self.limits.burst_seconds, now);
    }
}

pub fn billing(
    mode: Option<&str>,
    throughput: Option<&ThroughputInput>,
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
