//! The store: every table, the deletion log and the parsed-expression caches, and the
//! operations run against them (one call at a time, under the server's lock). Each operation
//! validates its request as DynamoDB does, asks the tables' buckets for capacity, and answers
//! with DynamoDB's output shapes or errors.

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

/// A PartiQL DELETE bound to its table's key.
#[derive(Debug)]
struct Prepared {
    table: String,
    hash_name: Name,
    range_name: Option<Name>,
    hash: Operand,
    range: Option<Operand>,
    condition: Option<Cond>,
    returning_old: bool,
    parameters: usize,
}

/// The outcome of one single-item write.
struct Written {
    old: Option<Item>,
    new: Option<Item>,
    charged: Charged,
}

/// A statement's or a write's failure: an error, with the old item when asked for.
type WriteResult = Result<Written, DbError>;

/// What a single-item write (other than a delete, see `Db::delete_row`) does to the item.
enum Change<'a> {
    Put(Item),
    Update(&'a Update, Bindings<'a>),
}

/// Sort-key bounds of a Query.
#[derive(Debug, Clone)]
struct SortRange {
    low: Bound<KeyValue>,
    high: Bound<KeyValue>,
    prefix: Option<KeyValue>,
}

impl SortRange {
    fn all() -> SortRange {
        SortRange {
            low: Bound::Unbounded,
            high: Bound::Unbounded,
            prefix: None,
        }
    }
}

/// Counts kept across calls.
#[derive(Debug, Default, Clone, Serialize)]
pub struct CallCounts {
    pub requests: BTreeMap<String, u64>,
    pub errors: BTreeMap<String, u64>,
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
        self.tables
            .get_mut(name)
            .ok_or(DbError::ResourceNotFound(None))
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
    // Tables.

    pub fn create_table(
        &mut self,
        input: CreateTableInput,
        now: Now,
    ) -> Result<serde_json::Value, DbError> {
        if self.tables.contains_key(&input.table_name) {
            return Err(DbError::ResourceInUse(format!(
                "Table already exists: {}",
                input.table_name
            )));
        }
        let table = Table::create(&input, self.defaults, now.instant, now.wall_ms / 1000.0)?;
        let description = table.describe("ACTIVE");
        self.tables.insert(input.table_name, table);
        Ok(serde_json::json!({ "TableDescription": description }))
    }

    pub fn describe_table(&self, input: TableNameInput) -> Result<serde_json::Value, DbError> {
        let table = self
            .tables
            .get(&input.table_name)
            .ok_or_else(|| DbError::ResourceNotFound(Some(input.table_name.clone())))?;
        Ok(serde_json::json!({ "Table": table.describe("ACTIVE") }))
    }

    pub fn delete_table(&mut self, input: TableNameInput) -> Result<serde_json::Value, DbError> {
        let table = self
            .tables
            .remove(&input.table_name)
            .ok_or_else(|| DbError::ResourceNotFound(Some(input.table_name.clone())))?;
        Ok(serde_json::json!({ "TableDescription": table.describe("DELETING") }))
    }

    pub fn list_tables(&self, input: ListTablesInput) -> Result<serde_json::Value, DbError> {
        let limit = input.limit.unwrap_or(100).clamp(1, 100) as usize;
        let start = match &input.exclusive_start_table_name {
            Some(s) => Bound::Excluded(s.clone()),
            None => Bound::Unbounded,
        };
        let names: Vec<&String> = self
            .tables
            .range((start, Bound::Unbounded))
            .map(|(n, _)| n)
            .take(limit + 1)
            .collect();
        let more = names.len() > limit;
        let names: Vec<&String> = names.into_iter().take(limit).collect();
        let mut out = serde_json::json!({ "TableNames": names });
        if more && let Some(last) = names.last() {
            out["LastEvaluatedTableName"] = (*last).clone().into();
        }
        Ok(out)
    }

    pub fn update_table(
        &mut self,
        input: UpdateTableInput,
        now: Now,
    ) -> Result<serde_json::Value, DbError> {
        let defaults = self.defaults.limits;
        let table = self
            .tables
            .get_mut(&input.table_name)
            .ok_or_else(|| DbError::ResourceNotFound(Some(input.table_name.clone())))?;
        for d in &input.attribute_definitions {
            let kind = crate::value::ScalarType::parse(&d.attribute_type).ok_or_else(|| {
                DbError::validation(format!("invalid attribute type {}", d.attribute_type))
            })?;
            match table.attribute_types.get(&d.attribute_name) {
                Some(existing) if *existing != kind => {
                    return Err(DbError::validation(format!(
                        "Cannot change the type of attribute {} from {} to {}",
                        d.attribute_name,
                        existing.as_str(),
                        kind.as_str()
                    )));
                }
                _ => {
                    table.attribute_types.insert(d.attribute_name.clone(), kind);
                }
            }
        }
        if input.billing_mode.is_some() || input.provisioned_throughput.is_some() {
            let billing = crate::table::billing(
                input.billing_mode.as_deref(),
                input.provisioned_throughput.as_ref(),
            )?;
            table.set_billing(billing, defaults, now.instant);
        }
        for update in &input.global_secondary_index_updates {
            match (&update.create, &update.delete, &update.update) {
                (Some(create), None, None) => table.add_index(create, defaults, now.instant)?,
                (None, Some(delete), None) => table.remove_index(&delete.index_name)?,
                (None, None, Some(_)) => {
                    return Err(DbError::validation(
                        "updating an index's throughput is not supported by the simulator",
                    ));
                }
                _ => {
                    return Err(DbError::validation(
                        "One or more parameter values were invalid: One of GlobalSecondaryIndexUpdate.Create, Update or Delete must be specified",
                    ));
                }
            }
        }
        if let Some(stream) = &input.stream_specification {
            table.stream_view = stream.stream_enabled.then(|| {
                stream
                    .stream_view_type
                    .clone()
                    .unwrap_or_else(|| "KEYS_ONLY".into())
            });
        }
        Ok(serde_json::json!({ "TableDescription": table.describe("ACTIVE") }))
    }

    pub fn describe_time_to_live(
        &self,
        input: TableNameInput,
    ) -> Result<serde_json::Value, DbError> {
        let table = self
            .tables
            .get(&input.table_name)
            .ok_or_else(|| DbError::ResourceNotFound(Some(input.table_name.clone())))?;
        Ok(match &table.ttl {
            Some((attribute, true)) => serde_json::json!({
                "TimeToLiveDescription": {"TimeToLiveStatus": "ENABLED", "AttributeName": attribute}
            }),
            _ => serde_json::json!({"TimeToLiveDescription": {"TimeToLiveStatus": "DISABLED"}}),
        })
    }

    pub fn update_time_to_live(
        &mut self,
        input: UpdateTimeToLiveInput,
    ) -> Result<serde_json::Value, DbError> {
        let table = self
            .tables
            .get_mut(&input.table_name)
            .ok_or_else(|| DbError::ResourceNotFound(Some(input.table_name.clone())))?;
        let spec = &input.time_to_live_specification;
        match (&table.ttl, spec.enabled) {
            (Some((_, true)), true) => {
                return Err(DbError::validation("TimeToLive is already enabled"));
            }
            (None | Some((_, false)), false) => {
                return Err(DbError::validation("TimeToLive is already disabled"));
            }
            _ => {}
        }
        table.ttl = Some((spec.attribute_name.clone(), spec.enabled));
        Ok(serde_json::json!({
            "TimeToLiveSpecification": {"Enabled": spec.enabled, "AttributeName": spec.attribute_name}
        }))
    }

    // -----------------------------------------------------------------------------------------
    // Single-item writes.

    /// One write: finds the item, checks the condition, plans the change, asks for capacity,
    /// then applies it and logs a delete.
    fn write(
        &mut self,
        table_name: &str,
        key: RowKey,
        condition: Option<(&Cond, Bindings<'_>)>,
        change: Change<'_>,
        now: Now,
    ) -> WriteResult {
        let table = self
            .tables
            .get_mut(table_name)
            .ok_or(DbError::ResourceNotFound(None))?;
        let old = table.rows.get(&key);
        let keep_new = matches!(change, Change::Update(..));
        let met = match &condition {
            Some((cond, bindings)) => bindings.eval(cond, old)?,
            None => true,
        };
        let new = if met {
            match change {
                Change::Put(item) => Some(item),
                Change::Update(update, bindings) => {
                    Some(apply_update(table, &key, old, update, &bindings)?)
                }
            }
        } else {
            None
        };
        if let Some(new) = &new {
            table.check_item(new, &key)?;
        }
        let plan = table.plan(key, old, new.as_ref(), met)?;
        let failed_old = (!met).then(|| old.cloned()).flatten();
        if let Err(throttle) = table.admit(&plan, now.instant) {
            table.count_throttle(&throttle, true);
            return Err(DbError::Throttled(throttle));
        }
        let charged = table.charge(&plan);
        if !met {
            self.failed_charge = Some(charged);
            return Err(DbError::ConditionalCheckFailed(failed_old));
        }
        let deleting = new.is_none();
        let key_copy = deleting.then(|| plan.key.clone());
        let (new, kept) = if keep_new {
            (new.clone(), new)
        } else {
            (new, None)
        };
        let old = table.commit(plan, new);
        if let (Some(key), Some(_)) = (key_copy, &old) {
            let pk = key.pk.value().map(KeyValue::text).unwrap_or_default();
            let sk = key.sk.value().map(KeyValue::text);
            self.log.record(now.wall_ms, table_name, &pk, sk.as_deref());
        }
        Ok(Written {
            old,
            new: kept,
            charged,
        })
    }

    /// One delete: takes the row out first (one search of the table, not two) and puts it
    /// back if the condition fails or capacity runs out. `absent_ok`: a missing item is a
    /// success that deletes nothing (PartiQL's DELETE), else it is judged by the condition.
    fn delete_row(
        &mut self,
        table_name: &str,
        key: RowKey,
        condition: Option<(&Cond, Bindings<'_>)>,
        absent_ok: bool,
        now: Now,
    ) -> WriteResult {
        let table = self
            .tables
            .get_mut(table_name)
            .ok_or(DbError::ResourceNotFound(None))?;
        let old = table.rows.remove(&key);
        let restore = |table: &mut Table, key: RowKey, old: Option<Item>| {
            if let Some(old) = old {
                table.rows.insert(key, old);
            }
        };
        let met = if old.is_none() && absent_ok {
            true
        } else {
            match &condition {
                Some((cond, bindings)) => match bindings.eval(cond, old.as_ref()) {
                    Ok(met) => met,
                    Err(e) => {
                        restore(table, key, old);
                        return Err(e);
                    }
                },
                None => true,
            }
        };
        let mut plan = match table.plan(key.clone(), old.as_ref(), None, met && old.is_some()) {
            Ok(plan) => plan,
            Err(e) => {
                restore(table, key, old);
                return Err(e);
            }
        };
        if let Err(throttle) = table.admit(&plan, now.instant) {
            table.count_throttle(&throttle, true);
            restore(table, key, old);
            return Err(DbError::Throttled(throttle));
        }
        let charged = table.charge(&plan);
        if !met {
            self.failed_charge = Some(charged);
            let failed_old = old.clone();
            restore(table, key, old);
            return Err(DbError::ConditionalCheckFailed(failed_old));
        }
        if old.is_some() {
            table.commit_indexes(&mut plan);
            table.deletes += 1;
            let pk = key.pk.value().map(KeyValue::text).unwrap_or_default();
            let sk = key.sk.value().map(KeyValue::text);
            self.log.record(now.wall_ms, table_name, &pk, sk.as_deref());
        }
        Ok(Written {
            old,
            new: None,
            charged,
        })
    }

    fn parse_optional_condition(
        &mut self,
        text: Option<&str>,
    ) -> Result<Option<Arc<(Cond, Used)>>, DbError> {
        text.map(|t| self.condition(t, "ConditionExpression"))
            .transpose()
    }

    pub fn put_item(&mut self, input: PutItemInput, now: Now) -> Result<WriteOutput, DbError> {
        refuse_legacy(&[
            ("Expected", input.expected.is_some()),
            ("ConditionalOperator", input.conditional_operator.is_some()),
        ])?;
        let rcc = rcc(input.return_consumed_capacity.as_deref())?;
        let returns = returns(
            input.return_values.as_deref(),
            &[Returns::None, Returns::AllOld],
        )?;
        let on_failure = on_failure(input.return_values_on_condition_check_failure.as_deref())?;
        let condition = self.parse_optional_condition(input.condition_expression.as_deref())?;
        let used = condition.as_ref().map(|c| c.1.clone()).unwrap_or_default();
        check_placeholders(
            &used,
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
            condition.is_some(),
        )?;
        let key = self.table(&input.table_name)?.item_key(&input.item)?;
        let bindings = Bindings::new(
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
        );
        let written = self.write(
            &input.table_name,
            key,
            condition.as_ref().map(|c| (&c.0, bindings)),
            Change::Put(input.item),
            now,
        );
        let written = strip_unrequested_item(written, on_failure)?;
        let table = self.table(&input.table_name)?;
        Ok(WriteOutput {
            attributes: (returns == Returns::AllOld)
                .then_some(written.old)
                .flatten(),
            consumed_capacity: write_capacity(table, &written.charged, rcc),
        })
    }

    pub fn delete_item(
        &mut self,
        input: DeleteItemInput,
        now: Now,
    ) -> Result<WriteOutput, DbError> {
        refuse_legacy(&[
            ("Expected", input.expected.is_some()),
            ("ConditionalOperator", input.conditional_operator.is_some()),
        ])?;
        let rcc = rcc(input.return_consumed_capacity.as_deref())?;
        let returns = returns(
            input.return_values.as_deref(),
            &[Returns::None, Returns::AllOld],
        )?;
        let on_failure = on_failure(input.return_values_on_condition_check_failure.as_deref())?;
        let condition = self.parse_optional_condition(input.condition_expression.as_deref())?;
        let used = condition.as_ref().map(|c| c.1.clone()).unwrap_or_default();
        check_placeholders(
            &used,
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
            condition.is_some(),
        )?;
        let key = self.table(&input.table_name)?.key_of(&input.key)?;
        let bindings = Bindings::new(
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
        );
        let written = self.delete_row(
            &input.table_name,
            key,
            condition.as_ref().map(|c| (&c.0, bindings)),
            false,
            now,
        );
        let written = strip_unrequested_item(written, on_failure)?;
        let table = self.table(&input.table_name)?;
        Ok(WriteOutput {
            attributes: (returns == Returns::AllOld)
                .then_some(written.old)
                .flatten(),
            consumed_capacity: write_capacity(table, &written.charged, rcc),
        })
    }

    pub fn update_item(
        &mut self,
        input: UpdateItemInput,
        now: Now,
    ) -> Result<WriteOutput, DbError> {
        refuse_legacy(&[
            ("Expected", input.expected.is_some()),
            ("ConditionalOperator", input.conditional_operator.is_some()),
            ("AttributeUpdates", input.attribute_updates.is_some()),
        ])?;
        let rcc = rcc(input.return_consumed_capacity.as_deref())?;
        let returns = returns(
            input.return_values.as_deref(),
            &[
                Returns::None,
                Returns::AllOld,
                Returns::AllNew,
                Returns::UpdatedOld,
                Returns::UpdatedNew,
            ],
        )?;
        let on_failure = on_failure(input.return_values_on_condition_check_failure.as_deref())?;
        let Some(update_text) = input.update_expression.as_deref() else {
            return Err(DbError::validation(
                "the simulator needs an UpdateExpression for UpdateItem",
            ));
        };
        let update = self.update_expression(update_text)?;
        let condition = self.parse_optional_condition(input.condition_expression.as_deref())?;
        let mut used = update.1.clone();
        if let Some(c) = &condition {
            used.extend(&c.1);
        }
        check_placeholders(
            &used,
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
            true,
        )?;
        let key = self.table(&input.table_name)?.key_of(&input.key)?;
        let bindings = Bindings::new(
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
        );
        let updated_names: Vec<String> = update
            .0
            .set
            .iter()
            .map(|(n, _)| n)
            .chain(&update.0.remove)
            .filter_map(|n| bindings.name(n).ok().map(str::to_string))
            .collect();
        let written = self.write(
            &input.table_name,
            key,
            condition
                .as_ref()
                .map(|c| (&c.0, bindings.kind("ConditionExpression"))),
            Change::Update(&update.0, bindings.kind("UpdateExpression")),
            now,
        );
        let written = strip_unrequested_item(written, on_failure)?;
        let table = self.table(&input.table_name)?;
        let names: Vec<&str> = updated_names.iter().map(String::as_str).collect();
        let attributes = match returns {
            Returns::None => None,
            Returns::AllOld => written.old,
            Returns::AllNew => written.new,
            Returns::UpdatedOld => written.old.map(|o| o.project(&names)),
            Returns::UpdatedNew => written.new.map(|n| n.project(&names)),
        };
        Ok(WriteOutput {
            attributes: attributes.filter(|a| !a.is_empty()),
            consumed_capacity: write_capacity(table, &written.charged, rcc),
        })
    }

    pub fn get_item(&mut self, input: GetItemInput, now: Now) -> Result<GetItemOutput, DbError> {
        refuse_legacy(&[("AttributesToGet", input.attributes_to_get.is_some())])?;
        let rcc = rcc(input.return_consumed_capacity.as_deref())?;
        let projection = input
            .projection_expression
            .as_deref()
            .map(expr::parse_projection)
            .transpose()?;
        let used = projection.as_ref().map(|p| p.1.clone()).unwrap_or_default();
        check_placeholders(
            &used,
            input.expression_attribute_names.as_ref(),
            None,
            projection.is_some(),
        )?;
        let consistent = input.consistent_read.unwrap_or(false);
        let table = self.table_mut(&input.table_name)?;
        let key = table.key_of(&input.key)?;
        let partition = table.partition_of(key.hash);
        read_admit(table, None, Some(partition), now.instant)?;
        let item = table.rows.get(&key).cloned();
        let units = read_units(item.as_ref().map_or(0, Item::size), consistent);
        table.partitions[partition].read.take(units);
        table.total_read.take(units);
        table.usage.read_units += units;
        table.partition_usage[partition].read_units += units;
        let bindings = Bindings::new(input.expression_attribute_names.as_ref(), None)
            .kind("ProjectionExpression");
        let item = match (&projection, item) {
            (Some((paths, _)), Some(item)) => Some(project(&item, paths, &bindings)?),
            (_, item) => item,
        };
        Ok(GetItemOutput {
            item,
            consumed_capacity: read_capacity(table, None, units, rcc),
        })
    }

    // -----------------------------------------------------------------------------------------
    // Reads.

    pub fn query(&mut self, input: ReadInput, now: Now) -> Result<ReadOutput, DbError> {
        refuse_legacy(&[
            ("KeyConditions", input.key_conditions.is_some()),
            ("QueryFilter", input.query_filter.is_some()),
            ("AttributesToGet", input.attributes_to_get.is_some()),
        ])?;
        let rcc = rcc(input.return_consumed_capacity.as_deref())?;
        let Some(key_text) = input.key_condition_expression.as_deref() else {
            return Err(DbError::validation(
                "Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.",
            ));
        };
        let key_condition = self.condition(key_text, "KeyConditionExpression")?;
        let filter = input
            .filter_expression
            .as_deref()
            .map(|f| self.condition(f, "FilterExpression"))
            .transpose()?;
        let projection = input
            .projection_expression
            .as_deref()
            .map(expr::parse_projection)
            .transpose()?;
        let mut used = key_condition.1.clone();
        for u in filter
            .iter()
            .map(|f| &f.1)
            .chain(projection.iter().map(|p| &p.1))
        {
            used.extend(u);
        }
        check_placeholders(
            &used,
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
            true,
        )?;
        let limit = read_limit(input.limit)?;
        let count_only = select(input.select.as_deref(), projection.is_some())?;
        let forward = input.scan_index_forward.unwrap_or(true);
        let consistent = input.consistent_read.unwrap_or(false);
        let names = input.expression_attribute_names.as_ref();
        let values = input.expression_attribute_values.as_ref();
        let bindings = Bindings::new(names, values);

        let table = self.table_mut(&input.table_name)?;
        let index = match &input.index_name {
            Some(name) => {
                if consistent {
                    return Err(DbError::validation(
                        "Consistent reads are not supported on global secondary indexes",
                    ));
                }
                Some(table.index_named(name)?)
            }
            None => None,
        };
        let (hash_def, range_def) = match index {
            Some(i) => (
                table.indexes[i].hash.clone(),
                table.indexes[i].range.clone(),
            ),
            None => (table.hash.clone(), table.range.clone()),
        };
        if let (Some(i), Some("ALL_ATTRIBUTES")) = (index, input.select.as_deref())
            && table.indexes[i].projection != crate::table::Projection::All
        {
            return Err(DbError::validation(format!(
                "One or more parameter values were invalid: Select type ALL_ATTRIBUTES is not supported for global secondary index {} because its projection type is not ALL",
                table.indexes[i].name
            )));
        }
        let (hash_value, sort) = key_range(
            &key_condition.0,
            &bindings.kind("KeyConditionExpression"),
            &hash_def,
            range_def.as_ref(),
        )?;
        let filter_bindings = bindings.kind("FilterExpression");
        let projection_bindings = bindings.kind("ProjectionExpression");

        // Capacity: the partition that holds the key, and the table or index as a whole.
        let partition = match index {
            None => Some(table.partition_of(hash_key(&hash_value))),
            Some(_) => None,
        };
        read_admit(
            table,
            index.map(|i| (i, &hash_value)),
            partition,
            now.instant,
        )?;

        let mut out = ReadOutput::default();
        let mut items = Vec::new();
        let mut bytes = 0usize;
        let mut last: Option<Item> = None;
        let mut stopped = false;
        {
            let table_ref: &Table = table;
            let mut visit = |item: Item, key_item: &dyn Fn() -> Item| -> Result<bool, DbError> {
                bytes += item.size();
                out.scanned_count += 1;
                let keep = match &filter {
                    Some(f) => filter_bindings.eval(&f.0, Some(&item))?,
                    None => true,
                };
                if keep {
                    out.count += 1;
                    if !count_only {
                        items.push(match &projection {
                            Some((paths, _)) => project(&item, paths, &projection_bindings)?,
                            None => item,
                        });
                    }
                }
                let full = limit.is_some_and(|l| out.scanned_count >= l) || bytes >= PAGE_BYTES;
                if full {
                    last = Some(key_item());
                }
                Ok(full)
            };
            match index {
                Some(i) => {
                    let idx = &table_ref.indexes[i];
                    let start = input
                        .exclusive_start_key
                        .as_ref()
                        .map(|k| index_start(table_ref, i, k))
                        .transpose()?;
                    if let Some(set) = idx.entries.get(&hash_value) {
                        let (low, high) = entry_bounds(&sort, start.as_ref(), forward);
                        if bounds_ok(&low, &high) {
                            let range = set.range((low, high));
                            let iter: Box<dyn Iterator<Item = &IndexEntry>> = if forward {
                                Box::new(range)
                            } else {
                                Box::new(range.rev())
                            };
                            for entry in iter {
                                if !prefix_ok(&sort, entry.0.value()) {
                                    break;
                                }
                                let slot = (hash_value.clone(), entry.clone());
                                let full = match idx.projection {
                                    crate::table::Projection::KeysOnly => None,
                                    _ => table_ref.rows.get(&entry.1),
                                };
                                let item = idx.project(table_ref, &slot, full);
                                let key_item = || idx.project(table_ref, &slot, None);
                                if visit(item, &key_item)? {
                                    stopped = true;
                                    break;
                                }
                            }
                        }
                    }
                }
                None => {
                    let hash = hash_key(&hash_value);
                    let start = input
                        .exclusive_start_key
                        .as_ref()
                        .map(|k| table_ref.key_of(k))
                        .transpose()
                        .map_err(|_| {
                            DbError::validation(
                                "The provided starting key is invalid: The provided key element does not match the schema",
                            )
                        })?;
                    let (low, high) = row_bounds(hash, &hash_value, &sort, start.as_ref(), forward);
                    if bounds_ok(&low, &high) {
                        let range = table_ref.rows.range((low, high));
                        let iter: Box<dyn Iterator<Item = (&RowKey, &Item)>> = if forward {
                            Box::new(range)
                        } else {
                            Box::new(range.rev())
                        };
                        for (key, item) in iter {
                            if !prefix_ok(&sort, key.sk.value()) {
                                break;
                            }
                            let key_item = || table_ref.key_item(key);
                            if visit(item.clone(), &key_item)? {
                                stopped = true;
                                break;
                            }
                        }
                    }
                }
            }
        }
        let units = read_units(bytes, consistent);
        charge_read(table, index.map(|i| (i, &hash_value)), partition, units);
        out.items = (!count_only).then_some(items);
        out.last_evaluated_key = if stopped { last } else { None };
        out.consumed_capacity = read_capacity(table, index, units, rcc);
        Ok(out)
    }

    pub fn scan(&mut self, input: ReadInput, now: Now) -> Result<ReadOutput, DbError> {
        refuse_legacy(&[
            ("ScanFilter", input.scan_filter.is_some()),
            ("AttributesToGet", input.attributes_to_get.is_some()),
        ])?;
        if input.index_name.is_some() {
            return Err(DbError::validation(
                "scanning an index is not supported by the simulator",
            ));
        }
        let rcc = rcc(input.return_consumed_capacity.as_deref())?;
        let filter = input
            .filter_expression
            .as_deref()
            .map(|f| self.condition(f, "FilterExpression"))
            .transpose()?;
        let projection = input
            .projection_expression
            .as_deref()
            .map(expr::parse_projection)
            .transpose()?;
        let mut used = Used::default();
        for u in filter
            .iter()
            .map(|f| &f.1)
            .chain(projection.iter().map(|p| &p.1))
        {
            used.extend(u);
        }
        check_placeholders(
            &used,
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
            filter.is_some() || projection.is_some(),
        )?;
        let limit = read_limit(input.limit)?;
        let count_only = select(input.select.as_deref(), projection.is_some())?;
        let consistent = input.consistent_read.unwrap_or(false);
        let (seg_low, seg_high) = segment(input.segment, input.total_segments)?;
        let bindings = Bindings::new(
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
        );
        let table = self.table_mut(&input.table_name)?;
        read_admit(table, None, None, now.instant)?;
        let start = input
            .exclusive_start_key
            .as_ref()
            .map(|k| table.key_of(k))
            .transpose()
            .map_err(|_| {
                DbError::validation(
                    "The provided starting key is invalid: The provided key element does not match the schema",
                )
            })?;
        let low = match start {
            Some(k) if k.hash >= seg_low => Bound::Excluded(k),
            _ => Bound::Included(RowKey {
                hash: seg_low,
                pk: Edge::Min,
                sk: Edge::Min,
            }),
        };
        let high = match seg_high {
            Some(h) => Bound::Excluded(RowKey {
                hash: h,
                pk: Edge::Min,
                sk: Edge::Min,
            }),
            None => Bound::Unbounded,
        };
        let mut out = ReadOutput::default();
        let mut items = Vec::new();
        let mut bytes = 0usize;
        let filter_bindings = bindings.kind("FilterExpression");
        let projection_bindings = bindings.kind("ProjectionExpression");
        if bounds_ok(&low, &high) {
            for (key, item) in table.rows.range((low, high)) {
                bytes += item.size();
                out.scanned_count += 1;
                let keep = match &filter {
                    Some(f) => filter_bindings.eval(&f.0, Some(item))?,
                    None => true,
                };
                if keep {
                    out.count += 1;
                    if !count_only {
                        items.push(match &projection {
                            Some((paths, _)) => project(item, paths, &projection_bindings)?,
                            None => item.clone(),
                        });
                    }
                }
                if limit.is_some_and(|l| out.scanned_count >= l) || bytes >= PAGE_BYTES {
                    out.last_evaluated_key = Some(table.key_item(key));
                    break;
                }
            }
        }
        let units = read_units(bytes, consistent);
        table.total_read.take(units);
        table.usage.read_units += units;
        out.items = (!count_only).then_some(items);
        out.consumed_capacity = read_capacity(table, None, units, rcc);
        Ok(out)
    }

    // -----------------------------------------------------------------------------------------
    // Batches.

    pub fn batch_write_item(
        &mut self,
        input: BatchWriteItemInput,
        now: Now,
    ) -> Result<BatchWriteItemOutput, DbError> {
        let rcc = rcc(input.return_consumed_capacity.as_deref())?;
        let total: usize = input.request_items.values().map(Vec::len).sum();
        if total == 0 || total > 25 {
            return Err(DbError::validation(
                "Too many items requested for the BatchWriteItem call",
            ));
        }
        // Validate everything first: one bad request fails the whole call.
        let mut work = Vec::with_capacity(total);
        for (table_name, requests) in &input.request_items {
            let table = self.table(table_name)?;
            let mut seen = HashSet::new();
            for request in requests {
                let (key, change) = match (&request.put_request, &request.delete_request) {
                    (Some(put), None) => {
                        let key = table.item_key(&put.item)?;
                        table.check_item(&put.item, &key)?;
                        (key, Some(put.item.clone()))
                    }
                    (None, Some(delete)) => (table.key_of(&delete.key)?, None),
                    _ => {
                        return Err(DbError::validation(
                            "Supplied AttributeValue has more than one datatypes set, must contain exactly one of the supported datatypes",
                        ));
                    }
                };
                if !seen.insert(key.clone()) {
                    return Err(DbError::validation(
                        "Provided list of item keys contains duplicates",
                    ));
                }
                work.push((table_name.clone(), key, change));
            }
        }
        let mut out = BatchWriteItemOutput::default();
        let mut capacity = Vec::new();
        let mut throttled: Option<Throttle> = None;
        let mut done = 0;
        for (table_name, key, change) in work {
            let put = change.clone();
            let result = match change {
                Some(item) => self.write(&table_name, key.clone(), None, Change::Put(item), now),
                None => self.delete_row(&table_name, key.clone(), None, false, now),
            };
            match result {
                Ok(written) => {
                    done += 1;
                    if let Some(c) = write_capacity(self.table(&table_name)?, &written.charged, rcc)
                    {
                        add_capacity(&mut capacity, c);
                    }
                }
                Err(DbError::Throttled(t)) => {
                    throttled.get_or_insert(t);
                    let table = self.table(&table_name)?;
                    out.unprocessed_items
                        .entry(table_name.clone())
                        .or_default()
                        .push(match put {
                            Some(item) => UnprocessedRequest {
                                put_request: Some(UnprocessedPut { item }),
                                delete_request: None,
                            },
                            None => UnprocessedRequest {
                                put_request: None,
                                delete_request: Some(UnprocessedDelete {
                                    key: table.key_item(&key),
                                }),
                            },
                        });
                }
                Err(e) => return Err(e),
            }
        }
        if done == 0
            && let Some(t) = throttled
        {
            return Err(DbError::Throttled(t));
        }
        out.consumed_capacity = (rcc != Rcc::None).then_some(capacity);
        Ok(out)
    }

    /// Prepares a PartiQL DELETE against its table's key.
    fn prepare(&mut self, text: &str) -> Result<Arc<Prepared>, DbError> {
        if let Some(p) = self.statements.get(text) {
            let current = self.tables.get(&p.table).is_some_and(|t| {
                t.hash.name == p.hash_name
                    && t.range.as_ref().map(|r| &r.name) == p.range_name.as_ref()
            });
            if current {
                return Ok(Arc::clone(p));
            }
        }
        let PartiQlDelete {
            table: table_name,
            condition,
            returning_old,
            parameters,
        } = expr::parse_partiql(text)?;
        let table = self.table(&table_name)?;
        let mut hash = None;
        let mut range = None;
        let mut rest = Vec::new();
        for conjunct in condition.conjuncts() {
            let key_part = match &conjunct {
                Cond::Cmp(Operand::Path(NameRef::Literal(name)), CmpOp::Eq, value)
                | Cond::Cmp(value, CmpOp::Eq, Operand::Path(NameRef::Literal(name)))
                    if matches!(value, Operand::Param(_) | Operand::Literal(_)) =>
                {
                    if **name == *table.hash.name && hash.is_none() {
                        Some((true, value.clone()))
                    } else if table.range.as_ref().is_some_and(|r| **name == *r.name)
                        && range.is_none()
                    {
                        Some((false, value.clone()))
                    } else {
                        None
                    }
                }
                _ => None,
            };
            match key_part {
                Some((true, v)) => hash = Some(v),
                Some((false, v)) => range = Some(v),
                None => rest.push(conjunct),
            }
        }
        let (Some(hash), true) = (hash, table.range.is_none() || range.is_some()) else {
            return Err(DbError::validation(
                "Where clause does not contain a mandatory equality on all key attributes",
            ));
        };
        let prepared = Arc::new(Prepared {
            hash_name: table.hash.name.clone(),
            range_name: table.range.as_ref().map(|r| r.name.clone()),
            table: table_name,
            hash,
            range,
            condition: Cond::all(rest),
            returning_old,
            parameters,
        });
        if self.statements.len() >= CACHE_ENTRIES {
            self.statements.clear();
        }
        self.statements
            .insert(text.to_string(), Arc::clone(&prepared));
        Ok(prepared)
    }

    /// Runs one PartiQL DELETE: `Ok(Some(old))` deleted (the old image when RETURNING asks for
    /// it), `Ok(None)` no such item.
    fn run_delete(
        &mut self,
        statement: &StatementInput,
        seen: &mut HashSet<(String, RowKey)>,
        now: Now,
    ) -> Result<(Arc<Prepared>, Option<Item>, Charged), DbError> {
        let prepared = self.prepare(&statement.statement)?;
        let params = &statement.parameters.0;
        if params.len() != prepared.parameters {
            return Err(DbError::validation(
                "Number of parameters in request and statement don't match.",
            ));
        }
        let on_failure = on_failure(
            statement
                .return_values_on_condition_check_failure
                .as_deref(),
        )?;
        let bindings = Bindings::params(params);
        let table = self.table(&prepared.table)?;
        let mut key = Item::new();
        let value_of = |op: &Operand| -> Result<Value, DbError> {
            bindings
                .operand(op, None)?
                .map(|v| v.into_owned())
                .ok_or_else(|| DbError::validation("key values must be parameters or literals"))
        };
        key.set(prepared.hash_name.clone(), value_of(&prepared.hash)?);
        if let (Some(name), Some(op)) = (&prepared.range_name, &prepared.range) {
            key.set(name.clone(), value_of(op)?);
        }
        let row_key = table.key_of(&key)?;
        if !seen.insert((prepared.table.clone(), row_key.clone())) {
            return Err(DbError::DuplicateItem);
        }
        // A PartiQL DELETE of a missing item succeeds and deletes nothing; it still costs a
        // write unit on the key's partition.
        let table_name = prepared.table.clone();
        let result = self.delete_row(
            &table_name,
            row_key,
            prepared.condition.as_ref().map(|c| (c, bindings)),
            true,
            now,
        );
        let written = strip_unrequested_item(result, on_failure)?;
        Ok((prepared, written.old, written.charged))
    }

    pub fn batch_execute_statement(
        &mut self,
        input: BatchExecuteStatementInput,
        now: Now,
    ) -> Result<BatchExecuteStatementOutput, DbError> {
        let rcc = rcc(input.return_consumed_capacity.as_deref())?;
        if input.statements.is_empty() || input.statements.len() > 25 {
            return Err(DbError::validation(format!(
                "1 validation error detected: Value at 'statements' failed to satisfy constraint: Member must have length less than or equal to 25 and greater than or equal to 1 (got {})",
                input.statements.len()
            )));
        }
        let mut out = BatchExecuteStatementOutput::default();
        let mut capacity = Vec::new();
        let mut seen = HashSet::new();
        for statement in &input.statements {
            let response = match self.run_delete(statement, &mut seen, now) {
                Ok((prepared, old, charged)) => {
                    let table = self.table(&prepared.table)?;
                    if let Some(c) = write_capacity(table, &charged, rcc) {
                        add_capacity(&mut capacity, c);
                    }
                    StatementResponse {
                        table_name: Some(prepared.table.clone()),
                        item: if prepared.returning_old { old } else { None },
                        error: None,
                    }
                }
                Err(e) => {
                    if let (DbError::ConditionalCheckFailed(_), Some(charged)) =
                        (&e, self.failed_charge.take())
                        && let Some(table) = statement_table(&statement.statement)
                        && let Ok(table) = self.table(&table)
                        && let Some(c) = write_capacity(table, &charged, rcc)
                    {
                        add_capacity(&mut capacity, c);
                    }
                    let (code, message, item) = match &e {
                        DbError::ConditionalCheckFailed(item) => (
                            e.statement_code(),
                            CONDITION_FAILED_MESSAGE.to_string(),
                            item.clone(),
                        ),
                        _ => (e.statement_code(), e.message(), None),
                    };
                    StatementResponse {
                        table_name: statement_table(&statement.statement),
                        item: None,
                        error: Some(StatementError {
                            code,
                            message,
                            item,
                        }),
                    }
                }
            };
            out.responses.push(response);
        }
        out.consumed_capacity = (rcc != Rcc::None).then_some(capacity);
        Ok(out)
    }

    pub fn execute_statement(
        &mut self,
        input: ExecuteStatementInput,
        now: Now,
    ) -> Result<ExecuteStatementOutput, DbError> {
        let rcc = rcc(input.return_consumed_capacity.as_deref())?;
        if input.next_token.is_some() || input.limit.is_some() {
            return Err(DbError::validation(
                "NextToken and Limit are not supported by the simulator's DELETE statements",
            ));
        }
        let mut seen = HashSet::new();
        let (prepared, old, charged) = self.run_delete(&input.statement, &mut seen, now)?;
        let table = self.table(&prepared.table)?;
        Ok(ExecuteStatementOutput {
            items: if prepared.returning_old {
                old.into_iter().collect()
            } else {
                Vec::new()
            },
            consumed_capacity: write_capacity(table, &charged, rcc),
        })
    }

    // -----------------------------------------------------------------------------------------
    // The library's own access.

    /// Stores items in `table` directly: no capacity, latency or log.
    pub fn plant(
        &mut self,
        table: &str,
        items: impl IntoIterator<Item = Item>,
    ) -> Result<usize, DbError> {
        let table = self
            .tables
            .get_mut(table)
            .ok_or_else(|| DbError::ResourceNotFound(Some(table.to_string())))?;
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

/// The table a statement names, for a failed statement's response (best effort).
fn statement_table(text: &str) -> Option<String> {
    expr::parse_partiql(text).ok().map(|s| s.table)
}

/// Drops the old item a failed condition carries unless the request asked for it.
fn strip_unrequested_item(result: WriteResult, on_failure: bool) -> WriteResult {
    match result {
        Err(DbError::ConditionalCheckFailed(item)) => {
            Err(DbError::ConditionalCheckFailed(item.filter(|_| on_failure)))
        }
        other => other,
    }
}

fn apply_update(
    table: &Table,
    key: &RowKey,
    old: Option<&Item>,
    update: &Update,
    bindings: &Bindings<'_>,
) -> Result<Item, DbError> {
    let mut item = match old {
        Some(o) => o.clone(),
        None => table.key_item(key),
    };
    let is_key = |name: &str| {
        *table.hash.name == *name || table.range.as_ref().is_some_and(|r| *r.name == *name)
    };
    for (path, value) in &update.set {
        let name = bindings.name(path)?;
        if is_key(name) {
            return Err(DbError::validation(format!(
                "One or more parameter values were invalid: Cannot update attribute {name}. This attribute is part of the key"
            )));
        }
        let v = set_value(value, old, bindings)?;
        item.set(Name::from(name), v);
    }
    for path in &update.remove {
        let name = bindings.name(path)?;
        if is_key(name) {
            return Err(DbError::validation(format!(
                "One or more parameter values were invalid: Cannot update attribute {name}. This attribute is part of the key"
            )));
        }
        item.remove(name);
    }
    Ok(item)
}

fn set_value(
    value: &expr::SetValue,
    old: Option<&Item>,
    bindings: &Bindings<'_>,
) -> Result<Value, DbError> {
    match value {
        expr::SetValue::Operand(op) => bindings
            .operand(op, old)?
            .map(|v| v.into_owned())
            .ok_or_else(|| {
                DbError::validation(
                    "The provided expression refers to an attribute that does not exist in the item",
                )
            }),
        expr::SetValue::IfNotExists(path, fallback) => {
            let name = bindings.name(path)?;
            match old.and_then(|o| o.get(name)) {
                Some(v) => Ok(v.clone()),
                None => set_value(fallback, old, bindings),
            }
        }
    }
}

fn project(item: &Item, paths: &[NameRef], bindings: &Bindings<'_>) -> Result<Item, DbError> {
    let names: Vec<&str> = paths
        .iter()
        .map(|p| bindings.name(p))
        .collect::<Result<_, _>>()?;
    Ok(item.project(&names))
}

fn read_limit(limit: Option<i64>) -> Result<Option<u64>, DbError> {
    match limit {
        None => Ok(None),
        Some(l) if l >= 1 => Ok(Some(l as u64)),
        Some(l) => Err(DbError::validation(format!(
            "1 validation error detected: Value '{l}' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1"
        ))),
    }
}

/// Whether only a count is asked for.
fn select(select: Option<&str>, projected: bool) -> Result<bool, DbError> {
    match select {
        None | Some("ALL_ATTRIBUTES") | Some("ALL_PROJECTED_ATTRIBUTES") => Ok(false),
        Some("SPECIFIC_ATTRIBUTES") if projected => Ok(false),
        Some("SPECIFIC_ATTRIBUTES") => Err(DbError::validation(
            "SPECIFIC_ATTRIBUTES needs a ProjectionExpression",
        )),
        Some("COUNT") if !projected => Ok(true),
        Some("COUNT") => Err(DbError::validation(
            "Cannot specify the ProjectionExpression when choosing to get only the Count",
        )),
        Some(other) => Err(DbError::validation(format!(
            "1 validation error detected: Value '{other}' at 'select' failed to satisfy constraint: Member must satisfy enum value set: [SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES]"
        ))),
    }
}

fn segment(segment: Option<i64>, total: Option<i64>) -> Result<(u64, Option<u64>), DbError> {
    match (segment, total) {
        (None, None) => Ok((0, None)),
        (Some(s), Some(t)) if (1..=1_000_000).contains(&t) && (0..t).contains(&s) => {
            let bound = |i: i64| ((u128::from(u64::MAX) + 1) * i as u128 / t as u128) as u64;
            Ok((bound(s), (s + 1 < t).then(|| bound(s + 1))))
        }
        _ => Err(DbError::validation(
            "The Segment parameter is required but was not present in the request when parameter TotalSegments is present",
        )),
    }
}

/// Admits a read on the table (or index) as a whole and on the partition it reads.
fn read_admit(
    table: &mut Table,
    index: Option<(usize, &KeyValue)>,
    partition: Option<usize>,
    now: Instant,
) -> Result<(), DbError> {
    let billing = table.billing;
    let throttle = match index {
        Some((i, value)) => {
            let idx = &mut table.indexes[i];
            if !idx.partition(value, now).read.admits(None, now) {
                Some(billing.throttle("Index", "Read", "KeyRangeThroughputExceeded", &idx.arn))
            } else if !idx.total_read.admits(None, now) {
                Some(billing.throttle("Index", "Read", billing.limit_reason(), &idx.arn))
            } else {
                None
            }
        }
        None => {
            if partition.is_some_and(|p| !table.partitions[p].read.admits(None, now)) {
                Some(billing.throttle("Table", "Read", "KeyRangeThroughputExceeded", &table.arn))
            } else if !table.total_read.admits(None, now) {
                Some(billing.throttle("Table", "Read", billing.limit_reason(), &table.arn))
            } else {
                None
            }
        }
    };
    match throttle {
        Some(t) => {
            table.count_throttle(&t, false);
            Err(DbError::Throttled(t))
        }
        None => Ok(()),
    }
}

fn charge_read(
    table: &mut Table,
    index: Option<(usize, &KeyValue)>,
    partition: Option<usize>,
    units: f64,
) {
    match index {
        Some((i, value)) => {
            let idx = &mut table.indexes[i];
            if let Some(p) = idx.partitions.get_mut(value) {
                p.read.take(units);
            }
            idx.total_read.take(units);
            idx.usage.read_units += units;
            idx.partition_usage
                .entry(value.clone())
                .or_default()
                .read_units += units;
        }
        None => {
            if let Some(p) = partition {
                table.partitions[p].read.take(units);
                table.partition_usage[p].read_units += units;
            }
            table.total_read.take(units);
            table.usage.read_units += units;
        }
    }
}

fn read_capacity(
    table: &Table,
    index: Option<usize>,
    units: f64,
    rcc: Rcc,
) -> Option<ConsumedCapacity> {
    match rcc {
        Rcc::None => None,
        Rcc::Total => Some(ConsumedCapacity {
            table_name: table.name.clone(),
            capacity_units: units,
            read_capacity_units: Some(units),
            write_capacity_units: None,
            table: None,
            global_secondary_indexes: None,
        }),
        Rcc::Indexes => Some(ConsumedCapacity {
            table_name: table.name.clone(),
            capacity_units: units,
            read_capacity_units: Some(units),
            write_capacity_units: None,
            table: Some(Capacity {
                capacity_units: if index.is_some() { 0.0 } else { units },
            }),
            global_secondary_indexes: index.map(|i| {
                BTreeMap::from([(
                    table.indexes[i].name.clone(),
                    Capacity {
                        capacity_units: units,
                    },
                )])
            }),
        }),
    }
}

/// Reads a KeyConditionExpression: the partition key's value and the sort key's range.
fn key_range(
    cond: &Cond,
    bindings: &Bindings<'_>,
    hash: &crate::table::KeyDef,
    range: Option<&crate::table::KeyDef>,
) -> Result<(KeyValue, SortRange), DbError> {
    let unsupported = || DbError::validation("Query key condition not supported");
    let conjuncts: Vec<&Cond> = match cond {
        Cond::And(a, b) => vec![a, b],
        other => vec![other],
    };
    if conjuncts.iter().any(|c| matches!(c, Cond::And(..))) {
        return Err(DbError::validation(
            "Invalid KeyConditionExpression: The expression contains more than two key conditions",
        ));
    }
    let key_value = |op: &Operand, def: &crate::table::KeyDef| -> Result<KeyValue, DbError> {
        if !matches!(op, Operand::Value(_)) {
            return Err(unsupported());
        }
        let value = bindings.operand(op, None)?.ok_or_else(unsupported)?;
        match value.as_key() {
            Some(k) if k.scalar_type() == def.kind => Ok(k),
            _ => Err(DbError::validation(
                "One or more parameter values were invalid: Condition parameter type does not match schema type",
            )),
        }
    };
    let mut hash_value = None;
    let mut sort = SortRange::all();
    let mut sort_seen = false;
    for c in conjuncts {
        let (name, part) = match c {
            Cond::Cmp(Operand::Path(p), op, v) => (bindings.name(p)?, (Some(*op), vec![v])),
            Cond::Cmp(v, op, Operand::Path(p)) => {
                let flipped = match op {
                    CmpOp::Lt => CmpOp::Gt,
                    CmpOp::Le => CmpOp::Ge,
                    CmpOp::Gt => CmpOp::Lt,
                    CmpOp::Ge => CmpOp::Le,
                    other => *other,
                };
                (bindings.name(p)?, (Some(flipped), vec![v]))
            }
            Cond::Between(Operand::Path(p), lo, hi) => (bindings.name(p)?, (None, vec![lo, hi])),
            Cond::BeginsWith(Operand::Path(p), v) => (bindings.name(p)?, (None, vec![v])),
            _ => return Err(unsupported()),
        };
        if name == &*hash.name {
            if part.0 != Some(CmpOp::Eq) || hash_value.is_some() {
                return Err(unsupported());
            }
            hash_value = Some(key_value(part.1[0], hash)?);
            continue;
        }
        let Some(def) = range.filter(|r| name == &*r.name) else {
            return Err(DbError::validation(format!(
                "Query condition missed key schema element: {}",
                range.map_or(&*hash.name, |r| if hash_value.is_some() {
                    &*r.name
                } else {
                    &*hash.name
                })
            )));
        };
        if sort_seen {
            return Err(unsupported());
        }
        sort_seen = true;
        match (c, part.0) {
            (Cond::Between(..), _) => {
                let lo = key_value(part.1[0], def)?;
                let hi = key_value(part.1[1], def)?;
                if lo > hi {
                    return Err(DbError::validation(
                        "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound",
                    ));
                }
                sort.low = Bound::Included(lo);
                sort.high = Bound::Included(hi);
            }
            (Cond::BeginsWith(..), _) => {
                let p = key_value(part.1[0], def)?;
                if matches!(p, KeyValue::N(_)) {
                    return Err(DbError::validation(
                        "Invalid KeyConditionExpression: Incorrect operand type for operator or function; operator or function: begins_with, operand type: N",
                    ));
                }
                sort.low = Bound::Included(p.clone());
                sort.prefix = Some(p);
            }
            (_, Some(op)) => {
                let v = key_value(part.1[0], def)?;
                match op {
                    CmpOp::Eq => {
                        sort.low = Bound::Included(v.clone());
                        sort.high = Bound::Included(v);
                    }
                    CmpOp::Lt => sort.high = Bound::Excluded(v),
                    CmpOp::Le => sort.high = Bound::Included(v),
                    CmpOp::Gt => sort.low = Bound::Excluded(v),
                    CmpOp::Ge => sort.low = Bound::Included(v),
                    CmpOp::Ne => return Err(unsupported()),
                }
            }
            _ => return Err(unsupported()),
        }
    }
    let hash_value = hash_value.ok_or_else(|| {
        DbError::validation(format!(
            "Query condition missed key schema element: {}",
            hash.name
        ))
    })?;
    Ok((hash_value, sort))
}

fn prefix_ok(sort: &SortRange, value: Option<&KeyValue>) -> bool {
    match (&sort.prefix, value) {
        (None, _) => true,
        (Some(KeyValue::S(p)), Some(KeyValue::S(v))) => v.starts_with(&**p),
        (Some(KeyValue::B(p)), Some(KeyValue::B(v))) => v.starts_with(p),
        _ => false,
    }
}

/// `BTreeMap::range` panics on reversed or empty-exclusive bounds; this says whether it may be
/// called.
fn bounds_ok<T: Ord>(low: &Bound<T>, high: &Bound<T>) -> bool {
    match (low, high) {
        (Bound::Included(l), Bound::Included(h)) => l <= h,
        (Bound::Included(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h))
        | (Bound::Excluded(l), Bound::Excluded(h)) => l < h,
        _ => true,
    }
}

/// The start of a page on an index from its ExclusiveStartKey.
fn index_start(table: &Table, index: usize, key: &Item) -> Result<IndexEntry, DbError> {
    let bad = || {
        DbError::validation(
            "The provided starting key is invalid: The provided key element does not match the schema",
        )
    };
    let idx = &table.indexes[index];
    let row = table.item_key(key).map_err(|_| bad())?;
    let slot = idx.slot(key, &row).map_err(|_| bad())?.ok_or_else(bad)?;
    let expected = 2 + usize::from(table.range.is_some()) + usize::from(idx.range.is_some());
    let shared = usize::from(*idx.hash.name == *table.hash.name)
        + usize::from(
            idx.range
                .as_ref()
                .is_some_and(|r| table.range.as_ref().is_some_and(|t| t.name == r.name)),
        );
    if key.len() != expected - shared {
        return Err(bad());
    }
    Ok(slot.1)
}

fn entry_bounds(
    sort: &SortRange,
    start: Option<&IndexEntry>,
    forward: bool,
) -> (Bound<IndexEntry>, Bound<IndexEntry>) {
    let low = match &sort.low {
        Bound::Included(v) => Bound::Included((SortKey::new(v.clone()), RowKey::min())),
        Bound::Excluded(v) => Bound::Excluded((SortKey::new(v.clone()), RowKey::max())),
        Bound::Unbounded => Bound::Unbounded,
    };
    let high = match &sort.high {
        Bound::Included(v) => Bound::Included((SortKey::new(v.clone()), RowKey::max())),
        Bound::Excluded(v) => Bound::Excluded((SortKey::new(v.clone()), RowKey::min())),
        Bound::Unbounded => Bound::Unbounded,
    };
    after_start(low, high, start.cloned(), forward)
}

fn row_bounds(
    hash: u64,
    pk: &KeyValue,
    sort: &SortRange,
    start: Option<&RowKey>,
    forward: bool,
) -> (Bound<RowKey>, Bound<RowKey>) {
    let key = |sk: Edge<KeyValue>| RowKey {
        hash,
        pk: Edge::At(pk.clone()),
        sk,
    };
    let low = match &sort.low {
        Bound::Included(v) => Bound::Included(key(Edge::At(v.clone()))),
        Bound::Excluded(v) => Bound::Excluded(key(Edge::At(v.clone()))),
        Bound::Unbounded => Bound::Included(key(Edge::Min)),
    };
    let high = match &sort.high {
        Bound::Included(v) => Bound::Included(key(Edge::At(v.clone()))),
        Bound::Excluded(v) => Bound::Excluded(key(Edge::At(v.clone()))),
        Bound::Unbounded => Bound::Included(key(Edge::Max)),
    };
    after_start(low, high, start.cloned(), forward)
}

/// Narrows a range to what comes after `start` in the reading direction.
fn after_start<T: Ord>(
    low: Bound<T>,
    high: Bound<T>,
    start: Option<T>,
    forward: bool,
) -> (Bound<T>, Bound<T>) {
    let Some(start) = start else {
        return (low, high);
    };
    if forward {
        let later = match &low {
            Bound::Unbounded => true,
            Bound::Included(l) | Bound::Excluded(l) => start >= *l,
        };
        if later {
            (Bound::Excluded(start), high)
        } else {
            (low, high)
        }
    } else {
        let earlier = match &high {
            Bound::Unbounded => true,
            Bound::Included(h) | Bound::Excluded(h) => start <= *h,
        };
        if earlier {
            (low, Bound::Excluded(start))
        } else {
            (low, high)
        }
    }
}

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
    fn of(t: &Table, _now: Instant) -> TableStats {
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
