//! Switching the interceptor off for one call, operations it leaves alone, errors passed through,
//! and the write condition that treats an expired item as absent.

use crate::support::*;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{DueWindow, Timestamp};
use precise_ttl_read::ShowExpired;

#[tokio::test]
async fn show_expired_switches_it_off_for_one_call() {
    let (table, client) = hiding_table().await;
    let query = || {
        client
            .query()
            .table_name(&table)
            .key_condition_expression("pk = :pk")
            .expression_attribute_values(":pk", s(PK))
    };
    let off = query()
        .customize()
        .interceptor(ShowExpired)
        .send()
        .await
        .unwrap();
    assert_eq!(sks(off.items()), all());
    assert_eq!(off.count as usize, all().len());
    // The next call hides again.
    assert_eq!(sks(query().send().await.unwrap().items()), visible());

    let get = client
        .get_item()
        .table_name(&table)
        .set_key(Some(key_of("exp-1h")))
        .projection_expression("sk")
        .customize()
        .interceptor(ShowExpired)
        .send()
        .await
        .unwrap();
    assert_eq!(get.item.map(|i| i.len()), Some(1));
}

#[tokio::test]
async fn errors_and_other_operations_pass_through() {
    let (table, client) = hiding_table().await;
    let err = client
        .get_item()
        .table_name("no-such-table")
        .set_key(Some(key_of("x")))
        .send()
        .await
        .unwrap_err();
    assert!(
        err.as_service_error()
            .is_some_and(|e| e.is_resource_not_found_exception()),
        "{err:?}"
    );
    let err = client
        .query()
        .table_name(&table)
        .key_condition_expression("pk = :pk")
        .send()
        .await
        .unwrap_err();
    assert!(
        err.as_service_error().is_some(),
        "DynamoDB's own refusal: {err:?}"
    );

    let description = client
        .describe_table()
        .table_name(&table)
        .send()
        .await
        .unwrap();
    assert_eq!(
        description.table().and_then(|t| t.table_name()),
        Some(table.as_str())
    );
    // Writes: an expired item is overwritten like any other.
    let mut item = key_of("exp-1h");
    item.insert("ttl".into(), AttributeValue::N("1".into()));
    let put = client
        .put_item()
        .table_name(&table)
        .set_item(Some(item))
        .return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld)
        .send()
        .await
        .unwrap();
    assert_eq!(put.attributes().map(|a| a["sk"].clone()), Some(s("exp-1h")));
}

/// The condition from the docs: a put that must treat an expired item as absent.
#[tokio::test]
async fn the_write_condition_treats_an_expired_item_as_absent() {
    let (table, now) = table().await;
    let client = plain();
    let window = DueWindow::at(now);
    let create = |sk: &str| {
        let mut item = key_of(sk);
        item.insert("data".into(), s("new"));
        client
            .put_item()
            .table_name(&table)
            .set_item(Some(item))
            .condition_expression(
                "attribute_not_exists(pk) OR (attribute_type(#ttl, :N) AND #ttl BETWEEN :oldest AND :now)",
            )
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":N", s("N"))
            .expression_attribute_values(":oldest", number(window.oldest))
            .expression_attribute_values(":now", number(window.until))
            .send()
    };
    for sk in HIDDEN.iter().chain(["brand-new"].iter()) {
        create(sk).await.unwrap_or_else(|e| panic!("{sk}: {e:?}"));
    }
    for sk in VISIBLE {
        let err = create(sk).await.unwrap_err();
        assert!(
            err.as_service_error()
                .is_some_and(|e| e.is_conditional_check_failed_exception()),
            "{sk}: {err:?}"
        );
    }
}

fn number(t: Timestamp) -> AttributeValue {
    AttributeValue::N(t.to_epoch_seconds_text())
}
