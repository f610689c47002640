//! The benchmark driver of precise-ttl: measures precision from outside the sweeper.
//!
//! [`run`] plants items with known TTLs (plus items that must survive) in a fresh table, runs
//! `precise-ttl run` as a child process the way users run it, watches the table's stream for
//! REMOVE records, scans the table at the end, and hands that event log to `precise-ttl-bench`
//! for the report. In the same run it measures the store's raw conditional-delete rate, so
//! throughput is a fraction of what this machine's store can do.
//!
//! The library never prints: progress goes to a [`Progress`], results come back as a
//! [`BenchRun`] the caller renders or writes with [`BenchRun::write_files`]. Every attribute
//! name (partition key, TTL, shard) comes from the [`BenchConfig`]; [`cli`] holds the flags of
//! `precise-ttl bench` that make one.
//!
//! The harness depends on the product, never the reverse: `precise-ttl` links this crate only
//! when built with its `bench` feature.

pub mod app;
pub mod beside;
pub mod cli;
pub mod config;
pub mod crash_loop;
pub mod daemon;
pub mod entry_probe;
pub mod error;
pub mod fleet;
pub mod items;
pub mod lambda;
pub mod lambda_run;
pub mod load;
pub mod observe;
pub mod plan;
pub mod progress;
pub mod raw;
pub mod report;
pub mod revision;
pub mod run;
pub mod simulated;
pub mod usage;

pub use config::{BenchConfig, BenchIndex, DaemonCommand, Provisioned};
pub use crash_loop::KillEvery;
pub use error::BenchError;
pub use fleet::{FleetEvent, FleetPlan, FleetReport};
pub use items::ItemWriter;
pub use lambda::{Function, InvocationRecord, LocalLambda};
pub use lambda_run::{LambdaPlan, LambdaReport};
// The Lambda's tests load their tables with it through this crate.
pub use precise_ttl_dynamodb::bulk::put_all;
pub use progress::{Event, NoProgress, Progress};
pub use raw::RawRates;
pub use report::{BenchRun, Summary};
pub use revision::Revision;
pub use run::run;
pub use simulated::run_simulated;
