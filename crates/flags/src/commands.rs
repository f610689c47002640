//! Each command's options, and what they give the libraries: the daemon's settings (their
//! default, range and help line are `precise_ttl_engine::settings`', as the Lambda's are), the
//! sweep's, the indexer's and the archive's options. The flag groups several commands share are
//! `groups`'.

use super::{
    ArchiveArg, BlogArgs, DeleteConcurrency, Fleet, HealthUrl, IndexPage, IndexerCheckpoints,
    LeaseTableArg, Retries, ScanSegments, SinkTuning, duration, heading, long_help, positive_rate,
};
use clap::Args;
use precise_ttl_core::{Backoff, TtlLayout};
use precise_ttl_engine::{SweepConfig, settings};
use precise_ttl_ops::KeyAttribute;
use precise_ttl_stream::archive_stream::ArchiveOptions;
use precise_ttl_stream::queue::indexer::IndexerOptions;
use precise_ttl_stream::queue::running::IndexerFleet;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct SetupArgs {
    #[command(flatten)]
    pub leases: LeaseTableArg,

    /// Create the table (on demand) if it does not exist; needs --partition-key
    #[arg(long, requires = "partition_key")]
    pub create_table: bool,

    /// Partition key for --create-table, as NAME[:S|N|B] (S by default)
    #[arg(
        long,
        env = "PRECISE_TTL_PARTITION_KEY",
        value_name = "NAME[:TYPE]",
        requires = "create_table"
    )]
    pub partition_key: Option<KeyAttribute>,

    /// Sort key for --create-table, as NAME[:S|N|B]
    #[arg(
        long,
        env = "PRECISE_TTL_SORT_KEY",
        value_name = "NAME[:TYPE]",
        requires = "create_table"
    )]
    pub sort_key: Option<KeyAttribute>,

    /// Leave native TTL as it is (do not enable it as a backstop)
    #[arg(long, env = "PRECISE_TTL_NO_NATIVE_TTL")]
    pub no_native_ttl: bool,

    /// Turn the table's stream on with old images (NEW_AND_OLD_IMAGES) if it is off, for
    /// archiving expiry records from it (docs/expiry-records.md); a stream already on is left
    /// as it is
    #[arg(long, env = "PRECISE_TTL_STREAM")]
    pub stream: bool,

    /// Return once the index is requested, without waiting for DynamoDB to build it
    #[arg(long, env = "PRECISE_TTL_NO_WAIT")]
    pub no_wait: bool,

    /// Longest wait for the table and index to become ACTIVE
    #[arg(long, env = "PRECISE_TTL_WAIT_TIMEOUT", default_value = "1h", value_parser = duration)]
    pub wait_timeout: Duration,

    /// Read units/s for a new expiry index on a PROVISIONED table (required there, refused on
    /// demand; no default: setup stops and suggests figures). The daemon's one Query per shard
    /// per 1 s poll costs 0.5 units: one unit per shard leaves room
    #[arg(long, env = "PRECISE_TTL_INDEX_READ_CAPACITY", value_name = "UNITS",
          requires = "index_write_capacity", value_parser = clap::value_parser!(i64).range(1..))]
    pub index_read_capacity: Option<i64>,

    /// Write units/s for a new expiry index on a PROVISIONED table. Every write of an item with
    /// a TTL and every delete writes the index too, and an index short of writes throttles the
    /// table: give it the table's write capacity. It does not follow the table's auto scaling;
    /// setup prints the command that makes it scale
    #[arg(long, env = "PRECISE_TTL_INDEX_WRITE_CAPACITY", value_name = "UNITS",
          requires = "index_read_capacity", value_parser = clap::value_parser!(i64).range(1..))]
    pub index_write_capacity: Option<i64>,
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Print the result as JSON on standard output
    #[arg(long)]
    pub json: bool,

    /// Shards read at the same time
    #[arg(long, env = "PRECISE_TTL_SHARD_PARALLELISM", default_value_t = 4,
          value_parser = clap::value_parser!(u64).range(1..=1024), help_heading = heading::READS)]
    pub shard_parallelism: u64,

    #[command(flatten, next_help_heading = heading::READS)]
    pub index_page: IndexPage,

    #[command(flatten)]
    pub deletes: DeleteConcurrency,

    #[command(flatten, next_help_heading = heading::DELETES)]
    pub retries: Retries,

    #[command(flatten)]
    pub archive: ArchiveArg,

    #[command(flatten)]
    pub blog: BlogArgs,
}

impl SweepArgs {
    /// The sweep's configuration these flags give.
    pub fn sweep_config(&self) -> SweepConfig {
        SweepConfig {
            concurrency: self.deletes.concurrency as usize,
            page_size: self.index_page.page_size,
            shard_parallelism: self.shard_parallelism as usize,
            backoff: Backoff {
                max_attempts: self.retries.max_attempts,
                ..Backoff::default()
            },
            ..SweepConfig::default()
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Stop after this long (for scheduled runs, e.g. 55s every minute)
    #[arg(long = "for", env = "PRECISE_TTL_FOR", value_parser = duration, value_name = "DURATION")]
    pub run_for: Option<Duration>,

    #[arg(long, env = "PRECISE_TTL_POLL_INTERVAL", value_parser = settings::poll_interval,
          default_value = settings::POLL_INTERVAL.default, help = settings::POLL_INTERVAL.meaning,
          help_heading = heading::READS)]
    pub poll_interval: Duration,

    #[arg(long, env = "PRECISE_TTL_HORIZON", value_parser = duration,
          default_value = settings::HORIZON.default, help = settings::HORIZON.meaning,
          help_heading = heading::READS)]
    pub horizon: Duration,

    #[arg(long, env = "PRECISE_TTL_LOOKBACK", value_parser = duration,
          default_value = settings::LOOKBACK.default, help = settings::LOOKBACK.meaning,
          help_heading = heading::READS)]
    pub lookback: Duration,

    #[command(flatten, next_help_heading = heading::READS)]
    pub index_page: IndexPage,

    #[arg(long, env = "PRECISE_TTL_STRAY_CHECK_INTERVAL", value_parser = duration,
          default_value = settings::STRAY_CHECK_INTERVAL.default,
          help = settings::STRAY_CHECK_INTERVAL.meaning, help_heading = heading::READS)]
    pub stray_check_interval: Duration,

    #[command(flatten)]
    pub deletes: DeleteConcurrency,

    #[arg(long, env = "PRECISE_TTL_MAX_DELETES_PER_SECOND", value_parser = positive_rate,
          help = settings::MAX_DELETES_PER_SECOND.meaning, help_heading = heading::DELETES)]
    pub max_deletes_per_second: Option<f64>,

    #[arg(long, env = "PRECISE_TTL_DELETE_MODE", default_value = settings::DELETE_MODE.default,
          help = settings::DELETE_MODE.meaning, help_heading = heading::DELETES,
          long_help = long_help(settings::DELETE_MODE, "\
A batch is sent when several items are due at once (one alone otherwise); auto says once, when \
the store refuses PartiQL, that it falls back to DeleteItem"),
          value_parser = crate::choice::<settings::DeleteMode>())]
    pub delete_mode: settings::DeleteMode,

    #[arg(long, env = "PRECISE_TTL_BATCH_LINGER", value_parser = duration,
          default_value = settings::BATCH_LINGER.default, help = settings::BATCH_LINGER.meaning,
          help_heading = heading::DELETES, long_help = long_help(settings::BATCH_LINGER, "\
Batches still form while items wait for a request slot or the table's rate"))]
    pub batch_linger: Duration,

    #[command(flatten, next_help_heading = heading::DELETES)]
    pub retries: Retries,

    #[command(flatten)]
    pub budget: crate::CapacityBudget,

    #[command(flatten)]
    pub fleet: Fleet,

    #[command(flatten)]
    pub archive: ArchiveArg,

    /// Serve /metrics (Prometheus) and /healthz here, e.g. 127.0.0.1:9464 (port 0: any free port)
    #[arg(long, env = "PRECISE_TTL_METRICS_ADDR", value_name = "ADDR",
          help_heading = heading::METRICS)]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// /healthz answers 503 once no index read has succeeded for this long (default: ten poll
    /// intervals, at least 30s); point a liveness probe at it
    #[arg(long, env = "PRECISE_TTL_UNHEALTHY_AFTER", value_parser = duration,
          value_name = "DURATION", help_heading = heading::METRICS)]
    pub unhealthy_after: Option<Duration>,

    #[command(flatten)]
    pub blog: BlogArgs,

    #[command(flatten)]
    pub indexer: IndexerArgs,
}

/// The stream-queue layout's indexer, which `run` starts beside the daemon.
#[derive(Debug, Args)]
#[command(next_help_heading = heading::INDEXER)]
pub struct IndexerArgs {
    #[command(flatten)]
    pub checkpoints: IndexerCheckpoints,

    /// Pause between reads of the stream when nothing new came (100ms at least). Items whose
    /// TTL is nearer than this when written may be deleted this much late
    #[arg(long, env = "PRECISE_TTL_INDEXER_POLL_INTERVAL", default_value = "250ms",
          value_parser = settings::poll_interval)]
    pub indexer_poll_interval: Duration,

    /// Do not index the stream in this process (another process does: the Lambda stream
    /// handler, or other workers); the daemon still reads the queue
    #[arg(long, env = "PRECISE_TTL_NO_INDEXER")]
    pub no_indexer: bool,
}

impl RunArgs {
    /// The daemon's settings these flags give, checked together (`--lookback` against
    /// `--poll-interval`) as the Lambda's are.
    pub fn daemon_settings(&self) -> Result<settings::DaemonSettings, super::UsageError> {
        let daemon = settings::DaemonSettings {
            poll_interval: self.poll_interval,
            horizon: self.horizon,
            lookback: self.lookback,
            concurrency: self.deletes.concurrency,
            page_size: self.index_page.page_size,
            max_attempts: self.retries.max_attempts,
            max_deletes_per_second: self.max_deletes_per_second,
            backlog_budget: self.budget.backlog_budget.0,
            table_write_capacity: self.budget.table_write_capacity,
            batch_linger: self.batch_linger,
            stray_check_interval: self.stray_check_interval,
        };
        daemon.check().map_err(super::UsageError::of)?;
        Ok(daemon)
    }

    /// Everything `run` shares with the Lambda, as these flags and the global ones give it: the
    /// one conversion from the command line to [`settings::RunSettings`] (which the Lambda reads
    /// with `RunSettings::from_lookup`).
    pub fn run_settings(
        &self,
        global: &super::Global,
    ) -> Result<settings::RunSettings, super::UsageError> {
        Ok(settings::RunSettings {
            table: global.table()?.to_string(),
            layout: global.layout()?,
            index: global.index()?,
            delete_mode: self.delete_mode,
            fleet: self.fleet.settings(),
            daemon: self.daemon_settings()?,
        })
    }

    /// How long without a successful index read before /healthz answers 503.
    pub fn unhealthy_after(&self) -> Duration {
        self.unhealthy_after
            .unwrap_or_else(|| (self.poll_interval * 10).max(Duration::from_secs(30)))
    }

    /// The stream-queue indexer's options, for the table of `layout`.
    pub fn indexer_options(&self, layout: &TtlLayout) -> IndexerOptions {
        IndexerOptions {
            ttl_attribute: layout.ttl_attribute.clone(),
            shards: layout.shards,
            checkpoint_table: self.indexer.checkpoints.indexer_checkpoint_table.clone(),
            poll_interval: self.indexer.indexer_poll_interval,
        }
    }

    /// The indexer's leases over the stream, as the daemon's over the shards (none with
    /// `--no-leases`: it reads every stream shard).
    pub fn indexer_fleet(&self) -> Option<IndexerFleet> {
        (!self.fleet.no_leases).then(|| {
            let (config, this) = self.fleet.lease_config();
            IndexerFleet {
                lease_table: self.fleet.table.lease_table.clone(),
                config,
                this,
            }
        })
    }
}

#[derive(Debug, Args)]
pub struct BackfillArgs {
    #[command(flatten)]
    pub scan: ScanSegments,

    /// Shard writes in flight per Scan segment
    #[arg(long, env = "PRECISE_TTL_WRITES_IN_FLIGHT", default_value_t = 16,
          value_parser = clap::value_parser!(u64).range(1..=256))]
    pub writes_in_flight: u64,

    /// Cap on shard writes per second, across all segments (default: no cap)
    #[arg(long, env = "PRECISE_TTL_MAX_WRITES_PER_SECOND", value_parser = positive_rate)]
    pub max_writes_per_second: Option<f64>,

    /// Items read per Scan page (DynamoDB also stops a page at 1 MB)
    #[arg(long, env = "PRECISE_TTL_SCAN_PAGE_SIZE", default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub scan_page_size: u32,

    /// Where progress is saved (default: precise-ttl-backfill-<table>.json here)
    #[arg(long, env = "PRECISE_TTL_CHECKPOINT", value_name = "FILE")]
    pub checkpoint: Option<std::path::PathBuf>,

    /// Ignore an existing checkpoint and scan from the start
    #[arg(long)]
    pub restart: bool,

    #[command(flatten)]
    pub retries: Retries,

    /// Print the result as JSON on standard output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Inspect a random sample of about this many items instead of the whole table
    #[arg(long, env = "PRECISE_TTL_SAMPLE", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample: Option<u64>,

    #[command(flatten)]
    pub indexer: IndexerCheckpoints,

    #[command(flatten)]
    pub scan: ScanSegments,

    /// Example keys shown per finding
    #[arg(long, env = "PRECISE_TTL_EXAMPLES", default_value_t = 3)]
    pub examples: usize,

    /// Pages per shard for counting the items due in the next minute (shard advice; a
    /// provisioned index's write check, 2 units per expiring item). A page reads up to 1 MB:
    /// at most 128 read units, 0.5 when little is due; a shard with more due is reported as
    /// "at least" what was counted. Raise it for an exact rate on a busy table
    #[arg(long, env = "PRECISE_TTL_RATE_PAGES", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub rate_pages: u64,

    /// Print the result as JSON on standard output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print the result as JSON on standard output
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub indexer: IndexerCheckpoints,

    #[command(flatten)]
    pub leases: LeaseTableArg,

    /// Also show a running worker's admission control, read from its /metrics (one URL per
    /// worker, e.g. http://10.0.0.5:9464/metrics)
    ///
    /// For each worker, after the index: its limit on delete requests in flight, the table's send
    /// rate (or not engaged), the shards sending under a limit of their own and their rates, and
    /// its throttled deletes by what refused them (table_partition, table, index_partition, index,
    /// unknown). Repeat the flag for each worker of a fleet, or separate URLs with commas. A bare
    /// HOST:PORT, as given to `run --metrics-addr`, means its /metrics (0.0.0.0 asked on
    /// loopback). Each is asked once, with a 2s timeout; a worker that does not answer is reported
    /// in one line, and the command fails only when none answers. Example: precise-ttl status
    /// --table my-table --metrics-url http://10.0.0.5:9464/metrics --metrics-url 10.0.0.6:9464
    #[arg(long, env = "PRECISE_TTL_METRICS_URL", value_name = "URL", value_delimiter = ',',
          value_parser = super::health::metrics_url)]
    pub metrics_url: Vec<HealthUrl>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Items that expire during the demo
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub items: u64,

    /// Their TTLs are spread over this long, starting two seconds ahead
    #[arg(long, default_value = "5s", value_parser = duration)]
    pub spread: Duration,

    /// How often the daemon reads the index (deletes still happen at each expiry instant)
    #[arg(long, default_value = "1s", value_parser = settings::poll_interval)]
    pub interval: Duration,
}

/// `archive`'s own flags are named `archive-*` (as their variables were already): they mean
/// something else than `run`'s flags of the same concern (the stream's pause, not the index's
/// poll; the stream's checkpoint table, keyed by stream and shard, not the blog window's) or must
/// differ between the two processes that one config file may feed (the metrics address). The
/// names they had before stay as hidden aliases.
#[derive(Debug, Args)]
pub struct ArchiveArgs {
    /// Where the records go: file://DIR (JSON Lines, fsynced), s3://BUCKET/PREFIX (through a
    /// local spool) or - (standard output)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_TO", value_name = "URL", visible_alias = "to",
          help_heading = heading::ARCHIVE,
          value_parser = |s: &str| precise_ttl_archive::SinkUrl::parse(s).map_err(|e| e.to_string()))]
    pub archive_to: precise_ttl_archive::SinkUrl,

    /// The table of each stream shard's archived position (created if missing)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_CHECKPOINT_TABLE", alias = "checkpoint-table",
          default_value = precise_ttl_stream::archive_stream::DEFAULT_CHECKPOINT_TABLE,
          help_heading = heading::STREAM)]
    pub archive_checkpoint_table: String,

    /// Pause between reads of the stream when nothing new came (100ms at least)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_POLL_INTERVAL", alias = "poll-interval",
          default_value = "1s", value_parser = settings::poll_interval,
          help_heading = heading::STREAM)]
    pub archive_poll_interval: Duration,

    /// How finely the stream dates its records: auto or a duration. A REMOVE counts as an expiry
    /// if the item's TTL was due by its record's time plus this. DynamoDB dates records to the
    /// second, DynamoDB Local to the minute; auto takes 1m for DynamoDB Local's stream (known by
    /// its ARN), 1s for DynamoDB's, and for any other endpoint 1m until a record time is not a
    /// whole minute, then 1s. Every REMOVE left out is counted in /metrics and logged
    #[arg(long, env = "PRECISE_TTL_RECORD_TIME_RESOLUTION", default_value = "auto",
          value_name = "auto|DURATION", help_heading = heading::STREAM,
          value_parser = |s: &str| precise_ttl_core::removal::ResolutionSetting::parse(s).map_err(|e| format!("expected auto or a duration; {e}")))]
    pub record_time_resolution: precise_ttl_core::removal::ResolutionSetting,

    #[command(flatten)]
    pub tuning: SinkTuning,

    /// Serve /metrics (Prometheus: records archived, native, REMOVEs left out by reason) and
    /// /healthz here, e.g. 127.0.0.1:9465 (port 0: any free port)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_METRICS_ADDR", value_name = "ADDR",
          alias = "metrics-addr", help_heading = heading::METRICS)]
    pub archive_metrics_addr: Option<std::net::SocketAddr>,

    /// /healthz answers 503 once no pass over the stream has completed for this long (default:
    /// ten poll intervals, at least 30s)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_UNHEALTHY_AFTER", value_parser = duration,
          value_name = "DURATION", alias = "unhealthy-after", help_heading = heading::METRICS)]
    pub archive_unhealthy_after: Option<Duration>,
}

impl ArchiveArgs {
    /// The stream archiver's options, for the table of `layout`.
    pub fn options(&self, layout: &TtlLayout) -> ArchiveOptions {
        ArchiveOptions {
            ttl_attribute: layout.ttl_attribute.clone(),
            checkpoint_table: self.archive_checkpoint_table.clone(),
            poll_interval: self.archive_poll_interval,
            record_time_resolution: self.record_time_resolution,
        }
    }

    /// How long without a complete pass over the stream before /healthz answers 503.
    pub fn unhealthy_after(&self) -> Duration {
        self.archive_unhealthy_after
            .unwrap_or_else(|| (self.archive_poll_interval * 10).max(Duration::from_secs(30)))
    }
}
