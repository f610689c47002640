//! Writes through the SDK as precise-ttl makes them: conditional deletes, PartiQL deletes in
//! batches (old images, per-statement errors), and the lease table's conditional puts and
//! updates.

use crate::support::*;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::{
    BatchStatementErrorCodeEnum, BatchStatementRequest, BillingMode, KeyType,
    ReturnConsumedCapacity, ReturnValue, ScalarAttributeType,
};
use precise_ttl_sim::Simulator;

#[tokio::test]
async fn conditional_deletes_follow_dynamodb() {
    let sim = Simulator::start(quick()).unwrap();
    let client = client(&sim);
    create_table_after(&client, &[("text", s("1700000000"))]).await;
    put(&client, "due", n(NOW - 1), Some(0)).await;
    put(&client, "later", n(NOW + 100), Some(0)).await;
    let delete = |pk: &str| {
        client
            .delete_item()
            .table_name(TABLE)
            .key("pk", s(pk))
            .condition_expression("attribute_type(#ttl, :number) AND #ttl BETWEEN :oldest AND :now")
            .expression_attribute_names("#ttl", "ttl")
            .expression_attribute_values(":number", s("N"))
            .expression_attribute_values(":oldest", n(OLDEST))
            .expression_attribute_values(":now", n(NOW))
            .return_values(ReturnValue::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
    };
    let out = delete("due").await.unwrap();
    assert_eq!(out.attributes().unwrap()["ttl"], n(NOW - 1));
    let capacity = out.consumed_capacity().unwrap();
    assert_eq!(
        capacity.capacity_units(),
        Some(2.0),
        "the table and the index"
    );
    assert_eq!(capacity.table().unwrap().capacity_units(), Some(1.0));
    assert_eq!(
        capacity.global_secondary_indexes().unwrap()[INDEX].capacity_units(),
        Some(1.0)
    );
    for pk in ["later", "text", "due", "never-was"] {
        let err = delete(pk).await.unwrap_err();
        assert!(
            err.as_service_error()
                .unwrap()
                .is_conditional_check_failed_exception(),
            "{pk}: {err:?}"
        );
        assert_eq!(err.message(), Some("The conditional request failed"));
    }
    let remaining = client.scan().table_name(TABLE).send().await.unwrap();
    assert_eq!(remaining.count(), 2);
    let log = sim.deletions(0, 10);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].key, "due");
    assert_eq!(log[0].table, TABLE);
    let stats = sim.stats();
    let table = &stats.tables[TABLE];
    // 3 puts, 1 delete, 4 failed conditions: one unit each on the table.
    assert_eq!(table.usage.write_units, 8.0);
    // 2 indexed puts and the delete of an indexed item.
    assert_eq!(table.indexes[INDEX].usage.write_units, 3.0);
    assert_eq!(stats.calls.errors["ConditionalCheckFailedException"], 4);
}

#[tokio::test]
async fn partiql_batch_deletes_return_old_images_and_per_statement_errors() {
    let sim = Simulator::start(quick()).unwrap();
    let client = client(&sim);
    create_table_after(&client, &[("text", s("1"))]).await;
    sim.plant(
        TABLE,
        [sim_item("due", NOW - 5, 1), sim_item("later", NOW + 5, 1)],
    )
    .unwrap();
    let out = client
        .batch_execute_statement()
        .statements(statement("due", NOW))
        .statements(statement("missing", NOW))
        .statements(statement("later", NOW))
        .statements(statement("text", NOW))
        .statements(statement("due", NOW))
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .unwrap();
    let r = out.responses();
    assert_eq!(r.len(), 5);
    assert_eq!(
        r[0].item().unwrap()["pk"],
        s("due"),
        "deleted: the old image"
    );
    assert_eq!(r[0].item().unwrap()["payload"], s(&"x".repeat(50)));
    assert!(r[0].error().is_none());
    assert!(
        r[1].item().is_none() && r[1].error().is_none(),
        "missing: nothing, no error"
    );
    for (i, code) in [
        (2, BatchStatementErrorCodeEnum::ConditionalCheckFailed),
        (3, BatchStatementErrorCodeEnum::ConditionalCheckFailed),
        (4, BatchStatementErrorCodeEnum::DuplicateItem),
    ] {
        assert_eq!(r[i].error().unwrap().code(), Some(&code), "{i}: {:?}", r[i]);
    }
    assert_eq!(r[2].table_name(), Some(TABLE));
    // 1 + 1 (index) for the delete, 1 for the missing item, 1 each for the failed conditions.
    assert_eq!(out.consumed_capacity()[0].capacity_units(), Some(5.0));
    assert_eq!(sim.deletion_count(), 1);

    // A malformed statement or a wrong parameter count fails that statement only.
    let out = client
        .batch_execute_statement()
        .statements(
            BatchStatementRequest::builder()
                .statement("DELETE FROM")
                .build()
                .unwrap(),
        )
        .statements(
            BatchStatementRequest::builder()
                .statement(DELETE)
                .parameters(s("later"))
                .build()
                .unwrap(),
        )
        .statements(statement("later", NOW + 10))
        .send()
        .await
        .unwrap();
    let r = out.responses();
    assert_eq!(
        r[0].error().unwrap().code(),
        Some(&BatchStatementErrorCodeEnum::ValidationError)
    );
    assert_eq!(
        r[1].error().unwrap().code(),
        Some(&BatchStatementErrorCodeEnum::ValidationError)
    );
    assert_eq!(r[2].item().unwrap()["pk"], s("later"));

    // More than 25 statements: the whole call is refused.
    let mut call = client.batch_execute_statement();
    for i in 0..26 {
        call = call.statements(statement(&format!("k{i}"), NOW));
    }
    let err = call.send().await.unwrap_err();
    assert_eq!(err.code(), Some("ValidationException"));
}

#[tokio::test]
async fn updates_conditions_and_leases_work_as_the_daemon_uses_them() {
    let sim = Simulator::start(quick()).unwrap();
    let client = client(&sim);
    // A lease-table-shaped table: (scope, lease).
    client
        .create_table()
        .table_name("leases")
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("scope", ScalarAttributeType::S))
        .attribute_definitions(attribute("lease", ScalarAttributeType::S))
        .key_schema(key("scope", KeyType::Hash))
        .key_schema(key("lease", KeyType::Range))
        .send()
        .await
        .unwrap();
    // A lease created only where none is, as the daemon's `ensure` creates it.
    let create = |lease: &str| {
        client
            .put_item()
            .table_name("leases")
            .item("scope", s("t/i"))
            .item("lease", s(lease))
            .item("counter", n(0))
            .condition_expression("attribute_not_exists(#l)")
            .expression_attribute_names("#l", "lease")
            .send()
    };
    for lease in ["b", "a", "c"] {
        create(lease).await.unwrap();
    }
    let again = create("a").await.unwrap_err();
    assert!(
        again
            .as_service_error()
            .unwrap()
            .is_conditional_check_failed_exception()
    );
    let write = |expected: i64, owner: Option<&str>| {
        let update = client
            .update_item()
            .table_name("leases")
            .key("scope", s("t/i"))
            .key("lease", s("a"))
            .condition_expression("#c = :expected")
            .expression_attribute_names("#c", "counter")
            .expression_attribute_names("#o", "owner")
            .expression_attribute_names("#r", "renewed_at")
            .expression_attribute_values(":expected", n(expected))
            .expression_attribute_values(":next", n(expected + 1))
            .expression_attribute_values(":now", n(123))
            .return_values(ReturnValue::AllNew);
        match owner {
            Some(o) => update
                .update_expression("SET #c = :next, #o = :owner, #r = :now")
                .expression_attribute_values(":owner", s(o)),
            None => update.update_expression("SET #c = :next, #r = :now REMOVE #o"),
        }
        .send()
    };
    let out = write(0, Some("w1")).await.unwrap();
    assert_eq!(out.attributes().unwrap()["owner"], s("w1"));
    assert!(
        write(0, Some("w2"))
            .await
            .unwrap_err()
            .as_service_error()
            .unwrap()
            .is_conditional_check_failed_exception()
    );
    let out = write(1, None).await.unwrap();
    assert!(!out.attributes().unwrap().contains_key("owner"));
    assert_eq!(out.attributes().unwrap()["counter"], n(2));
    let all = client
        .query()
        .table_name("leases")
        .key_condition_expression("#s = :s")
        .expression_attribute_names("#s", "scope")
        .expression_attribute_values(":s", s("t/i"))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert_eq!(strings(all.items(), "lease"), ["a", "b", "c"]);
    // An unused placeholder is refused, as DynamoDB refuses it.
    let err = client
        .get_item()
        .table_name("leases")
        .key("scope", s("t/i"))
        .key("lease", s("a"))
        .projection_expression("#c")
        .expression_attribute_names("#c", "counter")
        .expression_attribute_names("#x", "x")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ValidationException"));
}
