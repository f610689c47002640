//! Hiding expired items from readers: the filter expression that keeps expired-but-not-yet-deleted
//! items out of Query and Scan results, and the matching check for items read by key.
//!
//! Deletion always trails expiry a little (precise-ttl) or a lot (native TTL, a backlog being
//! caught up, a table being adopted), and until then DynamoDB returns expired items like any
//! other. Both tools here apply exactly the rule the sweeper deletes by ([`Verdict`],
//! [`DueWindow`]), so a reader hides precisely the items that are due for deletion: anything
//! without a Number TTL in `[now − 5 years, now]` stays visible.
//!
//! Like the rest of this crate, nothing here knows AWS types or reads a clock: the adapter turns
//! [`FilterValue`]s into AttributeValues, and `now` is the reader's own clock reading.

use crate::due_rule;
use crate::expiry::{TtlValue, Verdict};
use crate::plan::DueWindow;
use crate::time::Timestamp;

// Placeholders are merged into the caller's own expression maps, so they must not collide with
// anything a caller would plausibly name; `ttl` itself is a reserved word and needs one anyway.
const ATTRIBUTE: &str = "#precise_ttl_attr";
const NUMBER_TYPE: &str = ":precise_ttl_number";
const OLDEST: &str = ":precise_ttl_oldest";
const NOW: &str = ":precise_ttl_now";

/// A value bound to one of the filter's `:placeholders`, in DynamoDB's two scalar shapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterValue {
    /// A Number, as DynamoDB's decimal text.
    Number(String),
    /// A String.
    Text(String),
}

/// A filter expression with its placeholder bindings, ready for a Query or Scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFilter {
    pub expression: String,
    /// `#placeholder` → attribute name.
    pub names: Vec<(String, String)>,
    /// `:placeholder` → value.
    pub values: Vec<(String, FilterValue)>,
}

impl ReadFilter {
    /// Keeps every item except those whose `ttl_attribute` has expired by `now` under native TTL
    /// rules.
    ///
    /// The expression is the negation of the sweeper's delete condition, with the same window:
    /// `NOT (attribute_type(ttl, 'N') AND ttl BETWEEN now−5y AND now)`. A `BETWEEN` with Number
    /// bounds is already false for a missing or non-Number TTL; the type test states the rule
    /// rather than leaning on that, as the delete condition does. Negating it is what keeps
    /// items without a TTL visible.
    pub fn hide_expired(ttl_attribute: &str, now: Timestamp) -> Self {
        let window = DueWindow::at(now);
        ReadFilter {
            expression: format!(
                "NOT ({})",
                due_rule::render(due_rule::Tokens {
                    attribute: ATTRIBUTE,
                    number_type: NUMBER_TYPE,
                    oldest: OLDEST,
                    now: NOW,
                })
            ),
            names: vec![(ATTRIBUTE.to_string(), ttl_attribute.to_string())],
            values: vec![
                (NUMBER_TYPE.to_string(), FilterValue::Text("N".to_string())),
                (
                    OLDEST.to_string(),
                    FilterValue::Number(window.oldest.to_epoch_seconds_text()),
                ),
                (
                    NOW.to_string(),
                    FilterValue::Number(window.until.to_epoch_seconds_text()),
                ),
            ],
        }
    }

    /// This filter combined with a caller's own filter expression: `(<theirs>) AND (<ours>)`.
    ///
    /// Both sides are parenthesised because the caller's expression may contain `OR`, which
    /// binds more loosely than `AND`. A blank expression means "no filter yet".
    pub fn and(&self, other_expression: &str) -> String {
        if other_expression.trim().is_empty() {
            self.expression.clone()
        } else {
            format!("({other_expression}) AND ({})", self.expression)
        }
    }
}

/// Whether an item read by key (GetItem, BatchGetItem, a transaction read) has expired by `now`
/// and should be treated as absent: the client-side twin of [`ReadFilter::hide_expired`].
///
/// Identical to the sweeper's own verdict. The two agree with the filter for every TTL except a
/// sub-millisecond value within one millisecond of the five-year edge, where the verdict rounds
/// the TTL up to whole milliseconds (see [`Expiry::parse_number`](crate::Expiry::parse_number));
/// native TTL itself is not that exact about the edge.
pub fn is_expired(ttl: &TtlValue<'_>, now: Timestamp) -> bool {
    Verdict::of(ttl, now).is_due()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NATIVE_TTL_MAX_AGE;
    use std::time::Duration;

    const NOW: Timestamp = Timestamp::from_secs(1_800_000_000);

    #[test]
    fn the_filter_negates_the_delete_window() {
        let f = ReadFilter::hide_expired("ttl", NOW);
        assert_eq!(
            f.expression,
            "NOT (attribute_type(#precise_ttl_attr, :precise_ttl_number) \
             AND #precise_ttl_attr BETWEEN :precise_ttl_oldest AND :precise_ttl_now)"
        );
        assert_eq!(
            f.names,
            vec![("#precise_ttl_attr".to_string(), "ttl".to_string())]
        );
        let window = DueWindow::at(NOW);
        assert_eq!(
            f.values,
            vec![
                (
                    ":precise_ttl_number".to_string(),
                    FilterValue::Text("N".into())
                ),
                (
                    ":precise_ttl_oldest".to_string(),
                    FilterValue::Number(window.oldest.to_epoch_seconds_text())
                ),
                (
                    ":precise_ttl_now".to_string(),
                    FilterValue::Number("1800000000".into())
                ),
            ]
        );
        assert_eq!(
            window.oldest,
            NOW.saturating_sub(NATIVE_TTL_MAX_AGE),
            "five years of 365 days"
        );
    }

    #[test]
    fn every_placeholder_in_the_expression_is_bound_and_every_binding_used() {
        let f = ReadFilter::hide_expired("expires at", NOW);
        let bound: Vec<&str> = f
            .names
            .iter()
            .map(|(k, _)| k.as_str())
            .chain(f.values.iter().map(|(k, _)| k.as_str()))
            .collect();
        // DynamoDB rejects a request with an unused binding as firmly as an unbound placeholder.
        for placeholder in &bound {
            assert!(f.expression.contains(placeholder), "{placeholder} unused");
        }
        let in_expression = f
            .expression
            .split(|c: char| !(c.is_ascii_alphanumeric() || "_#:".contains(c)))
            .filter(|w| w.starts_with(['#', ':']));
        for placeholder in in_expression {
            assert!(bound.contains(&placeholder), "{placeholder} unbound");
        }
    }

    #[test]
    fn combines_with_the_callers_filter() {
        let f = ReadFilter::hide_expired("ttl", NOW);
        assert_eq!(
            f.and("#kind = :a OR #kind = :b"),
            format!("(#kind = :a OR #kind = :b) AND ({})", f.expression)
        );
        assert_eq!(f.and(""), f.expression);
        assert_eq!(f.and("  "), f.expression);
    }

    #[test]
    fn expired_means_due_under_native_ttl() {
        let expired = |ttl: TtlValue| is_expired(&ttl, NOW);
        let oldest = NOW.saturating_sub(NATIVE_TTL_MAX_AGE);
        let text = |t: Timestamp| t.to_epoch_seconds_text();

        assert!(
            expired(TtlValue::Number("1800000000")),
            "expiring right now"
        );
        assert!(expired(TtlValue::Number("1799999999.25")), "decimals");
        assert!(expired(TtlValue::Number("1.7999e9")), "exponent");
        assert!(expired(TtlValue::Number(&text(oldest))), "exactly 5 years");

        assert!(!expired(TtlValue::Number("1800000000.001")), "1 ms ahead");
        assert!(!expired(TtlValue::Number("1800000000000")), "milliseconds");
        assert!(
            !expired(TtlValue::Number(&text(
                oldest.saturating_sub(Duration::from_millis(1))
            ))),
            "older than 5 years"
        );
        assert!(!expired(TtlValue::Number("-1")), "before 1970");
        assert!(!expired(TtlValue::Other("S")), "a String TTL");
        assert!(!expired(TtlValue::Number("soon")), "not a number");
        assert!(!expired(TtlValue::Missing), "no TTL");
    }
}
