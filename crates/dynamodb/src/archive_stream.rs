//! `precise-ttl archive`: the lossless path for expiry records. It tails the table's stream —
//! every shard, a parent before its children — keeps the REMOVE records that are expiries
//! ([`precise_ttl_core::removal::classify`]: native TTL's, or an ordinary delete of a due item),
//! writes them to the sink, and only once the sink has made them durable checkpoints each
//! shard's sequence number in a small DynamoDB table (created on first use). Killed at any
//! point, it starts again from the checkpoints: every expiry is archived at least once, with its
//! sequence number, so duplicates can be dropped by it.

use crate::connect::Dynamo;
use crate::error::AdapterError;
use crate::record::{DeletedBy, ExpiryRecord};
use crate::stream::stream_error;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::types::StreamViewType;
use aws_sdk_dynamodbstreams::types::{
    AttributeValue as StreamValue, OperationType, ShardIteratorType,
};
use precise_ttl_archive::Sink;
use precise_ttl_core::expiry::TtlValue;
use precise_ttl_core::removal::{Removal, RemovalKind, classify};
use precise_ttl_core::{ErrorClass, Expiry, Timestamp};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::time::Duration;

pub const DEFAULT_CHECKPOINT_TABLE: &str = "precise-ttl-archive-checkpoints";
const STREAM: &str = "stream";
const SHARD: &str = "shard";
const SEQUENCE: &str = "sequence";
const FINISHED: &str = "finished";

#[derive(Debug, Clone)]
pub struct ArchiveOptions {
    pub ttl_attribute: String,
    pub checkpoint_table: String,
    /// Pause between passes over the shards when nothing new came.
    pub poll_interval: Duration,
    /// How finely the stream dates its records: DynamoDB rounds `ApproximateCreationDateTime`
    /// down to the second (AWS documentation); DynamoDB Local down to the minute (measured).
    pub record_time_resolution: Duration,
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

#[derive(Debug, Clone, Default)]
struct Checkpoint {
    sequence: Option<String>,
    finished: bool,
}

fn fatal(message: String) -> AdapterError {
    AdapterError::Call {
        operation: "archive",
        class: ErrorClass::Fatal,
        message,
    }
}

/// The table's stream, checked, and where each of its shards was archived up to.
#[derive(Debug)]
pub struct OpenedStream {
    arn: String,
    checkpoints: HashMap<String, Checkpoint>,
}

/// Checks the table's stream carries old images, creates the checkpoint table if missing and
/// loads the checkpoints. Transient failures (a store unreachable or slow) are classified so a
/// caller can wait for the store; a table without a usable stream is fatal.
pub async fn open(
    dynamo: &Dynamo,
    table: &str,
    options: &ArchiveOptions,
) -> Result<OpenedStream, AdapterError> {
    let description = dynamo
        .query
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| AdapterError::from_sdk("DescribeTable", &dynamo.describe_endpoint(), e))?
        .table
        .ok_or_else(|| fatal(format!("table {table:?} has no description")))?;
    let spec = description
        .stream_specification()
        .filter(|s| s.stream_enabled());
    match spec.and_then(|s| s.stream_view_type()) {
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
    let arn = description
        .latest_stream_arn()
        .ok_or_else(|| fatal(format!("table {table:?} has no stream ARN")))?
        .to_string();
    crate::control::ensure_table(
        dynamo,
        &options.checkpoint_table,
        &[STREAM, SHARD],
        "the archive checkpoint table",
    )
    .await?;
    let checkpoints = load_checkpoints(dynamo, &options.checkpoint_table, &arn).await?;
    Ok(OpenedStream { arn, checkpoints })
}

/// Archives `table`'s expiries into `sink` until `stop` completes, from where `opened` says.
pub async fn archive(
    dynamo: &Dynamo,
    table: &str,
    opened: OpenedStream,
    sink: &Sink,
    options: &ArchiveOptions,
    stop: impl Future<Output = ()>,
) -> Result<ArchiveReport, AdapterError> {
    let OpenedStream {
        arn,
        mut checkpoints,
    } = opened;
    let mut iterators: HashMap<String, String> = HashMap::new();
    let mut report = ArchiveReport::default();
    tokio::pin!(stop);
    loop {
        let pass = pass(
            dynamo,
            table,
            &arn,
            sink,
            options,
            &mut checkpoints,
            &mut iterators,
            &mut report,
        );
        let progressed = tokio::select! {
            _ = &mut stop => return Ok(report),
            r = pass => match r {
                Ok(p) => p,
                Err(e) if e.class() == ErrorClass::Fatal => return Err(e),
                Err(e) => {
                    tracing::warn!(error = %e, "reading the stream failed; trying again");
                    false
                }
            },
        };
        if !progressed {
            tokio::select! {
                _ = &mut stop => return Ok(report),
                _ = tokio::time::sleep(options.poll_interval) => {}
            }
        }
    }
}

/// One pass over the shards; true if any records came.
#[allow(clippy::too_many_arguments)]
async fn pass(
    dynamo: &Dynamo,
    table: &str,
    arn: &str,
    sink: &Sink,
    options: &ArchiveOptions,
    checkpoints: &mut HashMap<String, Checkpoint>,
    iterators: &mut HashMap<String, String>,
    report: &mut ArchiveReport,
) -> Result<bool, AdapterError> {
    let shards = list_shards(dynamo, arn).await?;
    let ids: HashSet<&str> = shards.iter().map(|(id, _)| id.as_str()).collect();
    let mut progressed = false;
    for (id, parent) in &shards {
        let done = |s: &str| checkpoints.get(s).is_some_and(|c| c.finished);
        if done(id) {
            continue;
        }
        // Parent before child: a child's records come after its parent's.
        if let Some(p) = parent
            && ids.contains(p.as_str())
            && !done(p)
        {
            continue;
        }
        let mut iterator = match iterators.remove(id) {
            Some(it) => it,
            None => {
                let cp = checkpoints.get(id).cloned().unwrap_or_default();
                let mut req = dynamo
                    .streams
                    .get_shard_iterator()
                    .stream_arn(arn)
                    .shard_id(id);
                req = match &cp.sequence {
                    Some(seq) => req
                        .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                        .sequence_number(seq),
                    None => req.shard_iterator_type(ShardIteratorType::TrimHorizon),
                };
                match req.send().await {
                    Ok(out) => match out.shard_iterator {
                        Some(it) => it,
                        None => continue,
                    },
                    Err(e) => {
                        return Err(stream_error(
                            "GetShardIterator",
                            aws_sdk_dynamodb::error::DisplayErrorContext(e),
                        ));
                    }
                }
            }
        };
        loop {
            let out = match dynamo
                .streams
                .get_records()
                .shard_iterator(&iterator)
                .limit(1000)
                .send()
                .await
            {
                Ok(out) => out,
                // An expired or trimmed iterator is dropped: the next pass asks for a new one
                // from the checkpoint.
                Err(e) => {
                    tracing::warn!(shard = %id, error = %aws_sdk_dynamodb::error::DisplayErrorContext(e), "stream read failed; resuming from the checkpoint");
                    break;
                }
            };
            let mut lines = Vec::new();
            let mut last = None;
            for record in out.records() {
                last = record
                    .dynamodb()
                    .and_then(|d| d.sequence_number())
                    .map(str::to_string)
                    .or(last);
                let images = record
                    .dynamodb()
                    .map(|d| (d.old_image().is_some(), d.new_image().is_some()));
                let local_ttl = match record.event_name() {
                    Some(OperationType::Remove) => false,
                    // DynamoDB Local's own TTL deleter writes its deletes with an event name no
                    // SDK knows and no userIdentity (docs/expiry-records.md); nothing else writes
                    // an old image without a new one under an unknown name.
                    Some(OperationType::Insert | OperationType::Modify) | None => continue,
                    Some(_) if images == Some((true, false)) => true,
                    Some(_) => continue,
                };
                match expiry_record(record, table, options, local_ttl) {
                    Some(r) => {
                        report.records += 1;
                        if r.deleted_by == DeletedBy::NativeTtl {
                            report.native += 1;
                        }
                        lines.push(r.to_json().to_string());
                    }
                    None => report.other_removes += 1,
                }
            }
            progressed |= !out.records().is_empty();
            // Durable first, then the checkpoint: a crash between the two repeats records,
            // never loses them.
            sink.write(lines)
                .await
                .map_err(|e| fatal(format!("the archive sink failed: {e}")))?;
            let next = out.next_shard_iterator().map(str::to_string);
            let cp = checkpoints.entry(id.clone()).or_default();
            let moved = last.is_some();
            if moved {
                cp.sequence = last;
            }
            cp.finished = next.is_none();
            if moved || cp.finished {
                save_checkpoint(dynamo, &options.checkpoint_table, arn, id, cp).await?;
            }
            match next {
                None => break,
                Some(n) if out.records().is_empty() => {
                    iterators.insert(id.clone(), n);
                    break;
                }
                Some(n) => iterator = n,
            }
        }
    }
    Ok(progressed)
}

async fn list_shards(
    dynamo: &Dynamo,
    arn: &str,
) -> Result<Vec<(String, Option<String>)>, AdapterError> {
    let mut shards = Vec::new();
    let mut start: Option<String> = None;
    loop {
        let out = dynamo
            .streams
            .describe_stream()
            .stream_arn(arn)
            .set_exclusive_start_shard_id(start.clone())
            .send()
            .await
            .map_err(|e| {
                stream_error(
                    "DescribeStream",
                    aws_sdk_dynamodb::error::DisplayErrorContext(e),
                )
            })?;
        let Some(d) = out.stream_description else {
            return Ok(shards);
        };
        for s in d.shards() {
            if let Some(id) = s.shard_id() {
                shards.push((id.to_string(), s.parent_shard_id().map(str::to_string)));
            }
        }
        start = d.last_evaluated_shard_id().map(str::to_string);
        if start.is_none() {
            return Ok(shards);
        }
    }
}

/// The record of a REMOVE, if it is an expiry.
fn expiry_record(
    record: &aws_sdk_dynamodbstreams::types::Record,
    table: &str,
    options: &ArchiveOptions,
    local_ttl: bool,
) -> Option<ExpiryRecord> {
    let d = record.dynamodb()?;
    let created = d.approximate_creation_date_time()?;
    let created_ms = created.secs() * 1000 + i64::from(created.subsec_nanos()) / 1_000_000;
    let old_image: HashMap<String, AttributeValue> = d
        .old_image()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
        .unwrap_or_default();
    let principal = record
        .user_identity()
        .filter(|i| i.r#type() == Some("Service"))
        .and_then(|i| i.principal_id())
        .or(local_ttl.then_some(precise_ttl_core::removal::NATIVE_TTL_PRINCIPAL));
    let ttl = match old_image.get(&options.ttl_attribute) {
        None => TtlValue::Missing,
        Some(AttributeValue::N(n)) => TtlValue::Number(n),
        Some(_) => TtlValue::Other("not a Number"),
    };
    let kind = classify(&Removal {
        service_principal: principal,
        old_ttl: ttl.clone(),
        created_at: Timestamp::from_millis(created_ms),
        resolution: options.record_time_resolution,
    });
    let deleted_by = match kind {
        RemovalKind::NativeTtl => DeletedBy::NativeTtl,
        RemovalKind::Expired => DeletedBy::PreciseTtl,
        RemovalKind::Other => return None,
    };
    let lag_ms = match ttl {
        TtlValue::Number(n) => Expiry::parse_number(n)
            .ok()
            .map(|e| (created_ms - e.at().as_millis()).max(0)),
        _ => None,
    };
    Some(ExpiryRecord {
        table: table.to_string(),
        keys: d
            .keys()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
            .unwrap_or_default(),
        old_image,
        deleted_at_ms: created_ms,
        sequence_number: d.sequence_number().map(str::to_string),
        deleted_by,
        lag_ms,
    })
}

/// A stream attribute value as the table API's (the two SDKs have one type each).
fn convert(v: &StreamValue) -> AttributeValue {
    match v {
        StreamValue::S(s) => AttributeValue::S(s.clone()),
        StreamValue::N(n) => AttributeValue::N(n.clone()),
        StreamValue::B(b) => AttributeValue::B(b.clone()),
        StreamValue::Bool(b) => AttributeValue::Bool(*b),
        StreamValue::Null(n) => AttributeValue::Null(*n),
        StreamValue::Ss(v) => AttributeValue::Ss(v.clone()),
        StreamValue::Ns(v) => AttributeValue::Ns(v.clone()),
        StreamValue::Bs(v) => AttributeValue::Bs(v.clone()),
        StreamValue::L(v) => AttributeValue::L(v.iter().map(convert).collect()),
        StreamValue::M(m) => {
            AttributeValue::M(m.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
        }
        other => AttributeValue::S(format!("{other:?}")),
    }
}

async fn load_checkpoints(
    dynamo: &Dynamo,
    checkpoint_table: &str,
    arn: &str,
) -> Result<HashMap<String, Checkpoint>, AdapterError> {
    let mut out = HashMap::new();
    let mut start = None;
    loop {
        let page = dynamo
            .query
            .query()
            .table_name(checkpoint_table)
            .key_condition_expression("#s = :s")
            .expression_attribute_names("#s", STREAM)
            .expression_attribute_values(":s", AttributeValue::S(arn.to_string()))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| AdapterError::from_sdk("Query", &dynamo.describe_endpoint(), e))?;
        for item in page.items() {
            let Some(AttributeValue::S(shard)) = item.get(SHARD) else {
                continue;
            };
            out.insert(
                shard.clone(),
                Checkpoint {
                    sequence: match item.get(SEQUENCE) {
                        Some(AttributeValue::S(s)) => Some(s.clone()),
                        _ => None,
                    },
                    finished: matches!(item.get(FINISHED), Some(AttributeValue::Bool(true))),
                },
            );
        }
        start = page.last_evaluated_key;
        if start.is_none() {
            return Ok(out);
        }
    }
}

async fn save_checkpoint(
    dynamo: &Dynamo,
    checkpoint_table: &str,
    arn: &str,
    shard: &str,
    cp: &Checkpoint,
) -> Result<(), AdapterError> {
    let mut put = dynamo
        .write
        .put_item()
        .table_name(checkpoint_table)
        .item(STREAM, AttributeValue::S(arn.to_string()))
        .item(SHARD, AttributeValue::S(shard.to_string()))
        .item(FINISHED, AttributeValue::Bool(cp.finished));
    if let Some(seq) = &cp.sequence {
        put = put.item(SEQUENCE, AttributeValue::S(seq.clone()));
    }
    put.send()
        .await
        .map_err(|e| AdapterError::from_sdk("PutItem", &dynamo.describe_endpoint(), e))?;
    Ok(())
}
