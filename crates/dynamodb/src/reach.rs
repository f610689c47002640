//! Waiting for the store at start: calls an opening attempt until it succeeds, fails for good,
//! the caller stops, or a deadline passes. A store that is unreachable, resets connections or
//! answers 5xx is waited for, with capped, jittered back-off and a warning at most every 10 s; a
//! misconfiguration (no table, no index, no lease table, access denied, no credentials or
//! region) fails at once.

use crate::error::AdapterError;
use precise_ttl_core::{Backoff, ErrorClass};
use std::future::Future;
use thiserror::Error;

/// Why the store was not reached.
#[derive(Debug, Error)]
pub enum ReachError {
    /// A failure that waiting does not cure.
    #[error(transparent)]
    Fatal(AdapterError),
    /// The deadline passed first; the last transient failure, if an attempt had failed.
    #[error("the deadline passed before the store could be reached")]
    DeadlinePassed(Option<AdapterError>),
}

/// Calls `attempt` until it succeeds (`Some`), fails for good, `stop` completes (`None`), or
/// `deadline` passes. A stop or the deadline ends an attempt in progress too: against a store
/// that does not answer, an attempt lasts up to the attempt timeout, and a stop must not wait
/// for it. Attempts should only read and create what is missing, so dropping one halfway is
/// harmless.
pub async fn until_reachable<T, F, Fut>(
    stop: impl Future<Output = ()>,
    deadline: Option<tokio::time::Instant>,
    mut attempt: F,
) -> Result<Option<T>, ReachError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AdapterError>>,
{
    let backoff = Backoff {
        base: std::time::Duration::from_millis(200),
        // At most a second between attempts: a store that comes back is used within a second.
        cap: std::time::Duration::from_secs(1),
        max_attempts: u32::MAX,
    };
    let mut failures = 0u32;
    let mut warned: Option<std::time::Instant> = None;
    tokio::pin!(stop);
    let deadline_passed = async move {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(deadline_passed);
    let mut last = None;
    loop {
        let result = tokio::select! {
            biased;
            _ = &mut stop => return Ok(None),
            _ = &mut deadline_passed => return Err(ReachError::DeadlinePassed(last)),
            r = attempt() => r,
        };
        let e = match result {
            Ok(t) => return Ok(Some(t)),
            Err(e) if matches!(e.class(), ErrorClass::Transient | ErrorClass::Throttled) => e,
            Err(e) => return Err(ReachError::Fatal(e)),
        };
        failures = failures.saturating_add(1);
        if warned.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10)) {
            tracing::warn!(error = %e, attempts = failures, "the store is not reachable yet; retrying");
            warned = Some(std::time::Instant::now());
        }
        last = Some(e);
        tokio::select! {
            _ = &mut stop => return Ok(None),
            _ = &mut deadline_passed => return Err(ReachError::DeadlinePassed(last)),
            _ = tokio::time::sleep(backoff.delay(failures, fastrand::f64())) => {}
        }
    }
}
