//! precise-ttl's own DynamoDB adapter against the simulator: setup, an engine sweep in both
//! delete modes, the status query, and the adapter's reading of the simulator's throttling and
//! its reasons.

use crate::support::{item, quick, shard_index, table_spec};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{
    DueWindow, ErrorClass, Shard, ShardCount, ThrottleScope, Timestamp, TtlLayout,
};
use precise_ttl_dynamodb::{DeleteMode, Dynamo, DynamoStore, ItemKey};
use precise_ttl_engine::{
    Clock, DueQuery, ExpiryStore, StoreError, SweepConfig, Sweeper, SystemClock,
};
use precise_ttl_ops::{SetupAction, SetupOptions};
use precise_ttl_sim::{Limits, SimConfig, Simulator, Value};
use std::sync::Arc;
use std::time::Duration;

const TABLE: &str = "sessions";

fn layout() -> TtlLayout {
    TtlLayout {
        shards: ShardCount::new(4).unwrap(),
        ..TtlLayout::default()
    }
}

fn bare_table(sim: &Simulator) {
    sim.create_table(&table_spec(TABLE, Vec::new())).unwrap();
}

fn now_s() -> i64 {
    SystemClock.now().as_millis() / 1000
}

#[tokio::test]
async fn setup_and_an_engine_sweep_run_against_the_simulator() {
    let sim = Simulator::start(quick()).unwrap();
    bare_table(&sim);
    let now = now_s();
    // Written before the index exists: the backfill leaves out the String TTLs.
    sim.plant(
        TABLE,
        (0..10).map(|i| item(&format!("text-{i}"), Some(Value::s("1")), Some(i % 4))),
    )
    .unwrap();
    let dynamo = Dynamo::local(sim.endpoint());
    let options = SetupOptions {
        poll_interval: Duration::from_millis(50),
        wait: Some(Duration::from_secs(10)),
        ..SetupOptions::default()
    };
    let report = precise_ttl_ops::setup::setup(&dynamo, TABLE, &layout(), &options)
        .await
        .unwrap();
    assert!(
        report.actions.contains(&SetupAction::IndexCreated),
        "{report:?}"
    );
    assert!(
        report.actions.contains(&SetupAction::NativeTtlEnabled),
        "{report:?}"
    );
    assert!(
        report
            .actions
            .iter()
            .any(|a| matches!(a, SetupAction::LeaseTableCreated { .. })),
        "{report:?}"
    );
    let again = precise_ttl_ops::setup::setup(&dynamo, TABLE, &layout(), &options)
        .await
        .unwrap();
    assert!(!again.changed(), "{again:?}");

    sim.plant(
        TABLE,
        (0..300).map(|i| {
            item(
                &format!("due-{i}"),
                Some(Value::int(now - 1 - i % 50)),
                Some(i % 4),
            )
        }),
    )
    .unwrap();
    sim.plant(
        TABLE,
        (0..50).map(|i| {
            item(
                &format!("later-{i}"),
                Some(Value::int(now + 3600)),
                Some(i % 4),
            )
        }),
    )
    .unwrap();
    sim.plant(
        TABLE,
        (0..5).map(|i| item(&format!("no-ttl-{i}"), None, None)),
    )
    .unwrap();

    let store = DynamoStore::open(dynamo.clone(), TABLE, layout())
        .await
        .unwrap()
        .with_delete_mode(DeleteMode::Batch);
    let sweeper = Sweeper::new(
        Arc::new(store),
        Arc::new(SystemClock),
        Arc::new(layout().shards),
        SweepConfig::default(),
    );
    let report = sweeper.sweep_once().await.unwrap();
    assert_eq!(report.deleted, 300, "{report:?}");
    assert_eq!(report.errors, 0);
    assert!(report.strays.is_empty());
    assert_eq!(sim.deletion_count(), 300);
    let stats = sim.stats();
    let table = &stats.tables[TABLE];
    assert_eq!(table.items, 65);
    let index = &table.indexes[&layout().index_name];
    assert_eq!(index.items, 50);
    // The one-shot sweep deletes through the daemon's dispatcher: in PartiQL batches, as `run`.
    assert!(
        !stats.calls.requests.contains_key("DeleteItem"),
        "{:?}",
        stats.calls
    );
    let sweep_batches = stats.calls.requests["BatchExecuteStatement"];
    assert!((12..300).contains(&sweep_batches), "{:?}", stats.calls);

    let status = precise_ttl_ops::status::shard_status(
        &dynamo,
        TABLE,
        &layout(),
        Shard(1),
        Timestamp::from_secs(now_s()),
    )
    .await
    .unwrap();
    assert_eq!(status.due, 0);
    assert_eq!(status.next.len(), 3);

    // PartiQL batches, as the daemon sends them: the due page of each shard, deleted in one call.
    let now = now_s();
    sim.plant(
        TABLE,
        (0..20).map(|i| {
            item(
                &format!("batch-{i}"),
                Some(Value::int(now - 1)),
                Some(i % 4),
            )
        }),
    )
    .unwrap();
    let store = DynamoStore::open(dynamo.clone(), TABLE, layout())
        .await
        .unwrap()
        .with_delete_mode(DeleteMode::Batch);
    let window = DueWindow::at(SystemClock.now());
    let mut deleted = 0;
    for shard in 0..4 {
        let page = store
            .due_page(DueQuery::first(&Shard(shard), window, 25))
            .await
            .unwrap();
        assert_eq!(page.items.len(), 5);
        assert!(page.next.is_none());
        let keys: Vec<ItemKey> = page.items.into_iter().map(|i| i.key).collect();
        for result in store.delete_many_if_due(&keys, window).await {
            assert_eq!(result.unwrap(), precise_ttl_engine::DeleteOutcome::Deleted);
            deleted += 1;
        }
        // Again: already gone, so not due.
        for result in store.delete_many_if_due(&keys, window).await {
            assert_eq!(result.unwrap(), precise_ttl_engine::DeleteOutcome::NotDue);
        }
    }
    assert_eq!(deleted, 20);
    assert_eq!(
        sim.stats().calls.requests["BatchExecuteStatement"],
        sweep_batches + 8
    );
    assert_eq!(sim.deletion_count(), 320);
}

#[tokio::test]
async fn the_adapter_reads_the_simulators_throttling_as_throttling() {
    let sim = slow_partitions(SimConfig::default().table_partitions);
    let now = now_s();
    sim.plant(
        TABLE,
        (0..50).map(|i| item(&format!("k{i}"), Some(Value::int(now - 1)), Some(0))),
    )
    .unwrap();
    let store = DynamoStore::open(Dynamo::local(sim.endpoint()), TABLE, layout())
        .await
        .unwrap()
        .with_delete_mode(DeleteMode::Batch);
    let keys: Vec<ItemKey> = (0..25)
        .map(|i| ItemKey::new(vec![("pk".into(), AttributeValue::S(format!("k{i}")))]))
        .collect();
    let window = DueWindow::at(SystemClock.now());
    let results = store.delete_many_if_due(&keys, window).await;
    let throttled = results
        .iter()
        .filter(|r| matches!(r, Err(e) if e.class == ErrorClass::Throttled))
        .count();
    let deleted = results.iter().filter(|r| r.is_ok()).count();
    assert!(deleted >= 10 && throttled >= 10, "{results:?}");
    assert_eq!(deleted + throttled, 25);
    // A refused statement's scope is unknown: DynamoDB's BatchStatementError carries no
    // throttling reasons.
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| e.throttle == Some(ThrottleScope::Unknown)),
        "{results:?}"
    );
    let single = store.delete_if_due(&keys[24], window).await.unwrap_err();
    assert_eq!(single.class, ErrorClass::Throttled, "{single:?}");
}

/// A simulated table of `table_partitions` partitions with the shard index, each partition (of
/// the table and of the index) taking 10 writes a second with a second of burst, so ten deletes
/// pass at once and the next ones are refused.
fn slow_partitions(table_partitions: usize) -> Simulator {
    let config = SimConfig {
        table_partitions,
        limits: Limits {
            partition_wcu: 10.0,
            burst_seconds: 1.0,
            ..SimConfig::default().limits
        },
        ..quick()
    };
    let sim = Simulator::start(config).unwrap();
    sim.create_table(&table_spec(TABLE, vec![shard_index(&layout().index_name)]))
        .unwrap();
    sim
}

/// The first throttle of single deletes of `items` due items, planted in `shards` shards on a
/// simulated table of `table_partitions` partitions, each partition (of the table and of the
/// index) taking 10 writes a second.
async fn first_throttle(table_partitions: usize, items: i64, shards: i64) -> StoreError {
    let sim = slow_partitions(table_partitions);
    let now = now_s();
    sim.plant(
        TABLE,
        (0..items).map(|i| {
            item(
                &format!("k{i}"),
                Some(Value::int(now - 1)),
                Some(i % shards),
            )
        }),
    )
    .unwrap();
    let store = DynamoStore::open(Dynamo::local(sim.endpoint()), TABLE, layout())
        .await
        .unwrap();
    let window = DueWindow::at(SystemClock.now());
    for i in 0..items {
        let key = ItemKey::new(vec![("pk".into(), AttributeValue::S(format!("k{i}")))]);
        if let Err(e) = store.delete_if_due(&key, window).await {
            return e;
        }
    }
    panic!("no delete of {items} was throttled");
}

/// The simulator names the refusing resource in `ThrottlingReasons` as DynamoDB does; the
/// adapter's error carries its scope, for the engine to slow down that partition only.
#[tokio::test]
async fn a_throttle_names_the_partition_that_refused() {
    for (table_partitions, shards, refusing) in [
        // One table partition, the deletes spread over four index partitions: the table's
        // refuses.
        (1, 4, ThrottleScope::TablePartition),
        // Forty table partitions, every delete in index partition 0: the index's refuses.
        (40, 1, ThrottleScope::IndexPartition),
    ] {
        let error = first_throttle(table_partitions, 40, shards).await;
        assert_eq!(error.class, ErrorClass::Throttled, "{error:?}");
        assert_eq!(error.throttle, Some(refusing), "{error:?}");
    }
}
