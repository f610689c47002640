//! Pure analysis of a precise-ttl benchmark run.
//!
//! The benchmark driver (`precise-ttl-bench-driver`) plants items with known TTLs, runs the
//! sweeper, watches the table's DynamoDB Stream for REMOVE records and scans the table at the end.
//! This crate owns what happens after: it turns that event log ([`Inputs`]) into a [`Report`] —
//! deletion lag percentiles, wrong deletions, items left behind, throughput, backlog catch-up — and
//! renders it as Markdown, JSON or an SVG plot. Nothing here reads a clock or the network; the
//! only I/O is [`write_plot`], which writes the file it is asked to.

pub mod analyze;
pub mod app;
pub mod behind;
pub mod bound;
pub mod input;
mod lag_stats;
pub mod markdown;
pub mod plot;
pub mod shards;

pub use analyze::{
    BacklogStats, Counts, HistBucket, LEFT_BEHIND_LISTED, LagPoint, LagStats, LeftBehind, Ramp,
    Report, RunInfo, SecondStats, Throughput, WrongDeletion, WrongKind, analyze,
};
pub use app::{AppAttempt, AppLoad, AppOutcome, AppReport, AppWindow, app_report};
pub use behind::{BEHIND_AFTER_MS, Behind};
pub use bound::{
    AppWrite, Backlog, Bound, Expiring, PartitionLimit, PerfectSweep, StoreCapacity, bound,
    bound_of_lags, perfect_lags_by_item, perfect_lags_by_item_with_writes, perfect_lags_of,
    perfect_lags_with_writes, perfect_sweep_by_item,
};
pub use input::{Expectation, Inputs, Planted, Removal};
pub use plot::{PlotError, write_plot};
pub use shards::ShardGroup;
