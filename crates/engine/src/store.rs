//! The boundary between the engine and a database: two calls, typed outcomes, classified errors.

use precise_ttl_core::{DueWindow, ErrorClass, Expiry, ThrottleScope};
use std::fmt;
use std::future::Future;
use thiserror::Error;

/// An item the index reported as due, with the expiry the index held for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueItem<K> {
    pub key: K,
    pub expiry: Expiry,
}

/// One call of [`ExpiryStore::due_page`]: the partition read, the expiries wanted, where to
/// continue and how many at most. The four always travel together, from the daemon's readers and
/// probes to each store, and a store that wraps another passes the query on as it came.
#[derive(Debug, Clone)]
pub struct DueQuery<'a, P, C> {
    /// One partition key value of the expiry index.
    pub partition: &'a P,
    /// The expiries wanted, bounds included.
    pub window: DueWindow,
    /// Where the previous page ended (`None`: from the oldest).
    pub cursor: Option<C>,
    /// The most items the page holds.
    pub limit: u32,
}

impl<'a, P, C> DueQuery<'a, P, C> {
    /// The first page of `partition`'s items in `window`, at most `limit`.
    pub fn first(partition: &'a P, window: DueWindow, limit: u32) -> Self {
        DueQuery {
            partition,
            window,
            cursor: None,
            limit,
        }
    }

    /// Whether `partition` holds any item in `window`: the first page of one item.
    pub fn probe(partition: &'a P, window: DueWindow) -> Self {
        DueQuery::first(partition, window, 1)
    }
}

/// The [`DueQuery`] that store `S` answers.
pub type DueQueryOf<'a, S> =
    DueQuery<'a, <S as ExpiryStore>::Partition, <S as ExpiryStore>::Cursor>;

/// One page of due items, oldest first, and where to continue.
#[derive(Debug, Clone)]
pub struct DuePage<K, C> {
    pub items: Vec<DueItem<K>>,
    pub next: Option<C>,
}

impl<K, C> DuePage<K, C> {
    /// No items, and nothing after them.
    pub fn empty() -> Self {
        DuePage {
            items: Vec::new(),
            next: None,
        }
    }
}

/// The [`DuePage`] that store `S` answers with.
pub type DuePageOf<S> = DuePage<<S as ExpiryStore>::Key, <S as ExpiryStore>::Cursor>;

/// What a conditional delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    /// The stored item was no longer due (TTL extended, removed, changed type) or was gone.
    NotDue,
}

/// A failed store call, classified so the engine can decide to retry, slow down or stop.
#[derive(Debug, Error)]
#[error("{message}")]
pub struct StoreError {
    pub class: ErrorClass,
    /// For a throttle, what refused it (`None` for other classes).
    pub throttle: Option<ThrottleScope>,
    pub message: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        StoreError {
            class,
            throttle: (class == ErrorClass::Throttled).then_some(ThrottleScope::Unknown),
            message: message.into(),
            source: None,
        }
    }

    /// A throttle of `scope`.
    pub fn throttled(scope: ThrottleScope, message: impl Into<String>) -> Self {
        StoreError {
            throttle: Some(scope),
            ..StoreError::new(ErrorClass::Throttled, message)
        }
    }

    /// The same error, its throttle scope set (ignored unless it is a throttle).
    pub fn with_throttle_scope(mut self, scope: ThrottleScope) -> Self {
        if self.class == ErrorClass::Throttled {
            self.throttle = Some(scope);
        }
        self
    }

    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }
}

/// A table that keeps items with an expiry, indexed by (partition, expiry): a partition is a
/// shard value in our layout, a window label in the 2022 blog's (see [`crate::partition`]).
///
/// Implementations must never delete an item whose stored expiry is outside the window passed to
/// [`ExpiryStore::delete_if_due`] at the moment of the delete: the index may be stale.
pub trait ExpiryStore: Send + Sync + 'static {
    /// Identifies one item (the table's primary key).
    type Key: Clone + Eq + std::hash::Hash + Send + Sync + fmt::Debug + 'static;
    /// Where a paged query continues.
    type Cursor: Clone + Send + Sync + fmt::Debug + 'static;
    /// One partition key value of the expiry index.
    type Partition: Clone + Send + Sync + fmt::Debug + fmt::Display + 'static;

    /// Items of `query.partition` whose indexed expiry lies in `query.window`, oldest first, from
    /// `query.cursor` on, at most `query.limit`.
    fn due_page(
        &self,
        query: DueQueryOf<'_, Self>,
    ) -> impl Future<Output = Result<DuePageOf<Self>, StoreError>> + Send;

    /// Deletes the item if, at the store, its expiry is a Number inside `window`.
    fn delete_if_due(
        &self,
        key: &Self::Key,
        window: DueWindow,
    ) -> impl Future<Output = Result<DeleteOutcome, StoreError>> + Send;

    /// Deletes several items, each under the same condition as [`ExpiryStore::delete_if_due`],
    /// with one outcome per key, in order. Stores without a batch call delete one by one.
    fn delete_many_if_due(
        &self,
        keys: &[Self::Key],
        window: DueWindow,
    ) -> impl Future<Output = Vec<Result<DeleteOutcome, StoreError>>> + Send {
        async move {
            let mut out = Vec::with_capacity(keys.len());
            for key in keys {
                out.push(self.delete_if_due(key, window).await);
            }
            out
        }
    }

    /// The most keys [`ExpiryStore::delete_many_if_due`] takes in one call.
    fn max_batch(&self) -> usize {
        1
    }
}
