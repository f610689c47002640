//! A log of the deletions a sweeper reports (the demo's live view), with lag percentiles.

use precise_ttl_core::{Expiry, Timestamp};
use precise_ttl_dynamodb::ItemKey;
use precise_ttl_engine::Observer;
use std::sync::Mutex;

/// One deletion: the item's partition key as text and the lag from its TTL, in ms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deletion {
    pub key: String,
    pub lag_ms: i64,
}

/// Collects every deletion the daemon reports, in order.
#[derive(Debug, Default)]
pub struct DeletionLog(Mutex<Vec<Deletion>>);

impl Observer<ItemKey> for DeletionLog {
    fn deleted(&self, key: &ItemKey, expiry: Expiry, at: Timestamp) {
        let deletion = Deletion {
            key: key.partition_text().trim_matches('"').to_string(),
            lag_ms: at.millis_since(expiry.at()),
        };
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(deletion);
    }
}

impl DeletionLog {
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The deletions from position `from` on.
    pub fn since(&self, from: usize) -> Vec<Deletion> {
        let all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        all.get(from..).unwrap_or_default().to_vec()
    }

    /// Every lag, sorted.
    pub fn sorted_lags(&self) -> Vec<i64> {
        let mut lags: Vec<i64> = self.since(0).iter().map(|d| d.lag_ms).collect();
        lags.sort_unstable();
        lags
    }
}

/// The nearest-rank percentile `p` (0..=1) of sorted values; 0 when there are none.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    sorted
        .get(((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), 50);
        assert_eq!(percentile(&v, 0.99), 99);
        assert_eq!(percentile(&v, 1.0), 100);
        assert_eq!(percentile(&[], 0.5), 0);
    }
}
