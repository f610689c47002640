//! precise-ttl's operator tools on DynamoDB: `setup` (the expiry index, native TTL, capacity
//! planning), `status` (what the index or the queue says is due), `backfill` (shards for items
//! written before adoption), the whole-table `scan` they and `doctor` read with, and the expiry
//! queue's counterparts (`queue`), `doctor`'s examination of a table, `demo`'s scenario, and a
//! running worker's `/metrics` and `/healthz`: serving them (`serve`) and asking them (`probe`).
//!
//! They compute and return data; the binaries print it. Below: the engine's adapter
//! (`precise-ttl-dynamodb`) and the stream side (`precise-ttl-stream`).

pub mod backfill;
pub mod demo;
pub mod doctor;
pub mod error;
pub mod probe;
pub mod queue;
pub mod scan;
pub mod serve;
pub mod setup;
pub mod status;
pub mod table_status;

pub use scan::{ScanFilter, ScanPage, ScannedItem, Segment, ShardWrite, TableScan};
pub use setup::{CreateTable, KeyAttribute, KeyType, SetupAction, SetupOptions, SetupReport};
