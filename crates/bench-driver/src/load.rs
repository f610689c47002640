//! The bench table's own I/O: creating it (and the blog's index), extending TTLs on schedule,
//! and listing what is left. Writing items in bulk is the product's tooling
//! ([`precise_ttl_dynamodb::bulk`]), shared with the demo.

use crate::config::Provisioned;
use crate::error::BenchError;
use crate::items::{ItemWriter, epoch_seconds};
use crate::plan::Extension;
use aws_sdk_dynamodb::error::DisplayErrorContext;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::{
    BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndexUpdate, KeyType, Projection,
    ProjectionType, ProvisionedThroughput, ScalarAttributeType,
};
use precise_ttl_dynamodb::Dynamo;
use precise_ttl_dynamodb::table::{attribute, key_element};
use precise_ttl_engine::{Clock, SystemClock};
use std::collections::HashSet;
use std::time::Duration;

/// A table keyed by `key_attribute` (String), on demand, without any index.
pub async fn create_bare(
    dynamo: &Dynamo,
    table: &str,
    key_attribute: &str,
) -> Result<(), BenchError> {
    create_table(dynamo, table, key_attribute, None).await
}

/// A table keyed by `key_attribute` (String), without any index: on demand, or provisioned with
/// `provisioned`'s units.
pub async fn create_table(
    dynamo: &Dynamo,
    table: &str,
    key_attribute: &str,
    provisioned: Option<Provisioned>,
) -> Result<(), BenchError> {
    let definition = attribute(key_attribute, ScalarAttributeType::S);
    let key = key_element(key_attribute, KeyType::Hash);
    let create = dynamo.query.create_table().table_name(table);
    let create = match provisioned {
        None => create.billing_mode(BillingMode::PayPerRequest),
        Some(p) => create
            .billing_mode(BillingMode::Provisioned)
            .provisioned_throughput(
                ProvisionedThroughput::builder()
                    .read_capacity_units(i64::try_from(p.read).unwrap_or(i64::MAX))
                    .write_capacity_units(i64::try_from(p.write).unwrap_or(i64::MAX))
                    .build()
                    .map_err(|e| BenchError::call("creating the bench table", e))?,
            ),
    };
    create
        .attribute_definitions(definition)
        .key_schema(key)
        .send()
        .await
        .map_err(|e| BenchError::call("creating the bench table", DisplayErrorContext(e)))?;
    Ok(())
}

/// The 2022 blog's index on the bench table: (window label String, TTL Number), every
/// attribute projected, as the blog's template creates it; returns once it is ACTIVE.
pub async fn create_blog_index(
    dynamo: &Dynamo,
    table: &str,
    index: &str,
    window_attribute: &str,
    ttl_attribute: &str,
) -> Result<(), BenchError> {
    let what = "creating the blog's window index";
    let create = CreateGlobalSecondaryIndexAction::builder()
        .index_name(index)
        .key_schema(key_element(window_attribute, KeyType::Hash))
        .key_schema(key_element(ttl_attribute, KeyType::Range))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::All)
                .build(),
        )
        .build()
        .map_err(|e| BenchError::call(what, e))?;
    dynamo
        .query
        .update_table()
        .table_name(table)
        .attribute_definitions(attribute(window_attribute, ScalarAttributeType::S))
        .attribute_definitions(attribute(ttl_attribute, ScalarAttributeType::N))
        .global_secondary_index_updates(
            GlobalSecondaryIndexUpdate::builder().create(create).build(),
        )
        .send()
        .await
        .map_err(|e| BenchError::call(what, DisplayErrorContext(e)))?;
    loop {
        let described = dynamo
            .query
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| BenchError::call(what, DisplayErrorContext(e)))?;
        let active = described
            .table()
            .map(|t| t.global_secondary_indexes())
            .unwrap_or_default()
            .iter()
            .any(|i| {
                i.index_name() == Some(index)
                    && i.index_status().is_some_and(|s| s.as_str() == "ACTIVE")
            });
        if active {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One write the bench sent during the run: the extension of `key`'s TTL, as the store took it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentWrite {
    /// When the attempt the store took was sent, epoch ms (throttled attempts took nothing).
    pub at_ms: i64,
    pub key: String,
    pub shard: Option<u16>,
    /// Whether it changed the item (false: its condition failed, the item was gone).
    pub changed: bool,
}

impl SentWrite {
    /// The write as capacity the physical bound counts: one table write unit (the bench's items
    /// are far below 1 KB), and, when it changed the item, two on its shard's index partition:
    /// a new TTL is a new sort key, so the index deletes the old entry and puts the new one (as
    /// DynamoDB and the simulator charge it). A write whose condition failed costs the table's
    /// unit and leaves the index alone. `table_partition`: where the store keeps the item, when
    /// known.
    pub fn app_write(&self, table_partition: Option<u32>) -> precise_ttl_bench::AppWrite {
        let index = self.shard.filter(|_| self.changed).map(u32::from);
        precise_ttl_bench::AppWrite {
            at_ms: self.at_ms,
            partitions: [table_partition, index],
            units: [1, if index.is_some() { 2 } else { 0 }],
        }
    }
}

/// At each planned instant, pushes that key's TTL an hour later (a writer renewing an item).
/// Returns each write as the store took it, for the physical bound.
pub async fn extend_ttls(
    dynamo: Dynamo,
    table: String,
    items: ItemWriter,
    plan: Vec<Extension>,
) -> Result<Vec<SentWrite>, BenchError> {
    // One task per extension, each at its own time: one after the other, a slow store (a loaded
    // CI machine) made the later ones late, after their items' original TTL, and the sweeper then
    // rightly deleted items the report counted as wrongly deleted.
    let mut tasks = tokio::task::JoinSet::new();
    for Extension { at, key, shard } in plan {
        let (dynamo, table, items) = (dynamo.clone(), table.clone(), items.clone());
        tasks.spawn(async move {
            let wait = at.millis_since(SystemClock.now());
            if wait > 0 {
                tokio::time::sleep(Duration::from_millis(wait as u64)).await;
            }
            let later = SystemClock.now().saturating_add(Duration::from_secs(3600));
            let (name, value) = items.key(&key);
            // Retried while the store throttles it (a simulated table at its limit does), and
            // only if the item still exists: an unconditional retry could re-create an item the
            // sweeper has rightly deleted meanwhile.
            loop {
                let sent_at = SystemClock.now().as_millis();
                let write = |changed| SentWrite {
                    at_ms: sent_at,
                    key: key.clone(),
                    shard,
                    changed,
                };
                let sent = dynamo
                    .write
                    .update_item()
                    .table_name(&table)
                    .key(name.clone(), value.clone())
                    .update_expression("SET #t = :t")
                    .condition_expression("attribute_exists(#k)")
                    .expression_attribute_names("#t", &items.ttl_attribute)
                    .expression_attribute_names("#k", &name)
                    .expression_attribute_values(":t", epoch_seconds(later))
                    .send()
                    .await;
                match sent {
                    Ok(_) => return Ok(write(true)),
                    Err(e)
                        if e.as_service_error()
                            .is_some_and(|s| s.is_conditional_check_failed_exception()) =>
                    {
                        return Ok(write(false));
                    }
                    Err(e)
                        if e.as_service_error().is_some_and(|s| {
                            s.meta().code() == Some("ThrottlingException")
                                || s.is_provisioned_throughput_exceeded_exception()
                        }) =>
                    {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    Err(e) => {
                        return Err(BenchError::call("extending a TTL", DisplayErrorContext(e)));
                    }
                }
            }
        });
    }
    let mut sent = Vec::new();
    while let Some(done) = tasks.join_next().await {
        sent.push(done??);
    }
    sent.sort_by_key(|w: &SentWrite| w.at_ms);
    Ok(sent)
}

/// Every key still in the table (consistent reads). A page the store refuses for lack of read
/// capacity (a provisioned table) is asked again after a pause.
pub async fn scan_keys(
    dynamo: &Dynamo,
    table: &str,
    key_attribute: &str,
) -> Result<HashSet<String>, BenchError> {
    let mut keys = HashSet::new();
    let mut start = None;
    loop {
        let sent = dynamo
            .query
            .scan()
            .table_name(table)
            .projection_expression("#k")
            .expression_attribute_names("#k", key_attribute)
            .consistent_read(true)
            .set_exclusive_start_key(start.clone())
            .send()
            .await;
        let out = match sent {
            Ok(out) => out,
            Err(e)
                if crate::app::is_refusal(e.as_service_error().and_then(|s| s.meta().code())) =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            Err(e) => {
                return Err(BenchError::call(
                    "scanning what is left",
                    DisplayErrorContext(e),
                ));
            }
        };
        for i in out.items() {
            if let Some(AttributeValue::S(k)) = i.get(key_attribute) {
                keys.insert(k.clone());
            }
        }
        start = out.last_evaluated_key;
        if start.is_none() {
            return Ok(keys);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_extension_takes_a_table_unit_and_two_on_its_index_partition_if_it_changed_the_item() {
        let sent = SentWrite {
            at_ms: 5,
            key: "k".into(),
            shard: Some(3),
            changed: true,
        };
        let w = sent.app_write(Some(9));
        assert_eq!(
            (w.at_ms, w.partitions, w.units),
            (5, [Some(9), Some(3)], [1, 2])
        );
        let failed = SentWrite {
            changed: false,
            ..sent
        };
        assert_eq!(failed.app_write(None).units, [1, 0]);
        assert_eq!(failed.app_write(None).partitions, [None, None]);
    }
}
