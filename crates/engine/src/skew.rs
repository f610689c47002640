//! The clock the engine deletes by: this host's, held back by how far it may be ahead of the
//! store's ([`precise_ttl_core::skew`] bounds that from the store's answers). A host whose clock
//! runs ahead would otherwise delete items before their TTL by the store's time, the one wrong
//! deletion a condition cannot catch (the condition's "now" is ours).

use crate::clock::Clock;
use crate::metrics as m;
use precise_ttl_core::Timestamp;
use precise_ttl_core::skew::OffsetBound;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A `Date` header names a whole second: an answer written at x.999 s that spent a few
/// milliseconds in transit shows a host in perfect sync a lead of just over a second. Only a lead
/// beyond that resolution plus a slow round trip is evidence of a host running ahead (NTP keeps
/// hosts within milliseconds); anything less is still held back by, never warned of.
const DATE_RESOLUTION: Duration = Duration::from_secs(1);
/// The longest round trip a lead is allowed before it is called skew.
const ROUND_TRIP_ALLOWANCE: Duration = Duration::from_secs(1);
/// A lead above this is worth a warning.
const WARN_ABOVE: Duration = DATE_RESOLUTION.saturating_add(ROUND_TRIP_ALLOWANCE);
/// At most one warning this often.
const WARN_EVERY_MS: i64 = 60_000;

/// Told the store's time as its answers state it (the adapter's side of [`ServiceClock`]).
pub trait StoreTime: Send + Sync + 'static {
    /// An answer of the store dated `store_second` (epoch seconds) has just arrived.
    fn observe(&self, store_second: i64);
}

#[derive(Debug)]
struct State {
    bound: OffsetBound,
    warned_at: Option<Timestamp>,
}

/// `host`'s clock minus its possible lead over the store's clock.
#[derive(Debug)]
pub struct ServiceClock<C> {
    host: Arc<C>,
    state: Mutex<State>,
}

impl<C: Clock> ServiceClock<C> {
    pub fn new(host: Arc<C>) -> Self {
        ServiceClock {
            host,
            state: Mutex::new(State {
                bound: OffsetBound::new(),
                warned_at: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How far this host's clock may be ahead of the store's (what deletes are held back by).
    pub fn lead(&self) -> Duration {
        self.lock().bound.lead(self.host.now())
    }

    /// The lower bound of (store clock − host clock), in ms; `None` before any dated answer.
    pub fn offset_ms(&self) -> Option<i64> {
        self.lock().bound.offset_ms(self.host.now())
    }
}

impl<C: Clock> ServiceClock<C> {
    /// Takes the answer's date into the bound; the lead to warn of, if it is evidence of skew
    /// and no warning went out in the last [`WARN_EVERY_MS`].
    fn note(&self, store_second: i64) -> Option<Duration> {
        let now = self.host.now();
        let mut state = self.lock();
        state.bound.observe(store_second, now);
        let lead = state.bound.lead(now);
        if let Some(offset) = state.bound.offset_ms(now) {
            metrics::gauge!(m::CLOCK_OFFSET).set(offset as f64 / 1000.0);
        }
        metrics::gauge!(m::CLOCK_LEAD).set(lead.as_secs_f64());
        let due = state
            .warned_at
            .is_none_or(|t| now.millis_since(t) >= WARN_EVERY_MS);
        if lead > WARN_ABOVE && due {
            state.warned_at = Some(now);
            return Some(lead);
        }
        None
    }
}

impl<C: Clock> StoreTime for ServiceClock<C> {
    fn observe(&self, store_second: i64) {
        if let Some(lead) = self.note(store_second) {
            tracing::warn!(
                lead_ms = lead.as_millis() as u64,
                "this host's clock is ahead of the store's; deletes are held back by the lead (fix the host's time sync)"
            );
        }
    }
}

impl<C: Clock> Clock for ServiceClock<C> {
    fn now(&self) -> Timestamp {
        let now = self.host.now();
        now.saturating_sub(self.lock().bound.lead(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(Timestamp);
    impl Clock for Fixed {
        fn now(&self) -> Timestamp {
            self.0
        }
    }

    #[test]
    fn a_host_ahead_is_held_back_and_one_in_sync_is_not() {
        let host = Timestamp::from_millis(1_800_000_000_500);
        let clock = ServiceClock::new(Arc::new(Fixed(host)));
        assert_eq!(clock.now(), host, "nothing known: the host's clock");
        // The store says it is 5 s earlier.
        clock.observe(1_799_999_995);
        let held = host.millis_since(clock.now());
        assert!((5_000..6_000).contains(&held), "{held}");

        let clock = ServiceClock::new(Arc::new(Fixed(host)));
        clock.observe(1_800_000_000);
        assert!(host.millis_since(clock.now()) <= 500);
    }

    /// DynamoDB Local dates its answers to the whole second: an answer written at x.999 s that
    /// arrives a few milliseconds later shows a host in sync a lead of just over 1 s. That is held
    /// back by (the bound stays a lower bound) but is no evidence of skew, so no warning.
    #[test]
    fn a_lead_within_the_date_headers_resolution_and_a_round_trip_is_not_warned_of() {
        let host = Timestamp::from_millis(1_800_000_001_001);
        let clock = ServiceClock::new(Arc::new(Fixed(host)));
        // Written at 1_800_000_000.999 by the store's clock, arrived 2 ms later.
        assert_eq!(clock.note(1_800_000_000), None);
        assert_eq!(clock.lead(), Duration::from_millis(1_001));
        // The same answer after a 900 ms round trip: still within the allowance.
        let slow = Timestamp::from_millis(1_800_000_001_900);
        let clock = ServiceClock::new(Arc::new(Fixed(slow)));
        assert_eq!(clock.note(1_800_000_000), None);

        // Five seconds ahead: warned once, then not again within the minute.
        let clock = ServiceClock::new(Arc::new(Fixed(host)));
        let lead = clock.note(1_799_999_996).expect("warned");
        assert!(lead >= Duration::from_secs(5), "{lead:?}");
        assert_eq!(clock.note(1_799_999_996), None);
    }
}
