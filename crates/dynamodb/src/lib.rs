//! The engine's adapter for DynamoDB: the [`ExpiryStore`](precise_ttl_engine::ExpiryStore) on the
//! AWS SDK, connecting, the store's clock, the table's shape, the lease and checkpoint tables, and
//! the expiry record its deletes capture. The stream side is `precise-ttl-stream`; the operator
//! tools (`setup`, `status`, `backfill`) are `precise-ttl-ops`.
//!
//! AWS vocabulary (AttributeValue, GSI, ConditionExpression) stays inside this crate and the two
//! above it (`stream`, `ops`); what they hand upward is expressed in the domain types of
//! `precise-ttl-core` and the engine.

pub mod blog;
pub mod bulk;
pub mod capture;
pub mod checkpoint;
pub mod connect;
pub mod control;
pub mod count;
pub mod error;
pub mod item;
pub mod lease;
pub mod reach;
pub mod record;
pub mod store;
pub mod store_clock;
pub mod table;

pub use blog::{BlogError, BlogOptions, BlogWindows};
pub use checkpoint::CheckpointTable;
pub use connect::{ConnectOptions, Dynamo};
pub use error::AdapterError;
pub use item::ItemKey;
pub use lease::{DEFAULT_LEASE_TABLE, LeaseTable, StoredLease, create_lease_table};
pub use store::{DeleteMode, DynamoStore, IndexPartition};
pub use table::TableShape;
