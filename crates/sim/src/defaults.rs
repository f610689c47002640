//! The simulator's default settings, in one place: [`SimConfig::default`](crate::SimConfig) and
//! [`Latency::default`](crate::Latency) are built from them, and the flags of the
//! `precise-ttl-sim` binary and of `precise-ttl bench --simulated` default to them, so the
//! simulator a person starts by hand is the one the benchmarks measure.
//!
//! The model is DynamoDB on demand as AWS documents it: 1,000 write and 3,000 read units a second
//! per partition, 40,000 of each per table (the default table limit), and a call time of a few
//! milliseconds.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// Where the simulator listens: loopback only (it has no authentication).
pub const HOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Median time of a call.
pub const LATENCY_P50: Duration = Duration::from_millis(4);
/// 99th percentile time of a call (log-normal between the two).
pub const LATENCY_P99: Duration = Duration::from_millis(15);
/// Where in a call's time it commits: half way, as a request reaches the service about half way
/// through its round trip.
pub const COMMIT_POINT: f64 = 0.5;
/// Partitions of every table.
pub const TABLE_PARTITIONS: usize = 40;
/// Write units a second of one partition (of a table or of an index).
pub const PARTITION_WCU: f64 = 1000.0;
/// Read units a second of one partition (of a table or of an index).
pub const PARTITION_RCU: f64 = 3000.0;
/// Write units a second of a whole on-demand table (and of each of its indexes).
pub const TABLE_WCU: f64 = 40_000.0;
/// Read units a second of a whole on-demand table (and of each of its indexes).
pub const TABLE_RCU: f64 = 40_000.0;
/// Unused capacity a bucket keeps, in seconds of its rate. DynamoDB does not publish a
/// partition's burst credit; a tenth of a second keeps a partition's admissions close to its rate
/// (a whole second would let a partition take twice its rate for a second after any pause), and
/// it is the model the benchmarks are reported against.
pub const BURST_SECONDS: f64 = 0.1;
/// Runtime threads serving requests: one, so the simulator's CPU stays off the cores of what it
/// measures.
pub const THREADS: usize = 1;
/// Seed of the latency draws.
pub const SEED: u64 = 1;
