//! The 2022 blog's layout: every item carries an `expirationWindow` string naming the fixed-size
//! window its TTL falls in, `<startISO>_<endISO>` (e.g.
//! `2022-07-20T10:00:00.000Z_2022-07-20T10:01:00.000Z`), and a GSI is keyed on (window, ttl).
//! Sweeping that index means enumerating window labels exactly as the writers spelled them.

use crate::time::Timestamp;
use std::time::Duration;
use thiserror::Error;

/// One window's label as writers spell it: the blog index's partition key value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WindowLabel(pub String);

impl std::fmt::Display for WindowLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// How the writers render an instant: JavaScript's `toISOString()` (milliseconds) or whole
/// seconds (`2022-07-20T10:00:00Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowFormat {
    Millis,
    Seconds,
}

/// Window size and spelling: everything needed to name the window of any instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    size_secs: i64,
    pub format: WindowFormat,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WindowError {
    #[error("the window size must be a whole number of seconds from 1 s to 1 day, not {0:?}")]
    BadSize(Duration),
    #[error("{0:?} is not a window label of the form <startISO>_<endISO>")]
    BadLabel(String),
}

impl WindowSpec {
    pub fn new(size: Duration, format: WindowFormat) -> Result<Self, WindowError> {
        let secs = size.as_secs() as i64;
        if size.subsec_nanos() != 0 || !(1..=86_400).contains(&secs) {
            return Err(WindowError::BadSize(size));
        }
        Ok(WindowSpec {
            size_secs: secs,
            format,
        })
    }

    pub fn size(&self) -> Duration {
        Duration::from_secs(self.size_secs as u64)
    }

    /// Learns size and spelling from one label a writer produced.
    pub fn detect(label: &str) -> Result<Self, WindowError> {
        let bad = || WindowError::BadLabel(label.to_string());
        let (start, end) = label.split_once('_').ok_or_else(bad)?;
        let (s, s_millis) = parse_iso(start).ok_or_else(bad)?;
        let (e, _) = parse_iso(end).ok_or_else(bad)?;
        let size = e.as_millis() - s.as_millis();
        if size <= 0 || size % 1000 != 0 {
            return Err(bad());
        }
        let format = if s_millis {
            WindowFormat::Millis
        } else {
            WindowFormat::Seconds
        };
        Self::new(Duration::from_millis(size as u64), format).map_err(|_| bad())
    }

    /// The number of the window holding `t`: windows start at multiples of the size since the
    /// epoch, as the blog's writers compute them.
    pub fn index_of(&self, t: Timestamp) -> i64 {
        t.as_millis().div_euclid(self.size_secs * 1000)
    }

    pub fn start(&self, index: i64) -> Timestamp {
        Timestamp::from_secs(index * self.size_secs)
    }

    pub fn end(&self, index: i64) -> Timestamp {
        Timestamp::from_secs((index + 1) * self.size_secs)
    }

    /// The label writers put on items of window `index`.
    pub fn label(&self, index: i64) -> String {
        format!(
            "{}_{}",
            format_iso(self.start(index), self.format),
            format_iso(self.end(index), self.format)
        )
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.mmm]Z` for an instant (UTC, proleptic Gregorian).
pub fn format_iso(t: Timestamp, format: WindowFormat) -> String {
    let millis = t.as_millis();
    let secs = millis.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    match format {
        WindowFormat::Millis => format!(
            "{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{:03}Z",
            millis.rem_euclid(1000)
        ),
        WindowFormat::Seconds => format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z"),
    }
}

/// Parses what [`format_iso`] writes; says whether milliseconds were present.
pub fn parse_iso(text: &str) -> Option<(Timestamp, bool)> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let (millis, has_millis) = match &text[19..] {
        "Z" => (0, false),
        rest if rest.len() == 5 && rest.starts_with('.') && rest.ends_with('Z') => {
            (rest[1..4].parse::<i64>().ok()?, true)
        }
        _ => return None,
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    Some((
        Timestamp::from_millis((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1000 + millis),
        has_millis,
    ))
}

// Howard Hinnant's civil calendar algorithms (public domain), days relative to 1970-01-01.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn labels_match_javascript_to_iso_string() {
        // new Date(1658311200000).toISOString() === "2022-07-20T10:00:00.000Z"
        let spec = WindowSpec::new(Duration::from_secs(60), WindowFormat::Millis).unwrap();
        let i = spec.index_of(Timestamp::from_millis(1_658_311_230_500));
        assert_eq!(
            spec.label(i),
            "2022-07-20T10:00:00.000Z_2022-07-20T10:01:00.000Z"
        );
        let spec = WindowSpec::new(Duration::from_secs(300), WindowFormat::Seconds).unwrap();
        assert_eq!(
            spec.label(spec.index_of(Timestamp::from_secs(951_782_400 + 299))),
            "2000-02-29T00:00:00Z_2000-02-29T00:05:00Z"
        );
    }

    #[test]
    fn detects_size_and_format() {
        let spec = WindowSpec::detect("2022-07-20T10:00:00.000Z_2022-07-20T10:05:00.000Z").unwrap();
        assert_eq!(spec.size(), Duration::from_secs(300));
        assert_eq!(spec.format, WindowFormat::Millis);
        let spec = WindowSpec::detect("2022-07-20T10:00:00Z_2022-07-20T11:00:00Z").unwrap();
        assert_eq!(spec.format, WindowFormat::Seconds);
        assert!(WindowSpec::detect("2022-07-20T10:00:00Z").is_err());
        assert!(WindowSpec::detect("2022-07-20T11:00:00Z_2022-07-20T10:00:00Z").is_err());
        assert!(WindowSpec::new(Duration::from_millis(1500), WindowFormat::Millis).is_err());
    }

    proptest! {
        #[test]
        fn iso_round_trips(millis in -62_000_000_000_000i64..253_000_000_000_000i64) {
            let t = Timestamp::from_millis(millis);
            prop_assume!(format_iso(t, WindowFormat::Millis).len() == 24);
            let (back, has) = parse_iso(&format_iso(t, WindowFormat::Millis)).unwrap();
            prop_assert_eq!(back, t);
            prop_assert!(has);
        }

        #[test]
        fn every_instant_is_inside_its_window(secs in 0i64..4_000_000_000, size in 1u64..86_400) {
            let spec = WindowSpec::new(Duration::from_secs(size), WindowFormat::Millis).unwrap();
            let t = Timestamp::from_secs(secs);
            let i = spec.index_of(t);
            prop_assert!(spec.start(i) <= t && t < spec.end(i));
        }
    }
}
