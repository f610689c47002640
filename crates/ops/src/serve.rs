//! `/metrics` (Prometheus text) and `/healthz` for `precise-ttl run` and `precise-ttl archive`:
//! the recorder each installs, and the server that answers what [`crate::probe`] (and Prometheus,
//! and a liveness probe) asks, with each one's health in one line.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use precise_ttl_engine::{DaemonHandle, Health};
use precise_ttl_stream::archive_stream::{ArchiveHealth, ArchiveProgress};
use std::net::SocketAddr;
use std::time::Duration;

/// Why the metrics could not be served.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The recorder could not be built or installed (one is installed already).
    #[error(transparent)]
    Recorder(#[from] metrics_exporter_prometheus::BuildError),
    #[error("cannot listen on {addr} for metrics: {error}")]
    Listen {
        addr: SocketAddr,
        error: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// How often histogram samples are folded into their buckets.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Installs the Prometheus recorder for this process. Call once, before the daemon starts.
pub fn install_recorder() -> Result<PrometheusHandle, ServeError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(precise_ttl_engine::metrics::LAG_SECONDS.to_string()),
            precise_ttl_engine::metrics::LAG_BUCKETS,
        )?
        .install_recorder()?;
    precise_ttl_engine::metrics::describe();
    Ok(handle)
}

/// Binds `addr` and serves `run`'s `/metrics` and `/healthz` until the process ends. Returns the
/// bound address (port 0 picks one).
pub async fn serve(
    addr: SocketAddr,
    prometheus: PrometheusHandle,
    daemon: DaemonHandle,
    stale_after: Duration,
) -> Result<SocketAddr, ServeError> {
    // The recorder keeps every histogram sample until upkeep folds it into buckets; a `/metrics`
    // nobody scrapes would otherwise grow by 8 bytes per delete, without end through a long
    // catch-up.
    let upkeep = prometheus.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(UPKEEP_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            upkeep.run_upkeep();
        }
    });
    // Healthy while index reads keep succeeding (or, for a worker holding no lease,
    // heartbeats); a store that stays unreachable turns this red long before the backlog
    // becomes visible to readers.
    serve_with(addr, prometheus, move || {
        let now = tokio::time::Instant::now();
        match daemon.status().health(now, stale_after) {
            Health::Reading => (StatusCode::OK, "ok\n".to_string()),
            Health::Standby => (
                StatusCode::OK,
                "ok: standby, no shard lease held, lease table reachable\n".to_string(),
            ),
            Health::Stalled(shards) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "stalled: shard(s) {} hold due items and no worker has renewed their lease for half a lease duration; this worker holds none (see `precise-ttl status` and the lease table)\n",
                    shards.join(",")
                ),
            ),
            Health::Stale(for_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("no successful index read for {:.1} s\n", for_.as_secs_f64()),
            ),
            Health::Starting => (
                StatusCode::SERVICE_UNAVAILABLE,
                "starting: no index read yet\n".to_string(),
            ),
        }
    })
    .await
}

/// The Prometheus recorder with the archive's metrics only (the daemon's would read as zeros
/// of deletes this process never makes).
pub fn install_archive_recorder() -> Result<PrometheusHandle, ServeError> {
    let handle = PrometheusBuilder::new().install_recorder()?;
    precise_ttl_engine::metrics::describe_archive();
    Ok(handle)
}

/// Binds `addr` and serves `archive`'s `/metrics` and `/healthz` until the process ends; returns
/// the bound address (port 0 picks one). The archive has counters and a gauge only, so the
/// recorder needs none of the histogram upkeep `run`'s server does.
pub async fn serve_archive(
    addr: SocketAddr,
    prometheus: PrometheusHandle,
    progress: ArchiveProgress,
    stale_after: Duration,
) -> Result<SocketAddr, ServeError> {
    serve_with(addr, prometheus, move || {
        match progress.health(tokio::time::Instant::now(), stale_after) {
            ArchiveHealth::Reading => (StatusCode::OK, "ok\n".to_string()),
            ArchiveHealth::Starting => (
                StatusCode::SERVICE_UNAVAILABLE,
                "starting: no pass over the stream yet\n".to_string(),
            ),
            ArchiveHealth::Stale(for_) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "no complete pass over the stream for {:.1} s\n",
                    for_.as_secs_f64()
                ),
            ),
        }
    })
    .await
}

/// Binds `addr` and serves `/metrics` from `prometheus` and `/healthz` from `health` (called per
/// request) until the process ends; returns the bound address. `run` and `archive` share it.
async fn serve_with<H>(
    addr: SocketAddr,
    prometheus: PrometheusHandle,
    health: H,
) -> Result<SocketAddr, ServeError>
where
    H: Fn() -> (StatusCode, String) + Clone + Send + Sync + 'static,
{
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|error| ServeError::Listen { addr, error })?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let p = prometheus.clone();
                async move { p.render() }
            }),
        )
        .route(
            "/healthz",
            get(move || {
                let answer = health();
                async move { answer }
            }),
        );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "metrics server stopped");
        }
    });
    Ok(bound)
}
