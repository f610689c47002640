//! A DynamoDB stream record with both images, as an event source mapping hands it to the
//! function: the one fixture of the indexer's unit tests and of the stream-queue tests through
//! the real function (which include this file by its path), so both feed the same shape.

use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// Record `name` (`INSERT`, `MODIFY` or `REMOVE`) of `table`'s item `pk` (its String partition
/// key, with a Number sort key `sk` when given). Its images hold the key, an attribute of
/// another type and the TTL (`None` leaves the attribute out); an INSERT has no old image and a
/// REMOVE no new one. Every record gets a sequence number of its own; its creation time is the
/// wall clock's, which the indexer does not read.
pub fn stream_record(
    table: &str,
    name: &str,
    pk: &str,
    sk: Option<i64>,
    old_ttl: Option<i64>,
    new_ttl: Option<i64>,
) -> Value {
    static SEQUENCE: AtomicU64 = AtomicU64::new(1);
    // The sort key first, as a record may list them: the key's order is the table's, not this.
    let mut keys = json!({});
    if let Some(sk) = sk {
        keys["sk"] = json!({"N": sk.to_string()});
    }
    keys["pk"] = json!({"S": pk});
    let image = |ttl: Option<i64>| {
        let mut i = keys.clone();
        i["data"] = json!({"L": [{"BOOL": true}]});
        if let Some(t) = ttl {
            i["ttl"] = json!({"N": t.to_string()});
        }
        i
    };
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut d = json!({
        "ApproximateCreationDateTime": created as f64,
        "Keys": keys.clone(),
        "SequenceNumber": SEQUENCE.fetch_add(1, Ordering::Relaxed).to_string(),
        "SizeBytes": 40, "StreamViewType": "NEW_AND_OLD_IMAGES"
    });
    if name != "INSERT" {
        d["OldImage"] = image(old_ttl);
    }
    if name != "REMOVE" {
        d["NewImage"] = image(new_ttl);
    }
    json!({
        "eventID": format!("{name}-{pk}"), "eventName": name, "eventVersion": "1.1",
        "eventSource": "aws:dynamodb", "awsRegion": "ddblocal", "dynamodb": d,
        "eventSourceARN": format!("arn:aws:dynamodb:ddblocal:000000000000:table/{table}/stream/2026-11-27T00:00:00.000")
    })
}
