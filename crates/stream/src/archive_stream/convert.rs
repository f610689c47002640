//! A stream record turned into what the archive writes: the expiry record of a REMOVE that is an
//! expiry (else why it is left out), with the old image converted from the Streams SDK's values
//! to DynamoDB's.

use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodbstreams::types::{AttributeValue as StreamValue, Record};
use precise_ttl_core::expiry::TtlValue;
use precise_ttl_core::removal::{LeftOut, Removal, RemovalKind, judge};
use precise_ttl_core::{Expiry, Timestamp};
use precise_ttl_dynamodb::record::{DeletedBy, ExpiryRecord};
use std::collections::HashMap;
use std::time::Duration;

pub(super) fn millis(t: &aws_smithy_types::DateTime) -> i64 {
    t.secs() * 1000 + i64::from(t.subsec_nanos()) / 1_000_000
}

/// The record of a REMOVE if it is an expiry, else why not.
pub(super) fn expiry_record(
    record: &Record,
    table: &str,
    ttl_attribute: &str,
    resolution: Duration,
    local_ttl: bool,
) -> Result<ExpiryRecord, LeftOut> {
    let d = record.dynamodb().ok_or(LeftOut::NoRecordTime)?;
    let created = d
        .approximate_creation_date_time()
        .ok_or(LeftOut::NoRecordTime)?;
    let created_ms = millis(created);
    let old_image: HashMap<String, AttributeValue> = d
        .old_image()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), convert(v))).collect())
        .unwrap_or_default();
    let principal = record
        .user_identity()
        .filter(|i| i.r#type() == Some("Service"))
        .and_then(|i| i.principal_id())
        .or(local_ttl.then_some(precise_ttl_core::removal::NATIVE_TTL_PRINCIPAL));
    let ttl = match old_image.get(ttl_attribute) {
        None => TtlValue::Missing,
        Some(AttributeValue::N(n)) => TtlValue::Number(n),
        Some(_) => TtlValue::Other("not a Number"),
    };
    let removal = Removal {
        service_principal: principal,
        old_ttl: ttl.clone(),
        created_at: Timestamp::from_millis(created_ms),
        resolution,
    };
    let deleted_by = match judge(&removal)? {
        RemovalKind::NativeTtl => DeletedBy::NativeTtl,
        _ => DeletedBy::PreciseTtl,
    };
    let lag_ms = match ttl {
        TtlValue::Number(n) => Expiry::parse_number(n)
            .ok()
            .map(|e| (created_ms - e.at().as_millis()).max(0)),
        _ => None,
    };
    Ok(ExpiryRecord {
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
pub(crate) fn convert(v: &StreamValue) -> AttributeValue {
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
