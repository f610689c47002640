//! The latency model: each call takes a log-normal time with a given median and 99th
//! percentile, or none at all. The call commits partway through it (by default half way, as a
//! request reaches the service about half way through its round trip); the server sleeps on
//! tokio's timer before and after, never blocking a thread.

use serde::Serialize;
use std::time::Duration;

/// How long calls take.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Latency {
    /// Answer at once.
    None,
    /// Log-normal with this median and 99th percentile (p99 ≥ p50).
    LogNormal { p50: Duration, p99: Duration },
}

impl Default for Latency {
    fn default() -> Self {
        Latency::LogNormal {
            p50: crate::defaults::LATENCY_P50,
            p99: crate::defaults::LATENCY_P99,
        }
    }
}

/// The 99th percentile of the standard normal distribution.
const Z99: f64 = 2.326_347_874_040_841;

impl Latency {
    /// Draws one call's latency.
    pub fn sample(&self, rng: &mut fastrand::Rng) -> Duration {
        match *self {
            Latency::None => Duration::ZERO,
            Latency::LogNormal { p50, p99 } => {
                let median = p50.as_secs_f64();
                if median <= 0.0 {
                    return Duration::ZERO;
                }
                let sigma = (p99.as_secs_f64().max(median) / median).ln() / Z99;
                let secs = median * (sigma * standard_normal(rng)).exp();
                // A pathological draw must not hold a request for minutes.
                Duration::from_secs_f64(secs.min(median * 1000.0).min(60.0))
            }
        }
    }
}

/// Box–Muller.
fn standard_normal(rng: &mut fastrand::Rng) -> f64 {
    let u1 = rng.f64().max(f64::MIN_POSITIVE);
    let u2 = rng.f64();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_the_model() {
        let model = Latency::default();
        let mut rng = fastrand::Rng::with_seed(7);
        let mut draws: Vec<f64> = (0..100_000)
            .map(|_| model.sample(&mut rng).as_secs_f64() * 1000.0)
            .collect();
        draws.sort_by(f64::total_cmp);
        let p50 = draws[50_000];
        let p99 = draws[99_000];
        assert!((p50 - 4.0).abs() < 0.2, "p50 {p50}");
        assert!((p99 - 15.0).abs() < 1.0, "p99 {p99}");
        assert_eq!(Latency::None.sample(&mut rng), Duration::ZERO);
    }
}
