//! How a run tells its caller what it is doing; the library itself never prints.

use crate::raw::RawRates;

/// One step of a run, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The raw conditional-delete rate is being measured with this many items per mode.
    MeasuringRaw { items_per_mode: u64 },
    /// The raw rates, once measured.
    RawMeasured(RawRates),
    /// Loading `total` items starts.
    Loading { total: u64 },
    /// `items` more were written.
    Loaded { items: u64 },
    /// Loading ended; `late` if it ran into the planned first expiry.
    LoadFinished {
        items: u64,
        seconds: f64,
        late: bool,
    },
    /// The stream shows a delete this long after it returned (median of 20 probes).
    Calibrated { observer_delay_ms: f64 },
    /// The daemon runs; `expected` deletions are awaited.
    Sweeping { expected: u64 },
    /// `removed` deletions seen on the stream so far.
    Removed { removed: u64 },
    /// The daemon was stopped; the verdict is being computed.
    SweepFinished,
}

/// Receives [`Event`]s; called from the run's own task, so it must be quick.
pub trait Progress: Send + Sync {
    fn event(&self, event: Event);
}

/// Ignores every event.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn event(&self, _: Event) {}
}
