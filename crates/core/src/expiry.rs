//! Native TTL semantics: which attribute values count as an expiry, and when an item is due.
//!
//! The contract is DynamoDB's own: only a Number attribute holding epoch seconds counts (decimals
//! and exponents allowed); an item is due when that instant has passed, unless it lies more than
//! [`NATIVE_TTL_MAX_AGE`] in the past. Every other shape (a String, a Binary, a List, a Number in
//! milliseconds that lands far in the future) is never due.

use crate::time::{NATIVE_TTL_MAX_AGE, Timestamp};
use thiserror::Error;

/// An item's expiry instant, as parsed from its TTL Number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Expiry(Timestamp);

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExpiryError {
    #[error("{0:?} is not a DynamoDB Number")]
    NotANumber(String),
}

impl Expiry {
    pub const fn at_instant(t: Timestamp) -> Self {
        Expiry(t)
    }

    pub const fn at(self) -> Timestamp {
        self.0
    }

    /// Parses a DynamoDB Number (`"1795312440"`, `"1.7953e9"`, `"-12.5"`) as epoch seconds.
    ///
    /// Sub-millisecond fractions round *up*: with `now` in whole milliseconds,
    /// `ceil_ms(ttl) <= now` holds exactly when `ttl <= now`, so we agree with the store's
    /// own decimal comparison. Values beyond the range of `Timestamp` saturate.
    pub fn parse_number(text: &str) -> Result<Expiry, ExpiryError> {
        let bad = || ExpiryError::NotANumber(text.to_string());
        let s = text.trim();
        let (negative, s) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let (mantissa, exponent) = match s.find(['e', 'E']) {
            Some(i) => {
                let e: i64 = s[i + 1..].parse().map_err(|_| bad())?;
                (&s[..i], e)
            }
            None => (s, 0),
        };
        let (int_part, frac_part) = match mantissa.find('.') {
            Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
            None => (mantissa, ""),
        };
        if int_part.is_empty() && frac_part.is_empty()
            || !int_part.bytes().all(|b| b.is_ascii_digit())
            || !frac_part.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(bad());
        }
        let digits: String = int_part.chars().chain(frac_part.chars()).collect();
        let digits = digits.trim_start_matches('0');
        // value in milliseconds = digits × 10^scale
        let scale = exponent
            .saturating_add(3)
            .saturating_sub(frac_part.len() as i64);
        let saturated = if negative {
            Timestamp::MIN
        } else {
            Timestamp::MAX
        };
        if digits.is_empty() {
            return Ok(Expiry(Timestamp::from_millis(0)));
        }
        let (whole, has_remainder) = if scale >= 0 {
            if digits.len() as i64 + scale > 19 {
                return Ok(Expiry(saturated));
            }
            let mut v: i64 = 0;
            for b in digits
                .bytes()
                .chain(std::iter::repeat_n(b'0', scale as usize))
            {
                match v
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(i64::from(b - b'0')))
                {
                    Some(n) => v = n,
                    None => return Ok(Expiry(saturated)),
                }
            }
            (v, false)
        } else {
            let keep = digits.len() as i64 + scale;
            if keep > 19 {
                return Ok(Expiry(saturated));
            }
            let keep = keep.max(0) as usize;
            let (head, tail) = digits.split_at(keep);
            let mut v: i64 = 0;
            for b in head.bytes() {
                match v
                    .checked_mul(10)
                    .and_then(|v| v.checked_add(i64::from(b - b'0')))
                {
                    Some(n) => v = n,
                    None => return Ok(Expiry(saturated)),
                }
            }
            (v, tail.bytes().any(|b| b != b'0'))
        };
        let millis = if negative {
            -whole // truncation towards zero is the ceiling for negatives
        } else if has_remainder {
            whole.saturating_add(1)
        } else {
            whole
        };
        Ok(Expiry(Timestamp::from_millis(millis)))
    }
}

/// The shape of a TTL attribute as stored, seen without any AWS types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TtlValue<'a> {
    /// The item has no such attribute.
    Missing,
    /// A Number, as the store's decimal text.
    Number(&'a str),
    /// Any other type; the name is for messages (`"S"`, `"B"`, `"BOOL"`, ...).
    Other(&'a str),
}

/// What native TTL semantics say about one item at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Expired and eligible: the item must go.
    Due(Expiry),
    /// Expires in the future.
    NotYetDue(Expiry),
    /// Expired more than [`NATIVE_TTL_MAX_AGE`] ago: native TTL ignores it, so do we.
    TooOld(Expiry),
    /// The TTL attribute is not a Number (or not a valid one): never deleted.
    NotANumber,
    /// No TTL attribute: never deleted.
    Missing,
}

impl Verdict {
    pub fn of(value: &TtlValue<'_>, now: Timestamp) -> Verdict {
        match value {
            TtlValue::Missing => Verdict::Missing,
            TtlValue::Other(_) => Verdict::NotANumber,
            TtlValue::Number(text) => match Expiry::parse_number(text) {
                Err(_) => Verdict::NotANumber,
                Ok(e) => Verdict::of_expiry(e, now),
            },
        }
    }

    pub fn of_expiry(e: Expiry, now: Timestamp) -> Verdict {
        if e.at() > now {
            Verdict::NotYetDue(e)
        } else if e.at() < now.saturating_sub(NATIVE_TTL_MAX_AGE) {
            Verdict::TooOld(e)
        } else {
            Verdict::Due(e)
        }
    }

    pub fn is_due(&self) -> bool {
        matches!(self, Verdict::Due(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(text: &str) -> i64 {
        Expiry::parse_number(text).unwrap().at().as_millis()
    }

    #[test]
    fn parses_the_number_shapes_dynamodb_returns() {
        assert_eq!(ms("1795312440"), 1_795_312_440_000);
        assert_eq!(ms("1795312440.5"), 1_795_312_440_500);
        assert_eq!(ms("1795312440.0001"), 1_795_312_440_001);
        assert_eq!(ms("1.79531244E9"), 1_795_312_440_000);
        assert_eq!(ms("17953124400e-1"), 1_795_312_440_000);
        assert_eq!(ms("-12.5"), -12_500);
        assert_eq!(ms("-0.0001"), 0);
        assert_eq!(ms("0"), 0);
        assert_eq!(ms(".5"), 500);
        assert_eq!(ms("5."), 5000);
        assert_eq!(ms("1e300"), i64::MAX);
        assert_eq!(ms("-1e300"), i64::MIN);
        assert_eq!(ms("1e-300"), 1);
        assert_eq!(ms("99999999999999999999999999999999999999"), i64::MAX);
        for bad in [
            "", "-", "abc", "1..2", "1e", "1e1.5", "0x10", ".", "1 2", "NaN", "inf",
        ] {
            assert!(Expiry::parse_number(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn verdicts_follow_native_ttl() {
        let now = Timestamp::from_secs(1_800_000_000);
        let v = |t: &TtlValue| Verdict::of(t, now);
        assert!(v(&TtlValue::Number("1800000000")).is_due());
        assert!(v(&TtlValue::Number("1799999999.999")).is_due());
        assert!(matches!(
            v(&TtlValue::Number("1800000000.0001")),
            Verdict::NotYetDue(_)
        ));
        // Milliseconds by mistake: far in the future, never due.
        assert!(matches!(
            v(&TtlValue::Number("1799999999000")),
            Verdict::NotYetDue(_)
        ));
        assert!(matches!(v(&TtlValue::Number("-5")), Verdict::TooOld(_)));
        assert!(matches!(v(&TtlValue::Number("100")), Verdict::TooOld(_)));
        assert_eq!(v(&TtlValue::Other("S")), Verdict::NotANumber);
        assert_eq!(v(&TtlValue::Number("soon")), Verdict::NotANumber);
        assert_eq!(v(&TtlValue::Missing), Verdict::Missing);
        let edge = now.saturating_sub(NATIVE_TTL_MAX_AGE);
        assert!(Verdict::of_expiry(Expiry::at_instant(edge), now).is_due());
        let older = Timestamp::from_millis(edge.as_millis() - 1);
        assert!(matches!(
            Verdict::of_expiry(Expiry::at_instant(older), now),
            Verdict::TooOld(_)
        ));
    }

    proptest! {
        #[test]
        fn parse_agrees_with_exact_decimal_comparison(
            int in -10_000_000_000i64..10_000_000_000i64,
            frac in 0u32..1_000_000u32,
            now_ms in -10_000_000_000_000i64..10_000_000_000_000i64,
        ) {
            // The number int.frac (6 decimals) compared with now in ms, exactly, in micro-units.
            let micros = if int < 0 { int as i128 * 1_000_000 - frac as i128 } else { int as i128 * 1_000_000 + frac as i128 };
            let text = if int < 0 { format!("-{}.{:06}", -(int as i128), frac) } else { format!("{int}.{frac:06}") };
            let e = Expiry::parse_number(&text).unwrap();
            let exact_due = micros <= now_ms as i128 * 1000;
            prop_assert_eq!(e.at().as_millis() <= now_ms, exact_due, "{} vs {}", text, now_ms);
        }

        #[test]
        fn parse_never_panics(s in "\\PC{0,40}") {
            let _ = Expiry::parse_number(&s);
        }

        #[test]
        fn exponent_forms_agree(m in 1u64..1_000_000_000u64, e in -6i32..6i32) {
            let a = Expiry::parse_number(&format!("{m}e{e}")).unwrap();
            let b = Expiry::parse_number(&format!("{m}E{e:+}")).unwrap();
            prop_assert_eq!(a, b);
        }
    }
}
