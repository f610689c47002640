//! `precise-ttl demo`: the whole loop on a DynamoDB Local it starts itself. Wiring and output:
//! the items are written in bulk by the DynamoDB tooling, each deletion shown as the daemon
//! reports it ([`DeletionLog`]), the lag percentiles the daemon's own.

use crate::args::{DemoArgs, Global};
use crate::wiring::Outcome;
use anyhow::Context;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{Expiry, Timestamp, TtlLayout};
use precise_ttl_dynamodb::bulk::put_all;
use precise_ttl_dynamodb::item::writer_values;
use precise_ttl_dynamodb::{Dynamo, DynamoStore, ItemKey};
use precise_ttl_engine::{Clock, Daemon, DaemonConfig, Observer, SystemClock};
use precise_ttl_local::DynamoDbLocal;
use precise_ttl_ops::{CreateTable, KeyAttribute, KeyType, SetupOptions, setup};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Items that must still be there at the end, and why.
const SURVIVORS: &[(&str, &str)] = &[
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

/// When the "extended" item is due, from the demo's start; its writer extends it a second
/// before.
const EXTENDED_DUE: Duration = Duration::from_secs(4);

pub async fn run(global: &Global, args: &DemoArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let mut _local = None;
    let dynamo = match &global.endpoint_url {
        Some(_) => crate::wiring::connect(global).await?,
        None => {
            println!(
                "starting DynamoDB Local (installed into {} on first use)...",
                precise_ttl_local::install_dir()?.display()
            );
            let started = Instant::now();
            let local = tokio::task::spawn_blocking(DynamoDbLocal::start).await??;
            println!(
                "  running at {} after {:.1} s",
                local.endpoint(),
                started.elapsed().as_secs_f64()
            );
            let dynamo = Dynamo::local(local.endpoint());
            _local = Some(local);
            dynamo
        }
    };
    let table = global
        .table
        .clone()
        .unwrap_or_else(|| format!("precise-ttl-demo-{:08x}", fastrand::u32(..)));

    // Native TTL stays off here: DynamoDB Local would start deleting too, and the demo is
    // about what precise-ttl deletes. In production `setup` enables it as a backstop.
    let report = setup::setup(
        &dynamo,
        &table,
        &layout,
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
    .await?;
    println!(
        "table {table:?}: {}",
        report
            .actions
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    );

    let clock = SystemClock;
    let t0 = clock.now();
    let first = Duration::from_secs(2);
    let n = args.items;
    let mut items = Vec::new();
    for i in 0..n {
        let offset = first
            + args.spread.mul_f64(i as f64 / n as f64)
            + Duration::from_millis(fastrand::u64(..7));
        items.push(item(
            &layout,
            &format!("item-{i:05}"),
            Some(t0.saturating_add(offset).to_epoch_seconds_text()),
        ));
    }
    items.push(item(
        &layout,
        "extended",
        Some(t0.saturating_add(EXTENDED_DUE).to_epoch_seconds_text()),
    ));
    items.push(item(
        &layout,
        "far-future",
        Some(
            t0.saturating_add(Duration::from_secs(3600))
                .to_epoch_seconds_text(),
        ),
    ));
    items.push(item(
        &layout,
        "too-old",
        Some(
            t0.saturating_sub(Duration::from_secs(6 * 365 * 86_400))
                .to_epoch_seconds_text(),
        ),
    ));
    items.push(item(
        &layout,
        "milliseconds",
        Some(t0.as_millis().to_string()),
    ));
    items.push(item(&layout, "no-ttl", None));
    put_all(&dynamo, &table, items, |_| {})
        .await
        .context("writing the demo items")?;
    println!(
        "wrote {n} items expiring {:.0}–{:.0} s from now, and {} that must survive",
        first.as_secs_f64(),
        (first + args.spread).as_secs_f64(),
        SURVIVORS.len()
    );

    // A writer extends one item's TTL one second before it is due.
    let extender = {
        let dynamo = dynamo.clone();
        let table = table.clone();
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
    };

    // The daemon, in this process: it reads each shard ahead and deletes every item at its
    // expiry instant. Every second we print what it deleted meanwhile.
    let store = DynamoStore::open(dynamo.clone(), &table, layout.clone()).await?;
    let deletions = Arc::new(DeletionLog::default());
    let config = DaemonConfig {
        poll_interval: args.interval.max(Duration::from_millis(100)),
        ..DaemonConfig::default()
    };
    let daemon = Daemon::new(
        Arc::new(store),
        dynamo.store_clock.clone(),
        Arc::new(layout.shards),
        config,
    )
    .with_observer(deletions.clone());
    let deadline = Instant::now() + first + args.spread + Duration::from_secs(15);
    let progress = {
        let deletions = Arc::clone(&deletions);
        async move {
            let mut printed = 0;
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let batch = deletions.since(printed);
                if !batch.is_empty() {
                    let lags: Vec<i64> = batch.iter().map(|d| d.lag_ms).collect();
                    let now = SystemClock.now().millis_since(t0) as f64 / 1000.0;
                    println!(
                        "  t+{now:5.2}s  deleted {:>4} items ({} … {}), {} to {} ms after their TTLs",
                        batch.len(),
                        batch[0].key,
                        batch[batch.len() - 1].key,
                        lags.iter().min().unwrap_or(&0),
                        lags.iter().max().unwrap_or(&0)
                    );
                    printed += batch.len();
                }
                if printed as u64 >= n || Instant::now() > deadline {
                    return;
                }
            }
        }
    };
    let report = daemon.run(progress).await?;
    let skipped = report.skipped;
    extender
        .await?
        .context("extending the TTL of item \"extended\"")?;

    let deleted = deletions.len();
    let lag = report.lag.unwrap_or_default();
    println!();
    println!("deleted {deleted} of {n} expired items; skipped {skipped} changed");
    println!(
        "lag from TTL to delete acknowledged (index read every {} ms, deletes scheduled at the expiry instant): p50 {} ms, p90 {} ms, p99 {} ms, max {} ms",
        args.interval.as_millis(),
        lag.p50_ms,
        lag.p90_ms,
        lag.p99_ms,
        lag.max_ms
    );
    let mut all_kept = true;
    for (key, why) in SURVIVORS {
        let found = dynamo
            .query
            .get_item()
            .table_name(&table)
            .key("pk", AttributeValue::S((*key).into()))
            .consistent_read(true)
            .send()
            .await?
            .item
            .is_some();
        all_kept &= found;
        println!(
            "  {} {key:<13} {why}",
            if found { "kept   " } else { "DELETED" }
        );
    }
    if global.table.is_none() {
        dynamo
            .query
            .delete_table()
            .table_name(&table)
            .send()
            .await
            .ok();
    }
    if deleted as u64 != n || !all_kept {
        anyhow::bail!("the demo did not end as expected (see above)");
    }
    Ok(Outcome::Success)
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
struct Deletion {
    key: String,
    lag_ms: i64,
}

/// Every deletion the daemon reports, in order, for the demo's view of them as they happen.
#[derive(Debug, Default)]
struct DeletionLog(Mutex<Vec<Deletion>>);

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

    fn len(&self) -> usize {
        self.entries().len()
    }

    /// The deletions from position `from` on.
    fn since(&self, from: usize) -> Vec<Deletion> {
        self.entries().get(from..).unwrap_or_default().to_vec()
    }
}
