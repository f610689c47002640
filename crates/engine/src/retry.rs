//! Retrying a store call under the core backoff policy: the one retry loop of the workspace.

use crate::store::StoreError;
use precise_ttl_core::{Backoff, ErrorClass};
use std::fmt::Display;
use std::future::Future;

/// Runs `call` until it succeeds, fails with a non-retryable class, or runs out of attempts.
/// `on_throttle` is told about each throttled attempt.
pub async fn with_backoff<T, F, Fut>(
    backoff: &Backoff,
    on_throttle: impl FnMut(),
    call: F,
) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    with_backoff_by(backoff, |e: &StoreError| e.class, on_throttle, call).await
}

/// [`with_backoff`] for any error type, classified by `class_of` (a caller may treat an error
/// as final that another would retry, e.g. an unreachable endpoint at start-up).
pub async fn with_backoff_by<T, E, F, Fut>(
    backoff: &Backoff,
    class_of: impl Fn(&E) -> ErrorClass,
    mut on_throttle: impl FnMut(),
    mut call: F,
) -> Result<T, E>
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let class = class_of(&e);
                if !(class.is_retryable() && backoff.may_retry_after(attempt)) {
                    return Err(e);
                }
                if class == ErrorClass::Throttled {
                    on_throttle();
                }
                tracing::debug!(attempt, error = %e, "retrying");
                tokio::time::sleep(backoff.delay(attempt, fastrand::f64())).await;
                attempt += 1;
            }
        }
    }
}
