//! Reading a DynamoDB table without seeing expired items, by the rule the sweeper and native TTL
//! delete by: an item is expired when its TTL attribute is a Number within the last five years,
//! up to now; anything else (no TTL, a String, a future or millisecond value, one older than five
//! years) stays visible.
//!
//! Deletion trails expiry: by a fraction of a second with precise-ttl running, by much longer
//! during a backlog, an outage or the adoption of an existing table, and by days with native TTL
//! alone. Readers that must treat an expired item as gone have two ways here:
//!
//! - [`HideExpired`], an interceptor for the SDK client's config, hides expired items from every
//!   read the client makes (Query, Scan, GetItem, BatchGetItem, TransactGetItems and PartiQL);
//!   [`ShowExpired`] switches it off for one call. Its docs list what each operation does.
//! - The helpers, for one request at a time: [`hide_expired_query`] and [`hide_expired_scan`] add
//!   the filter to a builder, [`is_expired`] judges an item read by key.
//!
//! Both judge by one rule, `precise_ttl_core`'s. `docs/reading.md` has the same for Python and
//! JavaScript, and the caveats (filters do not save read capacity; `Limit` counts filtered-out
//! items).
//!
//! Writes are not intercepted. A put or update that must treat an expired item as absent (say,
//! "create unless it exists") conditions on the same rule:
//!
//! ```no_run
//! use aws_sdk_dynamodb::types::AttributeValue;
//! use precise_ttl_core::DueWindow;
//!
//! # async fn example(client: aws_sdk_dynamodb::Client) -> Result<(), aws_sdk_dynamodb::Error> {
//! let window = DueWindow::at(precise_ttl_read::now());
//! let n = |t: precise_ttl_core::Timestamp| AttributeValue::N(t.to_epoch_seconds_text());
//! client
//!     .put_item()
//!     .table_name("sessions")
//!     .item("pk", AttributeValue::S("user#42".into()))
//!     .condition_expression(
//!         "attribute_not_exists(pk) OR (attribute_type(#ttl, :N) AND #ttl BETWEEN :oldest AND :now)",
//!     )
//!     .expression_attribute_names("#ttl", "ttl")
//!     .expression_attribute_values(":N", AttributeValue::S("N".into()))
//!     .expression_attribute_values(":oldest", n(window.oldest))
//!     .expression_attribute_values(":now", n(window.until))
//!     .send()
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! This crate depends on precise-ttl's pure rules and the AWS SDK only, so an application that
//! reads its table does not compile the sweeper, the archive or the S3 SDK.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::scan::builders::ScanFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;
use filter::Merged;
use precise_ttl_core::{ReadFilter, Timestamp};
use std::collections::HashMap;

mod clock;
mod erased;
mod error;
mod filter;
mod interceptor;
mod projection;
mod request;
mod response;

pub use clock::now;
pub use error::PlaceholderInUse;
pub use interceptor::{HideExpired, ShowExpired};

/// The builder with the hide-expired filter merged into its own: Query's and Scan's builders have
/// the same methods but no common trait.
macro_rules! with_filter {
    ($builder:ident, $ttl_attribute:ident, $now:ident) => {{
        let merged = Merged::new(
            &ReadFilter::hide_expired($ttl_attribute, $now),
            $builder.get_filter_expression(),
            $builder.get_expression_attribute_names(),
            $builder.get_expression_attribute_values(),
        );
        $builder
            .filter_expression(merged.expression)
            .set_expression_attribute_names(Some(merged.names))
            .set_expression_attribute_values(Some(merged.values))
    }};
}

/// Hides items whose `ttl_attribute` has expired by `now` from a Query.
///
/// Keeps the filter expression, names and values already on the builder, combining the filters as
/// `(<yours>) AND (<ours>)`, so call it last, just before `.send()` or `.into_paginator()`: a
/// later `.filter_expression(..)` or `.set_expression_attribute_*(..)` would replace ours. The
/// placeholders it adds all start with `#precise_ttl_` or `:precise_ttl_`.
///
/// On a global secondary index the TTL attribute must be projected into the index; otherwise
/// every item looks as if it had no TTL and nothing is hidden.
///
/// ```no_run
/// use aws_sdk_dynamodb::types::AttributeValue;
/// use precise_ttl_core::Timestamp;
/// use precise_ttl_read::hide_expired_query;
/// use std::time::{SystemTime, UNIX_EPOCH};
///
/// # async fn example(client: aws_sdk_dynamodb::Client) -> Result<(), aws_sdk_dynamodb::Error> {
/// let now = Timestamp::from_unix_duration(SystemTime::now().duration_since(UNIX_EPOCH).unwrap());
/// let query = client
///     .query()
///     .table_name("sessions")
///     .key_condition_expression("pk = :pk")
///     .expression_attribute_values(":pk", AttributeValue::S("user#42".into()));
/// let live = hide_expired_query(query, "ttl", now).send().await?.items.unwrap_or_default();
/// # let _ = live;
/// # Ok(())
/// # }
/// ```
pub fn hide_expired_query(
    builder: QueryFluentBuilder,
    ttl_attribute: &str,
    now: Timestamp,
) -> QueryFluentBuilder {
    with_filter!(builder, ttl_attribute, now)
}

/// Hides items whose `ttl_attribute` has expired by `now` from a Scan. Same contract as
/// [`hide_expired_query`].
///
/// ```no_run
/// use precise_ttl_core::Timestamp;
/// use precise_ttl_read::hide_expired_scan;
/// use std::time::{SystemTime, UNIX_EPOCH};
///
/// # async fn example(client: aws_sdk_dynamodb::Client) -> Result<(), aws_sdk_dynamodb::Error> {
/// let now = Timestamp::from_unix_duration(SystemTime::now().duration_since(UNIX_EPOCH).unwrap());
/// let scan = client
///     .scan()
///     .table_name("sessions")
///     .filter_expression("#state = :active")
///     .expression_attribute_names("#state", "state")
///     .expression_attribute_values(":active", aws_sdk_dynamodb::types::AttributeValue::S("active".into()));
/// let mut pages = hide_expired_scan(scan, "ttl", now).into_paginator().send();
/// while let Some(page) = pages.next().await {
///     for item in page?.items() {
///         // only unexpired items with state = active
/// #       let _ = item;
///     }
/// }
/// # Ok(())
/// # }
/// ```
pub fn hide_expired_scan(
    builder: ScanFluentBuilder,
    ttl_attribute: &str,
    now: Timestamp,
) -> ScanFluentBuilder {
    with_filter!(builder, ttl_attribute, now)
}

/// A TTL attribute as the core rules see it.
pub fn ttl_value(v: Option<&AttributeValue>) -> precise_ttl_core::TtlValue<'_> {
    use precise_ttl_core::TtlValue;
    match v {
        None => TtlValue::Missing,
        Some(AttributeValue::N(n)) => TtlValue::Number(n),
        Some(other) => TtlValue::Other(type_name(other)),
    }
}

/// DynamoDB's name for a value's type (`S`, `N`, `BOOL`, ...).
pub fn type_name(v: &AttributeValue) -> &'static str {
    match v {
        AttributeValue::S(_) => "S",
        AttributeValue::N(_) => "N",
        AttributeValue::B(_) => "B",
        AttributeValue::Bool(_) => "BOOL",
        AttributeValue::Null(_) => "NULL",
        AttributeValue::L(_) => "L",
        AttributeValue::M(_) => "M",
        AttributeValue::Ss(_) => "SS",
        AttributeValue::Ns(_) => "NS",
        AttributeValue::Bs(_) => "BS",
        _ => "unknown",
    }
}

/// Whether an item read by key (GetItem, BatchGetItem, TransactGetItems) has expired by `now`
/// and should be treated as absent. Agrees with [`hide_expired_query`] and [`hide_expired_scan`].
///
/// A ProjectionExpression that leaves out `ttl_attribute` makes every item look unexpired:
/// project it too.
///
/// ```no_run
/// use aws_sdk_dynamodb::types::AttributeValue;
/// use precise_ttl_core::Timestamp;
/// use precise_ttl_read::is_expired;
/// use std::time::{SystemTime, UNIX_EPOCH};
///
/// # async fn example(client: aws_sdk_dynamodb::Client) -> Result<(), aws_sdk_dynamodb::Error> {
/// let out = client
///     .get_item()
///     .table_name("sessions")
///     .key("pk", AttributeValue::S("user#42".into()))
///     .send()
///     .await?;
/// let now = Timestamp::from_unix_duration(SystemTime::now().duration_since(UNIX_EPOCH).unwrap());
/// let session = out.item.filter(|item| !is_expired(item, "ttl", now));
/// # let _ = session;
/// # Ok(())
/// # }
/// ```
pub fn is_expired(
    item: &HashMap<String, AttributeValue>,
    ttl_attribute: &str,
    now: Timestamp,
) -> bool {
    precise_ttl_core::is_expired(&ttl_value(item.get(ttl_attribute)), now)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_secs(1_800_000_000);

    #[test]
    fn items_read_by_key_follow_native_ttl() {
        let with = |ttl: Option<AttributeValue>| {
            let mut item = HashMap::from([("pk".to_string(), AttributeValue::S("a".into()))]);
            if let Some(ttl) = ttl {
                item.insert("ttl".to_string(), ttl);
            }
            is_expired(&item, "ttl", NOW)
        };
        let n = |s: &str| Some(AttributeValue::N(s.into()));
        assert!(with(n("1799999999.5")));
        assert!(with(n("1800000000")));
        assert!(!with(n("1800000001")));
        assert!(!with(n("1799999999000")), "milliseconds");
        assert!(!with(n("1600000000")), "more than five years ago");
        assert!(!with(Some(AttributeValue::S("1799999999".into()))));
        assert!(!with(Some(AttributeValue::Null(true))));
        assert!(!with(None));
    }
}
