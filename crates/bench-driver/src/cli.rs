//! `precise-ttl bench`'s command line: the test bench's flags and the simulated DynamoDB's
//! (`--simulated`), checked and turned into a [`BenchConfig`] and a [`SimConfig`]. The
//! `precise-ttl` binary, built with its `bench` feature, takes [`BenchArgs`] as its `bench`
//! command and does the printing; nothing here prints.
//!
//! A flag whose value alone can be wrong is checked by its parser (a usage error, exit 2); what
//! only a combination of flags makes wrong is a [`UsageError`] from [`BenchArgs::config`].

use crate::config::{BenchConfig, BenchIndex, DaemonCommand, Provisioned};
use crate::crash_loop::KillEvery;
use crate::fleet::{FleetEvent, FleetPlan};
use crate::lambda_run::LambdaPlan;
use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use precise_ttl_core::TtlLayout;
use precise_ttl_dynamodb::DeleteMode;
use precise_ttl_engine::settings::{self, Choice, duration, lease_duration, poll_interval};
use precise_ttl_sim::{Latency, Limits, SimConfig};
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

/// Flags that each make sense but not together, in one line.
#[derive(Debug, Error)]
#[error("{0}")]
pub struct UsageError(String);

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Items whose TTLs fall during the run (deleted on time: the precision measurement)
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=5_000_000))]
    pub items: u64,

    /// Their TTLs are spread evenly over this long
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub spread: Duration,

    /// A hot shard: this share of the expiring items (a fraction, 0 < SHARE < 1) is written to
    /// shard 0, evenly through every second, and the rest spread uniformly over the other
    /// shards; e.g. 0.1875 of 8,000/s sends 1,500/s to one index partition, more than its
    /// 1,000 WCU/s. The report then gives the lag of shard 0's items and of the others' apart,
    /// each with its own physical bound. Needs --shards 2 or more and the sharded index layout;
    /// the backlog and the must-survive items stay uniform (default: none, every shard alike)
    #[arg(long, value_name = "SHARE", value_parser = fraction)]
    pub hot_shard_share: Option<f64>,

    /// Items whose TTL the bench pushes an hour later 1–2 s before it is due, after the sweeper
    /// has read them: they must survive, and each costs the sweeper a conditional delete that
    /// fails (a write unit the physical bound's sweeper, which knows the future, never spends)
    /// [default: a hundredth of --items, 10 to 1,000]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub extended: Option<u64>,

    /// Items already expired when the sweeper starts (the catch-up scenario)
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=5_000_000))]
    pub backlog: u64,

    /// Nothing is due for this long after the daemon starts, then the load begins: how a daemon
    /// that has been idle meets a burst
    #[arg(long, default_value = "0s", value_parser = duration)]
    pub idle: Duration,

    /// How long after the last TTL to wait for stragglers before judging what is left
    #[arg(long, default_value = "3s", value_parser = duration)]
    pub grace: Duration,

    /// After the grace period, how long to wait at most for a backlog to be cleared (`--timeout`,
    /// its earlier name, still works)
    #[arg(long, alias = "timeout", default_value = "15m", value_parser = duration)]
    pub backlog_timeout: Duration,

    /// Stop the daemon (SIGTERM) this long after it starts, whatever is left: measures a
    /// shutdown in the middle of work; what it did not reach counts as left behind
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub stop_after: Option<Duration>,

    /// Items written to measure the raw conditional-delete rate (0: skip)
    #[arg(long, default_value_t = 4000)]
    pub raw_items: u64,

    /// Scenario name, used for the report files
    #[arg(long, default_value = "bench")]
    pub name: String,

    /// Folder for the report files (JSON, Markdown, SVG plot)
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,

    /// The daemon's poll interval
    #[arg(long, default_value = "1s", value_parser = poll_interval)]
    pub poll_interval: Duration,

    /// The daemon's delete mode (as `run --delete-mode` takes it)
    #[arg(long, default_value = settings::DELETE_MODE.default.unwrap_or("auto"), value_parser = delete_mode())]
    pub delete_mode: DeleteMode,

    /// TTLs are multiples of this: 1s plants whole epoch seconds, as most writers do (every item
    /// of a second due at once); 1ms spreads them out
    #[arg(long, default_value = "1ms", value_parser = granularity)]
    pub ttl_granularity: Duration,

    /// Seed for the planted TTLs and shards: two runs with one seed plant the same items
    /// (default: random, recorded in the report)
    #[arg(long)]
    pub seed: Option<u64>,

    /// Extra arguments for `precise-ttl run` (repeat the flag for each)
    #[arg(long = "daemon-arg", allow_hyphen_values = true)]
    pub daemon_args: Vec<String>,

    /// Run a fleet: this many workers (w1, w2, …) sharing the table through shard leases.
    /// Without it, one `run` process
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub workers: Option<u16>,

    /// The fleet workers' lease duration
    #[arg(long, default_value = "10s", value_parser = lease_duration, requires = "workers")]
    pub lease_duration: Duration,

    /// Something that happens to the fleet, AT after the first TTL: AT:kill:N (SIGKILL worker
    /// N), AT:term:N (SIGTERM), AT:start:N (start worker N, new or stopped), AT:restart:N
    /// (SIGTERM, then start again), AT:crash:N (SIGKILL, then start again at once with the same
    /// worker id), AT:mark (a phase boundary). Repeat the flag; e.g. --event 30s:mark --event
    /// 45s:kill:3 --event 75s:start:4
    #[arg(long = "event", value_name = "AT:WHAT[:N]", requires = "workers",
          value_parser = |s: &str| s.parse::<FleetEvent>())]
    pub events: Vec<FleetEvent>,

    /// A crash loop: SIGKILL the `run` process after a pause drawn evenly from MIN..MAX (e.g.
    /// 2s..5s; one duration for a fixed pause) and start a new process at once, until the last
    /// TTL, as a supervisor restarting it in place would (systemd's Restart=always). Each new
    /// process has the default worker id and lease duration, like the one before it; the report
    /// lists the kills, how soon each new process held every shard, and each item's lag beyond
    /// the next kill after its TTL
    #[arg(long, value_name = "MIN..MAX", conflicts_with_all = ["workers", "lambda", "simulated"],
          value_parser = |s: &str| s.parse::<KillEvery>())]
    pub kill_every: Option<KillEvery>,

    /// Measure the Lambda function instead of `run`: scheduled invocations of this
    /// `precise-ttl-lambda` binary on a local Lambda Runtime API (a new process when every
    /// running one is busy, as Lambda starts a new execution environment)
    #[arg(long, value_name = "PATH", conflicts_with = "workers")]
    pub lambda: Option<PathBuf>,

    /// Lambda mode: how many invocations
    #[arg(long, default_value_t = 3, requires = "lambda",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub invocations: u32,

    /// Lambda mode: each invocation's timeout (it stops a safety margin, 2 s, before)
    #[arg(long, default_value = "20s", value_parser = duration, requires = "lambda")]
    pub invocation_length: Duration,

    /// Lambda mode: between the starts of consecutive invocations (shorter than the length:
    /// they overlap, as the deploy template's one-minute schedule and 65 s timeout make them)
    #[arg(long, default_value = "16s", value_parser = duration, requires = "lambda")]
    pub invocation_every: Duration,

    /// Play the application sharing the table: from the end of loading to the end of the run,
    /// write this many new items per second to random keys of the bench table, half with a TTL
    /// a day ahead and a shard (so they land in the expiry index), half without a TTL; they land
    /// on the same table and index partitions as the sweeper's deletes. One attempt each, no
    /// retries: the report's `app` section counts the writes the store refused (throttled), other
    /// errors, the accepted writes' latency, the refusals while the sweeper was behind, and the
    /// rate achieved. The sweeper must never delete one (a deletion is a wrong deletion). Use it
    /// to see what the sweeper costs the application, e.g. during a catch-up (--backlog); beside
    /// --no-sweeper for the same without deletes (default: 0, no application)
    #[arg(long, value_name = "RATE", default_value_t = 0.0, value_parser = app_rate)]
    pub app_writes: f64,

    /// Start no daemon: plant the same load and run the application (--app-writes), but delete
    /// nothing, so the application's refusals can be compared with and without the sweeper. The
    /// run lasts until the last TTL plus --grace; lag and items left behind are not judged (n/a),
    /// and the report says the sweeper was off
    #[arg(long, conflicts_with_all = ["workers", "lambda", "kill_every", "stop_after"])]
    pub no_sweeper: bool,

    #[command(flatten)]
    pub sim: SimArgs,
}

/// The bench table's expiry index: `precise-ttl`'s global `--index-layout`, which the binary
/// hands to [`BenchArgs::config`] (a flag of the bench's own by that name would clash with it).
/// With stream-queue the report adds the delay from an item's write to its queue entry and the
/// entries missing at the end.
pub use precise_ttl_engine::settings::IndexLayout;

/// `bench --simulated`: a simulated DynamoDB at real-table scale instead of DynamoDB Local.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Run against a simulated DynamoDB in this process (precise-ttl-sim): DynamoDB's
    /// per-partition and table-wide write limits, throttling as DynamoDB answers it, a latency
    /// model; lag is each delete's commit time in the simulator minus its TTL
    #[arg(long, conflicts_with_all = ["lambda", "workers"])]
    pub simulated: bool,

    /// Simulator: median time of a call
    #[arg(long, default_value = "4ms", value_parser = duration, requires = "simulated")]
    pub sim_latency_p50: Duration,

    /// Simulator: 99th percentile time of a call (log-normal between the two)
    #[arg(long, default_value = "15ms", value_parser = duration, requires = "simulated")]
    pub sim_latency_p99: Duration,

    /// Simulator: answer at once (separates the store's latency from the sweeper's own time)
    #[arg(long, requires = "simulated")]
    pub sim_no_latency: bool,

    /// Simulator: write units per second of the whole table (DynamoDB on-demand's default
    /// table limit is 40,000)
    #[arg(long, default_value_t = precise_ttl_sim::defaults::TABLE_WCU, requires = "simulated", value_parser = positive)]
    pub sim_table_wcu: f64,

    /// Simulator: write units per second of one partition (table or index)
    #[arg(long, default_value_t = precise_ttl_sim::defaults::PARTITION_WCU, requires = "simulated", value_parser = positive)]
    pub sim_partition_wcu: f64,

    /// Simulator: partitions of the table
    #[arg(long, default_value_t = precise_ttl_sim::defaults::TABLE_PARTITIONS as u32, requires = "simulated",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub sim_partitions: u32,

    /// Simulator: unused capacity a partition keeps for a burst, in seconds of its rate (the
    /// physical bound counts it too)
    #[arg(long, default_value_t = precise_ttl_sim::defaults::BURST_SECONDS, requires = "simulated", value_parser = non_negative)]
    pub sim_burst_seconds: f64,

    /// Simulator: create the bench table with provisioned capacity, N write units per second
    /// (and N read units), instead of on demand: the table's write limit is then N, in place of
    /// --sim-table-wcu, and the refusals are ProvisionedThroughputExceededException as on a
    /// provisioned table. Partitions still come from --sim-partitions and --sim-partition-wcu.
    /// `setup` gives the expiry index the table's capacity (default: on demand)
    #[arg(long, value_name = "N", requires = "simulated",
          value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub sim_provisioned_wcu: Option<u64>,
}

impl BenchArgs {
    /// The scenario these flags ask for, on `layout` and `index_layout` (the global flags'), with
    /// `program` as the `precise-ttl` that runs the daemon. The caller adds what only it knows:
    /// the command line and the revision it was built from.
    pub fn config(
        &self,
        layout: TtlLayout,
        index_layout: IndexLayout,
        program: PathBuf,
    ) -> Result<BenchConfig, UsageError> {
        self.stream_queue_conflicts(index_layout)?;
        let hot_shard_share = self.hot_shard_share(layout.shards.get(), index_layout)?;
        let daemon = DaemonCommand {
            program,
            extra_args: self.daemon_args.clone(),
        };
        let mut config = BenchConfig::new(self.name.clone(), layout, daemon);
        config.items = self.items;
        config.spread = self.spread;
        config.hot_shard_share = hot_shard_share;
        config.extended = self.extended;
        config.backlog = self.backlog;
        config.idle = self.idle;
        config.grace = self.grace;
        config.timeout = self.backlog_timeout;
        config.stop_after = self.stop_after;
        config.raw_items = self.raw_items;
        config.index = match index_layout {
            IndexLayout::Sharded => BenchIndex::Sharded,
            IndexLayout::BlogWindow => BenchIndex::blog_minutes(),
            IndexLayout::StreamQueue => BenchIndex::StreamQueue,
        };
        config.ttl_granularity = self.ttl_granularity;
        if let Some(seed) = self.seed {
            config.seed = seed;
        }
        config.poll_interval = self.poll_interval;
        if let Some(program) = &self.lambda {
            config.lambda = Some(LambdaPlan {
                program: program.clone(),
                invocations: self.invocations,
                length: self.invocation_length,
                every: self.invocation_every,
            });
        }
        if let Some(workers) = self.workers {
            config.fleet = Some(
                FleetPlan::new(workers.into(), self.lease_duration, self.events.clone())
                    .map_err(|e| UsageError(format!("--event: {e}")))?,
            );
        }
        config.crash_loop = self.kill_every;
        config.app_writes_per_s = self.app_writes;
        config.no_sweeper = self.no_sweeper;
        // Reads as many as writes: the final scan and the sweeper's index queries never wait on
        // a read limit the run does not measure.
        config.provisioned = self
            .sim
            .sim_provisioned_wcu
            .map(|n| Provisioned { read: n, write: n });
        config.delete_mode = self.delete_mode;
        Ok(config)
    }

    /// `--hot-shard-share` with a shard besides the hot one to send the rest to, in the layout
    /// whose index partitions are shards.
    fn hot_shard_share(
        &self,
        shards: u16,
        index_layout: IndexLayout,
    ) -> Result<Option<f64>, UsageError> {
        let Some(share) = self.hot_shard_share else {
            return Ok(None);
        };
        if shards < 2 {
            return Err(UsageError(format!(
                "--hot-shard-share needs at least 2 shards (one hot, the others for the rest); got --shards {shards}"
            )));
        }
        match index_layout {
            IndexLayout::Sharded => Ok(Some(share)),
            IndexLayout::BlogWindow => Err(UsageError(
                "--hot-shard-share needs --index-layout sharded: the blog's index has no shards"
                    .into(),
            )),
            IndexLayout::StreamQueue => Err(UsageError(
                "--hot-shard-share needs --index-layout sharded: with stream-queue writers set no shard (the queue's shard is a digest of the item's key)"
                    .into(),
            )),
        }
    }

    /// What `--index-layout stream-queue` cannot be measured with, in one line: the queue's
    /// indexer runs inside the `run` processes the bench starts on DynamoDB Local.
    fn stream_queue_conflicts(&self, index_layout: IndexLayout) -> Result<(), UsageError> {
        if index_layout != IndexLayout::StreamQueue {
            return Ok(());
        }
        // A fleet (--workers) is fine: each worker indexes the stream shards its leases grant.
        let conflict = if self.lambda.is_some() {
            Some((
                "--lambda",
                "the bench's local Lambda runs scheduled sweeps only, and nothing would feed the queue (DynamoDB Streams batches are not delivered to it)",
            ))
        } else if self.sim.simulated {
            Some((
                "--simulated",
                "the simulated DynamoDB has no streams to feed the queue",
            ))
        } else if self.no_sweeper {
            Some((
                "--no-sweeper",
                "without the daemon no indexer writes the queue",
            ))
        } else {
            None
        };
        match conflict {
            Some((flag, why)) => Err(UsageError(format!(
                "{flag} does not go with --index-layout stream-queue: {why}"
            ))),
            None => Ok(()),
        }
    }
}

impl SimArgs {
    /// The simulator these flags describe.
    pub fn config(&self) -> Result<SimConfig, UsageError> {
        if self.sim_latency_p99 < self.sim_latency_p50 {
            return Err(UsageError(
                "--sim-latency-p99 must be at least --sim-latency-p50".into(),
            ));
        }
        let defaults = SimConfig::default();
        Ok(SimConfig {
            latency: if self.sim_no_latency {
                Latency::None
            } else {
                Latency::LogNormal {
                    p50: self.sim_latency_p50,
                    p99: self.sim_latency_p99,
                }
            },
            table_partitions: self.sim_partitions as usize,
            limits: Limits {
                partition_wcu: self.sim_partition_wcu,
                total_wcu: self.sim_table_wcu,
                burst_seconds: self.sim_burst_seconds,
                ..defaults.limits
            },
            ..defaults
        })
    }
}

fn granularity(s: &str) -> Result<Duration, String> {
    match duration(s).map_err(|e| e.to_string())? {
        d if d.is_zero() => Err(format!("{s:?}: TTLs need a granularity of at least 1ms")),
        d => Ok(d),
    }
}

/// `--delete-mode`: the names `run` takes (the engine's one list), listed in the help.
fn delete_mode() -> impl TypedValueParser<Value = DeleteMode> {
    PossibleValuesParser::new(DeleteMode::ALL.iter().map(|m| m.name()))
        .try_map(|name| DeleteMode::parse(&name).map_err(|e| e.0))
}

fn number(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a number")),
    }
}

fn fraction(s: &str) -> Result<f64, String> {
    match number(s)? {
        v if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a fraction between 0 and 1 (exclusive), e.g. 0.1875"
        )),
    }
}

fn app_rate(s: &str) -> Result<f64, String> {
    match number(s)? {
        v if (0.0..=1_000_000.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{s:?} is not a rate from 0 (off) to 1000000 items/s"
        )),
    }
}

fn positive(s: &str) -> Result<f64, String> {
    match number(s)? {
        v if v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

fn non_negative(s: &str) -> Result<f64, String> {
    match number(s)? {
        v if v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not 0 or more")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};
    use precise_ttl_core::ShardCount;

    #[derive(Debug, Parser)]
    struct Bench {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        Bench::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|b| b.args)
    }

    fn layout(shards: u64) -> TtlLayout {
        TtlLayout::new(
            "ttl",
            "ttl_shard",
            "precise-ttl",
            ShardCount::new(shards).unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn the_flags_are_consistent() {
        Bench::command().debug_assert();
    }

    /// `--simulated` alone runs the simulator's defaults (precise_ttl_sim::defaults): the
    /// latency flags' text ("4ms", "15ms") cannot name them, this keeps them in step.
    #[test]
    fn the_simulated_flags_default_to_the_simulators_defaults() {
        let args = parse(&["--simulated", "--out", "/tmp"]).unwrap();
        assert_eq!(
            args.sim.config().unwrap(),
            precise_ttl_sim::SimConfig::default()
        );
    }

    #[test]
    fn flags_become_the_scenario() {
        let args = parse(&[
            "--delete-mode",
            "single",
            "--hot-shard-share",
            "0.25",
            "--workers",
            "3",
            "--event",
            "5s:kill:2",
            "--ttl-granularity",
            "1s",
        ])
        .unwrap();
        let config = args
            .config(layout(8), IndexLayout::Sharded, "precise-ttl".into())
            .unwrap();
        assert_eq!(config.delete_mode, DeleteMode::Single);
        assert_eq!(config.hot_shard_share, Some(0.25));
        assert_eq!(config.fleet.unwrap().workers, 3);
        assert_eq!(config.ttl_granularity, Duration::from_secs(1));
        assert_eq!(config.index, BenchIndex::Sharded);
        let defaults = parse(&[]).unwrap();
        assert_eq!(defaults.delete_mode, DeleteMode::Auto, "run's default");
        assert!(defaults.sim.config().is_ok());
    }

    #[test]
    fn a_bad_value_is_a_usage_error_and_a_bad_combination_is_explained() {
        let bad_values: [&[&str]; 6] = [
            &["--hot-shard-share", "1"],
            &["--app-writes", "2000000"],
            &["--ttl-granularity", "0s"],
            &["--poll-interval", "50ms"],
            &["--delete-mode", "fast"],
            &["--simulated", "--sim-table-wcu", "0"],
        ];
        for bad in bad_values {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad:?}: {err}");
        }
        let one_shard = parse(&["--hot-shard-share", "0.5"]).unwrap();
        let err = one_shard
            .config(layout(1), IndexLayout::Sharded, "p".into())
            .unwrap_err();
        assert!(err.to_string().contains("at least 2 shards"), "{err}");
        let hot = parse(&["--hot-shard-share", "0.5"]).unwrap();
        for other in [IndexLayout::BlogWindow, IndexLayout::StreamQueue] {
            let err = hot.config(layout(4), other, "p".into()).unwrap_err();
            assert!(err.to_string().contains("sharded"), "{err}");
        }
        let sim = parse(&["--simulated", "--sim-latency-p99", "1ms"]).unwrap();
        assert!(sim.sim.config().is_err());
    }

    #[test]
    fn stream_queue_refuses_what_it_cannot_be_measured_with_in_one_line() {
        let queue = parse(&["--kill-every", "2s..4s"]).unwrap();
        let config = queue
            .config(layout(4), IndexLayout::StreamQueue, "p".into())
            .unwrap();
        assert_eq!(config.index, BenchIndex::StreamQueue);
        assert!(config.crash_loop.is_some());
        let refused: [(&[&str], &str); 3] = [
            (&["--lambda", "/bin/true"], "--lambda"),
            (&["--simulated"], "--simulated"),
            (&["--no-sweeper"], "--no-sweeper"),
        ];
        for (flags, named) in refused {
            let err = parse(flags)
                .unwrap()
                .config(layout(4), IndexLayout::StreamQueue, "p".into())
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(named) && err.contains("stream-queue") && !err.contains('\n'),
                "{err}"
            );
            // The same flags with the shard index are fine.
            let sharded = parse(flags)
                .unwrap()
                .config(layout(4), IndexLayout::Sharded, "p".into());
            assert!(sharded.is_ok(), "{flags:?}");
        }
    }
}
