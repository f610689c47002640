//! Query: on the table or an index, with a key condition (the partition key's value and a
//! range of the sort key), filters, projections, limits, pages in either direction, and its
//! capacity on the partition it reads.

use super::read::{
    ReadOptions, bounds_ok, charge_read, project, read_admit, read_capacity, start_row,
};
use super::*;

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

impl Db {
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
        let ReadOptions {
            filter,
            projection,
            limit,
            count_only,
        } = self.read_options(&input, Some(&key_condition.1))?;
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
                    let start = start_row(table_ref, input.exclusive_start_key.as_ref())?;
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
