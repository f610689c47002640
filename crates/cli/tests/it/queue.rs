//! The expiry queue layout's store against DynamoDB Local (issue 29): entries read like an
//! index, the application item deleted under the expiry rule, the entry removed whatever the
//! item's answer, and the daemon deleting through it on time.

use crate::support::{TestTable, at, item, layout, now, s};
use precise_ttl_core::{DueWindow, Expiry, ShardCount};
use precise_ttl_dynamodb::ItemKey;
use precise_ttl_engine::{Daemon, DaemonConfig, DeleteOutcome, DueQuery, ExpiryStore, SystemClock};
use precise_ttl_stream::queue::indexer::{Indexer, IndexerOptions, IndexerReport};
use precise_ttl_stream::queue::{QueueStore, QueueTable};
use std::sync::Arc;
use std::time::Duration;

fn key(pk: &str) -> ItemKey {
    ItemKey::new(vec![("pk".to_string(), s(pk))])
}

fn expiry(offset_ms: i64) -> Expiry {
    Expiry::at_instant(precise_ttl_core::Timestamp::from_millis(
        now().as_millis() + offset_ms,
    ))
}

/// An application table, its queue (dropped with it) and the queue's store.
async fn tables(shards: u64) -> (TestTable, TestTable, QueueTable, QueueStore) {
    let app = TestTable::bare().await;
    let queue_name = TestTable::named();
    let queue = QueueTable::new(app.dynamo.clone(), &queue_name.name);
    queue.create().await.expect("create the queue table");
    queue.create().await.expect("creating it again is a no-op");
    let store = QueueStore::open(app.dynamo.clone(), &app.name, queue.name(), layout(shards))
        .await
        .expect("open the queue store");
    (app, queue_name, queue, store)
}

/// [`tables`], the application table's stream on with old images, and a name for the indexer's
/// checkpoint table.
async fn tables_with_stream(
    shards: u64,
) -> (TestTable, TestTable, QueueTable, QueueStore, TestTable) {
    let (app, queue_name, queue, store) = tables(shards).await;
    precise_ttl_ops::setup::enable_old_image_stream(&app.dynamo, &app.name)
        .await
        .unwrap();
    (app, queue_name, queue, store, TestTable::named())
}

async fn entries(queue: &TestTable) -> usize {
    queue.count().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_deletes_its_due_item_and_goes_whatever_the_item_says() {
    let shards = ShardCount::new(4).unwrap();
    let (app, queue_table, queue, store) = tables(4).await;
    // Due; extended after its entry was written; gone; not yet due.
    let (past, later) = (expiry(-10_000), expiry(3_600_000));
    let ttl = |e: Expiry| crate::support::n(e.at().to_epoch_seconds_text());
    app.put(item("due", &[("ttl", ttl(past))])).await;
    app.put(item("extended", &[("ttl", ttl(later))])).await;
    app.put(item("future", &[("ttl", ttl(later))])).await;
    let entries_at = [
        ("due", past),
        ("extended", past),
        ("gone", expiry(-5_000)),
        ("future", later),
    ];
    for (pk, at) in entries_at {
        queue.put(&key(pk), at, shards).await.unwrap();
    }
    // Written twice (a replayed stream record): the same entry.
    queue
        .put(&key("due"), entries_at[0].1, shards)
        .await
        .unwrap();
    assert_eq!(entries(&queue_table).await, 4);

    let window = DueWindow::at(now());
    let key_names = vec!["pk".to_string()];
    let sample = queue
        .sample(&app.name, "ttl", &key_names, 100)
        .await
        .unwrap();
    assert_eq!(
        (
            sample.entries,
            sample.live,
            sample.item_gone,
            sample.ttl_changed,
            sample.unread
        ),
        (4, 2, 1, 1, 0),
        "{sample:?}"
    );
    let mut counted = 0;
    for shard in shards.all() {
        counted += queue.count_between(shard, window, None).await.unwrap().due;
    }
    assert_eq!(
        counted, 3,
        "due entries, the gone and the extended item's included"
    );
    let mut due = Vec::new();
    for shard in shards.all() {
        let page = store
            .due_page(DueQuery::first(&shard, window, 100))
            .await
            .unwrap();
        assert!(page.next.is_none());
        due.extend(page.items);
    }
    due.sort_by_key(|d| d.expiry);
    let names: Vec<String> = due.iter().map(|d| d.key.item.partition_text()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(!names.contains(&"\"future\"".to_string()), "{names:?}");

    let keys: Vec<_> = due.iter().map(|d| d.key.clone()).collect();
    let outcomes = store.delete_many_if_due(&keys, window).await;
    for (name, outcome) in names.iter().zip(&outcomes) {
        let expected = if name == "\"due\"" {
            DeleteOutcome::Deleted
        } else {
            DeleteOutcome::NotDue
        };
        assert_eq!(outcome.as_ref().ok(), Some(&expected), "{name}");
    }
    assert!(app.get("due").await.is_none());
    assert!(
        app.get("extended").await.is_some(),
        "an extended item is never deleted"
    );
    assert!(app.get("future").await.is_some());
    assert_eq!(
        entries(&queue_table).await,
        1,
        "only the future entry stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_deletes_through_the_queue_on_time() {
    let shards = ShardCount::new(2).unwrap();
    let (app, queue_table, queue, store) = tables(2).await;
    let pks: Vec<String> = (0..20).map(|i| format!("item-{i}")).collect();
    for (i, pk) in pks.iter().enumerate() {
        let offset = 1_500 + 50 * i as i64;
        let ttl = precise_ttl_core::Timestamp::from_millis(now().as_millis() + offset);
        app.put(item(
            pk,
            &[("ttl", crate::support::n(ttl.to_epoch_seconds_text()))],
        ))
        .await;
        queue
            .put(&key(pk), Expiry::at_instant(ttl), shards)
            .await
            .unwrap();
    }
    let config = DaemonConfig {
        poll_interval: Duration::from_millis(200),
        ..DaemonConfig::default()
    };
    let daemon = Daemon::new(
        Arc::new(store),
        Arc::new(SystemClock),
        Arc::new(shards),
        config,
    );
    let report = daemon
        .run(tokio::time::sleep(Duration::from_secs(5)))
        .await
        .expect("the daemon runs");
    assert_eq!(report.deleted, 20, "{report:?}");
    assert_eq!(app.present(&pks).await, 0);
    assert_eq!(entries(&queue_table).await, 0);
}

fn indexer_options(shards: ShardCount, checkpoints: &TestTable) -> IndexerOptions {
    IndexerOptions {
        ttl_attribute: "ttl".to_string(),
        shards,
        checkpoint_table: checkpoints.name.clone(),
        poll_interval: Duration::from_millis(100),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_indexer_writes_an_entry_per_new_ttl_and_none_for_a_touch_across_a_restart() {
    let shards = ShardCount::new(4).unwrap();
    let (app, queue_table, queue, _store, checkpoints) = tables_with_stream(4).await;
    let later = at(3_600_000);
    app.put(item("a", &[("ttl", later.clone())])).await;
    app.put(item("b", &[("ttl", later.clone())])).await;
    app.put(item("b", &[("ttl", at(7_200_000))])).await; // extended: a second entry
    app.put(item("c", &[("ttl", later.clone())])).await;
    app.put(item("c", &[("ttl", later.clone()), ("seen", s("now"))]))
        .await; // a touch
    app.put(item("d", &[("ttl", s("1800000000"))])).await; // a String: never due
    app.put(item("e", &[])).await;

    let options = indexer_options(shards, &checkpoints);
    let indexer = Indexer::open(&app.dynamo, &app.name, queue.clone(), &options)
        .await
        .expect("open the indexer");
    let report = indexer
        .run(tokio::time::sleep(Duration::from_secs(4)))
        .await
        .expect("index");
    assert_eq!(
        report,
        IndexerReport {
            entries: 4,
            no_ttl: 2,
            unchanged: 1
        }
    );
    assert_eq!(entries(&queue_table).await, 4);

    // Started again: the checkpoints say everything was indexed.
    let again = Indexer::open(&app.dynamo, &app.name, queue, &options)
        .await
        .unwrap()
        .run(tokio::time::sleep(Duration::from_secs(2)))
        .await
        .unwrap();
    assert_eq!(again, IndexerReport::default());
    assert_eq!(entries(&queue_table).await, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writers_set_only_the_ttl_and_the_item_goes_at_its_expiry() {
    let shards = ShardCount::new(2).unwrap();
    let (app, queue_table, queue, store, checkpoints) = tables_with_stream(2).await;
    let indexer = Indexer::open(
        &app.dynamo,
        &app.name,
        queue,
        &indexer_options(shards, &checkpoints),
    )
    .await
    .unwrap();
    let daemon = Daemon::new(
        Arc::new(store),
        Arc::new(SystemClock),
        Arc::new(shards),
        DaemonConfig {
            poll_interval: Duration::from_millis(200),
            ..DaemonConfig::default()
        },
    );
    app.put(item("soon", &[("ttl", at(2_000))])).await;
    app.put(item("later", &[("ttl", at(3_600_000))])).await;
    let run_for = || tokio::time::sleep(Duration::from_secs(6));
    let (indexed, swept) = tokio::join!(indexer.run(run_for()), daemon.run(run_for()));
    assert_eq!(indexed.unwrap().entries, 2);
    assert_eq!(swept.unwrap().deleted, 1);
    assert!(app.get("soon").await.is_none());
    assert!(app.get("later").await.is_some());
    assert_eq!(entries(&queue_table).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_writes_the_entries_of_the_items_already_there() {
    use precise_ttl_ops::backfill::{self, BackfillOptions, BackfillTarget, CheckpointFile};
    let shards = ShardCount::new(4).unwrap();
    let (app, queue_table, queue, store) = tables(4).await;
    app.put(item("due", &[("ttl", at(-60_000))])).await;
    app.put(item("later", &[("ttl", at(3_600_000))])).await;
    app.put(item("text", &[("ttl", s("1800000000"))])).await;
    app.put(item(
        "too-old",
        &[("ttl", crate::support::n(1_000_000_000))],
    ))
    .await;
    app.put(item("no-ttl", &[])).await;
    let scan = precise_ttl_ops::TableScan::open(app.dynamo.clone(), &app.name, layout(4))
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("precise-ttl-queue-{:x}", fastrand::u64(..)));
    let target = BackfillTarget {
        table: app.name.clone(),
        ttl_attribute: "ttl".into(),
        shard_attribute: format!("queue:{}", queue.name()),
        shards: 4,
        segments: 2,
    };
    let (checkpoint, _) = CheckpointFile::open(&dir, &target, false).unwrap();
    let report = backfill::run(
        precise_ttl_ops::queue::backfill::QueueBackfill::new(scan, queue, shards),
        SystemClock,
        checkpoint,
        BackfillOptions {
            page_size: 100,
            concurrency: 4,
            max_writes_per_second: None,
            backoff: precise_ttl_core::Backoff::default(),
        },
        Arc::new(Quiet),
        std::future::pending(),
    )
    .await
    .unwrap();
    assert!(report.complete);
    assert_eq!(
        (
            report.shard_added,
            report.changed_meanwhile,
            report.ttl_not_a_number
        ),
        (2, 1, 1),
        "{report:?}"
    );
    assert_eq!(entries(&queue_table).await, 2);
    // The sweep of the queue deletes the due one.
    let window = DueWindow::at(now());
    let mut due = Vec::new();
    for shard in shards.all() {
        due.extend(
            store
                .due_page(DueQuery::first(&shard, window, 100))
                .await
                .unwrap()
                .items,
        );
    }
    assert_eq!(due.len(), 1);
    let keys: Vec<_> = due.into_iter().map(|d| d.key).collect();
    assert_eq!(
        store.delete_many_if_due(&keys, window).await[0]
            .as_ref()
            .ok(),
        Some(&DeleteOutcome::Deleted)
    );
    assert!(app.get("due").await.is_none());
}

struct Quiet;
impl precise_ttl_ops::backfill::BackfillProgress for Quiet {}
