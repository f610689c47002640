//! `precise-ttl demo`: the whole loop on a DynamoDB Local it starts itself. Wiring and output:
//! the scenario (the table, the items, the writer that extends one, the survivors) is
//! `precise_ttl_ops::demo`'s, each deletion is shown as the daemon reports it
//! ([`DeletionLog`]), the lag percentiles are the daemon's own.

use crate::wiring::Outcome;
use anyhow::Context;
use precise_ttl_dynamodb::{Dynamo, DynamoStore};
use precise_ttl_engine::{Clock, Daemon, DaemonConfig, SystemClock};
use precise_ttl_flags::{DemoArgs, Global};
use precise_ttl_local::DynamoDbLocal;
use precise_ttl_ops::demo::{self, DeletionLog, FIRST_DUE, SURVIVORS};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

    let report = demo::create_table(&dynamo, &table, &layout).await?;
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
    let first = FIRST_DUE;
    let n = args.items;
    demo::plant(&dynamo, &table, &layout, n, args.spread, t0)
        .await
        .context("writing the demo items")?;
    println!(
        "wrote {n} items expiring {:.0}–{:.0} s from now, and {} that must survive",
        first.as_secs_f64(),
        (first + args.spread).as_secs_f64(),
        SURVIVORS.len()
    );

    // A writer extends one item's TTL one second before it is due.
    let extender = demo::extend_later(&dynamo, &table, &layout, t0);

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
    for (key, why, found) in demo::survivors(&dynamo, &table).await? {
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
