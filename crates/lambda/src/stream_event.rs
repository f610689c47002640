//! The function as a DynamoDB Streams consumer (an event source mapping on the table's stream):
//! for each batch it keeps the REMOVE records that are expiries — native TTL's, or an ordinary
//! delete of an item whose TTL was due when the record was made, by native TTL's rules
//! ([`precise_ttl_core::removal::classify`]) — and returns them as expiry records, each the
//! stream record itself with `userIdentity` saying who expired it (`precise-ttl` when the stream
//! had none), the table name and the lag. This replaces AWS's documented `userIdentity` filter,
//! which drops every item a sweeper expires. The event source mapping does the checkpointing.
//!
//! The record-time resolution is decided for each batch before it is classified, from the
//! batch's stream and record times ([`record_times`], [`stream_arn`];
//! [`precise_ttl_core::removal::ResolutionRule`]), as `precise-ttl archive` does per page: the
//! mapping moves past a batch once it is answered.

use precise_ttl_core::Timestamp;
use precise_ttl_core::expiry::{Expiry, TtlValue};
use precise_ttl_core::removal::{LeftOut, Removal, RemovalKind, judge};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::time::Duration;

/// What one batch held.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct StreamBatch {
    /// Expiry records, one JSON line each.
    #[serde(skip)]
    pub lines: Vec<String>,
    pub records: u64,
    pub native: u64,
    pub other_removes: u64,
    /// [`Self::other_removes`] by reason (the labels of [`LeftOut`]).
    pub left_out: BTreeMap<&'static str, u64>,
    pub not_removes: u64,
    /// The record-time resolution the batch was classified with, in seconds.
    pub resolution_seconds: f64,
}

/// The ARN of the stream the batch came from (one mapping, one stream).
pub fn stream_arn(event: &Value) -> Option<&str> {
    event["Records"]
        .as_array()?
        .iter()
        .find_map(|r| r["eventSourceARN"].as_str())
}

/// Every record time of the batch, REMOVE or not.
pub fn record_times(event: &Value) -> Vec<Timestamp> {
    event["Records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["dynamodb"]["ApproximateCreationDateTime"].as_f64())
        .map(|s| Timestamp::from_millis((s * 1000.0).round() as i64))
        .collect()
}

/// True for a DynamoDB Streams event (`Records` from `aws:dynamodb`).
pub fn is_stream_event(event: &Value) -> bool {
    event["Records"]
        .as_array()
        .is_some_and(|r| r.iter().any(|r| r["eventSource"] == "aws:dynamodb"))
}

/// The table's name from a stream ARN (`arn:aws:dynamodb:…:table/NAME/stream/…`).
fn table_of(arn: &str) -> Option<&str> {
    arn.split("table/").nth(1)?.split('/').next()
}

/// Classifies every record of `event`; `resolution` is how finely the stream dates its records.
pub fn expiries(event: &Value, ttl_attribute: &str, resolution: Duration) -> StreamBatch {
    let mut batch = StreamBatch {
        resolution_seconds: resolution.as_secs_f64(),
        ..StreamBatch::default()
    };
    for record in event["Records"].as_array().into_iter().flatten() {
        let d = &record["dynamodb"];
        let is_remove = record["eventName"] == "REMOVE";
        if !is_remove {
            batch.not_removes += 1;
            continue;
        }
        let principal = (record["userIdentity"]["type"] == "Service")
            .then(|| record["userIdentity"]["principalId"].as_str())
            .flatten();
        let ttl_json = &d["OldImage"][ttl_attribute];
        let ttl = match (
            ttl_json.get("N").and_then(Value::as_str),
            ttl_json.is_null(),
        ) {
            (Some(n), _) => TtlValue::Number(n),
            (None, true) => TtlValue::Missing,
            (None, false) => TtlValue::Other("not a Number"),
        };
        let judged = match d["ApproximateCreationDateTime"].as_f64() {
            None => Err(LeftOut::NoRecordTime),
            Some(created) => {
                let created_ms = (created * 1000.0).round() as i64;
                judge(&Removal {
                    service_principal: principal,
                    old_ttl: ttl.clone(),
                    created_at: Timestamp::from_millis(created_ms),
                    resolution,
                })
                .map(|kind| (kind, created_ms))
            }
        };
        let (kind, created_ms) = match judged {
            Ok(judged) => judged,
            Err(why) => {
                batch.other_removes += 1;
                *batch.left_out.entry(why.label()).or_default() += 1;
                continue;
            }
        };
        let mut out = record.clone();
        if kind == RemovalKind::NativeTtl {
            batch.native += 1;
        } else if principal.is_none() {
            out["userIdentity"] = json!({"type": "Service", "principalId": "precise-ttl"});
        }
        if let Some(table) = record["eventSourceARN"].as_str().and_then(table_of) {
            out["tableName"] = json!(table);
        }
        if let TtlValue::Number(n) = ttl
            && let Ok(e) = Expiry::parse_number(n)
        {
            out["lagMs"] = json!((created_ms - e.at().as_millis()).max(0));
        }
        batch.records += 1;
        batch.lines.push(out.to_string());
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remove(principal: Option<&str>, ttl: &str, created_s: f64) -> Value {
        let mut r = json!({
            "eventID": "1", "eventName": "REMOVE", "eventVersion": "1.1",
            "eventSource": "aws:dynamodb", "awsRegion": "eu-west-1",
            "dynamodb": {
                "ApproximateCreationDateTime": created_s,
                "Keys": {"pk": {"S": "a"}},
                "OldImage": {"pk": {"S": "a"}, "ttl": {"N": ttl}},
                "SequenceNumber": "111", "SizeBytes": 26, "StreamViewType": "NEW_AND_OLD_IMAGES"
            },
            "eventSourceARN": "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions/stream/2026-11-25T00:00:00.000"
        });
        if let Some(p) = principal {
            r["userIdentity"] = json!({"type": "Service", "principalId": p});
        }
        r
    }

    #[test]
    fn a_batch_keeps_native_and_swept_expiries_and_drops_the_rest() {
        let event = json!({"Records": [
            remove(Some("dynamodb.amazonaws.com"), "1800000000", 1_800_000_100.0),
            remove(None, "1800000000.5", 1_800_000_000.0),
            remove(None, "1800000500", 1_800_000_000.0),
            {"eventName": "INSERT", "eventSource": "aws:dynamodb", "dynamodb": {}},
        ]});
        assert!(is_stream_event(&event));
        let b = expiries(&event, "ttl", Duration::from_secs(1));
        assert_eq!(
            (b.records, b.native, b.other_removes, b.not_removes),
            (2, 1, 1, 1)
        );
        assert_eq!(b.left_out, BTreeMap::from([("not_due", 1)]));
        assert_eq!(b.resolution_seconds, 1.0);
        let ours: Value = serde_json::from_str(&b.lines[1]).unwrap();
        assert_eq!(ours["userIdentity"]["principalId"], "precise-ttl");
        assert_eq!(ours["tableName"], "sessions");
        assert_eq!(ours["dynamodb"]["SequenceNumber"], "111");
        let native: Value = serde_json::from_str(&b.lines[0]).unwrap();
        assert_eq!(
            native["userIdentity"]["principalId"],
            "dynamodb.amazonaws.com"
        );
        assert_eq!(native["lagMs"], 100_000);
    }

    #[test]
    fn a_batch_tells_its_stream_and_record_times() {
        let mut no_time = remove(None, "1800000000", 0.0);
        no_time["dynamodb"]
            .as_object_mut()
            .unwrap()
            .remove("ApproximateCreationDateTime");
        let event = json!({"Records": [remove(None, "1800000000", 1_800_000_060.0), no_time]});
        assert_eq!(
            stream_arn(&event),
            Some(
                "arn:aws:dynamodb:eu-west-1:123456789012:table/sessions/stream/2026-11-25T00:00:00.000"
            )
        );
        assert_eq!(record_times(&event), [Timestamp::from_secs(1_800_000_060)]);
        let b = expiries(&event, "ttl", Duration::from_secs(60));
        assert_eq!(b.records, 1);
        assert_eq!(b.left_out, BTreeMap::from([("no_record_time", 1)]));
        assert_eq!(b.resolution_seconds, 60.0);
    }

    #[test]
    fn schedule_events_are_not_stream_events() {
        assert!(!is_stream_event(&json!({})));
        assert!(!is_stream_event(
            &json!({"detail-type": "Scheduled Event", "detail": "{}"})
        ));
    }
}
