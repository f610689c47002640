//! The error of the operator tools that make both kinds of call: the adapter's own (a table, an
//! index, a stream not as expected) and the store's (a Query or Scan that failed).

use precise_ttl_dynamodb::AdapterError;
use precise_ttl_engine::StoreError;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum OpsError {
    #[error(transparent)]
    Adapter(#[from] AdapterError),
    #[error(transparent)]
    Store(#[from] StoreError),
}
