//! Query and Scan: the filter injected server side (counts, pagination, projections, the caller's
//! own filter), the second check on arrival, legacy parameters, and our placeholders refused.

use crate::support::*;
use aws_sdk_dynamodb::types::{AttributeValue, ComparisonOperator, Condition, Select};
use precise_ttl_core::Timestamp;
use precise_ttl_read::HideExpired;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

#[tokio::test]
async fn query_and_scan_hide_expired_items_and_count_only_the_rest() {
    let (table, client) = hiding_table().await;
    let q = query_pk(&client, &table).send().await.unwrap();
    assert_shown(q.items(), q.count, &visible());
    assert_eq!(q.scanned_count, (VISIBLE.len() + HIDDEN.len()) as i32);

    let s = scan(&client, &table).send().await.unwrap();
    assert_shown(s.items(), s.count, &visible());

    // Without the interceptor every item is there.
    let raw = scan(&plain(), &table).send().await.unwrap();
    assert_eq!(sks(raw.items()), all());
}

#[tokio::test]
async fn select_count_counts_only_unexpired_items() {
    let (table, client) = hiding_table().await;
    let q = query_pk(&client, &table)
        .select(Select::Count)
        .send()
        .await
        .unwrap();
    assert_eq!(q.count, VISIBLE.len() as i32);
    assert!(q.items.is_none());
    let s = scan(&client, &table)
        .select(Select::Count)
        .send()
        .await
        .unwrap();
    assert_eq!(s.count, VISIBLE.len() as i32);
}

#[tokio::test]
async fn paginators_see_every_visible_item_once_and_no_expired_one() {
    let (table, client) = hiding_table().await;
    for limit in [1, 2, 4] {
        let items: Vec<Item> = query_pk(&client, &table)
            .limit(limit)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(sks(&items), visible(), "Query, Limit {limit}");
        let items: Vec<Item> = scan(&client, &table)
            .limit(limit)
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await
            .unwrap();
        assert_eq!(sks(&items), visible(), "Scan, Limit {limit}");
    }
    // By hand: LastEvaluatedKey as DynamoDB sent it, pages of `Limit` items examined.
    let mut seen = Vec::new();
    let mut start = None;
    let mut pages = 0;
    loop {
        let page = query_pk(&client, &table)
            .limit(2)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        pages += 1;
        assert_eq!(page.count as usize, page.items().len());
        seen.extend(page.items().iter().cloned());
        start = page.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    assert_eq!(sks(&seen), visible());
    assert!(pages >= 5, "Limit counts the filtered-out items too");
}

#[tokio::test]
async fn the_callers_filter_names_and_values_are_kept() {
    let (table, client) = hiding_table().await;
    let q = client
        .query()
        .table_name(&table)
        .key_condition_expression("#pk = :pk")
        .filter_expression("#kind = :kind OR #data = :special")
        .expression_attribute_names("#pk", "pk")
        .expression_attribute_names("#kind", "kind")
        .expression_attribute_names("#data", "data")
        .expression_attribute_values(":pk", s(PK))
        .expression_attribute_values(":kind", s("a"))
        .expression_attribute_values(":special", s("d-exp-1h"))
        .send()
        .await
        .unwrap();
    // Kind `a` is every other fixture item; `exp-1h` matches the caller's OR but is expired,
    // which the parentheses around the caller's filter keep hidden.
    assert_kind_a(&table, q.items(), q.count).await;
}

/// `items` (and their `count`) are the items of kind `a` that must stay visible, as a client
/// without the interceptor reads them (and there are some).
async fn assert_kind_a(table: &str, items: &[Item], count: i32) {
    let expected: Vec<String> = raw_kind_a(table)
        .await
        .into_iter()
        .filter(|sk| VISIBLE.contains(&sk.as_str()))
        .collect();
    assert!(!expected.is_empty());
    assert_shown(items, count, &expected);
}

/// `items` are `expected`'s, and `count` counts them.
fn assert_shown(items: &[Item], count: i32, expected: &[String]) {
    assert_eq!(sks(items), expected);
    assert_eq!(count as usize, expected.len());
}

async fn raw_kind_a(table: &str) -> Vec<String> {
    let raw = scan(&plain(), table)
        .filter_expression("kind = :a")
        .expression_attribute_values(":a", s("a"))
        .send()
        .await
        .unwrap();
    sks(raw.items())
}

#[tokio::test]
async fn a_global_secondary_index_that_projects_the_ttl_attribute_is_filtered_too() {
    let (table, client) = hiding_table().await;
    let q = client
        .query()
        .table_name(&table)
        .index_name(BY_KIND)
        .key_condition_expression("kind = :a")
        .expression_attribute_values(":a", s("a"))
        .send()
        .await
        .unwrap();
    assert_kind_a(&table, q.items(), q.count).await;
}

#[tokio::test]
async fn a_projection_without_the_ttl_attribute_still_hides_expired_items() {
    let (table, client) = hiding_table().await;
    let q = query_pk(&client, &table)
        .projection_expression("sk, #d")
        .expression_attribute_names("#d", "data")
        .send()
        .await
        .unwrap();
    assert_eq!(sks(q.items()), visible());
    assert!(q.items().iter().all(|i| i.len() == 2));
    let s = scan(&client, &table)
        .projection_expression("sk")
        .send()
        .await
        .unwrap();
    assert_eq!(sks(s.items()), visible());
    assert!(s.items().iter().all(|i| i.len() == 1));
}

#[tokio::test]
async fn items_that_expire_in_flight_are_hidden_on_arrival_and_not_counted() {
    let (table, now) = table().await;
    let secs = now.as_millis() / 1000;
    let mut item = key_of("expires-in-flight");
    item.insert("ttl".into(), AttributeValue::N(format!("{}", secs + 5)));
    put(&plain(), &table, item).await;
    // The clock reads `now` when the request leaves and ten seconds later when it arrives.
    let reads = Arc::new(AtomicUsize::new(0));
    let clock = {
        let reads = reads.clone();
        move || {
            let n = reads.fetch_add(1, Ordering::SeqCst) as u64;
            now.saturating_add(std::time::Duration::from_secs(10 * n.min(1)))
        }
    };
    let client = hiding(HideExpired::new("ttl").with_clock(clock));
    let q = query_pk(&client, &table).send().await.unwrap();
    assert_eq!(reads.load(Ordering::SeqCst), 2);
    assert_shown(q.items(), q.count, &visible());
    assert_eq!(
        q.scanned_count,
        (VISIBLE.len() + HIDDEN.len() + 1) as i32,
        "ScannedCount is DynamoDB's"
    );
}

#[tokio::test]
async fn legacy_parameters_get_the_client_side_check() {
    let (table, client) = hiding_table().await;
    let eq = |v: AttributeValue| {
        Condition::builder()
            .comparison_operator(ComparisonOperator::Eq)
            .attribute_value_list(v)
            .build()
            .unwrap()
    };
    let q = client
        .query()
        .table_name(&table)
        .key_conditions("pk", eq(s(PK)))
        .send()
        .await
        .unwrap();
    assert_shown(q.items(), q.count, &visible());
    let s = scan(&client, &table)
        .scan_filter("kind", eq(s("a")))
        .send()
        .await
        .unwrap();
    assert_kind_a(&table, s.items(), s.count).await;
}

#[tokio::test]
async fn a_request_that_binds_our_placeholders_fails_clearly() {
    let (table, _) = table().await;
    let client = hiding_at(Timestamp::from_secs(0));
    let err = query_pk(&client, &table)
        .expression_attribute_values(":precise_ttl_now", AttributeValue::N("1".into()))
        .send()
        .await
        .unwrap_err();
    let ours = placeholder_error(&err).expect("the interceptor's error");
    assert_eq!(ours.operation, "Query");
    assert_eq!(ours.placeholder, ":precise_ttl_now");
    assert!(ours.to_string().contains(":precise_ttl_now"));

    // The helper and the interceptor together: the same clash, refused.
    let helper =
        precise_ttl_read::hide_expired_scan(scan(&client, &table), "ttl", Timestamp::from_secs(0));
    let err = helper.send().await.unwrap_err();
    assert_eq!(placeholder_error(&err).unwrap().operation, "Scan");
}
