//! What admission takes and gives: its settings, its decisions, the answers it is fed and the
//! snapshot it shows.

use super::Class;
use crate::throttle::ThrottleScope;
use crate::time::Timestamp;
use std::time::Duration;

/// Admission's settings (the engine maps its configuration onto them).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Items per request at most (capped by the store's batch size).
    pub max_batch: usize,
    /// How long the first on-time item may wait for others to share its request.
    pub linger: Duration,
    /// Items read ahead held at most.
    pub max_held: usize,
    /// Requests in flight: the floor, the start and the ceiling of the table-wide limit.
    pub min_concurrency: usize,
    pub initial_concurrency: usize,
    pub max_concurrency: usize,
    /// The floor of the backlog items in flight.
    pub min_backlog_in_flight: usize,
    /// A hard cap on items sent per second.
    pub max_per_second: Option<f64>,
    /// The most backlog items sent per second ([`budget::BacklogBudget`]); `None`: no budget.
    pub backlog_ceiling: Option<f64>,
}

/// The next thing to do.
#[derive(Debug, PartialEq)]
pub enum Decision<T> {
    /// Send these items in one request (all of one class).
    Send { items: Vec<T>, class: Class },
    /// Nothing to send before `until` (`None`: only an event can change that: an answer, an
    /// item arriving).
    Wait { until: Option<Timestamp> },
}

/// An item of an answered request that goes again.
#[derive(Debug)]
pub struct Again<T> {
    pub item: T,
    /// Its backoff.
    pub after: Duration,
    /// The throttle's scope if it was refused; `None`: another retryable failure.
    pub refused: Option<ThrottleScope>,
}

/// An answered request.
#[derive(Debug)]
pub struct Answer<T> {
    pub class: Class,
    /// Items the request carried.
    pub items: usize,
    /// The lanes of the items it settled (deleted, not due, or failed for good), one per item.
    pub settled_lanes: Vec<usize>,
    /// Items to send again.
    pub again: Vec<Again<T>>,
    /// A failure said the store is saturated (a timeout, a 5xx).
    pub congested: bool,
}

/// What admission is doing, for `/metrics` and `status`.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The table-wide limit of requests in flight.
    pub concurrency_limit: usize,
    pub in_flight: usize,
    /// The table-wide send rate (items/s), when whole-table or whole-index refusals engage it.
    pub table_rate: Option<f64>,
    /// The rate retries go at (items/s), when table partitions' refusals engage it.
    pub retry_rate: Option<f64>,
    /// Lanes under a limit of their own, with it (items/s).
    pub limited_lanes: Vec<(usize, f64)>,
    /// Refusals so far, by scope.
    pub refusals: Vec<(ThrottleScope, u64)>,
    /// The backlog's send rate and its ceiling (items/s), when budgeted.
    pub backlog_rate: Option<f64>,
    pub backlog_ceiling: Option<f64>,
}
