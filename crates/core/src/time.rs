//! Instants as the TTL contract sees them: epoch time with millisecond resolution.
//!
//! DynamoDB's TTL is a Number of epoch seconds that may carry decimals. We keep instants as
//! whole milliseconds: finer than any delete can be scheduled, coarse enough to fit an `i64`
//! for every date that matters, and exactly printable back as a DynamoDB Number.

use std::fmt;
use std::time::Duration;

/// How far in the past an expiry may lie and still be deleted by native TTL.
///
/// AWS documents "five years". We use 5 × 365 days, which is never longer than five calendar
/// years, so we can never delete an item that native TTL would leave alone.
pub const NATIVE_TTL_MAX_AGE: Duration = Duration::from_secs(5 * 365 * 24 * 3600);

/// A point in time, in milliseconds since the Unix epoch (negative before 1970).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const MIN: Timestamp = Timestamp(i64::MIN);
    pub const MAX: Timestamp = Timestamp(i64::MAX);

    pub const fn from_millis(millis: i64) -> Self {
        Timestamp(millis)
    }

    pub const fn from_secs(secs: i64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }

    /// From a `SystemTime`-style duration since the epoch (what a clock hands us).
    pub fn from_unix_duration(since_epoch: Duration) -> Self {
        Timestamp(i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX))
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    pub fn saturating_add(self, d: Duration) -> Self {
        Timestamp(
            self.0
                .saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
    }

    pub fn saturating_sub(self, d: Duration) -> Self {
        Timestamp(
            self.0
                .saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
    }

    /// `self - earlier` as a signed number of milliseconds.
    pub fn millis_since(self, earlier: Timestamp) -> i64 {
        self.0.saturating_sub(earlier.0)
    }

    /// The instant as a DynamoDB Number in epoch seconds: `1795312440`, `1795312440.5`, `-0.25`.
    pub fn to_epoch_seconds_text(self) -> String {
        let secs = self.0.div_euclid(1000);
        let frac = self.0.rem_euclid(1000);
        // div_euclid rounds towards -inf, so a negative instant with a fraction needs re-signing.
        let (sign, whole, frac) = if self.0 < 0 && frac != 0 {
            ("-", -(secs + 1), 1000 - frac)
        } else if self.0 < 0 {
            ("-", -secs, 0)
        } else {
            ("", secs, frac)
        };
        if frac == 0 {
            format!("{sign}{whole}")
        } else {
            let digits = format!("{frac:03}");
            format!("{sign}{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({})", self.to_epoch_seconds_text())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_epoch_seconds_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_seconds_text_round_trips_through_the_parser() {
        for ms in [
            0,
            1,
            999,
            1000,
            1500,
            -1,
            -999,
            -1000,
            -1500,
            1_795_312_440_123,
        ] {
            let text = Timestamp::from_millis(ms).to_epoch_seconds_text();
            let back = crate::Expiry::parse_number(&text).unwrap();
            assert_eq!(back.at(), Timestamp::from_millis(ms), "{text}");
        }
        assert_eq!(Timestamp::from_millis(1500).to_epoch_seconds_text(), "1.5");
        assert_eq!(
            Timestamp::from_millis(-250).to_epoch_seconds_text(),
            "-0.25"
        );
        assert_eq!(Timestamp::from_millis(-2000).to_epoch_seconds_text(), "-2");
    }
}
