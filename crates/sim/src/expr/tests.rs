//! The expression module's unit tests: parsing, evaluation and DynamoDB's messages.

use super::*;
use crate::codec::{Names, ValueMap};
use crate::error::DbError;
use crate::value::Item;
use std::collections::HashMap;

fn names(pairs: &[(&str, &str)]) -> Names {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn values(pairs: &[(&str, Value)]) -> ValueMap {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.clone()))
        .collect()
}

fn n(s: &str) -> Value {
    Value::n(s).unwrap()
}

#[test]
fn the_sweepers_condition_holds_for_a_due_number_and_fails_otherwise() {
    let (cond, used) = parse_condition(
        "attribute_type(#ttl, :number) AND #ttl BETWEEN :oldest AND :now",
        "ConditionExpression",
    )
    .unwrap();
    assert_eq!(used.names.len(), 1);
    assert_eq!(used.values.len(), 3);
    let names = names(&[("#ttl", "ttl")]);
    let values = values(&[
        (":number", Value::s("N")),
        (":oldest", n("1600000000")),
        (":now", n("1800000000.5")),
    ]);
    let b = Bindings::new(Some(&names), Some(&values));
    let item = |ttl: Value| Item::new().with("pk", Value::s("a")).with("ttl", ttl);
    assert!(b.eval(&cond, Some(&item(n("1800000000")))).unwrap());
    assert!(b.eval(&cond, Some(&item(n("1800000000.5")))).unwrap());
    assert!(!b.eval(&cond, Some(&item(n("1800000001")))).unwrap());
    assert!(!b.eval(&cond, Some(&item(Value::s("1700000000")))).unwrap());
    assert!(!b.eval(&cond, Some(&Item::new())).unwrap());
    assert!(!b.eval(&cond, None).unwrap());
}

#[test]
fn comparisons_follow_dynamodb() {
    let item = Item::new().with("a", n("5")).with("s", Value::s("abc"));
    let values = values(&[(":five", n("5")), (":x", Value::s("ab"))]);
    let b = Bindings::new(None, Some(&values));
    let eval = |text: &str| {
        let (c, _) = parse_condition(text, "ConditionExpression").unwrap();
        b.eval(&c, Some(&item)).unwrap()
    };
    assert!(eval("a = :five"));
    assert!(eval("a <= :five AND NOT a < :five"));
    assert!(
        eval("missing <> :five"),
        "<> with a missing attribute is true"
    );
    assert!(!eval("missing = :five"));
    assert!(!eval("s < :five"), "across types: false");
    assert!(eval("begins_with(s, :x) OR a > :five"));
    assert!(eval("(a IN (:x, :five))"));
    assert!(eval("size(s) < :five"));
    assert!(eval("attribute_exists(a) AND attribute_not_exists(b)"));
    assert!(eval("contains(s, :x)"));
}

#[test]
fn placeholders_must_be_defined_and_used() {
    let (cond, used) = parse_condition("#a = :v", "ConditionExpression").unwrap();
    let b = Bindings::new(None, None);
    let err = b.eval(&cond, Some(&Item::new())).unwrap_err();
    assert!(err.to_string().contains("#a"), "{err}");
    let extra = names(&[("#a", "a"), ("#b", "b")]);
    let err = check_placeholders(&used, Some(&extra), None, true).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Value provided in ExpressionAttributeNames unused in expressions: keys: {#b}"
    );
    let empty: HashMap<String, Value> = HashMap::new();
    assert!(check_placeholders(&used, None, Some(&empty), true).is_err());
}

#[test]
fn syntax_errors_and_unsupported_shapes_are_validation_errors_not_panics() {
    for text in [
        "",
        "a =",
        "= a",
        "a BETWEEN :x",
        "attribute_exists(",
        "a.b = :x",
        "a[0] = :x",
        "foo(a) = :x",
        "(a = :x",
        "a = :x)",
        "#",
        "a = :x ,",
        "a ==== b",
        "é = :x",
    ] {
        match parse_condition(text, "ConditionExpression") {
            Err(DbError::Validation(m)) => {
                assert!(m.starts_with("Invalid ConditionExpression"), "{m}")
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn between_bounds_out_of_order_are_refused() {
    let (cond, _) = parse_condition("a BETWEEN :hi AND :lo", "ConditionExpression").unwrap();
    let values = values(&[(":hi", n("5")), (":lo", n("4"))]);
    let b = Bindings::new(None, Some(&values));
    assert!(matches!(
        b.eval(&cond, Some(&Item::new())),
        Err(DbError::Validation(_))
    ));
}

#[test]
fn update_expressions_set_and_remove() {
    let (u, used) =
        parse_update("SET #c = :next, #o = :owner, #r = if_not_exists(#r, :now) REMOVE x").unwrap();
    assert_eq!(u.set.len(), 3);
    assert_eq!(u.remove, vec![NameRef::Literal("x".into())]);
    assert_eq!(used.names.len(), 3);
    assert!(parse_update("SET a = :a REMOVE a").is_err());
    assert!(parse_update("SET a = a + :one").is_err());
    assert!(parse_update("SET a = :a SET b = :b").is_err());
    assert!(parse_update("ADD a :one").is_err());
    assert!(parse_update("").is_err());
}

#[test]
fn the_adapters_partiql_delete_parses() {
    let s = parse_partiql(
        "DELETE FROM \"t\" WHERE \"pk\" = ? AND \"sk\" = ? AND \
         attribute_type(\"ttl\", 'N') AND \"ttl\" BETWEEN ? AND ? RETURNING ALL OLD *",
    )
    .unwrap();
    assert_eq!(s.table, "t");
    assert!(s.returning_old);
    assert_eq!(s.parameters, 4);
    assert_eq!(s.condition.clone().conjuncts().len(), 4);
    let s = parse_partiql("delete from my_table where pk = 'a' and ttl <= 5").unwrap();
    assert_eq!(s.table, "my_table");
    assert!(!s.returning_old);
    let s = parse_partiql("DELETE FROM \"a\"\"b\" WHERE \"p\" = ? AND x IS NOT MISSING").unwrap();
    assert_eq!(s.table, "a\"b");
    for bad in [
        "SELECT * FROM t",
        "DELETE FROM t",
        "DELETE FROM t WHERE",
        "DELETE FROM t WHERE pk = ? RETURNING ALL NEW *",
        "DELETE FROM \"t WHERE pk = ?",
        "DELETE FROM t.i WHERE pk = ?",
    ] {
        assert!(
            matches!(parse_partiql(bad), Err(DbError::Validation(_))),
            "{bad}"
        );
    }
}
