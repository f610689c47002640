//! `precise-ttl bench`'s options and the simulated DynamoDB's (`--simulated`): the test bench's
//! flags, apart from the product's commands in `commands`.

use super::{DeleteModeArg, IndexLayout};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Items whose TTLs fall during the run (deleted on time: the precision measurement)
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=5_000_000))]
    pub items: u64,

    /// Their TTLs are spread evenly over this long
    #[arg(long, default_value = "10s", value_parser = crate::args::duration)]
    pub spread: Duration,

    /// A hot shard: this share of the expiring items (a fraction, 0 < SHARE < 1) is written to
    /// shard 0, evenly through every second, and the rest spread uniformly over the other
    /// shards; e.g. 0.1875 of 8,000/s sends 1,500/s to one index partition, more than its
    /// 1,000 WCU/s. The report then gives the lag of shard 0's items and of the others' apart,
    /// each with its own physical bound. Needs --shards 2 or more and the sharded index layout;
    /// the backlog and the must-survive items stay uniform (default: none, every shard alike)
    #[arg(long, value_name = "SHARE")]
    pub hot_shard_share: Option<f64>,

    /// Items already expired when the sweeper starts (the catch-up scenario)
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=5_000_000))]
    pub backlog: u64,

    /// Nothing is due for this long after the daemon starts, then the load begins: how a daemon
    /// that has been idle meets a burst
    #[arg(long, default_value = "0s", value_parser = crate::args::duration)]
    pub idle: Duration,

    /// How long after the last TTL to wait for stragglers before judging what is left
    #[arg(long, default_value = "3s", value_parser = crate::args::duration)]
    pub grace: Duration,

    /// After the grace period, how long to wait at most for a backlog to be cleared
    #[arg(long, default_value = "15m", value_parser = crate::args::duration)]
    pub timeout: Duration,

    /// Stop the daemon (SIGTERM) this long after it starts, whatever is left: measures a
    /// shutdown in the middle of work; what it did not reach counts as left behind
    #[arg(long, value_parser = crate::args::duration, value_name = "DURATION")]
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
    #[arg(long, default_value = "1s", value_parser = crate::args::poll_interval)]
    pub poll_interval: Duration,

    /// The daemon's delete mode
    #[arg(long, default_value = "batch")]
    pub delete_mode: DeleteModeArg,

    /// The expiry index the bench table gets and the daemon sweeps: ours (sharded), or the 2022
    /// blog's (blog-window: one-minute `expirationWindow` labels, ALL projection, named by
    /// --index-name)
    #[arg(long, default_value = "sharded")]
    pub index_layout: IndexLayout,

    /// TTLs are multiples of this: 1s plants whole epoch seconds, as most writers do (every item
    /// of a second due at once); 1ms spreads them out
    #[arg(long, default_value = "1ms", value_parser = crate::args::duration)]
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
    #[arg(long, default_value = "10s", value_parser = crate::args::lease_duration, requires = "workers")]
    pub lease_duration: Duration,

    /// Something that happens to the fleet, AT after the first TTL: AT:kill:N (SIGKILL worker
    /// N), AT:term:N (SIGTERM), AT:start:N (start worker N, new or stopped), AT:restart:N
    /// (SIGTERM, then start again), AT:crash:N (SIGKILL, then start again at once with the same
    /// worker id), AT:mark (a phase boundary). Repeat the flag; e.g. --event 30s:mark --event
    /// 45s:kill:3 --event 75s:start:4
    #[arg(long = "event", value_name = "AT:WHAT[:N]", requires = "workers",
          value_parser = |s: &str| s.parse::<precise_ttl_bench_driver::FleetEvent>())]
    pub events: Vec<precise_ttl_bench_driver::FleetEvent>,

    /// A crash loop: SIGKILL the `run` process after a pause drawn evenly from MIN..MAX (e.g.
    /// 2s..5s; one duration for a fixed pause) and start a new process at once, until the last
    /// TTL, as a supervisor restarting it in place would (systemd's Restart=always). Each new
    /// process has the default worker id and lease duration, like the one before it; the report
    /// lists the kills, how soon each new process held every shard, and each item's lag beyond
    /// the next kill after its TTL
    #[arg(long, value_name = "MIN..MAX", conflicts_with_all = ["workers", "lambda", "simulated"],
          value_parser = |s: &str| s.parse::<precise_ttl_bench_driver::KillEvery>())]
    pub kill_every: Option<precise_ttl_bench_driver::KillEvery>,

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
    #[arg(long, default_value = "20s", value_parser = crate::args::duration, requires = "lambda")]
    pub invocation_length: Duration,

    /// Lambda mode: between the starts of consecutive invocations (shorter than the length:
    /// they overlap, as the deploy template's one-minute schedule and 65 s timeout make them)
    #[arg(long, default_value = "16s", value_parser = crate::args::duration, requires = "lambda")]
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
    #[arg(long, value_name = "RATE", default_value_t = 0.0)]
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

/// `bench --simulated`: a simulated DynamoDB at real-table scale instead of DynamoDB Local.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Run against a simulated DynamoDB in this process (precise-ttl-sim): DynamoDB's
    /// per-partition and table-wide write limits, throttling as DynamoDB answers it, a latency
    /// model; lag is each delete's commit time in the simulator minus its TTL
    #[arg(long, conflicts_with_all = ["lambda", "workers"])]
    pub simulated: bool,

    /// Simulator: median time of a call
    #[arg(long, default_value = "4ms", value_parser = crate::args::duration, requires = "simulated")]
    pub sim_latency_p50: Duration,

    /// Simulator: 99th percentile time of a call (log-normal between the two)
    #[arg(long, default_value = "15ms", value_parser = crate::args::duration, requires = "simulated")]
    pub sim_latency_p99: Duration,

    /// Simulator: answer at once (separates the store's latency from the sweeper's own time)
    #[arg(long, requires = "simulated")]
    pub sim_no_latency: bool,

    /// Simulator: write units per second of the whole table (DynamoDB on-demand's default
    /// table limit is 40,000)
    #[arg(long, default_value_t = 40_000.0, requires = "simulated")]
    pub sim_table_wcu: f64,

    /// Simulator: write units per second of one partition (table or index)
    #[arg(long, default_value_t = 1_000.0, requires = "simulated")]
    pub sim_partition_wcu: f64,

    /// Simulator: partitions of the table
    #[arg(long, default_value_t = 40, requires = "simulated",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub sim_partitions: u32,

    /// Simulator: unused capacity a partition keeps for a burst, in seconds of its rate (the
    /// physical bound counts it too)
    #[arg(long, default_value_t = 0.1, requires = "simulated")]
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

impl SimArgs {
    pub fn config(&self) -> anyhow::Result<precise_ttl_sim::SimConfig> {
        for (name, v) in [
            ("--sim-table-wcu", self.sim_table_wcu),
            ("--sim-partition-wcu", self.sim_partition_wcu),
        ] {
            if !(v.is_finite() && v > 0.0) {
                anyhow::bail!("{name} must be a positive number, got {v}");
            }
        }
        if !(self.sim_burst_seconds.is_finite() && self.sim_burst_seconds >= 0.0) {
            anyhow::bail!(
                "--sim-burst-seconds must be 0 or more, got {}",
                self.sim_burst_seconds
            );
        }
        if self.sim_latency_p99 < self.sim_latency_p50 {
            anyhow::bail!("--sim-latency-p99 must be at least --sim-latency-p50");
        }
        let defaults = precise_ttl_sim::SimConfig::default();
        let config = precise_ttl_sim::SimConfig {
            latency: if self.sim_no_latency {
                precise_ttl_sim::Latency::None
            } else {
                precise_ttl_sim::Latency::LogNormal {
                    p50: self.sim_latency_p50,
                    p99: self.sim_latency_p99,
                }
            },
            table_partitions: self.sim_partitions as usize,
            limits: precise_ttl_sim::Limits {
                partition_wcu: self.sim_partition_wcu,
                total_wcu: self.sim_table_wcu,
                burst_seconds: self.sim_burst_seconds,
                ..defaults.limits
            },
            ..defaults
        };
        Ok(config)
    }
}
