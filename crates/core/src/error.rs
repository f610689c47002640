//! The classification every store error carries, so the engine can act without knowing AWS.

/// What the engine should do about a failed store call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The store asked us to slow down: retry after a backoff and lower the pressure.
    Throttled,
    /// A timeout, a reset connection or a 5xx: retry after a backoff.
    Transient,
    /// A conditional write found the item changed. An expected outcome, never retried.
    ConditionFailed,
    /// Retrying cannot help (missing table or index, access denied, invalid request).
    Fatal,
}

impl ErrorClass {
    pub fn is_retryable(self) -> bool {
        matches!(self, ErrorClass::Throttled | ErrorClass::Transient)
    }
}
