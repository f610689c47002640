//! What the crash test compares: the expiries that the table's stream shows (read whole, each
//! REMOVE classified as the archive must), and the records an archive folder holds.

use super::RECORD_TIME_RESOLUTION;
use aws_sdk_dynamodbstreams::types::{
    AttributeValue as StreamValue, OperationType, ShardIteratorType,
};
use precise_ttl_core::removal::{NATIVE_TTL_PRINCIPAL, Removal, RemovalKind, classify};
use precise_ttl_core::{Timestamp, TtlValue};
use precise_ttl_dynamodb::Dynamo;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What the table's stream holds, read whole from its trim horizon.
#[derive(Debug, Default)]
pub(super) struct StreamView {
    pub(super) records: u64,
    pub(super) inserts: u64,
    /// Keys of the REMOVE records that are expiries, and whose: native TTL's or a sweeper's.
    pub(super) expiries: BTreeMap<String, RemovalKind>,
    /// Keys of the REMOVE records that are not expiries.
    pub(super) other_removes: BTreeSet<String>,
    /// Keys removed more than once (none expected: every key is written once).
    pub(super) removed_twice: BTreeSet<String>,
}

pub(super) async fn read_stream(dynamo: &Dynamo, table: &str) -> StreamView {
    let arn = dynamo
        .query
        .describe_table()
        .table_name(table)
        .send()
        .await
        .unwrap()
        .table
        .and_then(|t| t.latest_stream_arn)
        .expect("the table has a stream");
    let mut shards = Vec::new();
    let mut start: Option<String> = None;
    loop {
        let d = dynamo
            .streams
            .describe_stream()
            .stream_arn(&arn)
            .set_exclusive_start_shard_id(start)
            .send()
            .await
            .unwrap()
            .stream_description
            .expect("a stream description");
        shards.extend(
            d.shards()
                .iter()
                .filter_map(|s| s.shard_id().map(str::to_string)),
        );
        start = d.last_evaluated_shard_id().map(str::to_string);
        if start.is_none() {
            break;
        }
    }
    let mut view = StreamView::default();
    for shard in shards {
        let mut iterator = dynamo
            .streams
            .get_shard_iterator()
            .stream_arn(&arn)
            .shard_id(&shard)
            .shard_iterator_type(ShardIteratorType::TrimHorizon)
            .send()
            .await
            .unwrap()
            .shard_iterator;
        // DynamoDB Local has every record at once: an empty page is the end of the shard.
        while let Some(it) = iterator {
            let out = dynamo
                .streams
                .get_records()
                .shard_iterator(it)
                .limit(1000)
                .send()
                .await
                .unwrap();
            for record in out.records() {
                view.take(record);
            }
            iterator = match out.records().is_empty() {
                true => None,
                false => out.next_shard_iterator,
            };
        }
    }
    view
}

impl StreamView {
    /// The keys of the expiries that `kind` carried out (ours, or native TTL's).
    pub(super) fn expiries_by(&self, kind: RemovalKind) -> BTreeSet<String> {
        self.expiries
            .iter()
            .filter(|(_, k)| **k == kind)
            .map(|(key, _)| key.clone())
            .collect()
    }

    fn take(&mut self, record: &aws_sdk_dynamodbstreams::types::Record) {
        self.records += 1;
        let d = record.dynamodb().expect("a stream record's change");
        let images = (d.old_image().is_some(), d.new_image().is_some());
        // DynamoDB Local's own TTL deletes carry an event name no SDK knows, an old image and no
        // new one, and no userIdentity (shared/dynamodb-local.md).
        let native = match record.event_name() {
            Some(OperationType::Remove) => false,
            Some(OperationType::Insert) => {
                self.inserts += 1;
                return;
            }
            Some(OperationType::Modify) | None => return,
            Some(other) => {
                assert_eq!(images, (true, false), "unexpected event {other:?}");
                true
            }
        };
        let key = match d.keys().and_then(|k| k.get("pk")) {
            Some(StreamValue::S(k)) => k.clone(),
            other => panic!("a key that is no String: {other:?}"),
        };
        let principal = record
            .user_identity()
            .filter(|i| i.r#type() == Some("Service"))
            .and_then(|i| i.principal_id())
            .or(native.then_some(NATIVE_TTL_PRINCIPAL));
        let ttl = match d.old_image().and_then(|i| i.get("ttl")) {
            None => TtlValue::Missing,
            Some(StreamValue::N(n)) => TtlValue::Number(n),
            Some(_) => TtlValue::Other("not a Number"),
        };
        let made = d
            .approximate_creation_date_time()
            .expect("a record's creation time");
        let made_ms = made.secs() * 1000 + i64::from(made.subsec_nanos() / 1_000_000);
        let kind = classify(&Removal {
            service_principal: principal,
            old_ttl: ttl,
            created_at: Timestamp::from_millis(made_ms),
            resolution: RECORD_TIME_RESOLUTION,
        });
        if self.expiries.contains_key(&key) || self.other_removes.contains(&key) {
            self.removed_twice.insert(key.clone());
        }
        match kind {
            RemovalKind::Other => self.other_removes.insert(key),
            kind => self.expiries.insert(key, kind).is_none(),
        };
    }
}

/// The records of an archive folder (JSON Lines). A record cut short by a kill can only be the
/// last line of its file: those are counted apart, anything else unreadable fails the test.
#[derive(Debug, Default)]
pub(super) struct Archived {
    pub(super) records: u64,
    /// Each key's principals, one per record.
    pub(super) keys: BTreeMap<String, Vec<String>>,
    pub(super) torn: u64,
}

impl Archived {
    pub(super) fn read(dir: &Path) -> Archived {
        let mut out = Archived::default();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return out;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            assert!(path.to_string_lossy().ends_with(".jsonl"), "{path:?}");
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            for (i, line) in lines.iter().enumerate() {
                let Ok(r) = serde_json::from_str::<serde_json::Value>(line) else {
                    let last = i + 1 == lines.len() && !line.ends_with('\n');
                    assert!(last, "an unreadable record inside {path:?}: {line}");
                    out.torn += 1;
                    continue;
                };
                let key = r["dynamodb"]["Keys"]["pk"]["S"].as_str().expect("a key");
                let principal = r["userIdentity"]["principalId"].as_str().unwrap_or("");
                out.records += 1;
                out.keys
                    .entry(key.to_string())
                    .or_default()
                    .push(principal.to_string());
            }
        }
        out
    }

    pub(super) fn key_set(&self) -> BTreeSet<String> {
        self.keys.keys().cloned().collect()
    }

    pub(super) fn duplicates(&self) -> u64 {
        self.records - self.keys.len() as u64
    }
}

pub(super) fn some<T: std::fmt::Debug>(set: &BTreeSet<T>) -> Vec<&T> {
    set.iter().take(5).collect()
}
