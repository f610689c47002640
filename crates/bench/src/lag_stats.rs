//! Lag statistics and the lag histogram of a report: HDR percentiles over the measured lags and
//! buckets of a "nice" width for the plot and the Markdown.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Deletion lag over `Expire` items, in ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LagStats {
    /// Removed `Expire` items.
    pub count: u64,
    /// Median lag.
    pub p50_ms: u64,
    /// 90th percentile.
    pub p90_ms: u64,
    /// 99th percentile.
    pub p99_ms: u64,
    /// 99.9th percentile.
    pub p999_ms: u64,
    /// Largest lag (exact).
    pub max_ms: u64,
    /// Mean lag (exact, over lags clamped at 0).
    pub mean_ms: f64,
    /// How many were removed before their TTL (counted here as lag 0, and listed as wrong).
    pub early: u64,
}

/// One bar of the lag histogram: lags in `lo_ms..=hi_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistBucket {
    /// Lowest lag in the bucket.
    pub lo_ms: u64,
    /// Highest lag in the bucket (for the overflow bucket: the maximum lag).
    pub hi_ms: u64,
    /// Items in the bucket.
    pub count: u64,
    /// Whether this is the bucket of lags above p99.9 (drawn apart).
    pub overflow: bool,
}

/// Significant digits of every lag histogram.
const SIGFIG: u8 = 3;
/// Target number of regular buckets in a report's lag histogram (`Report::lag_histogram`).
pub(crate) const HIST_BUCKETS: u64 = 40;

/// An auto-resizing HDR histogram of `values`.
pub(crate) fn histogram(values: &[u64]) -> Histogram<u64> {
    let mut h = Histogram::<u64>::new(SIGFIG).expect("3 significant digits is a valid precision");
    for v in values {
        // `saturating_record` clamps at the current upper bound instead of growing the
        // histogram, which flattened every lag above 2 s; `record` grows it.
        if h.record(*v).is_err() {
            h.saturating_record(*v);
        }
    }
    h
}

/// Lag statistics over clamped lags; `None` when there are none.
pub(crate) fn lag_stats(lags: &[u64], early: u64) -> Option<LagStats> {
    if lags.is_empty() {
        return None;
    }
    let h = histogram(lags);
    let max = lags.iter().copied().max().unwrap_or(0);
    // Above 2047 ms a bucket spans more than 1 ms; never report a percentile above the exact max.
    let q = |q: f64| h.value_at_quantile(q).min(max);
    let sum: u128 = lags.iter().map(|v| u128::from(*v)).sum();
    Some(LagStats {
        count: lags.len() as u64,
        p50_ms: q(0.50),
        p90_ms: q(0.90),
        p99_ms: q(0.99),
        p999_ms: q(0.999),
        max_ms: max,
        mean_ms: sum as f64 / lags.len() as f64,
        early,
    })
}

/// Buckets of a "nice" width (1, 2 or 5 × 10ⁿ ms) covering `0..=p999`, plus one overflow bucket
/// for the lags above the last regular bucket when there are any.
pub(crate) fn histogram_buckets(lags: &[u64], p999: u64, max: u64) -> Vec<HistBucket> {
    let limit = p999.min(max);
    let width = nice_width(limit / HIST_BUCKETS + 1);
    let n = limit / width + 1;
    // Regular buckets end at `edge`, which is at least `limit`.
    let edge = n * width - 1;
    let mut buckets: Vec<HistBucket> = (0..n)
        .map(|i| HistBucket {
            lo_ms: i * width,
            hi_ms: i * width + width - 1,
            count: 0,
            overflow: false,
        })
        .collect();
    let mut overflow = 0u64;
    for &v in lags {
        if v > edge {
            overflow += 1;
        } else {
            buckets[(v / width) as usize].count += 1;
        }
    }
    if overflow > 0 {
        buckets.push(HistBucket {
            lo_ms: edge + 1,
            hi_ms: max,
            count: overflow,
            overflow: true,
        });
    }
    buckets
}

/// The smallest of 1, 2, 5, 10, 20, 50, … that is at least `min` (and at least 1).
pub(crate) fn nice_width(min: u64) -> u64 {
    let mut scale = 1u64;
    loop {
        for m in [1, 2, 5] {
            let w = m * scale;
            if w >= min {
                return w;
            }
        }
        scale = scale.saturating_mul(10);
    }
}
