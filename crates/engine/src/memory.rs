//! An in-memory [`ExpiryStore`]: the reference model the engine is tested against, with
//! scripted faults.
//!
//! It follows the same rules as the DynamoDB adapter: the index holds only items with a shard
//! and a Number TTL, and a delete succeeds only if the stored TTL is still inside the window.

use crate::store::{
    DeleteOutcome, DueItem, DuePage, DuePageOf, DueQueryOf, ExpiryStore, StoreError,
};
use precise_ttl_core::{DueWindow, ErrorClass, Expiry, Shard};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// A stored TTL, in any of the shapes a careless writer may leave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemTtl {
    Number(String),
    /// Any non-Number type, named as DynamoDB names it (`"S"`, `"B"`, ...).
    Other(&'static str),
    Missing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemItem {
    pub ttl: MemTtl,
    pub shard: Option<u16>,
}

impl MemItem {
    /// The expiry the index holds for this item: only items with a shard and a Number TTL are
    /// in the (sparse) index.
    pub fn indexed_expiry(&self) -> Option<Expiry> {
        match (&self.ttl, self.shard) {
            (MemTtl::Number(n), Some(_)) => Expiry::parse_number(n).ok(),
            _ => None,
        }
    }

    /// The delete's condition: the stored TTL is a Number inside `window`.
    pub fn is_due(&self, window: DueWindow) -> bool {
        matches!(&self.ttl, MemTtl::Number(n)
            if Expiry::parse_number(n).is_ok_and(|e| window.contains(e.at())))
    }
}

/// The page of the first `limit` entries of `due`, which runs in (expiry, key) order, its cursor
/// the last entry returned when more remain: the paging rule of both in-memory stores.
pub(crate) fn ordered_page<'a>(
    due: impl IntoIterator<Item = (Expiry, &'a String)>,
    limit: u32,
) -> DuePage<String, (Expiry, String)> {
    let limit = limit as usize;
    let mut due: Vec<(Expiry, &String)> = due.into_iter().take(limit + 1).collect();
    let more = due.len() > limit;
    due.truncate(limit);
    let next = if more {
        due.last().map(|(e, k)| (*e, (*k).clone()))
    } else {
        None
    };
    DuePage {
        items: due
            .into_iter()
            .map(|(expiry, k)| DueItem {
                key: k.clone(),
                expiry,
            })
            .collect(),
        next,
    }
}

/// Which call a scripted fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Query,
    Delete,
}

#[derive(Debug, Default)]
pub struct MemoryStore {
    items: Mutex<BTreeMap<String, MemItem>>,
    faults: Mutex<VecDeque<(Call, ErrorClass)>>,
    calls: Mutex<Vec<Call>>,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn put(&self, key: impl Into<String>, item: MemItem) {
        self.items.lock().unwrap().insert(key.into(), item);
    }

    pub fn get(&self, key: &str) -> Option<MemItem> {
        self.items.lock().unwrap().get(key).cloned()
    }

    pub fn len(&self) -> usize {
        self.items.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next calls of kind `call` fail with `class`, in order, one fault per call.
    pub fn inject(&self, call: Call, class: ErrorClass, times: usize) {
        let mut f = self.faults.lock().unwrap();
        f.extend(std::iter::repeat_n((call, class), times));
    }

    pub fn calls(&self, call: Call) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| **c == call)
            .count()
    }

    fn fault(&self, call: Call) -> Result<(), StoreError> {
        self.calls.lock().unwrap().push(call);
        let mut f = self.faults.lock().unwrap();
        if let Some(pos) = f.iter().position(|(c, _)| *c == call) {
            let (_, class) = f.remove(pos).expect("position is valid");
            return Err(StoreError::new(class, format!("injected {class:?}")));
        }
        Ok(())
    }
}

impl ExpiryStore for MemoryStore {
    type Key = String;
    /// The last (expiry, key) returned.
    type Cursor = (Expiry, String);
    type Partition = Shard;

    async fn due_page(&self, query: DueQueryOf<'_, Self>) -> Result<DuePageOf<Self>, StoreError> {
        self.fault(Call::Query)?;
        let cursor = query.cursor.as_ref();
        let items = self.items.lock().unwrap();
        let mut due: Vec<(Expiry, &String)> = items
            .iter()
            .filter(|(_, i)| i.shard == Some(query.partition.0))
            .filter_map(|(k, i)| i.indexed_expiry().map(|e| (e, k)))
            .filter(|(e, _)| query.window.contains(e.at()))
            .filter(|(e, k)| cursor.is_none_or(|(ce, ck)| (e, *k) > (ce, ck)))
            .collect();
        due.sort();
        Ok(ordered_page(due, query.limit))
    }

    async fn delete_if_due(
        &self,
        key: &String,
        window: DueWindow,
    ) -> Result<DeleteOutcome, StoreError> {
        self.fault(Call::Delete)?;
        let mut items = self.items.lock().unwrap();
        let due = items.get(key).is_some_and(|i| i.is_due(window));
        if due {
            items.remove(key);
            Ok(DeleteOutcome::Deleted)
        } else {
            Ok(DeleteOutcome::NotDue)
        }
    }
}
