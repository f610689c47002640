//! Tables, indexes and reads through the SDK: CreateTable, DescribeTable, ListTables and
//! DescribeTimeToLive; a sparse, ordered index paged with limits; Scan in segments.

use crate::support::*;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::ProvideErrorMetadata;

#[tokio::test]
async fn tables_are_created_described_and_listed() {
    let (_sim, client) = with_table(quick()).await;
    let described = client
        .describe_table()
        .table_name(TABLE)
        .send()
        .await
        .unwrap();
    let table = described.table().unwrap();
    assert_eq!(table.table_status().unwrap().as_str(), "ACTIVE");
    let gsi = &table.global_secondary_indexes()[0];
    assert_eq!(gsi.index_name(), Some(INDEX));
    assert_eq!(gsi.index_status().unwrap().as_str(), "ACTIVE");
    assert_eq!(
        gsi.projection()
            .unwrap()
            .projection_type()
            .unwrap()
            .as_str(),
        "KEYS_ONLY"
    );
    assert_eq!(
        table
            .billing_mode_summary()
            .unwrap()
            .billing_mode()
            .unwrap()
            .as_str(),
        "PAY_PER_REQUEST"
    );
    let again = create_table_again(&client).await;
    assert_eq!(again, "ResourceInUseException");
    let missing = client
        .describe_table()
        .table_name("nope")
        .send()
        .await
        .unwrap_err();
    assert!(
        missing
            .as_service_error()
            .unwrap()
            .is_resource_not_found_exception()
    );
    let listed = client.list_tables().send().await.unwrap();
    assert_eq!(listed.table_names(), [TABLE.to_string()]);
    let ttl = client
        .describe_time_to_live()
        .table_name(TABLE)
        .send()
        .await
        .unwrap();
    assert_eq!(
        ttl.time_to_live_description()
            .unwrap()
            .time_to_live_status()
            .unwrap()
            .as_str(),
        "DISABLED"
    );
}

async fn create_table_again(client: &Client) -> String {
    let err = create_keyed_by_pk(client).send().await.unwrap_err();
    err.code().unwrap_or_default().to_string()
}

#[tokio::test]
async fn the_index_is_sparse_ordered_and_pages_with_limits() {
    let (_sim, client) = with_table(quick()).await;
    for i in 0..10 {
        put(&client, &format!("due-{i}"), n(NOW - 10 + i), Some(3)).await;
    }
    put(&client, "future", n(NOW + 5), Some(3)).await;
    put(&client, "other-shard", n(NOW - 1), Some(4)).await;
    put(&client, "no-shard", n(NOW - 1), None).await;

    let mut seen = Vec::new();
    let mut start = None;
    let mut pages = 0;
    loop {
        let page = due_page(&client, 3, 4, start).await;
        pages += 1;
        assert!(page.items().len() <= 4);
        for item in page.items() {
            // KEYS_ONLY: the table's key and the index's keys.
            let mut names: Vec<&String> = item.keys().collect();
            names.sort();
            assert_eq!(names, ["pk", "ttl", "ttl_shard"]);
            seen.push(item["pk"].as_s().unwrap().clone());
        }
        assert_eq!(
            page.consumed_capacity().unwrap().capacity_units(),
            Some(0.5),
            "a small eventually consistent page is half a unit"
        );
        start = page.last_evaluated_key;
        if start.is_none() {
            break;
        }
    }
    let expected: Vec<String> = (0..10).map(|i| format!("due-{i}")).collect();
    assert_eq!(
        seen, expected,
        "oldest first, nothing from other shards or the future"
    );
    assert_eq!(pages, 3, "4 + 4 + 2");

    // An index key of the wrong type is refused, as DynamoDB refuses it.
    let err = client
        .put_item()
        .table_name(TABLE)
        .item("pk", s("bad"))
        .item("ttl", s("1800000000"))
        .item("ttl_shard", n(1))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ValidationException"));
    assert!(
        err.message()
            .unwrap()
            .contains("Type mismatch for Index Key"),
        "{err:?}"
    );
    // Even without the other index key, which would keep it out of the index.
    let err = client
        .put_item()
        .table_name(TABLE)
        .item("pk", s("bad"))
        .item("ttl", s("soon"))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ValidationException"));

    // A query of shard 3 on the index: each case below adds its key condition.
    let shard_3 = || {
        client
            .query()
            .table_name(TABLE)
            .index_name(INDEX)
            .expression_attribute_values(":s", n(3))
    };
    // Consistent reads on an index, and key conditions the simulator cannot serve, are
    // validation errors.
    for refused in [
        shard_3()
            .key_condition_expression("ttl_shard = :s")
            .consistent_read(true),
        shard_3()
            .key_condition_expression("ttl_shard = :s AND ttl <> :t")
            .expression_attribute_values(":t", n(3)),
    ] {
        let err = refused.send().await.unwrap_err();
        assert_eq!(err.code(), Some("ValidationException"));
    }

    // Descending order, and COUNT.
    let out = shard_3()
        .key_condition_expression("ttl_shard = :s AND ttl > :t")
        .expression_attribute_values(":t", n(NOW - 3))
        .scan_index_forward(false)
        .send()
        .await
        .unwrap();
    assert_eq!(strings(out.items(), "pk"), ["future", "due-9", "due-8"]);
}

#[tokio::test]
async fn scans_page_through_every_item_once_in_segments_and_execute_statement_deletes() {
    let (sim, client) = with_table(quick()).await;
    sim.plant(
        TABLE,
        (0..57).map(|i| sim_item(&format!("k{i:02}"), NOW - 1, i % 3)),
    )
    .unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for segment in 0..2 {
        let mut start = None;
        loop {
            let page = client
                .scan()
                .table_name(TABLE)
                .segment(segment)
                .total_segments(2)
                .limit(5)
                .projection_expression("#k")
                .expression_attribute_names("#k", "pk")
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .unwrap();
            for item in page.items() {
                assert_eq!(item.len(), 1);
                assert!(
                    seen.insert(item["pk"].as_s().unwrap().clone()),
                    "seen twice"
                );
            }
            start = page.last_evaluated_key;
            if start.is_none() {
                break;
            }
        }
    }
    assert_eq!(seen.len(), 57);

    // The adapter's PartiQL delete of `pk` if due at `now`, alone (ExecuteStatement).
    let delete_if_due = |pk: &str, now: i64| {
        client
            .execute_statement()
            .statement(DELETE)
            .parameters(s(pk))
            .parameters(n(OLDEST))
            .parameters(n(now))
            .send()
    };
    let out = delete_if_due("k00", NOW).await.unwrap();
    assert_eq!(out.items()[0]["pk"], s("k00"));
    let out = delete_if_due("k00", NOW).await.unwrap();
    assert!(out.items().is_empty(), "already gone: nothing, no error");
    let err = delete_if_due("k01", NOW - 10).await.unwrap_err();
    assert!(
        err.as_service_error()
            .unwrap()
            .is_conditional_check_failed_exception()
    );
    let err = client
        .execute_statement()
        .statement("SELECT * FROM \"bench\"")
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ValidationException"));
}
