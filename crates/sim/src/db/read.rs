//! Reads other than Query: GetItem and Scan (with segments), and what every read shares:
//! projections, limits, `Select`, and the admission, charging and reporting of read capacity.

use super::*;

impl Db {
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
        let ReadOptions {
            filter,
            projection,
            limit,
            count_only,
        } = self.read_options(&input, None)?;
        let consistent = input.consistent_read.unwrap_or(false);
        let (seg_low, seg_high) = segment(input.segment, input.total_segments)?;
        let bindings = Bindings::new(
            input.expression_attribute_names.as_ref(),
            input.expression_attribute_values.as_ref(),
        );
        let table = self.table_mut(&input.table_name)?;
        read_admit(table, None, None, now.instant)?;
        let start = start_row(table, input.exclusive_start_key.as_ref())?;
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
}

/// What Query and Scan read alike from their input, checked: the filter, the projection, the
/// limit, and whether only a count is asked for.
pub(super) struct ReadOptions {
    pub(super) filter: Option<Arc<(Cond, Used)>>,
    pub(super) projection: Option<(Vec<NameRef>, Used)>,
    pub(super) limit: Option<u64>,
    pub(super) count_only: bool,
}

impl Db {
    /// [`ReadOptions`] of `input`. `key` is the rest of the request's expression (a Query's key
    /// condition) and its placeholders: every placeholder is checked once, together.
    pub(super) fn read_options(
        &mut self,
        input: &ReadInput,
        key: Option<&Used>,
    ) -> Result<ReadOptions, DbError> {
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
        let mut used = key.cloned().unwrap_or_default();
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
            key.is_some() || filter.is_some() || projection.is_some(),
        )?;
        Ok(ReadOptions {
            limit: read_limit(input.limit)?,
            count_only: select(input.select.as_deref(), projection.is_some())?,
            filter,
            projection,
        })
    }
}

/// The table row a Query or Scan of the table goes on after: its `ExclusiveStartKey`, which
/// must be a key of the table.
pub(super) fn start_row(table: &Table, start: Option<&Item>) -> Result<Option<RowKey>, DbError> {
    start.map(|k| table.key_of(k)).transpose().map_err(|_| {
        DbError::validation(
            "The provided starting key is invalid: The provided key element does not match the schema",
        )
    })
}

pub(super) fn project(
    item: &Item,
    paths: &[NameRef],
    bindings: &Bindings<'_>,
) -> Result<Item, DbError> {
    let names: Vec<&str> = paths
        .iter()
        .map(|p| bindings.name(p))
        .collect::<Result<_, _>>()?;
    Ok(item.project(&names))
}

pub(super) fn read_limit(limit: Option<i64>) -> Result<Option<u64>, DbError> {
    match limit {
        None => Ok(None),
        Some(l) if l >= 1 => Ok(Some(l as u64)),
        Some(l) => Err(DbError::validation(format!(
            "1 validation error detected: Value '{l}' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1"
        ))),
    }
}

/// Whether only a count is asked for.
pub(super) fn select(select: Option<&str>, projected: bool) -> Result<bool, DbError> {
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
pub(super) fn read_admit(
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

pub(super) fn charge_read(
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

pub(super) fn read_capacity(
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

/// `BTreeMap::range` panics on reversed or empty-exclusive bounds; this says whether it may be
/// called.
pub(super) fn bounds_ok<T: Ord>(low: &Bound<T>, high: &Bound<T>) -> bool {
    match (low, high) {
        (Bound::Included(l), Bound::Included(h)) => l <= h,
        (Bound::Included(l), Bound::Excluded(h))
        | (Bound::Excluded(l), Bound::Included(h))
        | (Bound::Excluded(l), Bound::Excluded(h)) => l < h,
        _ => true,
    }
}
