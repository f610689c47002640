//! precise-ttl as an AWS Lambda function.
//!
//! Each invocation runs the same daemon as `precise-ttl run` (read-ahead timers, backlog, rate
//! cap, conditional deletes, shard leases) until the invocation's deadline minus a safety margin,
//! drains, releases its leases and returns an [`InvocationReport`]. Consecutive scheduled
//! invocations overlap by a few seconds; the incoming one takes the shards the outgoing one
//! releases (or both delete safely: every delete is conditional).
//!
//! The library never prints: `main` writes the report's metrics ([`emf`]) and logs.

pub mod config;
pub mod emf;
pub mod event;
pub mod invoke;
pub mod stream_event;

pub use config::{ConfigError, LambdaConfig};
pub use invoke::{Environment, InvocationReport, InvokeError};
