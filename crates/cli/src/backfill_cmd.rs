//! `precise-ttl backfill`: give existing items their shard attribute, resumably.
//!
//! The checkpoint is a small JSON file holding each segment's Scan position, rewritten
//! atomically after every page whose writes have all finished. A page is re-read after a crash
//! only if the crash came before its checkpoint; its writes are conditional on the item still
//! having no shard, so a repeat is counted as "changed", never written twice.

use crate::Outcome;
use crate::args::{BackfillArgs, Global};
use anyhow::{Context, bail};
use precise_ttl_core::{Backoff, TokenBucket};
use precise_ttl_dynamodb::scan::{ScanCursor, decode_cursor, encode_cursor};
use precise_ttl_dynamodb::{ScanFilter, Segment, ShardWrite, TableScan};
use precise_ttl_engine::retry::with_backoff;
use precise_ttl_engine::{Clock, SystemClock};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Checkpoint {
    table: String,
    ttl_attribute: String,
    shard_attribute: String,
    shards: u16,
    segments: Vec<SegmentState>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct SegmentState {
    done: bool,
    /// `(name, type, text)` of the last evaluated key; empty at the start.
    cursor: Vec<(String, String, String)>,
}

impl Checkpoint {
    fn save(&self, path: &Path) -> anyhow::Result<()> {
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)
            .with_context(|| format!("cannot write the checkpoint {}", tmp.display()))?;
        std::fs::rename(&tmp, path)
            .with_context(|| format!("cannot write the checkpoint {}", path.display()))
    }
}

#[derive(Debug, Default)]
struct Counts {
    scanned: AtomicU64,
    candidates: AtomicU64,
    added: AtomicU64,
    changed: AtomicU64,
    not_number: AtomicU64,
    errors: AtomicU64,
    throttled: AtomicU64,
}

struct Shared {
    scan: TableScan,
    counts: Counts,
    checkpoint: Mutex<Checkpoint>,
    path: PathBuf,
    bucket: Option<Mutex<TokenBucket>>,
    stop: AtomicBool,
    backoff: Backoff,
    progress: indicatif::ProgressBar,
}

pub async fn run(global: &Global, args: &BackfillArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let table = global.table()?;
    let dynamo = crate::connect(global).await?;
    let scan = TableScan::open(dynamo, table, layout.clone()).await?;
    let path = args
        .checkpoint
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("precise-ttl-backfill-{table}.json")));
    let fresh = Checkpoint {
        table: table.to_string(),
        ttl_attribute: layout.ttl_attribute.clone(),
        shard_attribute: layout.shard_attribute.clone(),
        shards: layout.shards.get(),
        segments: vec![
            SegmentState {
                done: false,
                cursor: Vec::new()
            };
            args.segments as usize
        ],
    };
    let checkpoint = if path.exists() && !args.restart {
        let text = std::fs::read(&path)
            .with_context(|| format!("cannot read the checkpoint {}", path.display()))?;
        let saved: Checkpoint = serde_json::from_slice(&text).with_context(|| {
            format!(
                "{} is not a backfill checkpoint; remove it or pass --restart",
                path.display()
            )
        })?;
        let same = saved.table == fresh.table
            && saved.ttl_attribute == fresh.ttl_attribute
            && saved.shard_attribute == fresh.shard_attribute
            && saved.shards == fresh.shards
            && saved.segments.len() == fresh.segments.len();
        if !same {
            bail!(
                "the checkpoint {} was written for table {:?} with --ttl-attribute {} --shard-attribute {} --shards {} --segments {}; resume with those, or pass --restart",
                path.display(),
                saved.table,
                saved.ttl_attribute,
                saved.shard_attribute,
                saved.shards,
                saved.segments.len()
            );
        }
        eprintln!(
            "resuming from {} ({} of {} segments already done)",
            path.display(),
            saved.segments.iter().filter(|s| s.done).count(),
            saved.segments.len()
        );
        saved
    } else {
        fresh
    };
    checkpoint.save(&path)?;

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
    let shared = Arc::new(Shared {
        scan,
        counts: Counts::default(),
        checkpoint: Mutex::new(checkpoint.clone()),
        path: path.clone(),
        bucket: args
            .max_writes_per_second
            .map(|r| Mutex::new(TokenBucket::new(r, r.max(1.0)))),
        stop: AtomicBool::new(false),
        backoff: Backoff {
            max_attempts: args.max_attempts,
            ..Backoff::default()
        },
        progress,
    });
    let started = Instant::now();
    let mut segments = JoinSet::new();
    for (index, state) in checkpoint.segments.iter().enumerate() {
        if state.done {
            continue;
        }
        let shared = Arc::clone(&shared);
        let segment = Segment {
            index: index as u32,
            total: args.segments,
        };
        let cursor = if state.cursor.is_empty() {
            None
        } else {
            Some(decode_cursor(&state.cursor).with_context(|| {
                format!(
                    "the checkpoint {} is damaged; pass --restart",
                    path.display()
                )
            })?)
        };
        let (page_size, concurrency) = (args.page_size, args.concurrency as usize);
        segments.spawn(async move {
            run_segment(&shared, segment, cursor, page_size, concurrency).await
        });
    }
    let stopper = {
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            crate::run_cmd::signal().await;
            shared.stop.store(true, Ordering::SeqCst);
        })
    };
    let mut fatal = None;
    while let Some(result) = segments.join_next().await {
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                shared.stop.store(true, Ordering::SeqCst);
                fatal.get_or_insert(e);
            }
            Err(e) => {
                shared.stop.store(true, Ordering::SeqCst);
                fatal.get_or_insert(anyhow::anyhow!("a segment task failed: {e}"));
            }
        }
    }
    stopper.abort();
    shared.progress.finish_and_clear();
    let complete = shared
        .checkpoint
        .lock()
        .await
        .segments
        .iter()
        .all(|s| s.done);
    if complete {
        let _ = std::fs::remove_file(&path);
    }
    let c = &shared.counts;
    let secs = started.elapsed().as_secs_f64();
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "table": table,
                "complete": complete,
                "scanned": n(&c.scanned),
                "without_shard": n(&c.candidates),
                "shard_added": n(&c.added),
                "changed_meanwhile": n(&c.changed),
                "ttl_not_a_number": n(&c.not_number),
                "errors": n(&c.errors),
                "throttled": n(&c.throttled),
                "seconds": (secs * 1000.0).round() / 1000.0,
            })
        );
    } else {
        println!(
            "backfill of {table:?} {} in {secs:.1} s: scanned {}, shard added to {}, changed meanwhile (left alone) {}, TTL not a Number (left alone) {}, errors {}",
            if complete { "complete" } else { "stopped" },
            n(&c.scanned),
            n(&c.added),
            n(&c.changed),
            n(&c.not_number),
            n(&c.errors)
        );
        if n(&c.throttled) > 0 {
            println!("  {} writes were throttled and retried", n(&c.throttled));
        }
        if !complete {
            println!(
                "  progress is saved in {}: run the same command again to continue",
                path.display()
            );
        }
        if n(&c.not_number) > 0 {
            println!("  items with a non-Number TTL never expire; `precise-ttl doctor` lists them");
        }
    }
    if let Some(e) = fatal {
        return Err(e);
    }
    Ok(if complete && n(&c.errors) == 0 {
        Outcome::Success
    } else {
        Outcome::Partial
    })
}

async fn run_segment(
    shared: &Arc<Shared>,
    segment: Segment,
    mut cursor: Option<ScanCursor>,
    page_size: u32,
    concurrency: usize,
) -> anyhow::Result<()> {
    let shards = shared.scan.layout().shards;
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let page = with_backoff(
            &shared.backoff,
            || {
                shared.counts.throttled.fetch_add(1, Ordering::Relaxed);
            },
            || {
                shared.scan.page(
                    segment,
                    ScanFilter::TtlWithoutShard,
                    cursor.clone(),
                    page_size,
                )
            },
        )
        .await
        .with_context(|| format!("scan of segment {} failed", segment.index))?;
        shared
            .counts
            .scanned
            .fetch_add(page.scanned, Ordering::Relaxed);
        shared.progress.inc(page.scanned);
        let mut writes = JoinSet::new();
        for item in page.items {
            shared.counts.candidates.fetch_add(1, Ordering::Relaxed);
            if !matches!(
                item.ttl,
                Some(aws_sdk_dynamodb::types::AttributeValue::N(_))
            ) {
                shared.counts.not_number.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            while writes.len() >= concurrency {
                writes.join_next().await;
            }
            let shared = Arc::clone(shared);
            writes.spawn(async move {
                if let Some(bucket) = &shared.bucket {
                    loop {
                        let wait = bucket.lock().await.take(SystemClock.now(), 1.0);
                        match wait {
                            Ok(()) => break,
                            Err(d) => tokio::time::sleep(d).await,
                        }
                    }
                }
                let shard = shards.shard_for_key(&item.key.partition_bytes());
                let result = with_backoff(
                    &shared.backoff,
                    || {
                        shared.counts.throttled.fetch_add(1, Ordering::Relaxed);
                    },
                    || shared.scan.add_shard(&item.key, shard),
                )
                .await;
                let counter = match result {
                    Ok(ShardWrite::Added) => &shared.counts.added,
                    Ok(ShardWrite::Changed) => &shared.counts.changed,
                    Err(e) => {
                        tracing::warn!(key = %item.key, error = %e, "shard write kept failing");
                        &shared.counts.errors
                    }
                };
                counter.fetch_add(1, Ordering::Relaxed);
            });
        }
        while writes.join_next().await.is_some() {}
        // Every write of the page is settled: only now may the checkpoint move past it.
        cursor = page.next;
        let mut checkpoint = shared.checkpoint.lock().await;
        let state = &mut checkpoint.segments[segment.index as usize];
        match &cursor {
            Some(c) => state.cursor = encode_cursor(c),
            None => {
                state.done = true;
                state.cursor.clear();
            }
        }
        checkpoint.save(&shared.path)?;
        if cursor.is_none() {
            return Ok(());
        }
    }
}
