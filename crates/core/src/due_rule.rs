//! The expiry rule as text: the one definition of "this item is due", rendered for every syntax
//! that evaluates it at the store.
//!
//! An item is due at `now` when its TTL attribute is a Number within `[now − 5 years, now]`
//! ([`DueWindow`](crate::DueWindow)); [`Verdict`](crate::Verdict) is the same rule in Rust. The
//! store evaluates it three ways: as the `ConditionExpression` of a `DeleteItem`, as the `WHERE`
//! tail of a PartiQL `DELETE`, and negated as the filter that hides expired items from readers.
//! All three are [`render`] with that syntax's tokens, so they cannot drift apart.

/// The tokens one syntax uses for the rule's four parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokens<'a> {
    /// The TTL attribute (a `#name` placeholder, or a quoted PartiQL identifier).
    pub attribute: &'a str,
    /// The type tag of a Number (a `:value` placeholder bound to "N", or the literal `'N'`).
    pub number_type: &'a str,
    /// The oldest TTL that still counts (now − 5 years).
    pub oldest: &'a str,
    /// The current instant.
    pub now: &'a str,
}

/// `attribute_type(ttl, N) AND ttl BETWEEN oldest AND now`, in the given tokens.
///
/// The `BETWEEN` alone is already false for a missing or non-Number TTL; the type test states the
/// rule instead of leaning on that, and keeps a String TTL that sorts between the bounds safe.
pub fn render(t: Tokens<'_>) -> String {
    format!(
        "attribute_type({a}, {n}) AND {a} BETWEEN {o} AND {now}",
        a = t.attribute,
        n = t.number_type,
        o = t.oldest,
        now = t.now
    )
}

/// The `ConditionExpression` placeholders of a conditional delete; bind `:number` to the String
/// "N" and the other two to the window's bounds as Numbers.
pub const CONDITION_TOKENS: Tokens<'static> = Tokens {
    attribute: "#ttl",
    number_type: ":number",
    oldest: ":oldest",
    now: ":now",
};

/// The rule as a `ConditionExpression`, with [`CONDITION_TOKENS`].
pub fn condition_expression() -> String {
    render(CONDITION_TOKENS)
}

/// A PartiQL identifier: double-quoted, inner quotes doubled.
pub fn partiql_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The rule as the tail of a PartiQL `WHERE`, with the bounds as the last two `?` parameters
/// (oldest, then now).
pub fn partiql_condition(ttl_attribute: &str) -> String {
    let attribute = partiql_identifier(ttl_attribute);
    render(Tokens {
        attribute: &attribute,
        number_type: "'N'",
        oldest: "?",
        now: "?",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_filter::ReadFilter;
    use crate::time::Timestamp;

    /// Maps each rendering back onto the condition's placeholders: if any syntax changed the
    /// rule (an operator, an operand's order, a bound), the texts differ.
    #[test]
    fn every_rendering_states_the_same_rule() {
        let condition = condition_expression();
        assert_eq!(
            condition,
            "attribute_type(#ttl, :number) AND #ttl BETWEEN :oldest AND :now"
        );

        let partiql = partiql_condition("ttl")
            .replace("\"ttl\"", "#ttl")
            .replace("'N'", ":number")
            .replacen('?', ":oldest", 1)
            .replacen('?', ":now", 1);
        assert_eq!(partiql, condition);

        let filter = ReadFilter::hide_expired("ttl", Timestamp::from_secs(1_800_000_000));
        let mut hidden = filter.expression.clone();
        let placeholders = filter.names.iter().map(|(p, _)| p);
        for placeholder in placeholders.chain(filter.values.iter().map(|(p, _)| p)) {
            let canonical = match placeholder.as_str() {
                "#precise_ttl_attr" => "#ttl",
                ":precise_ttl_number" => ":number",
                ":precise_ttl_oldest" => ":oldest",
                ":precise_ttl_now" => ":now",
                other => panic!("unexpected placeholder {other}"),
            };
            hidden = hidden.replace(placeholder.as_str(), canonical);
        }
        assert_eq!(hidden, format!("NOT ({condition})"));
    }

    #[test]
    fn partiql_identifiers_are_quoted() {
        assert_eq!(
            partiql_condition("my \"ttl\""),
            "attribute_type(\"my \"\"ttl\"\"\", 'N') AND \"my \"\"ttl\"\"\" BETWEEN ? AND ?"
        );
    }
}
