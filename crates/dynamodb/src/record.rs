//! The expiry record: one JSON object per expired item, in the shape of a DynamoDB Streams
//! `REMOVE` record so that a consumer of the stream (or of AWS's documented TTL archiving
//! pipeline) reads it unchanged — `eventName`, `eventSource`, `dynamodb.Keys`,
//! `dynamodb.OldImage` in DynamoDB JSON, `dynamodb.ApproximateCreationDateTime`, the
//! `SequenceNumber` when the record came from a stream — plus `userIdentity` saying who deleted
//! it (`precise-ttl`, or `dynamodb.amazonaws.com` for native TTL), the table and the delete's
//! lag. The schema is documented in `docs/expiry-records.md`.

use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// Who deleted the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeletedBy {
    /// precise-ttl's conditional delete.
    PreciseTtl,
    /// DynamoDB's own TTL (a stream record with the service's `userIdentity`).
    NativeTtl,
}

impl DeletedBy {
    pub fn principal(self) -> &'static str {
        match self {
            DeletedBy::PreciseTtl => "precise-ttl",
            DeletedBy::NativeTtl => "dynamodb.amazonaws.com",
        }
    }
}

/// One expired item's record.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpiryRecord {
    pub table: String,
    pub keys: HashMap<String, AttributeValue>,
    pub old_image: HashMap<String, AttributeValue>,
    /// When the delete happened (ours: its acknowledgement; a stream record's: its
    /// `ApproximateCreationDateTime`), epoch milliseconds.
    pub deleted_at_ms: i64,
    /// The stream record's sequence number, for records read from the stream.
    pub sequence_number: Option<String>,
    pub deleted_by: DeletedBy,
    /// The delete's lag after the item's TTL, when known.
    pub lag_ms: Option<i64>,
}

impl ExpiryRecord {
    /// The record as JSON (one line of a JSON Lines archive).
    pub fn to_json(&self) -> Value {
        let mut dynamodb = Map::new();
        dynamodb.insert(
            "ApproximateCreationDateTime".into(),
            json!(self.deleted_at_ms as f64 / 1000.0),
        );
        dynamodb.insert("Keys".into(), image(&self.keys));
        dynamodb.insert("OldImage".into(), image(&self.old_image));
        if let Some(seq) = &self.sequence_number {
            dynamodb.insert("SequenceNumber".into(), json!(seq));
        }
        dynamodb.insert("StreamViewType".into(), json!("OLD_IMAGE"));
        let mut record = json!({
            "eventName": "REMOVE",
            "eventSource": "aws:dynamodb",
            "eventVersion": "1.1",
            "dynamodb": Value::Object(dynamodb),
            "userIdentity": {"type": "Service", "principalId": self.deleted_by.principal()},
            "tableName": self.table,
        });
        if let Some(lag) = self.lag_ms {
            record["lagMs"] = json!(lag);
        }
        record
    }
}

/// An item in DynamoDB JSON, attributes in name order (stable lines for diffs and tests).
pub fn image(item: &HashMap<String, AttributeValue>) -> Value {
    let mut names: Vec<&String> = item.keys().collect();
    names.sort();
    Value::Object(
        names
            .into_iter()
            .map(|k| (k.clone(), attribute(&item[k])))
            .collect(),
    )
}

/// One attribute value in DynamoDB JSON (`{"S": "…"}`, `{"N": "…"}`, `{"B": "<base64>"}`, …).
pub fn attribute(v: &AttributeValue) -> Value {
    let b64 = |b: &aws_sdk_dynamodb::primitives::Blob| aws_smithy_types::base64::encode(b.as_ref());
    match v {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::B(b) => json!({"B": b64(b)}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(n) => json!({"NULL": n}),
        AttributeValue::Ss(v) => json!({"SS": v}),
        AttributeValue::Ns(v) => json!({"NS": v}),
        AttributeValue::Bs(v) => json!({"BS": v.iter().map(b64).collect::<Vec<_>>()}),
        AttributeValue::L(v) => json!({"L": v.iter().map(attribute).collect::<Vec<_>>()}),
        AttributeValue::M(m) => json!({"M": image(m)}),
        // A type newer than this SDK: say so rather than drop the attribute.
        _ => json!({"UNKNOWN": format!("{v:?}")}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::primitives::Blob;

    #[test]
    fn every_attribute_type_comes_out_as_dynamodb_json() {
        let item = HashMap::from([
            ("s".to_string(), AttributeValue::S("a".into())),
            ("n".to_string(), AttributeValue::N("1.50".into())),
            (
                "b".to_string(),
                AttributeValue::B(Blob::new(b"hi".to_vec())),
            ),
            ("t".to_string(), AttributeValue::Bool(true)),
            ("z".to_string(), AttributeValue::Null(true)),
            ("ss".to_string(), AttributeValue::Ss(vec!["x".into()])),
            ("ns".to_string(), AttributeValue::Ns(vec!["2".into()])),
            (
                "bs".to_string(),
                AttributeValue::Bs(vec![Blob::new(vec![0u8, 255])]),
            ),
            (
                "l".to_string(),
                AttributeValue::L(vec![AttributeValue::N("3".into())]),
            ),
            (
                "m".to_string(),
                AttributeValue::M(HashMap::from([("k".into(), AttributeValue::S("v".into()))])),
            ),
        ]);
        assert_eq!(
            image(&item),
            json!({
                "b": {"B": "aGk="}, "bs": {"BS": ["AP8="]}, "l": {"L": [{"N": "3"}]},
                "m": {"M": {"k": {"S": "v"}}}, "n": {"N": "1.50"}, "ns": {"NS": ["2"]},
                "s": {"S": "a"}, "ss": {"SS": ["x"]}, "t": {"BOOL": true}, "z": {"NULL": true}
            })
        );
    }

    /// The fields a Streams consumer reads are where a stream record has them.
    #[test]
    fn a_record_reads_like_a_streams_remove_record() {
        let key = HashMap::from([("pk".to_string(), AttributeValue::S("a".into()))]);
        let mut old = key.clone();
        old.insert("ttl".into(), AttributeValue::N("1700000000".into()));
        let record = ExpiryRecord {
            table: "sessions".into(),
            keys: key,
            old_image: old,
            deleted_at_ms: 1_700_000_000_250,
            sequence_number: None,
            deleted_by: DeletedBy::PreciseTtl,
            lag_ms: Some(250),
        }
        .to_json();
        assert_eq!(record["eventName"], "REMOVE");
        assert_eq!(record["eventSource"], "aws:dynamodb");
        assert_eq!(record["dynamodb"]["Keys"], json!({"pk": {"S": "a"}}));
        assert_eq!(
            record["dynamodb"]["OldImage"]["ttl"],
            json!({"N": "1700000000"})
        );
        assert_eq!(
            record["dynamodb"]["ApproximateCreationDateTime"],
            1_700_000_000.25
        );
        assert_eq!(
            record["userIdentity"],
            json!({"type": "Service", "principalId": "precise-ttl"})
        );
        assert_eq!(record["tableName"], "sessions");
        assert_eq!(record["lagMs"], 250);
        assert!(record["dynamodb"].get("SequenceNumber").is_none());
    }
}
