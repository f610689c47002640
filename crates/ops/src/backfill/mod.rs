//! Backfill: give every existing item with a Number TTL and no shard its shard attribute, with a
//! parallel Scan that can stop at any moment and resume where it stopped.
//!
//! Each shard write is conditional (the item still exists, its TTL is still a Number, it still
//! has no shard), so a writer always wins and a deleted item is never brought back. A segment's
//! checkpoint moves past a page only when every write of that page has been made or found the
//! item changed: a write that keeps failing stops its segment at that page, and the next run
//! reads the page again.

mod checkpoint_file;

pub use checkpoint_file::{BackfillTarget, CheckpointFile, Opened, SegmentPosition};

use crate::scan::{ScanCursor, ScanFilter, ScanPage, ScannedItem, Segment, ShardWrite, TableScan};
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{Backoff, TokenBucket};
use precise_ttl_engine::retry::with_backoff;
use precise_ttl_engine::{Clock, StoreError};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use thiserror::Error;
use tokio::sync::Mutex;
use tokio::task::JoinSet;

/// The two calls a backfill makes: a page of items to index, and one item's index write — its
/// shard attribute, written under a condition ([`TableScan`], the shard index), or its entry in
/// the expiry queue ([`crate::queue::backfill::QueueBackfill`]). Tests inject faults through
/// their own.
pub trait BackfillTable: Send + Sync + 'static {
    fn unsharded_page(
        &self,
        segment: Segment,
        cursor: Option<ScanCursor>,
        limit: u32,
    ) -> impl Future<Output = Result<ScanPage, StoreError>> + Send;

    /// Indexes one item of a page (its TTL a Number).
    fn write(
        &self,
        item: &ScannedItem,
    ) -> impl Future<Output = Result<ShardWrite, StoreError>> + Send;
}

impl BackfillTable for TableScan {
    async fn unsharded_page(
        &self,
        segment: Segment,
        cursor: Option<ScanCursor>,
        limit: u32,
    ) -> Result<ScanPage, StoreError> {
        self.page(segment, ScanFilter::TtlWithoutShard, cursor, limit)
            .await
    }

    async fn write(&self, item: &ScannedItem) -> Result<ShardWrite, StoreError> {
        let shard = self
            .layout()
            .shards
            .shard_for_key(&item.key.partition_bytes());
        TableScan::add_shard(self, &item.key, shard).await
    }
}

#[derive(Debug, Clone)]
pub struct BackfillOptions {
    pub page_size: u32,
    /// Shard writes in flight per segment.
    pub concurrency: usize,
    pub max_writes_per_second: Option<f64>,
    pub backoff: Backoff,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackfillReport {
    /// Every segment reached its end; the checkpoint file is removed.
    pub complete: bool,
    pub scanned: u64,
    pub without_shard: u64,
    pub shard_added: u64,
    pub changed_meanwhile: u64,
    pub ttl_not_a_number: u64,
    /// Writes that kept failing; their pages are read again by the next run.
    pub errors: u64,
    pub throttled: u64,
}

/// Told about progress as it happens; the binary draws a bar.
pub trait BackfillProgress: Send + Sync {
    fn scanned(&self, _items: u64) {}
}

#[derive(Debug, Error)]
pub enum BackfillError {
    #[error("cannot use the checkpoint {path}: {source}")]
    Checkpoint {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} is not a backfill checkpoint")]
    NotACheckpoint(PathBuf),
    #[error("the checkpoint {0} is damaged")]
    Damaged(PathBuf),
    #[error(
        "the checkpoint {path} was written for table {:?}, TTL attribute {}, shard attribute {}, {} shards and {} segments",
        theirs.table, theirs.ttl_attribute, theirs.shard_attribute, theirs.shards, theirs.segments
    )]
    OtherTarget {
        path: PathBuf,
        theirs: Box<BackfillTarget>,
    },
    #[error("scan of segment {segment} failed: {source}")]
    Scan {
        segment: u32,
        #[source]
        source: StoreError,
    },
}

#[derive(Debug, Default)]
struct Counts {
    scanned: AtomicU64,
    without_shard: AtomicU64,
    added: AtomicU64,
    changed: AtomicU64,
    not_number: AtomicU64,
    errors: AtomicU64,
    throttled: AtomicU64,
}

struct Shared<T, C> {
    table: T,
    clock: C,
    options: BackfillOptions,
    segments: u32,
    counts: Counts,
    checkpoint: Mutex<CheckpointFile>,
    bucket: Option<Mutex<TokenBucket>>,
    stop: AtomicBool,
    progress: Arc<dyn BackfillProgress>,
}

/// Runs the segments the checkpoint has not finished until they finish, a segment fails, or
/// `stop` completes (a signal); every settled page is in the checkpoint either way.
pub async fn run<T: BackfillTable, C: Clock>(
    table: T,
    clock: C,
    checkpoint: CheckpointFile,
    options: BackfillOptions,
    progress: Arc<dyn BackfillProgress>,
    stop: impl Future<Output = ()> + Send,
) -> Result<BackfillReport, BackfillError> {
    let positions = checkpoint.positions();
    let shared = Arc::new(Shared {
        table,
        clock,
        segments: positions.len() as u32,
        bucket: options
            .max_writes_per_second
            .map(|r| Mutex::new(TokenBucket::new(r, r.max(1.0)))),
        options,
        counts: Counts::default(),
        checkpoint: Mutex::new(checkpoint),
        stop: AtomicBool::new(false),
        progress,
    });
    let mut segments = JoinSet::new();
    for (index, position) in positions.into_iter().enumerate() {
        let SegmentPosition::At(cursor) = position else {
            continue;
        };
        let shared = Arc::clone(&shared);
        segments.spawn(async move { run_segment(&shared, index as u32, cursor).await });
    }
    let mut fatal = None;
    tokio::pin!(stop);
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = &mut stop, if !stopping => {
                stopping = true;
                shared.stop.store(true, Ordering::SeqCst);
            }
            joined = segments.join_next() => match joined {
                None => break,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => {
                    shared.stop.store(true, Ordering::SeqCst);
                    fatal.get_or_insert(e);
                }
                Some(Err(e)) => std::panic::resume_unwind(e.into_panic()),
            },
        }
    }
    if let Some(e) = fatal {
        return Err(e);
    }
    let shared = Arc::into_inner(shared).expect("every segment task has ended");
    let checkpoint = shared.checkpoint.into_inner();
    let complete = checkpoint.complete();
    if complete {
        checkpoint.remove()?;
    }
    let c = &shared.counts;
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Ok(BackfillReport {
        complete,
        scanned: n(&c.scanned),
        without_shard: n(&c.without_shard),
        shard_added: n(&c.added),
        changed_meanwhile: n(&c.changed),
        ttl_not_a_number: n(&c.not_number),
        errors: n(&c.errors),
        throttled: n(&c.throttled),
    })
}

async fn run_segment<T: BackfillTable, C: Clock>(
    shared: &Arc<Shared<T, C>>,
    index: u32,
    mut cursor: Option<ScanCursor>,
) -> Result<(), BackfillError> {
    let segment = Segment {
        index,
        total: shared.segments,
    };
    let options = &shared.options;
    loop {
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let page = with_backoff(
            &options.backoff,
            || {
                shared.counts.throttled.fetch_add(1, Ordering::Relaxed);
            },
            || {
                shared
                    .table
                    .unsharded_page(segment, cursor.clone(), options.page_size)
            },
        )
        .await
        .map_err(|source| BackfillError::Scan {
            segment: index,
            source,
        })?;
        shared
            .counts
            .scanned
            .fetch_add(page.scanned, Ordering::Relaxed);
        shared.progress.scanned(page.scanned);
        let failed = Arc::new(AtomicBool::new(false));
        let mut writes = JoinSet::new();
        for item in page.items {
            shared.counts.without_shard.fetch_add(1, Ordering::Relaxed);
            if !matches!(item.ttl, Some(AttributeValue::N(_))) {
                shared.counts.not_number.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            while writes.len() >= options.concurrency.max(1) {
                writes.join_next().await;
            }
            let shared = Arc::clone(shared);
            let failed = Arc::clone(&failed);
            writes.spawn(async move {
                shared.take_token().await;
                let result = with_backoff(
                    &shared.options.backoff,
                    || {
                        shared.counts.throttled.fetch_add(1, Ordering::Relaxed);
                    },
                    || shared.table.write(&item),
                )
                .await;
                let counter = match result {
                    Ok(ShardWrite::Added) => &shared.counts.added,
                    Ok(ShardWrite::Changed) => &shared.counts.changed,
                    Err(e) => {
                        tracing::warn!(key = %item.key, error = %e, "index write kept failing");
                        failed.store(true, Ordering::SeqCst);
                        &shared.counts.errors
                    }
                };
                counter.fetch_add(1, Ordering::Relaxed);
            });
        }
        while let Some(joined) = writes.join_next().await {
            if let Err(e) = joined {
                std::panic::resume_unwind(e.into_panic());
            }
        }
        if failed.load(Ordering::SeqCst) {
            // The page keeps its failed items: the checkpoint stays before it, and this segment
            // stops so that no later page can move the position past it.
            return Ok(());
        }
        cursor = page.next;
        shared
            .checkpoint
            .lock()
            .await
            .advance(index as usize, cursor.as_ref())?;
        if cursor.is_none() {
            return Ok(());
        }
    }
}

impl<T, C: Clock> Shared<T, C> {
    async fn take_token(&self) {
        let Some(bucket) = &self.bucket else {
            return;
        };
        loop {
            let wait = bucket.lock().await.take(self.clock.now(), 1.0);
            match wait {
                Ok(()) => return,
                Err(d) => tokio::time::sleep(d).await,
            }
        }
    }
}

#[cfg(test)]
mod tests;
