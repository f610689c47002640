//! The lexer of both syntaxes: DynamoDB's expressions (`#name` and `:value` placeholders) and
//! PartiQL's `WHERE` clause (quoted identifiers, `?` parameters, string and number literals).

/// Which syntax is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Expression,
    PartiQl,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Token {
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
    pub(super) fn show(&self) -> String {
        match self {
            Token::Word(w) | Token::NamePh(w) | Token::ValuePh(w) | Token::Num(w) => w.clone(),
            Token::Quoted(q) => format!("\"{q}\""),
            Token::Str(s) => format!("'{s}'"),
            Token::Param(_) => "?".into(),
            Token::Sym(s) => (*s).to_string(),
        }
    }

    pub(super) fn is_word(&self, word: &str) -> bool {
        matches!(self, Token::Word(w) if w.eq_ignore_ascii_case(word))
    }
}

pub(super) fn lex(text: &str, dialect: Dialect) -> Result<Vec<Token>, String> {
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
