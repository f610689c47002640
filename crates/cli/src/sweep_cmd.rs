//! `precise-ttl sweep`: one pass over every shard (or every window of the blog's index).

use crate::wiring::Outcome;
use precise_ttl_dynamodb::{BlogWindows, DynamoStore};
use precise_ttl_engine::{Clock, Sweeper};
use precise_ttl_flags::{Global, IndexLayout, SweepArgs, UsageError};
use precise_ttl_stream::queue::QueueStore;
use std::sync::Arc;
use std::time::Instant;

pub async fn run(global: &Global, args: &SweepArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let table = global.table()?;
    let mut config = args.sweep_config();
    if global.index_layout == IndexLayout::BlogWindow {
        if args.archive.archive.is_some() {
            return Err(UsageError(
                "--archive works with the sharded index only, not --index-layout blog-window"
                    .into(),
            )
            .into());
        }
        let options = args.blog.options().map_err(UsageError::of)?;
        let dynamo = crate::wiring::connect(global).await?;
        let clock = dynamo.store_clock.clone();
        let blog = BlogWindows::open(dynamo, table, &layout, &options, clock.now()).await?;
        let first_window = blog.first_window();
        let started = Instant::now();
        let (r, swept_until) = blog.sweep_once(clock, config).await?;
        let until = swept_until.map_or("not advanced".to_string(), |t| t.to_string());
        if args.json {
            println!(
                "{}",
                serde_json::json!({
                    "table": table,
                    "windows": r.partitions,
                    "first_window": first_window,
                    "deleted": r.deleted,
                    "skipped": r.skipped,
                    "unconfirmed": r.unconfirmed,
                    "errors": r.errors,
                    "throttled": r.throttled,
                    "swept_until": swept_until.map(|t| t.to_string()),
                    "seconds": started.elapsed().as_secs_f64(),
                })
            );
        } else {
            println!(
                "swept {table:?} (blog window index, {} windows from {first_window}) in {:.2} s: deleted {}, skipped (changed) {}, unconfirmed {}, errors {}; checkpoint: {until}",
                r.partitions,
                started.elapsed().as_secs_f64(),
                r.deleted,
                r.skipped,
                r.unconfirmed,
                r.errors
            );
        }
        return Ok(if r.errors > 0 {
            Outcome::Partial
        } else {
            Outcome::Success
        });
    }
    let dynamo = crate::wiring::connect(global).await?;
    let clock = dynamo.store_clock.clone();
    let sink = crate::wiring::open_archive(&args.archive, global).await?;
    let archived = |store: DynamoStore<_>| match &sink {
        Some(sink) => store.with_archive(sink.clone()),
        None => store,
    };
    config.probe_strays = true;
    let started = Instant::now();
    let shards = Arc::new(layout.shards);
    let report = if global.index_layout == IndexLayout::StreamQueue {
        let queue = global.queue_table()?;
        let store = QueueStore::open(dynamo, table, &queue, layout.clone())
            .await?
            .map_items(archived);
        Sweeper::new(Arc::new(store), clock, shards, config)
            .sweep_once()
            .await
    } else {
        let store = archived(DynamoStore::open(dynamo, table, layout.clone()).await?);
        Sweeper::new(Arc::new(store), clock, shards, config)
            .sweep_once()
            .await
    };
    if let Some(sink) = &sink {
        sink.flush(crate::wiring::ARCHIVE_FLUSH_WAIT).await?;
    }
    let report = report?;
    let secs = started.elapsed().as_secs_f64();
    if args.json {
        let json = serde_json::json!({
            "table": table,
            "now": report.now.as_secs_f64(),
            "deleted": report.deleted,
            "skipped": report.skipped,
            "unconfirmed": report.unconfirmed,
            "errors": report.errors,
            "throttled": report.throttled,
            "pages": report.pages,
            "max_lag_ms": report.max_lag_ms,
            "stray_shards": report.strays.iter().map(|s| s.0).collect::<Vec<_>>(),
            "seconds": (secs * 1000.0).round() / 1000.0,
        });
        println!("{json}");
    } else {
        println!(
            "swept {table:?} in {secs:.2} s: deleted {}, skipped (changed) {}, unconfirmed {}, errors {}",
            report.deleted, report.skipped, report.unconfirmed, report.errors
        );
        if !report.strays.is_empty() {
            println!(
                "  due items were found and swept on shard values outside 0..{}: {:?}; raise --shards or rewrite them (`precise-ttl doctor` lists them)",
                layout.shards,
                report.strays.iter().map(|s| s.0).collect::<Vec<_>>()
            );
        }
        if report.throttled > 0 {
            println!("  {} calls were throttled and retried", report.throttled);
        }
        if report.errors > 0 {
            println!("  items that kept failing stay due; the next sweep retries them");
        }
    }
    Ok(if report.errors > 0 {
        Outcome::Partial
    } else {
        Outcome::Success
    })
}
