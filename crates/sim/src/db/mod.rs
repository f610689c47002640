//! The store: every table, the deletion log and the parsed-expression caches, and the
//! operations run against them (one call at a time, under the server's lock). Each operation
//! validates its request as DynamoDB does, asks the tables' buckets for capacity, and answers
//! with DynamoDB's output shapes or errors. The operations live by kind in the submodules:
//! `control` (tables, TTL settings), `write` (PutItem, UpdateItem, DeleteItem), `read`
//! (GetItem, Scan, and what every read shares), `query` (Query), `batch` (BatchWriteItem,
//! PartiQL), [`stats`] (what is reported).

mod batch;
mod control;
mod query;
mod read;
pub mod stats;
mod write;

use batch::Prepared;
pub use stats::{IndexStats, TableStats};

use crate::capacity::{Limits, Usage, read_units};
use crate::codec::*;
use crate::deletions::DeletionLog;
use crate::error::{CONDITION_FAILED_MESSAGE, DbError, Throttle};
use crate::expr::{
    self, Bindings, CmpOp, Cond, NameRef, Operand, PartiQlDelete, Update, Used, check_placeholders,
};
use crate::table::{Charged, Edge, IndexEntry, RowKey, SortKey, Table, TableDefaults, hash_key};
use crate::value::{Item, KeyValue, Name, Value};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

/// The most bytes one Query or Scan page reads.
const PAGE_BYTES: usize = 1024 * 1024;
/// Parsed expressions and statements kept, per kind.
const CACHE_ENTRIES: usize = 4096;

/// The time of a call: the monotonic instant for buckets, the wall clock for the log.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub instant: Instant,
    pub wall_ms: f64,
}

impl Now {
    pub fn current() -> Now {
        Now {
            instant: Instant::now(),
            wall_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rcc {
    None,
    Total,
    Indexes,
}

fn rcc(value: Option<&str>) -> Result<Rcc, DbError> {
    match value {
        None | Some("NONE") => Ok(Rcc::None),
        Some("TOTAL") => Ok(Rcc::Total),
        Some("INDEXES") => Ok(Rcc::Indexes),
        Some(other) => Err(DbError::validation(format!(
            "1 validation error detected: Value '{other}' at 'returnConsumedCapacity' failed to satisfy constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]"
        ))),
    }
}

fn write_capacity(table: &Table, charged: &Charged, rcc: Rcc) -> Option<ConsumedCapacity> {
    let total = charged.table + charged.indexes.iter().map(|(_, u)| u).sum::<f64>();
    match rcc {
        Rcc::None => None,
        Rcc::Total => Some(ConsumedCapacity {
            table_name: table.name.clone(),
            capacity_units: total,
            read_capacity_units: None,
            write_capacity_units: Some(total),
            table: None,
            global_secondary_indexes: None,
        }),
        Rcc::Indexes => Some(ConsumedCapacity {
            table_name: table.name.clone(),
            capacity_units: total,
            read_capacity_units: None,
            write_capacity_units: Some(total),
            table: Some(Capacity {
                capacity_units: charged.table,
            }),
            global_secondary_indexes: (!charged.indexes.is_empty()).then(|| {
                charged
                    .indexes
                    .iter()
                    .map(|(i, u)| {
                        (
                            table.indexes[*i].name.clone(),
                            Capacity { capacity_units: *u },
                        )
                    })
                    .collect()
            }),
        }),
    }
}

fn add_capacity(list: &mut Vec<ConsumedCapacity>, c: ConsumedCapacity) {
    match list.iter_mut().find(|x| x.table_name == c.table_name) {
        Some(x) => {
            x.capacity_units += c.capacity_units;
            x.write_capacity_units =
                Some(x.write_capacity_units.unwrap_or(0.0) + c.write_capacity_units.unwrap_or(0.0));
            if let (Some(a), Some(b)) = (&mut x.table, &c.table) {
                a.capacity_units += b.capacity_units;
            }
            if let Some(b) = c.global_secondary_indexes {
                let a = x.global_secondary_indexes.get_or_insert_with(BTreeMap::new);
                for (name, cap) in b {
                    a.entry(name)
                        .or_insert(Capacity {
                            capacity_units: 0.0,
                        })
                        .capacity_units += cap.capacity_units;
                }
            }
        }
        None => list.push(c),
    }
}

/// What ReturnValues asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Returns {
    None,
    AllOld,
    AllNew,
    UpdatedOld,
    UpdatedNew,
}

fn returns(value: Option<&str>, allowed: &[Returns]) -> Result<Returns, DbError> {
    let r = match value {
        None | Some("NONE") => Returns::None,
        Some("ALL_OLD") => Returns::AllOld,
        Some("ALL_NEW") => Returns::AllNew,
        Some("UPDATED_OLD") => Returns::UpdatedOld,
        Some("UPDATED_NEW") => Returns::UpdatedNew,
        Some(_) => return Err(DbError::validation("Return values set to invalid value")),
    };
    if allowed.contains(&r) {
        Ok(r)
    } else {
        Err(DbError::validation("Return values set to invalid value"))
    }
}

fn on_failure(value: Option<&str>) -> Result<bool, DbError> {
    match value {
        None | Some("NONE") => Ok(false),
        Some("ALL_OLD") => Ok(true),
        Some(other) => Err(DbError::validation(format!(
            "1 validation error detected: Value '{other}' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]"
        ))),
    }
}

fn refuse_legacy(present: &[(&str, bool)]) -> Result<(), DbError> {
    match present.iter().find(|(_, p)| *p) {
        Some((name, _)) => Err(DbError::validation(format!(
            "the legacy parameter {name} is not supported by the simulator; use expressions"
        ))),
        None => Ok(()),
    }
}

/// Counts kept across calls.
#[derive(Debug, Default, Clone, Serialize)]
pub struct CallCounts {
    pub requests: BTreeMap<String, u64>,
    pub errors: BTreeMap<String, u64>,
    /// Statements in `BatchExecuteStatement` calls (how full the batches were), each statement
    /// refused by a throttle among them.
    pub batch_statements: u64,
}

#[derive(Debug)]
pub struct Db {
    defaults: TableDefaults,
    tables: BTreeMap<String, Table>,
    pub log: DeletionLog,
    conditions: HashMap<String, Arc<(Cond, Used)>>,
    updates: HashMap<String, Arc<(Update, Used)>>,
    statements: HashMap<String, Arc<Prepared>>,
    /// The units the last write whose condition failed took (for a batch's ConsumedCapacity).
    failed_charge: Option<Charged>,
    pub counts: CallCounts,
}

impl Db {
    pub fn new(defaults: TableDefaults) -> Db {
        Db {
            defaults,
            tables: BTreeMap::new(),
            log: DeletionLog::default(),
            conditions: HashMap::new(),
            updates: HashMap::new(),
            statements: HashMap::new(),
            failed_charge: None,
            counts: CallCounts::default(),
        }
    }

    pub fn tables(&self) -> &BTreeMap<String, Table> {
        &self.tables
    }

    fn table(&self, name: &str) -> Result<&Table, DbError> {
        self.tables.get(name).ok_or(DbError::ResourceNotFound(None))
    }

    fn table_mut(&mut self, name: &str) -> Result<&mut Table, DbError> {
        table_in(&mut self.tables, name)
    }

    /// A table for the control plane and the direct calls: a missing one is named in the error,
    /// as DynamoDB's control plane names it (its data plane does not, see `Db::table`).
    fn named_table(&self, name: &str) -> Result<&Table, DbError> {
        self.tables
            .get(name)
            .ok_or_else(|| DbError::ResourceNotFound(Some(name.to_string())))
    }

    /// [`Db::named_table`], to change.
    fn named_table_mut(&mut self, name: &str) -> Result<&mut Table, DbError> {
        self.tables
            .get_mut(name)
            .ok_or_else(|| DbError::ResourceNotFound(Some(name.to_string())))
    }

    /// Parses (or finds parsed) a condition.
    fn condition(&mut self, text: &str, kind: &'static str) -> Result<Arc<(Cond, Used)>, DbError> {
        if let Some(c) = self.conditions.get(text) {
            return Ok(Arc::clone(c));
        }
        let parsed = Arc::new(expr::parse_condition(text, kind)?);
        if self.conditions.len() >= CACHE_ENTRIES {
            self.conditions.clear();
        }
        self.conditions
            .insert(text.to_string(), Arc::clone(&parsed));
        Ok(parsed)
    }

    fn update_expression(&mut self, text: &str) -> Result<Arc<(Update, Used)>, DbError> {
        if let Some(u) = self.updates.get(text) {
            return Ok(Arc::clone(u));
        }
        let parsed = Arc::new(expr::parse_update(text)?);
        if self.updates.len() >= CACHE_ENTRIES {
            self.updates.clear();
        }
        self.updates.insert(text.to_string(), Arc::clone(&parsed));
        Ok(parsed)
    }

    // -----------------------------------------------------------------------------------------

    /// Stores items in `table` directly: no capacity, latency or log.
    pub fn plant(
        &mut self,
        table: &str,
        items: impl IntoIterator<Item = Item>,
    ) -> Result<usize, DbError> {
        let table = self.named_table_mut(table)?;
        let mut n = 0;
        for item in items {
            table.plant(item)?;
            n += 1;
        }
        Ok(n)
    }

    pub fn create_table_direct(&mut self, input: CreateTableInput) -> Result<(), DbError> {
        self.create_table(input, Now::current()).map(|_| ())
    }

    pub fn stats(&self, now: Instant) -> BTreeMap<String, TableStats> {
        self.tables
            .iter()
            .map(|(name, t)| (name.clone(), TableStats::of(t, now)))
            .collect()
    }

    pub fn limits(&self) -> Limits {
        self.defaults.limits
    }
}

/// The table `name` of `tables`: borrows the tables alone, so the rest of the database (the
/// log) stays at hand while it is written.
fn table_in<'a>(
    tables: &'a mut BTreeMap<String, Table>,
    name: &str,
) -> Result<&'a mut Table, DbError> {
    tables.get_mut(name).ok_or(DbError::ResourceNotFound(None))
}
