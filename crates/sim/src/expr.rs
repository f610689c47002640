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
//! Over 700 lines: the lexer, the parser and the evaluator still share one file; the split by
//! responsibility is issue 28's (the simulator's files over 700 lines), not done yet.

use crate::codec::{Names, ValueMap};
use crate::error::DbError;
use crate::value::{Item, Number, Value};
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// Which syntax is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Expression,
    PartiQl,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A bare word: an attribute name, a keyword or a function name.
    Word(String),
    /// A PartiQL double-quoted identifier.
    Quoted(String),
    NamePh(String),
    ValuePh(String),
    Param(usize),
    Str(String),
    Num(String),
    Sym(&'static str),
}

impl Token {
    fn show(&self) -> String {
        match self {
            Token::Word(w) | Token::NamePh(w) | Token::ValuePh(w) | Token::Num(w) => w.clone(),
            Token::Quoted(q) => format!("\"{q}\""),
            Token::Str(s) => format!("'{s}'"),
            Token::Param(_) => "?".into(),
            Token::Sym(s) => (*s).to_string(),
        }
    }

    fn is_word(&self, word: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(word))
    }
}

fn lex(text: &str, dialect: Dialect) -> Result<Vec<Token>, String> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut params = 0;
    let word_char = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        let two = bytes.get(i..i + 2);
        let sym = match two {
            Some(b"<>") => Some("<>"),
            Some(b"!=") if dialect == Dialect::PartiQl => Some("<>"),
            Some(b"<=") => Some("<="),
            Some(b">=") => Some(">="),
            _ => None,
        };
        if let Some(sym) = sym {
            tokens.push(Token::Sym(sym));
            i += 2;
            continue;
        }
        let one = match c {
            b'=' => Some("="),
            b'<' => Some("<"),
            b'>' => Some(">"),
            b'(' => Some("("),
            b')' => Some(")"),
            b',' => Some(","),
            b'.' => Some("."),
            b'[' => Some("["),
            b']' => Some("]"),
            b'+' => Some("+"),
            b'-' if dialect == Dialect::Expression => Some("-"),
            b'*' => Some("*"),
            _ => None,
        };
        if let Some(sym) = one {
            tokens.push(Token::Sym(sym));
            i += 1;
            continue;
        }
        match (c, dialect) {
            (b'#', Dialect::Expression) | (b':', Dialect::Expression) => {
                i += 1;
                while i < bytes.len() && word_char(bytes[i]) {
                    i += 1;
                }
                if i == start + 1 {
                    return Err(format!("Syntax error; token: \"{}\"", c as char));
                }
                let word = text[start..i].to_string();
                tokens.push(if c == b'#' {
                    Token::NamePh(word)
                } else {
                    Token::ValuePh(word)
                });
            }
            (b'?', Dialect::PartiQl) => {
                tokens.push(Token::Param(params));
                params += 1;
                i += 1;
            }
            (b'"', Dialect::PartiQl) | (b'\'', Dialect::PartiQl) => {
                let mut out = String::new();
                i += 1;
                loop {
                    match bytes.get(i) {
                        None => return Err("Unexpected end of input in a quoted token".into()),
                        Some(q) if *q == c => {
                            if bytes.get(i + 1) == Some(&c) {
                                out.push(c as char);
                                i += 2;
                            } else {
                                i += 1;
                                break;
                            }
                        }
                        Some(_) => {
                            let ch = text[i..].chars().next().expect("in bounds");
                            out.push(ch);
                            i += ch.len_utf8();
                        }
                    }
                }
                tokens.push(if c == b'"' {
                    Token::Quoted(out)
                } else {
                    Token::Str(out)
                });
            }
            (b'0'..=b'9', Dialect::PartiQl) | (b'-', Dialect::PartiQl) => {
                i += 1;
                while i < bytes.len()
                    && (bytes[i].is_ascii_digit()
                        || matches!(bytes[i], b'.' | b'e' | b'E')
                        || (matches!(bytes[i], b'+' | b'-') && matches!(bytes[i - 1], b'e' | b'E')))
                {
                    i += 1;
                }
                tokens.push(Token::Num(text[start..i].to_string()));
            }
            _ if word_char(c) => {
                while i < bytes.len() && word_char(bytes[i]) {
                    i += 1;
                }
                tokens.push(Token::Word(text[start..i].to_string()));
            }
            _ => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return Err(format!("Syntax error; token: \"{ch}\""));
            }
        }
    }
    Ok(tokens)
}

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

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    used: Used,
    kind: &'static str,
}

type Parsed<T> = Result<T, String>;

impl Parser {
    fn new(text: &str, dialect: Dialect, kind: &'static str) -> Result<Parser, DbError> {
        let tokens =
            lex(text, dialect).map_err(|m| DbError::validation(format!("Invalid {kind}: {m}")))?;
        Ok(Parser {
            tokens,
            pos: 0,
            used: Used::default(),
            kind,
        })
    }

    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn peek_at(&self, n: usize) -> Option<&Token> {
        self.tokens.get(self.pos + n)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn at_word(&self, word: &str) -> bool {
        self.peek().is_some_and(|t| t.is_word(word))
    }

    fn at_sym(&self, sym: &str) -> bool {
        matches!(self.peek(), Some(Token::Sym(s)) if *s == sym)
    }

    fn syntax(&self) -> String {
        match self.peek() {
            Some(t) => {
                let near: Vec<String> = self.tokens[self.pos.saturating_sub(1)..]
                    .iter()
                    .take(3)
                    .map(Token::show)
                    .collect();
                format!(
                    "Syntax error; token: \"{}\", near: \"{}\"",
                    t.show(),
                    near.join(" ")
                )
            }
            None => "Syntax error; token: <EOF>, near: <EOF>".into(),
        }
    }

    fn expect_sym(&mut self, sym: &str) -> Parsed<()> {
        if self.at_sym(sym) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    fn expect_word(&mut self, word: &str) -> Parsed<()> {
        if self.at_word(word) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.syntax())
        }
    }

    fn finish<T>(self, value: Parsed<T>) -> Result<(T, Used), DbError> {
        let kind = self.kind;
        let value = value.and_then(|v| {
            if self.pos < self.tokens.len() {
                Err(self.syntax())
            } else {
                Ok(v)
            }
        });
        value
            .map(|v| (v, self.used))
            .map_err(|m| DbError::validation(format!("Invalid {kind}: {m}")))
    }

    fn cond(&mut self) -> Parsed<Cond> {
        let mut left = self.and()?;
        while self.at_word("OR") {
            self.pos += 1;
            let right = self.and()?;
            left = Cond::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Parsed<Cond> {
        let mut left = self.not()?;
        while self.at_word("AND") {
            self.pos += 1;
            let right = self.not()?;
            left = Cond::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn not(&mut self) -> Parsed<Cond> {
        if self.at_word("NOT") {
            self.pos += 1;
            return Ok(Cond::Not(Box::new(self.not()?)));
        }
        self.primary()
    }

    fn function_call(&self) -> Option<String> {
        match (self.peek(), self.peek_at(1)) {
            (Some(Token::Word(w)), Some(Token::Sym("("))) => Some(w.to_ascii_lowercase()),
            _ => None,
        }
    }

    fn primary(&mut self) -> Parsed<Cond> {
        if self.at_sym("(") {
            self.pos += 1;
            let inner = self.cond()?;
            self.expect_sym(")")?;
            return Ok(inner);
        }
        if let Some(function) = self.function_call() {
            let boolean = matches!(
                function.as_str(),
                "attribute_exists"
                    | "attribute_not_exists"
                    | "attribute_type"
                    | "begins_with"
                    | "contains"
            );
            if boolean {
                self.pos += 2;
                let cond = match function.as_str() {
                    "attribute_exists" => Cond::Exists(self.path()?),
                    "attribute_not_exists" => Cond::NotExists(self.path()?),
                    "attribute_type" => {
                        let path = self.path()?;
                        self.expect_sym(",")?;
                        Cond::Type(path, self.operand()?)
                    }
                    "begins_with" => {
                        let a = self.operand()?;
                        self.expect_sym(",")?;
                        Cond::BeginsWith(a, self.operand()?)
                    }
                    _ => {
                        let a = self.operand()?;
                        self.expect_sym(",")?;
                        Cond::Contains(a, self.operand()?)
                    }
                };
                self.expect_sym(")")?;
                return Ok(cond);
            }
        }
        let left = self.operand()?;
        let op = match self.peek() {
            Some(Token::Sym("=")) => Some(CmpOp::Eq),
            Some(Token::Sym("<>")) => Some(CmpOp::Ne),
            Some(Token::Sym("<")) => Some(CmpOp::Lt),
            Some(Token::Sym("<=")) => Some(CmpOp::Le),
            Some(Token::Sym(">")) => Some(CmpOp::Gt),
            Some(Token::Sym(">=")) => Some(CmpOp::Ge),
            _ => None,
        };
        if let Some(op) = op {
            self.pos += 1;
            let right = self.operand()?;
            return Ok(Cond::Cmp(left, op, right));
        }
        if self.at_word("BETWEEN") {
            self.pos += 1;
            let low = self.operand()?;
            self.expect_word("AND")?;
            let high = self.operand()?;
            return Ok(Cond::Between(left, low, high));
        }
        if self.at_word("IN") {
            self.pos += 1;
            self.expect_sym("(")?;
            let mut list = vec![self.operand()?];
            while self.at_sym(",") {
                self.pos += 1;
                list.push(self.operand()?);
            }
            self.expect_sym(")")?;
            return Ok(Cond::In(left, list));
        }
        if self.at_word("IS") {
            self.pos += 1;
            let negated = self.at_word("NOT");
            if negated {
                self.pos += 1;
            }
            self.expect_word("MISSING")?;
            let Operand::Path(path) = left else {
                return Err("IS MISSING needs an attribute".into());
            };
            return Ok(if negated {
                Cond::Exists(path)
            } else {
                Cond::NotExists(path)
            });
        }
        Err(self.syntax())
    }

    fn path(&mut self) -> Parsed<NameRef> {
        let name = match self.next() {
            Some(Token::Word(w)) => NameRef::Literal(w),
            Some(Token::Quoted(q)) => NameRef::Literal(q),
            Some(Token::NamePh(p)) => {
                self.used.names.insert(p.clone());
                NameRef::Placeholder(p)
            }
            _ => {
                self.pos -= 1;
                return Err(self.syntax());
            }
        };
        if self.at_sym(".") || self.at_sym("[") {
            return Err(
                "nested attribute paths (a.b, a[0]) are not supported by the simulator".into(),
            );
        }
        Ok(name)
    }

    fn operand(&mut self) -> Parsed<Operand> {
        if let Some(function) = self.function_call() {
            if function == "size" {
                self.pos += 2;
                let path = self.path()?;
                self.expect_sym(")")?;
                return Ok(Operand::Size(path));
            }
            return Err(format!(
                "Invalid function name; function: {function} (or not supported by the simulator)"
            ));
        }
        match self.peek().cloned() {
            Some(Token::ValuePh(v)) => {
                self.pos += 1;
                self.used.values.insert(v.clone());
                Ok(Operand::Value(v))
            }
            Some(Token::Param(i)) => {
                self.pos += 1;
                Ok(Operand::Param(i))
            }
            Some(Token::Str(s)) => {
                self.pos += 1;
                Ok(Operand::Literal(Value::s(s)))
            }
            Some(Token::Num(n)) => {
                self.pos += 1;
                Value::n(&n)
                    .map(Operand::Literal)
                    .map_err(|e| e.to_string())
            }
            Some(Token::Word(w)) if is_keyword(&w) => Err(self.syntax()),
            _ => self.path().map(Operand::Path),
        }
    }

    fn update(&mut self) -> Parsed<Update> {
        let mut update = Update::default();
        let mut seen = BTreeSet::new();
        while let Some(token) = self.next() {
            let clause = match &token {
                Token::Word(w) => w.to_ascii_uppercase(),
                _ => {
                    self.pos -= 1;
                    return Err(self.syntax());
                }
            };
            if !seen.insert(clause.clone()) {
                return Err(format!(
                    "The \"{clause}\" section can only be used once in an update expression;"
                ));
            }
            match clause.as_str() {
                "SET" => loop {
                    let path = self.path()?;
                    self.expect_sym("=")?;
                    let value = self.set_value()?;
                    update.set.push((path, value));
                    if !self.at_sym(",") {
                        break;
                    }
                    self.pos += 1;
                },
                "REMOVE" => loop {
                    update.remove.push(self.path()?);
                    if !self.at_sym(",") {
                        break;
                    }
                    self.pos += 1;
                },
                "ADD" | "DELETE" => {
                    return Err(format!(
                        "the {clause} clause of update expressions is not supported by the simulator"
                    ));
                }
                _ => {
                    self.pos -= 1;
                    return Err(self.syntax());
                }
            }
        }
        if update.set.is_empty() && update.remove.is_empty() {
            return Err("Syntax error; token: <EOF>, near: <EOF>".into());
        }
        Ok(update)
    }

    fn set_value(&mut self) -> Parsed<SetValue> {
        let value = match self.function_call().as_deref() {
            Some("if_not_exists") => {
                self.pos += 2;
                let path = self.path()?;
                self.expect_sym(",")?;
                let inner = self.set_value()?;
                self.expect_sym(")")?;
                SetValue::IfNotExists(path, Box::new(inner))
            }
            Some("list_append") => {
                return Err("list_append is not supported by the simulator".into());
            }
            _ => SetValue::Operand(self.operand()?),
        };
        if self.at_sym("+") || self.at_sym("-") {
            return Err(
                "arithmetic in update expressions is not supported by the simulator".into(),
            );
        }
        Ok(value)
    }
}

fn is_keyword(word: &str) -> bool {
    ["AND", "OR", "NOT", "BETWEEN", "IN", "IS"]
        .iter()
        .any(|k| k.eq_ignore_ascii_case(word))
}

/// Parses a condition (`ConditionExpression`, `KeyConditionExpression`, `FilterExpression`);
/// `kind` names it in error messages.
pub fn parse_condition(text: &str, kind: &'static str) -> Result<(Cond, Used), DbError> {
    if text.trim().is_empty() {
        return Err(DbError::validation(format!(
            "Invalid {kind}: The expression can not be empty;"
        )));
    }
    let mut p = Parser::new(text, Dialect::Expression, kind)?;
    let cond = p.cond();
    p.finish(cond)
}

/// Parses an `UpdateExpression`.
pub fn parse_update(text: &str) -> Result<(Update, Used), DbError> {
    let mut p = Parser::new(text, Dialect::Expression, "UpdateExpression")?;
    let update = p.update();
    let (update, used) = p.finish(update)?;
    let mut paths = BTreeSet::new();
    for path in update.set.iter().map(|(p, _)| p).chain(&update.remove) {
        if !paths.insert(format!("{path:?}")) {
            return Err(DbError::validation(
                "Invalid UpdateExpression: Two document paths overlap with each other; must remove or rewrite one of these paths",
            ));
        }
    }
    Ok((update, used))
}

/// Parses a `ProjectionExpression`.
pub fn parse_projection(text: &str) -> Result<(Vec<NameRef>, Used), DbError> {
    let mut p = Parser::new(text, Dialect::Expression, "ProjectionExpression")?;
    let mut paths = Vec::new();
    let list = (|| {
        loop {
            paths.push(p.path()?);
            if !p.at_sym(",") {
                return Ok(());
            }
            p.pos += 1;
        }
    })();
    let ((), used) = p.finish(list)?;
    Ok((paths, used))
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

/// Parses `DELETE FROM "table" WHERE <condition> [RETURNING ALL OLD *]`, the one PartiQL
/// statement the simulator runs.
pub fn parse_partiql(text: &str) -> Result<PartiQlDelete, DbError> {
    let mut p = Parser::new(text, Dialect::PartiQl, "PartiQL statement")?;
    let parameters = p
        .tokens
        .iter()
        .filter(|t| matches!(t, Token::Param(_)))
        .count();
    if !p.at_word("DELETE") {
        return Err(DbError::validation(
            "Statement wasn't well formed, can't be processed: the simulator runs PartiQL DELETE statements only",
        ));
    }
    let statement = (|| {
        p.expect_word("DELETE")?;
        p.expect_word("FROM")?;
        let table = match p.next() {
            Some(Token::Quoted(t)) | Some(Token::Word(t)) => t,
            _ => {
                p.pos -= 1;
                return Err(p.syntax());
            }
        };
        if p.at_sym(".") {
            return Err("DELETE from an index is not allowed".into());
        }
        p.expect_word("WHERE")?;
        let condition = p.cond()?;
        let returning_old = if p.at_word("RETURNING") {
            p.pos += 1;
            p.expect_word("ALL")?;
            p.expect_word("OLD")?;
            p.expect_sym("*")?;
            true
        } else {
            false
        };
        Ok(PartiQlDelete {
            table,
            condition,
            returning_old,
            parameters,
        })
    })();
    p.finish(statement).map(|(s, _)| s).map_err(|e| match e {
        DbError::Validation(m) => DbError::Validation(format!(
            "Statement wasn't well formed, can't be processed: {}",
            m.trim_start_matches("Invalid PartiQL statement: ")
        )),
        other => other,
    })
}

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
    if let Some(names) = names {
        if !any_expression {
            return Err(DbError::validation(
                "ExpressionAttributeNames can only be specified when using expressions",
            ));
        }
        if names.is_empty() {
            return Err(DbError::validation(
                "ExpressionAttributeNames must not be empty",
            ));
        }
        let mut unused: Vec<&String> = names.keys().filter(|k| !used.names.contains(*k)).collect();
        if !unused.is_empty() {
            unused.sort();
            return Err(DbError::validation(format!(
                "Value provided in ExpressionAttributeNames unused in expressions: keys: {{{}}}",
                join(&unused)
            )));
        }
    }
    if let Some(values) = values {
        if !any_expression {
            return Err(DbError::validation(
                "ExpressionAttributeValues can only be specified when using expressions",
            ));
        }
        if values.is_empty() {
            return Err(DbError::validation(
                "ExpressionAttributeValues must not be empty",
            ));
        }
        let mut unused: Vec<&String> = values
            .keys()
            .filter(|k| !used.values.contains(*k))
            .collect();
        if !unused.is_empty() {
            unused.sort();
            return Err(DbError::validation(format!(
                "Value provided in ExpressionAttributeValues unused in expressions: keys: {{{}}}",
                join(&unused)
            )));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
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
            parse_update("SET #c = :next, #o = :owner, #r = if_not_exists(#r, :now) REMOVE x")
                .unwrap();
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
        let s =
            parse_partiql("DELETE FROM \"a\"\"b\" WHERE \"p\" = ? AND x IS NOT MISSING").unwrap();
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
}
