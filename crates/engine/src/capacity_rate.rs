//! Capacity units consumed per second, as DynamoDB reports them on each answer
//! (`ConsumedCapacity`), for `/metrics` and `status`: the counter
//! [`CAPACITY_UNITS`](crate::metrics::CAPACITY_UNITS) says how much in all, this says how much
//! now.
//!
//! The rate is an exponentially weighted average over about [`TIME_CONSTANT`]: steady under
//! batches that answer many units at once, and it decays to zero when nothing is sent. It lives
//! beside the metrics recorder it feeds (process-wide), as the counters do.

use crate::metrics::{CAPACITY_OPS as OPS, CAPACITY_UNITS, CAPACITY_UNITS_PER_SECOND};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The averaging time of the rate.
const TIME_CONSTANT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy)]
struct Average {
    /// Units, decayed to `at`.
    units: f64,
    at: Option<Instant>,
}

impl Average {
    const fn new() -> Self {
        Average {
            units: 0.0,
            at: None,
        }
    }

    fn decay_to(&mut self, now: Instant) {
        if let Some(at) = self.at {
            let dt = now.saturating_duration_since(at).as_secs_f64();
            self.units *= (-dt / TIME_CONSTANT.as_secs_f64()).exp();
        }
        self.at = Some(self.at.map_or(now, |at| at.max(now)));
    }

    fn per_second(&self) -> f64 {
        self.units / TIME_CONSTANT.as_secs_f64()
    }
}

static AVERAGES: Mutex<[Average; 3]> = Mutex::new([Average::new(), Average::new(), Average::new()]);

fn slot(op: &str) -> usize {
    OPS.iter().position(|o| *o == op).unwrap_or(1)
}

/// `units` consumed by one call of `op` (`query` or `delete`), answered at `now`.
pub fn record(op: &'static str, units: f64, now: Instant) {
    // Counters are integers; count hundredths so half units (eventually consistent reads) add up.
    metrics::counter!(CAPACITY_UNITS, "op" => op).increment((units * 100.0).round() as u64);
    let mut averages = AVERAGES.lock().unwrap_or_else(|p| p.into_inner());
    let average = &mut averages[slot(op)];
    average.decay_to(now);
    average.units += units.max(0.0);
}

/// Units per second of `op` now (0 before any was recorded).
pub fn per_second(op: &str, now: Instant) -> f64 {
    let mut averages = AVERAGES.lock().unwrap_or_else(|p| p.into_inner());
    let average = &mut averages[slot(op)];
    average.decay_to(now);
    average.per_second()
}

/// Sets the per-second gauges to the averages at `now`.
pub fn publish(now: Instant) {
    for op in OPS {
        metrics::gauge!(CAPACITY_UNITS_PER_SECOND, "op" => op).set(per_second(op, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steady_rate_is_measured_and_decays_when_nothing_is_sent() {
        // The averages are process-wide: this test alone uses "query".
        let start = Instant::now();
        for ms in 0..60_000u64 {
            if ms % 100 == 0 {
                // 50 units every 100 ms: 500 units/s.
                record("query", 50.0, start + Duration::from_millis(ms));
            }
        }
        let rate = per_second("query", start + Duration::from_secs(60));
        assert!((480.0..=520.0).contains(&rate), "{rate}");
        let later = per_second("query", start + Duration::from_secs(180));
        assert!(later < 1.0, "{later}");
    }
}
