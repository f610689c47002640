//! Where a refusal of unknown scope came from: the recent refused share of each lane against the
//! others'. A batch statement's refusal names no resource (DynamoDB's API gives no reasons
//! there); an index partition refuses its own lane's keys only, a table partition the keys
//! hashed to it, from every lane alike, so a lane refused far more than the others is its own
//! index partition, and refusals spread over the lanes are the table's.

use crate::time::Timestamp;

/// The half-life of the refusal shares.
const HALF_LIFE_MS: f64 = 500.0;
/// Refusals of unknown scope are taken for one lane's index partition when that lane's recent
/// refused share is at least this, and [`HOT_LANE_FACTOR`] times the other lanes' share, over at
/// least [`HOT_LANE_MIN_REFUSALS`] refusals.
const HOT_LANE_SHARE: f64 = 0.2;
const HOT_LANE_FACTOR: f64 = 3.0;
const HOT_LANE_MIN_REFUSALS: f64 = 3.0;

/// Items sent and refused recently (exponentially decayed).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Share {
    sent: f64,
    refused: f64,
    at: Option<Timestamp>,
}

impl Share {
    pub(super) fn add(&mut self, now: Timestamp, sent: f64, refused: f64) {
        if let Some(at) = self.at {
            let decay = 0.5f64.powf(now.millis_since(at).max(0) as f64 / HALF_LIFE_MS);
            self.sent *= decay;
            self.refused *= decay;
        }
        self.at = Some(now);
        self.sent += sent;
        self.refused += refused;
    }

    fn ratio(&self) -> f64 {
        if self.sent > 0.0 {
            self.refused / self.sent
        } else {
            0.0
        }
    }

    /// Whether this lane's refusals (`self`, part of `all`, every lane's) are its own index
    /// partition's: refused far more than the others.
    pub(super) fn is_hot_lane(&self, all: &Share) -> bool {
        let others_sent = (all.sent - self.sent).max(0.0);
        let others_refused = (all.refused - self.refused).max(0.0);
        let others = if others_sent > 0.0 {
            others_refused / others_sent
        } else {
            0.0
        };
        let ratio = self.ratio();
        self.refused >= HOT_LANE_MIN_REFUSALS
            && ratio >= HOT_LANE_SHARE
            && ratio >= HOT_LANE_FACTOR * others
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_refused_far_more_than_the_others_is_hot_and_a_spread_is_not() {
        let now = Timestamp::from_millis(1_000_000);
        let (mut hot, mut cold, mut all) = (Share::default(), Share::default(), Share::default());
        hot.add(now, 10.0, 5.0);
        cold.add(now, 90.0, 4.0);
        all.add(now, 100.0, 9.0);
        assert!(hot.is_hot_lane(&all));
        assert!(!cold.is_hot_lane(&all));
        let mut spread = Share::default();
        spread.add(now, 10.0, 1.0);
        let mut all = Share::default();
        all.add(now, 100.0, 10.0);
        assert!(!spread.is_hot_lane(&all));
    }
}
