//! Batches: BatchWriteItem (with UnprocessedItems), and PartiQL `DELETE` statements run by
//! BatchExecuteStatement (each with its own outcome) and ExecuteStatement.

use super::write::{Change, strip_unrequested_item};
use super::*;

/// A PartiQL DELETE bound to its table's key.
#[derive(Debug)]
pub(super) struct Prepared {
    table: String,
    hash_name: Name,
    range_name: Option<Name>,
    hash: Operand,
    range: Option<Operand>,
    condition: Option<Cond>,
    returning_old: bool,
    parameters: usize,
}

impl Db {
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
        self.counts.batch_statements += input.statements.len() as u64;
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
}

/// The table a statement names, for a failed statement's response (best effort).
fn statement_table(text: &str) -> Option<String> {
    expr::parse_partiql(text).ok().map(|s| s.table)
}
