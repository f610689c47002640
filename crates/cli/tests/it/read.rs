//! Readers hiding expired-but-not-yet-deleted items: the Scan and Query filters and the GetItem
//! check agree with native TTL on every shape of TTL, and keep the caller's own filter intact.

use crate::support::{TestTable, at, item, n, now, s};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::Timestamp;
use precise_ttl_read::{hide_expired_query, hide_expired_scan, is_expired};
use std::collections::{BTreeSet, HashMap};

const YEAR_SECS: i64 = 365 * 24 * 3600;
const KINDS: [&str; 3] = ["x", "y", "z"];

type Item = HashMap<String, AttributeValue>;

/// One item per TTL shape native TTL distinguishes, named by what the reader should see.
fn ttl_shapes(
    now: Timestamp,
) -> (
    Vec<(&'static str, Option<AttributeValue>)>,
    BTreeSet<String>,
) {
    let secs = now.as_millis() / 1000;
    let shapes = vec![
        ("expired-a-minute-ago", Some(at(-60_000))),
        ("expired-decimal", Some(n(format!("{}.25", secs - 30)))),
        ("expired-four-years-ago", Some(n(secs - 4 * YEAR_SECS))),
        ("live-future", Some(at(3_600_000))),
        ("live-no-ttl", None),
        ("live-string-ttl", Some(s(&(secs - 60).to_string()))),
        ("live-six-years-ago", Some(n(secs - 6 * YEAR_SECS))),
        // A past instant written in milliseconds: native TTL reads it as thousands of years ahead.
        ("live-milliseconds", Some(n(now.as_millis() - 60_000))),
    ];
    let live = shapes
        .iter()
        .filter(|(name, _)| name.starts_with("live-"))
        .map(|(name, _)| name.to_string())
        .collect();
    (shapes, live)
}

fn consistent_scan(
    table: &TestTable,
) -> aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder {
    table.scan().consistent_read(true)
}

/// One item per shape, keyed by the shape's name.
async fn put_shapes(table: &TestTable, shapes: &[(&'static str, Option<AttributeValue>)]) {
    let items = shapes
        .iter()
        .map(|(pk, ttl)| match ttl {
            Some(ttl) => item(pk, &[("ttl", ttl.clone()), ("body", s("x"))]),
            None => item(pk, &[("body", s("x"))]),
        })
        .collect();
    table.put_many(items).await;
}

fn attribute(item: &Item, name: &str) -> String {
    match item.get(name) {
        Some(AttributeValue::S(v)) => v.clone(),
        other => panic!("{name} is {other:?}"),
    }
}

fn names_of(items: &[Item], key: &str) -> BTreeSet<String> {
    items.iter().map(|i| attribute(i, key)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scan_and_get_item_hide_exactly_the_items_native_ttl_counts_as_expired() {
    let table = TestTable::bare().await;
    let written_at = now();
    let (shapes, live) = ttl_shapes(written_at);
    put_shapes(&table, &shapes).await;
    let read_at = now();

    let out = hide_expired_scan(consistent_scan(&table), "ttl", read_at)
        .send()
        .await
        .expect("scan");
    assert!(out.last_evaluated_key.is_none());
    assert_eq!(names_of(out.items(), "pk"), live);
    assert_eq!(
        out.scanned_count,
        shapes.len() as i32,
        "the filter reads everything"
    );

    // The filter sees the whole item, so it works when the projection leaves the TTL out.
    let projected = consistent_scan(&table).projection_expression("pk");
    let out = hide_expired_scan(projected, "ttl", read_at)
        .send()
        .await
        .expect("scan");
    assert_eq!(names_of(out.items(), "pk"), live);
    assert!(out.items().iter().all(|i| i.len() == 1));

    for (pk, _) in &shapes {
        let got = table.get(pk).await.expect("item is still there");
        assert_eq!(
            is_expired(&got, "ttl", read_at),
            !live.contains(*pk),
            "{pk}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_keeps_the_callers_key_condition_filter_and_placeholders() {
    let table = TestTable::bare_with_sort_key().await;
    let (shapes, live) = ttl_shapes(now());
    let mut items = Vec::new();
    for pk in ["user-1", "user-2"] {
        for (sk, ttl) in &shapes {
            for kind in KINDS {
                let mut i = item(pk, &[("sk", s(&format!("{sk}/{kind}"))), ("kind", s(kind))]);
                if let Some(ttl) = ttl {
                    i.insert("ttl".to_string(), ttl.clone());
                }
                items.push(i);
            }
        }
    }
    table.put_many(items).await;
    let read_at = now();

    // The caller's filter has an OR: combined without parentheses, expired `x` items would leak.
    let query = table
        .query()
        .key_condition_expression("#pk = :pk")
        .filter_expression("#kind = :x OR #kind = :z")
        .expression_attribute_names("#pk", "pk")
        .expression_attribute_names("#kind", "kind")
        .expression_attribute_values(":pk", s("user-1"))
        .expression_attribute_values(":x", s("x"))
        .expression_attribute_values(":z", s("z"));
    let out = hide_expired_query(query, "ttl", read_at)
        .send()
        .await
        .expect("query");
    assert!(out.last_evaluated_key.is_none());

    let expected: BTreeSet<String> = live
        .iter()
        .flat_map(|sk| ["x", "z"].map(|kind| format!("{sk}/{kind}")))
        .collect();
    assert_eq!(names_of(out.items(), "sk"), expected);
    assert!(out.items().iter().all(|i| attribute(i, "pk") == "user-1"));

    // And without a filter of the caller's own, only the key condition and ours apply.
    let query = table
        .query()
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", s("user-2"));
    let out = hide_expired_query(query, "ttl", read_at)
        .send()
        .await
        .expect("query");
    let live_sks: BTreeSet<String> = out
        .items()
        .iter()
        .map(|i| attribute(i, "sk").split('/').next().unwrap().to_string())
        .collect();
    assert_eq!(live_sks, live);
    assert_eq!(out.items().len(), live.len() * KINDS.len());
    assert!(out.items().iter().all(|i| !is_expired(i, "ttl", read_at)));
}

/// The expiry rule is written once (`core::due_rule`) and rendered three ways; DynamoDB itself
/// must then agree: the conditional `DeleteItem`, the PartiQL `DELETE` and the read filter pick
/// out the same items of every TTL shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delete_condition_the_partiql_delete_and_the_read_filter_agree() {
    use precise_ttl_dynamodb::{DeleteMode, DynamoStore, ItemKey};
    use precise_ttl_engine::{DeleteOutcome, ExpiryStore};

    let mut deleted_by = Vec::new();
    for mode in [DeleteMode::Single, DeleteMode::Batch] {
        let table = crate::support::table_with_index().await;
        // With the index in place DynamoDB refuses a String where the index has a Number key, so
        // that shape cannot exist on a swept table (the test above covers it for readers).
        let (mut shapes, mut live) = ttl_shapes(now());
        shapes.retain(|(pk, _)| *pk != "live-string-ttl");
        live.remove("live-string-ttl");
        put_shapes(&table, &shapes).await;
        let at = now();

        let visible = names_of(
            hide_expired_scan(consistent_scan(&table), "ttl", at)
                .send()
                .await
                .expect("scan")
                .items(),
            "pk",
        );
        assert_eq!(visible, live);

        let store = DynamoStore::open(
            table.dynamo.clone(),
            &table.name,
            crate::support::layout(16),
        )
        .await
        .expect("store")
        .with_delete_mode(mode);
        let keys: Vec<ItemKey> = shapes
            .iter()
            .map(|(pk, _)| ItemKey::new(vec![("pk".to_string(), s(pk))]))
            .collect();
        let window = precise_ttl_core::DueWindow::at(at);
        let delete_all = || async {
            if mode == DeleteMode::Batch {
                store.delete_many_if_due(&keys, window).await
            } else {
                let mut out = Vec::new();
                for key in &keys {
                    out.push(store.delete_if_due(key, window).await);
                }
                out
            }
        };
        let outcomes = delete_all().await;
        let deleted: BTreeSet<String> = shapes
            .iter()
            .zip(outcomes)
            .filter(|(_, o)| matches!(o, Ok(DeleteOutcome::Deleted)))
            .map(|((pk, _), _)| pk.to_string())
            .collect();
        let all: BTreeSet<String> = shapes.iter().map(|(pk, _)| pk.to_string()).collect();
        let hidden: BTreeSet<String> = all.difference(&visible).cloned().collect();
        assert_eq!(
            deleted, hidden,
            "{mode:?} deletes exactly what readers hide"
        );
        for pk in &live {
            assert!(table.get(pk).await.is_some(), "{pk} survives {mode:?}");
        }
        // Deleting the same keys again deletes nothing, and counts nothing as deleted: a PartiQL
        // DELETE of a missing item succeeds, so only RETURNING ALL OLD * tells it apart.
        let again = delete_all().await;
        assert!(
            again.iter().all(|o| matches!(o, Ok(DeleteOutcome::NotDue))),
            "{mode:?} counts a second delete as deleted: {again:?}"
        );
        deleted_by.push(deleted);
    }
    assert_eq!(deleted_by[0], deleted_by[1]);
}
