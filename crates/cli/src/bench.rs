//! `precise-ttl bench` (with the `bench` feature): DynamoDB Local started when no endpoint is
//! given, the driver's progress as bars, and the report printed. Its flags, and the scenario
//! they make, are the driver's (`precise_ttl_bench_driver::cli`), as is what the benchmark does.

use crate::wiring::Outcome;
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use precise_ttl_bench_driver::cli::BenchArgs;
use precise_ttl_bench_driver::{Event, Progress, Revision};
use precise_ttl_dynamodb::Dynamo;
use precise_ttl_flags::{Global, UsageError};
use precise_ttl_local::DynamoDbLocal;
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
    // The bench's layout is the global --index-layout, as `run`'s is.
    if global.queue_table.is_some() {
        return Err(UsageError(
            "bench makes its own queue table (<bench table>-queue) and deletes it: --queue-table is for the other commands".into(),
        )
        .into());
    }
    let mut config = args.config(global.layout()?, global.index_layout, exe)?;
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
        if result
            .summary
            .queue
            .as_ref()
            .is_some_and(|q| q.entries_missing > 0)
        {
            anyhow::bail!(
                "items that can still come due have no queue entry, or wrong deletions or items left behind (see the report)"
            );
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
