//! `setup` against DynamoDB Local: idempotence and the conflicts it must refuse.

use crate::support::{TestTable, create_indexed_table, layout};
use aws_sdk_dynamodb::types::{KeyType, ScalarAttributeType};
use precise_ttl_dynamodb::AdapterError;
use precise_ttl_ops::{CreateTable, KeyAttribute, SetupAction, SetupOptions, setup};
use std::time::Duration;

fn options() -> SetupOptions {
    SetupOptions {
        poll_interval: Duration::from_millis(100),
        ..SetupOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_twice_changes_nothing_the_second_time() {
    let table = TestTable::bare().await;
    let layout = layout(16);
    let first = setup::setup(&table.dynamo, &table.name, &layout, &options())
        .await
        .unwrap();
    assert!(first.changed());
    assert!(
        first.actions.contains(&SetupAction::IndexCreated),
        "{:?}",
        first.actions
    );
    assert!(
        first.actions.contains(&SetupAction::NativeTtlEnabled),
        "{:?}",
        first.actions
    );

    let second = setup::setup(&table.dynamo, &table.name, &layout, &options())
        .await
        .unwrap();
    assert!(!second.changed(), "{:?}", second.actions);
    assert_eq!(
        second.actions,
        vec![
            SetupAction::IndexAlreadyPresent {
                projection: "KEYS_ONLY".into()
            },
            SetupAction::NativeTtlAlreadyEnabled,
            SetupAction::LeaseTableAlreadyPresent {
                name: "precise-ttl-leases".into()
            },
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_table_then_setup_again_is_a_noop() {
    let table = TestTable::named();
    let layout = layout(4);
    let create = SetupOptions {
        create_table: Some(CreateTable {
            partition_key: "tenant".parse::<KeyAttribute>().unwrap(),
            sort_key: Some("id:N".parse().unwrap()),
        }),
        native_ttl: false,
        ..options()
    };
    let first = setup::setup(&table.dynamo, &table.name, &layout, &create)
        .await
        .unwrap();
    assert_eq!(first.actions[0], SetupAction::TableCreated);
    let again = setup::setup(&table.dynamo, &table.name, &layout, &create)
        .await
        .unwrap();
    assert!(!again.changed(), "{:?}", again.actions);

    let other_key = SetupOptions {
        create_table: Some(CreateTable {
            partition_key: "pk".parse().unwrap(),
            sort_key: None,
        }),
        ..create
    };
    let err = setup::setup(&table.dynamo, &table.name, &layout, &other_key)
        .await
        .unwrap_err();
    assert!(
        matches!(err, AdapterError::TableKeyMismatch { .. }),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_of_that_name_with_another_schema_is_refused() {
    let table = TestTable::named();
    // The right key and index name, but the index is keyed by `bucket`, a String.
    create_indexed_table(&table.dynamo, &table.name, "bucket", ScalarAttributeType::S).await;
    let err = setup::setup(&table.dynamo, &table.name, &layout(16), &options())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, AdapterError::IndexSchema { .. }), "{message}");
    assert!(message.contains("another schema"), "{message}");
    assert!(message.contains("bucket (S)"), "{message}");
    assert!(message.contains("ttl_shard (N)"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_ttl_on_another_attribute_is_refused_unless_left_alone() {
    let table = TestTable::bare().await;
    table.enable_native_ttl("expires_at").await;
    let err = setup::setup(&table.dynamo, &table.name, &layout(16), &options())
        .await
        .unwrap_err();
    assert!(
        matches!(err, AdapterError::NativeTtlOnOtherAttribute { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("expires_at"), "{err}");

    let leave = SetupOptions {
        native_ttl: false,
        ..options()
    };
    let report = setup::setup(&table.dynamo, &table.name, &layout(16), &leave)
        .await
        .unwrap();
    assert!(report.actions.contains(&SetupAction::NativeTtlLeftAlone));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_table_and_a_ttl_key_attribute_are_clear_errors() {
    let missing = TestTable::named();
    let err = setup::setup(&missing.dynamo, &missing.name, &layout(16), &options())
        .await
        .unwrap_err();
    assert!(matches!(err, AdapterError::TableNotFound { .. }), "{err}");
    assert!(err.to_string().contains("was not found"), "{err}");

    let keyed = TestTable::bare_with_key(&[("ttl", ScalarAttributeType::N, KeyType::Hash)]).await;
    let err = setup::setup(&keyed.dynamo, &keyed.name, &layout(16), &options())
        .await
        .unwrap_err();
    assert!(matches!(err, AdapterError::KeyAttribute { .. }), "{err}");
}

/// `setup --stream` turns the stream on with old images once, then says it is on; a stream
/// already on without old images is left alone, with a warning that says how to change it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_stream_turns_old_images_on_once_and_leaves_another_stream_alone() {
    let table = crate::support::table_with_index().await;
    let args = [
        "setup",
        "--table",
        &table.name,
        "--no-native-ttl",
        "--stream",
    ];
    crate::support::precise_ttl()
        .args(args)
        .assert()
        .success()
        .stdout(predicates::str::contains("turned the table's stream on"));
    crate::support::precise_ttl()
        .args(args)
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "stream is on with old images (NEW_AND_OLD_IMAGES)",
        ));

    let other = crate::support::table_with_index().await;
    precise_ttl_stream::stream::enable_keys_stream(&other.dynamo, &other.name)
        .await
        .unwrap();
    crate::support::precise_ttl()
        .args([
            "setup",
            "--table",
            &other.name,
            "--no-native-ttl",
            "--stream",
        ])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "warning: the table's stream is on as KEYS_ONLY",
        ));
}
