//! The engine's [`LeaseStore`] on DynamoDB: one lease table for any number of swept tables.
//!
//! Items are keyed by `scope` (the swept table and index, `table/index`) and `lease` (the shard
//! value), so one Query lists a table's leases. `owner` (absent when released) and `counter` (a
//! Number) change only through writes conditional on the counter the writer read; `renewed_at`
//! is the writer's wall time, shown by `status` and never used to judge expiry.

use crate::connect::Dynamo;
use crate::error::{AdapterError, store_error};
use crate::table::TableShape;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::ErrorClass;
use precise_ttl_core::lease::LeaseRecord;
use precise_ttl_engine::Partitioning;
use precise_ttl_engine::StoreError;
use precise_ttl_engine::lease::{LeaseConfig, LeaseStore, Leases};
use std::collections::HashMap;

pub const DEFAULT_LEASE_TABLE: &str = "precise-ttl-leases";
const SCOPE: &str = "scope";
const LEASE: &str = "lease";
const OWNER: &str = "owner";
const COUNTER: &str = "counter";
const RENEWED_AT: &str = "renewed_at";

/// Creates the lease table (on demand) unless it exists; returns whether it was created.
pub async fn create_lease_table(dynamo: &Dynamo, name: &str) -> Result<bool, AdapterError> {
    crate::control::ensure_table(dynamo, name, &[SCOPE, LEASE], "the lease table").await
}

/// A stored lease, with the information `status` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLease {
    pub record: LeaseRecord,
    /// The owner's wall time at its last write, epoch milliseconds.
    pub renewed_at_ms: Option<i64>,
}

/// The leases of one swept table and index.
#[derive(Debug, Clone)]
pub struct LeaseTable {
    dynamo: Dynamo,
    name: String,
    scope: String,
}

impl LeaseTable {
    /// The leases of `table`/`index` in lease table `name`, which must exist (`setup` creates
    /// it).
    pub async fn open(
        dynamo: Dynamo,
        name: &str,
        table: &str,
        index: &str,
    ) -> Result<Self, AdapterError> {
        if TableShape::describe(&dynamo, name).await?.is_none() {
            return Err(AdapterError::LeaseTableMissing {
                table: name.to_string(),
                endpoint: dynamo.describe_endpoint(),
            });
        }
        Ok(LeaseTable {
            dynamo,
            name: name.to_string(),
            scope: format!("{table}/{index}"),
        })
    }

    /// One worker's leases over every lane of `partitioning` (lane `i` keyed by its lane name).
    pub fn worker_leases<P: Partitioning + ?Sized>(
        self,
        partitioning: &P,
        config: LeaseConfig,
    ) -> Leases<LeaseTable> {
        let keys = (0..partitioning.lanes())
            .map(|lane| partitioning.lane_name(lane))
            .collect();
        Leases::new(std::sync::Arc::new(self), keys, config)
    }

    /// Every lease of this scope, with when each was last written.
    pub async fn all(&self) -> Result<Vec<StoredLease>, StoreError> {
        let scope = AttributeValue::S(self.scope.clone());
        crate::control::read_partition(&self.dynamo, &self.name, SCOPE, scope)
            .await
            .map_err(|e| store_error("Query", e))?
            .iter()
            .map(parse)
            .collect()
    }

    /// The key of lease `key` in this table's scope: what a new lease's item starts from.
    fn key_of(&self, key: &str) -> HashMap<String, AttributeValue> {
        HashMap::from([
            (SCOPE.to_string(), AttributeValue::S(self.scope.clone())),
            (LEASE.to_string(), AttributeValue::S(key.to_string())),
        ])
    }
}

fn parse(item: &HashMap<String, AttributeValue>) -> Result<StoredLease, StoreError> {
    let bad = || {
        StoreError::new(
            ErrorClass::Fatal,
            format!("a lease item has an unexpected shape: {item:?}"),
        )
    };
    let key = match item.get(LEASE) {
        Some(AttributeValue::S(k)) => k.clone(),
        _ => return Err(bad()),
    };
    let counter = match item.get(COUNTER) {
        Some(AttributeValue::N(n)) => n.parse().map_err(|_| bad())?,
        _ => return Err(bad()),
    };
    let owner = match item.get(OWNER) {
        Some(AttributeValue::S(o)) => Some(o.clone()),
        _ => None,
    };
    let renewed_at_ms = match item.get(RENEWED_AT) {
        Some(AttributeValue::N(n)) => n.parse().ok(),
        _ => None,
    };
    Ok(StoredLease {
        record: LeaseRecord {
            key,
            owner,
            counter,
        },
        renewed_at_ms,
    })
}

fn wall_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl LeaseStore for LeaseTable {
    async fn ensure(&self, keys: &[String]) -> Result<(), StoreError> {
        let existing: Vec<String> = self
            .all()
            .await?
            .into_iter()
            .map(|l| l.record.key)
            .collect();
        // Every missing lease is tried, and the first failure reported once all have been: on a
        // throttled lease table each attempt keeps what it created, and the next creates the rest.
        let mut failed = None;
        for key in keys.iter().filter(|k| !existing.contains(k)) {
            let put = self
                .dynamo
                .write
                .put_item()
                .table_name(&self.name)
                .set_item(Some(self.key_of(key)))
                .item(COUNTER, AttributeValue::N("0".into()))
                .condition_expression("attribute_not_exists(#l)")
                .expression_attribute_names("#l", LEASE)
                .send()
                .await;
            match put {
                Ok(_) => {}
                // Another worker created it first.
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|se| se.is_conditional_check_failed_exception()) => {}
                Err(e) => {
                    let e = store_error("PutItem", e);
                    if e.class == ErrorClass::Fatal {
                        return Err(e);
                    }
                    failed.get_or_insert(e);
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }

    async fn list(&self, keys: &[String]) -> Result<Vec<LeaseRecord>, StoreError> {
        Ok(self
            .all()
            .await?
            .into_iter()
            .map(|l| l.record)
            .filter(|r| keys.contains(&r.key))
            .collect())
    }

    async fn write(
        &self,
        key: &str,
        expected: u64,
        owner: Option<&str>,
    ) -> Result<bool, StoreError> {
        let update = self
            .dynamo
            .write
            .update_item()
            .table_name(&self.name)
            .set_key(Some(self.key_of(key)))
            .condition_expression("#c = :expected")
            .expression_attribute_names("#c", COUNTER)
            .expression_attribute_names("#o", OWNER)
            .expression_attribute_names("#r", RENEWED_AT)
            .expression_attribute_values(":expected", AttributeValue::N(expected.to_string()))
            .expression_attribute_values(":next", AttributeValue::N((expected + 1).to_string()))
            .expression_attribute_values(":now", AttributeValue::N(wall_ms().to_string()));
        let update = match owner {
            Some(o) => update
                .update_expression("SET #c = :next, #o = :owner, #r = :now")
                .expression_attribute_values(":owner", AttributeValue::S(o.to_string())),
            None => update.update_expression("SET #c = :next, #r = :now REMOVE #o"),
        };
        match update.send().await {
            Ok(_) => Ok(true),
            Err(e)
                if e.as_service_error()
                    .is_some_and(|se| se.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(e) => Err(store_error("UpdateItem", e)),
        }
    }
}
