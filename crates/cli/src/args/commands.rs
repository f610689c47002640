//! Each command's options, and the flag groups several commands share (one flag, one meaning,
//! one default and range wherever it appears). The daemon's settings take their default, range
//! and help line from `precise_ttl_engine::settings`, as the Lambda does.

use super::{HealthUrl, duration, heading, long_help, positive_rate};
use clap::{Args, ValueEnum};
use precise_ttl_core::{WindowFormat, WindowSpec};
use precise_ttl_dynamodb::BlogOptions;
use precise_ttl_engine::settings;
use precise_ttl_ops::KeyAttribute;
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

/// Which index is swept.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum IndexLayout {
    /// Ours: a sparse index on (shard Number, TTL); writers add the shard attribute
    Sharded,
    /// Writers unchanged: precise-ttl's queue table, fed from the table's stream
    StreamQueue,
    /// The 2022 blog's: an index on (expirationWindow String, TTL)
    BlogWindow,
}

impl IndexLayout {
    /// The flag's value, for messages.
    pub fn name(self) -> &'static str {
        match self {
            IndexLayout::Sharded => "sharded",
            IndexLayout::StreamQueue => "stream-queue",
            IndexLayout::BlogWindow => "blog-window",
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum WindowFormatArg {
    /// 2022-07-20T10:00:00.000Z (JavaScript's toISOString)
    Millis,
    /// 2022-07-20T10:00:00Z
    Seconds,
}

/// Options for sweeping the 2022 blog's window index (--index-layout blog-window).
#[derive(Debug, Args)]
#[command(next_help_heading = heading::BLOG)]
pub struct BlogArgs {
    /// blog-window: the String attribute holding "<startISO>_<endISO>"
    #[arg(
        long,
        env = "PRECISE_TTL_WINDOW_ATTRIBUTE",
        default_value = "expirationWindow"
    )]
    pub window_attribute: String,

    /// blog-window: the writers' window size (windows start at multiples of it since the epoch)
    #[arg(long, env = "PRECISE_TTL_WINDOW_SIZE", default_value = "1m", value_parser = duration)]
    pub window_size: Duration,

    /// blog-window: how the writers spell instants in the label
    #[arg(long, env = "PRECISE_TTL_WINDOW_FORMAT", default_value = "millis")]
    pub window_format: WindowFormatArg,

    /// blog-window: on the first run (no checkpoint yet), how far back to sweep windows
    #[arg(long, env = "PRECISE_TTL_WINDOW_SINCE", default_value = "7d", value_parser = duration)]
    pub window_since: Duration,

    /// blog-window: reads reach this far behind the checkpoint (and, while running, behind the
    /// watermark), for late writes and the index's eventual consistency
    #[arg(long, env = "PRECISE_TTL_WINDOW_LOOKBACK", default_value = "5m", value_parser = duration)]
    pub window_lookback: Duration,

    /// blog-window: the control table keeping each index's "swept until" (created if missing;
    /// `run` saves its watermark there every few seconds and on exit)
    #[arg(
        long,
        env = "PRECISE_TTL_CHECKPOINT_TABLE",
        default_value = "precise-ttl-checkpoints"
    )]
    pub checkpoint_table: String,
}

impl BlogArgs {
    /// The window layout these flags describe.
    pub fn options(&self) -> Result<BlogOptions, precise_ttl_core::WindowError> {
        let format = match self.window_format {
            WindowFormatArg::Millis => WindowFormat::Millis,
            WindowFormatArg::Seconds => WindowFormat::Seconds,
        };
        Ok(BlogOptions {
            window_attribute: self.window_attribute.clone(),
            spec: WindowSpec::new(self.window_size, format)?,
            since: self.window_since,
            lookback: self.window_lookback,
            checkpoint_table: self.checkpoint_table.clone(),
        })
    }
}

// Flag groups: each flag means one thing, with one default and one range, in every command that
// takes it (and so in the config file and its PRECISE_TTL_* variable).

/// Delete requests in flight (`sweep`, `run`).
#[derive(Debug, Args)]
#[command(next_help_heading = heading::DELETES)]
pub struct DeleteConcurrency {
    #[arg(long, env = "PRECISE_TTL_CONCURRENCY", default_value = settings::CONCURRENCY.default,
          value_parser = settings::concurrency, help = settings::CONCURRENCY.meaning,
          long_help = long_help(settings::CONCURRENCY, "\
Timeouts and 5xx answers cut `run`'s limit by half (refusals are answered by the shard's or the \
table's send rate instead); every limit's worth of items answered raises it by one. A request \
carries up to 25 items, so deletes/s are at most requests in flight × 25 / round trip: 64 at a \
10 ms round trip carry 160 000/s. Raise it only where round trips are long, e.g. on a saturated \
host (docs/benchmarks.md, \"What holds the 5-million catch-up\")"))]
    pub concurrency: u64,
}

/// Keys per query of the expiry index (`sweep`, `run`).
#[derive(Debug, Args)]
pub struct IndexPage {
    #[arg(long, env = "PRECISE_TTL_PAGE_SIZE", default_value = settings::PAGE_SIZE.default,
          value_parser = settings::page_size, help = settings::PAGE_SIZE.meaning)]
    pub page_size: u32,
}

/// Attempts per store call (`sweep`, `run`, `backfill`).
#[derive(Debug, Args)]
pub struct Retries {
    #[arg(long, env = "PRECISE_TTL_MAX_ATTEMPTS", default_value = settings::MAX_ATTEMPTS.default,
          value_parser = settings::max_attempts, help = settings::MAX_ATTEMPTS.meaning,
          long_help = long_help(settings::MAX_ATTEMPTS,
              "Throttling and 5xx answers are retried with backoff and jitter"))]
    pub max_attempts: u32,
}

/// The lease table (`setup` creates it, `run` coordinates through it).
#[derive(Debug, Args)]
pub struct LeaseTableArg {
    #[arg(long, env = "PRECISE_TTL_LEASE_TABLE", default_value = settings::LEASE_TABLE.default,
          help = settings::LEASE_TABLE.meaning)]
    pub lease_table: String,
}

/// How `run` shares a table with other `run` processes.
#[derive(Debug, Args)]
#[command(next_help_heading = heading::FLEET)]
pub struct Fleet {
    #[command(flatten, next_help_heading = heading::FLEET)]
    pub table: LeaseTableArg,

    #[arg(long, env = "PRECISE_TTL_LEASE_DURATION", default_value = settings::LEASE_DURATION.default,
          value_parser = settings::lease_duration, help = settings::LEASE_DURATION.meaning,
          long_help = long_help(settings::LEASE_DURATION, "\
Heartbeats every third of it; a worker stops reading a lease not renewed for half of it"))]
    pub lease_duration: Duration,

    /// This worker's name in the lease table. The default names the process (host, PID, start
    /// time, user, boot, PID namespace), so a restart on the same host proves its predecessor
    /// dead and takes its leases at once. Set it to a name that stays the same across restarts
    /// (a Kubernetes pod's name) or leave it; never give two running workers one name
    #[arg(long, env = "PRECISE_TTL_WORKER_ID")]
    pub worker_id: Option<String>,

    /// Work alone, without leases: every shard, whatever other processes do (deletes stay
    /// conditional, so two such processes are safe, only wasteful)
    #[arg(long, env = "PRECISE_TTL_NO_LEASES")]
    pub no_leases: bool,
}

/// A parallel Scan (`backfill`, `doctor`).
#[derive(Debug, Args)]
pub struct ScanSegments {
    /// Parallel Scan segments: DynamoDB splits the table into this many disjoint parts, read at
    /// the same time
    #[arg(long, env = "PRECISE_TTL_SEGMENTS", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub segments: u32,
}

/// Where expiry records go (`sweep`, `run`).
#[derive(Debug, Args)]
#[command(next_help_heading = heading::ARCHIVE)]
pub struct ArchiveArg {
    /// Keep a record of every item deleted: its last image, as a DynamoDB Streams REMOVE record
    /// (docs/expiry-records.md). file://DIR: JSON Lines files, each batch fsynced before its
    /// deletes count as done; s3://BUCKET/PREFIX: the same through a local spool (--archive-spool),
    /// one object per --archive-rotate-every; -: standard output. A failing archive stops
    /// deleting (sharded index only)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE", value_name = "URL",
          value_parser = |s: &str| precise_ttl_archive::SinkUrl::parse(s).map_err(|e| e.to_string()))]
    pub archive: Option<precise_ttl_archive::SinkUrl>,

    #[command(flatten)]
    pub tuning: SinkTuning,
}

impl ArchiveArg {
    /// The sink, opened (a folder created, a bucket checked), if `--archive` was given.
    pub async fn open(
        &self,
        global: &crate::args::Global,
    ) -> anyhow::Result<Option<precise_ttl_archive::Sink>> {
        match &self.archive {
            None => Ok(None),
            Some(url) => Ok(Some(self.tuning.open(url, global).await?)),
        }
    }
}

/// How an archive is written, beyond its URL (`run`, `sweep`, `archive`).
#[derive(Debug, Args)]
#[command(next_help_heading = heading::ARCHIVE)]
pub struct SinkTuning {
    /// Compress archive files and S3 objects (.jsonl.gz). Default: gzip for s3://, none for file://
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_COMPRESSION", value_name = "gzip|none",
          value_parser = precise_ttl_archive::Compression::parse)]
    pub archive_compression: Option<precise_ttl_archive::Compression>,

    /// Start a new archive file (s3://: upload one object) this often, or at 64 MiB
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_ROTATE_EVERY", default_value = "5m", value_parser = crate::args::duration)]
    pub archive_rotate_every: Duration,

    /// s3://: where records wait until their object is uploaded (one folder per destination
    /// inside). A record counts as kept once it is here, so put it on a disk that outlives the
    /// process; a new process uploads what a killed one left. Default: $STATE_DIRECTORY/spool,
    /// else ~/.local/state/precise-ttl/spool
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_SPOOL", value_name = "DIR")]
    pub archive_spool: Option<std::path::PathBuf>,

    /// s3://: an S3-compatible server instead of AWS's S3 endpoint (addressed path-style)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_ENDPOINT_URL", value_name = "URL")]
    pub archive_endpoint_url: Option<String>,
}

impl SinkTuning {
    pub async fn open(
        &self,
        url: &precise_ttl_archive::SinkUrl,
        global: &crate::args::Global,
    ) -> anyhow::Result<precise_ttl_archive::Sink> {
        let options = precise_ttl_archive::SinkOptions {
            rotation: precise_ttl_archive::Rotation {
                max_age: self.archive_rotate_every,
                ..precise_ttl_archive::Rotation::default()
            },
            compression: self.archive_compression,
            spool: self.archive_spool.clone(),
            s3_endpoint_url: self.archive_endpoint_url.clone(),
            region: global.region.clone(),
            profile: global.profile.clone(),
            ..precise_ttl_archive::SinkOptions::default()
        };
        Ok(precise_ttl_archive::Sink::open(url, &options).await?)
    }
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
the store refuses PartiQL, that it falls back to DeleteItem"))]
    pub delete_mode: DeleteModeArg,

    #[arg(long, env = "PRECISE_TTL_BATCH_LINGER", value_parser = duration,
          default_value = settings::BATCH_LINGER.default, help = settings::BATCH_LINGER.meaning,
          help_heading = heading::DELETES, long_help = long_help(settings::BATCH_LINGER, "\
Batches still form while items wait for a request slot or the table's rate"))]
    pub batch_linger: Duration,

    #[command(flatten, next_help_heading = heading::DELETES)]
    pub retries: Retries,

    #[command(flatten)]
    pub budget: crate::args::CapacityBudget,

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

/// Where the stream-queue layout's indexer keeps its position in the stream.
#[derive(Debug, Args)]
pub struct IndexerCheckpoints {
    /// stream-queue: the table of the indexer's position in each stream shard (created if
    /// missing); a fleet shares it, and a restart goes on from it
    #[arg(long, env = "PRECISE_TTL_INDEXER_CHECKPOINT_TABLE",
          default_value = precise_ttl_stream::queue::indexer::DEFAULT_INDEXER_CHECKPOINT_TABLE,
          help_heading = heading::INDEXER)]
    pub indexer_checkpoint_table: String,
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
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum DeleteModeArg {
    /// One conditional DeleteItem per item (needs dynamodb:DeleteItem)
    Single,
    /// PartiQL batches only (needs dynamodb:PartiQLDelete); a store that refuses them stops the
    /// daemon
    Batch,
    /// Batches, and DeleteItem for good once the store refuses PartiQL (access denied, no
    /// PartiQL support)
    Auto,
}

impl DeleteModeArg {
    pub fn mode(self) -> precise_ttl_dynamodb::DeleteMode {
        use precise_ttl_dynamodb::DeleteMode;
        match self {
            DeleteModeArg::Single => DeleteMode::Single,
            DeleteModeArg::Batch => DeleteMode::Batch,
            DeleteModeArg::Auto => DeleteMode::Auto,
        }
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
