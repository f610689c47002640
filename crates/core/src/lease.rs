//! Shard leases, judged as the Kinesis Client Library judges them: what one worker may take at a
//! heartbeat, given the lease table as it just read it.
//!
//! A lease is a record with an owner and a counter; the owner bumps the counter at every
//! heartbeat, and every change is a conditional write on the counter it last saw. Expiry is never
//! read from a timestamp another host wrote: a lease is expired when its counter has not moved
//! for a full lease duration **as measured on the taker's own monotonic clock**, so two hosts
//! whose clocks disagree cannot steal from each other early. Pure: `I` is the caller's monotonic
//! instant (tokio's in the engine, integers in the tests).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Sub;
use std::time::Duration;

/// One lease as the lease table holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    pub key: String,
    /// `None`: released (or never taken); free for anyone.
    pub owner: Option<String>,
    /// Bumped by every renewal, take and release.
    pub counter: u64,
}

/// What one worker remembers between heartbeats: for each lease, the counter it last saw and
/// when (its own clock) that counter first appeared.
#[derive(Debug, Clone, Default)]
pub struct LeaseView<I> {
    seen: HashMap<String, (u64, I)>,
}

impl<I> LeaseView<I>
where
    I: Copy + Ord + Sub<I, Output = Duration>,
{
    pub fn new() -> Self {
        LeaseView {
            seen: HashMap::new(),
        }
    }

    /// Records a read of the lease table made at `now`.
    pub fn observe(&mut self, records: &[LeaseRecord], now: I) {
        self.seen.retain(|k, _| records.iter().any(|r| &r.key == k));
        for r in records {
            match self.seen.get(&r.key) {
                Some((counter, _)) if *counter == r.counter => {}
                _ => {
                    self.seen.insert(r.key.clone(), (r.counter, now));
                }
            }
        }
    }

    /// True when `record`'s counter has not moved for `duration` on this worker's clock. A lease
    /// first seen now is never expired: the taker must watch it for a full duration.
    pub fn expired(&self, record: &LeaseRecord, now: I, duration: Duration) -> bool {
        self.unmoved_for(record, now) >= duration
    }

    /// How long `record`'s counter has stayed as it is on this worker's clock (zero for a
    /// counter not seen before).
    pub fn unmoved_for(&self, record: &LeaseRecord, now: I) -> Duration {
        match self.seen.get(&record.key) {
            Some((counter, since)) if *counter == record.counter => now - *since,
            _ => Duration::ZERO,
        }
    }
}

/// What a worker does at one heartbeat, besides renewing what it holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Moves {
    /// Free or expired leases to take (conditional on the counter read).
    pub take: Vec<LeaseRecord>,
    /// At most one lease to steal from the most loaded live worker.
    pub steal: Option<LeaseRecord>,
}

/// The share each live worker should hold: `total` leases over `workers`, rounded up.
pub fn target(total: usize, workers: usize) -> usize {
    total.div_ceil(workers.max(1))
}

/// Decides this heartbeat's takes and steal for worker `me`.
///
/// Live workers are the owners of leases that are not expired, plus `me`; an owner in `dead`
/// (proven no longer running, see [`crate::owner`]) is not live, and its leases are free at once. A worker below the
/// target takes free and expired leases up to it; finding none, it steals one lease from the
/// most loaded worker if that one holds more than the target, or holds the target while `me`
/// holds two or more fewer (KCL's rule: it converges to shares of ⌈n/w⌉ and ⌊n/w⌋ and stops).
/// Which of the victim's leases is stolen follows `draw` (any random number): always picking
/// the same one can lose every race with the victim's renewal of it, heartbeat after heartbeat.
pub fn plan<I>(
    records: &[LeaseRecord],
    view: &LeaseView<I>,
    me: &str,
    now: I,
    duration: Duration,
    draw: u64,
    dead: &HashSet<String>,
) -> Moves
where
    I: Copy + Ord + Sub<I, Output = Duration>,
{
    let mut load: BTreeMap<&str, usize> = BTreeMap::new();
    load.insert(me, 0);
    let mut available = Vec::new();
    for r in records {
        match r.owner.as_deref() {
            Some(owner) if owner == me => *load.entry(me).or_default() += 1,
            Some(owner) if !dead.contains(owner) && !view.expired(r, now, duration) => {
                *load.entry(owner).or_default() += 1
            }
            _ => available.push(r.clone()),
        }
    }
    let mine = load[me];
    let target = target(records.len(), load.len());
    let mut moves = Moves::default();
    if mine >= target {
        return moves;
    }
    if !available.is_empty() {
        available.truncate(target - mine);
        moves.take = available;
        return moves;
    }
    // Most loaded first; ties to the smallest name, so every worker picks the same victim.
    let Some((victim, most)) = load
        .iter()
        .filter(|(w, _)| **w != me)
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(w, n)| (*w, *n))
    else {
        return moves;
    };
    if most > target || (most == target && mine + 1 < target) {
        let theirs: Vec<&LeaseRecord> = records
            .iter()
            .filter(|r| r.owner.as_deref() == Some(victim))
            .collect();
        if !theirs.is_empty() {
            moves.steal = Some(theirs[(draw % theirs.len() as u64) as usize].clone());
        }
    }
    moves
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Milliseconds on a test clock.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    struct Ms(u64);
    impl Sub for Ms {
        type Output = Duration;
        fn sub(self, earlier: Ms) -> Duration {
            Duration::from_millis(self.0.saturating_sub(earlier.0))
        }
    }

    const LEASE: Duration = Duration::from_secs(10);

    fn none() -> HashSet<String> {
        HashSet::new()
    }

    fn lease(key: &str, owner: Option<&str>, counter: u64) -> LeaseRecord {
        LeaseRecord {
            key: key.into(),
            owner: owner.map(Into::into),
            counter,
        }
    }

    #[test]
    fn a_lease_expires_only_after_a_full_duration_without_a_heartbeat_on_the_takers_clock() {
        let mut view = LeaseView::new();
        let held = lease("s0", Some("a"), 7);
        view.observe(std::slice::from_ref(&held), Ms(1_000));
        assert!(!view.expired(&held, Ms(1_000), LEASE), "first sight");
        assert!(!view.expired(&held, Ms(10_999), LEASE));
        assert!(view.expired(&held, Ms(11_000), LEASE));
        // A renewal restarts the count, whatever the owner's own clock says.
        let renewed = lease("s0", Some("a"), 8);
        view.observe(std::slice::from_ref(&renewed), Ms(11_500));
        assert!(!view.expired(&renewed, Ms(21_000), LEASE));
        assert!(view.expired(&renewed, Ms(21_500), LEASE));
    }

    #[test]
    fn a_lone_worker_takes_every_free_lease() {
        let records: Vec<_> = (0..4).map(|i| lease(&format!("s{i}"), None, 0)).collect();
        let view = LeaseView::new();
        let moves = plan(&records, &view, "me", Ms(0), LEASE, 0, &none());
        assert_eq!(moves.take.len(), 4);
        assert_eq!(moves.steal, None);
    }

    #[test]
    fn a_dead_workers_leases_are_taken_once_they_expire_and_not_before() {
        let records: Vec<_> = (0..4)
            .map(|i| lease(&format!("s{i}"), Some("dead"), 3))
            .collect();
        let mut view = LeaseView::new();
        view.observe(&records, Ms(0));
        let early = plan(&records, &view, "me", Ms(9_000), LEASE, 0, &none());
        // A live worker holds all four: "me" may steal one (4 > target 2), nothing more.
        assert!(early.take.is_empty());
        assert!(early.steal.is_some());
        let late = plan(&records, &view, "me", Ms(10_000), LEASE, 0, &none());
        assert_eq!(
            late.take.len(),
            4,
            "all expired: the dead worker counts no more"
        );
    }

    #[test]
    fn a_dead_owners_leases_are_taken_at_once_and_it_counts_as_no_worker() {
        let mut records: Vec<_> = (0..4)
            .map(|i| lease(&format!("s{i}"), Some("dead"), 3))
            .collect();
        records.extend((4..8).map(|i| lease(&format!("s{i}"), Some("live"), 3)));
        let mut view = LeaseView::new();
        view.observe(&records, Ms(0));
        let dead: HashSet<String> = ["dead".to_string()].into();
        // First sight, nothing expired: the dead owner's four are free, and "me" shares the
        // eight with "live" alone (target 4).
        let moves = plan(&records, &view, "me", Ms(0), LEASE, 0, &dead);
        let taken: Vec<&str> = moves.take.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(taken, ["s0", "s1", "s2", "s3"]);
        assert_eq!(moves.steal, None);
    }

    #[test]
    fn a_counter_unmoved_is_timed_from_first_sight() {
        let mut view = LeaseView::new();
        let held = lease("s0", Some("a"), 7);
        assert_eq!(
            view.unmoved_for(&held, Ms(500)),
            Duration::ZERO,
            "never seen"
        );
        view.observe(std::slice::from_ref(&held), Ms(1_000));
        assert_eq!(view.unmoved_for(&held, Ms(6_000)), Duration::from_secs(5));
        let renewed = lease("s0", Some("a"), 8);
        assert_eq!(view.unmoved_for(&renewed, Ms(6_000)), Duration::ZERO);
    }

    #[test]
    fn steals_stop_at_an_even_split() {
        // 16 leases, 3 workers at 6 / 5 / 5: nobody steals.
        let mut records = Vec::new();
        for (owner, n) in [("a", 6), ("b", 5), ("c", 5)] {
            for i in 0..n {
                records.push(lease(&format!("{owner}{i}"), Some(owner), 1));
            }
        }
        let mut view = LeaseView::new();
        view.observe(&records, Ms(0));
        for me in ["a", "b", "c"] {
            assert_eq!(
                plan(&records, &view, me, Ms(1), LEASE, 0, &none()),
                Moves::default()
            );
        }
    }

    /// A fleet simulated heartbeat by heartbeat against the reference rules of a lease table
    /// (a conditional write succeeds only on the counter it read).
    fn converge(shards: usize, workers: usize, rounds: usize) -> Vec<usize> {
        let mut table: Vec<LeaseRecord> = (0..shards)
            .map(|i| lease(&format!("s{i:03}"), None, 0))
            .collect();
        let names: Vec<String> = (0..workers).map(|w| format!("w{w}")).collect();
        let mut views: Vec<LeaseView<Ms>> = vec![LeaseView::new(); workers];
        for round in 0..rounds {
            let now = Ms(round as u64 * 1_000);
            for (w, me) in names.iter().enumerate() {
                views[w].observe(&table, now);
                let moves = plan(
                    &table,
                    &views[w],
                    me,
                    now,
                    LEASE,
                    round as u64 * 7 + w as u64,
                    &none(),
                );
                for r in table.iter_mut() {
                    if r.owner.as_deref() == Some(me.as_str()) {
                        r.counter += 1; // renew
                    }
                }
                for want in moves.take.iter().chain(moves.steal.iter()) {
                    let r = table.iter_mut().find(|r| r.key == want.key).unwrap();
                    if r.counter == want.counter {
                        r.owner = Some(me.clone());
                        r.counter += 1;
                    }
                }
            }
        }
        let mut held: Vec<usize> = names
            .iter()
            .map(|me| {
                table
                    .iter()
                    .filter(|r| r.owner.as_deref() == Some(me.as_str()))
                    .count()
            })
            .collect();
        held.sort();
        held
    }

    proptest! {
        #[test]
        fn any_fleet_converges_to_an_even_split(shards in 1usize..64, workers in 1usize..6) {
            let held = converge(shards, workers, shards + 5);
            prop_assert_eq!(held.iter().sum::<usize>(), shards, "every lease owned");
            let (lo, hi) = (shards / workers, shards.div_ceil(workers));
            prop_assert!(held.iter().all(|h| (lo..=hi).contains(h)), "{:?}", held);
        }
    }
}
