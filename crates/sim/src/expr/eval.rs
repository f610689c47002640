//! Evaluation: where placeholders and parameters get their meaning ([`Bindings`]), a condition's
//! truth against an item with DynamoDB's semantics, and the check that every placeholder given
//! is used.

use super::{CmpOp, Cond, NameRef, Operand, Used};
use crate::codec::{Names, ValueMap};
use crate::error::DbError;
use crate::value::{Item, Number, Value};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// Where placeholders and parameters get their meaning.
#[derive(Debug, Clone, Copy)]
pub struct Bindings<'a> {
    pub names: Option<&'a Names>,
    pub values: Option<&'a ValueMap>,
    pub params: &'a [Value],
    /// For messages: "ConditionExpression", ...
    pub kind: &'static str,
}

impl<'a> Bindings<'a> {
    pub fn new(names: Option<&'a Names>, values: Option<&'a ValueMap>) -> Self {
        Bindings {
            names,
            values,
            params: &[],
            kind: "ConditionExpression",
        }
    }

    pub fn params(params: &'a [Value]) -> Self {
        Bindings {
            names: None,
            values: None,
            params,
            kind: "PartiQL statement",
        }
    }

    pub fn kind(mut self, kind: &'static str) -> Self {
        self.kind = kind;
        self
    }

    pub fn name<'n>(&self, name: &'n NameRef) -> Result<&'n str, DbError>
    where
        'a: 'n,
    {
        match name {
            NameRef::Literal(n) => Ok(n),
            NameRef::Placeholder(p) => self
                .names
                .and_then(|m| m.get(p))
                .map(String::as_str)
                .ok_or_else(|| {
                    DbError::validation(format!(
                        "Invalid {}: An expression attribute name used in the document path is not defined; attribute name: {p}",
                        self.kind
                    ))
                }),
        }
    }

    fn constant<'v>(&self, operand: &'v Operand) -> Result<Option<&'v Value>, DbError>
    where
        'a: 'v,
    {
        match operand {
            Operand::Value(p) => self.values.and_then(|m| m.get(p)).map(Some).ok_or_else(|| {
                DbError::validation(format!(
                    "Invalid {}: An expression attribute value used in expression is not defined; attribute value: {p}",
                    self.kind
                ))
            }),
            Operand::Param(i) => self.params.get(*i).map(Some).ok_or_else(|| {
                DbError::validation(
                    "Number of parameters in request and statement don't match.",
                )
            }),
            Operand::Literal(v) => Ok(Some(v)),
            _ => Ok(None),
        }
    }

    /// The value of `operand` for `item` (`None`: a missing attribute).
    pub fn operand<'v>(
        &self,
        operand: &'v Operand,
        item: Option<&'v Item>,
    ) -> Result<Option<Cow<'v, Value>>, DbError>
    where
        'a: 'v,
    {
        Ok(match operand {
            Operand::Value(_) | Operand::Param(_) | Operand::Literal(_) => {
                self.constant(operand)?.map(Cow::Borrowed)
            }
            Operand::Path(name) => {
                let name = self.name(name)?;
                item.and_then(|i| i.get(name)).map(Cow::Borrowed)
            }
            Operand::Size(name) => {
                let name = self.name(name)?;
                let size = match item.and_then(|i| i.get(name)) {
                    None => return Ok(None),
                    Some(Value::S(s)) => s.len(),
                    Some(Value::B(b)) => b.len(),
                    Some(Value::L(l)) => l.len(),
                    Some(Value::M(m)) => m.len(),
                    Some(Value::Ss(s)) => s.len(),
                    Some(Value::Ns(n)) => n.len(),
                    Some(Value::Bs(b)) => b.len(),
                    Some(_) => return Ok(None),
                };
                Some(Cow::Owned(Value::int(size as i64)))
            }
        })
    }

    /// Evaluates `cond` against `item` (`None`: no such item).
    pub fn eval(&self, cond: &Cond, item: Option<&Item>) -> Result<bool, DbError> {
        Ok(match cond {
            Cond::And(a, b) => self.eval(a, item)? && self.eval(b, item)?,
            Cond::Or(a, b) => self.eval(a, item)? || self.eval(b, item)?,
            Cond::Not(a) => !self.eval(a, item)?,
            Cond::Exists(name) => {
                let name = self.name(name)?;
                item.and_then(|i| i.get(name)).is_some()
            }
            Cond::NotExists(name) => {
                let name = self.name(name)?;
                item.and_then(|i| i.get(name)).is_none()
            }
            Cond::Type(name, type_operand) => {
                let name = self.name(name)?;
                let wanted = match self.operand(type_operand, None)?.as_deref() {
                    Some(Value::S(t)) if VALID_TYPES.contains(&&**t) => t.to_string(),
                    other => {
                        return Err(DbError::validation(format!(
                            "Invalid {}: Invalid attribute type name found; type: {}, valid types: {{ B,NULL,SS,BOOL,L,BS,N,NS,S,M }}",
                            self.kind,
                            other.map(|v| format!("{v:?}")).unwrap_or_default()
                        )));
                    }
                };
                item.and_then(|i| i.get(name))
                    .is_some_and(|v| v.type_name() == wanted)
            }
            Cond::Cmp(a, op, b) => {
                let a = self.operand(a, item)?;
                let b = self.operand(b, item)?;
                match (a, b, op) {
                    (Some(a), Some(b), CmpOp::Eq) => equal(&a, &b),
                    (Some(a), Some(b), CmpOp::Ne) => !equal(&a, &b),
                    (_, _, CmpOp::Ne) => true,
                    (Some(a), Some(b), op) => a.compare(&b).is_some_and(|o| match op {
                        CmpOp::Lt => o == Ordering::Less,
                        CmpOp::Le => o != Ordering::Greater,
                        CmpOp::Gt => o == Ordering::Greater,
                        CmpOp::Ge => o != Ordering::Less,
                        CmpOp::Eq | CmpOp::Ne => false,
                    }),
                    _ => false,
                }
            }
            Cond::Between(x, low, high) => {
                let low = self.operand(low, item)?;
                let high = self.operand(high, item)?;
                if let (Some(l), Some(h)) = (&low, &high)
                    && l.compare(h) == Some(Ordering::Greater)
                {
                    return Err(DbError::validation(format!(
                        "Invalid {}: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {{{}:{}}}, upper bound operand: AttributeValue: {{{}:{}}}",
                        self.kind,
                        l.type_name(),
                        show(l),
                        h.type_name(),
                        show(h)
                    )));
                }
                match (self.operand(x, item)?, low, high) {
                    (Some(x), Some(l), Some(h)) => {
                        x.compare(&l).is_some_and(|o| o != Ordering::Less)
                            && x.compare(&h).is_some_and(|o| o != Ordering::Greater)
                    }
                    _ => false,
                }
            }
            Cond::In(x, list) => match self.operand(x, item)? {
                None => false,
                Some(x) => {
                    let mut found = false;
                    for candidate in list {
                        if let Some(c) = self.operand(candidate, item)?
                            && equal(&x, &c)
                        {
                            found = true;
                            break;
                        }
                    }
                    found
                }
            },
            Cond::BeginsWith(a, prefix) => {
                match (self.operand(a, item)?, self.operand(prefix, item)?) {
                    (Some(a), Some(p)) => match (&*a, &*p) {
                        (Value::S(a), Value::S(p)) => a.starts_with(&**p),
                        (Value::B(a), Value::B(p)) => a.starts_with(p),
                        _ => false,
                    },
                    _ => false,
                }
            }
            Cond::Contains(a, b) => match (self.operand(a, item)?, self.operand(b, item)?) {
                (Some(a), Some(b)) => match (&*a, &*b) {
                    (Value::S(a), Value::S(b)) => a.contains(&**b),
                    (Value::B(a), Value::B(b)) => {
                        b.is_empty() || a.windows(b.len()).any(|w| w == &**b)
                    }
                    (Value::Ss(set), Value::S(b)) => set.iter().any(|s| **s == **b),
                    (Value::Ns(set), Value::N(b)) => set.iter().any(|n| n == b),
                    (Value::Bs(set), Value::B(b)) => set.iter().any(|x| x == b),
                    (Value::L(list), b) => list.iter().any(|x| equal(x, b)),
                    _ => false,
                },
                _ => false,
            },
        })
    }
}

const VALID_TYPES: [&str; 10] = ["B", "NULL", "SS", "BOOL", "L", "BS", "N", "NS", "S", "M"];

fn show(v: &Value) -> String {
    match v {
        Value::S(s) => s.to_string(),
        Value::N(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// DynamoDB's equality: sets compare as sets.
fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Ss(x), Value::Ss(y)) => same_set(x, y),
        (Value::Ns(x), Value::Ns(y)) => same_set(x, y),
        (Value::Bs(x), Value::Bs(y)) => same_set(x, y),
        _ => a == b,
    }
}

fn same_set<T: Ord>(x: &[T], y: &[T]) -> bool {
    let a: BTreeSet<&T> = x.iter().collect();
    let b: BTreeSet<&T> = y.iter().collect();
    a == b
}

/// Checks that every placeholder given is used and (for names) that none is missing, with
/// DynamoDB's messages.
pub fn check_placeholders(
    used: &Used,
    names: Option<&Names>,
    values: Option<&ValueMap>,
    any_expression: bool,
) -> Result<(), DbError> {
    let names = names.map(|n| n.keys().collect());
    check_given(
        "ExpressionAttributeNames",
        names,
        &used.names,
        any_expression,
    )?;
    let values = values.map(|v| v.keys().collect());
    check_given(
        "ExpressionAttributeValues",
        values,
        &used.values,
        any_expression,
    )
}

/// One map of placeholders (`what`, its keys given when the request has it) against those
/// the expressions use: the names and the values are checked alike.
fn check_given(
    what: &str,
    given: Option<Vec<&String>>,
    used: &BTreeSet<String>,
    any_expression: bool,
) -> Result<(), DbError> {
    let Some(given) = given else {
        return Ok(());
    };
    if !any_expression {
        return Err(DbError::validation(format!(
            "{what} can only be specified when using expressions"
        )));
    }
    if given.is_empty() {
        return Err(DbError::validation(format!("{what} must not be empty")));
    }
    let mut unused: Vec<&String> = given.into_iter().filter(|k| !used.contains(*k)).collect();
    if !unused.is_empty() {
        unused.sort();
        return Err(DbError::validation(format!(
            "Value provided in {what} unused in expressions: keys: {{{}}}",
            join(&unused)
        )));
    }
    Ok(())
}

fn join(keys: &[&String]) -> String {
    keys.iter()
        .map(|k| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The number in `value`, when it is one.
pub fn as_number(value: &Value) -> Option<&Number> {
    match value {
        Value::N(n) => Some(n),
        _ => None,
    }
}
