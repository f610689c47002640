//! `precise-ttl backfill`: wiring and output only. The resumable, conditional scan lives in
//! `precise_ttl_ops::backfill`; this file builds it from the flags, draws the progress bar,
//! prints the summary and picks the exit code.

use crate::wiring::Outcome;
use anyhow::Context;
use precise_ttl_core::Backoff;
use precise_ttl_engine::SystemClock;
use precise_ttl_flags::{BackfillArgs, Global, IndexLayout};
use precise_ttl_ops::TableScan;
use precise_ttl_ops::backfill::{
    self, BackfillOptions, BackfillProgress, BackfillTarget, CheckpointFile, Opened,
};
use precise_ttl_ops::queue::backfill::QueueBackfill;
use precise_ttl_stream::queue::QueueTable;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

struct Bar(indicatif::ProgressBar);

impl BackfillProgress for Bar {
    fn scanned(&self, items: u64) {
        self.0.inc(items);
    }
}

pub async fn run(global: &Global, args: &BackfillArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let table = global.table()?;
    let dynamo = crate::wiring::connect(global).await?;
    global.refuse_layout("backfill", &[IndexLayout::BlogWindow])?;
    // The queue layout writes entries in its queue table instead of shards in the items.
    let queue = match global.index_layout {
        IndexLayout::StreamQueue => Some(QueueTable::new(dynamo.clone(), &global.queue_table()?)),
        _ => None,
    };
    if let Some(queue) = &queue {
        // Missing, it would fail at the first entry, after the scan began.
        queue.check().await?;
    }
    let scan = TableScan::open(dynamo, table, layout.clone()).await?;
    let path = args.checkpoint.clone().unwrap_or_else(|| {
        PathBuf::from(match &queue {
            Some(_) => format!("precise-ttl-backfill-{table}-queue.json"),
            None => format!("precise-ttl-backfill-{table}.json"),
        })
    });
    let target = BackfillTarget {
        table: table.to_string(),
        ttl_attribute: layout.ttl_attribute.clone(),
        // A checkpoint names what it wrote: a queue's never resumes a shard backfill.
        shard_attribute: match &queue {
            Some(q) => format!("queue table {}", q.name()),
            None => layout.shard_attribute.clone(),
        },
        shards: layout.shards.get(),
        segments: args.scan.segments,
    };
    let (checkpoint, opened) = CheckpointFile::open(&path, &target, args.restart)
        .context("pass --restart to start over, or resume with the flags the checkpoint names")?;
    if let Opened::Resumed { done, segments } = opened {
        eprintln!(
            "resuming from {} ({done} of {segments} segments already done)",
            path.display()
        );
    }

    let total = scan.shape().item_count.unwrap_or(0);
    let progress = indicatif::ProgressBar::with_draw_target(
        Some(total),
        indicatif::ProgressDrawTarget::stderr_with_hz(4),
    );
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} scanned {pos}/~{len} items [{bar:30}] {per_sec} ETA {eta} {msg}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let options = BackfillOptions {
        page_size: args.scan_page_size,
        concurrency: args.writes_in_flight as usize,
        max_writes_per_second: args.max_writes_per_second,
        backoff: Backoff {
            max_attempts: args.retries.max_attempts,
            ..Backoff::default()
        },
    };
    let bar = Arc::new(Bar(progress));
    let started = Instant::now();
    let stop = crate::wiring::signal();
    let result = match queue {
        Some(queue) => {
            let target = QueueBackfill::new(scan, queue, layout.shards);
            backfill::run(target, SystemClock, checkpoint, options, bar.clone(), stop).await
        }
        None => backfill::run(scan, SystemClock, checkpoint, options, bar.clone(), stop).await,
    };
    let written = match global.index_layout {
        IndexLayout::StreamQueue => "queue entries written",
        _ => "shard added to",
    };
    bar.0.finish_and_clear();
    let r = result?;
    let complete = r.complete;
    let secs = started.elapsed().as_secs_f64();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "table": table,
                "complete": complete,
                "scanned": r.scanned,
                "without_shard": r.without_shard,
                "shard_added": r.shard_added,
                "changed_meanwhile": r.changed_meanwhile,
                "ttl_not_a_number": r.ttl_not_a_number,
                "errors": r.errors,
                "throttled": r.throttled,
                "seconds": (secs * 1000.0).round() / 1000.0,
            })
        );
    } else {
        println!(
            "backfill of {table:?} {} in {secs:.1} s: scanned {}, {written} {}, changed meanwhile (left alone) {}, TTL not a Number (left alone) {}, errors {}",
            if complete { "complete" } else { "stopped" },
            r.scanned,
            r.shard_added,
            r.changed_meanwhile,
            r.ttl_not_a_number,
            r.errors
        );
        if r.throttled > 0 {
            println!("  {} writes were throttled and retried", r.throttled);
        }
        if !complete {
            println!(
                "  progress is saved in {}: run the same command again to continue",
                path.display()
            );
        }
        if r.ttl_not_a_number > 0 {
            println!("  items with a non-Number TTL never expire; `precise-ttl doctor` lists them");
        }
    }
    Ok(if complete && r.errors == 0 {
        Outcome::Success
    } else {
        Outcome::Partial
    })
}
