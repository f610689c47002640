//! The DynamoDB Streams side of precise-ttl: reading a table's stream (`stream`), tailing it
//! across its shards with checkpoints (`stream_tail`), and the tail's consumers: the archiver of
//! expiry records (`archive_stream`) and the expiry queue (`queue`: the queue table, its
//! `ExpiryStore`, the indexer that fills it from the stream, and its inspection).
//!
//! Below it the engine's adapter (`precise-ttl-dynamodb`); above it the operator tools
//! (`precise-ttl-ops`) and the binaries.

pub mod archive_stream;
pub mod queue;
pub mod stream;
pub mod stream_tail;
