//! What a table looks like, read once from DescribeTable, and whether precise-ttl can sweep it;
//! the key attributes' definitions CreateTable and UpdateTable take.

use crate::connect::Dynamo;
use crate::error::AdapterError;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, KeySchemaElement, KeyType as AwsKeyRole, ScalarAttributeType,
    TableDescription,
};
use precise_ttl_core::TtlLayout;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// Key attribute `name` of type `kind`, as CreateTable and UpdateTable define it.
pub fn attribute(name: &str, kind: ScalarAttributeType) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(kind)
        .build()
        .expect("name and type are set")
}

/// Key attribute `name` in a key schema, as the partition key (`Hash`) or the sort key
/// (`Range`).
pub fn key_element(name: &str, role: AwsKeyRole) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(role)
        .build()
        .expect("name and role are set")
}

/// The type of a key attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyType {
    S,
    N,
    B,
}

impl KeyType {
    pub fn to_aws(self) -> ScalarAttributeType {
        match self {
            KeyType::S => ScalarAttributeType::S,
            KeyType::N => ScalarAttributeType::N,
            KeyType::B => ScalarAttributeType::B,
        }
    }

    fn from_aws(t: &ScalarAttributeType) -> Option<KeyType> {
        match t {
            ScalarAttributeType::S => Some(KeyType::S),
            ScalarAttributeType::N => Some(KeyType::N),
            ScalarAttributeType::B => Some(KeyType::B),
            _ => None,
        }
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyType::S => "S",
            KeyType::N => "N",
            KeyType::B => "B",
        })
    }
}

/// A key attribute: a name and a type, written `NAME[:S|N|B]` on the command line (S by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyAttribute {
    pub name: String,
    pub kind: KeyType,
}

impl FromStr for KeyAttribute {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, kind) = match s.rsplit_once(':') {
            Some((name, t)) => {
                let kind = match t.to_ascii_uppercase().as_str() {
                    "S" => KeyType::S,
                    "N" => KeyType::N,
                    "B" => KeyType::B,
                    _ => return Err(format!("key type {t:?} is not one of S, N, B (in {s:?})")),
                };
                (name, kind)
            }
            None => (s, KeyType::S),
        };
        if name.is_empty() || name.len() > 255 {
            return Err(format!(
                "key attribute name in {s:?} must have 1 to 255 characters"
            ));
        }
        Ok(KeyAttribute {
            name: name.to_string(),
            kind,
        })
    }
}

impl fmt::Display for KeyAttribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.kind)
    }
}

/// One global secondary index, as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexShape {
    pub name: String,
    pub partition: Option<String>,
    pub sort: Option<String>,
    pub projection: String,
    pub status: String,
    /// Read and write capacity when the table is provisioned; `None` when on demand.
    pub provisioned: Option<(i64, i64)>,
}

/// The parts of a table description precise-ttl cares about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableShape {
    pub name: String,
    pub status: String,
    pub partition: KeyAttribute,
    pub sort: Option<KeyAttribute>,
    /// Every attribute definition: table keys and index keys, with their types.
    pub attribute_types: BTreeMap<String, String>,
    pub indexes: Vec<IndexShape>,
    /// Read and write capacity when the table is provisioned; `None` when on demand.
    pub provisioned: Option<(i64, i64)>,
    /// DynamoDB's item count: approximate (refreshed about every six hours), for progress only.
    pub item_count: Option<u64>,
    /// An on-demand table's maximum write request units/s (`OnDemandThroughput`), if set.
    pub on_demand_max_write: Option<i64>,
}

impl TableShape {
    /// Describes `table`; `Ok(None)` when it does not exist.
    pub async fn describe(
        dynamo: &Dynamo,
        table: &str,
    ) -> Result<Option<TableShape>, AdapterError> {
        // A missing table is an answer, not a failure to retry.
        let backoff = precise_ttl_core::Backoff {
            base: std::time::Duration::from_millis(100),
            cap: std::time::Duration::from_secs(2),
            max_attempts: 8,
        };
        let endpoint = dynamo.describe_endpoint();
        crate::error::again_if_transient(&backoff, || async {
            match dynamo.query.describe_table().table_name(table).send().await {
                Ok(out) => Ok(out.table.as_ref().map(Self::from_description)),
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|se| se.is_resource_not_found_exception()) =>
                {
                    Ok(None)
                }
                Err(e) => Err(AdapterError::from_sdk("DescribeTable", &endpoint, e)),
            }
        })
        .await
    }

    /// Describes `table`, which must exist.
    pub async fn require(dynamo: &Dynamo, table: &str) -> Result<TableShape, AdapterError> {
        Self::describe(dynamo, table)
            .await?
            .ok_or_else(|| AdapterError::TableNotFound {
                table: table.to_string(),
                endpoint: dynamo.describe_endpoint(),
            })
    }

    fn from_description(d: &TableDescription) -> TableShape {
        let on_demand = d
            .billing_mode_summary()
            .and_then(|b| b.billing_mode())
            .is_some_and(|m| m.as_str() == "PAY_PER_REQUEST");
        // An on-demand table's indexes report 0 and 0 where the billing mode is not given.
        let capacity = |p: Option<&aws_sdk_dynamodb::types::ProvisionedThroughputDescription>| {
            p.and_then(|p| {
                let r = p.read_capacity_units().unwrap_or(0);
                let w = p.write_capacity_units().unwrap_or(0);
                (!on_demand && (r > 0 || w > 0)).then_some((r, w))
            })
        };
        let attribute_types: BTreeMap<String, String> = d
            .attribute_definitions()
            .iter()
            .map(|a| {
                (
                    a.attribute_name().to_string(),
                    a.attribute_type().as_str().to_string(),
                )
            })
            .collect();
        let key = |role: AwsKeyRole| {
            d.key_schema()
                .iter()
                .find(|k| *k.key_type() == role)
                .map(|k| {
                    let name = k.attribute_name().to_string();
                    let kind = d
                        .attribute_definitions()
                        .iter()
                        .find(|a| a.attribute_name() == name)
                        .and_then(|a| KeyType::from_aws(a.attribute_type()))
                        .unwrap_or(KeyType::S);
                    KeyAttribute { name, kind }
                })
        };
        let indexes = d
            .global_secondary_indexes()
            .iter()
            .map(|g| {
                let part = |role: AwsKeyRole| {
                    g.key_schema()
                        .iter()
                        .find(|k| *k.key_type() == role)
                        .map(|k| k.attribute_name().to_string())
                };
                IndexShape {
                    name: g.index_name().unwrap_or_default().to_string(),
                    partition: part(AwsKeyRole::Hash),
                    sort: part(AwsKeyRole::Range),
                    projection: g
                        .projection()
                        .and_then(|p| p.projection_type())
                        .map(|p| p.as_str().to_string())
                        .unwrap_or_else(|| "ALL".into()),
                    status: g
                        .index_status()
                        .map(|s| s.as_str().to_string())
                        .unwrap_or_else(|| "UNKNOWN".into()),
                    provisioned: capacity(g.provisioned_throughput()),
                }
            })
            .collect();
        let provisioned = capacity(d.provisioned_throughput());
        TableShape {
            name: d.table_name().unwrap_or_default().to_string(),
            status: d
                .table_status()
                .map(|s| s.as_str().to_string())
                .unwrap_or_else(|| "UNKNOWN".into()),
            partition: key(AwsKeyRole::Hash).unwrap_or(KeyAttribute {
                name: String::new(),
                kind: KeyType::S,
            }),
            sort: key(AwsKeyRole::Range),
            attribute_types,
            indexes,
            provisioned,
            item_count: d.item_count.map(|n| n.max(0) as u64),
            on_demand_max_write: d
                .on_demand_throughput()
                .and_then(|o| o.max_write_request_units())
                .filter(|n| *n > 0),
        }
    }

    /// The table's write capacity: provisioned, the on-demand maximum, or AWS's default
    /// per-table limit on demand.
    pub fn write_capacity(&self) -> precise_ttl_core::capacity::WriteCapacity {
        use precise_ttl_core::capacity::WriteCapacity;
        match (self.provisioned, self.on_demand_max_write) {
            (Some((_, w)), _) => WriteCapacity::Provisioned(w.max(1) as u64),
            (None, Some(max)) => WriteCapacity::OnDemandMax(max as u64),
            (None, None) => WriteCapacity::OnDemandDefault,
        }
    }

    /// The names of the primary key attributes, partition key first.
    pub fn key_names(&self) -> Vec<String> {
        std::iter::once(self.partition.name.clone())
            .chain(self.sort.as_ref().map(|s| s.name.clone()))
            .collect()
    }

    pub fn describe_key(&self) -> String {
        match &self.sort {
            Some(s) => format!("{} + {}", self.partition, s),
            None => self.partition.to_string(),
        }
    }

    /// The expiry index, if one of that name exists with the right keys.
    pub fn expiry_index(&self, layout: &TtlLayout) -> Result<Option<&IndexShape>, AdapterError> {
        self.index_keyed(layout, "N")
    }

    /// An index on (`layout.shard_attribute` of type `partition_type`, `layout.ttl_attribute`
    /// of type N): ours with "N", the blog's window index with "S".
    pub fn index_keyed(
        &self,
        layout: &TtlLayout,
        partition_type: &str,
    ) -> Result<Option<&IndexShape>, AdapterError> {
        let Some(index) = self.indexes.iter().find(|i| i.name == layout.index_name) else {
            return Ok(None);
        };
        let type_of = |a: &Option<String>| {
            a.as_ref()
                .and_then(|n| self.attribute_types.get(n))
                .map(String::as_str)
                .unwrap_or("?")
        };
        let right = index.partition.as_deref() == Some(layout.shard_attribute.as_str())
            && index.sort.as_deref() == Some(layout.ttl_attribute.as_str())
            && type_of(&index.partition) == partition_type
            && type_of(&index.sort) == "N";
        if right {
            return Ok(Some(index));
        }
        let show = |a: &Option<String>| match a {
            Some(n) => format!("{n} ({})", type_of(a)),
            None => "none".into(),
        };
        Err(AdapterError::IndexSchema {
            table: self.name.clone(),
            index: index.name.clone(),
            expected: format!(
                "partition key {} ({partition_type}) and sort key {} (N)",
                layout.shard_attribute, layout.ttl_attribute
            ),
            found: format!(
                "partition key {} and sort key {}",
                show(&index.partition),
                show(&index.sort)
            ),
        })
    }

    /// Checks that the expiry index exists with the right schema and is ACTIVE.
    pub fn ensure_sweepable(&self, layout: &TtlLayout) -> Result<(), AdapterError> {
        self.ensure_sweepable_keyed(layout, "N")
    }

    pub fn ensure_sweepable_keyed(
        &self,
        layout: &TtlLayout,
        partition_type: &str,
    ) -> Result<(), AdapterError> {
        match self.index_keyed(layout, partition_type)? {
            None => Err(AdapterError::IndexMissing {
                table: self.name.clone(),
                index: layout.index_name.clone(),
            }),
            Some(i) if i.status != "ACTIVE" => Err(AdapterError::IndexNotActive {
                table: self.name.clone(),
                index: i.name.clone(),
                status: i.status.clone(),
            }),
            Some(_) => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_key_attributes() {
        assert_eq!(
            "pk".parse::<KeyAttribute>().unwrap(),
            KeyAttribute {
                name: "pk".into(),
                kind: KeyType::S
            }
        );
        assert_eq!("id:n".parse::<KeyAttribute>().unwrap().kind, KeyType::N);
        assert_eq!("a:b:B".parse::<KeyAttribute>().unwrap().name, "a:b");
        assert!("pk:X".parse::<KeyAttribute>().is_err());
        assert!(":S".parse::<KeyAttribute>().is_err());
    }
}
