//! `precise-ttl archive`: flags to options, the sink opened, the stream tailed until a signal
//! (`precise_ttl_stream::archive_stream` does the work), the counts printed; with
//! `--metrics-addr`, its counters on `/metrics` and its health on `/healthz` meanwhile.
//!
//! Every message goes to standard error: with `--to -` the records are standard output. The
//! start line (`precise-ttl archive: table …`) comes once the stream is open and says which
//! record-time resolution is in force and why.

use crate::args::{ArchiveArgs, Global};
use crate::wiring::Outcome;
use axum::http::StatusCode;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use precise_ttl_stream::archive_stream::{
    ArchiveHealth, ArchiveOptions, ArchiveProgress, archive, open,
};
use std::net::SocketAddr;
use std::time::Duration;

pub async fn run(global: &Global, args: &ArchiveArgs) -> anyhow::Result<Outcome> {
    let stop = crate::wiring::signal();
    let table = global.table()?;
    let layout = global.layout()?;
    let progress = ArchiveProgress::default();
    // Served before the store is reached: /healthz says "starting" meanwhile.
    let mut where_metrics = String::new();
    if let Some(addr) = args.archive_metrics_addr {
        let stale = args
            .archive_unhealthy_after
            .unwrap_or_else(|| (args.archive_poll_interval * 10).max(Duration::from_secs(30)));
        let bound = serve(addr, install_recorder()?, progress.clone(), stale).await?;
        where_metrics = format!(", metrics on http://{bound}/metrics");
        eprintln!("precise-ttl archive: metrics on http://{bound}/metrics");
    }
    // Records go to standard output with `--to -`: the messages go to standard error then.
    let sink = args.tuning.open(&args.archive_to, global).await?;
    let dynamo = crate::wiring::connect(global).await?;
    let options = ArchiveOptions {
        ttl_attribute: layout.ttl_attribute.clone(),
        checkpoint_table: args.archive_checkpoint_table.clone(),
        poll_interval: args.archive_poll_interval,
        record_time_resolution: args.record_time_resolution,
    };
    // A store that is slow or unreachable at start (a restart during a blip) is waited for.
    let Some(opened) = crate::wiring::until_reachable(|| open(&dynamo, table, &options)).await?
    else {
        sink.flush(crate::wiring::ARCHIVE_FLUSH_WAIT).await?;
        eprintln!("stopped before the store could be reached: nothing archived");
        return Ok(Outcome::Success);
    };
    eprintln!(
        "precise-ttl archive: table {table:?}, stream {}, record times to {}, checkpoints in {:?}{where_metrics}",
        opened.arn(),
        opened.resolution().describe(),
        args.archive_checkpoint_table,
    );
    let report = archive(table, opened, &sink, &options, &progress, stop).await;
    // Whatever the stream did, what reached the sink goes to its final place.
    sink.flush(crate::wiring::ARCHIVE_FLUSH_WAIT).await?;
    let report = report?;
    eprintln!(
        "stopped: {} expiry records archived ({} by native TTL), {} other REMOVE records left out",
        report.records, report.native, report.other_removes
    );
    Ok(Outcome::Success)
}

/// The Prometheus recorder with the archive's metrics only (the daemon's would read as zeros
/// of deletes this process never makes).
fn install_recorder() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new().install_recorder()?;
    precise_ttl_engine::metrics::describe_archive();
    Ok(handle)
}

/// Serves `/metrics` and `/healthz` until the process ends; returns the bound address (port 0
/// picks one). The archive has counters and a gauge only, so the recorder needs none of the
/// histogram upkeep `run`'s server does.
async fn serve(
    addr: SocketAddr,
    prometheus: PrometheusHandle,
    progress: ArchiveProgress,
    stale_after: Duration,
) -> anyhow::Result<SocketAddr> {
    crate::serve::serve_with(addr, prometheus, move || {
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
