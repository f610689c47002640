//! The request side of the interceptor: per operation, what changes before the request is
//! serialised, and what the response then owes ([`Owed`]).
//!
//! Query and Scan get the hide-expired filter server side, so `Count`, `Select=COUNT` and any
//! projection come out right. Reads by key get their projection widened to the TTL attribute
//! ([`include_ttl`]). PartiQL has nothing to inject: its items are judged client side.

use crate::erased::Erased;
use crate::error::PlaceholderInUse;
use crate::filter::{Merged, placeholder_in_use};
use crate::projection::{Projection, TTL_PLACEHOLDER, include_ttl};
use aws_sdk_dynamodb::operation::batch_execute_statement::BatchExecuteStatementInput;
use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemInput;
use aws_sdk_dynamodb::operation::execute_statement::ExecuteStatementInput;
use aws_sdk_dynamodb::operation::execute_transaction::ExecuteTransactionInput;
use aws_sdk_dynamodb::operation::get_item::GetItemInput;
use aws_sdk_dynamodb::operation::query::QueryInput;
use aws_sdk_dynamodb::operation::scan::ScanInput;
use aws_sdk_dynamodb::operation::transact_get_items::TransactGetItemsInput;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{ReadFilter, Timestamp};
use std::collections::HashMap;

/// What a read's response must have done to it, remembered from its request (the input is gone
/// by the time the response arrives).
#[derive(Debug, Clone)]
pub(crate) enum Owed {
    /// Expired items dropped from `Items`, `Count` lowered by as many.
    Query,
    Scan,
    /// Expired items dropped from a PartiQL `SELECT`'s `Items`.
    Select,
    /// An expired `Item` removed; the TTL attribute stripped if we added it.
    GetItem {
        strip: bool,
    },
    /// Expired items dropped from `Responses[table]`; on the tables whose projection we widened,
    /// the TTL attribute stripped and `UnprocessedKeys` given the caller's projection back.
    BatchGetItem {
        widened: HashMap<String, Projection>,
    },
    /// Expired entries' `Item` removed (positions kept); stripped where we widened, by position.
    TransactGetItems {
        strip: Vec<bool>,
    },
    /// BatchExecuteStatement: expired entries' `Item` removed.
    Statements,
    /// ExecuteTransaction: expired entries' `Item` removed.
    Transaction,
}

/// Changes a request for `ttl_attribute` at `now` and says what its response owes; `None` for
/// operations that are left alone.
pub(crate) fn prepare(
    input: &mut impl Erased,
    ttl_attribute: &str,
    now: Timestamp,
) -> Result<Option<Owed>, PlaceholderInUse> {
    if let Some(q) = input.get::<QueryInput>() {
        // DynamoDB refuses a request that mixes legacy parameters with expressions, so a legacy
        // Query gets the client-side check only.
        let legacy = q.key_conditions.is_some()
            || q.query_filter.is_some()
            || q.conditional_operator.is_some()
            || q.attributes_to_get.is_some();
        if !legacy {
            inject(
                "Query",
                &mut q.filter_expression,
                &mut q.expression_attribute_names,
                &mut q.expression_attribute_values,
                ttl_attribute,
                now,
            )?;
        }
        return Ok(Some(Owed::Query));
    }
    if let Some(s) = input.get::<ScanInput>() {
        let legacy = s.scan_filter.is_some()
            || s.conditional_operator.is_some()
            || s.attributes_to_get.is_some();
        if !legacy {
            inject(
                "Scan",
                &mut s.filter_expression,
                &mut s.expression_attribute_names,
                &mut s.expression_attribute_values,
                ttl_attribute,
                now,
            )?;
        }
        return Ok(Some(Owed::Scan));
    }
    if let Some(g) = input.get::<GetItemInput>() {
        let widened = include_ttl(
            &mut g.projection_expression,
            &mut g.expression_attribute_names,
            &mut g.attributes_to_get,
            ttl_attribute,
        )
        .map_err(|_| taken("GetItem"))?;
        return Ok(Some(Owed::GetItem {
            strip: widened.is_some(),
        }));
    }
    if let Some(b) = input.get::<BatchGetItemInput>() {
        let mut widened = HashMap::new();
        for (table, request) in b.request_items.iter_mut().flatten() {
            let original = include_ttl(
                &mut request.projection_expression,
                &mut request.expression_attribute_names,
                &mut request.attributes_to_get,
                ttl_attribute,
            )
            .map_err(|_| taken("BatchGetItem"))?;
            if let Some(original) = original {
                widened.insert(table.clone(), original);
            }
        }
        return Ok(Some(Owed::BatchGetItem { widened }));
    }
    if let Some(t) = input.get::<TransactGetItemsInput>() {
        let mut strip = Vec::new();
        for item in t.transact_items.iter_mut().flatten() {
            let widened = match item.get.as_mut() {
                Some(get) => include_ttl(
                    &mut get.projection_expression,
                    &mut get.expression_attribute_names,
                    &mut None,
                    ttl_attribute,
                )
                .map_err(|_| taken("TransactGetItems"))?,
                None => None,
            };
            strip.push(widened.is_some());
        }
        return Ok(Some(Owed::TransactGetItems { strip }));
    }
    if let Some(e) = input.get::<ExecuteStatementInput>() {
        return Ok(e
            .statement
            .as_deref()
            .is_some_and(is_select)
            .then_some(Owed::Select));
    }
    if input.get::<BatchExecuteStatementInput>().is_some() {
        return Ok(Some(Owed::Statements));
    }
    if input.get::<ExecuteTransactionInput>().is_some() {
        return Ok(Some(Owed::Transaction));
    }
    Ok(None)
}

/// Merges the hide-expired filter into a Query's or Scan's own.
fn inject(
    operation: &'static str,
    expression: &mut Option<String>,
    names: &mut Option<HashMap<String, String>>,
    values: &mut Option<HashMap<String, AttributeValue>>,
    ttl_attribute: &str,
    now: Timestamp,
) -> Result<(), PlaceholderInUse> {
    let filter = ReadFilter::hide_expired(ttl_attribute, now);
    if let Some(placeholder) = placeholder_in_use(&filter, names.as_ref(), values.as_ref()) {
        return Err(PlaceholderInUse {
            operation,
            placeholder: placeholder.to_string(),
        });
    }
    let merged = Merged::new(&filter, expression, names, values);
    *expression = Some(merged.expression);
    *names = Some(merged.names);
    *values = Some(merged.values);
    Ok(())
}

fn taken(operation: &'static str) -> PlaceholderInUse {
    PlaceholderInUse {
        operation,
        placeholder: TTL_PLACEHOLDER.to_string(),
    }
}

/// Whether a PartiQL statement reads: its first word is `SELECT`, in any case.
fn is_select(statement: &str) -> bool {
    statement
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case("select"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selects_are_told_from_other_statements() {
        assert!(is_select("SELECT * FROM t"));
        assert!(is_select("  select pk FROM \"t\""));
        assert!(is_select("Select\n*\nFROM t"));
        assert!(!is_select("UPDATE t SET a = 1 WHERE pk = 'a'"));
        assert!(!is_select("selection"));
        assert!(!is_select("INSERT INTO t VALUE {'pk': 'select'}"));
        assert!(!is_select(""));
    }
}
