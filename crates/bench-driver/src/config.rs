//! What a benchmark run is asked to do, and the `precise-ttl run` command line that follows
//! from it.

use crate::crash_loop::KillEvery;
use crate::fleet::FleetPlan;
use crate::lambda_run::LambdaPlan;
use crate::revision::Revision;
use precise_ttl_core::{TtlLayout, WindowFormat, WindowSpec};
use precise_ttl_dynamodb::DeleteMode;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// One benchmark scenario.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Scenario name, recorded in the report.
    pub name: String,
    /// Attribute names, index and shard count: the bench table and the daemon both use them.
    pub layout: TtlLayout,
    /// The bench table's partition key (a String).
    pub key_attribute: String,
    /// Which expiry index the table gets and the daemon sweeps.
    pub index: BenchIndex,
    /// TTLs are multiples of this (1 s: whole epoch seconds, the usual writer).
    pub ttl_granularity: Duration,
    /// Seeds the planted TTLs and shards: runs with one seed plant the same items.
    pub seed: u64,
    /// Items whose TTLs fall during the run.
    pub items: u64,
    /// Their TTLs are spread evenly over this long.
    pub spread: Duration,
    /// The share (0 to 1, exclusive) of the expiring items written to shard 0, the rest spread
    /// evenly over the other shards: one index partition taking more than the others (`None`:
    /// every item's shard drawn uniformly).
    pub hot_shard_share: Option<f64>,
    /// Items whose TTL the bench extends 1–2 s before it is due, which must survive (`None`: a
    /// hundredth of `items`, 10 to 1,000).
    pub extended: Option<u64>,
    /// Items already expired when the sweeper starts.
    pub backlog: u64,
    /// Nothing is due for this long after the sweeper starts: a burst met by a daemon that has
    /// been idle (the ramp), rather than by one that has just started.
    pub idle: Duration,
    /// How long after the last TTL to wait for stragglers.
    pub grace: Duration,
    /// After the grace period, how long to wait at most for a backlog to be cleared.
    pub timeout: Duration,
    /// Stop the daemon this long after it starts, whatever is left: measures a shutdown in the
    /// middle of work (the report then counts what was not reached as left behind).
    pub stop_after: Option<Duration>,
    /// Items per mode for the raw conditional-delete rate (0: skip).
    pub raw_items: u64,
    /// The daemon's poll interval.
    pub poll_interval: Duration,
    /// The daemon's delete mode.
    pub delete_mode: DeleteMode,
    /// How to start the daemon.
    pub daemon: DaemonCommand,
    /// Several workers sharing the table through leases, and what happens to them (`None`: one
    /// plain `run`).
    pub fleet: Option<FleetPlan>,
    /// Kill the one `run` process after pauses drawn from this range and start a new one at
    /// once, without a worker id, until the last TTL (`None`: it runs undisturbed).
    pub crash_loop: Option<KillEvery>,
    /// Scheduled invocations of the Lambda function instead of `run` (`None`: the daemon).
    pub lambda: Option<LambdaPlan>,
    /// The application sharing the table: new items written at this many per second for the
    /// whole run, without retries ([`crate::app`]); 0: none.
    pub app_writes_per_s: f64,
    /// Start no daemon: the load is planted and the application writes, but nothing deletes
    /// (its refusals with and without the sweeper, compared). Lag and what is left behind are
    /// then not judged.
    pub no_sweeper: bool,
    /// Create the bench table with provisioned capacity instead of on demand (`None`).
    pub provisioned: Option<Provisioned>,
    /// The command line that asked for this run, recorded in the report.
    pub argv: Vec<String>,
    /// The source revision of the binary, recorded in the report.
    pub revision: Revision,
}

/// A provisioned table's capacity units per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Provisioned {
    pub read: u64,
    pub write: u64,
}

/// The expiry index of the bench table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchIndex {
    /// Ours: a sparse KEYS_ONLY index on (shard, TTL).
    Sharded,
    /// The 2022 blog's: an index on (window label, TTL) with ALL attributes projected, as the
    /// blog's template creates it; its name is the layout's index name.
    BlogWindow { attribute: String, spec: WindowSpec },
    /// Issue 29's expiry queue: writers set only the TTL; the daemon's indexer tails the table's
    /// stream (new and old images) into a queue table of its own ([`queue_table`]), which the
    /// daemon reads instead of an index.
    StreamQueue,
}

impl BenchIndex {
    /// The blog's: `expirationWindow`, one-minute windows labelled by `toISOString()`.
    pub fn blog_minutes() -> Self {
        BenchIndex::BlogWindow {
            attribute: "expirationWindow".into(),
            spec: WindowSpec::new(Duration::from_secs(60), WindowFormat::Millis)
                .expect("a minute is a valid window"),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            BenchIndex::Sharded => "sharded",
            BenchIndex::BlogWindow { .. } => "blog-window",
            BenchIndex::StreamQueue => "stream-queue",
        }
    }
}

/// The queue table of the bench table `table` in the stream-queue layout.
pub fn queue_table(table: &str) -> String {
    format!("{table}-queue")
}

/// The indexer's checkpoint table of the bench table `table` in the stream-queue layout.
pub fn indexer_checkpoint_table(table: &str) -> String {
    format!("{table}-queue-checkpoints")
}

/// The `precise-ttl` executable and extra arguments for its `run` command.
#[derive(Debug, Clone)]
pub struct DaemonCommand {
    pub program: PathBuf,
    pub extra_args: Vec<String>,
}

impl BenchConfig {
    /// A small scenario with the default layout, for tests and as a starting point.
    pub fn new(name: impl Into<String>, layout: TtlLayout, daemon: DaemonCommand) -> Self {
        BenchConfig {
            name: name.into(),
            layout,
            key_attribute: "pk".into(),
            index: BenchIndex::Sharded,
            ttl_granularity: Duration::from_millis(1),
            seed: fastrand::u64(..),
            items: 2000,
            spread: Duration::from_secs(10),
            hot_shard_share: None,
            extended: None,
            backlog: 0,
            idle: Duration::ZERO,
            grace: Duration::from_secs(3),
            timeout: Duration::from_secs(15 * 60),
            stop_after: None,
            raw_items: 4000,
            poll_interval: Duration::from_secs(1),
            delete_mode: DeleteMode::Batch,
            daemon,
            fleet: None,
            crash_loop: None,
            lambda: None,
            app_writes_per_s: 0.0,
            no_sweeper: false,
            provisioned: None,
            argv: Vec::new(),
            revision: Revision::Unknown,
        }
    }

    /// The `precise-ttl run` command line for `table` at `endpoint`, every layout setting included.
    pub fn run_command(&self, table: &str, endpoint: &str) -> Command {
        let layout = &self.layout;
        let mut cmd = Command::new(&self.daemon.program);
        cmd.args(["run", "--table", table, "--endpoint-url", endpoint])
            .args(["--ttl-attribute", &layout.ttl_attribute])
            .args(["--shard-attribute", &layout.shard_attribute])
            .args(["--index-name", &layout.index_name])
            .args(["--shards", &layout.shards.get().to_string()])
            .args([
                "--poll-interval",
                &format!("{}ms", self.poll_interval.as_millis()),
            ])
            .args(["--metrics-addr", "127.0.0.1:0"])
            .args(["--delete-mode", self.delete_mode.name()])
            .args(&self.daemon.extra_args);
        if let BenchIndex::BlogWindow { attribute, spec } = &self.index {
            cmd.args([
                "--index-layout",
                "blog-window",
                "--window-attribute",
                attribute,
            ])
            .args(["--window-size", &format!("{}s", spec.size().as_secs())])
            .args([
                "--window-format",
                match spec.format {
                    WindowFormat::Millis => "millis",
                    WindowFormat::Seconds => "seconds",
                },
            ])
            // The table is new; its planted backlog reaches an hour back.
            .args(["--window-since", "2h"])
            .args(["--checkpoint-table", &format!("{table}-checkpoints")]);
        }
        if self.index == BenchIndex::StreamQueue {
            cmd.args(["--index-layout", "stream-queue"])
                .args(["--queue-table", &queue_table(table)])
                .args([
                    "--indexer-checkpoint-table",
                    &indexer_checkpoint_table(table),
                ]);
        }
        // The command line is the whole configuration: settings of the caller's environment must not
        // leak into the measured daemon.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("PRECISE_TTL_") {
                cmd.env_remove(k);
            }
        }
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use precise_ttl_core::ShardCount;

    #[test]
    fn the_daemon_gets_every_layout_setting() {
        let layout = TtlLayout::new(
            "expires_at",
            "bucket",
            "by-expiry",
            ShardCount::new(8).unwrap(),
        )
        .unwrap();
        let daemon = DaemonCommand {
            program: "precise-ttl".into(),
            extra_args: vec!["--batch-linger".into(), "0s".into()],
        };
        let cmd = BenchConfig::new("x", layout, daemon).run_command("t", "http://h:1");
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        for expected in [
            "--ttl-attribute expires_at",
            "--shard-attribute bucket",
            "--index-name by-expiry",
            "--shards 8",
            "--delete-mode batch",
            "--batch-linger 0s",
        ] {
            assert!(joined.contains(expected), "{expected} in {joined}");
        }
        assert!(!joined.contains("--index-layout"), "{joined}");
    }

    #[test]
    fn the_stream_queue_daemon_gets_its_queue_and_checkpoint_tables() {
        let daemon = DaemonCommand {
            program: "precise-ttl".into(),
            extra_args: Vec::new(),
        };
        let mut config = BenchConfig::new("x", TtlLayout::default(), daemon);
        config.index = BenchIndex::StreamQueue;
        let cmd = config.run_command("t", "http://h:1");
        let joined = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            joined.contains(
                "--index-layout stream-queue --queue-table t-queue --indexer-checkpoint-table t-queue-checkpoints"
            ),
            "{joined}"
        );
    }
}
