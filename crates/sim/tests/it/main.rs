//! The simulator's integration tests, one binary: driven call by call by the real
//! `aws-sdk-dynamodb` client (`tables`, `writes`, `capacity`), on raw HTTP (`http`), and by
//! precise-ttl's own adapter and engine (`engine`); `support` holds what they share.

mod capacity;
mod engine;
mod http;
mod support;
mod tables;
mod writes;
