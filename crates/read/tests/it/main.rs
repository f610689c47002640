//! `HideExpired` and `ShowExpired` against DynamoDB Local (native TTL off there, so expired items
//! stay until read): every read operation, pagination, counts, projections, the caller's own
//! expressions, switching off per call, errors, and the write condition that treats an expired
//! item as absent.

mod by_key;
mod partiql;
mod query_scan;
mod support;
mod switch_off;
