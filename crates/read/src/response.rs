//! The response side of the interceptor: expired items removed from what a read returns, judged
//! at the moment the response arrives, so an item that expired while the request was in flight
//! is hidden too. Pagination (`LastEvaluatedKey`, `NextToken`), `ScannedCount` and
//! `UnprocessedKeys`' keys are left as DynamoDB sent them.

use crate::erased::Erased;
use crate::is_expired;
use crate::projection::strip;
use crate::request::Owed;
use aws_sdk_dynamodb::operation::batch_execute_statement::BatchExecuteStatementOutput;
use aws_sdk_dynamodb::operation::batch_get_item::BatchGetItemOutput;
use aws_sdk_dynamodb::operation::execute_statement::ExecuteStatementOutput;
use aws_sdk_dynamodb::operation::execute_transaction::ExecuteTransactionOutput;
use aws_sdk_dynamodb::operation::get_item::GetItemOutput;
use aws_sdk_dynamodb::operation::query::QueryOutput;
use aws_sdk_dynamodb::operation::scan::ScanOutput;
use aws_sdk_dynamodb::operation::transact_get_items::TransactGetItemsOutput;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::Timestamp;
use std::collections::HashMap;

type Item = HashMap<String, AttributeValue>;

/// Settles what a successful read's `output` owes for `ttl_attribute` at `now`.
pub(crate) fn settle(output: &mut impl Erased, owed: &Owed, ttl_attribute: &str, now: Timestamp) {
    let expired = |item: &Item| is_expired(item, ttl_attribute, now);
    match owed {
        Owed::Query => {
            if let Some(o) = output.get::<QueryOutput>() {
                let removed = drop_expired(&mut o.items, expired);
                o.count = lowered(o.count, removed);
            }
        }
        Owed::Scan => {
            if let Some(o) = output.get::<ScanOutput>() {
                let removed = drop_expired(&mut o.items, expired);
                o.count = lowered(o.count, removed);
            }
        }
        Owed::Select => {
            if let Some(o) = output.get::<ExecuteStatementOutput>() {
                drop_expired(&mut o.items, expired);
            }
        }
        Owed::GetItem { strip: widened } => {
            if let Some(o) = output.get::<GetItemOutput>() {
                settle_item(&mut o.item, *widened, ttl_attribute, expired);
            }
        }
        Owed::BatchGetItem { widened } => {
            if let Some(o) = output.get::<BatchGetItemOutput>() {
                for (table, items) in o.responses.iter_mut().flatten() {
                    items.retain(|item| !expired(item));
                    if widened.contains_key(table) {
                        items.iter_mut().for_each(|item| strip(item, ttl_attribute));
                    }
                }
                // DynamoDB returns the request's own projection with the keys it did not get to;
                // the caller resends them as they are, so they must carry the caller's projection,
                // not ours (which would also bind our placeholder a second time).
                for (table, request) in o.unprocessed_keys.iter_mut().flatten() {
                    if let Some(original) = widened.get(table) {
                        request.projection_expression = original.expression.clone();
                        request.expression_attribute_names = original.names.clone();
                        request.attributes_to_get = original.attributes_to_get.clone();
                    }
                }
            }
        }
        Owed::TransactGetItems { strip: widened } => {
            if let Some(o) = output.get::<TransactGetItemsOutput>() {
                for (i, response) in o.responses.iter_mut().flatten().enumerate() {
                    let widened = widened.get(i).copied().unwrap_or(false);
                    settle_item(&mut response.item, widened, ttl_attribute, expired);
                }
            }
        }
        Owed::Statements => {
            if let Some(o) = output.get::<BatchExecuteStatementOutput>() {
                for response in o.responses.iter_mut().flatten() {
                    settle_item(&mut response.item, false, ttl_attribute, expired);
                }
            }
        }
        Owed::Transaction => {
            if let Some(o) = output.get::<ExecuteTransactionOutput>() {
                for response in o.responses.iter_mut().flatten() {
                    settle_item(&mut response.item, false, ttl_attribute, expired);
                }
            }
        }
    }
}

/// Removes the expired items; gives back how many.
fn drop_expired(items: &mut Option<Vec<Item>>, expired: impl Fn(&Item) -> bool) -> usize {
    let Some(items) = items else { return 0 };
    let before = items.len();
    items.retain(|item| !expired(item));
    before - items.len()
}

/// An item read by key: absent if expired, else without the TTL attribute if we added it.
fn settle_item(
    item: &mut Option<Item>,
    widened: bool,
    ttl_attribute: &str,
    expired: impl Fn(&Item) -> bool,
) {
    if item.as_ref().is_some_and(&expired) {
        *item = None;
    }
    if widened && let Some(item) = item.as_mut() {
        strip(item, ttl_attribute);
    }
}

fn lowered(count: i32, removed: usize) -> i32 {
    count.saturating_sub(i32::try_from(removed).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::Projection;
    use aws_sdk_dynamodb::types::KeysAndAttributes;
    use std::any::Any;

    /// An output held as itself, for the code that reaches it through [`Erased`].
    struct Held<O>(O);

    impl<O: Any> Erased for Held<O> {
        fn get<T: std::fmt::Debug + Send + Sync + 'static>(&mut self) -> Option<&mut T> {
            (&mut self.0 as &mut dyn Any).downcast_mut()
        }
    }

    const NOW: Timestamp = Timestamp::from_secs(1_800_000_000);

    fn item(sk: &str, ttl: &str) -> Item {
        HashMap::from([
            ("sk".to_string(), AttributeValue::S(sk.into())),
            ("ttl".to_string(), AttributeValue::N(ttl.into())),
        ])
    }

    #[test]
    fn unprocessed_keys_get_the_callers_projection_back() {
        let key = HashMap::from([("sk".to_string(), AttributeValue::S("later".into()))]);
        let ours = KeysAndAttributes::builder()
            .keys(key.clone())
            .projection_expression("sk, #precise_ttl_attr")
            .expression_attribute_names("#precise_ttl_attr", "ttl")
            .build()
            .unwrap();
        let output = BatchGetItemOutput::builder()
            .responses(
                "t",
                vec![item("gone", "1799999999"), item("here", "1800000001")],
            )
            .unprocessed_keys("t", ours)
            .build();
        let widened = HashMap::from([(
            "t".to_string(),
            Projection {
                expression: Some("sk".into()),
                names: None,
                attributes_to_get: None,
            },
        )]);
        let mut held = Held(output);
        settle(&mut held, &Owed::BatchGetItem { widened }, "ttl", NOW);
        let out = held.0;
        let items = &out.responses.as_ref().unwrap()["t"];
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].len(), 1, "the TTL attribute stripped");
        assert_eq!(items[0]["sk"], AttributeValue::S("here".into()));
        let unprocessed = &out.unprocessed_keys.as_ref().unwrap()["t"];
        assert_eq!(unprocessed.keys, vec![key]);
        assert_eq!(unprocessed.projection_expression.as_deref(), Some("sk"));
        assert_eq!(unprocessed.expression_attribute_names, None);
    }

    #[test]
    fn another_operations_output_is_left_alone() {
        let mut held = Held(
            QueryOutput::builder()
                .items(item("gone", "1799999999"))
                .count(1)
                .build(),
        );
        settle(&mut held, &Owed::Scan, "ttl", NOW);
        assert_eq!(held.0.count, 1);
        settle(&mut held, &Owed::Query, "ttl", NOW);
        assert_eq!(held.0.count, 0);
        assert!(held.0.items().is_empty());
    }
}
