//! Retrying a store call under the core backoff policy.

use crate::store::StoreError;
use precise_ttl_core::{Backoff, ErrorClass};
use std::future::Future;

/// Runs `call` until it succeeds, fails with a non-retryable class, or runs out of attempts.
/// `on_throttle` is told about each throttled attempt.
pub async fn with_backoff<T, F, Fut>(
    backoff: &Backoff,
    mut on_throttle: impl FnMut(),
    mut call: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) if e.class.is_retryable() && backoff.may_retry_after(attempt) => {
                if e.class == ErrorClass::Throttled {
                    on_throttle();
                }
                tracing::debug!(attempt, error = %e, "retrying");
                tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}
