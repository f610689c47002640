//! What the tests share: a simulator without latency and an SDK client on it; the bench-shaped
//! table (key `pk`, the KEYS_ONLY `precise-ttl` index on `ttl_shard` and `ttl`) made through the
//! SDK or directly, its items, its due-page query and its PartiQL delete; raw HTTP on the
//! simulator's port.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region, retry::RetryConfig};
use aws_sdk_dynamodb::operation::create_table::builders::CreateTableFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue as Av;
use aws_sdk_dynamodb::types::{
    BatchStatementRequest, BillingMode, CreateGlobalSecondaryIndexAction, GlobalSecondaryIndex,
    GlobalSecondaryIndexUpdate, KeyType, Projection, ProjectionType, ReturnConsumedCapacity,
    ScalarAttributeType,
};
use precise_ttl_sim::{
    IndexSpec, Item, KeySpec, ScalarType, SimConfig, Simulator, TableSpec, Value,
};
use std::collections::HashMap;

pub const TABLE: &str = "bench";
pub const INDEX: &str = "precise-ttl";
/// The adapter's PartiQL delete for a table keyed by `pk` (see precise-ttl-dynamodb's store).
pub const DELETE: &str = "DELETE FROM \"bench\" WHERE \"pk\" = ? AND attribute_type(\"ttl\", 'N') AND \"ttl\" BETWEEN ? AND ? RETURNING ALL OLD *";
/// "Now" for the items' TTLs and the conditions that compare them.
pub const NOW: i64 = 1_800_000_000;
/// The oldest TTL the adapter's conditions accept: five years before `NOW`.
pub const OLDEST: i64 = NOW - 157_680_000;

/// The default simulator, answering at once.
pub fn quick() -> SimConfig {
    SimConfig::default().without_latency()
}

/// An SDK client on the simulator that never retries, so every refusal is seen.
pub fn client(sim: &Simulator) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(sim.endpoint())
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .retry_config(RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}

pub fn s(v: &str) -> Av {
    Av::S(v.into())
}

pub fn n(v: impl ToString) -> Av {
    Av::N(v.to_string())
}

pub use precise_ttl_dynamodb::table::{attribute, key_element as key};

fn keys_only() -> Projection {
    Projection::builder()
        .projection_type(ProjectionType::KeysOnly)
        .build()
}

/// CreateTable of the bench table, on demand and keyed by `pk`, without its index yet: the
/// tests add the index, or send it as it is.
pub fn create_keyed_by_pk(client: &Client) -> CreateTableFluentBuilder {
    client
        .create_table()
        .table_name(TABLE)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("pk", ScalarAttributeType::S))
        .key_schema(key("pk", KeyType::Hash))
}

/// A simulator with `config`, an SDK client on it, and the bench table made through the client:
/// where most tests start.
pub async fn with_table(config: SimConfig) -> (Simulator, Client) {
    let sim = Simulator::start(config).unwrap();
    let client = client(&sim);
    create_table(&client).await;
    (sim, client)
}

/// The bench table with its index, through CreateTable.
pub async fn create_table(client: &Client) {
    create_keyed_by_pk(client)
        .attribute_definitions(attribute("ttl_shard", ScalarAttributeType::N))
        .attribute_definitions(attribute("ttl", ScalarAttributeType::N))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(INDEX)
                .key_schema(key("ttl_shard", KeyType::Hash))
                .key_schema(key("ttl", KeyType::Range))
                .projection(keys_only())
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
}

/// The table without its index, `early` written, then the index added (UpdateTable): the way a
/// String TTL gets into a table whose index wants a Number, which DynamoDB's backfill leaves out.
pub async fn create_table_after(client: &Client, early: &[(&str, Av)]) {
    create_keyed_by_pk(client).send().await.unwrap();
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
    let create = CreateGlobalSecondaryIndexAction::builder()
        .index_name(INDEX)
        .key_schema(key("ttl_shard", KeyType::Hash))
        .key_schema(key("ttl", KeyType::Range))
        .projection(keys_only())
        .build()
        .unwrap();
    let out = client
        .update_table()
        .table_name(TABLE)
        .attribute_definitions(attribute("ttl_shard", ScalarAttributeType::N))
        .attribute_definitions(attribute("ttl", ScalarAttributeType::N))
        .global_secondary_index_updates(
            GlobalSecondaryIndexUpdate::builder().create(create).build(),
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

/// An on-demand table keyed by a String `pk`, made directly, with `indexes`.
pub fn table_spec(name: &str, indexes: Vec<IndexSpec>) -> TableSpec {
    TableSpec {
        name: name.into(),
        partition_key: KeySpec::new("pk", ScalarType::S),
        sort_key: None,
        indexes,
    }
}

/// precise-ttl's KEYS_ONLY expiry index, named `name`, for [`table_spec`].
pub fn shard_index(name: &str) -> IndexSpec {
    IndexSpec {
        name: name.into(),
        partition_key: KeySpec::new("ttl_shard", ScalarType::N),
        sort_key: Some(KeySpec::new("ttl", ScalarType::N)),
        all_attributes: false,
    }
}

/// An item of `pk`, with a TTL and a shard when given.
pub fn item(pk: &str, ttl: Option<Value>, shard: Option<i64>) -> Item {
    let mut item = Item::new().with("pk", Value::s(pk));
    if let Some(ttl) = ttl {
        item = item.with("ttl", ttl);
    }
    if let Some(shard) = shard {
        item = item.with("ttl_shard", Value::int(shard));
    }
    item
}

/// A bench item to plant: a Number TTL, a shard, and a 50-byte payload.
pub fn sim_item(pk: &str, ttl: i64, shard: i64) -> Item {
    item(pk, Some(Value::int(ttl)), Some(shard)).with("payload", Value::s("x".repeat(50)))
}

/// The String `attribute` of each of `items`, in order.
pub fn strings<'a>(items: &'a [HashMap<String, Av>], attribute: &str) -> Vec<&'a str> {
    items
        .iter()
        .map(|i| i[attribute].as_s().unwrap().as_str())
        .collect()
}

/// PutItem of `pk` with `ttl`, and a shard when given.
pub async fn put(client: &Client, pk: &str, ttl: Av, shard: Option<i64>) {
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

/// The sweeper's query: one page of `shard`'s items due at `NOW`, oldest first.
pub async fn due_page(
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
        .expression_attribute_values(":oldest", n(OLDEST))
        .expression_attribute_values(":now", n(NOW))
        .set_exclusive_start_key(start)
        .limit(limit)
        .return_consumed_capacity(ReturnConsumedCapacity::Total)
        .send()
        .await
        .unwrap()
}

/// The adapter's PartiQL delete of `pk` if due at `now`, as one statement of a batch.
pub fn statement(pk: &str, now: i64) -> BatchStatementRequest {
    BatchStatementRequest::builder()
        .statement(DELETE)
        .parameters(s(pk))
        .parameters(n(OLDEST))
        .parameters(n(now))
        .build()
        .unwrap()
}

/// Sends a raw HTTP request on the simulator's port; the whole response as text.
pub async fn http_raw(sim: &Simulator, request: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

/// Sends a raw HTTP request on the simulator's port; the response's status and body.
pub async fn http(sim: &Simulator, request: &str) -> (u16, String) {
    let response = http_raw(sim, request).await;
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}
