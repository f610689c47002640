//! Attribute values as DynamoDB holds them: [`Number`] (a decimal, normalised and ordered as
//! DynamoDB orders numbers), [`Value`] (every attribute type), [`KeyValue`] (the three key
//! types), [`Item`], DynamoDB's item size rules, which capacity units are computed from, and
//! [`BINARY_TEXT`], how a Binary is written as text (the wire format's and the logs').

use base64::Engine;
use base64::engine::{GeneralPurpose, GeneralPurposeConfig};
use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// An attribute name. Names are shared between the items of a table.
pub type Name = Arc<str>;

/// A Binary's bytes as text, in DynamoDB's JSON and in the simulator's logs and stats: standard
/// base64 with whole padding. Bits past the last byte are ignored on decoding (`QR==` reads as
/// `A`), as the simulator's own decoder ignored them before it used this crate.
pub const BINARY_TEXT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// Why a Number was refused, in DynamoDB's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    #[error("The parameter cannot be converted to a numeric value: {0}")]
    NotNumeric(String),
    #[error("Attempting to store more than 38 significant digits in a Number")]
    TooPrecise,
    #[error(
        "Number overflow. Attempting to store a number with magnitude larger than supported range"
    )]
    Overflow,
    #[error(
        "Number underflow. Attempting to store a number with magnitude smaller than supported range"
    )]
    Underflow,
}

/// A DynamoDB Number: up to 38 significant digits, kept as its canonical plain decimal text
/// (`"1.5"` for `"01.50"` or `"15E-1"`), which is what DynamoDB returns. Equal numbers have equal
/// text, so `Eq` and `Hash` are textual; `Ord` is numeric. The text is shared: an item, its row
/// key and its index entry hold one copy.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Number(Arc<str>);

impl Number {
    /// Parses DynamoDB's number syntax: an optional sign, digits with an optional point, and an
    /// optional exponent.
    pub fn parse(text: &str) -> Result<Number, NumberError> {
        let bad = || NumberError::NotNumeric(text.to_string());
        let bytes = text.as_bytes();
        let mut i = 0;
        let negative = match bytes.first() {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let mut digits: Vec<u8> = Vec::with_capacity(bytes.len());
        let mut exponent: i64 = 0;
        let mut seen_digit = false;
        let mut seen_point = false;
        while i < bytes.len() {
            match bytes[i] {
                b'0'..=b'9' => {
                    seen_digit = true;
                    digits.push(bytes[i]);
                    if seen_point {
                        exponent -= 1;
                    }
                }
                b'.' if !seen_point => seen_point = true,
                b'e' | b'E' => break,
                _ => return Err(bad()),
            }
            i += 1;
        }
        if !seen_digit {
            return Err(bad());
        }
        if i < bytes.len() {
            // The exponent.
            let rest = &text[i + 1..];
            let e: i64 = rest
                .strip_prefix('+')
                .unwrap_or(rest)
                .parse()
                .map_err(|_| bad())?;
            if e.abs() > 10_000 {
                return Err(if e > 0 {
                    NumberError::Overflow
                } else {
                    NumberError::Underflow
                });
            }
            exponent += e;
        }
        let first = digits.iter().position(|d| *d != b'0');
        let Some(first) = first else {
            return Ok(Number(Arc::from("0")));
        };
        digits.drain(..first);
        while digits.last() == Some(&b'0') {
            digits.pop();
            exponent += 1;
        }
        if digits.len() > 38 {
            return Err(NumberError::TooPrecise);
        }
        // value = digits × 10^exponent; its magnitude is 10^(len + exponent - 1).
        let magnitude = digits.len() as i64 + exponent - 1;
        if magnitude > 125 {
            return Err(NumberError::Overflow);
        }
        if magnitude < -130 {
            return Err(NumberError::Underflow);
        }
        let mut out = String::with_capacity(digits.len() + 4);
        if negative {
            out.push('-');
        }
        let digits = std::str::from_utf8(&digits).map_err(|_| bad())?;
        if exponent >= 0 {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', exponent as usize));
        } else {
            let point = digits.len() as i64 + exponent;
            if point > 0 {
                out.push_str(&digits[..point as usize]);
                out.push('.');
                out.push_str(&digits[point as usize..]);
            } else {
                out.push_str("0.");
                out.extend(std::iter::repeat_n('0', (-point) as usize));
                out.push_str(digits);
            }
        }
        Ok(Number(Arc::from(out)))
    }

    /// The canonical text, as DynamoDB returns it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// DynamoDB's size of a number: about one byte per two significant digits, plus one.
    fn size(&self) -> usize {
        let digits: Vec<u8> = self.0.bytes().filter(u8::is_ascii_digit).collect();
        let first = digits
            .iter()
            .position(|d| *d != b'0')
            .unwrap_or(digits.len());
        let last = digits
            .iter()
            .rposition(|d| *d != b'0')
            .map_or(first, |l| l + 1);
        (last - first).div_ceil(2) + 1
    }

    fn negative(&self) -> bool {
        self.0.starts_with('-')
    }

    /// Compares two non-negative canonical texts.
    fn cmp_magnitude(a: &str, b: &str) -> Ordering {
        let (ai, af) = a.split_once('.').unwrap_or((a, ""));
        let (bi, bf) = b.split_once('.').unwrap_or((b, ""));
        // Canonical integer parts have no leading zeros ("0" alone for values below one).
        ai.len()
            .cmp(&bi.len())
            .then_with(|| ai.cmp(bi))
            // Canonical fractions have no trailing zeros: byte order is numeric order.
            .then_with(|| af.cmp(bf))
    }
}

impl Ord for Number {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self.negative(), other.negative()) {
            (false, false) => Number::cmp_magnitude(&self.0, &other.0),
            (true, true) => Number::cmp_magnitude(&other.0[1..], &self.0[1..]),
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
        }
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Debug for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Any attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    S(Arc<str>),
    N(Number),
    B(Box<[u8]>),
    Bool(bool),
    Null,
    L(Box<[Value]>),
    M(Box<[(Name, Value)]>),
    Ss(Box<[Box<str>]>),
    Ns(Box<[Number]>),
    Bs(Box<[Box<[u8]>]>),
}

impl Value {
    /// A String.
    pub fn s(text: impl Into<String>) -> Value {
        Value::S(Arc::from(text.into()))
    }

    /// A Number from its text.
    pub fn n(text: &str) -> Result<Value, NumberError> {
        Number::parse(text).map(Value::N)
    }

    /// A Number from an integer (always valid).
    pub fn int(n: i64) -> Value {
        Value::N(Number::parse(&n.to_string()).expect("an integer is a number"))
    }

    /// The type's name, as `attribute_type` spells it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::S(_) => "S",
            Value::N(_) => "N",
            Value::B(_) => "B",
            Value::Bool(_) => "BOOL",
            Value::Null => "NULL",
            Value::L(_) => "L",
            Value::M(_) => "M",
            Value::Ss(_) => "SS",
            Value::Ns(_) => "NS",
            Value::Bs(_) => "BS",
        }
    }

    /// DynamoDB's size of the value (without its name).
    pub fn size(&self) -> usize {
        match self {
            Value::S(s) => s.len(),
            Value::N(n) => n.size(),
            Value::B(b) => b.len(),
            Value::Bool(_) | Value::Null => 1,
            Value::L(l) => 3 + l.iter().map(|v| v.size() + 1).sum::<usize>(),
            Value::M(m) => 3 + m.iter().map(|(k, v)| k.len() + v.size() + 1).sum::<usize>(),
            Value::Ss(s) => s.iter().map(|s| s.len()).sum(),
            Value::Ns(n) => n.iter().map(Number::size).sum(),
            Value::Bs(b) => b.iter().map(|b| b.len()).sum(),
        }
    }

    /// The value as a key value, when it is a String, Number or Binary.
    pub fn as_key(&self) -> Option<KeyValue> {
        match self {
            Value::S(s) => Some(KeyValue::S(s.clone())),
            Value::N(n) => Some(KeyValue::N(n.clone())),
            Value::B(b) => Some(KeyValue::B(b.clone())),
            _ => None,
        }
    }

    /// Order between two values of one scalar type (S, N or B); `None` across types or for
    /// other types, where DynamoDB's `<` is false.
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::S(a), Value::S(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (Value::N(a), Value::N(b)) => Some(a.cmp(b)),
            (Value::B(a), Value::B(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }
}

/// The scalar type a key attribute is declared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalarType {
    S,
    N,
    B,
}

impl ScalarType {
    pub fn parse(text: &str) -> Option<ScalarType> {
        match text {
            "S" => Some(ScalarType::S),
            "N" => Some(ScalarType::N),
            "B" => Some(ScalarType::B),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ScalarType::S => "S",
            ScalarType::N => "N",
            ScalarType::B => "B",
        }
    }
}

/// The value of a key attribute: ordered as DynamoDB orders sort keys (UTF-8 bytes, numbers,
/// bytes). One attribute has one type, so the order across types never matters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyValue {
    S(Arc<str>),
    N(Number),
    B(Box<[u8]>),
}

impl KeyValue {
    /// An empty String or Binary, which DynamoDB refuses as a key of a table or an index.
    pub fn is_empty(&self) -> bool {
        match self {
            KeyValue::S(s) => s.is_empty(),
            KeyValue::B(b) => b.is_empty(),
            KeyValue::N(_) => false,
        }
    }

    pub fn scalar_type(&self) -> ScalarType {
        match self {
            KeyValue::S(_) => ScalarType::S,
            KeyValue::N(_) => ScalarType::N,
            KeyValue::B(_) => ScalarType::B,
        }
    }

    pub fn to_value(&self) -> Value {
        match self {
            KeyValue::S(s) => Value::S(s.clone()),
            KeyValue::N(n) => Value::N(n.clone()),
            KeyValue::B(b) => Value::B(b.clone()),
        }
    }

    /// Bytes that identify the value within its type, for hashing into partitions.
    pub fn bytes(&self) -> &[u8] {
        match self {
            KeyValue::S(s) => s.as_bytes(),
            KeyValue::N(n) => n.as_str().as_bytes(),
            KeyValue::B(b) => b,
        }
    }

    /// Short text for logs and stats: the string, the number, or base64 of the bytes.
    pub fn text(&self) -> String {
        match self {
            KeyValue::S(s) => s.to_string(),
            KeyValue::N(n) => n.to_string(),
            KeyValue::B(b) => BINARY_TEXT.encode(b),
        }
    }
}

/// One item: its attributes, each name once, in no particular order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Item {
    attributes: Vec<(Name, Value)>,
}

impl Item {
    pub fn new() -> Item {
        Item::default()
    }

    /// An item from name–value pairs; a later pair of the same name wins.
    pub fn from_pairs<N: AsRef<str>>(pairs: impl IntoIterator<Item = (N, Value)>) -> Item {
        let mut item = Item::new();
        for (name, value) in pairs {
            item.set(Name::from(name.as_ref()), value);
        }
        item
    }

    /// Adds or replaces one attribute (builder style).
    pub fn with(mut self, name: &str, value: Value) -> Item {
        self.set(Name::from(name), value);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, v)| v)
    }

    pub fn set(&mut self, name: Name, value: Value) {
        match self.attributes.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.attributes.push((name, value)),
        }
    }

    pub fn remove(&mut self, name: &str) -> Option<Value> {
        let at = self.attributes.iter().position(|(n, _)| &**n == name)?;
        Some(self.attributes.swap_remove(at).1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Name, &Value)> {
        self.attributes.iter().map(|(n, v)| (n, v))
    }

    pub fn len(&self) -> usize {
        self.attributes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.attributes.is_empty()
    }

    /// DynamoDB's item size: every name's and value's size.
    pub fn size(&self) -> usize {
        self.attributes
            .iter()
            .map(|(n, v)| n.len() + v.size())
            .sum()
    }

    /// Replaces each name by the table's shared copy and trims spare capacity.
    pub(crate) fn intern(&mut self, mut intern: impl FnMut(&Name) -> Name) {
        for (name, _) in &mut self.attributes {
            *name = intern(name);
        }
        self.attributes.shrink_to_fit();
    }

    /// Keeps only the named attributes.
    pub fn project(&self, names: &[&str]) -> Item {
        Item {
            attributes: self
                .attributes
                .iter()
                .filter(|(n, _)| names.contains(&&**n))
                .cloned()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Number {
        Number::parse(s).unwrap()
    }

    #[test]
    fn numbers_are_normalised_as_dynamodb_returns_them() {
        for (input, canonical) in [
            ("1", "1"),
            ("01.50", "1.5"),
            ("-0", "0"),
            ("0.000", "0"),
            ("15E-1", "1.5"),
            ("1e3", "1000"),
            ("+7", "7"),
            (".5", "0.5"),
            ("5.", "5"),
            ("-0.0012", "-0.0012"),
            ("1800000000.123", "1800000000.123"),
        ] {
            assert_eq!(n(input).as_str(), canonical, "{input}");
        }
        for bad in ["", "-", "abc", "1.2.3", "1e", "--1", " 1", "0x10"] {
            assert!(Number::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Number::parse(&"1".repeat(39)), Err(NumberError::TooPrecise));
        assert_eq!(Number::parse("1e126"), Err(NumberError::Overflow));
    }

    #[test]
    fn numbers_order_numerically() {
        let mut v: Vec<Number> = ["10", "9", "-1", "-10", "0", "0.5", "0.45", "-0.5", "1e2"]
            .iter()
            .map(|s| n(s))
            .collect();
        v.sort();
        let texts: Vec<&str> = v.iter().map(Number::as_str).collect();
        assert_eq!(
            texts,
            ["-10", "-1", "-0.5", "0", "0.45", "0.5", "9", "10", "100"]
        );
    }

    #[test]
    fn sizes_follow_dynamodbs_rules() {
        let item = Item::new()
            .with("pk", Value::s("abc"))
            .with("ttl", Value::n("1800000000").unwrap());
        // 2 + 3, then 3 + (2 significant digits → 1 + 1).
        assert_eq!(item.size(), 5 + 3 + 2);
    }
}
