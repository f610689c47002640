//! One sweep pass against DynamoDB Local: what goes, what stays.

use crate::support::{TestTable, item, layout, n, now, s};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{DueWindow, Shard, TtlLayout};
use precise_ttl_dynamodb::{DynamoStore, ItemKey};
use precise_ttl_engine::{
    DeleteOutcome, DuePageOf, DueQueryOf, ExpiryStore, StoreError, SweepConfig, Sweeper,
    SystemClock,
};
use std::sync::Arc;

fn sweeper<S: ExpiryStore<Partition = Shard>>(
    store: S,
    layout: &TtlLayout,
) -> Sweeper<S, SystemClock> {
    Sweeper::new(
        Arc::new(store),
        Arc::new(SystemClock),
        Arc::new(layout.shards),
        SweepConfig::default(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_more_than_a_megabyte_of_due_items_in_one_shard_over_several_pages() {
    let table = TestTable::bare().await;
    let layout = layout(1);
    crate::support::set_up_index(&table, &layout).await;
    // Long keys make every index entry about 2 KB, so the 1 MB page limit of Query splits the
    // shard into several pages whatever page size we ask for.
    let t = now().as_millis() / 1000;
    let padding = "x".repeat(2000);
    let items: Vec<_> = (0..700)
        .map(|i| {
            item(
                &format!("{i:05}-{padding}"),
                &[
                    ("ttl", n(t - 60 + i % 50)),
                    ("ttl_shard", n(0)),
                    ("body", s(&padding)),
                ],
            )
        })
        .collect();
    table.put_many(items).await;
    table
        .put(item(
            "not-yet",
            &[("ttl", n(t + 3600)), ("ttl_shard", n(0))],
        ))
        .await;

    let store = DynamoStore::open(table.dynamo.clone(), &table.name, layout.clone())
        .await
        .unwrap();
    let config = SweepConfig {
        page_size: 10_000,
        ..SweepConfig::default()
    };
    let report = Sweeper::new(
        Arc::new(store),
        Arc::new(SystemClock),
        Arc::new(layout.shards),
        config,
    )
    .sweep_once()
    .await
    .unwrap();

    assert_eq!(report.deleted, 700);
    assert_eq!((report.skipped, report.errors), (0, 0));
    assert!(
        report.pages >= 2,
        "expected several pages, got {}",
        report.pages
    );
    assert_eq!(table.count().await, 1);
    assert!(table.get("not-yet").await.is_some());
}

/// Extends the TTL of items named `extended*` right after the index read: the deterministic
/// form of a writer that races the sweeper between its query and its delete.
struct ExtendAfterQuery {
    inner: DynamoStore,
    table: String,
    dynamo: precise_ttl_dynamodb::Dynamo,
}

impl ExpiryStore for ExtendAfterQuery {
    type Key = ItemKey;
    type Cursor = <DynamoStore as ExpiryStore>::Cursor;
    type Partition = Shard;

    async fn due_page(&self, query: DueQueryOf<'_, Self>) -> Result<DuePageOf<Self>, StoreError> {
        let page = self.inner.due_page(query).await?;
        for due in &page.items {
            let (_, AttributeValue::S(pk)) = &due.key.attributes()[0] else {
                continue;
            };
            if pk.starts_with("extended") {
                let later = now().as_millis() / 1000 + 3600;
                crate::support::set_ttl(&self.dynamo, &self.table, pk, n(later)).await;
            }
        }
        Ok(page)
    }

    async fn delete_if_due(
        &self,
        key: &ItemKey,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        self.inner.delete_if_due(key, window).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_extended_between_query_and_delete_survives() {
    let table = TestTable::bare().await;
    let layout = layout(2);
    crate::support::set_up_index(&table, &layout).await;
    let t = now().as_millis() / 1000 - 5;
    table
        .put(item("extended-1", &[("ttl", n(t)), ("ttl_shard", n(0))]))
        .await;
    table
        .put(item("extended-2", &[("ttl", n(t)), ("ttl_shard", n(1))]))
        .await;
    table
        .put(item("plain", &[("ttl", n(t)), ("ttl_shard", n(1))]))
        .await;

    let store = ExtendAfterQuery {
        inner: DynamoStore::open(table.dynamo.clone(), &table.name, layout.clone())
            .await
            .unwrap(),
        table: table.name.clone(),
        dynamo: table.dynamo.clone(),
    };
    let report = sweeper(store, &layout).sweep_once().await.unwrap();

    assert_eq!((report.deleted, report.skipped, report.errors), (1, 2, 0));
    assert!(table.get("plain").await.is_none());
    for pk in ["extended-1", "extended-2"] {
        let kept = table.get(pk).await.expect("the extended item survives");
        let AttributeValue::N(ttl) = &kept["ttl"] else {
            panic!("ttl is a number")
        };
        assert!(ttl.parse::<i64>().unwrap() > now().as_millis() / 1000 + 3000);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_missing_too_old_and_future_ttls_survive() {
    let table = TestTable::bare().await;
    let layout = layout(4);
    let t = now().as_millis() / 1000;
    let six_years = 6 * 365 * 86_400;
    // Written before the index exists: afterwards DynamoDB rejects a non-Number TTL outright.
    table
        .put(item(
            "string-ttl",
            &[("ttl", s(&(t - 10).to_string())), ("ttl_shard", n(0))],
        ))
        .await;
    crate::support::set_up_index(&table, &layout).await;
    let survivors = vec![
        item(
            "millis-ttl",
            &[("ttl", n((t - 10) * 1000)), ("ttl_shard", n(0))],
        ),
        item("negative-ttl", &[("ttl", n(-10)), ("ttl_shard", n(1))]),
        item("too-old", &[("ttl", n(t - six_years)), ("ttl_shard", n(2))]),
        item("no-ttl", &[("ttl_shard", n(3))]),
        item("no-shard", &[("ttl", n(t - 10))]),
        item(
            "stray-not-yet-due",
            &[("ttl", n(t + 3600)), ("ttl_shard", n(99))],
        ),
        item(
            "shard-beyond-1023",
            &[("ttl", n(t - 10)), ("ttl_shard", n(1024))],
        ),
        item("not-yet-due", &[("ttl", n(t + 3600)), ("ttl_shard", n(0))]),
        item(
            "due-in-a-minute",
            &[("ttl", n(format!("{}.5", t + 60))), ("ttl_shard", n(1))],
        ),
    ];
    let due = vec![
        item("due-1", &[("ttl", n(t - 1)), ("ttl_shard", n(0))]),
        item(
            "due-decimal",
            &[("ttl", n(format!("{}.25", t - 2))), ("ttl_shard", n(1))],
        ),
        item(
            "due-exponent",
            &[
                ("ttl", n(format!("{}E-1", (t - 3) * 10))),
                ("ttl_shard", n(2)),
            ],
        ),
        item(
            "due-4-years-ago",
            &[("ttl", n(t - 4 * 365 * 86_400)), ("ttl_shard", n(3))],
        ),
        // A stray from a writer with a larger shard count: swept all the same.
        item(
            "due-stray-shard",
            &[("ttl", n(t - 10)), ("ttl_shard", n(99))],
        ),
    ];
    table.put_many(survivors).await;
    table.put_many(due).await;

    let store = DynamoStore::open(table.dynamo.clone(), &table.name, layout.clone())
        .await
        .unwrap();
    let report = sweeper(store, &layout).sweep_once().await.unwrap();

    assert_eq!((report.deleted, report.skipped, report.errors), (5, 0, 0));
    assert_eq!(report.strays, vec![Shard(99)]);
    for pk in [
        "due-1",
        "due-decimal",
        "due-exponent",
        "due-4-years-ago",
        "due-stray-shard",
    ] {
        assert!(table.get(pk).await.is_none(), "{pk} must be deleted");
    }
    for pk in [
        "string-ttl",
        "millis-ttl",
        "negative-ttl",
        "too-old",
        "no-ttl",
        "no-shard",
        "stray-not-yet-due",
        "shard-beyond-1023",
        "not-yet-due",
        "due-in-a-minute",
    ] {
        assert!(table.get(pk).await.is_some(), "{pk} must survive");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_delete_condition_protects_items_the_index_still_lists() {
    // On real DynamoDB the index is eventually consistent: it may still list an item whose TTL
    // was extended or turned into a String. The delete itself must refuse.
    let table = TestTable::bare().await;
    let layout = layout(1);
    crate::support::set_up_index(&table, &layout).await;
    let t = now().as_millis() / 1000;
    table
        .put(item("gone", &[("ttl", n(t - 1)), ("ttl_shard", n(0))]))
        .await;
    let store = DynamoStore::open(table.dynamo.clone(), &table.name, layout.clone())
        .await
        .unwrap();
    let window = DueWindow::at(now());
    let key = |pk: &str| ItemKey::new(vec![("pk".to_string(), s(pk))]);

    table
        .put(item(
            "extended",
            &[("ttl", n(t + 3600)), ("ttl_shard", n(0))],
        ))
        .await;
    table.put(item("ttl-removed", &[("ttl_shard", n(0))])).await;
    table.put(item("no-ttl-at-all", &[("other", n(1))])).await;
    table
        .put(item(
            "too-old",
            &[("ttl", n(t - 6 * 365 * 86_400)), ("ttl_shard", n(0))],
        ))
        .await;
    for pk in [
        "extended",
        "ttl-removed",
        "no-ttl-at-all",
        "too-old",
        "missing",
    ] {
        assert_eq!(
            store.delete_if_due(&key(pk), window).await.unwrap(),
            DeleteOutcome::NotDue,
            "{pk}"
        );
    }
    assert_eq!(
        store.delete_if_due(&key("gone"), window).await.unwrap(),
        DeleteOutcome::Deleted
    );
    assert_eq!(table.count().await, 4);
}
