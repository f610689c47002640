//! `precise-ttl archive`: the lossless path for expiry records. It tails the table's stream —
//! every shard, a parent before its children — keeps the REMOVE records that are expiries
//! ([`precise_ttl_core::removal::classify`]: native TTL's, or an ordinary delete of a due item),
//! writes them to the sink, and only once the sink has made them durable checkpoints each
//! shard's sequence number in a small DynamoDB table (created on first use). Killed at any
//! point, it starts again from the checkpoints: every expiry is archived at least once, with its
//! sequence number, so duplicates can be dropped by it.
//!
//! A REMOVE that is no expiry is left out, and that must never be silent: each is counted in
//! [`precise_ttl_engine::metrics::ARCHIVE_LEFT_OUT`] by its reason when its page is written, and
//! logged (the first, then at most one line a minute with the count since). How finely the
//! stream dates its records decides which deletes are expiries; [`ResolutionRule`] settles it
//! for each page before the page is classified, since the page is checkpointed past once
//! written.

pub(crate) mod convert;

use crate::stream_tail::{PageConsumer, StreamTail};
use aws_sdk_dynamodb::types::StreamViewType;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, OperationType, Record};
use convert::{expiry_record, millis};
use precise_ttl_archive::Sink;
use precise_ttl_core::removal::{LeftOut, ResolutionRule, ResolutionSetting, StreamSource};
use precise_ttl_core::{ErrorClass, Timestamp};
use precise_ttl_dynamodb::connect::Dynamo;
use precise_ttl_dynamodb::error::AdapterError;
use precise_ttl_dynamodb::record::DeletedBy;
use precise_ttl_engine::metrics as m;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

pub const DEFAULT_CHECKPOINT_TABLE: &str = "precise-ttl-archive-checkpoints";
/// At most one line a minute about REMOVEs left out (the first at once): what the counters say,
/// without a line per record.
const LEFT_OUT_LOG_EVERY: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    pub ttl_attribute: String,
    pub checkpoint_table: String,
    /// Pause between passes over the shards when nothing new came.
    pub poll_interval: Duration,
    /// How finely the stream dates its records: DynamoDB rounds `ApproximateCreationDateTime`
    /// down to the second (AWS documentation); DynamoDB Local down to the minute (measured).
    /// `Auto` tells them apart ([`ResolutionRule`]).
    pub record_time_resolution: ResolutionSetting,
}

/// What a run archived.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveReport {
    /// Expiry records written (ours and native).
    pub records: u64,
    /// Of them, native TTL's.
    pub native: u64,
    /// REMOVE records that were not expiries.
    pub other_removes: u64,
}

/// How a running archive is doing, for `/healthz`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArchiveHealth {
    /// No pass over the stream has completed yet (the store not reached, or still opening).
    Starting,
    /// The last pass over every shard completed within the allowed time.
    Reading,
    /// The last completed pass is this long ago.
    Stale(Duration),
}

#[derive(Debug, Default)]
struct ProgressState {
    report: ArchiveReport,
    last_pass: Option<Instant>,
}

/// What the archive has written so far and when it last read the whole stream, shared with
/// whoever reports on it (`/healthz`, the stop line). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ArchiveProgress(Arc<Mutex<ProgressState>>);

impl ArchiveProgress {
    pub fn report(&self) -> ArchiveReport {
        self.lock().report
    }

    pub fn health(&self, now: Instant, stale_after: Duration) -> ArchiveHealth {
        match self.lock().last_pass {
            None => ArchiveHealth::Starting,
            Some(at) if now.saturating_duration_since(at) > stale_after => {
                ArchiveHealth::Stale(now.saturating_duration_since(at))
            }
            Some(_) => ArchiveHealth::Reading,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ProgressState> {
        // A panic elsewhere while holding it leaves plain counters behind: still readable.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn passed(&self, at: Instant) {
        self.lock().last_pass = Some(at);
    }

    /// A page written: its counts go to the report and the counters together.
    fn written(&self, page: &PageCounts) {
        let mut state = self.lock();
        state.report.records += page.records;
        state.report.native += page.native;
        let left_out: u64 = page.left_out.values().sum();
        state.report.other_removes += left_out;
        drop(state);
        metrics::counter!(m::ARCHIVE_RECORDS).increment(page.records);
        metrics::counter!(m::ARCHIVE_NATIVE_RECORDS).increment(page.native);
        for (reason, n) in &page.left_out {
            metrics::counter!(m::ARCHIVE_LEFT_OUT, "reason" => reason.label()).increment(*n);
        }
    }
}

#[derive(Debug, Default)]
struct PageCounts {
    records: u64,
    native: u64,
    left_out: HashMap<LeftOut, u64>,
}

fn fatal(message: String) -> AdapterError {
    AdapterError::Call {
        operation: "archive",
        class: ErrorClass::Fatal,
        message,
    }
}

/// The table's stream, checked, where each of its shards was archived up to, and the
/// record-time resolution to read it with.
#[derive(Debug)]
pub struct OpenedStream {
    tail: StreamTail,
    resolution: ResolutionRule,
}

impl OpenedStream {
    pub fn arn(&self) -> &str {
        self.tail.arn()
    }

    /// The record-time resolution in force and why ([`ResolutionRule::describe`]).
    pub fn resolution(&self) -> &ResolutionRule {
        &self.resolution
    }
}

/// Checks the table's stream carries old images, creates the checkpoint table if missing and
/// loads the checkpoints. Transient failures (a store unreachable or slow) are classified so a
/// caller can wait for the store; a table without a usable stream is fatal.
pub async fn open(
    dynamo: &Dynamo,
    table: &str,
    options: &ArchiveOptions,
) -> Result<OpenedStream, AdapterError> {
    let (view, arn) = crate::stream::current_stream(dynamo, table).await?;
    match view {
        None => {
            return Err(fatal(format!(
                "table {table:?} has no stream: run `precise-ttl setup --table {table} --stream` first"
            )));
        }
        Some(StreamViewType::OldImage | StreamViewType::NewAndOldImages) => {}
        Some(view) => {
            return Err(fatal(format!(
                "table {table:?}'s stream carries no old images ({}), so it cannot give expired items' last images; see `precise-ttl setup --help` (--stream)",
                view.as_str()
            )));
        }
    }
    let arn = arn.ok_or_else(|| fatal(format!("table {table:?} has no stream ARN")))?;
    let tail = StreamTail::open(
        dynamo,
        &arn,
        &options.checkpoint_table,
        "the archive checkpoint table",
    )
    .await?;
    let resolution = ResolutionRule::new(
        options.record_time_resolution,
        StreamSource::of(&arn, dynamo.endpoint.as_deref()),
    );
    Ok(OpenedStream { tail, resolution })
}

/// Archives `table`'s expiries into `sink` until `stop` completes, from where `opened` says;
/// `progress` follows it. Returns what this run wrote.
pub async fn archive(
    table: &str,
    opened: OpenedStream,
    sink: &Sink,
    options: &ArchiveOptions,
    progress: &ArchiveProgress,
    stop: impl Future<Output = ()>,
) -> Result<ArchiveReport, AdapterError> {
    let OpenedStream {
        mut tail,
        resolution,
    } = opened;
    if let Some(warning) = resolution.mismatch() {
        tracing::warn!(stream = %tail.arn(), "{warning}");
    }
    metrics::gauge!(m::ARCHIVE_RESOLUTION).set(resolution.current().as_secs_f64());
    let mut archiver = Archiver {
        table,
        sink,
        options,
        progress,
        resolution,
        left_out_log: LeftOutLog::default(),
    };
    tail.run(&mut archiver, options.poll_interval, stop).await?;
    Ok(progress.report())
}

/// The first REMOVE left out is logged at once; later ones at most once a minute, with how many
/// were left out since the last line.
#[derive(Debug, Default)]
struct LeftOutLog {
    last: Option<Instant>,
    since_last: u64,
}

impl LeftOutLog {
    fn left_out(
        &mut self,
        record: &Record,
        why: LeftOut,
        ttl_attribute: &str,
        resolution: &ResolutionRule,
        used: Duration,
    ) {
        self.since_last += 1;
        if self.last.is_some_and(|t| t.elapsed() < LEFT_OUT_LOG_EVERY) {
            return;
        }
        let d = record.dynamodb();
        let created = d
            .and_then(|d| d.approximate_creation_date_time())
            .map(|t| t.secs());
        let ttl = match d
            .and_then(|d| d.old_image())
            .and_then(|i| i.get(ttl_attribute))
        {
            None => "none".to_string(),
            Some(StreamValue::N(n)) => n.clone(),
            Some(_) => "not a Number".to_string(),
        };
        // The one mistake this line exists for: a resolution finer than the stream's.
        let hint = (why == LeftOut::NotDue
            && used < Duration::from_secs(60)
            && created.is_some_and(|s| s.rem_euclid(60) == 0))
        .then_some(
            "the record's time is a whole minute: if this stream dates its records to the minute (DynamoDB Local does), give --record-time-resolution 1m (or auto)",
        );
        let sequence = d.and_then(|d| d.sequence_number()).unwrap_or("");
        let record_time = created.unwrap_or_default();
        let resolution = resolution.describe();
        let since = self.since_last;
        match hint {
            Some(hint) => tracing::warn!(
                reason = why.label(), why = %why, sequence, record_time, ttl, resolution,
                left_out_since_last_line = since, hint,
                "a stream REMOVE was left out of the archive: no expiry"
            ),
            None => tracing::warn!(
                reason = why.label(), why = %why, sequence, record_time, ttl, resolution,
                left_out_since_last_line = since,
                "a stream REMOVE was left out of the archive: no expiry"
            ),
        }
        self.last = Some(Instant::now());
        self.since_last = 0;
    }
}

/// The archive as a consumer of the stream's pages: each page's expiry records written to the
/// sink, its counts to the progress.
struct Archiver<'a> {
    table: &'a str,
    sink: &'a Sink,
    options: &'a ArchiveOptions,
    progress: &'a ArchiveProgress,
    resolution: ResolutionRule,
    left_out_log: LeftOutLog,
}

impl PageConsumer for Archiver<'_> {
    async fn consume(&mut self, records: &[Record]) -> Result<(), AdapterError> {
        let (lines, counts) = self.classify_page(records);
        self.sink
            .write(lines)
            .await
            .map_err(|e| fatal(format!("the archive sink failed: {e}")))?;
        self.progress.written(&counts);
        Ok(())
    }

    fn passed(&mut self, at: Instant) {
        self.progress.passed(at);
    }
}

impl Archiver<'_> {
    /// The page's expiry records as JSON lines, and its counts. The resolution is decided from
    /// every record time of the page before any record is classified.
    fn classify_page(&mut self, records: &[Record]) -> (Vec<String>, PageCounts) {
        let resolution = self.resolution.for_batch(
            records
                .iter()
                .filter_map(|r| r.dynamodb()?.approximate_creation_date_time())
                .map(|t| Timestamp::from_millis(millis(t))),
        );
        metrics::gauge!(m::ARCHIVE_RESOLUTION).set(resolution.as_secs_f64());
        let mut lines = Vec::new();
        let mut counts = PageCounts::default();
        for record in records {
            let images = record
                .dynamodb()
                .map(|d| (d.old_image().is_some(), d.new_image().is_some()));
            let local_ttl = match record.event_name() {
                Some(OperationType::Remove) => false,
                // DynamoDB Local's own TTL deleter writes its deletes with an event name no SDK
                // knows and no userIdentity (docs/expiry-records.md); nothing else writes an old
                // image without a new one under an unknown name.
                Some(OperationType::Insert | OperationType::Modify) | None => continue,
                Some(_) if images == Some((true, false)) => true,
                Some(_) => continue,
            };
            match expiry_record(
                record,
                self.table,
                &self.options.ttl_attribute,
                resolution,
                local_ttl,
            ) {
                Ok(r) => {
                    counts.records += 1;
                    if r.deleted_by == DeletedBy::NativeTtl {
                        counts.native += 1;
                    }
                    lines.push(r.to_json().to_string());
                }
                Err(why) => {
                    *counts.left_out.entry(why).or_default() += 1;
                    self.left_out_log.left_out(
                        record,
                        why,
                        &self.options.ttl_attribute,
                        &self.resolution,
                        resolution,
                    );
                }
            }
        }
        (lines, counts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_is_starting_until_a_clean_pass_then_stale_once_none_came_for_the_allowed_time() {
        let progress = ArchiveProgress::default();
        let start = Instant::now();
        let allowed = Duration::from_secs(30);
        assert_eq!(progress.health(start, allowed), ArchiveHealth::Starting);
        progress.passed(start);
        assert_eq!(
            progress.health(start + Duration::from_secs(30), allowed),
            ArchiveHealth::Reading
        );
        assert_eq!(
            progress.health(start + Duration::from_secs(31), allowed),
            ArchiveHealth::Stale(Duration::from_secs(31))
        );
    }

    #[test]
    fn a_written_page_counts_in_the_report() {
        let progress = ArchiveProgress::default();
        progress.written(&PageCounts {
            records: 5,
            native: 2,
            left_out: HashMap::from([(LeftOut::NotDue, 3), (LeftOut::NoTtl, 1)]),
        });
        progress.written(&PageCounts::default());
        assert_eq!(
            progress.report(),
            ArchiveReport {
                records: 5,
                native: 2,
                other_removes: 4
            }
        );
    }
}
