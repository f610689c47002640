//! `precise-ttl bench`: its flags, turned into a [`BenchConfig`] for `precise-ttl-bench-driver`,
//! DynamoDB Local started when no endpoint is given, progress bars, and the report printed.
//! What the benchmark does is the driver's.

use crate::args::{BenchArgs, Global, IndexLayout};
use crate::wiring::Outcome;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use precise_ttl_bench_driver::{
    BenchConfig, BenchIndex, DaemonCommand, Event, FleetPlan, LambdaPlan, Progress, Provisioned,
    Revision,
};
use precise_ttl_dynamodb::{Dynamo, DynamoDbLocal};
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Mutex;

fn bar(len: u64, what: &str) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(len), target);
    pb.set_style(
        ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// The driver's progress as bars and lines on standard error.
#[derive(Default)]
struct Bars(Mutex<Option<ProgressBar>>);

impl Bars {
    fn set(&self, pb: Option<ProgressBar>) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = std::mem::replace(&mut *slot, pb) {
            old.finish_and_clear();
        }
    }

    fn with(&self, f: impl FnOnce(&ProgressBar)) {
        if let Some(pb) = &*self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            f(pb);
        }
    }
}

impl Progress for Bars {
    fn event(&self, event: Event) {
        match event {
            Event::MeasuringRaw { items_per_mode } => eprintln!(
                "measuring the raw conditional-delete rate ({items_per_mode} items per mode)..."
            ),
            Event::RawMeasured(r) => eprintln!(
                "  raw DeleteItem: {:.0} items/s; raw PartiQL batch: {:.0} items/s",
                r.single_per_s, r.batch_per_s
            ),
            Event::Loading { total } => self.set(Some(bar(total, "loading"))),
            Event::Loaded { items } => self.with(|pb| pb.inc(items)),
            Event::LoadFinished {
                items,
                seconds,
                late,
            } => {
                self.set(None);
                eprintln!("loaded {items} items in {seconds:.1} s");
                if late {
                    eprintln!(
                        "warning: loading took longer than planned; the first items expire as the sweeper starts"
                    );
                }
            }
            Event::Calibrated { observer_delay_ms } => eprintln!(
                "stream observation delay: {observer_delay_ms:.1} ms (median of 20 probe deletes)"
            ),
            Event::Sweeping { expected } => self.set(Some(bar(expected, "deleted"))),
            Event::Removed { removed } => self.with(|pb| pb.set_position(removed)),
            Event::SweepFinished => self.set(None),
        }
    }
}

pub async fn run(global: &Global, args: &BenchArgs) -> anyhow::Result<Outcome> {
    let exe =
        std::env::current_exe().context("finding the precise-ttl binary to run as the daemon")?;
    let mut config = BenchConfig::new(
        args.name.clone(),
        global.layout()?,
        DaemonCommand {
            program: exe,
            extra_args: args.daemon_args.clone(),
        },
    );
    config.items = args.items;
    config.spread = args.spread;
    config.hot_shard_share = hot_shard_share(args, config.layout.shards.get())?;
    config.backlog = args.backlog;
    config.idle = args.idle;
    config.grace = args.grace;
    config.timeout = args.timeout;
    config.stop_after = args.stop_after;
    config.raw_items = args.raw_items;
    config.index = match args.index_layout {
        IndexLayout::Sharded => BenchIndex::Sharded,
        IndexLayout::BlogWindow => BenchIndex::blog_minutes(),
    };
    if args.ttl_granularity.is_zero() {
        anyhow::bail!("--ttl-granularity must be at least 1ms");
    }
    config.ttl_granularity = args.ttl_granularity;
    if let Some(seed) = args.seed {
        config.seed = seed;
    }
    config.poll_interval = args.poll_interval;
    if let Some(program) = &args.lambda {
        config.lambda = Some(LambdaPlan {
            program: program.clone(),
            invocations: args.invocations,
            length: args.invocation_length,
            every: args.invocation_every,
        });
    }
    if let Some(workers) = args.workers {
        config.fleet = Some(
            FleetPlan::new(workers.into(), args.lease_duration, args.events.clone())
                .map_err(|e| anyhow::anyhow!("--event: {e}"))?,
        );
    }
    config.crash_loop = args.kill_every;
    if !(args.app_writes.is_finite() && (0.0..=1_000_000.0).contains(&args.app_writes)) {
        anyhow::bail!(
            "--app-writes must be a rate from 0 (off) to 1000000 items/s, got {}",
            args.app_writes
        );
    }
    config.app_writes_per_s = args.app_writes;
    config.no_sweeper = args.no_sweeper;
    // Reads as many as writes: the final scan and the sweeper's index queries never wait on a
    // read limit the run does not measure.
    config.provisioned = args
        .sim
        .sim_provisioned_wcu
        .map(|n| Provisioned { read: n, write: n });
    config.delete_mode = args.delete_mode.mode();
    config.argv = std::env::args().collect();
    // The checkout this binary was built from; an installed binary whose sources are gone
    // records "unknown".
    config.revision = Revision::of_checkout(Path::new(env!("CARGO_MANIFEST_DIR")));

    if args.sim.simulated {
        if global.endpoint_url.is_some() {
            anyhow::bail!("--simulated starts its own store: leave out --endpoint-url");
        }
        let sim = args.sim.config()?;
        let bars = Bars::default();
        let result = precise_ttl_bench_driver::run_simulated(sim, &config, &bars).await;
        bars.set(None);
        return finish(result?, args);
    }
    let mut _local = None;
    let (dynamo, endpoint) = match &global.endpoint_url {
        Some(url) => (crate::wiring::connect(global).await?, url.clone()),
        None => {
            eprintln!("starting DynamoDB Local...");
            let big_heap = args.backlog + args.items > 50_000;
            let local = tokio::task::spawn_blocking(move || start_local(big_heap)).await??;
            let url = local.endpoint().to_string();
            _local = Some(local);
            (Dynamo::local(&url), url)
        }
    };
    let bars = Bars::default();
    let result = precise_ttl_bench_driver::run(&dynamo, &endpoint, &config, &bars).await;
    bars.set(None);
    finish(result?, args)
}

/// `--hot-shard-share`, checked: a fraction strictly between 0 and 1, with a shard besides the
/// hot one to send the rest to, in the layout whose index partitions are shards.
fn hot_shard_share(args: &BenchArgs, shards: u16) -> anyhow::Result<Option<f64>> {
    let Some(share) = args.hot_shard_share else {
        return Ok(None);
    };
    if !(share > 0.0 && share < 1.0) {
        anyhow::bail!(
            "--hot-shard-share must be a fraction between 0 and 1 (exclusive), e.g. 0.1875; got {share}"
        );
    }
    if shards < 2 {
        anyhow::bail!(
            "--hot-shard-share needs at least 2 shards (one hot, the others for the rest); got --shards {shards}"
        );
    }
    if args.index_layout != IndexLayout::Sharded {
        anyhow::bail!(
            "--hot-shard-share needs --index-layout sharded: the blog's index has no shards"
        );
    }
    Ok(Some(share))
}

/// Writes the report's files and prints it; a run with wrong deletions or items left behind
/// fails.
fn finish(result: precise_ttl_bench_driver::BenchRun, args: &BenchArgs) -> anyhow::Result<Outcome> {
    let base = result.write_files(&args.out)?;
    println!("{}", result.markdown);
    println!("report: {}.{{json,md,svg}}", base.display());
    if !result.is_clean() {
        if result.summary.no_sweeper {
            anyhow::bail!("wrong deletions, though no sweeper ran (see the report)");
        }
        anyhow::bail!("wrong deletions or items left behind (see the report)");
    }
    Ok(Outcome::Success)
}

fn start_local(big_heap: bool) -> anyhow::Result<DynamoDbLocal> {
    if big_heap && std::env::var_os("DYNAMODB_LOCAL_HEAP").is_none() {
        Ok(DynamoDbLocal::start_with_heap("1g")?)
    } else {
        Ok(DynamoDbLocal::start()?)
    }
}
