//! The flag groups several commands share (one flag, one meaning, one default and range wherever
//! it appears), and what each group gives the library that owns its concern:
//! the blog window's options, the lease settings, the archive's sink options.

use super::{Global, duration, heading, long_help};
use clap::{Args, ValueEnum};
use precise_ttl_core::{WindowFormat, WindowSpec};
use precise_ttl_dynamodb::BlogOptions;
use precise_ttl_engine::host::ThisProcess;
use precise_ttl_engine::lease::LeaseConfig;
use precise_ttl_engine::settings::{self, FleetSettings};
use std::time::Duration;

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

    #[arg(long, env = "PRECISE_TTL_WORKER_ID", help = settings::WORKER_ID.meaning)]
    pub worker_id: Option<String>,

    #[arg(long, env = "PRECISE_TTL_NO_LEASES", help = settings::NO_LEASES.meaning)]
    pub no_leases: bool,
}

impl Fleet {
    /// The fleet's settings these flags give, as the Lambda reads them.
    pub fn settings(&self) -> FleetSettings {
        FleetSettings {
            lease_table: (!self.no_leases).then(|| self.table.lease_table.clone()),
            lease_duration: self.lease_duration,
            worker_id: self.worker_id.clone(),
        }
    }

    /// This worker's lease settings, and the process check that proves a predecessor dead.
    pub fn lease_config(&self) -> (LeaseConfig, Option<ThisProcess>) {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "host".into());
        // The default name lets a restart on this host prove its predecessor dead and take its
        // leases at once (precise_ttl_core::owner); a name given by hand is stable across
        // restarts already, and a previous incarnation's leases are taken back at once under it.
        let this = ThisProcess::identify(&host);
        let fleet = self.settings();
        let worker = fleet.worker(|| match &this {
            Some(this) => this.identity().to_string(),
            None => format!("{host}-{}", std::process::id()),
        });
        (fleet.lease_config(worker), this)
    }
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

/// How an archive is written, beyond its URL (`run`, `sweep`, `archive`).
#[derive(Debug, Args)]
#[command(next_help_heading = heading::ARCHIVE)]
pub struct SinkTuning {
    /// Compress archive files and S3 objects (.jsonl.gz). Default: gzip for s3://, none for file://
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_COMPRESSION", value_name = "gzip|none",
          value_parser = precise_ttl_archive::Compression::parse)]
    pub archive_compression: Option<precise_ttl_archive::Compression>,

    /// Start a new archive file (s3://: upload one object) this often, or at 64 MiB
    #[arg(long, env = "PRECISE_TTL_ARCHIVE_ROTATE_EVERY", default_value = "5m", value_parser = crate::duration)]
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
    /// The sink's options: these flags, and the region and profile of the global flags (an
    /// s3:// archive is reached as DynamoDB is).
    pub fn options(&self, global: &Global) -> precise_ttl_archive::SinkOptions {
        precise_ttl_archive::SinkOptions {
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
        }
    }
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
