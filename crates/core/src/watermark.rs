//! The watermark's bookkeeping: which time ranges each lane (a shard, or the blog layout's
//! windows) has read completely, which items are pending, and from those the instant T such that
//! every due item with TTL <= T is known resolved. Also which pending items a later read no longer
//! lists at their expiry (their TTL changed), so that their deletes, bound to fail, are not sent.
//!
//! Pure: the daemon passes its own clock readings in. `I` is the daemon's monotonic instant (it
//! orders a read against the resolution of a key); the tests use integers.

use crate::{Expiry, Timestamp};
use foldhash::fast::RandomState;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{BuildHasher, Hash};

/// What each lane has read completely, for the watermark.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// Everything with TTL ≤ this was read by a completed backlog pass and is resolved or pending.
    pub backlog_bound: Option<Timestamp>,
    /// Head reads have covered `[head_from, head_to]` without a gap.
    pub head_from: Option<Timestamp>,
    pub head_to: Option<Timestamp>,
    /// Bumped by every failed delete; a backlog pass that saw a bump cannot vouch for its range.
    pub error_generation: u64,
}

impl Coverage {
    pub fn head_read(&mut self, from: Timestamp, to: Timestamp) {
        match self.head_to {
            Some(prev) if from <= prev => self.head_to = Some(to.max(prev)),
            _ => {
                self.head_from = Some(from);
                self.head_to = Some(to);
            }
        }
    }

    pub fn covered(&self) -> Option<Timestamp> {
        let bound = self.backlog_bound?;
        Some(match (self.head_from, self.head_to) {
            (Some(from), Some(to)) if from <= bound => bound.max(to),
            _ => bound,
        })
    }

    /// Forgets everything read: the lane was not this worker's for a while (another worker
    /// read and deleted meanwhile), so only new reads may vouch for it. A backlog pass under
    /// way when this happens cannot vouch either.
    pub fn forget(&mut self) {
        *self = Coverage {
            error_generation: self.error_generation + 1,
            ..Coverage::default()
        };
    }

    pub fn failed(&mut self, expiry: Expiry) {
        self.error_generation += 1;
        let below = Timestamp::from_millis(expiry.at().as_millis().saturating_sub(1));
        self.backlog_bound = self.backlog_bound.map(|b| b.min(below));
        // The failed item sits inside head-covered time: that range is no longer gap-free.
        self.head_from = None;
        self.head_to = None;
    }
}

/// Items read and not yet resolved: for de-duplication between readers and for the watermark.
///
/// At tens of thousands of deletes a second this is touched several times per item (every read
/// of a near window lists pending items again), so it is built for that: a fast seeded hash
/// (`foldhash`), and resolved keys remembered by their 64-bit hash only. A collision can only
/// make a read refuse an item that another key's resolution shadows; the next read sent after
/// that resolution admits it, so it costs one poll, never a wrong delete.
#[derive(Debug)]
pub struct Pending<K, I> {
    hasher: RandomState,
    keys: HashMap<K, (usize, Expiry), RandomState>,
    /// Hashes of keys resolved recently, with when, oldest first in `resolved_order`.
    resolved: HashMap<u64, I, RandomState>,
    resolved_order: VecDeque<(I, u64)>,
    /// Per lane, a multiset of pending expiries.
    expiries: Vec<BTreeMap<Expiry, usize>>,
    /// Per lane, each pending item by expiry and key hash, with the number of the last read
    /// that listed it there (the one that admitted it, at first), for
    /// [`Pending::withdraw_unlisted`].
    listings: Vec<BTreeMap<(Expiry, u64), u64>>,
    /// Hashes of pending keys the index no longer lists at their expiry: not to be deleted.
    withdrawn: HashSet<u64, RandomState>,
    pub coverage: Vec<Coverage>,
}

/// One read of the index: when it was sent (the daemon's monotonic instant) and its number.
/// Head reads are numbered from 1 in the order they are sent; 0 is for reads that never
/// withdraw anything (the backlog's, a pass's), whose items count as listed before any head read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Read<I> {
    pub at: I,
    pub seq: u64,
}

impl<K: Eq + Hash + Clone, I: Ord + Copy> Pending<K, I> {
    pub fn new(lanes: usize) -> Self {
        Pending {
            hasher: RandomState::default(),
            keys: HashMap::default(),
            resolved: HashMap::default(),
            resolved_order: VecDeque::new(),
            expiries: vec![BTreeMap::new(); lanes],
            listings: vec![BTreeMap::new(); lanes],
            withdrawn: HashSet::default(),
            coverage: vec![Coverage::default(); lanes],
        }
    }

    /// Records an item, from a read sent at `read_at`, as pending; false if it already was, or
    /// was resolved after that read was sent.
    pub fn admit(&mut self, lane: usize, key: &K, expiry: Expiry, read_at: I) -> bool {
        self.admit_listed(
            lane,
            key,
            expiry,
            Read {
                at: read_at,
                seq: 0,
            },
        )
    }

    /// As [`Pending::admit`], and a pending item listed again at the same expiry remembers that
    /// `read` listed it.
    pub fn admit_listed(&mut self, lane: usize, key: &K, expiry: Expiry, read: Read<I>) -> bool {
        let hash = self.hasher.hash_one(key);
        if let Some(&(was_lane, was)) = self.keys.get(key) {
            if was_lane == lane
                && was == expiry
                && let Some(seen) = self.listings[lane].get_mut(&(expiry, hash))
            {
                *seen = (*seen).max(read.seq);
            }
            return false;
        }
        if self.resolved.get(&hash).is_some_and(|t| *t >= read.at) {
            return false;
        }
        self.keys.insert(key.clone(), (lane, expiry));
        *self.expiries[lane].entry(expiry).or_default() += 1;
        self.listings[lane].insert((expiry, hash), read.seq);
        true
    }

    /// After head read number `seq` of `lane` listed every item of the index with an expiry in
    /// `(after, until]`: the pending items of that range admitted by an earlier read (a lower
    /// number) and not listed by this one at their expiry have moved in the index (the
    /// application changed their TTL, or deleted them), and are withdrawn. Returns how many.
    ///
    /// Only items not yet due when the read was sent (`after` no earlier than its `now`): those
    /// wait in admission and have not been sent, so a withdrawn item is simply never sent, and
    /// its conditional delete, bound to fail, costs no write. A withdrawn item that is still due
    /// after all (a stale index replica, a hash collision) is found again by a later read once
    /// the dispatcher resolves it: late, never deleted wrongly.
    pub fn withdraw_unlisted(
        &mut self,
        lane: usize,
        after: Timestamp,
        until: Timestamp,
        seq: u64,
    ) -> usize {
        if after >= until {
            return 0;
        }
        let from = (
            Expiry::at_instant(Timestamp::from_millis(after.as_millis().saturating_add(1))),
            0,
        );
        let to = (Expiry::at_instant(until), u64::MAX);
        let mut n = 0;
        for (&(_, hash), &seen) in self.listings[lane].range(from..=to) {
            if seen < seq && self.withdrawn.insert(hash) {
                n += 1;
            }
        }
        n
    }

    /// Whether `key` was withdrawn ([`Pending::withdraw_unlisted`]); the caller resolves it.
    pub fn is_withdrawn(&self, key: &K) -> bool {
        !self.withdrawn.is_empty() && self.withdrawn.contains(&self.hasher.hash_one(key))
    }

    pub fn resolve(&mut self, key: &K, at: I) {
        let hash = self.hasher.hash_one(key);
        self.resolved.insert(hash, at);
        self.resolved_order.push_back((at, hash));
        self.withdrawn.remove(&hash);
        if let Some((lane, expiry)) = self.keys.remove(key) {
            self.listings[lane].remove(&(expiry, hash));
            let map = &mut self.expiries[lane];
            if let Some(n) = map.get_mut(&expiry) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&expiry);
                }
            }
        }
    }

    pub fn forget_resolved_before(&mut self, before: I) {
        while let Some((at, _)) = self.resolved_order.front() {
            if *at >= before {
                break;
            }
            let (at, hash) = self.resolved_order.pop_front().expect("front exists");
            if self.resolved.get(&hash) == Some(&at) {
                self.resolved.remove(&hash);
            }
        }
    }

    pub fn watermark(&self, lane: usize, now: Timestamp) -> Option<Timestamp> {
        let covered = self.coverage[lane].covered()?.min(now);
        let pending_min = self.expiries[lane].keys().next().map(|e| e.at());
        Some(match pending_min {
            Some(p) if p <= covered => Timestamp::from_millis(p.as_millis().saturating_sub(1)),
            _ => covered,
        })
    }

    /// Pending items due by `now`, and pending items not yet due. Walks only the due ones: the
    /// read-ahead (up to 100 000 items) is counted, not walked, four times a second.
    pub fn due_count(&self, now: Timestamp) -> (u64, u64) {
        let due: usize = self
            .expiries
            .iter()
            .flat_map(|map| map.range(..=Expiry::at_instant(now)).map(|(_, n)| *n))
            .sum();
        (due as u64, (self.keys.len() - due) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_joins_backlog_and_contiguous_head_reads() {
        let t = |s| Timestamp::from_secs(s);
        let mut c = Coverage::default();
        assert_eq!(c.covered(), None);
        c.head_read(t(98), t(100));
        assert_eq!(
            c.covered(),
            None,
            "nothing older is known until a backlog pass completes"
        );
        c.backlog_bound = Some(t(99));
        assert_eq!(c.covered(), Some(t(100)));
        c.head_read(t(99), t(101));
        assert_eq!(c.covered(), Some(t(101)));
        c.head_read(t(105), t(107)); // a gap: 101..105 was never read
        assert_eq!(c.covered(), Some(t(99)));
        c.failed(Expiry::at_instant(t(50)));
        assert_eq!(c.covered(), Some(Timestamp::from_millis(49_999)));
    }

    #[test]
    fn watermark_stops_below_the_oldest_pending_item() {
        let mut p: Pending<&str, u64> = Pending::new(1);
        let t = |s| Timestamp::from_secs(s);
        p.coverage[0].backlog_bound = Some(t(100));
        let expiry = Expiry::at_instant(t(90));
        let read = 10;
        assert!(p.admit(0, &"a", expiry, read));
        assert!(!p.admit(0, &"a", expiry, read), "already pending");
        assert_eq!(p.watermark(0, t(200)), Some(Timestamp::from_millis(89_999)));
        assert_eq!(p.due_count(t(200)), (1, 0));
        assert_eq!(p.due_count(t(89)), (0, 1), "not yet due");
        assert_eq!(p.due_count(t(90)), (1, 0), "due at its instant");
        let resolved = 11;
        p.resolve(&"a", resolved);
        assert_eq!(p.watermark(0, t(200)), Some(t(100)));
        assert!(
            !p.admit(0, &"a", expiry, read),
            "a read sent before the delete may still list it"
        );
        let later = 12;
        assert!(
            p.admit(0, &"a", expiry, later),
            "a read sent after it means the item came back"
        );
        p.resolve(&"a", later);
        p.forget_resolved_before(later + 1);
        assert!(p.resolved.is_empty() && p.resolved_order.is_empty());
        assert_eq!(
            p.watermark(0, t(50)),
            Some(t(50)),
            "never ahead of the clock"
        );
    }

    #[test]
    fn a_near_read_withdraws_pending_items_it_no_longer_lists_at_their_expiry() {
        let mut p: Pending<&str, u64> = Pending::new(2);
        let e = |s| Expiry::at_instant(Timestamp::from_secs(s));
        let first = Read { at: 1, seq: 1 };
        for (key, secs) in [("a", 10), ("b", 11), ("late", 20), ("due", 5)] {
            assert!(p.admit_listed(0, &key, e(secs), first));
        }
        assert!(p.admit_listed(1, &"other lane", e(10), first));
        let second = Read { at: 2, seq: 2 };
        assert!(!p.admit_listed(0, &"a", e(10), second), "still pending");
        assert!(
            !p.admit_listed(0, &"b", e(30), second),
            "b's TTL was extended: listed elsewhere, and still pending at 11 s until withdrawn"
        );
        assert!(p.admit_listed(0, &"new", e(12), second));
        let withdrawn = p.withdraw_unlisted(
            0,
            Timestamp::from_secs(6),
            Timestamp::from_secs(15),
            second.seq,
        );
        assert_eq!(withdrawn, 1);
        assert!(p.is_withdrawn(&"b"));
        for kept in ["a", "new", "late", "due", "other lane"] {
            assert!(!p.is_withdrawn(&kept), "{kept}");
        }
        assert_eq!(
            p.withdraw_unlisted(
                0,
                Timestamp::from_secs(6),
                Timestamp::from_secs(15),
                second.seq
            ),
            0,
            "counted once"
        );
        p.resolve(&"b", 3);
        assert!(!p.is_withdrawn(&"b"));
        assert!(
            p.admit_listed(0, &"b", e(30), Read { at: 4, seq: 3 }),
            "a read sent after its resolution admits it at its new expiry"
        );
        assert_eq!(
            p.withdraw_unlisted(
                0,
                Timestamp::from_secs(15),
                Timestamp::from_secs(15),
                second.seq
            ),
            0,
            "an empty range"
        );
    }

    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::HashMap as Map;

        /// The rules kept by the key itself, without hashing: pending keys, and each key's last
        /// resolution until it is forgotten.
        #[derive(Default)]
        struct Model {
            pending: Map<u8, (usize, Expiry)>,
            resolved: Map<u8, u64>,
            order: Vec<(u64, u8)>,
        }

        impl Model {
            fn admit(&mut self, lane: usize, key: u8, expiry: Expiry, read_at: u64) -> bool {
                if self.pending.contains_key(&key)
                    || self.resolved.get(&key).is_some_and(|t| *t >= read_at)
                {
                    return false;
                }
                self.pending.insert(key, (lane, expiry));
                true
            }
            fn resolve(&mut self, key: u8, at: u64) {
                self.pending.remove(&key);
                self.resolved.insert(key, at);
                self.order.push((at, key));
            }
            fn forget_before(&mut self, before: u64) {
                for (at, key) in self.order.iter().copied().filter(|(at, _)| *at < before) {
                    if self.resolved.get(&key) == Some(&at) {
                        self.resolved.remove(&key);
                    }
                }
                self.order.retain(|(at, _)| *at >= before);
            }
            fn oldest_pending(&self, lane: usize) -> Option<Expiry> {
                self.pending
                    .values()
                    .filter(|(l, _)| *l == lane)
                    .map(|(_, e)| *e)
                    .min()
            }
        }

        #[derive(Debug, Clone)]
        enum Op {
            Admit {
                lane: usize,
                key: u8,
                secs: i64,
                read_back: u64,
            },
            Resolve(u8),
            Forget(u64),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                (0..2usize, 0..12u8, 0..20i64, 0..4u64).prop_map(|(lane, key, secs, read_back)| {
                    Op::Admit {
                        lane,
                        key,
                        secs,
                        read_back,
                    }
                }),
                (0..12u8).prop_map(Op::Resolve),
                (0..4u64).prop_map(Op::Forget),
            ]
        }

        proptest! {
            #[test]
            fn pending_keeps_the_rules_of_a_map_by_key(ops in proptest::collection::vec(op(), 1..200)) {
                let mut real: Pending<u8, u64> = Pending::new(2);
                let mut model = Model::default();
                // Instants advance one per operation, as the daemon's monotonic clock does.
                for (now, op) in (1u64..).zip(ops) {
                    match op {
                        Op::Admit { lane, key, secs, read_back } => {
                            let expiry = Expiry::at_instant(Timestamp::from_secs(secs));
                            let read_at = now.saturating_sub(read_back);
                            prop_assert_eq!(
                                real.admit(lane, &key, expiry, read_at),
                                model.admit(lane, key, expiry, read_at)
                            );
                        }
                        Op::Resolve(key) => {
                            real.resolve(&key, now);
                            model.resolve(key, now);
                        }
                        Op::Forget(back) => {
                            real.forget_resolved_before(now.saturating_sub(back));
                            model.forget_before(now.saturating_sub(back));
                        }
                    }
                    for lane in 0..2 {
                        prop_assert_eq!(
                            real.expiries[lane].keys().next().copied(),
                            model.oldest_pending(lane)
                        );
                    }
                    prop_assert_eq!(
                        real.listings.iter().map(BTreeMap::len).sum::<usize>(),
                        model.pending.len()
                    );
                    let far = Timestamp::from_secs(1_000);
                    prop_assert_eq!(real.due_count(far), (model.pending.len() as u64, 0));
                }
            }
        }
    }
}
