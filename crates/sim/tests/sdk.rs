//! The simulator driven by the real `aws-sdk-dynamodb` client, call by call: what it accepts,
//! what it answers, how it throttles and what it counts.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region, retry::RetryConfig};
use aws_sdk_dynamodb::error::ProvideErrorMetadata;
use aws_sdk_dynamodb::types::AttributeValue as Av;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BatchStatementErrorCodeEnum, BatchStatementRequest, BillingMode,
    GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType, PutRequest,
    ReturnConsumedCapacity, ReturnValue, ScalarAttributeType, WriteRequest,
};
use precise_ttl_sim::{Item, Latency, Limits, SimConfig, Simulator, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const TABLE: &str = "bench";
const INDEX: &str = "precise-ttl";
/// The adapter's PartiQL delete for a table keyed by `pk` (see precise-ttl-dynamodb's store).
const DELETE: &str = "DELETE FROM \"bench\" WHERE \"pk\" = ? AND attribute_type(\"ttl\", 'N') AND \"ttl\" BETWEEN ? AND ? RETURNING ALL OLD *";
const NOW: i64 = 1_800_000_000;

fn client(sim: &Simulator) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(sim.endpoint())
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .retry_config(RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}

fn quick() -> SimConfig {
    SimConfig::default().without_latency()
}

fn s(v: &str) -> Av {
    Av::S(v.into())
}

fn n(v: impl ToString) -> Av {
    Av::N(v.to_string())
}

async fn create_table(client: &Client) {
    let def = |name: &str, t| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(t)
            .build()
            .unwrap()
    };
    let key = |name: &str, t| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(t)
            .build()
            .unwrap()
    };
    client
        .create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(def("pk", ScalarAttributeType::S))
        .attribute_definitions(def("ttl_shard", ScalarAttributeType::N))
        .attribute_definitions(def("ttl", ScalarAttributeType::N))
        .key_schema(key("pk", KeyType::Hash))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(INDEX)
                .key_schema(key("ttl_shard", KeyType::Hash))
                .key_schema(key("ttl", KeyType::Range))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::KeysOnly)
                        .build(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
}

/// The table without its index, `early` written, then the index added (UpdateTable): the way a
/// String TTL gets into a table whose index wants a Number, which DynamoDB's backfill leaves out.
async fn create_table_after(client: &Client, early: &[(&str, Av)]) {
    let def = |name: &str, t| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(t)
            .build()
            .unwrap()
    };
    let key = |name: &str, t| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(t)
            .build()
            .unwrap()
    };
    client
        .create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(def("pk", ScalarAttributeType::S))
        .key_schema(key("pk", KeyType::Hash))
        .send()
        .await
        .unwrap();
    for (pk, ttl) in early {
        client
            .put_item()
            .table_name(TABLE)
            .item("pk", s(pk))
            .item("ttl", ttl.clone())
            .item("ttl_shard", n(0))
            .send()
            .await
            .unwrap();
    }
    let create = aws_sdk_dynamodb::types::CreateGlobalSecondaryIndexAction::builder()
        .index_name(INDEX)
        .key_schema(key("ttl_shard", KeyType::Hash))
        .key_schema(key("ttl", KeyType::Range))
        .projection(
            Projection::builder()
                .projection_type(ProjectionType::KeysOnly)
                .build(),
        )
        .build()
        .unwrap();
    let out = client
        .update_table()
        .table_name(TABLE)
        .attribute_definitions(def("ttl_shard", ScalarAttributeType::N))
        .attribute_definitions(def("ttl", ScalarAttributeType::N))
        .global_secondary_index_updates(
            aws_sdk_dynamodb::types::GlobalSecondaryIndexUpdate::builder()
                .create(create)
                .build(),
        )
        .send()
        .await
        .unwrap();
    let index = &out.table_description().unwrap().global_secondary_indexes()[0];
    assert_eq!(
        index.item_count(),
        Some(0),
        "String TTLs stay out of the index"
    );
}

fn sim_item(pk: &str, ttl: i64, shard: i64) -> Item {
    Item::new()
        .with("pk", Value::s(pk))
        .with("ttl", Value::int(ttl))
        .with("ttl_shard", Value::int(shard))
        .with("payload", Value::s("x".repeat(50)))
}

async fn put(client: &Client, pk: &str, ttl: Av, shard: Option<i64>) {
    let mut req = client
        .put_item()
        .table_name(TABLE)
        .item("pk", s(pk))
        .item("ttl", ttl);
    if let Some(shard) = shard {
        req = req.item("ttl_shard", n(shard));
    }
    req.send().await.unwrap();
}

async fn due_page(
    client: &Client,
    shard: i64,
    limit: i32,
    start: Option<HashMap<String, Av>>,
) -> aws_sdk_dynamodb::operation::query::QueryOutput {
    client
        .query()
        .table_name(TABLE)
        .index_name(INDEX)
        .key_condition_expression("#shard = :shard AND #ttl BETWEEN :oldest AND :now")
        .expression_attribute_names("#shard", "ttl_shard")
        .expression_attribute_names("#ttl", "ttl")
        .expression_attribute_values(":shard", n(shard))
        .expression_attribute_values(":oldest", n(NOW - 157_680_000))
        .expression_attribute_values(":now", n(NOW))
        .set_exclusive_start_key(start)
        .limit(limit)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn tables_are_created_described_and_listed() {
    let sim = Simulator::start(quick()).unwrap();
    let client = client(&sim);
    create_table(&client).await;
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
    let key = KeySchemaElement::builder()
        .attribute_name("pk")
        .key_type(KeyType::Hash)
        .build()
        .unwrap();
    let def = AttributeDefinition::builder()
        .attribute_name("pk")
        .attribute_type(ScalarAttributeType::S)
        .build()
        .unwrap();
    let err = client
        .create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(def)
        .key_schema(key)
        .send()
        .await
        .unwrap_err();
    err.code().unwrap_or_default().to_string()
}

#[tokio::test]
async fn the_index_is_sparse_ordered_and_pages_with_limits() {
    let sim = Simulator::start(quick()).unwrap();
    let client = client(&sim);
    create_table(&client).await;
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

    // Consistent reads on an index, and key conditions the simulator cannot serve, are
    // validation errors.
    let err = client
        .query()
        .table_name(TABLE)
        .index_name(INDEX)
        .key_condition_expression("ttl_shard = :s")
        .expression_attribute_values(":s", n(3))
        .consistent_read(true)
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ValidationException"));
    let err = client
        .query()
        .table_name(TABLE)
        .index_name(INDEX)
        .key_condition_expression("ttl_shard = :s AND ttl <> :t")
        .expression_attribute_values(":s", n(3))
        .expression_attribute_values(":t", n(3))
        .send()
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ValidationException"));

    // Descending order, and COUNT.
    let out = client
        .query()
        .table_name(TABLE)
        .index_name(INDEX)
        .key_condition_expression("ttl_shard = :s AND ttl > :t")
        .expression_attribute_values(":s", n(3))
        .expression_attribute_values(":t", n(NOW - 3))
        .scan_index_forward(false)
        .send()
        .await
        .unwrap();
    let order: Vec<&str> = out
        .items()
        .iter()
        .map(|i| i["pk"].as_s().unwrap().as_str())
        .collect();
    assert_eq!(order, ["future", "due-9", "due-8"]);
}

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
            .expression_attribute_values(":oldest", n(NOW - 157_680_000))
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

fn statement(pk: &str, now: i64) -> BatchStatementRequest {
    BatchStatementRequest::builder()
        .statement(DELETE)
        .parameters(s(pk))
        .parameters(n(NOW - 157_680_000))
        .parameters(n(now))
        .build()
        .unwrap()
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
async fn a_hot_index_partition_throttles_base_writes_with_throttling_errors() {
    let config = SimConfig {
        limits: Limits {
            partition_wcu: 200.0,
            partition_rcu: 3000.0,
            total_wcu: f64::INFINITY,
            total_rcu: f64::INFINITY,
            burst_seconds: 1.0,
        },
        ..quick()
    };
    let sim = Simulator::start(config).unwrap();
    let client = client(&sim);
    create_table(&client).await;
    // Every item on one index partition (shard 7), their keys spread over the table's 40.
    sim.plant(
        TABLE,
        (0..2000).map(|i| sim_item(&format!("k{i:05}"), NOW - 1, 7)),
    )
    .unwrap();
    let mut throttled = 0;
    let mut deleted = 0;
    let started = Instant::now();
    for batch in 0..20 {
        let mut call = client.batch_execute_statement();
        for i in 0..25 {
            call = call.statements(statement(&format!("k{:05}", batch * 25 + i), NOW));
        }
        for r in call.send().await.unwrap().responses() {
            match r.error() {
                None => deleted += 1,
                Some(e) => {
                    assert_eq!(
                        e.code(),
                        Some(&BatchStatementErrorCodeEnum::ThrottlingError)
                    );
                    assert!(
                        e.message()
                            .unwrap()
                            .starts_with("Throughput exceeds the current capacity")
                    );
                    throttled += 1;
                }
            }
        }
    }
    // The index partition's burst (200 units) and its refill meanwhile let that many through;
    // the table's partitions (200 each, 40 of them) would have taken all 500.
    let allowed = 200.0 + 200.0 * started.elapsed().as_secs_f64();
    assert!(
        deleted >= 200 && deleted as f64 <= allowed + 1.0,
        "deleted {deleted}, allowed {allowed}"
    );
    assert_eq!(deleted + throttled, 500);
    let stats = sim.stats();
    let index = &stats.tables[TABLE].indexes[INDEX];
    assert_eq!(
        index.throttles["IndexWriteKeyRangeThroughputExceeded"],
        throttled
    );
    assert_eq!(index.hottest_partition.as_ref().unwrap().0, "7");

    // A single call on the hot partition: ThrottlingException, which the SDK and the adapter
    // both classify as throttling.
    let mut attempt = 1000;
    let err = loop {
        // Calls outrun the refill (200 units a second) within a few attempts.
        attempt += 1;
        assert!(attempt < 1500, "never throttled");
        let result = client
            .delete_item()
            .table_name(TABLE)
            .key("pk", s(&format!("k{attempt:05}")))
            .send()
            .await;
        if let Err(e) = result {
            break e;
        }
    };
    let service = err.as_service_error().unwrap();
    assert!(service.is_throttling_exception(), "{err:?}");
    assert_eq!(err.code(), Some("ThrottlingException"));
    let aws_sdk_dynamodb::operation::delete_item::DeleteItemError::ThrottlingException(t) = service
    else {
        unreachable!()
    };
    let reason = &t.throttling_reasons()[0];
    assert_eq!(
        reason.reason(),
        Some("IndexWriteKeyRangeThroughputExceeded")
    );
    assert_eq!(
        reason.resource(),
        Some("arn:aws:dynamodb:us-east-1:000000000000:table/bench/index/precise-ttl")
    );

    // A second later the partition has refilled.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    client
        .delete_item()
        .table_name(TABLE)
        .key("pk", s("k01999"))
        .send()
        .await
        .unwrap();
}

#[tokio::test]
async fn the_table_wide_limit_leaves_batch_writes_unprocessed() {
    let config = SimConfig {
        limits: Limits {
            partition_wcu: 1000.0,
            partition_rcu: 3000.0,
            total_wcu: 60.0,
            total_rcu: 40_000.0,
            burst_seconds: 1.0,
        },
        ..quick()
    };
    let sim = Simulator::start(config).unwrap();
    let client = client(&sim);
    create_table(&client).await;
    let batch = |from: usize| {
        let mut call = client.batch_write_item();
        let requests: Vec<WriteRequest> = (from..from + 25)
            .map(|i| {
                WriteRequest::builder()
                    .put_request(
                        PutRequest::builder()
                            .item("pk", s(&format!("p{i}")))
                            .build()
                            .unwrap(),
                    )
                    .build()
            })
            .collect();
        call = call.request_items(TABLE, requests);
        call.send()
    };
    for from in [0, 25] {
        let out = batch(from).await.unwrap();
        assert!(out.unprocessed_items().is_none_or(|u| u.is_empty()));
    }
    // 60 units a second: about 10 more fit (and what refilled meanwhile).
    let third = batch(50).await.unwrap();
    let unprocessed = third.unprocessed_items().unwrap()[TABLE].len();
    assert!((12..=15).contains(&unprocessed), "{unprocessed}");
    // Nothing left at all: the whole call is throttled.
    let err = batch(75).await.unwrap_err();
    assert_eq!(err.code(), Some("ThrottlingException"));
    let stats = sim.stats();
    let throttles = stats.tables[TABLE].throttles["TableWriteAccountLimitExceeded"];
    assert_eq!(throttles as usize, unprocessed + 25);
    assert_eq!(stats.tables[TABLE].items as usize, 75 - unprocessed);
}

#[tokio::test]
async fn latency_follows_the_model_or_is_absent() {
    async fn median_ms(sim: &Simulator) -> f64 {
        let client = client(sim);
        create_table(&client).await;
        let mut times = Vec::new();
        for i in 0..40 {
            let started = Instant::now();
            client
                .get_item()
                .table_name(TABLE)
                .key("pk", s(&format!("k{i}")))
                .send()
                .await
                .unwrap();
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    }
    let none = Simulator::start(quick()).unwrap();
    let fast = median_ms(&none).await;
    let slow_config = SimConfig {
        latency: Latency::LogNormal {
            p50: Duration::from_millis(25),
            p99: Duration::from_millis(40),
        },
        ..SimConfig::default()
    };
    let slow_sim = Simulator::start(slow_config).unwrap();
    let slow = median_ms(&slow_sim).await;
    assert!(fast < 10.0, "no latency: median {fast} ms");
    assert!((22.0..45.0).contains(&slow), "p50 25 ms: median {slow} ms");
}

/// Raw HTTP on the simulator's port, for its side endpoints and protocol errors.
async fn http(sim: &Simulator, request: String) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn side_endpoints_report_stats_and_deletions_and_protocol_errors_are_dynamodbs() {
    let sim = Simulator::start(quick()).unwrap();
    let client = client(&sim);
    create_table(&client).await;
    sim.plant(
        TABLE,
        (0..3).map(|i| sim_item(&format!("k{i}"), NOW - 1, 0)),
    )
    .unwrap();
    for i in 0..3 {
        client
            .delete_item()
            .table_name(TABLE)
            .key("pk", s(&format!("k{i}")))
            .send()
            .await
            .unwrap();
    }
    let (status, body) = http(
        &sim,
        "GET /deletions?from=1&limit=5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(),
    )
    .await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["total"], 3);
    assert_eq!(json["next"], 3);
    assert_eq!(json["deletions"][0][1], TABLE);
    assert_eq!(json["deletions"][0][2], "k1");
    assert!(json["deletions"][0][0].as_f64().unwrap() > 1.7e12);

    let (status, body) = http(
        &sim,
        "GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".into(),
    )
    .await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["tables"][TABLE]["usage"]["write_units"], 3.0);
    assert_eq!(
        json["tables"][TABLE]["indexes"][INDEX]["usage"]["write_units"],
        3.0
    );
    assert_eq!(json["calls"]["requests"]["DeleteItem"], 3);
    assert!(json["cpu_seconds"].as_f64().unwrap() > 0.0);

    let post = |target: &str, body: &str| {
        format!(
            "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.{target}\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let (status, body) = http(&sim, post("Nope", "{}")).await;
    assert_eq!(status, 400);
    assert!(body.contains("UnknownOperationException"), "{body}");
    let (status, body) = http(&sim, post("Query", "{not json")).await;
    assert_eq!(status, 400);
    assert!(body.contains("SerializationException"), "{body}");
    let (status, body) = http(
        &sim,
        post(
            "PutItem",
            r#"{"TableName":"bench","Item":{"pk":{"N":"x1"}}}"#,
        ),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body.contains("ValidationException"), "{body}");
    // Answers carry a Date header: precise-ttl reads the store's clock off it.
    let (_, _) = http(&sim, post("ListTables", "{}")).await;
    let raw = {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
        stream
            .write_all(post("ListTables", "{}").as_bytes())
            .await
            .unwrap();
        let mut r = String::new();
        stream.read_to_string(&mut r).await.unwrap();
        r
    };
    assert!(raw.to_ascii_lowercase().contains("\r\ndate: "), "{raw}");
}

#[tokio::test]
async fn updates_conditions_and_leases_work_as_the_daemon_uses_them() {
    let sim = Simulator::start(quick()).unwrap();
    let client = client(&sim);
    // A lease-table-shaped table: (scope, lease).
    let def = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    let key = |name: &str, t| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(t)
            .build()
            .unwrap()
    };
    client
        .create_table()
        .table_name("leases")
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(def("scope"))
        .attribute_definitions(def("lease"))
        .key_schema(key("scope", KeyType::Hash))
        .key_schema(key("lease", KeyType::Range))
        .send()
        .await
        .unwrap();
    for lease in ["b", "a", "c"] {
        client
            .put_item()
            .table_name("leases")
            .item("scope", s("t/i"))
            .item("lease", s(lease))
            .item("counter", n(0))
            .condition_expression("attribute_not_exists(#l)")
            .expression_attribute_names("#l", "lease")
            .send()
            .await
            .unwrap();
    }
    let again = client
        .put_item()
        .table_name("leases")
        .item("scope", s("t/i"))
        .item("lease", s("a"))
        .condition_expression("attribute_not_exists(#l)")
        .expression_attribute_names("#l", "lease")
        .send()
        .await
        .unwrap_err();
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
    let leases: Vec<&str> = all
        .items()
        .iter()
        .map(|i| i["lease"].as_s().unwrap().as_str())
        .collect();
    assert_eq!(leases, ["a", "b", "c"]);
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

#[tokio::test]
async fn scans_page_through_every_item_once_in_segments_and_execute_statement_deletes() {
    let sim = Simulator::start(quick()).unwrap();
    let client = client(&sim);
    create_table(&client).await;
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

    let out = client
        .execute_statement()
        .statement(DELETE)
        .parameters(s("k00"))
        .parameters(n(NOW - 157_680_000))
        .parameters(n(NOW))
        .send()
        .await
        .unwrap();
    assert_eq!(out.items()[0]["pk"], s("k00"));
    let out = client
        .execute_statement()
        .statement(DELETE)
        .parameters(s("k00"))
        .parameters(n(NOW - 157_680_000))
        .parameters(n(NOW))
        .send()
        .await
        .unwrap();
    assert!(out.items().is_empty(), "already gone: nothing, no error");
    let err = client
        .execute_statement()
        .statement(DELETE)
        .parameters(s("k01"))
        .parameters(n(NOW - 157_680_000))
        .parameters(n(NOW - 10))
        .send()
        .await
        .unwrap_err();
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
