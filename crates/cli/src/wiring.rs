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

/// SIGINT or SIGTERM.
pub async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
