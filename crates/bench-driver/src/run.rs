//! One benchmark run, start to verdict. In the stream-queue layout the daemon (and its indexer)
//! starts before the load and [`crate::entry_probe`] measures the queue from outside.

use crate::app::AppWriter;
use crate::beside::{Beside, abandon};
use crate::config::{BenchConfig, BenchIndex, indexer_checkpoint_table, queue_table};
use crate::entry_probe::{self, EntryDelay, QueueProbe, QueueReport};
use crate::error::BenchError;
use crate::fleet::{Fleet, FleetPlan, fill_lags};
use crate::items::ItemWriter;
use crate::lambda::Function;
use crate::lambda_run::{LambdaRun, fill_boundaries};
use crate::load::{create_blog_index, create_table, scan_keys};
use crate::observe::{Observer, calibrate};
use crate::plan;
use crate::progress::{Event, Progress};
use crate::raw::{self, RawRates};
use crate::report::{BenchRun, Measured, summarize};
use crate::usage::UsageSampler;
use precise_ttl_bench::Inputs;
use precise_ttl_core::Timestamp;
use precise_ttl_dynamodb::Dynamo;
use precise_ttl_dynamodb::bulk::put_all;
use precise_ttl_engine::{Clock, SystemClock};
use precise_ttl_ops::queue::setup::{QueueSetupOptions, setup_queue};
use precise_ttl_ops::setup::enable_old_image_stream;
use precise_ttl_ops::{SetupOptions, setup};
use precise_ttl_stream::stream::enable_keys_stream;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Runs the scenario on a fresh table at `endpoint` (which `dynamo` talks to; the daemon child
/// is pointed there too), and deletes the table afterwards.
pub async fn run(
    dynamo: &Dynamo,
    endpoint: &str,
    config: &BenchConfig,
    progress: &dyn Progress,
) -> Result<BenchRun, BenchError> {
    let layout = &config.layout;
    let window_attribute = match &config.index {
        // The queue's items carry no shard; the name is checked all the same.
        BenchIndex::Sharded | BenchIndex::StreamQueue => &layout.shard_attribute,
        BenchIndex::BlogWindow { attribute, .. } => attribute,
    };
    for (what, name) in [("TTL", &layout.ttl_attribute), ("shard", window_attribute)] {
        if *name == config.key_attribute {
            return Err(BenchError::AttributeClash {
                what,
                name: name.clone(),
            });
        }
    }
    let table = format!("precise-ttl-bench-{:08x}", fastrand::u32(..));
    create_table(dynamo, &table, &config.key_attribute, config.provisioned).await?;
    let result = run_on(dynamo, endpoint, &table, config, progress).await;
    // Best effort: DynamoDB Local forgets them anyway when it stops.
    let mut tables = vec![table.clone(), format!("{table}-checkpoints")];
    if config.index == BenchIndex::StreamQueue {
        tables.extend([queue_table(&table), indexer_checkpoint_table(&table)]);
    }
    for name in tables {
        let _ = dynamo.query.delete_table().table_name(name).send().await;
    }
    result
}

async fn run_on(
    dynamo: &Dynamo,
    endpoint: &str,
    table: &str,
    config: &BenchConfig,
    progress: &dyn Progress,
) -> Result<BenchRun, BenchError> {
    let layout = &config.layout;
    let items = match &config.index {
        BenchIndex::Sharded => ItemWriter::new(&config.key_attribute, layout),
        BenchIndex::BlogWindow { attribute, spec } => {
            ItemWriter::new(&config.key_attribute, layout).with_windows(attribute, *spec)
        }
        // Writers set only the TTL: the indexer finds the items on the stream.
        BenchIndex::StreamQueue => ItemWriter::new(&config.key_attribute, layout).without_shards(),
    };
    let probe = (config.index == BenchIndex::StreamQueue).then(|| QueueProbe {
        dynamo: dynamo.clone(),
        table: table.to_string(),
        queue_table: queue_table(table),
        key_attribute: config.key_attribute.clone(),
        ttl_attribute: layout.ttl_attribute.clone(),
        shards: layout.shards,
    });
    let clock = SystemClock;
    // The queue's raw deletes are measured before its stream is on: the indexer reads the stream
    // from its start and would index them (and the daemon sweep their entries) during the run.
    let mut raw = match probe {
        Some(_) => measure_raw(dynamo, table, config, &items, progress).await?,
        None => None,
    };
    match probe {
        Some(_) => {
            enable_old_image_stream(dynamo, table).await?;
        }
        None => enable_keys_stream(dynamo, table).await?,
    }
    let t = clock.now();
    let early = plan::string_ttls(&items, t);
    put_all(dynamo, table, early.writes, |_| {}).await?;
    let mut planted = early.planted;
    let options = setup_options(config, Duration::from_millis(100));
    match &config.index {
        BenchIndex::Sharded => {
            setup::setup(dynamo, table, layout, &options).await?;
        }
        BenchIndex::BlogWindow { attribute, .. } => {
            create_blog_index(
                dynamo,
                table,
                &layout.index_name,
                attribute,
                &layout.ttl_attribute,
            )
            .await?;
        }
        // The product's own setup of the layout: the stream checked, the queue and lease tables.
        BenchIndex::StreamQueue => {
            let queue = QueueSetupOptions {
                queue_table: queue_table(table),
                native_ttl: false,
                lease_table: options.lease_table.clone(),
            };
            setup_queue(dynamo, table, layout, &queue).await?;
        }
    }
    // On the bench table itself, so the store is warm before the measured window.
    if probe.is_none() {
        raw = measure_raw(dynamo, table, config, &items, progress).await?;
    }

    // The queue's indexer runs in the daemon and must tail the stream while the load is written
    // (entries written as the items are: the steady state, not a catch-up of the whole stream),
    // so its daemon starts before the load. The observer starts after the indexer's probe is
    // deleted (not a planted item) and before the load (backlog items go as soon as indexed).
    let mut fleet = None;
    let mut early_start = None;
    if let Some(probe) = &probe {
        let started = clock.now();
        // The first TTL is planned once the daemon is ready; till then it lies an hour ahead.
        let provisional = started.as_millis() + 3_600_000;
        let f = fleet.insert(start_fleet(config, table, endpoint, provisional)?);
        let sampler = UsageSampler::start(f.first_pid().unwrap_or(0));
        probe
            .wait_until_indexing(|| f.check_running(), INDEXER_READY_WITHIN)
            .await?;
        let ready = Duration::from_millis(clock.now().millis_since(started).max(0) as u64);
        early_start = Some((started, ready, sampler));
    }
    // Reading the stream costs DynamoDB Local dearly while the load fills it, so the observer
    // starts that early only when something is deleted during the load: a backlog.
    let early_observer = match probe {
        Some(_) if config.backlog > 0 => {
            Some(start_observer(dynamo, table, &items, progress).await?)
        }
        _ => None,
    };

    // Expirations start once loading is surely over. The queue's load runs beside the daemon:
    // the indexer reads every write back from the stream (which DynamoDB Local serves slowly,
    // the more so the longer the stream) and writes its entry, the samples are read back, and a
    // backlog is deleted as it is indexed. A load that ends late has items written after their
    // TTL, whose entries land behind the sweep, and extensions sent late: planned slowly.
    let total = config.items + config.backlog;
    let pace = match (&probe, config.backlog) {
        (None, _) => 2500.0,
        (Some(_), 0) => 250.0,
        (Some(_), _) => 150.0,
    };
    let load_estimate = Duration::from_secs_f64(total as f64 / pace + 2.0);
    let first = clock
        .now()
        .saturating_add(load_estimate + Duration::from_secs(4) + config.idle);
    if let Some(f) = fleet.as_mut() {
        f.retime(
            first.as_millis(),
            first.saturating_add(config.spread).as_millis(),
        );
    }
    let main = plan::for_config(config, &items, t, first);
    planted.extend(main.planted);
    let (loaded_tx, loaded_rx) = watch::channel(0u64);
    let (writes, sampling) = match &probe {
        Some(probe) => {
            let stride = entry_probe::sample_stride(main.writes.len());
            let (rest, samples) = entry_probe::take_samples(probe, main.writes, stride, t);
            let task = tokio::spawn(probe.clone().sample_through(samples, loaded_rx));
            (rest, Some(task))
        }
        None => (main.writes, None),
    };
    progress.event(Event::Loading {
        total: writes.len() as u64,
    });
    let load_started = Instant::now();
    let load = put_all(dynamo, table, writes, |n| {
        progress.event(Event::Loaded { items: n });
        loaded_tx.send_modify(|sent| *sent += n);
    });
    // The units the load consumed are not the sweeper's: not counted.
    let _units = match fleet.as_mut() {
        // The daemon already runs (stream-queue): watched, and killed on schedule in a crash
        // loop, while the load goes on.
        Some(f) => tokio::select! {
            loaded = load => loaded?,
            failed = tend(f) => return Err(failed),
        },
        None => load.await?,
    };
    drop(loaded_tx);
    let load_seconds = load_started.elapsed().as_secs_f64();
    progress.event(Event::LoadFinished {
        items: planted.len() as u64,
        seconds: load_seconds,
        late: clock.now() > first.saturating_sub(Duration::from_secs(1)),
    });

    // The application writes from here to the end of the run. DynamoDB Local has no partitions
    // the bound knows of.
    let app = (config.app_writes_per_s > 0.0).then(|| {
        AppWriter::start(
            dynamo,
            table,
            items.clone(),
            layout.shards.get(),
            config.app_writes_per_s,
            config.seed,
            std::sync::Arc::new(|_: &str| None),
        )
    });

    let (observer, observer_delay_ms) = match early_observer {
        Some(o) => o,
        None => start_observer(dynamo, table, &items, progress).await?,
    };

    // Run the daemon until every expected deletion was seen after the last TTL plus the grace
    // period (or the timeout), then stop it.
    let (run_started, indexer_ready, sampler) = match early_start {
        Some((started, ready, sampler)) => (started, Some(ready), Some(sampler)),
        None => (clock.now(), None, None),
    };
    let watch = Watch::new(config, first, run_started, total);
    if fleet.is_none() && config.lambda.is_none() && !config.no_sweeper {
        fleet = Some(start_fleet(config, table, endpoint, first.as_millis())?);
    }
    let mut lambda = config.lambda.clone().map(|plan| {
        LambdaRun::new(
            plan,
            lambda_function(config, table, endpoint),
            run_started.as_millis(),
        )
    });
    let beside = Beside::start(
        dynamo,
        table,
        &items,
        main.extensions,
        fleet.as_ref(),
        sampler,
    );
    progress.event(Event::Sweeping { expected: total });
    let removed = || observer.removed_count();
    let watched = watch
        .until_over(&clock, progress, removed, &mut fleet, lambda.as_mut())
        .await;
    if let Err(e) = watched {
        if let Some(lambda) = lambda {
            lambda.finish().await;
        }
        abandon(fleet, app, beside, clock.now()).await;
        return Err(e);
    }
    // Scrape while the workers still run: their counters die with them.
    let (capacity, mut fleet_report, failed, shutdown) = match fleet {
        Some(fleet) => {
            // In a crash loop only the last process's units are left: no figure per item.
            let capacity = match config.crash_loop {
                Some(_) => None,
                None => fleet.capacity().await,
            };
            let (report, failed, shutdown) = fleet.stop(clock.now().as_millis()).await?;
            (capacity, Some(report), failed, shutdown)
        }
        None => (None, None, None, Duration::ZERO),
    };
    let mut lambda_report = match lambda {
        Some(lambda) => Some(lambda.finish().await),
        None => None,
    };
    let ended = beside.end(app, &clock, progress).await?;
    // The last REMOVE records are still on their way to the stream.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let removals = observer.stop().await?;
    if let Some(status) = failed {
        return Err(BenchError::DaemonFailed(status));
    }

    let present_at_end = scan_keys(dynamo, table, &config.key_attribute).await?;
    // The daemon is stopped: what the queue holds now is all the indexer wrote.
    let queue = match (&probe, sampling) {
        (Some(probe), Some(sampling)) => {
            let delays = sampling.await??;
            let check = probe
                .check_entries(probe.scan_left().await?, clock.now())
                .await?;
            Some(QueueReport {
                queue_table: probe.queue_table.clone(),
                indexer_ready_ms: indexer_ready.map_or(0, |d| d.as_millis() as u64),
                entry_delay: EntryDelay::of(&delays),
                entries_checked: check.checked,
                entries_missing: check.missing,
                entries_missing_keys: check.missing_keys,
            })
        }
        _ => None,
    };
    let watched = ended.inputs(run_started, config, |_| None);
    let inputs = Inputs {
        planted,
        removals,
        present_at_end,
        observer_error_ms: Some(observer_delay_ms),
        // The bound goes by the faster of the two ways this run measured the store deleting
        // (none without a sweeper: there is no lag to hold to it).
        capacity: raw
            .filter(|_| !config.no_sweeper)
            .map(|r| precise_ttl_bench::StoreCapacity {
                per_second: r.single_per_s.max(r.batch_per_s),
                burst_items: 0.0,
                floor_ms: 0.0,
                source: "this run's faster raw delete rate (DeleteItem or PartiQL batch)".into(),
                partition: None,
            }),
        // The sweeper deletes in batches by default: its rate while behind is held to this.
        raw_batch_per_s: raw.map(|r| r.batch_per_s),
        // The extensions took the store's capacity as the deletes did; DynamoDB Local has no
        // partitions the bound knows of, so only its store-wide rate counts them.
        ..watched
    };
    let measured = Measured {
        load_seconds,
        raw,
        usage: ended.usage,
        shutdown_ms: shutdown.as_millis() as u64,
        capacity,
        observer_delay_ms,
    };
    let report = precise_ttl_bench::analyze(&inputs);
    // Each expired item's TTL and lag, back from its point on the scatter plot.
    let lags: Vec<(i64, i64)> = report
        .lag_points
        .iter()
        .map(|p| {
            let seen = inputs.run_started_ms + (p.t_s * 1000.0).round() as i64;
            (seen - p.lag_ms, p.lag_ms)
        })
        .collect();
    let fleet = match (&config.fleet, config.crash_loop, fleet_report.as_mut()) {
        (Some(_), _, Some(f)) => {
            fill_lags(f, &lags);
            fleet_report
        }
        (None, Some(every), Some(f)) => {
            fill_lags(f, &lags);
            f.crash_loop = Some(f.judge_crash_loop(every, &inputs));
            fleet_report
        }
        _ => None,
    };
    if let Some(l) = lambda_report.as_mut() {
        fill_boundaries(l, &lags);
    }
    let mut run = summarize(config, report, &measured, fleet, lambda_report);
    if let Some(queue) = queue {
        run.markdown.push_str(&queue.to_markdown());
        run.summary.queue = Some(queue);
    }
    Ok(run)
}

/// The longest wait for the daemon's indexer to write its first entry: the process starts, opens
/// the stream and reads it from its start (the string-TTL items, the probe).
const INDEXER_READY_WITHIN: Duration = Duration::from_secs(60);

/// The raw conditional-delete rates (`None` when `--raw-items 0`).
async fn measure_raw(
    dynamo: &Dynamo,
    table: &str,
    config: &BenchConfig,
    items: &ItemWriter,
    progress: &dyn Progress,
) -> Result<Option<RawRates>, BenchError> {
    if config.raw_items == 0 {
        return Ok(None);
    }
    progress.event(Event::MeasuringRaw {
        items_per_mode: config.raw_items,
    });
    let rates = raw::measure(
        dynamo,
        table,
        &config.layout,
        &config.index,
        items,
        config.raw_items,
    )
    .await?;
    progress.event(Event::RawMeasured(rates));
    Ok(Some(rates))
}

/// The stream observer, started from now on and calibrated; its median delay.
async fn start_observer(
    dynamo: &Dynamo,
    table: &str,
    items: &ItemWriter,
    progress: &dyn Progress,
) -> Result<(Observer, f64), BenchError> {
    let observer = Observer::start(dynamo, table).await?;
    let observer_delay_ms = calibrate(dynamo, table, items, &observer).await?;
    progress.event(Event::Calibrated { observer_delay_ms });
    Ok((observer, observer_delay_ms))
}

/// Watches a fleet that runs during the load, and carries out its crash loop's kills; returns
/// only when a process exited or could not be restarted.
async fn tend(fleet: &mut Fleet) -> BenchError {
    loop {
        let tended = match fleet.check_running() {
            Ok(()) => fleet.tick(SystemClock.now().as_millis()).await,
            Err(e) => Err(e),
        };
        if let Err(e) = tended {
            return e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The function as a deploy template would configure it for the bench table.
fn lambda_function(config: &BenchConfig, table: &str, endpoint: &str) -> Function {
    let layout = &config.layout;
    Function {
        program: PathBuf::new(),
        name: "precise-ttl-bench".into(),
        memory_mb: 256,
        variables: vec![
            ("PRECISE_TTL_TABLE".into(), table.into()),
            (
                "PRECISE_TTL_TTL_ATTRIBUTE".into(),
                layout.ttl_attribute.clone(),
            ),
            (
                "PRECISE_TTL_SHARD_ATTRIBUTE".into(),
                layout.shard_attribute.clone(),
            ),
            ("PRECISE_TTL_INDEX_NAME".into(), layout.index_name.clone()),
            ("PRECISE_TTL_SHARDS".into(), layout.shards.get().to_string()),
            (
                "PRECISE_TTL_POLL_INTERVAL".into(),
                format!("{}ms", config.poll_interval.as_millis()),
            ),
            (
                "PRECISE_TTL_DELETE_MODE".into(),
                config.delete_mode.name().into(),
            ),
            ("AWS_ENDPOINT_URL_DYNAMODB".into(), endpoint.into()),
        ],
    }
}

/// `setup` of the bench table, checking every `poll_interval` whether the index is up.
/// Native TTL stays off: the store would delete too, and we measure our deletes only. A
/// provisioned table's index gets the table's capacity, as the bench's partitions are
/// modelled alike (setup asks for the choice to be explicit).
pub(crate) fn setup_options(config: &BenchConfig, poll_interval: Duration) -> SetupOptions {
    SetupOptions {
        native_ttl: false,
        poll_interval,
        index_capacity: config
            .provisioned
            .map(|p| precise_ttl_ops::setup::IndexCapacity {
                read: p.read as i64,
                write: p.write as i64,
            }),
        ..SetupOptions::default()
    }
}

/// When a run's watch ends: at the judging time (the last TTL plus the grace period) once
/// every expected removal was seen, and `timeout` after it at the latest; or `--stop-after`
/// into the run. The live and the simulated run watch alike.
pub(crate) struct Watch {
    judge_at: Timestamp,
    give_up: Timestamp,
    stop_at: Option<Timestamp>,
    /// Without a sweeper nothing is cleared: the run lasts the load's span.
    no_sweeper: bool,
    total: u64,
}

impl Watch {
    pub(crate) fn new(
        config: &BenchConfig,
        first: Timestamp,
        run_started: Timestamp,
        total: u64,
    ) -> Watch {
        let judge_at = first
            .saturating_add(config.spread)
            .saturating_add(config.grace);
        Watch {
            judge_at,
            give_up: judge_at.saturating_add(config.timeout),
            stop_at: config
                .stop_after
                .map(|after| run_started.saturating_add(after)),
            no_sweeper: config.no_sweeper,
            total,
        }
    }

    /// Whether the watch is over at `now`, `removed` removals seen.
    pub(crate) fn over(&self, now: Timestamp, removed: u64) -> bool {
        let done = removed >= self.total || self.no_sweeper;
        (now >= self.judge_at && (done || now >= self.give_up))
            || self.stop_at.is_some_and(|stop| now >= stop)
    }

    /// Watches until [`Watch::over`], every 100 ms: reports the removals seen so far
    /// (`removed`), and moves the fleet and the Lambda's schedule, if any, on to now.
    pub(crate) async fn until_over(
        &self,
        clock: &impl Clock,
        progress: &dyn Progress,
        mut removed: impl FnMut() -> Result<u64, BenchError>,
        fleet: &mut Option<Fleet>,
        mut lambda: Option<&mut LambdaRun>,
    ) -> Result<(), BenchError> {
        loop {
            let removed = removed()?;
            progress.event(Event::Removed { removed });
            let now = clock.now();
            if self.over(now, removed) {
                return Ok(());
            }
            tick_fleet(fleet, now).await?;
            if let Some(lambda) = lambda.as_deref_mut() {
                lambda
                    .tick(now.as_millis())
                    .await
                    .map_err(BenchError::DaemonIo)?;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// One step of the watch for the workers: one that exited fails the run, and the fleet's plan
/// (joins, kills, the crash loop) moves on to `now`.
pub(crate) async fn tick_fleet(
    fleet: &mut Option<Fleet>,
    now: Timestamp,
) -> Result<(), BenchError> {
    if let Some(fleet) = fleet {
        fleet.check_running()?;
        fleet.tick(now.as_millis()).await?;
    }
    Ok(())
}

/// The workers: one plain `run` without a fleet plan (killed and started again in a crash
/// loop), else the plan's workers with their ids and lease duration.
pub(crate) fn start_fleet(
    config: &BenchConfig,
    table: &str,
    endpoint: &str,
    first_ttl_ms: i64,
) -> Result<Fleet, BenchError> {
    let (cfg, table, endpoint) = (config.clone(), table.to_string(), endpoint.to_string());
    let plan = config.fleet.clone().unwrap_or_else(|| {
        FleetPlan::new(1, Duration::from_secs(10), Vec::new()).expect("one worker")
    });
    let fleet = config.fleet.is_some();
    let lease = format!("{}ms", plan.lease_duration.as_millis());
    let command = move |worker: &str| {
        let mut cmd = cfg.run_command(&table, &endpoint);
        if fleet {
            cmd.args(["--worker-id", worker, "--lease-duration", &lease]);
        }
        cmd
    };
    let fleet = Fleet::start(
        plan,
        config.layout.shards.get() as usize,
        first_ttl_ms,
        Box::new(command),
    )?;
    Ok(match config.crash_loop {
        // Its own stream of pauses, so the planted items stay those of the seed without it.
        Some(every) => fleet.crash_every(
            every,
            config.seed ^ 0xc4a5_4100,
            first_ttl_ms + config.spread.as_millis() as i64,
        ),
        None => fleet,
    })
}
