//! The DynamoDB side of precise-ttl: the engine's [`ExpiryStore`](precise_ttl_engine::ExpiryStore)
//! on the AWS SDK, table inspection and `setup`, and a launcher for DynamoDB Local.
//!
//! AWS vocabulary (AttributeValue, GSI, ConditionExpression) stays inside this crate; what it
//! hands upward is expressed in the domain types of `precise-ttl-core` and the engine.

pub mod archive_stream;
pub mod backfill;
pub mod blog;
pub mod bulk;
pub mod capture;
pub mod checkpoint;
pub mod connect;
pub mod control;
pub mod error;
pub mod item;
pub mod lease;
pub mod queue;
pub mod record;
pub mod scan;
pub mod setup;
pub mod status;
pub mod store;
pub mod store_clock;
pub mod stream;
pub mod stream_tail;
pub mod table;

pub use blog::{BlogError, BlogOptions, BlogWindows};
pub use checkpoint::CheckpointTable;
pub use connect::{ConnectOptions, Dynamo};
pub use error::AdapterError;
pub use item::ItemKey;
pub use lease::{DEFAULT_LEASE_TABLE, LeaseTable, StoredLease, create_lease_table};
pub use scan::{ScanFilter, ScanPage, ScannedItem, Segment, ShardWrite, TableScan};
pub use setup::{CreateTable, KeyAttribute, KeyType, SetupAction, SetupOptions, SetupReport};
pub use store::{DeleteMode, DynamoStore, IndexPartition};
pub use table::TableShape;
