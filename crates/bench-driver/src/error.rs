//! What can stop a benchmark run.

use precise_ttl_dynamodb::AdapterError;
use precise_ttl_engine::StoreError;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum BenchError {
    #[error("the layout's {what} attribute {name:?} is the bench table's key attribute")]
    AttributeClash { what: &'static str, name: String },
    #[error(transparent)]
    Adapter(#[from] AdapterError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{what}: {message}")]
    Call { what: &'static str, message: String },
    #[error("raw measurement deleted {deleted} of {count} items")]
    RawIncomplete { deleted: u64, count: u64 },
    #[error(
        "the daemon's indexer wrote no queue entry within {seconds} s of its start (is the stream read?)"
    )]
    IndexerNotReady { seconds: u64 },
    #[error("the stream did not show a probe delete within 5 s")]
    ProbeNotSeen,
    #[error("the stream observer gave up after repeated errors: {0}")]
    Observer(String),
    #[error("starting the daemon {program}: {source}")]
    DaemonSpawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the daemon exited early with {0}")]
    DaemonExitedEarly(std::process::ExitStatus),
    #[error("the daemon did not stop within 15 s of SIGTERM; killed it")]
    DaemonHung,
    #[error("the daemon exited with {0}")]
    DaemonFailed(std::process::ExitStatus),
    #[error("watching the daemon: {0}")]
    DaemonIo(#[source] std::io::Error),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing the plot: {0}")]
    Plot(#[from] precise_ttl_bench::PlotError),
    #[error("a background task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

impl BenchError {
    pub(crate) fn call(what: &'static str, e: impl std::fmt::Display) -> Self {
        BenchError::Call {
            what,
            message: e.to_string(),
        }
    }
}
