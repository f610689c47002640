//! The reader's clock: the system's wall clock by default, any function in tests.

use precise_ttl_core::Timestamp;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The current wall-clock time, as the rule's [`Timestamp`].
///
/// A clock set before 1970 reads as the epoch itself, which hides nothing.
pub fn now() -> Timestamp {
    Timestamp::from_unix_duration(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default(),
    )
}

/// A clock the interceptor reads once when a request leaves and once when its response arrives.
#[derive(Clone)]
pub(crate) struct Clock(Arc<dyn Fn() -> Timestamp + Send + Sync>);

impl Clock {
    pub(crate) fn system() -> Self {
        Clock(Arc::new(now))
    }

    pub(crate) fn from_fn(f: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        Clock(Arc::new(f))
    }

    pub(crate) fn now(&self) -> Timestamp {
        (self.0)()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}
