//! The engine's only source of the current time, injected so tests can control it.

use precise_ttl_core::Timestamp;
use std::time::{SystemTime, UNIX_EPOCH};

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// The wall clock. TTLs are wall-clock instants, so this is the clock production uses.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_unix_duration(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
        )
    }
}

/// Wall time that moves with tokio's clock: a fixed starting instant plus the tokio time elapsed
/// since. Under `tokio::time::pause()` the daemon's timers and its wall clock then advance
/// together and only when the runtime is idle, so a test observes exact instants, not a
/// machine's speed.
#[cfg(feature = "test-util")]
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    wall: Timestamp,
    start: tokio::time::Instant,
}

#[cfg(feature = "test-util")]
impl TokioClock {
    pub fn starting_at(wall: Timestamp) -> Self {
        TokioClock {
            wall,
            start: tokio::time::Instant::now(),
        }
    }
}

#[cfg(feature = "test-util")]
impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = self.start.elapsed().as_millis() as i64;
        Timestamp::from_millis(self.wall.as_millis() + elapsed)
    }
}
