//! `precise-ttl run`: the daemon, over our sharded index or the 2022 blog's window index.

use crate::wiring::Outcome;
use anyhow::Context;
use precise_ttl_dynamodb::{AdapterError, BlogWindows, Dynamo, DynamoStore, LeaseTable};
use precise_ttl_engine::lease::Leases;
use precise_ttl_engine::{
    Clock, Daemon, DaemonConfig, DaemonHandle, DaemonReport, ExpiryStore, Partitioning,
    SharedPartitioning, SystemClock,
};
use precise_ttl_flags::{Global, IndexLayout, RunArgs, UsageError};
use precise_ttl_stream::queue::QueueStore;
use std::sync::Arc;
use std::time::Duration;

/// How often a blog-window run saves its watermark as the checkpoint.
const SAVE_CHECKPOINT_EVERY: Duration = Duration::from_secs(5);

pub async fn run(global: &Global, args: &RunArgs) -> anyhow::Result<Outcome> {
    // `--for` counts from here (milliseconds after the process started), not from when the
    // store first answers: a scheduled run must end in its slot whatever the store does.
    let deadline = args.run_for.map(|d| tokio::time::Instant::now() + d);
    let layout = global.layout()?;
    let table = global.table()?;
    let settings = args.daemon_settings()?;
    let blog_options = match global.index_layout {
        IndexLayout::Sharded | IndexLayout::StreamQueue => None,
        IndexLayout::BlogWindow => Some(args.blog.options().map_err(UsageError::of)?),
    };
    if blog_options.is_some() && args.archive.archive.is_some() {
        return Err(UsageError(
            "--archive works with the sharded index only, not --index-layout blog-window".into(),
        )
        .into());
    }
    let handle = DaemonHandle::default();
    // Served before the store is reached: /healthz says "starting" meanwhile.
    let mut where_metrics = String::new();
    if let Some(addr) = args.metrics_addr {
        let prometheus = precise_ttl_ops::serve::install_recorder()?;
        let stale = args.unhealthy_after();
        let bound = precise_ttl_ops::serve::serve(addr, prometheus, handle.clone(), stale).await?;
        where_metrics = format!(", metrics on http://{bound}/metrics");
        println!("precise-ttl run: metrics on http://{bound}/metrics");
    }
    if blog_options.is_none() {
        // From the first scrape, whatever the lease mode or the store's state.
        precise_ttl_engine::metrics::configured_shards(global.shards);
    }
    let dynamo = crate::wiring::connect(global).await?;
    // Opening an s3:// archive checks the bucket, which an unreachable S3 makes slow.
    let sink = match deadline {
        Some(at) => tokio::time::timeout_at(at, crate::wiring::open_archive(&args.archive, global))
            .await
            .map_err(|_| {
                anyhow::anyhow!("the --for deadline passed while the archive was opened")
            })??,
        None => crate::wiring::open_archive(&args.archive, global).await?,
    };
    let mode = args.delete_mode;
    let stopped_early = || {
        println!("stopped before the store could be reached: nothing deleted");
        Ok(Outcome::Success)
    };
    let report = match blog_options {
        None if global.index_layout == IndexLayout::StreamQueue => {
            let queue = global.queue_table()?;
            let opened = crate::wiring::until_reachable_by(deadline, || async {
                let store = QueueStore::open(dynamo.clone(), table, &queue, layout.clone()).await?;
                let leases = fleet(&dynamo, args, table, &queue, &layout.shards, &handle).await?;
                let indexer = match args.indexer.no_indexer {
                    true => None,
                    false => Some(
                        precise_ttl_stream::queue::running::open(
                            &dynamo,
                            table,
                            &queue,
                            &args.indexer_options(&layout),
                            args.indexer_fleet(),
                        )
                        .await?,
                    ),
                };
                Ok((store, leases, indexer))
            })
            .await?;
            let Some((store, leases, indexer)) = opened else {
                return stopped_early();
            };
            let what = format!(
                "table {table:?}, queue {queue:?} of {} shards",
                layout.shards
            );
            let store = store.map_items(|items| {
                let items = items.with_delete_mode(mode);
                match &sink {
                    Some(sink) => items.with_archive(sink.clone()),
                    None => items,
                }
            });
            let config = daemon_config(&settings, store.write_capacity());
            let shards: SharedPartitioning<_> = Arc::new(layout.shards);
            let daemon = Daemon::new(Arc::new(store), dynamo.store_clock.clone(), shards, config)
                .with_handle(handle.clone());
            let mut indexing = indexer.map(precise_ttl_stream::queue::running::Running::start);
            let failed = indexing.as_mut().and_then(|i| i.failed.take());
            let report = serve_and_run(
                daemon,
                args,
                &what,
                &where_metrics,
                leases,
                deadline,
                failed,
            )
            .await;
            let indexed = match indexing {
                Some(running) => Some(running.stop().await),
                None => None,
            };
            let report = report?;
            if let Some(indexed) = indexed {
                let indexed = indexed?;
                println!(
                    "indexer: entries written {}, changes leaving the TTL as it was {}, without a TTL that can come due {}",
                    indexed.entries, indexed.unchanged, indexed.no_ttl
                );
            }
            report
        }
        None => {
            let opened = crate::wiring::until_reachable_by(deadline, || async {
                let store = DynamoStore::open(dynamo.clone(), table, layout.clone()).await?;
                let leases = fleet(
                    &dynamo,
                    args,
                    table,
                    &layout.index_name,
                    &layout.shards,
                    &handle,
                )
                .await?;
                Ok((store, leases))
            })
            .await?;
            let Some((store, leases)) = opened else {
                return stopped_early();
            };
            let what = format!("table {table:?}, {} shards", layout.shards);
            let shards: SharedPartitioning<_> = Arc::new(layout.shards);
            let mut store = store.with_delete_mode(mode);
            if let Some(sink) = &sink {
                store = store.with_archive(sink.clone());
            }
            let config = daemon_config(&settings, store.write_capacity());
            let store = Arc::new(store);
            let daemon = Daemon::new(store, dynamo.store_clock.clone(), shards, config)
                .with_handle(handle.clone());
            serve_and_run(daemon, args, &what, &where_metrics, leases, deadline, None).await?
        }
        Some(options) => {
            let opened = crate::wiring::until_reachable_by(deadline, || async {
                let now = SystemClock.now();
                let blog = BlogWindows::open(dynamo.clone(), table, &layout, &options, now).await?;
                // The blog layout is not `setup`'s: its lease table is created on first use,
                // as its checkpoint table is.
                if !args.fleet.no_leases {
                    precise_ttl_dynamodb::create_lease_table(
                        &dynamo,
                        &args.fleet.table.lease_table,
                    )
                    .await?;
                }
                let leases = fleet(
                    &dynamo,
                    args,
                    table,
                    &layout.index_name,
                    &*blog.windows,
                    &handle,
                )
                .await?;
                Ok((blog, leases))
            })
            .await?;
            let Some((blog, leases)) = opened else {
                return stopped_early();
            };
            let what = format!(
                "table {table:?}, blog window index {:?} on {:?} from window {}",
                layout.index_name,
                options.window_attribute,
                blog.first_window()
            );
            let store = blog.store.clone().with_delete_mode(mode);
            // Stray shard values do not exist in the window layout.
            let config = DaemonConfig {
                stray_check_interval: None,
                ..daemon_config(&settings, store.write_capacity())
            };
            let daemon = Daemon::new(
                Arc::new(store),
                dynamo.store_clock.clone(),
                blog.partitioning(),
                config,
            )
            .with_handle(handle.clone());
            let blog = Arc::new(blog);
            let saver = tokio::spawn({
                let (blog, handle) = (Arc::clone(&blog), handle.clone());
                async move {
                    blog.save_watermark_every(handle, SAVE_CHECKPOINT_EVERY)
                        .await
                }
            });
            let report =
                serve_and_run(daemon, args, &what, &where_metrics, leases, deadline, None).await;
            saver.abort();
            let report = report?;
            blog.save_watermark(&handle)
                .await
                .context("cannot save the window checkpoint on exit")?;
            report
        }
    };
    if let Some(sink) = &sink {
        sink.flush(crate::wiring::ARCHIVE_FLUSH_WAIT).await?;
    }
    let watermark = match report.watermark {
        Some(w) => format!(
            "{w} ({} ms behind the clock)",
            SystemClock.now().millis_since(w)
        ),
        None => "not established (no complete read)".into(),
    };
    println!(
        "stopped: deleted {}, skipped (changed) {}, unconfirmed {}, errors {}, throttled {}, queries {}; watermark {watermark}",
        report.deleted,
        report.skipped,
        report.unconfirmed,
        report.errors,
        report.throttled,
        report.queries
    );
    Ok(Outcome::Success)
}

/// The daemon's configuration for a table of `capacity` (the Lambda's mapping: one function), its
/// backlog budget said once on standard output.
fn daemon_config(
    settings: &precise_ttl_engine::DaemonSettings,
    capacity: precise_ttl_core::capacity::WriteCapacity,
) -> DaemonConfig {
    if let Some(budget) = settings.budget(capacity) {
        println!("precise-ttl run: {budget}");
    }
    settings.daemon_config(capacity)
}

type Fleet = Option<Arc<Leases<LeaseTable>>>;

/// This worker's leases over the lanes of `partitioning` (`None` with `--no-leases`).
async fn fleet<P: Partitioning + ?Sized>(
    dynamo: &Dynamo,
    args: &RunArgs,
    table: &str,
    index: &str,
    partitioning: &P,
    handle: &DaemonHandle,
) -> Result<Fleet, AdapterError> {
    if args.fleet.no_leases {
        return Ok(None);
    }
    let lease_table =
        LeaseTable::open(dynamo.clone(), &args.fleet.table.lease_table, table, index).await?;
    let (config, this) = args.fleet.lease_config();
    let leases = lease_table.worker_leases(partitioning, config);
    let leases = match this {
        Some(this) => leases.with_owner_check(Arc::new(this)),
        None => leases,
    };
    Ok(Some(Arc::new(leases.with_handle(handle.clone()))))
}

/// Prints the start line and runs until a signal, `--for`, or a fatal error; with leases,
/// beats alongside and releases them once the deletes in flight have drained.
async fn serve_and_run<S: ExpiryStore, C: Clock>(
    daemon: Daemon<S, C>,
    args: &RunArgs,
    what: &str,
    where_metrics: &str,
    leases: Fleet,
    deadline: Option<tokio::time::Instant>,
    failed: Option<tokio::sync::oneshot::Receiver<()>>,
) -> anyhow::Result<DaemonReport> {
    println!(
        "precise-ttl run: {what}, poll every {:?}, read ahead {:?}{where_metrics}",
        args.poll_interval, args.horizon
    );
    let shutdown = async move {
        tokio::select! {
            _ = crate::wiring::signal() => {}
            // A part running beside the daemon (the indexer) stopped for good.
            Some(Ok(())) = async {
                match failed {
                    Some(failed) => Some(failed.await),
                    None => std::future::pending().await,
                }
            } => {}
            _ = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    };
    let report = precise_ttl_engine::worker::run_worker(daemon, leases, shutdown).await;
    Ok(report?)
}
