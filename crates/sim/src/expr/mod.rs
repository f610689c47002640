//! Expressions: the lexer and parser shared by DynamoDB's expression syntax (conditions, key
//! conditions, filters, updates, projections, with `#name` and `:value` placeholders) and the
//! `WHERE` clause of PartiQL (quoted identifiers, `?` parameters, literals), and their
//! evaluation against an item with DynamoDB's semantics: a comparison with a missing attribute
//! or across types is false, `<>` with a missing attribute is true.
//!
//! Supported: `=  <>  <  <=  >  >=`, `BETWEEN`, `IN`, `AND`, `OR`, `NOT`, parentheses,
//! `attribute_exists`, `attribute_not_exists`, `attribute_type`, `begins_with`, `contains`,
//! `size`, PartiQL's `IS [NOT] MISSING`; updates with `SET a = operand | if_not_exists(a, v)`
//! and `REMOVE`. Top-level attribute names only: a nested path (`a.b`, `a[0]`) or update
//! arithmetic is answered with a ValidationException that says the simulator lacks it.
//!
//! The submodules: `lex` (tokens of both syntaxes), `parse` (the parsers, into the types here)
//! and `eval` (placeholders' and parameters' meaning, and evaluation against an item).

mod eval;
mod lex;
mod parse;
#[cfg(test)]
mod tests;

pub use eval::{Bindings, as_number, check_placeholders};
pub use lex::Dialect;
pub use parse::{parse_condition, parse_partiql, parse_projection, parse_update};

use crate::value::Value;
use std::collections::BTreeSet;

/// An attribute name as written: literally, or through a `#placeholder`.
#[derive(Debug, Clone, PartialEq)]
pub enum NameRef {
    Literal(String),
    Placeholder(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Path(NameRef),
    /// A `:value` placeholder.
    Value(String),
    /// A PartiQL `?`, by position.
    Param(usize),
    Literal(Value),
    Size(NameRef),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Cond {
    Cmp(Operand, CmpOp, Operand),
    Between(Operand, Operand, Operand),
    In(Operand, Vec<Operand>),
    And(Box<Cond>, Box<Cond>),
    Or(Box<Cond>, Box<Cond>),
    Not(Box<Cond>),
    Exists(NameRef),
    NotExists(NameRef),
    Type(NameRef, Operand),
    BeginsWith(Operand, Operand),
    Contains(Operand, Operand),
}

impl Cond {
    /// The conditions joined by top-level `AND`s, in order.
    pub fn conjuncts(self) -> Vec<Cond> {
        match self {
            Cond::And(a, b) => {
                let mut out = a.conjuncts();
                out.extend(b.conjuncts());
                out
            }
            other => vec![other],
        }
    }

    /// Joins conditions with `AND`; `None` for none.
    pub fn all(conds: Vec<Cond>) -> Option<Cond> {
        conds
            .into_iter()
            .reduce(|a, b| Cond::And(Box::new(a), Box::new(b)))
    }
}

/// The placeholders an expression uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Used {
    pub names: BTreeSet<String>,
    pub values: BTreeSet<String>,
}

impl Used {
    pub fn extend(&mut self, other: &Used) {
        self.names.extend(other.names.iter().cloned());
        self.values.extend(other.values.iter().cloned());
    }
}

/// One `SET` action's value.
#[derive(Debug, Clone, PartialEq)]
pub enum SetValue {
    Operand(Operand),
    IfNotExists(NameRef, Box<SetValue>),
}

/// A parsed `UpdateExpression`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Update {
    pub set: Vec<(NameRef, SetValue)>,
    pub remove: Vec<NameRef>,
}

/// A PartiQL `DELETE`: the table, the whole `WHERE` condition, and whether it ends with
/// `RETURNING ALL OLD *`.
#[derive(Debug, Clone, PartialEq)]
pub struct PartiQlDelete {
    pub table: String,
    pub condition: Cond,
    pub returning_old: bool,
    pub parameters: usize,
}
