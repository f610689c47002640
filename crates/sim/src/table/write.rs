//! The planning of one write: which partitions of the table and its indexes it touches and
//! what it costs on each ([`WritePlan`]), whether their buckets admit it, and then charging the
//! units, committing the row and moving its index entries.

use super::{IndexSlot, MAX_ITEM_BYTES, Projection, RowKey, Table};
use crate::capacity::{Usage, write_units};
use crate::error::{DbError, Throttle};
use crate::value::{Item, KeyValue};
use std::time::Instant;

impl Table {
    /// Checks a new item's size and index key types.
    pub fn check_item(&self, item: &Item, key: &RowKey) -> Result<(), DbError> {
        if item.size() > MAX_ITEM_BYTES {
            return Err(DbError::validation(
                "Item size has exceeded the maximum allowed size",
            ));
        }
        for index in &self.indexes {
            index.slot(item, key)?;
        }
        Ok(())
    }

    /// What writing `new` over `old` at `key` touches and costs. `effective` is false for a
    /// write whose condition failed: it costs the table's write units and changes nothing.
    pub fn plan(
        &self,
        key: RowKey,
        old: Option<&Item>,
        new: Option<&Item>,
        effective: bool,
    ) -> Result<WritePlan, DbError> {
        let size = old.map_or(0, Item::size).max(new.map_or(0, Item::size));
        let partition = self.partition_of(key.hash);
        let mut plan = WritePlan {
            partition,
            base_units: write_units(size),
            index: Vec::new(),
            key,
        };
        if !effective {
            return Ok(plan);
        }
        for (i, index) in self.indexes.iter().enumerate() {
            let old_slot = match old {
                Some(o) => index.slot(o, &plan.key).ok().flatten(),
                None => None,
            };
            let new_slot = match new {
                Some(n) => index.slot(n, &plan.key)?,
                None => None,
            };
            let mut charges = Vec::new();
            match (&old_slot, &new_slot, old, new) {
                (Some(o), Some(n), Some(old_item), Some(new_item)) if o == n => {
                    // Same place in the index: only a projection that carries other attributes
                    // needs rewriting, and only if they changed.
                    let changed = match &index.projection {
                        Projection::KeysOnly => false,
                        Projection::All => old_item != new_item,
                        Projection::Include(_) => {
                            index.project(self, o, Some(old_item))
                                != index.project(self, n, Some(new_item))
                        }
                    };
                    if changed {
                        charges.push((
                            n.0.clone(),
                            write_units(index.entry_size(self, n, new_item)),
                        ));
                    }
                }
                _ => {
                    if let (Some(o), Some(old_item)) = (&old_slot, old) {
                        charges.push((
                            o.0.clone(),
                            write_units(index.entry_size(self, o, old_item)),
                        ));
                    }
                    if let (Some(n), Some(new_item)) = (&new_slot, new) {
                        charges.push((
                            n.0.clone(),
                            write_units(index.entry_size(self, n, new_item)),
                        ));
                    }
                }
            }
            if old_slot.is_some() || new_slot.is_some() || !charges.is_empty() {
                plan.index.push(IndexChange {
                    index: i,
                    old: old_slot,
                    new: new_slot,
                    charges,
                });
            }
        }
        Ok(plan)
    }

    /// Whether every bucket the plan touches has room; the first one that has none says why not.
    pub fn admit(&mut self, plan: &WritePlan, now: Instant) -> Result<(), Throttle> {
        let billing = self.billing;
        if !self.partitions[plan.partition]
            .write
            .admits(Some(plan.base_units), now)
        {
            return Err(billing.throttle(
                "Table",
                "Write",
                "KeyRangeThroughputExceeded",
                &self.arn,
            ));
        }
        if !self.total_write.admits(Some(plan.base_units), now) {
            return Err(billing.throttle("Table", "Write", billing.limit_reason(), &self.arn));
        }
        for change in &plan.index {
            let index = &mut self.indexes[change.index];
            let mut total = 0.0;
            for (value, units) in &change.charges {
                total += units;
                if !index.partition(value, now).write.admits(Some(*units), now) {
                    return Err(billing.throttle(
                        "Index",
                        "Write",
                        "KeyRangeThroughputExceeded",
                        &index.arn,
                    ));
                }
            }
            if !index.total_write.admits(Some(total), now) {
                return Err(billing.throttle("Index", "Write", billing.limit_reason(), &index.arn));
            }
        }
        Ok(())
    }

    /// Records a refused write against the table or index it names.
    pub fn count_throttle(&mut self, throttle: &Throttle, write: bool) {
        let usage_of = |u: &mut Usage| {
            if write {
                u.throttled_writes += 1;
            } else {
                u.throttled_reads += 1;
            }
        };
        match self.indexes.iter_mut().find(|i| i.arn == throttle.resource) {
            Some(index) => {
                usage_of(&mut index.usage);
                *index.throttles.entry(throttle.reason.clone()).or_default() += 1;
            }
            None => {
                usage_of(&mut self.usage);
                *self.throttles.entry(throttle.reason.clone()).or_default() += 1;
            }
        }
    }

    /// Takes the plan's units from its buckets and tallies them; returns the units for the
    /// table and for each index touched.
    pub fn charge(&mut self, plan: &WritePlan) -> Charged {
        self.partitions[plan.partition].write.take(plan.base_units);
        self.total_write.take(plan.base_units);
        self.usage.write_units += plan.base_units;
        self.partition_usage[plan.partition].write_units += plan.base_units;
        let mut charged = Charged {
            table: plan.base_units,
            indexes: Vec::new(),
        };
        for change in &plan.index {
            let index = &mut self.indexes[change.index];
            let mut total = 0.0;
            for (value, units) in &change.charges {
                if let Some(p) = index.partitions.get_mut(value) {
                    p.write.take(*units);
                }
                match index.partition_usage.get_mut(value) {
                    Some(usage) => usage.write_units += units,
                    None => {
                        let usage = Usage {
                            write_units: *units,
                            ..Usage::default()
                        };
                        index.partition_usage.insert(value.clone(), usage);
                    }
                }
                total += units;
            }
            index.total_write.take(total);
            index.usage.write_units += total;
            if total > 0.0 {
                charged.indexes.push((change.index, total));
            }
        }
        charged
    }

    /// Applies the plan: stores `new` (or removes the row) and moves the index entries.
    /// Returns the old item.
    pub fn commit(&mut self, mut plan: WritePlan, new: Option<Item>) -> Option<Item> {
        self.commit_indexes(&mut plan);
        match new {
            Some(mut item) => {
                item.intern(|name| match self.names.get(name) {
                    Some(shared) => shared.clone(),
                    None => {
                        self.names.insert(name.clone());
                        name.clone()
                    }
                });
                self.rows.insert(plan.key, item)
            }
            None => {
                let old = self.rows.remove(&plan.key);
                if old.is_some() {
                    self.deletes += 1;
                }
                old
            }
        }
    }

    /// Moves the plan's index entries (the row itself is the caller's).
    pub fn commit_indexes(&mut self, plan: &mut WritePlan) {
        for change in plan.index.drain(..) {
            let index = &mut self.indexes[change.index];
            if change.old != change.new {
                if let Some(old) = &change.old {
                    index.remove(old);
                }
                if let Some(new) = change.new {
                    index.insert(new);
                }
            }
        }
    }

    /// Stores an item without capacity, latency or conditions (the planting fast path).
    pub fn plant(&mut self, item: Item) -> Result<(), DbError> {
        let key = self.item_key(&item)?;
        self.check_item(&item, &key)?;
        let old = self.rows.get(&key);
        let plan = self.plan(key, old, Some(&item), true)?;
        self.commit(plan, Some(item));
        Ok(())
    }
}

/// A write's footprint.
#[derive(Debug)]
pub struct WritePlan {
    pub key: RowKey,
    pub partition: usize,
    pub base_units: f64,
    pub index: Vec<IndexChange>,
}

/// What one write does to one index.
#[derive(Debug)]
pub struct IndexChange {
    pub index: usize,
    pub old: Option<IndexSlot>,
    pub new: Option<IndexSlot>,
    /// Write units per index partition.
    pub charges: Vec<(KeyValue, f64)>,
}

/// Units a write took, on the table and per index (by position).
#[derive(Debug, Clone, Default)]
pub struct Charged {
    pub table: f64,
    pub indexes: Vec<(usize, f64)>,
}
