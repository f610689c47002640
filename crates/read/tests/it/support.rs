//! One DynamoDB Local for the run, a fresh table per test, and the fixture: items that must be
//! hidden and items that must stay visible, all under the partition key `p`.

use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, AttributeValue, BillingMode, GlobalSecondaryIndex, KeySchemaElement,
    KeyType, Projection, ProjectionType, ScalarAttributeType,
};
use aws_sdk_dynamodb::{Client, Config};
use precise_ttl_core::Timestamp;
use precise_ttl_local::DynamoDbLocal;
use precise_ttl_read::{HideExpired, PlaceholderInUse};
use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

pub type Item = HashMap<String, AttributeValue>;

pub const PK: &str = "p";

/// A global secondary index on `kind` (every fixture item is `a` or `b`), projecting everything.
pub const BY_KIND: &str = "by-kind";

/// Items whose TTL has passed, by the rule: a second ago, an hour ago, four years ago, and a
/// decimal TTL a quarter of a second ago.
pub const HIDDEN: [&str; 4] = ["exp-1s", "exp-1h", "exp-4y", "exp-decimal"];

/// Items that stay: a future TTL, a String TTL, a TTL in milliseconds, a TTL more than five
/// years old, no TTL at all.
pub const VISIBLE: [&str; 5] = ["future", "string", "millis", "older-than-5y", "no-ttl"];

const YEAR: i64 = 365 * 24 * 3600;

fn endpoint() -> &'static str {
    static LOCAL: OnceLock<DynamoDbLocal> = OnceLock::new();
    LOCAL
        .get_or_init(|| DynamoDbLocal::start().expect("DynamoDB Local starts"))
        .endpoint()
}

fn config() -> aws_sdk_dynamodb::config::Builder {
    Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint())
        .credentials_provider(Credentials::new("local", "local", None, None, "test"))
}

/// A client without the interceptor.
pub fn plain() -> Client {
    Client::from_conf(config().build())
}

/// A client with `interceptor`.
pub fn hiding(interceptor: HideExpired) -> Client {
    Client::from_conf(config().interceptor(interceptor).build())
}

/// A client that hides by `ttl` with its clock stopped at `now`.
pub fn hiding_at(now: Timestamp) -> Client {
    hiding(HideExpired::new("ttl").with_clock(move || now))
}

/// A fresh [`table`] and a client hiding by `ttl` at its instant.
pub async fn hiding_table() -> (String, Client) {
    let (table, now) = table().await;
    (table, hiding_at(now))
}

/// A Query of the fixture's partition.
pub fn query_pk(client: &Client, table: &str) -> QueryFluentBuilder {
    client
        .query()
        .table_name(table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", s(PK))
}

/// A Scan of the whole table.
pub fn scan(client: &Client, table: &str) -> ScanFluentBuilder {
    client.scan().table_name(table)
}

/// A fresh table with `pk` (S) and `sk` (S) and the index [`BY_KIND`], holding the fixture around `now`, which is the
/// wall clock in whole seconds.
pub async fn table() -> (String, Timestamp) {
    static N: AtomicUsize = AtomicUsize::new(0);
    let name = format!("read-it-{}", N.fetch_add(1, Ordering::Relaxed));
    let client = plain();
    client
        .create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attribute("pk"))
        .attribute_definitions(attribute("sk"))
        .key_schema(key("pk", KeyType::Hash))
        .key_schema(key("sk", KeyType::Range))
        .attribute_definitions(attribute("kind"))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(BY_KIND)
                .key_schema(key("kind", KeyType::Hash))
                .key_schema(key("sk", KeyType::Range))
                .projection(
                    Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                )
                .build()
                .unwrap(),
        )
        .send()
        .await
        .expect("table created");
    let now = Timestamp::from_secs(precise_ttl_read::now().as_millis() / 1000);
    let secs = now.as_millis() / 1000;
    let n = |v: String| Some(AttributeValue::N(v));
    let fixture = [
        ("exp-1s", n(format!("{}", secs - 1))),
        ("exp-1h", n(format!("{}", secs - 3600))),
        ("exp-4y", n(format!("{}", secs - 4 * YEAR))),
        ("exp-decimal", n(format!("{}.75", secs - 1))),
        ("future", n(format!("{}", secs + 3600))),
        ("string", Some(AttributeValue::S(format!("{}", secs - 60)))),
        ("millis", n(format!("{}", (secs - 60) * 1000))),
        ("older-than-5y", n(format!("{}", secs - 6 * YEAR))),
        ("no-ttl", None),
    ];
    for (i, (sk, ttl)) in fixture.into_iter().enumerate() {
        let mut item = key_of(sk);
        item.insert("data".into(), s(&format!("d-{sk}")));
        item.insert("kind".into(), s(if i % 2 == 0 { "a" } else { "b" }));
        if let Some(ttl) = ttl {
            item.insert("ttl".into(), ttl);
        }
        put(&client, &name, item).await;
    }
    (name, now)
}

pub async fn put(client: &Client, table: &str, item: Item) {
    client
        .put_item()
        .table_name(table)
        .set_item(Some(item))
        .send()
        .await
        .expect("item written");
}

pub fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.to_string())
}

/// The key of the fixture item `sk`.
pub fn key_of(sk: &str) -> Item {
    HashMap::from([("pk".to_string(), s(PK)), ("sk".to_string(), s(sk))])
}

/// The sort keys of `items`, sorted; panics on a duplicate.
pub fn sks<'a>(items: impl IntoIterator<Item = &'a Item>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    for item in items {
        let AttributeValue::S(sk) = &item["sk"] else {
            panic!("sk is a String")
        };
        assert!(seen.insert(sk.clone()), "{sk} returned twice");
    }
    seen.into_iter().collect()
}

/// Sorted sort keys of `names`.
pub fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

pub fn visible() -> Vec<String> {
    sorted(&VISIBLE)
}

pub fn all() -> Vec<String> {
    let mut v = VISIBLE.to_vec();
    v.extend(HIDDEN);
    sorted(&v)
}

/// The interceptor's error among an SDK error's causes.
pub fn placeholder_error<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a PlaceholderInUse> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(found) = e.downcast_ref::<PlaceholderInUse>() {
            return Some(found);
        }
        cause = e.source();
    }
    None
}

fn attribute(name: &str) -> AttributeDefinition {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .unwrap()
}

fn key(name: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .unwrap()
}
