//! The perfect sweeper against hand-computed queues: bursts, partitions, the application's
//! writes and a backlog.

use super::*;

fn capacity(per_second: f64, burst_items: f64) -> StoreCapacity {
    StoreCapacity {
        per_second,
        burst_items,
        floor_ms: 0.0,
        source: "test".into(),
        partition: None,
    }
}

/// A table of 10 000/s with `burst_items` of credit, each partition of it held to 1 000/s
/// without burst: where the partitions' limits are the ones that bite.
fn partition_limited(burst_items: f64) -> StoreCapacity {
    StoreCapacity {
        partition: Some(PartitionLimit {
            per_second: 1000.0,
            burst_items: 0.0,
        }),
        ..capacity(10_000.0, burst_items)
    }
}

fn at(ttls: &[i64]) -> Vec<Expiring> {
    ttls.iter().map(|t| Expiring::at(*t)).collect()
}

/// `each` items due at each of the first `seconds` whole seconds.
fn each_second(seconds: i64, each: usize) -> Vec<Expiring> {
    let ttls: Vec<i64> = (0..seconds)
        .flat_map(|s| std::iter::repeat_n(s * 1000, each))
        .collect();
    at(&ttls)
}

#[test]
fn integer_ttls_wait_for_their_seconds_burst_to_drain() {
    // 500 items due at each of 10 whole seconds, a store of 1 000/s: the last of each
    // second waits 0.5 s, the first none.
    let b = bound(&each_second(10, 500), &capacity(1000.0, 0.0), 600, 700);
    assert!((b.max_ms - 499.0).abs() < 1.5, "{b:?}");
    assert!((b.p50_ms - 250.0).abs() < 2.0, "{b:?}");
    assert_eq!(b.ratio_max, Some(1.4));
}

#[test]
fn fractional_ttls_below_capacity_wait_for_nothing_but_the_round_trip() {
    let ttls: Vec<i64> = (0..5000).map(|i| i * 2).collect(); // 500/s
    let c = StoreCapacity {
        floor_ms: 4.0,
        ..capacity(1000.0, 0.0)
    };
    let b = bound(&at(&ttls), &c, 8, 12);
    assert_eq!((b.p50_ms, b.p99_ms, b.max_ms), (4.0, 4.0, 4.0));
    assert_eq!(b.ratio_p99, Some(2.0));
}

#[test]
fn burst_credit_absorbs_a_burst_up_to_its_size() {
    let ttls = vec![0; 1500];
    let lags = perfect_lags_of(&at(&ttls), &capacity(1000.0, 1000.0));
    assert_eq!(lags.iter().filter(|&&l| l == 0.0).count(), 1000);
    assert!((lags[1499] - 500.0).abs() < 1.5, "{}", lags[1499]);
}

#[test]
fn over_capacity_the_queue_grows_and_the_bound_says_so() {
    // 2 000/s for 5 s on a 1 000/s store: the last item waits about 5 s.
    let ttls: Vec<i64> = (0..10_000).map(|i| i / 2).collect();
    let b = bound(&at(&ttls), &capacity(1000.0, 0.0), 0, 0);
    assert!((b.max_ms - 5000.0).abs() < 5.0, "{b:?}");
    assert_eq!(b.ratio_p99, Some(0.0));
}

#[test]
fn a_partition_at_its_limit_holds_its_items_back_however_idle_the_table() {
    // 1 500/s on a 10 000/s table, all of it on one partition of 1 000/s, for 2 s: the
    // partition falls 500 behind each second. Spread over two partitions: no wait.
    let limited = partition_limited(0.0);
    let one: Vec<Expiring> = (0..3000)
        .map(|i| Expiring {
            ttl_ms: i * 2 / 3,
            partitions: [Some(7), None],
        })
        .collect();
    let b = bound(&one, &limited, 0, 0);
    assert!((b.max_ms - 1000.0).abs() < 5.0, "{b:?}");
    let two: Vec<Expiring> = one
        .iter()
        .enumerate()
        .map(|(i, e)| Expiring {
            partitions: [Some(i as u32 % 2), Some(3)],
            ..*e
        })
        .collect();
    let index_limited = bound(&two, &limited, 0, 0);
    assert!(
        (index_limited.max_ms - 1000.0).abs() < 5.0,
        "the index partition (3) holds them all: {index_limited:?}"
    );
    let spread: Vec<Expiring> = one
        .iter()
        .enumerate()
        .map(|(i, e)| Expiring {
            partitions: [Some(i as u32 % 2), Some(i as u32 % 2)],
            ..*e
        })
        .collect();
    assert!(bound(&spread, &limited, 0, 0).max_ms < 2.0);
}

#[test]
fn a_store_slower_than_one_delete_a_millisecond_keeps_its_rate() {
    // 600 items due at each of 5 seconds on a 647/s store: each second's burst drains in
    // 0.93 s, no queue carries over.
    let b = bound(&each_second(5, 600), &capacity(647.0, 0.0), 0, 0);
    assert!((b.max_ms - 926.0).abs() < 3.0, "{b:?}");
}

#[test]
fn lags_by_item_are_the_same_lags_in_the_items_order() {
    // Two partitions, one over its limit; the input out of TTL order.
    let limited = partition_limited(0.0);
    let items: Vec<Expiring> = (0..4000i64)
        .rev()
        .map(|i| Expiring {
            ttl_ms: i / 2,
            partitions: [None, Some((i % 4 == 0) as u32)],
        })
        .collect();
    let by_item = perfect_lags_by_item(&items, &limited);
    let mut sorted = by_item.clone();
    sorted.sort_by(f64::total_cmp);
    let mut in_order = perfect_lags_of(&items, &limited);
    in_order.sort_by(f64::total_cmp);
    assert_eq!(sorted, in_order);
    // Partition 1 takes 500/s: it waits only for the table's first token (1 ms). Partition
    // 0 takes 1 500/s at 1 000/s: 500 a second behind.
    let worst = |p: u32| {
        items
            .iter()
            .zip(&by_item)
            .filter(|(e, _)| e.partitions[1] == Some(p))
            .map(|(_, l)| *l)
            .fold(0.0, f64::max)
    };
    assert!(worst(1) <= 1.0, "{}", worst(1));
    assert!((worst(0) - 1000.0).abs() < 5.0, "{}", worst(0));
}

#[test]
fn the_applications_writes_on_a_partition_at_its_limit_hold_its_deletes_back() {
    // Partition 7 takes 1 000/s of deletes at its limit of 1 000/s for 2 s; the application
    // writes 200 more to it (2 index units each) over the first second. Without them no
    // delete waits; with them the partition runs 400 units behind, and its deletes wait
    // about 0.4 s. The same writes on partition 8, where nothing expires, change nothing
    // (the table has burst credit to spare: its own bucket is not what is tested here).
    let limited = partition_limited(1000.0);
    let items: Vec<Expiring> = (0..2000)
        .map(|i| Expiring {
            ttl_ms: i,
            partitions: [Some(i as u32 % 4), Some(7)],
        })
        .collect();
    let on = |index: u32| -> Vec<AppWrite> {
        (0..200)
            .map(|i| AppWrite {
                at_ms: i * 5,
                partitions: [Some(100 + i as u32 % 4), Some(index)],
                units: [1, 2],
            })
            .collect()
    };
    let max = |lags: Vec<f64>| lags.into_iter().fold(0.0, f64::max);
    let without = perfect_lags_by_item(&items, &limited);
    assert!(max(without.clone()) <= 1.0, "{}", max(without.clone()));
    let with = perfect_lags_by_item_with_writes(&items, &on(7), &limited);
    assert!(
        (max(with.clone()) - 400.0).abs() < 5.0,
        "{}",
        max(with.clone())
    );
    assert!(with.iter().zip(&without).all(|(w, o)| w >= o));
    let idle = perfect_lags_by_item_with_writes(&items, &on(8), &limited);
    assert!(
        idle == without,
        "a write on an idle partition changes nothing"
    );
}

#[test]
fn the_applications_writes_take_the_table_wide_limit_too() {
    // No partition limits (DynamoDB Local): 1 000 writes in the first second on a table at
    // its 1 000/s with its deletes double the table's load, and the last delete waits
    // about 1 s; a write before the first TTL, the bucket refilled since, costs nothing.
    let c = capacity(1000.0, 0.0);
    let items = at(&(0..1000).collect::<Vec<i64>>());
    let writes: Vec<AppWrite> = (0..1000)
        .map(|i| AppWrite {
            at_ms: i,
            partitions: [None; 2],
            units: [1, 0],
        })
        .collect();
    let lags = |w: &[AppWrite]| perfect_lags_with_writes(&items, w, &c);
    let max = |l: Vec<f64>| l.into_iter().fold(0.0, f64::max);
    assert!(max(lags(&[])) <= 1.0);
    assert!(
        (max(lags(&writes)) - 1000.0).abs() < 5.0,
        "{}",
        max(lags(&writes))
    );
    let early = AppWrite {
        at_ms: -5000,
        partitions: [None; 2],
        units: [1, 0],
    };
    assert_eq!(lags(&[early]), lags(&[]));
}

#[test]
fn no_items_no_bound() {
    let b = bound(&[], &capacity(1000.0, 0.0), 0, 0);
    assert_eq!((b.p99_ms, b.ratio_p99), (0.0, None));
}

#[test]
fn a_backlog_alone_clears_at_the_stores_rate() {
    // 1 000 items expired before the start, a store of 1 000/s: the last goes at 999 ms.
    let backlog = at(&vec![-5000; 1000]);
    let b = Backlog {
        items: &backlog,
        from_ms: 0,
    };
    let done = perfect_sweep_by_item(&[], Some(b), &[], &capacity(1000.0, 0.0)).backlog_done_ms;
    assert_eq!(done, Some(999.0));
    let none = Backlog {
        items: &[],
        from_ms: 0,
    };
    assert_eq!(
        perfect_sweep_by_item(&[], Some(none), &[], &capacity(1000.0, 0.0)).backlog_done_ms,
        None
    );
}

#[test]
fn a_backlog_takes_only_what_the_expiring_items_leave() {
    // 500/s expiring for 4 s on a 1 000/s store, and 1 000 backlog items: the backlog gets the
    // other 500/s, so it clears in about 2 s, and no expiring item waits longer for it.
    let c = capacity(1000.0, 0.0);
    let items = at(&(0..2000).map(|i| i * 2).collect::<Vec<i64>>());
    let backlog = at(&vec![-1; 1000]);
    let b = Backlog {
        items: &backlog,
        from_ms: 0,
    };
    let beside = perfect_sweep_by_item(&items, Some(b), &[], &c);
    let done = beside.backlog_done_ms.unwrap();
    assert!((done - 2000.0).abs() < 5.0, "{done}");
    let alone = perfect_lags_by_item(&items, &c);
    assert_eq!(beside.lags, alone);
}

#[test]
fn a_backlog_on_one_partition_clears_at_that_partitions_limit() {
    // 1 000 backlog items on a table of 10 000/s: on one partition of 1 000/s they take 1 s,
    // spread over two they take half that, oldest first in each.
    let limited = partition_limited(0.0);
    let on = |parts: u32| -> Vec<Expiring> {
        (0..1000)
            .map(|i| Expiring {
                ttl_ms: -1000 + i,
                partitions: [Some(i as u32 % parts), None],
            })
            .collect()
    };
    let done = |items: &[Expiring]| {
        let b = Backlog { items, from_ms: 0 };
        perfect_sweep_by_item(&[], Some(b), &[], &limited)
            .backlog_done_ms
            .unwrap()
    };
    assert!((done(&on(1)) - 1000.0).abs() < 3.0, "{}", done(&on(1)));
    assert!((done(&on(2)) - 500.0).abs() < 3.0, "{}", done(&on(2)));
}
