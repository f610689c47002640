//! Each command's options, and the flag groups several commands share (one flag, one meaning,
//! one default and range wherever it appears).

use super::{duration, poll_interval, positive_rate};
use clap::{Args, ValueEnum};
use precise_ttl_core::{WindowFormat, WindowSpec};
use precise_ttl_dynamodb::{BlogOptions, KeyAttribute};
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
    /// Ours: a sparse index on (shard Number, TTL)
    Sharded,
    /// The 2022 blog's: an index on (expirationWindow String, TTL)
    BlogWindow,
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
pub struct BlogArgs {
    /// Which index to sweep: ours (sharded) or the 2022 blog's window index (blog-window; name it
    /// with --index-name)
    #[arg(long, env = "PRECISE_TTL_INDEX_LAYOUT", default_value = "sharded")]
    pub index_layout: IndexLayout,

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
pub struct DeleteConcurrency {
    /// Most delete requests in flight at once, across all shards; `run` adapts below it
    ///
    /// Timeouts and 5xx answers cut `run`'s limit by half (refusals are answered by the shard's
    /// or the table's send rate instead); every limit's worth of items answered raises it by
    /// one. A request carries up to 25 items, so deletes/s are at most requests in flight × 25 /
    /// round trip: 64 at a 10 ms round trip carry 160 000/s. Raise it only where round trips are
    /// long, e.g. on a saturated host (docs/benchmarks.md, "What holds the 5-million catch-up")
    #[arg(long, env = "PRECISE_TTL_CONCURRENCY", default_value_t = 64,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub concurrency: u64,
}

/// Keys per query of the expiry index (`sweep`, `run`).
#[derive(Debug, Args)]
pub struct IndexPage {
    /// Keys read per index query; bounds the memory each shard's reader holds
    #[arg(long, env = "PRECISE_TTL_PAGE_SIZE", default_value_t = 500,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub page_size: u32,
}

/// Attempts per store call (`sweep`, `run`, `backfill`).
#[derive(Debug, Args)]
pub struct Retries {
    /// Attempts per store call, the first included, before the item counts as an error and is
    /// left for the next pass (throttling and 5xx are retried with backoff and jitter)
    #[arg(long, env = "PRECISE_TTL_MAX_ATTEMPTS", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub max_attempts: u32,
}

/// The lease table (`setup` creates it, `run` coordinates through it).
#[derive(Debug, Args)]
pub struct LeaseTableArg {
    /// The table of shard leases that splits the work among `run` processes; one serves every
    /// swept table (created by `setup`)
    #[arg(
        long,
        env = "PRECISE_TTL_LEASE_TABLE",
        default_value = "precise-ttl-leases"
    )]
    pub lease_table: String,
}

/// How `run` shares a table with other `run` processes.
#[derive(Debug, Args)]
pub struct Fleet {
    #[command(flatten)]
    pub table: LeaseTableArg,

    /// How long a lease's heartbeat may stop before another worker takes it over (heartbeats
    /// every third of it; a worker stops reading a lease not renewed for half of it)
    #[arg(long, env = "PRECISE_TTL_LEASE_DURATION", default_value = "10s", value_parser = super::lease_duration)]
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
    #[command(flatten)]
    pub blog: BlogArgs,

    #[command(flatten)]
    pub archive: ArchiveArg,

    #[command(flatten)]
    pub deletes: DeleteConcurrency,

    #[command(flatten)]
    pub index_page: IndexPage,

    /// Shards read at the same time
    #[arg(long, env = "PRECISE_TTL_SHARD_PARALLELISM", default_value_t = 4,
          value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub shard_parallelism: u64,

    #[command(flatten)]
    pub retries: Retries,

    /// Print the report as JSON on standard output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub blog: BlogArgs,

    #[command(flatten)]
    pub archive: ArchiveArg,

    #[command(flatten)]
    pub fleet: Fleet,

    /// How often each shard's index is read (100ms at least)
    #[arg(long, env = "PRECISE_TTL_POLL_INTERVAL", default_value = "1s", value_parser = poll_interval)]
    pub poll_interval: Duration,

    /// How far ahead each read looks, so items are deleted at their expiry instant
    #[arg(long, env = "PRECISE_TTL_HORIZON", default_value = "5s", value_parser = duration)]
    pub horizon: Duration,

    /// How far back each read reaches, for items written late (at least the poll interval)
    #[arg(long, env = "PRECISE_TTL_LOOKBACK", default_value = "2s", value_parser = duration)]
    pub lookback: Duration,

    /// Stop after this long (for scheduled runs, e.g. 55s every minute)
    #[arg(long = "for", env = "PRECISE_TTL_FOR", value_parser = duration, value_name = "DURATION")]
    pub run_for: Option<Duration>,

    /// Serve /metrics (Prometheus) and /healthz here, e.g. 127.0.0.1:9464 (port 0: any free port)
    #[arg(long, env = "PRECISE_TTL_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// /healthz answers 503 once no index read has succeeded for this long (default: ten poll
    /// intervals, at least 30s); point a liveness probe at it
    #[arg(long, env = "PRECISE_TTL_UNHEALTHY_AFTER", value_parser = duration, value_name = "DURATION")]
    pub unhealthy_after: Option<Duration>,

    /// Cap on items deleted per second (default: as fast as the table allows)
    #[arg(long, env = "PRECISE_TTL_MAX_DELETES_PER_SECOND", value_parser = positive_rate)]
    pub max_deletes_per_second: Option<f64>,

    #[command(flatten)]
    pub budget: crate::args::CapacityBudget,

    #[command(flatten)]
    pub deletes: DeleteConcurrency,

    #[command(flatten)]
    pub retries: Retries,

    /// How deletes are sent: PartiQL batches of up to 25 conditional DELETEs when several items
    /// are due at once (one alone otherwise), or one DeleteItem per item; auto batches and
    /// falls back to DeleteItem for good, saying so once, when the store refuses PartiQL
    #[arg(long, env = "PRECISE_TTL_DELETE_MODE", default_value = "auto")]
    pub delete_mode: DeleteModeArg,

    #[command(flatten)]
    pub index_page: IndexPage,

    /// How often to look for due items on shard values from --shards up to 1023 (left by
    /// writers with a larger shard count) and sweep them; 0s: never
    #[arg(long, env = "PRECISE_TTL_STRAY_CHECK_INTERVAL", default_value = "5m", value_parser = duration)]
    pub stray_check_interval: Duration,

    /// In batch mode, how long a due item may wait for others to share its request (0s: never;
    /// batches still form while items wait for a request slot or the table's rate)
    #[arg(long, env = "PRECISE_TTL_BATCH_LINGER", default_value = "0s", value_parser = duration)]
    pub batch_linger: Duration,
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

    /// Print the summary as JSON on standard output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Inspect a random sample of about this many items instead of the whole table
    #[arg(long, env = "PRECISE_TTL_SAMPLE", value_parser = clap::value_parser!(u64).range(1..))]
    pub sample: Option<u64>,

    #[command(flatten)]
    pub scan: ScanSegments,

    /// Example keys shown per finding
    #[arg(long, default_value_t = 3)]
    pub examples: usize,

    /// Pages per shard for counting the items due in the next minute (shard advice; a
    /// provisioned index's write check, 2 units per expiring item). A page reads up to 1 MB:
    /// at most 128 read units, 0.5 when little is due; a shard with more due is reported as
    /// "at least" what was counted. Raise it for an exact rate on a busy table
    #[arg(long, env = "PRECISE_TTL_RATE_PAGES", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub rate_pages: u64,

    /// Print the findings as JSON on standard output
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    pub json: bool,

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
          value_parser = metrics_url)]
    pub metrics_url: Vec<HealthUrl>,
}

/// `status --metrics-url`: an `http://` URL (without a path, `/metrics`), or the `HOST:PORT` a
/// worker was given as `--metrics-addr`, asked as `health` asks it.
fn metrics_url(text: &str) -> Result<HealthUrl, String> {
    let text = text.trim();
    match text.parse::<std::net::SocketAddr>() {
        Ok(addr) => Ok(HealthUrl::of_listener(addr, "/metrics")),
        Err(_) => HealthUrl::parse_with_default_path(text, "/metrics"),
    }
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
    #[arg(long, default_value = "1s", value_parser = poll_interval)]
    pub interval: Duration,
}

#[derive(Debug, Args)]
pub struct ArchiveArgs {
    /// Where the records go: file://DIR (JSON Lines, fsynced), s3://BUCKET/PREFIX (through a
    /// local spool) or - (standard output)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_TO", value_name = "URL",
          value_parser = |s: &str| precise_ttl_archive::SinkUrl::parse(s).map_err(|e| e.to_string()))]
    pub to: precise_ttl_archive::SinkUrl,

    #[command(flatten)]
    pub tuning: SinkTuning,

    /// The table of each stream shard's archived position (created if missing)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_CHECKPOINT_TABLE",
          default_value = precise_ttl_dynamodb::archive_stream::DEFAULT_CHECKPOINT_TABLE)]
    pub checkpoint_table: String,

    /// Pause between reads of the stream when nothing new came
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_POLL_INTERVAL", default_value = "1s", value_parser = poll_interval)]
    pub poll_interval: Duration,

    /// How finely the stream dates its records: auto or a duration. A REMOVE counts as an expiry
    /// if the item's TTL was due by its record's time plus this. DynamoDB dates records to the
    /// second, DynamoDB Local to the minute; auto takes 1m for DynamoDB Local's stream (known by
    /// its ARN), 1s for DynamoDB's, and for any other endpoint 1m until a record time is not a
    /// whole minute, then 1s. Every REMOVE left out is counted in /metrics and logged
    #[arg(long, env = "PRECISE_TTL_RECORD_TIME_RESOLUTION", default_value = "auto",
          value_name = "auto|DURATION",
          value_parser = |s: &str| precise_ttl_core::removal::ResolutionSetting::parse(s).map_err(|e| format!("expected auto or a duration; {e}")))]
    pub record_time_resolution: precise_ttl_core::removal::ResolutionSetting,

    /// Serve /metrics (Prometheus: records archived, native, REMOVEs left out by reason) and
    /// /healthz here, e.g. 127.0.0.1:9465 (port 0: any free port)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// /healthz answers 503 once no pass over the stream has completed for this long (default:
    /// ten poll intervals, at least 30s)
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_UNHEALTHY_AFTER", value_parser = duration, value_name = "DURATION")]
    pub unhealthy_after: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// The URL to ask: http://HOST:PORT[/PATH]; without a path, /healthz. Default: /healthz on
    /// --metrics-addr
    #[arg(long, value_name = "URL", value_parser = HealthUrl::parse)]
    pub url: Option<HealthUrl>,

    /// The address `run` serves /metrics and /healthz on (its --metrics-addr, read from the same
    /// PRECISE_TTL_METRICS_ADDR), asked when no --url is given; 0.0.0.0 and [::] are asked on
    /// loopback
    #[arg(long, env = "PRECISE_TTL_METRICS_ADDR", value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// Longest wait for the answer, connecting included
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub timeout: Duration,
}

/// A plain `http://` URL, as `health` (and `status --metrics-url`) asks it: where to connect and
/// what to GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthUrl {
    /// `host:port` (an IPv6 host in brackets), as connected to and sent in `Host`.
    pub authority: String,
    /// The path and query, `/healthz` (`health`) or `/metrics` (`status`) when the URL has none.
    pub path: String,
}

impl HealthUrl {
    /// `health --url`: without a path, `/healthz`.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_with_default_path(text, "/healthz")
    }

    /// `default_path` is asked when the URL has no path, and is the examples' path.
    pub fn parse_with_default_path(text: &str, default_path: &str) -> Result<Self, String> {
        let rest = text.strip_prefix("http://").ok_or_else(|| {
            format!("{text:?} is not an http:// URL (e.g. http://127.0.0.1:9464{default_path})")
        })?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty()
            || authority.contains(|c: char| c.is_whitespace() || c == '@' || c == '?')
        {
            return Err(format!(
                "{text:?} names no host (e.g. http://127.0.0.1:9464{default_path})"
            ));
        }
        let has_port = match authority.rsplit_once(':') {
            // An IPv6 host is bracketed; a colon inside the brackets is not a port's.
            Some((host, port)) if !port.contains(']') => {
                if host.contains(':') && !host.ends_with(']') {
                    return Err(format!(
                        "{text:?}: put an IPv6 host in brackets (http://[::1]:9464{default_path})"
                    ));
                }
                port.parse::<u16>()
                    .map_err(|_| format!("{text:?}: {port:?} is not a port"))?;
                true
            }
            _ => false,
        };
        let authority = if has_port {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let path = if path.is_empty() { default_path } else { path };
        Ok(HealthUrl {
            authority,
            path: path.to_string(),
        })
    }
}

impl std::fmt::Display for HealthUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority, self.path)
    }
}

#[cfg(test)]
mod health_url_tests {
    use super::HealthUrl;

    fn parsed(text: &str) -> (String, String) {
        let url = HealthUrl::parse(text).unwrap();
        (url.authority, url.path)
    }

    #[test]
    fn urls_are_split_into_where_to_connect_and_what_to_get() {
        let pair = |a: &str, p: &str| (a.to_string(), p.to_string());
        assert_eq!(
            parsed("http://127.0.0.1:9464/healthz"),
            pair("127.0.0.1:9464", "/healthz")
        );
        assert_eq!(
            parsed("http://localhost:9465"),
            pair("localhost:9465", "/healthz")
        );
        assert_eq!(parsed("http://example"), pair("example:80", "/healthz"));
        assert_eq!(
            parsed("http://[::1]:9464/x?y=1"),
            pair("[::1]:9464", "/x?y=1")
        );
        assert_eq!(parsed("http://[::1]"), pair("[::1]:80", "/healthz"));
    }

    #[test]
    fn what_it_cannot_ask_is_refused_with_the_reason() {
        for (text, says) in [
            ("https://127.0.0.1:9464/healthz", "not an http:// URL"),
            ("127.0.0.1:9464", "not an http:// URL"),
            ("http:///healthz", "names no host"),
            ("http://user@host:1/", "names no host"),
            ("http://127.0.0.1:99999/healthz", "is not a port"),
            ("http://127.0.0.1:x/healthz", "is not a port"),
            ("http://::1:9464/healthz", "brackets"),
        ] {
            let e = HealthUrl::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn a_metrics_url_is_a_url_or_the_address_run_listens_on() {
        let url = |text: &str| super::metrics_url(text).map(|u| u.to_string());
        assert_eq!(
            url("http://10.0.0.5:9464/metrics").unwrap(),
            "http://10.0.0.5:9464/metrics"
        );
        assert_eq!(
            url("http://10.0.0.5:9464").unwrap(),
            "http://10.0.0.5:9464/metrics"
        );
        assert_eq!(
            url("0.0.0.0:9464").unwrap(),
            "http://127.0.0.1:9464/metrics"
        );
        assert_eq!(url("[::1]:9464").unwrap(), "http://[::1]:9464/metrics");
        let e = url("https://10.0.0.5:9464").unwrap_err();
        assert!(e.contains("http://127.0.0.1:9464/metrics"), "{e}");
    }
}
