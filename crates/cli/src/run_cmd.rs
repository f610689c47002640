//! `precise-ttl run`: the daemon.

use crate::args::{DeleteModeArg, Global, RunArgs};
use crate::wiring::Outcome;
use precise_ttl_dynamodb::{DeleteMode, DynamoStore};
use precise_ttl_engine::{Clock, Daemon, DaemonConfig, SystemClock};
use std::sync::Arc;
use std::time::Duration;

pub async fn run(global: &Global, args: &RunArgs) -> anyhow::Result<Outcome> {
    let layout = global.layout()?;
    let table = global.table()?;
    if args.lookback < args.poll_interval {
        anyhow::bail!(
            "--lookback ({:?}) must be at least --poll-interval ({:?}), or items written between two reads could wait for the backlog pass",
            args.lookback,
            args.poll_interval
        );
    }
    if args.blog.index_layout == crate::args::IndexLayout::BlogWindow {
        if args.metrics_addr.is_some() {
            anyhow::bail!(
                "--metrics-addr is not available with --index-layout blog-window yet: each pass logs its counts (-v); use the sharded layout for metrics"
            );
        }
        return run_blog(global, args, &layout).await;
    }
    let prometheus = match args.metrics_addr {
        Some(_) => Some(crate::serve::install_recorder()?),
        None => None,
    };
    let dynamo = crate::wiring::connect(global).await?;
    let mode = match args.delete_mode {
        DeleteModeArg::Single => DeleteMode::Single,
        DeleteModeArg::Batch => DeleteMode::Batch,
    };
    let store = DynamoStore::open(dynamo, table, layout.clone())
        .await?
        .with_delete_mode(mode);
    let mut config = DaemonConfig::new(layout.shards);
    config.poll_interval = args.poll_interval;
    config.horizon = args.horizon;
    config.lookback = args.lookback;
    config.page_size = args.index_page.page_size;
    config.max_concurrency = args.deletes.concurrency as usize;
    config.initial_concurrency = config.initial_concurrency.min(config.max_concurrency);
    config.min_concurrency = config.min_concurrency.min(config.max_concurrency);
    config.max_deletes_per_second = args.max_deletes_per_second;
    config.batch_linger = args.batch_linger;
    config.backoff.max_attempts = args.retries.max_attempts;
    config.stray_check_interval =
        (!args.stray_check_interval.is_zero()).then_some(args.stray_check_interval);
    let daemon = Daemon::new(Arc::new(store), Arc::new(SystemClock), config);

    let mut where_metrics = String::new();
    if let (Some(addr), Some(prometheus)) = (args.metrics_addr, prometheus) {
        let stale = args
            .unhealthy_after
            .unwrap_or_else(|| (args.poll_interval * 10).max(Duration::from_secs(30)));
        let bound = crate::serve::serve(addr, prometheus, daemon.handle(), stale).await?;
        where_metrics = format!(", metrics on http://{bound}/metrics");
    }
    println!(
        "precise-ttl run: table {table:?}, {} shards, poll every {:?}, read ahead {:?}{where_metrics}",
        layout.shards, args.poll_interval, args.horizon
    );

    let run_for = args.run_for;
    let shutdown = async move {
        tokio::select! {
            _ = crate::wiring::signal() => {}
            _ = async {
                match run_for {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    };
    let report = daemon.run(shutdown).await?;
    let watermark = match report.watermark {
        Some(w) => format!(
            "{w} ({} ms behind the clock)",
            SystemClock.now().millis_since(w)
        ),
        None => "not established (no complete read)".into(),
    };
    println!(
        "stopped: deleted {}, skipped (changed) {}, errors {}, throttled {}, queries {}; watermark {watermark}",
        report.deleted, report.skipped, report.errors, report.throttled, report.queries
    );
    Ok(Outcome::Success)
}

/// The blog's window index, swept every poll interval: a pass covers every window since the
/// checkpoint, so downtime is caught up by the first pass after it.
async fn run_blog(
    global: &Global,
    args: &RunArgs,
    layout: &precise_ttl_core::TtlLayout,
) -> anyhow::Result<Outcome> {
    let mode = match args.delete_mode {
        DeleteModeArg::Single => DeleteMode::Single,
        DeleteModeArg::Batch => DeleteMode::Batch,
    };
    let mut sweeper = crate::blog::BlogSweeper::open(global, &args.blog, layout)
        .await?
        .with_store(|s| s.with_delete_mode(mode));
    sweeper.config.concurrency = args.deletes.concurrency as usize;
    sweeper.config.page_size = args.index_page.page_size;
    println!(
        "precise-ttl run: table {:?}, blog window index {:?} on {:?}, a pass every {:?}",
        global.table()?,
        layout.index_name,
        args.blog.window_attribute,
        args.poll_interval
    );
    let deadline = args.run_for.map(|d| tokio::time::Instant::now() + d);
    let mut totals = (0u64, 0u64, 0u64);
    let stop = crate::wiring::signal();
    tokio::pin!(stop);
    loop {
        let pass = sweeper.pass().await?;
        totals.0 += pass.report.deleted;
        totals.1 += pass.report.skipped;
        totals.2 += pass.report.errors;
        tracing::info!(
            windows = pass.windows,
            deleted = pass.report.deleted,
            "pass done"
        );
        let next = tokio::time::Instant::now() + args.poll_interval;
        let wake = deadline.map_or(next, |d| d.min(next));
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep_until(wake) => {}
        }
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            break;
        }
    }
    println!(
        "stopped: deleted {}, skipped (changed) {}, errors {}",
        totals.0, totals.1, totals.2
    );
    Ok(Outcome::Success)
}
