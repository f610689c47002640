//! The command line of `precise-ttl`: every flag, its environment variable and its help text, and
//! what the flags give the libraries (the engine's settings, the adapters' and tools' options).
//! It is the one definition of the command line; the binary parses it, builds its clients and
//! prints. This file holds the top level (global flags, the command list); `commands` the options
//! of each command; `groups` the flag groups several commands share; `budget` `run`'s backlog
//! budget; `health` the health check's; `config` the `--config` file, read as the flags'
//! defaults; `env` the variables set empty, which count as unset. The test bench's flags are the
//! bench driver's (`precise_ttl_bench_driver::cli`), in the command list only with the `bench`
//! feature. Nothing here prints or exits.

mod budget;
mod commands;
pub mod config;
mod env;
mod groups;
mod health;
#[cfg(test)]
mod tests;

pub use budget::*;
pub use commands::*;
pub use env::empty_variables_unset;
pub use groups::*;
pub use health::*;

use clap::{Args, Parser, Subcommand, ValueEnum};
use precise_ttl_core::TtlLayout;
use precise_ttl_engine::settings;
pub use precise_ttl_engine::settings::{DeleteMode, IndexLayout};
use std::time::Duration;

const ABOUT: &str =
    "Precise Time To Live for DynamoDB: deletes expired items within a fraction of a second.";

const LONG_ABOUT: &str = "\
Precise Time To Live for DynamoDB: deletes expired items within a fraction of a second of their
expiry, instead of the days native TTL may take.

Writers add two Number attributes to every item that expires: the TTL (epoch seconds, as for native
TTL) and a shard in 0..SHARDS. A sparse KEYS_ONLY index on (shard, ttl) lists exactly the due
items, and every delete is conditional on the stored TTL still being due, so an item whose TTL
was extended or removed meanwhile is never deleted.

Start with:
  precise-ttl setup --table my-table        # add the index, enable native TTL as a backstop
  precise-ttl sweep --table my-table        # delete everything that is due now

Every flag can also be set through an environment variable PRECISE_TTL_<FLAG> (for example
PRECISE_TTL_TABLE); one set to the empty string counts as not set. Region, credentials and
endpoint also come from the standard AWS configuration, as for the AWS CLI: AWS_REGION,
AWS_PROFILE, AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL, and every credential source the CLI
reads (keys in the environment, profiles with SSO, credential_process or `aws login`, web
identity, ECS and EKS container credentials, the instance metadata service); --profile picks a
profile.

Existing tables: `doctor` finds TTL problems, `backfill` gives existing items their shard, and
--index-layout blog-window sweeps the 2022 blog's expirationWindow index as it stands.

Exit codes: 0 success, 1 error (nothing or only part was done), 2 bad usage (an unknown flag, a
value out of range, no --table, flags that contradict each other), 3 the sweep finished
but some deletes kept failing (those items stay due and are retried by the next sweep) or a
backfill stopped early, 4 doctor found problems.";

#[derive(Debug, Parser)]
#[command(name = "precise-ttl", version, about = ABOUT, long_about = LONG_ABOUT, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Help headings: `run --help` and the other long commands group their flags by concern.
pub mod heading {
    pub const TABLE: &str = "Table and index";
    pub const AWS: &str = "AWS connection";
    pub const OUTPUT: &str = "Configuration and output";
    pub const READS: &str = "Reading the index";
    pub const STREAM: &str = "Reading the stream";
    pub const DELETES: &str = "Deletes";
    pub const BUDGET: &str = "Backlog budget";
    pub const FLEET: &str = "Fleet (shard leases)";
    pub const ARCHIVE: &str = "Expiry records (archive)";
    pub const METRICS: &str = "Metrics and health";
    pub const BLOG: &str = "The 2022 blog's window index";
    pub const INDEXER: &str = "The expiry queue's indexer (stream-queue)";
}

#[derive(Debug, Args)]
pub struct Global {
    /// A TOML file with settings (keys are flag names: table = "t", poll-interval = "250ms").
    /// Flags and PRECISE_TTL_* variables take precedence over it
    #[arg(long, env = "PRECISE_TTL_CONFIG", global = true, value_name = "FILE",
          help_heading = heading::OUTPUT)]
    pub config: Option<std::path::PathBuf>,

    #[arg(long, env = "PRECISE_TTL_TABLE", global = true, help_heading = heading::TABLE,
          help = settings::TABLE.meaning,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub table: Option<String>,

    #[arg(long, env = "PRECISE_TTL_TTL_ATTRIBUTE", global = true, help_heading = heading::TABLE,
          default_value = settings::TTL_ATTRIBUTE.default, help = settings::TTL_ATTRIBUTE.meaning)]
    pub ttl_attribute: String,

    #[arg(long, env = "PRECISE_TTL_SHARD_ATTRIBUTE", global = true, help_heading = heading::TABLE,
          default_value = settings::SHARD_ATTRIBUTE.default,
          help = settings::SHARD_ATTRIBUTE.meaning)]
    pub shard_attribute: String,

    #[arg(long, env = "PRECISE_TTL_SHARDS", global = true, help_heading = heading::TABLE,
          default_value = settings::SHARDS.default, help = settings::SHARDS.meaning,
          value_parser = settings::shards)]
    pub shards: u64,

    #[arg(long, env = "PRECISE_TTL_INDEX_NAME", global = true, help_heading = heading::TABLE,
          default_value = settings::INDEX_NAME.default, help = settings::INDEX_NAME.meaning)]
    pub index_name: String,

    #[arg(long, env = "PRECISE_TTL_INDEX_LAYOUT", global = true, help_heading = heading::TABLE,
          default_value = settings::INDEX_LAYOUT.default, help = settings::INDEX_LAYOUT.meaning,
          value_parser = choice::<IndexLayout>())]
    pub index_layout: IndexLayout,

    #[arg(long, env = "PRECISE_TTL_QUEUE_TABLE", global = true, value_name = "NAME",
          help_heading = heading::TABLE, help = settings::QUEUE_TABLE.meaning,
          value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub queue_table: Option<String>,

    /// Send requests here instead of the region's AWS endpoint (e.g. http://localhost:8000 for
    /// DynamoDB Local). Also read from AWS_ENDPOINT_URL_DYNAMODB or AWS_ENDPOINT_URL
    #[arg(long, env = "PRECISE_TTL_ENDPOINT_URL", global = true, value_parser = endpoint_url,
          help_heading = heading::AWS)]
    pub endpoint_url: Option<String>,

    /// The AWS region (default: AWS_REGION, then the profile's region)
    #[arg(long, env = "PRECISE_TTL_REGION", global = true, help_heading = heading::AWS)]
    pub region: Option<String>,

    /// The profile in ~/.aws/config and ~/.aws/credentials to take credentials and region from
    /// (static keys, a role, SSO, credential_process, `aws login`). As in the AWS CLI, it beats
    /// the AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY variables; without it, those come first,
    /// then the profile AWS_PROFILE names (else `default`), web identity
    /// (AWS_WEB_IDENTITY_TOKEN_FILE), container credentials (ECS, EKS) and the instance
    /// metadata service. Also honoured for a loopback --endpoint-url (DynamoDB Local), which
    /// otherwise gets fixed local credentials. See docs/aws.md
    #[arg(long, env = "PRECISE_TTL_PROFILE", global = true, value_name = "NAME",
          help_heading = heading::AWS)]
    pub profile: Option<String>,

    /// Time allowed to open a connection
    #[arg(long, env = "PRECISE_TTL_CONNECT_TIMEOUT", default_value = "3s", global = true,
          value_parser = duration, help_heading = heading::AWS)]
    pub connect_timeout: Duration,

    /// Time allowed for one request attempt; a slower one is retried
    #[arg(long, env = "PRECISE_TTL_ATTEMPT_TIMEOUT", default_value = "10s", global = true,
          value_parser = duration, help_heading = heading::AWS)]
    pub attempt_timeout: Duration,

    /// Log format on standard error (colours only when it is a terminal)
    #[arg(long, env = "PRECISE_TTL_LOG_FORMAT", default_value = "text", global = true,
          help_heading = heading::OUTPUT)]
    pub log_format: LogFormat,

    /// More log output (-v: info, -vv: debug); RUST_LOG overrides
    #[arg(short, long, action = clap::ArgAction::Count, global = true,
          help_heading = heading::OUTPUT)]
    pub verbose: u8,
}

/// A setting's `--help` text: its one-line meaning (its `-h` line, the same wherever the flag
/// appears), then `more`.
pub fn long_help(setting: settings::Setting, more: &str) -> String {
    format!("{}\n\n{more}", setting.meaning)
}

/// A mistake in how the command was called that only shows after parsing (no table given, two
/// flags that contradict each other): the binary exits 2 for it, as for clap's own usage errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

impl UsageError {
    /// Any error's text as a usage error.
    pub fn of(e: impl std::fmt::Display) -> Self {
        UsageError(e.to_string())
    }
}

impl Global {
    /// How to reach DynamoDB: the clients every command shares are built from these.
    pub fn connect_options(&self) -> precise_ttl_dynamodb::ConnectOptions {
        precise_ttl_dynamodb::ConnectOptions {
            endpoint_url: self.endpoint_url.clone(),
            region: self.region.clone(),
            profile: self.profile.clone(),
            connect_timeout: self.connect_timeout,
            attempt_timeout: self.attempt_timeout,
        }
    }

    /// The table's layout, built and refused as the Lambda's is.
    pub fn layout(&self) -> Result<TtlLayout, UsageError> {
        settings::ttl_layout(
            &self.ttl_attribute,
            &self.shard_attribute,
            &self.index_name,
            self.shards,
        )
        .map_err(UsageError::of)
    }

    /// The queue table of the stream-queue layout.
    pub fn queue_table(&self) -> Result<String, UsageError> {
        Ok(settings::queue_table(
            self.queue_table.as_deref(),
            self.table()?,
        ))
    }

    /// What `--index-layout` reads for the table, its queue table resolved.
    pub fn index(&self) -> Result<settings::Index, UsageError> {
        Ok(settings::Index::of(
            self.index_layout,
            self.queue_table.as_deref(),
            self.table()?,
        ))
    }

    /// Refuses a layout `command` does not work with, in one line.
    pub fn refuse_layout(&self, command: &str, refused: &[IndexLayout]) -> Result<(), UsageError> {
        if refused.contains(&self.index_layout) {
            return Err(UsageError(format!(
                "{command} does not work with --index-layout {}",
                self.index_layout.name()
            )));
        }
        Ok(())
    }

    pub fn table(&self) -> Result<&str, UsageError> {
        match self.table.as_deref() {
            Some(t) if !t.is_empty() => Ok(t),
            _ => Err(UsageError(
                "no table given: pass --table NAME or set PRECISE_TTL_TABLE".into(),
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

// Parsed once per process: the size of its largest variant costs nothing, and boxing it would
// only add indirection to every command's arguments.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add the expiry index to a table (or create the table), and enable native TTL as a backstop
    #[command(long_about = "\
Add the expiry index to an existing table and enable native TTL on the TTL attribute as a
backstop. With --create-table, create a new on-demand table with the index first.

Setup only adds what is missing: run it again and it changes nothing and says so. It stops with
an error, changing nothing, when an index of that name has other keys, when native TTL is already
on another attribute, or when the TTL or shard attribute is part of the table's primary key.

Adding an index to a large table makes DynamoDB backfill it, which can take a while: setup waits
for it (see --wait-timeout, --no-wait).")]
    Setup(SetupArgs),

    /// Delete every item that is due now, in one pass over all shards
    #[command(long_about = "\
Delete every item that is due now, in one pass over all shards: query the expiry index for items
whose TTL is at or before now (and not more than five years old, as native TTL), following every
page, and delete each one on the condition that its stored TTL is still a Number that is due.
An item whose TTL was extended or removed after the query is skipped, never deleted.

Throttling and server errors are retried with exponential backoff and jitter. Prints the counts:
deleted, skipped (changed since the query), errors.")]
    Sweep(SweepArgs),

    /// Run the sweeper: delete every item at its expiry instant, until stopped
    #[command(long_about = "\
Run the sweeper as a service: every poll interval, read each shard's index for items expiring
within the horizon, and delete each one at its exact expiry instant (conditionally, as sweep
does). Items already overdue (after downtime, or a burst) are caught up oldest first with
bounded memory, within --backlog-budget, without delaying items that are expiring now.

Each refusal is answered by what refused it (DynamoDB's ThrottlingReasons): a shard whose index
partition refuses slows alone, refusals over the whole table slow the table's send rate, and
timeouts cut the requests in flight. A catch-up takes at most --backlog-budget of the table's
write capacity and yields to any refusal first, so the application keeps its writes;
--max-deletes-per-second caps everything. docs/daemon.md explains admission. With
--metrics-addr, serves Prometheus metrics on /metrics and a health check on /healthz.

Stops cleanly on SIGTERM or SIGINT (finishing the deletes in flight) or after --for.")]
    Run(RunArgs),

    /// Show what is due per shard: items not yet deleted, the oldest, the next expiries
    Status(StatusArgs),

    /// Archive every expired item's record from the table's stream (the lossless path)
    #[command(long_about = "\
Tail the table's stream (every shard, a parent before its children) and write a record for every
REMOVE that is an expiry: native TTL's (the service's userIdentity) or an ordinary delete of an
item whose TTL was due, by native TTL's rules, when the record was made (precise-ttl's deletes).
Each shard's position is saved in the checkpoint table (created if missing) only after the
sink has made the records durable, so a killed archive starts again where it was and loses
nothing: records are at least once, each with its stream sequence number to drop duplicates by.

The stream must be on with old images: `precise-ttl setup --table T --stream`. Runs until
SIGTERM or SIGINT. See docs/expiry-records.md.")]
    Archive(ArchiveArgs),

    /// Give every item that has a TTL but no shard its shard attribute (adoption)
    #[command(long_about = "\
Give every existing item that has a Number TTL but no shard attribute its shard, so the expiry
index lists it. Scans the table in parallel segments and writes the shard with a conditional
UpdateItem: only if the item still exists, still has a Number TTL and still has no shard. A
writer that changes the item meanwhile always wins; nothing else of the item is touched.

The shard follows the stable rule (MD5 of the partition key, see the README), so a re-run or a
writer using the same rule agrees. Items with a TTL that is not a Number are counted and left
alone (native TTL ignores them too; `precise-ttl doctor` lists them).

Resumable: after each page, every segment's position is saved to the checkpoint file. Stopped
by Ctrl-C, SIGTERM, a crash or a lost connection, the same command continues where it stopped;
the file is removed when the scan completes. A Scan reads (and pays for) every item of the
table; --max-writes-per-second caps the write rate.

Exit codes: 0 complete, 1 error, 2 bad usage, 3 stopped early or some writes kept failing (run
the same command again).")]
    Backfill(BackfillArgs),

    /// Check a table for TTL problems: bad values, missing or stray shards, index, native TTL
    #[command(long_about = "\
Check a table for everything that would keep an item from being deleted on time, or get it
deleted wrongly: TTLs that are not Numbers, TTLs in milliseconds, TTLs more than five years in
the past (native TTL never deletes those), items with a TTL but no shard (run backfill), shard
values outside 0..SHARDS or not integers (never swept unless --shards covers them), the expiry
index missing or with another schema, native TTL off or on another attribute.

Reads the whole table with a parallel Scan, or a random sample of about --sample items.
Exit codes: 0 no findings, 4 findings (listed), 1 error, 2 bad usage.")]
    Doctor(DoctorArgs),

    // The test bench, only with the `bench` feature: the product's binary links neither the
    // bench driver nor the simulated DynamoDB.
    #[cfg(feature = "bench")]
    /// Measure precision from outside: plant items, run the daemon, watch the stream, report
    #[command(long_about = "\
Measure precision from outside the sweeper. Starts DynamoDB Local (unless --endpoint-url), measures
its raw conditional-delete rate, loads a table with items whose TTLs are spread over --spread
(plus a --backlog of already-expired items and items that must survive: TTLs extended 1-2 s
before expiry, String, millisecond, negative and older-than-5-years TTLs, no TTL, no shard),
runs `precise-ttl run` as a child process, and watches the table's stream: the lag of each
deletion is the time its REMOVE record was seen minus its TTL.

Writes <out>/<name>.json, .md and .svg (lag over time and lag histogram) and prints the summary.
Exits non-zero if anything was deleted wrongly or left behind.")]
    Bench(precise_ttl_bench_driver::cli::BenchArgs),

    /// Show the whole thing working on a DynamoDB Local it starts itself
    #[command(long_about = "\
Start DynamoDB Local (installing it on first use, unless --endpoint-url is given), create a table
with the expiry index, write items whose TTLs fall a few seconds ahead plus items that must
survive (TTL extended just before expiry, no TTL, far future, too old, milliseconds by mistake),
run the daemon until the expired ones are gone, and print how late after its TTL each one went.")]
    Demo(DemoArgs),

    /// Ask a running `run` (or `archive`) for its /healthz: exit 0 on 200, 1 otherwise
    #[command(long_about = "\
Ask a running `run` (or `archive`) for its /healthz with one plain HTTP/1.0 GET and print one
line: exit 0 when it answers 200, 1 when it answers anything else, does not answer within
--timeout, or nothing listens. For container health checks where the image has no HTTP client
(the ECS task definition in deploy/ecs uses it). Without --url it asks /healthz on
--metrics-addr (PRECISE_TTL_METRICS_ADDR, as `run` reads it), on loopback for 0.0.0.0 or [::].")]
    Health(HealthArgs),
}

// The parsers of durations, rates and ranges are the settings' (one minimum everywhere).
pub use precise_ttl_engine::settings::{duration, positive_rate};

/// The parser of a setting whose values are names (`--index-layout`, `--delete-mode`): the
/// settings' values, each with its help line, as clap lists them; one definition for the flag
/// and the Lambda.
pub fn choice<T: settings::Choice + Send + Sync>() -> impl clap::builder::TypedValueParser<Value = T>
{
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(
        T::ALL
            .iter()
            .map(|v| PossibleValue::new(v.name()).help(v.meaning())),
    )
    .try_map(|name| T::parse(&name))
}

/// `http://host[:port]` or `https://…`: anything else would only fail later, deep in the SDK.
fn endpoint_url(text: &str) -> Result<String, String> {
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .ok_or_else(|| format!("{text:?} is not an http:// or https:// endpoint URL"))?;
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(format!(
            "{text:?} names no host (e.g. http://localhost:8000)"
        ));
    }
    Ok(text.trim_end_matches('/').to_string())
}
