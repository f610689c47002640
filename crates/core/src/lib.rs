//! The pure rules of precise-ttl, shared by every other crate.
//!
//! Nothing here performs I/O or reads a clock: the current time is always an argument. That keeps
//! the rules that decide what may be deleted testable exhaustively, and identical in the daemon,
//! the one-pass sweep, the benchmark and the tests.

pub mod access;
pub mod admission;
pub mod backoff;
pub mod bucket;
pub mod capacity;
pub mod diagnose;
pub mod due_rule;
pub mod duration;
pub mod error;
pub mod expiry;
pub mod layout;
pub mod lease;
pub mod owner;
pub mod plan;
pub mod queue;
pub mod rate;
pub mod read_filter;
pub mod removal;
pub mod shard;
pub mod sizing;
pub mod skew;
pub mod throttle;
pub mod time;
pub mod watermark;
pub mod window;

pub use backoff::Backoff;
pub use duration::{DurationError, parse_duration};
pub use error::ErrorClass;
pub use expiry::{Expiry, ExpiryError, TtlValue, Verdict};
pub use layout::{LayoutError, TtlLayout, WriterAttributes};
pub use plan::DueWindow;
pub use rate::{Aimd, TokenBucket};
pub use read_filter::{FilterValue, ReadFilter, is_expired};
pub use shard::{Shard, ShardCount, ShardCountError};
pub use throttle::ThrottleScope;
pub use time::{NATIVE_TTL_MAX_AGE, Timestamp};
pub use window::{WindowError, WindowFormat, WindowLabel, WindowSpec};
