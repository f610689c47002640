//! The function as the expiry queue's indexer (the stream-queue layout, issue 29): an event
//! source mapping on the application table's stream hands it batches of records, and for each
//! INSERT and MODIFY whose new image has a TTL that can come due and differs from the old
//! image's it writes the queue entry, by the rule `precise-ttl run`'s indexer applies
//! ([`precise_ttl_stream::queue::indexer::entries_for`]). REMOVEs write nothing: the entry of
//! an item deleted early is removed when the sweeper reads it and finds the item gone.
//!
//! The invocation succeeds only once every entry of the batch is durable (BatchWriteItem until
//! nothing is left unprocessed); on any failure it fails whole, and the mapping retries the
//! batch: at least once, which is enough, as the same record always writes the same entry. No
//! partial batch response: a retry of the whole batch rewrites entries that exist, harmlessly.
//! The mapping keeps the position in the stream: no checkpoint table, no stream leases.
//!
//! This module reads a batch (its changes, its counts, the errors); the environment writes the
//! entries (`invoke/index.rs`). Which stream batches are indexed rather than archived is the
//! layout's choice ([`crate::config::StreamRole`]).

use aws_sdk_dynamodb::primitives::Blob;
use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_stream::queue::indexer::TtlChange;
use serde_json::Value;
use std::collections::HashMap;
use thiserror::Error;

/// What one batch held and wrote (the invocation's answer).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IndexBatch {
    pub records: u64,
    /// INSERT and MODIFY records.
    pub changes: u64,
    pub removes: u64,
    /// Queue entries written (each once, however many records of the batch call for it).
    pub entries: u64,
    /// Changes that left the TTL as it was.
    pub unchanged: u64,
    /// Changes without a TTL that can come due.
    pub no_ttl: u64,
}

#[derive(Debug, Error)]
pub enum IndexError {
    #[error(
        "stream record {id} has no new image (the stream's view is {view}): the expiry queue needs NEW_AND_OLD_IMAGES (or NEW_IMAGE) on the table's stream"
    )]
    NoNewImage { id: String, view: String },
    #[error("stream record {id}: {why}")]
    BadRecord { id: String, why: String },
    #[error(
        "the batch comes from the stream of table {stream_table:?}, but the function indexes {table:?} (PRECISE_TTL_TABLE): map the function to its own table's stream"
    )]
    OtherTable { stream_table: String, table: String },
    #[error(
        "the function's layout is sharded: stream batches are indexed with PRECISE_TTL_INDEX_LAYOUT=stream-queue only"
    )]
    NotQueue,
}

/// The changes of `event`'s INSERT and MODIFY records, their TTL read from `ttl_attribute`,
/// and the batch's counts so far (records, changes, removes).
pub fn changes(
    event: &Value,
    ttl_attribute: &str,
) -> Result<(Vec<TtlChange>, IndexBatch), IndexError> {
    let mut batch = IndexBatch::default();
    let mut changes = Vec::new();
    for record in event["Records"].as_array().into_iter().flatten() {
        batch.records += 1;
        match record["eventName"].as_str() {
            Some("INSERT" | "MODIFY") => batch.changes += 1,
            Some("REMOVE") => {
                batch.removes += 1;
                continue;
            }
            _ => continue,
        }
        let id = record["eventID"].as_str().unwrap_or("?").to_string();
        let d = &record["dynamodb"];
        let Some(new_image) = d["NewImage"].as_object() else {
            return Err(IndexError::NoNewImage {
                id,
                view: d["StreamViewType"]
                    .as_str()
                    .unwrap_or("unknown")
                    .to_string(),
            });
        };
        let bad = |why: String| IndexError::BadRecord {
            id: id.clone(),
            why,
        };
        let keys = d["Keys"]
            .as_object()
            .ok_or_else(|| bad("no Keys".into()))?
            .iter()
            .map(|(name, v)| {
                Ok((
                    name.clone(),
                    attribute(v).map_err(|e| bad(format!("key {name:?}: {e}")))?,
                ))
            })
            .collect::<Result<HashMap<_, _>, IndexError>>()?;
        let ttl = |image: Option<&serde_json::Map<String, Value>>| {
            image
                .and_then(|i| i.get(ttl_attribute))
                .map(|v| attribute(v).map_err(|e| bad(format!("{ttl_attribute:?}: {e}"))))
                .transpose()
        };
        changes.push(TtlChange {
            keys,
            old_ttl: ttl(d["OldImage"].as_object())?,
            new_ttl: ttl(Some(new_image))?,
        });
    }
    Ok((changes, batch))
}

/// One attribute value from DynamoDB JSON as Lambda delivers stream records (`{"S": "…"}`,
/// `{"N": "…"}`, `{"B": "<base64>"}`, sets, `L`, `M`, `BOOL`, `NULL`).
pub fn attribute(v: &Value) -> Result<AttributeValue, String> {
    let object = v.as_object().filter(|o| o.len() == 1);
    let Some((kind, inner)) = object.and_then(|o| o.iter().next()) else {
        return Err(format!("not an attribute value: {v}"));
    };
    let text = |v: &Value| {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("{kind} holds {v}, not a string"))
    };
    let blob = |v: &Value| -> Result<Blob, String> {
        aws_smithy_types::base64::decode(text(v)?)
            .map(Blob::new)
            .map_err(|e| format!("{kind} is not base64: {e}"))
    };
    let list = |v: &Value| -> Result<Vec<Value>, String> {
        v.as_array()
            .cloned()
            .ok_or_else(|| format!("{kind} holds {v}, not a list"))
    };
    Ok(match kind.as_str() {
        "S" => AttributeValue::S(text(inner)?),
        "N" => AttributeValue::N(text(inner)?),
        "B" => AttributeValue::B(blob(inner)?),
        "BOOL" => AttributeValue::Bool(inner.as_bool().ok_or("BOOL holds no boolean")?),
        "NULL" => AttributeValue::Null(true),
        "SS" => AttributeValue::Ss(list(inner)?.iter().map(text).collect::<Result<_, _>>()?),
        "NS" => AttributeValue::Ns(list(inner)?.iter().map(text).collect::<Result<_, _>>()?),
        "BS" => AttributeValue::Bs(list(inner)?.iter().map(blob).collect::<Result<_, _>>()?),
        "L" => AttributeValue::L(
            list(inner)?
                .iter()
                .map(attribute)
                .collect::<Result<_, _>>()?,
        ),
        "M" => AttributeValue::M(
            inner
                .as_object()
                .ok_or("M holds no map")?
                .iter()
                .map(|(k, v)| Ok((k.clone(), attribute(v)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => return Err(format!("unknown attribute type {other:?}")),
    })
}

/// The table's name from a stream ARN (`arn:aws:dynamodb:…:table/NAME/stream/…`).
pub(crate) fn table_of(arn: &str) -> Option<&str> {
    arn.split(":table/").nth(1)?.split('/').next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_core::{ShardCount, Timestamp};
    use precise_ttl_stream::queue::indexer::{IndexerReport, entries_for};
    use serde_json::json;

    /// A stream record of table `sessions` (keys `pk` S, `sk` N).
    fn record(name: &str, pk: &str, old_ttl: Option<i64>, new_ttl: Option<i64>) -> Value {
        crate::stream_record::stream_record("sessions", name, pk, Some(1), old_ttl, new_ttl)
    }

    #[test]
    fn inserts_and_new_ttls_write_entries_touches_and_removes_do_not() {
        let event = json!({"Records": [
            record("INSERT", "a", None, Some(1_800_000_060)),
            record("MODIFY", "a", Some(1_800_000_060), Some(1_800_000_120)),
            record("MODIFY", "b", Some(1_800_000_060), Some(1_800_000_060)),
            record("MODIFY", "c", Some(1_800_000_060), None),
            record("REMOVE", "d", Some(1_800_000_060), None),
        ]});
        let (changes, batch) = changes(&event, "ttl").unwrap();
        assert_eq!((batch.records, batch.changes, batch.removes), (5, 4, 1));
        assert_eq!(changes.len(), 4);
        assert_eq!(
            changes[1].old_ttl,
            Some(AttributeValue::N("1800000060".into()))
        );
        assert_eq!(changes[3].new_ttl, None);
        let names = ["pk".to_string(), "sk".to_string()];
        let shards = ShardCount::new(16).unwrap();
        let (entries, report) = entries_for(
            &changes,
            &names,
            shards,
            Timestamp::from_secs(1_800_000_000),
        )
        .unwrap();
        assert_eq!(
            report,
            IndexerReport {
                entries: 2,
                unchanged: 1,
                no_ttl: 1
            }
        );
        assert!(
            entries.iter().all(
                |e| e.item.attributes()[0] == ("pk".to_string(), AttributeValue::S("a".into()))
            )
        );
        assert!(entries[0].due.starts_with("0001800000060000#"));
        assert!(entries[1].due.starts_with("0001800000120000#"));
    }

    #[test]
    fn records_the_queue_cannot_use_fail_the_batch_in_one_line() {
        let mut keys_only = record("MODIFY", "a", Some(1), Some(2));
        keys_only["dynamodb"]
            .as_object_mut()
            .unwrap()
            .remove("NewImage");
        keys_only["dynamodb"]["StreamViewType"] = json!("OLD_IMAGE");
        let err = changes(&json!({"Records": [keys_only]}), "ttl").unwrap_err();
        assert!(err.to_string().contains("OLD_IMAGE"), "{err}");
        assert!(err.to_string().contains("NEW_AND_OLD_IMAGES"), "{err}");
        let mut bad = record("INSERT", "a", None, Some(1_800_000_060));
        bad["dynamodb"]["Keys"]["pk"] = json!({"X": "?"});
        let err = changes(&json!({"Records": [bad]}), "ttl").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("stream record INSERT-a: key \"pk\""),
            "{err}"
        );
        // A REMOVE without a new image is expected, and an empty batch is no error.
        let (c, b) = changes(
            &json!({"Records": [record("REMOVE", "a", Some(1), None)]}),
            "ttl",
        )
        .unwrap();
        assert!(c.is_empty());
        assert_eq!(b.removes, 1);
        assert!(changes(&json!({}), "ttl").unwrap().0.is_empty());
    }

    #[test]
    fn dynamodb_json_of_every_type_converts() {
        let v = json!({"M": {
            "s": {"S": "x"}, "n": {"N": "1.5"}, "b": {"B": "AAEC"}, "t": {"BOOL": false},
            "z": {"NULL": true}, "ss": {"SS": ["a"]}, "ns": {"NS": ["1"]}, "bs": {"BS": ["AA=="]},
            "l": {"L": [{"S": "y"}]}
        }});
        let AttributeValue::M(m) = attribute(&v).unwrap() else {
            panic!("a map")
        };
        assert_eq!(m["b"], AttributeValue::B(Blob::new(vec![0, 1, 2])));
        assert_eq!(m["bs"], AttributeValue::Bs(vec![Blob::new(vec![0])]));
        assert_eq!(
            m["l"],
            AttributeValue::L(vec![AttributeValue::S("y".into())])
        );
        assert_eq!(m.len(), 9);
        for bad in [
            json!({"S": 1}),
            json!({"B": "!!"}),
            json!("x"),
            json!({"S": "a", "N": "1"}),
        ] {
            assert!(attribute(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_stream_names_its_table() {
        assert_eq!(
            table_of("arn:aws:dynamodb:eu-west-1:1:table/sessions/stream/2026"),
            Some("sessions")
        );
        assert_eq!(table_of("nonsense"), None);
    }
}
