//! Single-item writes: PutItem, UpdateItem, DeleteItem, and the two write paths every write
//! (batched or not) goes through: `Db::write` and `Db::delete_row`.

use super::*;

/// The outcome of one single-item write.
pub(super) struct Written {
    pub(super) old: Option<Item>,
    pub(super) new: Option<Item>,
    pub(super) charged: Charged,
}

/// A statement's or a write's failure: an error, with the old item when asked for.
pub(super) type WriteResult = Result<Written, DbError>;

/// What a PutItem or a DeleteItem names: the new item, or the key of the one to delete.
enum Plain {
    Put(Item),
    Delete(Item),
}

/// What a single-item write (other than a delete, see `Db::delete_row`) does to the item.
pub(super) enum Change<'a> {
    Put(Item),
    Update(&'a Update, Bindings<'a>),
}

impl Db {
    // -----------------------------------------------------------------------------------------
    // Single-item writes.

    /// One write: finds the item, checks the condition, plans the change, asks for capacity,
    /// then applies it and logs a delete.
    pub(super) fn write(
        &mut self,
        table_name: &str,
        key: RowKey,
        condition: Option<(&Cond, Bindings<'_>)>,
        change: Change<'_>,
        now: Now,
    ) -> WriteResult {
        let table = table_in(&mut self.tables, table_name)?;
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
            log_delete(&mut self.log, now, table_name, &key);
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
    pub(super) fn delete_row(
        &mut self,
        table_name: &str,
        key: RowKey,
        condition: Option<(&Cond, Bindings<'_>)>,
        absent_ok: bool,
        now: Now,
    ) -> WriteResult {
        let table = table_in(&mut self.tables, table_name)?;
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
            log_delete(&mut self.log, now, table_name, &key);
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

    pub fn put_item(&mut self, mut input: PutItemInput, now: Now) -> Result<WriteOutput, DbError> {
        let item = std::mem::take(&mut input.item);
        self.put_or_delete(input.shared(), Plain::Put(item), now)
    }

    pub fn delete_item(
        &mut self,
        mut input: DeleteItemInput,
        now: Now,
    ) -> Result<WriteOutput, DbError> {
        let key = std::mem::take(&mut input.key);
        self.put_or_delete(input.shared(), Plain::Delete(key), now)
    }

    /// PutItem and DeleteItem: one checks its options alike, writes through `Db::write` or
    /// `Db::delete_row`, and answers alike.
    fn put_or_delete(
        &mut self,
        input: Conditional<'_>,
        plain: Plain,
        now: Now,
    ) -> Result<WriteOutput, DbError> {
        // AttributeUpdates is UpdateItem's; the two refuse only the legacy parameters they
        // share with it.
        refuse_legacy(&input.legacy[..2])?;
        let rcc = rcc(input.rcc)?;
        let returns = returns(input.return_values, &[Returns::None, Returns::AllOld])?;
        let on_failure = on_failure(input.on_failure)?;
        let condition = self.parse_optional_condition(input.condition)?;
        let used = condition.as_ref().map(|c| c.1.clone()).unwrap_or_default();
        check_placeholders(&used, input.names, input.values, condition.is_some())?;
        let table = self.table(input.table_name)?;
        let key = match &plain {
            Plain::Put(item) => table.item_key(item)?,
            Plain::Delete(key) => table.key_of(key)?,
        };
        let bindings = Bindings::new(input.names, input.values);
        let condition = condition.as_ref().map(|c| (&c.0, bindings));
        let written = match plain {
            Plain::Put(item) => {
                self.write(input.table_name, key, condition, Change::Put(item), now)
            }
            Plain::Delete(_) => self.delete_row(input.table_name, key, condition, false, now),
        };
        let written = strip_unrequested_item(written, on_failure)?;
        let table = self.table(input.table_name)?;
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
        let shared = input.shared();
        refuse_legacy(&shared.legacy)?;
        let rcc = rcc(shared.rcc)?;
        let returns = returns(
            shared.return_values,
            &[
                Returns::None,
                Returns::AllOld,
                Returns::AllNew,
                Returns::UpdatedOld,
                Returns::UpdatedNew,
            ],
        )?;
        let on_failure = on_failure(shared.on_failure)?;
        let Some(update_text) = input.update_expression.as_deref() else {
            return Err(DbError::validation(
                "the simulator needs an UpdateExpression for UpdateItem",
            ));
        };
        let update = self.update_expression(update_text)?;
        let condition = self.parse_optional_condition(shared.condition)?;
        let mut used = update.1.clone();
        if let Some(c) = &condition {
            used.extend(&c.1);
        }
        check_placeholders(&used, shared.names, shared.values, true)?;
        let key = self.table(shared.table_name)?.key_of(&input.key)?;
        let bindings = Bindings::new(shared.names, shared.values);
        let updated_names: Vec<String> = update
            .0
            .set
            .iter()
            .map(|(n, _)| n)
            .chain(&update.0.remove)
            .filter_map(|n| bindings.name(n).ok().map(str::to_string))
            .collect();
        let written = self.write(
            shared.table_name,
            key,
            condition
                .as_ref()
                .map(|c| (&c.0, bindings.kind("ConditionExpression"))),
            Change::Update(&update.0, bindings.kind("UpdateExpression")),
            now,
        );
        let written = strip_unrequested_item(written, on_failure)?;
        let table = self.table(shared.table_name)?;
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
}

/// Notes the delete of `key` in the deletion log (the simulator's `/deletions`), its keys as
/// text: one place for both write paths that delete.
fn log_delete(log: &mut DeletionLog, now: Now, table_name: &str, key: &RowKey) {
    let pk = key.pk.value().map(KeyValue::text).unwrap_or_default();
    let sk = key.sk.value().map(KeyValue::text);
    log.record(now.wall_ms, table_name, &pk, sk.as_deref());
}

/// Drops the old item a failed condition carries unless the request asked for it.
pub(super) fn strip_unrequested_item(result: WriteResult, on_failure: bool) -> WriteResult {
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
