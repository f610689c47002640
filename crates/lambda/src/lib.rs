//! precise-ttl as an AWS Lambda function.
//!
//! Each invocation runs the same daemon as `precise-ttl run` (read-ahead timers, backlog, rate
//! cap, conditional deletes, shard leases) until the invocation's deadline minus a safety margin,
//! drains, releases its leases and returns an [`InvocationReport`]. Consecutive scheduled
//! invocations overlap by a few seconds; the incoming one takes the shards the outgoing one
//! releases (or both delete safely: every delete is conditional).
//!
//! The same function answers DynamoDB Streams batches of the table: with the stream-queue layout
//! it writes their queue entries ([`index_event`]), otherwise it returns their expiry records
//! ([`stream_event`]); [`config::StreamRole`] says which.
//!
//! The library never prints: `main` writes the report's metrics ([`emf`]) and logs.

pub mod config;
pub mod emf;
pub mod event;
pub mod index_event;
pub mod invoke;
pub mod stream_event;
#[cfg(test)]
mod stream_record;
mod sweep;

pub use config::{ConfigError, LambdaConfig};
pub use invoke::{Environment, InvocationReport, InvokeError};
