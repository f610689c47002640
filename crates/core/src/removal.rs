//! Which REMOVE records of a table's stream are expiries, so an archive keeps exactly those: a
//! native TTL delete (the record's `userIdentity` is the DynamoDB service), or an ordinary delete
//! — ours, or any TTL sweeper's — whose old image holds a TTL that native TTL would have counted
//! as due when the record was made (a Number, due, not more than five years old). Anything else
//! (an application deleting an item that had not expired, or had no TTL) is not an expiry.
//!
//! Stream records date themselves in whole seconds by default, so "due when made" allows the
//! record's resolution: a delete at 12.9 s of an item due at 12.5 s is recorded at 12 s.

use crate::expiry::{TtlValue, Verdict};
use crate::time::Timestamp;
use std::time::Duration;

/// The principal DynamoDB's own TTL deletes carry in stream records.
pub const NATIVE_TTL_PRINCIPAL: &str = "dynamodb.amazonaws.com";

/// What a stream REMOVE record says, without AWS types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal<'a> {
    /// `userIdentity.principalId` when `userIdentity.type` is `Service`.
    pub service_principal: Option<&'a str>,
    /// The old image's TTL attribute.
    pub old_ttl: TtlValue<'a>,
    /// `ApproximateCreationDateTime`.
    pub created_at: Timestamp,
    /// How finely `created_at` is given (1 s unless the stream was set to milliseconds).
    pub resolution: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemovalKind {
    /// Deleted by DynamoDB's TTL.
    NativeTtl,
    /// Deleted by someone else after its TTL: a TTL sweeper's expiry.
    Expired,
    /// Not an expiry.
    Other,
}

pub fn classify(r: &Removal<'_>) -> RemovalKind {
    if r.service_principal == Some(NATIVE_TTL_PRINCIPAL) {
        return RemovalKind::NativeTtl;
    }
    let latest = r.created_at.saturating_add(r.resolution);
    if Verdict::of(&r.old_ttl, latest).is_due() {
        RemovalKind::Expired
    } else {
        RemovalKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn removal<'a>(principal: Option<&'a str>, ttl: TtlValue<'a>, at_s: i64) -> Removal<'a> {
        Removal {
            service_principal: principal,
            old_ttl: ttl,
            created_at: Timestamp::from_secs(at_s),
            resolution: Duration::from_secs(1),
        }
    }

    #[test]
    fn native_deletes_are_native_whatever_the_image() {
        let r = removal(Some(NATIVE_TTL_PRINCIPAL), TtlValue::Missing, 1_800_000_000);
        assert_eq!(classify(&r), RemovalKind::NativeTtl);
    }

    #[test]
    fn an_ordinary_delete_is_an_expiry_only_if_native_ttl_would_have_deleted_the_item() {
        let at = 1_800_000_000;
        for (ttl, kind) in [
            // Due before the record.
            (TtlValue::Number("1799999990"), RemovalKind::Expired),
            // Due within the record's second (deleted at 12.9 s, recorded at 12 s).
            (TtlValue::Number("1800000000.5"), RemovalKind::Expired),
            // Not yet due: an application deleted it.
            (TtlValue::Number("1800000005"), RemovalKind::Other),
            // More than five years old: native TTL ignores it, so it is no expiry.
            (TtlValue::Number("1600000000"), RemovalKind::Other),
            (TtlValue::Other("S"), RemovalKind::Other),
            (TtlValue::Missing, RemovalKind::Other),
            (TtlValue::Number("soon"), RemovalKind::Other),
        ] {
            assert_eq!(classify(&removal(None, ttl.clone(), at)), kind, "{ttl:?}");
        }
        // Another service's principal is not native TTL.
        let r = removal(
            Some("other.amazonaws.com"),
            TtlValue::Number("1800000005"),
            at,
        );
        assert_eq!(classify(&r), RemovalKind::Other);
    }
}
