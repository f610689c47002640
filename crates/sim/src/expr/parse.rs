//! The parsers: conditions (`ConditionExpression`, `KeyConditionExpression`,
//! `FilterExpression`), `UpdateExpression`, `ProjectionExpression` and PartiQL's `DELETE`, each
//! with the placeholders it uses, and DynamoDB's messages for what they refuse.

use super::lex::{Dialect, Token, lex};
use super::{CmpOp, Cond, NameRef, Operand, PartiQlDelete, SetValue, Update, Used};
use crate::error::DbError;
use crate::value::Value;
use std::collections::BTreeSet;

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
        let at = self.at_sym(sym);
        self.step_over(at)
    }

    fn expect_word(&mut self, word: &str) -> Parsed<()> {
        let at = self.at_word(word);
        self.step_over(at)
    }

    /// Steps over the token the parser expected when it is `at` it, else a syntax error.
    fn step_over(&mut self, at: bool) -> Parsed<()> {
        if at {
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
        self.chain("OR", Self::and, Cond::Or)
    }

    fn and(&mut self) -> Parsed<Cond> {
        self.chain("AND", Self::not, Cond::And)
    }

    /// `next (WORD next)*`, joined from the left: OR binds looser than AND, AND than NOT.
    fn chain(
        &mut self,
        word: &str,
        next: fn(&mut Self) -> Parsed<Cond>,
        join: fn(Box<Cond>, Box<Cond>) -> Cond,
    ) -> Parsed<Cond> {
        let mut left = next(self)?;
        while self.at_word(word) {
            self.pos += 1;
            let right = next(self)?;
            left = join(Box::new(left), Box::new(right));
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
