//! precise-ttl's own DynamoDB adapter against the simulator: setup, an engine sweep in both
//! delete modes, the status query, and the adapter's reading of the simulator's throttling.

use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{DueWindow, ErrorClass, Shard, ShardCount, Timestamp, TtlLayout};
use precise_ttl_dynamodb::{DeleteMode, Dynamo, DynamoStore, ItemKey, SetupAction, SetupOptions};
use precise_ttl_engine::{Clock, ExpiryStore, SweepConfig, Sweeper, SystemClock};
use precise_ttl_sim::{Item, KeySpec, Limits, ScalarType, SimConfig, Simulator, TableSpec, Value};
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
    sim.create_table(&TableSpec {
        name: TABLE.into(),
        partition_key: KeySpec::new("pk", ScalarType::S),
        sort_key: None,
        indexes: Vec::new(),
    })
    .unwrap();
}

fn item(pk: &str, ttl: Option<Value>, shard: Option<i64>) -> Item {
    let mut item = Item::new().with("pk", Value::s(pk));
    if let Some(ttl) = ttl {
        item = item.with("ttl", ttl);
    }
    if let Some(shard) = shard {
        item = item.with("ttl_shard", Value::int(shard));
    }
    item
}

fn now_s() -> i64 {
    SystemClock.now().as_millis() / 1000
}

#[tokio::test]
async fn setup_and_an_engine_sweep_run_against_the_simulator() {
    let sim = Simulator::start(SimConfig::default().without_latency()).unwrap();
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
    let report = precise_ttl_dynamodb::setup::setup(&dynamo, TABLE, &layout(), &options)
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
    let again = precise_ttl_dynamodb::setup::setup(&dynamo, TABLE, &layout(), &options)
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
    // The one-shot sweep deletes one item per call (the daemon batches).
    assert_eq!(stats.calls.requests["DeleteItem"], 300, "{:?}", stats.calls);

    let status = precise_ttl_dynamodb::status::shard_status(
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
            .due_page(&Shard(shard), window, None, 25)
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
    assert_eq!(sim.stats().calls.requests["BatchExecuteStatement"], 8);
    assert_eq!(sim.deletion_count(), 320);
}

#[tokio::test]
async fn the_adapter_reads_the_simulators_throttling_as_throttling() {
    let config = SimConfig {
        limits: Limits {
            partition_wcu: 10.0,
            ..SimConfig::default().limits
        },
        ..SimConfig::default().without_latency()
    };
    let sim = Simulator::start(config).unwrap();
    sim.create_table(&TableSpec {
        name: TABLE.into(),
        partition_key: KeySpec::new("pk", ScalarType::S),
        sort_key: None,
        indexes: vec![precise_ttl_sim::IndexSpec {
            name: layout().index_name,
            partition_key: KeySpec::new("ttl_shard", ScalarType::N),
            sort_key: Some(KeySpec::new("ttl", ScalarType::N)),
            all_attributes: false,
        }],
    })
    .unwrap();
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
    let single = store.delete_if_due(&keys[24], window).await.unwrap_err();
    assert_eq!(single.class, ErrorClass::Throttled, "{single:?}");
}
