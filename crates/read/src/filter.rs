//! The hide-expired filter merged into a request's own filter expression, names and values: what
//! [`hide_expired_query`](crate::hide_expired_query),
//! [`hide_expired_scan`](crate::hide_expired_scan) and the interceptor's Query and Scan add.

use aws_sdk_dynamodb::types::AttributeValue;
use precise_ttl_core::{FilterValue, ReadFilter};
use std::collections::HashMap;

/// A request's filter, names and values with the hide-expired filter added.
pub(crate) struct Merged {
    pub(crate) expression: String,
    pub(crate) names: HashMap<String, String>,
    pub(crate) values: HashMap<String, AttributeValue>,
}

impl Merged {
    /// `filter` combined with the request's own as `(<theirs>) AND (<ours>)`, its placeholders
    /// added to the request's. The caller's placeholders are kept; ours win on a clash, which
    /// the interceptor refuses beforehand ([`placeholder_in_use`]).
    pub(crate) fn new(
        filter: &ReadFilter,
        expression: &Option<String>,
        names: &Option<HashMap<String, String>>,
        values: &Option<HashMap<String, AttributeValue>>,
    ) -> Self {
        let mut names = names.clone().unwrap_or_default();
        for (placeholder, attribute) in filter.names.iter().cloned() {
            // Applying the filter twice is harmless (the later `now` wins), but with two TTL
            // attributes the first clause would silently start testing the second one.
            debug_assert!(
                names.get(&placeholder).is_none_or(|a| *a == attribute),
                "{placeholder} already names {:?}, not {attribute:?}",
                names[&placeholder]
            );
            names.insert(placeholder, attribute);
        }
        let mut values = values.clone().unwrap_or_default();
        values.extend(
            filter
                .values
                .iter()
                .map(|(placeholder, value)| (placeholder.clone(), attribute_value(value))),
        );
        Merged {
            expression: filter.and(expression.as_deref().unwrap_or_default()),
            names,
            values,
        }
    }
}

/// The first of `filter`'s placeholders that a request's names or values already bind.
pub(crate) fn placeholder_in_use<'f>(
    filter: &'f ReadFilter,
    names: Option<&HashMap<String, String>>,
    values: Option<&HashMap<String, AttributeValue>>,
) -> Option<&'f str> {
    let named = filter
        .names
        .iter()
        .map(|(placeholder, _)| placeholder)
        .find(|p| names.is_some_and(|n| n.contains_key(*p)));
    let valued = || {
        filter
            .values
            .iter()
            .map(|(placeholder, _)| placeholder)
            .find(|p| values.is_some_and(|v| v.contains_key(*p)))
    };
    named.or_else(valued).map(String::as_str)
}

fn attribute_value(value: &FilterValue) -> AttributeValue {
    match value {
        FilterValue::Number(text) => AttributeValue::N(text.clone()),
        FilterValue::Text(text) => AttributeValue::S(text.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_core::Timestamp;

    const NOW: Timestamp = Timestamp::from_secs(1_800_000_000);

    fn merged(
        expression: Option<&str>,
        names: Option<HashMap<String, String>>,
        values: Option<HashMap<String, AttributeValue>>,
        ttl_attribute: &str,
    ) -> Merged {
        let filter = ReadFilter::hide_expired(ttl_attribute, NOW);
        Merged::new(&filter, &expression.map(String::from), &names, &values)
    }

    #[test]
    fn merges_with_what_the_caller_already_set() {
        let caller_names = Some(HashMap::from([("#kind".to_string(), "kind".to_string())]));
        let caller_values = Some(HashMap::from([(
            ":kind".to_string(),
            AttributeValue::S("a".into()),
        )]));
        let m = merged(Some("#kind = :kind"), caller_names, caller_values, "ttl");
        let ours = ReadFilter::hide_expired("ttl", NOW);
        assert_eq!(
            m.expression,
            format!("(#kind = :kind) AND ({})", ours.expression)
        );
        assert_eq!(m.names.len(), 2);
        assert_eq!(m.names["#kind"], "kind");
        assert_eq!(m.names["#precise_ttl_attr"], "ttl");
        assert_eq!(m.values.len(), 4);
        assert_eq!(m.values[":kind"], AttributeValue::S("a".into()));
        assert_eq!(
            m.values[":precise_ttl_number"],
            AttributeValue::S("N".into())
        );
        assert_eq!(
            m.values[":precise_ttl_now"],
            AttributeValue::N("1800000000".into())
        );
    }

    #[test]
    fn stands_alone_on_a_bare_request() {
        let m = merged(None, None, None, "expires");
        assert_eq!(
            m.expression,
            ReadFilter::hide_expired("expires", NOW).expression
        );
        assert_eq!(m.names.len(), 1);
        assert_eq!(m.values.len(), 3);
    }

    #[test]
    fn finds_our_placeholders_among_the_callers() {
        let filter = ReadFilter::hide_expired("ttl", NOW);
        let names = HashMap::from([("#kind".to_string(), "kind".to_string())]);
        let values = HashMap::from([(":kind".to_string(), AttributeValue::S("a".into()))]);
        assert_eq!(
            placeholder_in_use(&filter, Some(&names), Some(&values)),
            None
        );
        assert_eq!(placeholder_in_use(&filter, None, None), None);
        let names = HashMap::from([("#precise_ttl_attr".to_string(), "ttl".to_string())]);
        assert_eq!(
            placeholder_in_use(&filter, Some(&names), None),
            Some("#precise_ttl_attr")
        );
        let values = HashMap::from([(
            ":precise_ttl_now".to_string(),
            AttributeValue::N("1".into()),
        )]);
        assert_eq!(
            placeholder_in_use(&filter, None, Some(&values)),
            Some(":precise_ttl_now")
        );
    }
}
