//! `precise-ttl demo`'s scenario on a table: the table with its expiry index, the items that
//! expire during the demo and those that must survive, the writer that extends one item's TTL
//! just before it is due, and what the daemon deleted ([`DeletionLog`]). The binary starts
//! DynamoDB Local, runs the daemon and prints as it goes.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{Expiry, Timestamp, TtlLayout};
use precise_ttl_dynamodb::bulk::put_all;
use precise_ttl_dynamodb::item::writer_values;
use precise_ttl_dynamodb::{AdapterError, Dynamo, ItemKey};
use precise_ttl_engine::{Clock, Observer, SystemClock};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use crate::{CreateTable, KeyAttribute, KeyType, SetupOptions, SetupReport, setup};

/// Items that must still be there at the end, and why.
pub const SURVIVORS: &[(&str, &str)] = &[
    (
        "extended",
        "TTL extended by a writer one second before it was due",
    ),
    ("no-ttl", "no TTL attribute"),
    ("far-future", "expires in an hour"),
    (
        "too-old",
        "TTL six years ago: native TTL ignores it, so do we",
    ),
    (
        "milliseconds",
        "TTL written in milliseconds by mistake (far future in seconds)",
    ),
];

/// When the first of the expiring items is due, from the demo's start.
pub const FIRST_DUE: Duration = Duration::from_secs(2);

/// When the "extended" item is due, from the demo's start; its writer extends it a second
/// before.
const EXTENDED_DUE: Duration = Duration::from_secs(4);

/// Creates the demo's table (partition key `pk`) with the expiry index. Native TTL stays off:
/// DynamoDB Local would start deleting too, and the demo is about what precise-ttl deletes. In
/// production `setup` enables it as a backstop.
pub async fn create_table(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
) -> Result<SetupReport, AdapterError> {
    setup::setup(
        dynamo,
        table,
        layout,
        &SetupOptions {
            create_table: Some(CreateTable {
                partition_key: KeyAttribute {
                    name: "pk".into(),
                    kind: KeyType::S,
                },
                sort_key: None,
            }),
            native_ttl: false,
            poll_interval: Duration::from_millis(100),
            ..SetupOptions::default()
        },
    )
    .await
}

/// Writes `items` items whose TTLs are spread over `spread` from [`FIRST_DUE`] after `t0`, and
/// the [`SURVIVORS`].
pub async fn plant(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    items: u64,
    spread: Duration,
    t0: Timestamp,
) -> Result<(), AdapterError> {
    let mut all = Vec::new();
    for i in 0..items {
        let offset = FIRST_DUE
            + spread.mul_f64(i as f64 / items as f64)
            + Duration::from_millis(fastrand::u64(..7));
        all.push(item(
            layout,
            &format!("item-{i:05}"),
            Some(t0.saturating_add(offset).to_epoch_seconds_text()),
        ));
    }
    all.push(item(
        layout,
        "extended",
        Some(t0.saturating_add(EXTENDED_DUE).to_epoch_seconds_text()),
    ));
    all.push(item(
        layout,
        "far-future",
        Some(
            t0.saturating_add(Duration::from_secs(3600))
                .to_epoch_seconds_text(),
        ),
    ));
    all.push(item(
        layout,
        "too-old",
        Some(
            t0.saturating_sub(Duration::from_secs(6 * 365 * 86_400))
                .to_epoch_seconds_text(),
        ),
    ));
    all.push(item(
        layout,
        "milliseconds",
        Some(t0.as_millis().to_string()),
    ));
    all.push(item(layout, "no-ttl", None));
    put_all(dynamo, table, all, |_| {}).await?;
    Ok(())
}

/// A writer that extends the "extended" item's TTL by an hour one second before it is due.
pub fn extend_later(
    dynamo: &Dynamo,
    table: &str,
    layout: &TtlLayout,
    t0: Timestamp,
) -> tokio::task::JoinHandle<Result<UpdateItemOutput, SdkError<UpdateItemError, HttpResponse>>> {
    let dynamo = dynamo.clone();
    let table = table.to_string();
    let ttl = layout.ttl_attribute.clone();
    tokio::spawn(async move {
        // One second before the item is due, on the clock its TTL was written by: a wait
        // counted from here would start late when writing the items was slow, and the
        // extension would then come after the delete.
        let at = t0.saturating_add(EXTENDED_DUE - Duration::from_secs(1));
        let wait = at.millis_since(SystemClock.now()).max(0) as u64;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let later = SystemClock.now().saturating_add(Duration::from_secs(3600));
        dynamo
            .write
            .update_item()
            .table_name(&table)
            .key("pk", AttributeValue::S("extended".into()))
            .update_expression("SET #t = :t")
            // Never re-create the item if the extension came after its delete.
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#t", ttl)
            .expression_attribute_values(":t", AttributeValue::N(later.to_epoch_seconds_text()))
            .send()
            .await
    })
}

/// Each of the [`SURVIVORS`] with whether it is still there (a consistent read).
pub async fn survivors(
    dynamo: &Dynamo,
    table: &str,
) -> Result<Vec<(&'static str, &'static str, bool)>, SdkError<GetItemError, HttpResponse>> {
    let mut found = Vec::new();
    for (key, why) in SURVIVORS {
        let there = dynamo
            .query
            .get_item()
            .table_name(table)
            .key("pk", AttributeValue::S((*key).into()))
            .consistent_read(true)
            .send()
            .await?
            .item
            .is_some();
        found.push((*key, *why, there));
    }
    Ok(found)
}

fn item(layout: &TtlLayout, pk: &str, ttl: Option<String>) -> HashMap<String, AttributeValue> {
    let mut item = HashMap::from([("pk".to_string(), AttributeValue::S(pk.to_string()))]);
    if let Some(ttl) = ttl {
        let expiry = Expiry::parse_number(&ttl).expect("the demo writes valid numbers");
        item.extend(writer_values(
            &layout.writer_attributes(pk.as_bytes(), expiry.at()),
        ));
        // The writer API works in milliseconds; keep the demo's odd values exactly as written.
        item.insert(layout.ttl_attribute.clone(), AttributeValue::N(ttl));
    }
    item
}

/// One deletion the daemon reported: the item's partition key as text and the lag from its TTL.
#[derive(Debug, Clone)]
pub struct Deletion {
    pub key: String,
    pub lag_ms: i64,
}

/// Every deletion the daemon reports, in order, for the demo's view of them as they happen.
#[derive(Debug, Default)]
pub struct DeletionLog(Mutex<Vec<Deletion>>);

impl Observer<ItemKey> for DeletionLog {
    fn deleted(&self, key: &ItemKey, expiry: Expiry, at: Timestamp) {
        let deletion = Deletion {
            key: key.partition_text().trim_matches('"').to_string(),
            lag_ms: at.millis_since(expiry.at()),
        };
        self.entries().push(deletion);
    }
}

impl DeletionLog {
    fn entries(&self) -> std::sync::MutexGuard<'_, Vec<Deletion>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn len(&self) -> usize {
        self.entries().len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries().is_empty()
    }

    /// The deletions from position `from` on.
    pub fn since(&self, from: usize) -> Vec<Deletion> {
        self.entries().get(from..).unwrap_or_default().to_vec()
    }
}
