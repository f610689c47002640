//! Reading a whole table for adoption work: parallel Scan segments that return each item's key,
//! TTL and shard (for `backfill` and `doctor`), and the conditional write that gives an item its
//! shard without ever overwriting a concurrent change.

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{ErrorClass, Shard, TtlLayout};
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::{AdapterError, store_error};
use precise_ttl_dynamodb::item::ItemKey;
use precise_ttl_dynamodb::table::TableShape;
use precise_ttl_engine::StoreError;
use std::collections::HashMap;

/// Where a segment's Scan stopped: DynamoDB's LastEvaluatedKey.
pub type ScanCursor = HashMap<String, AttributeValue>;

/// One of `total` parallel Scan segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub index: u32,
    pub total: u32,
}

/// Which items a scan returns. Filtering happens on the server, so it saves bandwidth, not read
/// capacity: a Scan pays for every item it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanFilter {
    /// Items with a TTL attribute (of any type) and no shard attribute: what `backfill` indexes.
    TtlWithoutShard,
    /// Items with a TTL or a shard attribute: what `doctor` inspects.
    TtlOrShard,
    /// Items with a TTL attribute (of any type): what the expiry queue's backfill indexes.
    Ttl,
}

/// An item as the adoption tools see it.
#[derive(Debug, Clone)]
pub struct ScannedItem {
    pub key: ItemKey,
    pub ttl: Option<AttributeValue>,
    pub shard: Option<AttributeValue>,
}

#[derive(Debug)]
pub struct ScanPage {
    pub items: Vec<ScannedItem>,
    /// Items the page read, before the filter.
    pub scanned: u64,
    pub next: Option<ScanCursor>,
}

/// What a conditional shard write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardWrite {
    Added,
    /// The item changed since it was read: it got a shard from someone else, lost its TTL or its
    /// Number TTL, or was deleted. Left as it is.
    Changed,
}

/// Scans one table and writes shard attributes.
#[derive(Debug, Clone)]
pub struct TableScan {
    dynamo: Dynamo,
    table: String,
    layout: TtlLayout,
    shape: TableShape,
}

impl TableScan {
    pub async fn open(
        dynamo: Dynamo,
        table: &str,
        layout: TtlLayout,
    ) -> Result<Self, AdapterError> {
        let shape = TableShape::require(&dynamo, table).await?;
        for (attribute, role) in [
            (&layout.ttl_attribute, "TTL"),
            (&layout.shard_attribute, "shard"),
        ] {
            if shape.key_names().contains(attribute) {
                return Err(AdapterError::KeyAttribute {
                    table: table.to_string(),
                    attribute: attribute.clone(),
                    role,
                });
            }
        }
        Ok(TableScan {
            dynamo,
            table: table.to_string(),
            layout,
            shape,
        })
    }

    pub fn shape(&self) -> &TableShape {
        &self.shape
    }

    pub fn layout(&self) -> &TtlLayout {
        &self.layout
    }

    pub async fn page(
        &self,
        segment: Segment,
        filter: ScanFilter,
        cursor: Option<ScanCursor>,
        limit: u32,
    ) -> Result<ScanPage, StoreError> {
        let key_names = self.shape.key_names();
        let mut names = HashMap::from([
            ("#ttl".to_string(), self.layout.ttl_attribute.clone()),
            ("#shard".to_string(), self.layout.shard_attribute.clone()),
        ]);
        let mut projection = vec!["#ttl".to_string(), "#shard".to_string()];
        for (i, name) in key_names.iter().enumerate() {
            names.insert(format!("#k{i}"), name.clone());
            projection.push(format!("#k{i}"));
        }
        let filter = match filter {
            ScanFilter::TtlWithoutShard => {
                "attribute_exists(#ttl) AND attribute_not_exists(#shard)"
            }
            ScanFilter::TtlOrShard => "attribute_exists(#ttl) OR attribute_exists(#shard)",
            ScanFilter::Ttl => "attribute_exists(#ttl)",
        };
        let out = self
            .dynamo
            .query
            .scan()
            .table_name(&self.table)
            .segment(segment.index as i32)
            .total_segments(segment.total as i32)
            .filter_expression(filter)
            .projection_expression(projection.join(", "))
            .set_expression_attribute_names(Some(names))
            .set_exclusive_start_key(cursor)
            .limit(i32::try_from(limit).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(|e| store_error("Scan", e))?;
        let items = out
            .items()
            .iter()
            .filter_map(|raw| {
                let key: Option<Vec<_>> = key_names
                    .iter()
                    .map(|n| raw.get(n).map(|v| (n.clone(), v.clone())))
                    .collect();
                Some(ScannedItem {
                    key: ItemKey::new(key?),
                    ttl: raw.get(&self.layout.ttl_attribute).cloned(),
                    shard: raw.get(&self.layout.shard_attribute).cloned(),
                })
            })
            .collect();
        Ok(ScanPage {
            items,
            scanned: out.scanned_count.max(0) as u64,
            next: out.last_evaluated_key,
        })
    }

    /// Sets the shard of an item that still exists, still has a Number TTL and still has no
    /// shard. UpdateItem on a missing key would create an item; the condition rules that out too.
    pub async fn add_shard(&self, key: &ItemKey, shard: Shard) -> Result<ShardWrite, StoreError> {
        let partition = &self.shape.key_names()[0];
        let result = self
            .dynamo
            .write
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key.to_map()))
            .update_expression("SET #shard = :shard")
            .condition_expression(
                "attribute_exists(#pk) AND attribute_type(#ttl, :number) AND attribute_not_exists(#shard)",
            )
            .expression_attribute_names("#pk", partition)
            .expression_attribute_names("#ttl", &self.layout.ttl_attribute)
            .expression_attribute_names("#shard", &self.layout.shard_attribute)
            .expression_attribute_values(":shard", AttributeValue::N(shard.0.to_string()))
            .expression_attribute_values(":number", AttributeValue::S("N".into()))
            .send()
            .await;
        match result {
            Ok(_) => Ok(ShardWrite::Added),
            Err(e) => {
                let err = store_error("UpdateItem", e);
                if err.class == ErrorClass::ConditionFailed {
                    Ok(ShardWrite::Changed)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Native TTL's status (`ENABLED`, `DISABLED`, ...) and attribute.
    pub async fn native_ttl(&self) -> Result<(String, Option<String>), AdapterError> {
        let out = self
            .dynamo
            .query
            .describe_time_to_live()
            .table_name(&self.table)
            .send()
            .await
            .map_err(|e| {
                AdapterError::from_sdk("DescribeTimeToLive", &self.dynamo.describe_endpoint(), e)
            })?;
        let d = out.time_to_live_description();
        Ok((
            d.and_then(|d| d.time_to_live_status())
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|| "DISABLED".into()),
            d.and_then(|d| d.attribute_name()).map(str::to_string),
        ))
    }
}

/// A cursor as `(name, type, text)` triples, for a checkpoint file; Binary values as hex.
pub fn encode_cursor(cursor: &ScanCursor) -> Vec<(String, String, String)> {
    let mut out: Vec<_> = cursor
        .iter()
        .map(|(name, v)| {
            let (t, text) = match v {
                AttributeValue::S(s) => ("S", s.clone()),
                AttributeValue::N(n) => ("N", n.clone()),
                AttributeValue::B(b) => (
                    "B",
                    b.as_ref()
                        .iter()
                        .map(|byte| format!("{byte:02x}"))
                        .collect(),
                ),
                other => ("?", format!("{other:?}")),
            };
            (name.clone(), t.to_string(), text)
        })
        .collect();
    out.sort();
    out
}

/// The inverse of [`encode_cursor`]; `None` for anything it did not write.
pub fn decode_cursor(parts: &[(String, String, String)]) -> Option<ScanCursor> {
    parts
        .iter()
        .map(|(name, t, text)| {
            let v = match t.as_str() {
                "S" => AttributeValue::S(text.clone()),
                "N" => AttributeValue::N(text.clone()),
                "B" => {
                    if text.len() % 2 != 0 {
                        return None;
                    }
                    let bytes: Option<Vec<u8>> = (0..text.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
                        .collect();
                    AttributeValue::B(Blob::new(bytes?))
                }
                _ => return None,
            };
            Some((name.clone(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_survive_a_checkpoint_file() {
        let cursor = HashMap::from([
            ("pk".to_string(), AttributeValue::S("a\"b".into())),
            ("sk".to_string(), AttributeValue::N("-1.5".into())),
            (
                "b".to_string(),
                AttributeValue::B(Blob::new(vec![0, 15, 255])),
            ),
        ]);
        let encoded = encode_cursor(&cursor);
        assert_eq!(decode_cursor(&encoded), Some(cursor));
        assert_eq!(
            decode_cursor(&[("b".into(), "B".into(), "0g".into())]),
            None
        );
        assert_eq!(decode_cursor(&[("x".into(), "L".into(), "".into())]), None);
    }
}
