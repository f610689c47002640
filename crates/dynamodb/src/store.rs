//! The engine's [`ExpiryStore`] on DynamoDB: a Query on the sparse expiry index and a
//! conditional DeleteItem per item.

use crate::connect::Dynamo;
use crate::error::{AdapterError, store_error};
use crate::item::ItemKey;
use crate::table::TableShape;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{DueWindow, ErrorClass, Expiry, Shard, TtlLayout};
use precise_ttl_engine::{DeleteOutcome, DueItem, DuePage, ExpiryStore, StoreError};
use std::collections::HashMap;

// `ttl` is a reserved word in DynamoDB expressions, so every name goes through a placeholder.
const KEY_CONDITION: &str = "#shard = :shard AND #ttl BETWEEN :oldest AND :now";
// BETWEEN on Number operands is false for a String or missing attribute; `attribute_type` says
// the rule out loud rather than leaning on that.
const DELETE_CONDITION: &str = "attribute_type(#ttl, :number) AND #ttl BETWEEN :oldest AND :now";

/// Sweeps one table through its expiry index.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    dynamo: Dynamo,
    table: String,
    layout: TtlLayout,
    key_names: Vec<String>,
}

impl DynamoStore {
    /// Checks the table and its index, then returns a store ready to sweep.
    pub async fn open(
        dynamo: Dynamo,
        table: &str,
        layout: TtlLayout,
    ) -> Result<Self, AdapterError> {
        let shape = TableShape::require(&dynamo, table).await?;
        shape.ensure_sweepable(&layout)?;
        Ok(DynamoStore {
            dynamo,
            table: table.to_string(),
            key_names: shape.key_names(),
            layout,
        })
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn layout(&self) -> &TtlLayout {
        &self.layout
    }

    fn names(&self) -> HashMap<String, String> {
        HashMap::from([("#ttl".to_string(), self.layout.ttl_attribute.clone())])
    }
}

fn number(text: String) -> AttributeValue {
    AttributeValue::N(text)
}

impl ExpiryStore for DynamoStore {
    type Key = ItemKey;
    type Cursor = HashMap<String, AttributeValue>;

    async fn due_page(
        &self,
        shard: Shard,
        window: DueWindow,
        cursor: Option<Self::Cursor>,
        limit: u32,
    ) -> Result<DuePage<ItemKey, Self::Cursor>, StoreError> {
        let mut names = self.names();
        names.insert("#shard".into(), self.layout.shard_attribute.clone());
        let out = self
            .dynamo
            .query
            .query()
            .table_name(&self.table)
            .index_name(&self.layout.index_name)
            .key_condition_expression(KEY_CONDITION)
            .set_expression_attribute_names(Some(names))
            .expression_attribute_values(":shard", number(shard.0.to_string()))
            .expression_attribute_values(":oldest", number(window.oldest.to_epoch_seconds_text()))
            .expression_attribute_values(":now", number(window.until.to_epoch_seconds_text()))
            .set_exclusive_start_key(cursor)
            .limit(i32::try_from(limit).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| store_error("Query", e))?;
        let mut items = Vec::with_capacity(out.items().len());
        for raw in out.items() {
            let expiry = match raw.get(&self.layout.ttl_attribute) {
                Some(AttributeValue::N(n)) => Expiry::parse_number(n).ok(),
                _ => None,
            };
            let key: Option<Vec<_>> = self
                .key_names
                .iter()
                .map(|name| raw.get(name).map(|v| (name.clone(), v.clone())))
                .collect();
            match (key, expiry) {
                (Some(key), Some(expiry)) => items.push(DueItem {
                    key: ItemKey(key),
                    expiry,
                }),
                _ => {
                    // The index only holds Number sort keys, so this means the index's key
                    // schema is not what we checked at open: refuse to guess.
                    return Err(StoreError::new(
                        ErrorClass::Fatal,
                        format!(
                            "index {:?} returned an entry without the table key or a Number {:?}",
                            self.layout.index_name, self.layout.ttl_attribute
                        ),
                    ));
                }
            }
        }
        Ok(DuePage {
            items,
            next: out.last_evaluated_key,
        })
    }

    async fn delete_if_due(
        &self,
        key: &ItemKey,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        let result = self
            .dynamo
            .write
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(key.to_map()))
            .condition_expression(DELETE_CONDITION)
            .set_expression_attribute_names(Some(self.names()))
            .expression_attribute_values(":number", AttributeValue::S("N".into()))
            .expression_attribute_values(":oldest", number(window.oldest.to_epoch_seconds_text()))
            .expression_attribute_values(":now", number(window.until.to_epoch_seconds_text()))
            .send()
            .await;
        match result {
            Ok(_) => Ok(DeleteOutcome::Deleted),
            Err(e) => {
                let err = store_error("DeleteItem", e);
                if err.class == ErrorClass::ConditionFailed {
                    Ok(DeleteOutcome::NotDue)
                } else {
                    Err(err)
                }
            }
        }
    }
}
