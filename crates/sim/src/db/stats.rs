//! What the simulator reports about each table and index.

use super::*;

/// What the simulator reports about one table.
#[derive(Debug, Clone, Serialize)]
pub struct TableStats {
    pub items: u64,
    pub deletes: u64,
    pub billing: crate::capacity::Billing,
    pub usage: Usage,
    pub throttles: BTreeMap<String, u64>,
    /// Write units consumed per table partition, by partition number.
    pub partition_write_units: Vec<f64>,
    pub indexes: BTreeMap<String, IndexStats>,
}

#[derive(Debug, Clone, Serialize)]
pub struct IndexStats {
    pub items: u64,
    pub usage: Usage,
    pub throttles: BTreeMap<String, u64>,
    /// Index partitions (partition-key values) seen.
    pub partitions: u64,
    /// The most write units any one index partition consumed, and which.
    pub hottest_partition: Option<(String, f64)>,
    /// Units consumed per index partition (partition-key value as text).
    pub partition_usage: BTreeMap<String, Usage>,
}

impl TableStats {
    pub(super) fn of(t: &Table, _now: Instant) -> TableStats {
        TableStats {
            items: t.rows.len() as u64,
            deletes: t.deletes,
            billing: t.billing,
            usage: t.usage.clone(),
            throttles: t.throttles.clone(),
            partition_write_units: t.partition_usage.iter().map(|u| u.write_units).collect(),
            indexes: t
                .indexes
                .iter()
                .map(|i| {
                    let hottest = i
                        .partition_usage
                        .iter()
                        .max_by(|a, b| a.1.write_units.total_cmp(&b.1.write_units))
                        .map(|(k, u)| (k.text(), u.write_units));
                    (
                        i.name.clone(),
                        IndexStats {
                            items: i.len,
                            usage: i.usage.clone(),
                            throttles: i.throttles.clone(),
                            partitions: i.partitions.len().max(i.partition_usage.len()) as u64,
                            hottest_partition: hottest,
                            partition_usage: i
                                .partition_usage
                                .iter()
                                .map(|(k, u)| (k.text(), u.clone()))
                                .collect(),
                        },
                    )
                })
                .collect(),
        }
    }
}
