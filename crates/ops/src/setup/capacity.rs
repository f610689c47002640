//! The expiry index's provisioned capacity: the choice `setup` asks for on a provisioned table,
//! the figures it suggests, what auto scaling needs, and the write need `doctor` measures.
//!
//! On a provisioned table a new global secondary index needs read and write capacity of its own,
//! and it does not follow the table's auto scaling: it is a scalable target of its own. Setup
//! used to copy the table's full capacity, which can double the provisioned cost, and an index
//! whose writes fall short throttles the table's writes (GSI back-pressure). So the capacity is
//! an explicit choice, and this module has the arithmetic behind the figures suggested for it.
//! Everything here is pure; the count of items due soon is
//! [`crate::status::count_between`] with a page cap.

use precise_ttl_core::TtlLayout;
use precise_ttl_dynamodb::count::DueCount;
use precise_ttl_dynamodb::error::AdapterError;
use precise_ttl_dynamodb::table::TableShape;
use std::time::Duration;

/// Index writes per expiring item: its insert into the index and its delete, one write unit
/// each while the index entry (keys only: the table's key, shard, TTL, ~100 bytes of overhead)
/// stays under 1 KB.
pub const WRITE_UNITS_PER_EXPIRY: f64 = 2.0;

/// Read units of one Query of an empty or small range: an eventually consistent read (index
/// queries always are) of up to 4 KB costs half a unit.
pub const READ_UNITS_PER_POLL: f64 = 0.5;

/// The poll interval the read suggestion assumes: `run`'s default `--poll-interval`.
pub const ASSUMED_POLL: Duration = Duration::from_secs(1);

/// How far ahead `doctor` counts expiries to estimate the rate.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Provisioned read and write units per second of an index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexCapacity {
    pub read: i64,
    pub write: i64,
}

/// What setup does about the expiry index's capacity, decided before it changes anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexPlan {
    /// The index exists: setup leaves it, capacity included. `capacity`: its provisioned
    /// capacity, `None` when on demand. `requested`: a capacity asked for and not applied.
    Present {
        capacity: Option<IndexCapacity>,
        requested: Option<IndexCapacity>,
    },
    /// The table is (or will be created) on demand: the index is billed per request.
    OnDemand,
    /// The index will be added to a provisioned table with `capacity`.
    Provisioned {
        table: String,
        index: String,
        capacity: IndexCapacity,
        /// The table's own provisioned capacity, for comparison.
        table_capacity: IndexCapacity,
    },
}

/// The figures suggested for a new index on a table with `table_write` write units and
/// `shards` shards.
///
/// Write: the table's write capacity. Every write of an item with a TTL writes the index too,
/// and so does every delete, so the index's writes follow the table's writes of expiring items;
/// less throttles the table through back-pressure, and only a table whose writes are mostly of
/// items without a TTL can do with less.
///
/// Read: one unit per shard. The daemon reads each shard with one Query per poll interval
/// (1 s by default), half a unit each when little is due: `shards × 0.5` units/s, doubled for
/// the keys of due items and the occasional probe of stray shards.
pub fn suggest(table_write: i64, shards: u64) -> IndexCapacity {
    let polls_per_s = 1.0 / ASSUMED_POLL.as_secs_f64();
    let read = (shards as f64 * READ_UNITS_PER_POLL * polls_per_s * 2.0).ceil() as i64;
    IndexCapacity {
        read: read.max(1),
        write: table_write.max(1),
    }
}

/// Decides what setup does about the index's capacity. `shape`: the table, `None` when setup
/// will create it (on demand); `requested`: the capacity asked for, if any. Pure, so setup can
/// refuse before it changes anything.
pub fn plan(
    table: &str,
    shape: Option<&TableShape>,
    layout: &TtlLayout,
    requested: Option<IndexCapacity>,
) -> Result<IndexPlan, AdapterError> {
    let provisioned = shape.and_then(|s| s.provisioned);
    let Some((table_read, table_write)) = provisioned else {
        // Asking for capacity on an on-demand table is a misunderstanding worth stopping for:
        // ignoring it would leave the user believing the index is provisioned.
        return match requested {
            Some(_) => Err(AdapterError::IndexCapacityOnDemand {
                table: table.to_string(),
                created: shape.is_none(),
            }),
            None => Ok(IndexPlan::OnDemand),
        };
    };
    if let Some(shape) = shape
        && shape.expiry_index(layout)?.is_some()
    {
        // Present: capacity is read by `describe_index_capacity` where it is shown; setup
        // never changes an existing index.
        return Ok(IndexPlan::Present {
            capacity: None,
            requested,
        });
    }
    let table_capacity = IndexCapacity {
        read: table_read,
        write: table_write,
    };
    match requested {
        Some(capacity) => Ok(IndexPlan::Provisioned {
            table: table.to_string(),
            index: layout.index_name.clone(),
            capacity,
            table_capacity,
        }),
        None => {
            let suggested = suggest(table_write, u64::from(layout.shards.get()));
            Err(AdapterError::IndexCapacityRequired {
                table: table.to_string(),
                table_read,
                table_write,
                shards: u64::from(layout.shards.get()),
                suggested_read: suggested.read,
                suggested_write: suggested.write,
            })
        }
    }
}

/// The resource id application auto scaling knows an index by.
pub fn scalable_resource_id(table: &str, index: &str) -> String {
    format!("table/{table}/index/{index}")
}

/// The `aws application-autoscaling register-scalable-target` command that makes the index's
/// write capacity (`dimension` "Write") or read capacity ("Read") a scalable target, between
/// `min` and `max` units.
pub fn register_scalable_target_command(
    table: &str,
    index: &str,
    dimension: &str,
    min: i64,
    max: i64,
) -> String {
    format!(
        "aws application-autoscaling register-scalable-target --service-namespace dynamodb --resource-id {} --scalable-dimension dynamodb:index:{dimension}CapacityUnits --min-capacity {min} --max-capacity {max}",
        shell_word(&scalable_resource_id(table, index))
    )
}

/// `s` as one shell word: bare when it has only safe characters (table and index names allow
/// `a-z A-Z 0-9 _ - .`), else single-quoted.
fn shell_word(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The upper bound suggested for the index's scalable target: four times its starting capacity,
/// room to grow with the table; set it to the table's own maximum if the table scales.
pub fn suggested_max(capacity: i64) -> i64 {
    capacity.saturating_mul(4).max(1)
}

/// The index's write need at the measured expiry rate, and whether its capacity covers it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WriteNeed {
    pub expiries_per_s: f64,
    /// Write units per second the index needs: [`WRITE_UNITS_PER_EXPIRY`] per expiring item
    /// (in steady state as many items are written as expire).
    pub needed: f64,
    pub provisioned: i64,
    /// The count stopped at the page cap: the need is at least `needed`.
    pub lower_bound: bool,
}

impl WriteNeed {
    pub fn from_count(count: DueCount, window: Duration, provisioned: i64) -> WriteNeed {
        let expiries_per_s = count.due as f64 / window.as_secs_f64().max(1e-9);
        WriteNeed {
            expiries_per_s,
            needed: expiries_per_s * WRITE_UNITS_PER_EXPIRY,
            provisioned,
            lower_bound: count.capped,
        }
    }

    /// The provisioned write units fall short of the need.
    pub fn short(&self) -> bool {
        (self.provisioned as f64) < self.needed
    }

    /// Write units to provision: the need, rounded up.
    pub fn to_provision(&self) -> i64 {
        (self.needed.ceil() as i64).max(1)
    }
}

/// The expiry index's provisioned capacity; `None` when the table is on demand or the index is
/// missing.
pub fn index_capacity(shape: &TableShape, index: &str) -> Option<IndexCapacity> {
    shape
        .indexes
        .iter()
        .find(|g| g.name == index)
        .and_then(|g| g.provisioned)
        .map(|(read, write)| IndexCapacity { read, write })
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_core::ShardCount;
    use precise_ttl_dynamodb::table::{IndexShape, KeyAttribute, KeyType};

    fn layout(shards: u64) -> TtlLayout {
        TtlLayout {
            shards: ShardCount::new(shards).unwrap(),
            ..TtlLayout::default()
        }
    }

    fn shape(provisioned: Option<(i64, i64)>, with_index: bool) -> TableShape {
        let layout = layout(16);
        TableShape {
            name: "t".into(),
            status: "ACTIVE".into(),
            partition: KeyAttribute {
                name: "pk".into(),
                kind: KeyType::S,
            },
            sort: None,
            attribute_types: [
                ("pk".to_string(), "S".to_string()),
                (layout.shard_attribute.clone(), "N".to_string()),
                (layout.ttl_attribute.clone(), "N".to_string()),
            ]
            .into(),
            indexes: with_index
                .then(|| IndexShape {
                    name: layout.index_name.clone(),
                    partition: Some(layout.shard_attribute.clone()),
                    sort: Some(layout.ttl_attribute.clone()),
                    projection: "KEYS_ONLY".into(),
                    status: "ACTIVE".into(),
                    provisioned,
                })
                .into_iter()
                .collect(),
            provisioned,
            item_count: None,
            on_demand_max_write: None,
        }
    }

    #[test]
    fn suggests_the_tables_writes_and_a_read_unit_per_shard() {
        assert_eq!(
            suggest(250, 16),
            IndexCapacity {
                read: 16,
                write: 250
            }
        );
        // 0.5 units per poll, doubled: 3 shards need 3 units.
        assert_eq!(suggest(5, 3).read, 3);
        assert_eq!(suggest(0, 1), IndexCapacity { read: 1, write: 1 });
    }

    #[test]
    fn a_provisioned_table_without_a_choice_is_refused_with_the_suggestion() {
        let err = plan("t", Some(&shape(Some((40, 300)), false)), &layout(8), None).unwrap_err();
        match &err {
            AdapterError::IndexCapacityRequired {
                suggested_read,
                suggested_write,
                ..
            } => assert_eq!((*suggested_read, *suggested_write), (8, 300)),
            other => panic!("{other}"),
        }
        let message = err.to_string();
        assert!(message.contains("300 write"), "{message}");
        assert!(message.contains("8 read"), "{message}");
    }

    #[test]
    fn a_provisioned_table_with_a_choice_gets_exactly_it() {
        let wanted = IndexCapacity { read: 3, write: 7 };
        let planned = plan(
            "t",
            Some(&shape(Some((40, 300)), false)),
            &layout(16),
            Some(wanted),
        )
        .unwrap();
        assert_eq!(
            planned,
            IndexPlan::Provisioned {
                table: "t".into(),
                index: "precise-ttl".into(),
                capacity: wanted,
                table_capacity: IndexCapacity {
                    read: 40,
                    write: 300
                },
            }
        );
    }

    #[test]
    fn on_demand_refuses_a_capacity_and_needs_none() {
        let on_demand = shape(None, false);
        assert_eq!(
            plan("t", Some(&on_demand), &layout(16), None).unwrap(),
            IndexPlan::OnDemand
        );
        let wanted = Some(IndexCapacity { read: 1, write: 1 });
        assert!(matches!(
            plan("t", Some(&on_demand), &layout(16), wanted),
            Err(AdapterError::IndexCapacityOnDemand { created: false, .. })
        ));
        // A table `--create-table` will make is on demand too.
        assert!(matches!(
            plan("t", None, &layout(16), wanted),
            Err(AdapterError::IndexCapacityOnDemand { created: true, .. })
        ));
        assert_eq!(
            plan("t", None, &layout(16), None).unwrap(),
            IndexPlan::OnDemand
        );
    }

    #[test]
    fn an_existing_index_needs_no_choice_and_keeps_its_capacity() {
        let present = shape(Some((40, 300)), true);
        assert!(matches!(
            plan("t", Some(&present), &layout(16), None).unwrap(),
            IndexPlan::Present {
                requested: None,
                ..
            }
        ));
        let wanted = Some(IndexCapacity { read: 1, write: 1 });
        assert!(matches!(
            plan("t", Some(&present), &layout(16), wanted).unwrap(),
            IndexPlan::Present {
                requested: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn the_auto_scaling_command_names_the_index_target() {
        assert_eq!(
            register_scalable_target_command("sessions", "precise-ttl", "Write", 100, 400),
            "aws application-autoscaling register-scalable-target --service-namespace dynamodb --resource-id table/sessions/index/precise-ttl --scalable-dimension dynamodb:index:WriteCapacityUnits --min-capacity 100 --max-capacity 400"
        );
        assert_eq!(shell_word("table/a b/index/x"), "'table/a b/index/x'");
        assert_eq!(suggested_max(25), 100);
    }

    #[test]
    fn each_expiry_costs_the_index_two_write_units() {
        // 600 items due in the next minute: 10/s, 20 write units/s.
        let count = DueCount {
            due: 600,
            capped: false,
            pages: 16,
        };
        let need = WriteNeed::from_count(count, RATE_WINDOW, 10);
        assert_eq!(need.expiries_per_s, 10.0);
        assert_eq!(need.needed, 20.0);
        assert!(need.short());
        assert_eq!(need.to_provision(), 20);
        assert!(!WriteNeed::from_count(count, RATE_WINDOW, 20).short());
        // Nothing due: any capacity is enough.
        let idle = WriteNeed::from_count(DueCount::default(), RATE_WINDOW, 1);
        assert!(!idle.short());
        assert_eq!(idle.to_provision(), 1);
        // A capped count is a lower bound.
        let capped = DueCount {
            capped: true,
            ..count
        };
        assert!(WriteNeed::from_count(capped, RATE_WINDOW, 1).lower_bound);
    }
}
