//! What a benchmark run is asked to do.

use crate::revision::Revision;
use precise_ttl_core::TtlLayout;
use precise_ttl_dynamodb::DeleteMode;
use std::path::PathBuf;
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
    /// Items whose TTLs fall during the run.
    pub items: u64,
    /// Their TTLs are spread evenly over this long.
    pub spread: Duration,
    /// Items already expired when the sweeper starts.
    pub backlog: u64,
    /// How long after the last TTL to wait for stragglers.
    pub grace: Duration,
    /// After the grace period, how long to wait at most for a backlog to be cleared.
    pub timeout: Duration,
    /// Items per mode for the raw conditional-delete rate (0: skip).
    pub raw_items: u64,
    /// The daemon's poll interval.
    pub poll_interval: Duration,
    /// The daemon's delete mode.
    pub delete_mode: DeleteMode,
    /// How to start the daemon.
    pub daemon: DaemonCommand,
    /// The command line that asked for this run, recorded in the report.
    pub argv: Vec<String>,
    /// The source revision of the binary, recorded in the report.
    pub revision: Revision,
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
            items: 2000,
            spread: Duration::from_secs(10),
            backlog: 0,
            grace: Duration::from_secs(3),
            timeout: Duration::from_secs(15 * 60),
            raw_items: 4000,
            poll_interval: Duration::from_secs(1),
            delete_mode: DeleteMode::Batch,
            daemon,
            argv: Vec::new(),
            revision: Revision::Unknown,
        }
    }

    pub(crate) fn delete_mode_name(&self) -> &'static str {
        match self.delete_mode {
            DeleteMode::Single => "single",
            DeleteMode::Batch => "batch",
        }
    }
}
