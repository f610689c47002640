use super::*;

#[derive(Debug, Clone, PartialEq, Eq)]
struct It {
    id: u32,
    lane: usize,
    expiry_ms: i64,
}

impl Ticket for It {
    fn lane(&self) -> usize {
        self.lane
    }
    fn expiry(&self) -> Expiry {
        Expiry::at_instant(Timestamp::from_millis(self.expiry_ms))
    }
}

fn it(id: u32, lane: usize, expiry_ms: i64) -> It {
    It {
        id,
        lane,
        expiry_ms,
    }
}

fn settings() -> Settings {
    Settings {
        max_batch: 4,
        linger: Duration::ZERO,
        max_held: 1000,
        min_concurrency: 1,
        initial_concurrency: 4,
        max_concurrency: 8,
        min_backlog_in_flight: 4,
        max_per_second: None,
        backlog_ceiling: None,
    }
}

fn t(ms: i64) -> Timestamp {
    Timestamp::from_millis(ms)
}

fn sent(d: Decision<It>) -> (Vec<u32>, Class) {
    match d {
        Decision::Send { items, class } => (items.iter().map(|i| i.id).collect(), class),
        other => panic!("expected a request, got {other:?}"),
    }
}

fn answer(class: Class, items: &[It], again: Vec<Again<It>>) -> Answer<It> {
    Answer {
        class,
        items: items.len(),
        settled_lanes: items
            .iter()
            .filter(|i| !again.iter().any(|a| a.item.id == i.id))
            .map(|i| i.lane)
            .collect(),
        again,
        congested: false,
    }
}

#[test]
fn items_wait_for_their_expiry_then_go_oldest_first_across_lanes() {
    let mut a = Admission::new(3, settings(), 1);
    a.hold(it(1, 0, 1_030));
    a.hold(it(2, 1, 1_010));
    a.hold(it(3, 2, 1_020));
    assert_eq!(
        a.next(t(1_000)),
        Decision::Wait {
            until: Some(t(1_010))
        }
    );
    assert_eq!(sent(a.next(t(1_025))), (vec![2, 3], Class::OnTime));
    assert_eq!(sent(a.next(t(1_030))), (vec![1], Class::OnTime));
    assert!(a.is_empty());
}

#[test]
fn on_time_items_go_before_backlog_items_and_the_backlog_waits_for_them() {
    let mut a = Admission::new(2, settings(), 1);
    a.add_backlog(it(10, 0, 10));
    a.add_backlog(it(11, 1, 20));
    a.hold(it(1, 1, 1_000));
    assert!(!a.wants_backlog() || a.on_time == 0);
    assert_eq!(sent(a.next(t(1_000))), (vec![1], Class::OnTime));
    assert_eq!(sent(a.next(t(1_000))), (vec![10, 11], Class::Backlog));
}

#[test]
fn a_refused_item_goes_again_after_its_backoff_before_newer_items() {
    let mut a = Admission::new(1, settings(), 1);
    for i in 0..4 {
        a.hold(it(i, 0, 1_000 + i as i64));
    }
    let (ids, _) = sent(a.next(t(1_003)));
    assert_eq!(ids, vec![0, 1, 2, 3]);
    // Item 0 refused by a table partition: back after 10 ms.
    a.answered(
        t(1_005),
        answer(
            Class::OnTime,
            &[
                it(0, 0, 1_000),
                it(1, 0, 1_001),
                it(2, 0, 1_002),
                it(3, 0, 1_003),
            ],
            vec![Again {
                item: it(0, 0, 1_000),
                after: Duration::from_millis(10),
                refused: Some(ThrottleScope::TablePartition),
            }],
        ),
    );
    for i in 4..8 {
        a.hold(it(i, 0, 1_006 + i as i64));
    }
    let (ids, _) = sent(a.next(t(1_015)));
    assert_eq!(ids, vec![0, 4, 5, 6]);
    assert_eq!(
        a.snapshot().limited_lanes,
        vec![],
        "a table partition limits no lane"
    );
    assert_eq!(a.snapshot().concurrency_limit, 4, "nor the table");
}

#[test]
fn an_index_partition_refusal_limits_its_lane_only() {
    let mut a = Admission::new(2, settings(), 1);
    a.hold(it(0, 0, 1_000));
    a.hold(it(1, 1, 1_000));
    let (_, class) = sent(a.next(t(1_000)));
    a.answered(
        t(1_002),
        answer(
            class,
            &[it(0, 0, 1_000), it(1, 1, 1_000)],
            vec![Again {
                item: it(0, 0, 1_000),
                after: Duration::from_millis(5),
                refused: Some(ThrottleScope::IndexPartition),
            }],
        ),
    );
    let snap = a.snapshot();
    assert_eq!(snap.limited_lanes.len(), 1);
    assert_eq!(snap.limited_lanes[0].0, 0);
    assert_eq!(snap.concurrency_limit, 4);
}

#[test]
fn table_wide_refusals_engage_the_table_rate_not_a_lane_limit() {
    let mut a = Admission::new(2, settings(), 1);
    for ms in 0..30 {
        let now = 1_000 + ms * 10;
        a.hold(it(ms as u32, (ms % 2) as usize, now));
        if let Decision::Send { items, class } = a.next(t(now)) {
            let again = items
                .iter()
                .map(|i| Again {
                    item: i.clone(),
                    after: Duration::from_millis(5),
                    refused: Some(ThrottleScope::Table),
                })
                .collect();
            a.answered(t(now + 2), answer(class, &items, again));
        }
    }
    let snap = a.snapshot();
    assert!(snap.table_rate.is_some(), "{snap:?}");
    assert_eq!(snap.retry_rate, None, "{snap:?}");
    assert!(snap.limited_lanes.is_empty());
    assert_eq!(snap.concurrency_limit, 4, "the requests in flight stay");
}

#[test]
fn a_timeout_cuts_the_requests_in_flight() {
    let mut a = Admission::new(1, settings(), 1);
    a.hold(it(0, 0, 1_000));
    let (_, class) = sent(a.next(t(1_000)));
    a.answered(
        t(1_002),
        Answer {
            class,
            items: 1,
            settled_lanes: vec![],
            again: vec![Again {
                item: it(0, 0, 1_000),
                after: Duration::from_millis(5),
                refused: None,
            }],
            congested: true,
        },
    );
    assert_eq!(a.snapshot().concurrency_limit, 2);
}

#[test]
fn the_requests_in_flight_are_capped() {
    let mut s = settings();
    s.initial_concurrency = 2;
    s.max_batch = 1;
    let mut a = Admission::new(1, s, 1);
    for i in 0..3 {
        a.hold(it(i, 0, 1_000));
    }
    let _ = sent(a.next(t(1_000)));
    let _ = sent(a.next(t(1_000)));
    assert_eq!(a.next(t(1_000)), Decision::Wait { until: None });
}

#[test]
fn per_lane_oldest_waiting_is_reported() {
    let mut a = Admission::new(3, settings(), 1);
    a.hold(it(0, 0, 1_000));
    a.hold(it(1, 2, 1_010));
    a.add_backlog(it(2, 1, 10));
    let _ = a.next(t(999));
    let mut out = vec![None; 3];
    a.hold(it(3, 0, 900));
    a.promote(t(1_020));
    a.oldest_waiting(&mut out);
    assert_eq!(
        out,
        vec![
            Some(Expiry::at_instant(t(900))),
            None,
            Some(Expiry::at_instant(t(1_010)))
        ]
    );
}

/// Sends every item of `lanes` lanes due at `now` and answers each request, refusing (with no
/// scope given) the items `refuse` picks.
fn round(a: &mut Admission<It>, now: i64, lanes: usize, refuse: impl Fn(&It) -> bool) {
    for l in 0..lanes {
        for k in 0..4 {
            a.hold(it((now as u32) * 100 + (l * 4 + k) as u32, l, now));
        }
    }
    while let Decision::Send { items, class } = a.next(t(now)) {
        let again = items
            .iter()
            .filter(|i| refuse(i))
            .map(|i| Again {
                item: i.clone(),
                after: Duration::from_millis(1),
                refused: Some(ThrottleScope::Unknown),
            })
            .collect();
        a.answered(t(now), answer(class, &items, again));
    }
}

/// A fresh admission after the load the refusal tests below share: a [`round`] of every lane
/// every `step_ms`, refusing the items `refuse` picks.
fn rounds(step_ms: i64, refuse: impl Fn(&It) -> bool) -> Admission<It> {
    let mut a = Admission::new(4, settings(), 7);
    for ms in 0..50 {
        round(&mut a, 1_000 + ms * step_ms, 4, &refuse);
    }
    a
}

/// Refuses the items `pick` picks the first time each is sent only: the retry is accepted.
fn once(pick: impl Fn(&It) -> bool) -> impl Fn(&It) -> bool {
    let refused = std::cell::RefCell::new(std::collections::HashSet::new());
    move |i| pick(i) && refused.borrow_mut().insert(i.id)
}

#[test]
fn refusals_of_unknown_scope_concentrated_on_one_lane_limit_that_lane_only() {
    let snap = rounds(10, |i| i.lane == 2 && i.id % 2 == 0).snapshot();
    assert_eq!(
        snap.limited_lanes
            .iter()
            .map(|(l, _)| *l)
            .collect::<Vec<_>>(),
        vec![2]
    );
    assert!(
        snap.concurrency_limit >= 4,
        "the table is not slowed: {snap:?}"
    );
}

#[test]
fn refusals_of_unknown_scope_spread_thinly_over_lanes_slow_nothing() {
    // One item in twenty refused once, whatever its lane: table partitions' keys.
    let snap = rounds(10, once(|i| i.id.wrapping_mul(2_654_435_761) % 20 == 3)).snapshot();
    assert!(snap.limited_lanes.is_empty(), "{snap:?}");
    assert_eq!((snap.table_rate, snap.retry_rate), (None, None), "{snap:?}");
    assert!(snap.concurrency_limit >= 4, "{snap:?}");
}

/// Refusals of unknown scope over every lane: table partitions full across the key space (a
/// batch statement's refusals). No lane is limited. A third of the items refused once engages
/// nothing: the refused items go again and take their partitions' next tokens. Most of what is
/// sent refused engages the loose send rate, a margin over what the table accepts.
#[test]
fn refusals_of_unknown_scope_over_the_table_engage_only_a_loose_rate() {
    let snap = rounds(50, once(|i| i.id % 3 == 0)).snapshot();
    assert_eq!((snap.table_rate, snap.retry_rate), (None, None), "{snap:?}");
    assert!(snap.limited_lanes.is_empty(), "{snap:?}");

    let snap = rounds(50, |i| i.id % 4 != 0).snapshot();
    // 16 items every 50 ms, a quarter accepted: 80/s accepted, never held below it.
    let rate = snap.retry_rate.expect("engaged");
    assert!(rate >= 80.0, "{snap:?}");
    assert_eq!(
        snap.table_rate, None,
        "the table's own rate stays off: {snap:?}"
    );
    assert!(snap.limited_lanes.is_empty(), "{snap:?}");
}

/// The partitions' rate holds back retries only: once it is engaged, items sent for the first
/// time still all go the moment they are due, whatever partition refused the retries.
#[test]
fn the_partitions_rate_holds_back_retries_not_first_attempts() {
    let mut a = rounds(50, |i| i.id % 4 != 0);
    assert!(a.snapshot().retry_rate.is_some(), "engaged");
    let now = 1_000 + 50 * 50;
    for k in 0..40u32 {
        a.hold(it(900_000 + k, (k % 4) as usize, now));
    }
    let (mut first, mut retries) = (0, 0);
    while let Decision::Send { items, class } = a.next(t(now)) {
        let new = items.iter().filter(|i| i.id >= 900_000).count();
        first += new;
        retries += items.len() - new;
        a.answered(t(now), answer(class, &items, vec![]));
    }
    assert_eq!(first, 40, "every first attempt at its instant");
    assert!(!a.is_empty(), "retries still held back ({retries} went)");
}

/// Sends everything admission lets go between `from` and `to` (ms), answering each request
/// at once with `refuse` deciding which items are refused; returns the ids sent by class.
fn drive(
    a: &mut Admission<It>,
    from: i64,
    to: i64,
    refuse: impl Fn(&It) -> bool,
) -> (Vec<u32>, Vec<u32>) {
    let (mut on_time, mut backlog) = (Vec::new(), Vec::new());
    for ms in from..to {
        while let Decision::Send { items, class } = a.next(t(ms)) {
            let refused: Vec<bool> = items.iter().map(&refuse).collect();
            let again: Vec<Again<It>> = items
                .iter()
                .zip(&refused)
                .filter(|(_, r)| **r)
                .map(|(i, _)| Again {
                    item: i.clone(),
                    after: Duration::from_millis(5),
                    refused: Some(ThrottleScope::TablePartition),
                })
                .collect();
            let ids = items
                .iter()
                .zip(&refused)
                .filter(|(_, r)| !**r)
                .map(|(i, _)| i.id);
            match class {
                Class::OnTime => on_time.extend(ids),
                Class::Backlog => backlog.extend(ids),
            }
            a.answered(t(ms), answer(class, &items, again));
        }
    }
    (on_time, backlog)
}

#[test]
fn the_backlog_keeps_to_its_budget_and_on_time_items_do_not() {
    let mut s = settings();
    s.backlog_ceiling = Some(1_000.0);
    let mut a = Admission::new(2, s, 1);
    for i in 0..5_000 {
        a.add_backlog(it(100_000 + i, (i % 2) as usize, 10));
    }
    // 200 on-time items due within the same second: none waits for the budget.
    for i in 0..200 {
        a.hold(it(i, 1, 10_000 + i as i64 * 5));
    }
    let (on_time, backlog) = drive(&mut a, 10_000, 11_000, |_| false);
    assert_eq!(on_time.len(), 200);
    // The budget's first second: from a quarter of the ceiling (slow start), +30/s each second.
    assert!((250..=290).contains(&backlog.len()), "{}", backlog.len());
    assert_eq!(a.snapshot().backlog_ceiling, Some(1_000.0));
}

#[test]
fn a_refusal_cuts_the_backlog_before_on_time_items_are_slowed() {
    let mut s = settings();
    s.backlog_ceiling = Some(1_000.0);
    let mut a = Admission::new(1, s, 1);
    for i in 0..5_000 {
        a.add_backlog(it(100_000 + i, 0, 10));
    }
    a.hold(it(1, 0, 10_500));
    drive(&mut a, 10_000, 10_500, |_| false);
    let before = a.snapshot().backlog_rate.unwrap();
    // One on-time item refused once: a partition is full.
    let refused_once = std::cell::Cell::new(false);
    let (on_time, _) = drive(&mut a, 10_500, 10_600, |i| {
        i.id == 1 && !refused_once.replace(true)
    });
    assert_eq!(on_time, vec![1]);
    let cut = a.snapshot().backlog_rate.unwrap();
    let share = crate::admission::budget::CUT;
    assert!(
        ((share - 0.01) * before..=(share + 0.01) * before).contains(&cut),
        "{before} {cut}"
    );
    // Held for a second after the cut (at 10,500).
    let (_, backlog) = drive(&mut a, 10_600, 11_500, |_| false);
    let expected = cut * 0.9;
    assert!(
        (backlog.len() as f64 - expected).abs() <= 10.0,
        "{} {expected}",
        backlog.len()
    );
}
