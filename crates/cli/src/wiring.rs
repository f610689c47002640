//! Wiring shared by every command: the clients built once from the global flags, the outcome a
//! command reports to `main` (which alone turns it into an exit code), and the stop signal.

use crate::args;
use precise_ttl_dynamodb::{ConnectOptions, Dynamo};

/// What a command wants the process to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Finished, but some items could not be deleted; they stay due.
    Partial,
    /// `doctor` found problems.
    Findings,
}

/// The clients every command shares, built once.
pub async fn connect(global: &args::Global) -> Result<Dynamo, precise_ttl_dynamodb::AdapterError> {
    Dynamo::connect(&ConnectOptions {
        endpoint_url: global.endpoint_url.clone(),
        region: global.region.clone(),
        connect_timeout: global.connect_timeout,
        attempt_timeout: global.attempt_timeout,
    })
    .await
}

/// How long a stopping command waits for its archive to reach its final place (S3: the last
/// segments uploaded); what is left stays in the spool for the next start.
pub const ARCHIVE_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// SIGINT or SIGTERM. The handlers are installed when this is called, not when it is first
/// awaited: a signal that comes while a command is still starting (opening its archive, say)
/// must stop it in order rather than kill it.
pub fn signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let interrupt = signal(SignalKind::interrupt()).ok();
        async move {
            match (term, interrupt) {
                (Some(mut term), Some(mut interrupt)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = term.recv() => {}
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Calls `attempt` until it succeeds, fails for good, or a signal arrives (`Ok(None)`). A store
/// that is unreachable, resets connections or answers 5xx is waited for, with capped, jittered
/// back-off and a warning at most every 10 s; a misconfiguration (no table, no index, no lease
/// table, access denied, no credentials or region) fails at once.
pub async fn until_reachable<T, F, Fut>(mut attempt: F) -> anyhow::Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, precise_ttl_dynamodb::AdapterError>>,
{
    use precise_ttl_core::{Backoff, ErrorClass};
    let backoff = Backoff {
        base: std::time::Duration::from_millis(200),
        // At most a second between attempts: a store that comes back is used within a second.
        cap: std::time::Duration::from_secs(1),
        max_attempts: u32::MAX,
    };
    let mut failures = 0u32;
    let mut warned: Option<std::time::Instant> = None;
    let stop = signal();
    tokio::pin!(stop);
    loop {
        let e = match attempt().await {
            Ok(t) => return Ok(Some(t)),
            Err(e) if matches!(e.class(), ErrorClass::Transient | ErrorClass::Throttled) => e,
            Err(e) => return Err(e.into()),
        };
        failures = failures.saturating_add(1);
        if warned.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10)) {
            tracing::warn!(error = %e, attempts = failures, "the store is not reachable yet; retrying");
            warned = Some(std::time::Instant::now());
        }
        tokio::select! {
            _ = &mut stop => return Ok(None),
            _ = tokio::time::sleep(backoff.delay(failures, fastrand::f64())) => {}
        }
    }
}
