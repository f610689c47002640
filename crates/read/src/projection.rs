//! The projection rule for items read by key (GetItem, BatchGetItem, TransactGetItems): an item
//! can only be judged if it comes back with its TTL attribute, so a projection that leaves the
//! attribute out gets it added, and the response has it stripped again, so that the caller still
//! receives exactly the attributes it asked for.

use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;

/// The placeholder the TTL attribute is added to a `ProjectionExpression` under: the same one the
/// Query and Scan filter uses (a test holds them together), because `ttl` is a reserved word.
pub(crate) const TTL_PLACEHOLDER: &str = "#precise_ttl_attr";

/// A request's projection as the caller wrote it, kept to undo our addition where DynamoDB
/// hands the request back (BatchGetItem's `UnprocessedKeys`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Projection {
    pub(crate) expression: Option<String>,
    pub(crate) names: Option<HashMap<String, String>>,
    pub(crate) attributes_to_get: Option<Vec<String>>,
}

/// The placeholder is already bound in the request's names: we cannot add ours.
#[derive(Debug)]
pub(crate) struct PlaceholderTaken;

/// Adds `ttl_attribute` to a `ProjectionExpression` (through [`TTL_PLACEHOLDER`]) or to a legacy
/// `AttributesToGet` that leaves it out. Gives back the projection as it was when it changed (the
/// caller then strips the attribute from what comes back), `None` when the whole item or the TTL
/// attribute is asked for already.
pub(crate) fn include_ttl(
    expression: &mut Option<String>,
    names: &mut Option<HashMap<String, String>>,
    attributes_to_get: &mut Option<Vec<String>>,
    ttl_attribute: &str,
) -> Result<Option<Projection>, PlaceholderTaken> {
    let original = Projection {
        expression: expression.clone(),
        names: names.clone(),
        attributes_to_get: attributes_to_get.clone(),
    };
    if let Some(projection) = expression.as_mut().filter(|p| !p.trim().is_empty()) {
        if names_attribute(projection, names.as_ref(), ttl_attribute) {
            return Ok(None);
        }
        let names = names.get_or_insert_default();
        if names.contains_key(TTL_PLACEHOLDER) {
            return Err(PlaceholderTaken);
        }
        names.insert(TTL_PLACEHOLDER.to_string(), ttl_attribute.to_string());
        projection.push_str(", ");
        projection.push_str(TTL_PLACEHOLDER);
        return Ok(Some(original));
    }
    if let Some(attributes) = attributes_to_get.as_mut().filter(|a| !a.is_empty()) {
        if attributes.iter().any(|a| a == ttl_attribute) {
            return Ok(None);
        }
        attributes.push(ttl_attribute.to_string());
        return Ok(Some(original));
    }
    Ok(None)
}

/// Whether one of a projection's paths starts at `attribute`, literally or through a `#name`.
///
/// A path below the attribute (`ttl.x`, `ttl[0]`) counts too: adding the attribute beside it
/// would make DynamoDB refuse the request for overlapping paths. Such an item comes back without
/// a Number TTL and stays visible.
fn names_attribute(
    projection: &str,
    names: Option<&HashMap<String, String>>,
    attribute: &str,
) -> bool {
    projection.split(',').any(|path| {
        let first = path.split(['.', '[']).next().unwrap_or_default().trim();
        if first.starts_with('#') {
            names.and_then(|n| n.get(first)).map(String::as_str) == Some(attribute)
        } else {
            first == attribute
        }
    })
}

/// Removes the TTL attribute we added from an item that is handed to the caller.
pub(crate) fn strip(item: &mut HashMap<String, AttributeValue>, ttl_attribute: &str) {
    item.remove(ttl_attribute);
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_core::{ReadFilter, Timestamp};

    fn names(pairs: &[(&str, &str)]) -> Option<HashMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn the_placeholder_is_the_filters() {
        let filter = ReadFilter::hide_expired("ttl", Timestamp::from_secs(0));
        assert!(filter.names.iter().any(|(p, _)| p == TTL_PLACEHOLDER));
    }

    #[test]
    fn adds_the_attribute_to_a_projection_that_leaves_it_out() {
        let mut expression = Some("pk, #d.x".to_string());
        let mut n = names(&[("#d", "data")]);
        let before = (expression.clone(), n.clone());
        let original = include_ttl(&mut expression, &mut n, &mut None, "ttl")
            .unwrap()
            .expect("changed");
        assert_eq!(expression.as_deref(), Some("pk, #d.x, #precise_ttl_attr"));
        assert_eq!(n, names(&[("#d", "data"), ("#precise_ttl_attr", "ttl")]));
        assert_eq!((original.expression, original.names), before);
    }

    #[test]
    fn leaves_a_projection_that_names_it_alone() {
        for (projection, n) in [
            ("pk, #t", names(&[("#t", "ttl")])),
            ("pk,#t.x", names(&[("#t", "ttl")])),
            ("expires, pk", None),
            ("  expires[0]", None),
        ] {
            let attribute = if projection.contains("expires") {
                "expires"
            } else {
                "ttl"
            };
            let mut expression = Some(projection.to_string());
            let mut n2 = n.clone();
            assert!(
                include_ttl(&mut expression, &mut n2, &mut None, attribute)
                    .unwrap()
                    .is_none(),
                "{projection}"
            );
            assert_eq!(expression.as_deref(), Some(projection));
            assert_eq!(n2, n);
        }
    }

    #[test]
    fn the_whole_item_needs_nothing() {
        let (mut e, mut n, mut a) = (None, None, None);
        assert!(
            include_ttl(&mut e, &mut n, &mut a, "ttl")
                .unwrap()
                .is_none()
        );
        assert_eq!((e, n, a), (None, None, None));
    }

    #[test]
    fn legacy_attributes_to_get_get_the_name() {
        let mut a = Some(vec!["pk".to_string()]);
        assert!(
            include_ttl(&mut None, &mut None, &mut a, "ttl")
                .unwrap()
                .is_some()
        );
        assert_eq!(a, Some(vec!["pk".to_string(), "ttl".to_string()]));
        assert!(
            include_ttl(&mut None, &mut None, &mut a, "ttl")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn refuses_a_request_that_binds_our_placeholder() {
        let mut expression = Some("pk".to_string());
        let mut n = names(&[("#precise_ttl_attr", "other")]);
        assert!(include_ttl(&mut expression, &mut n, &mut None, "ttl").is_err());
    }
}
