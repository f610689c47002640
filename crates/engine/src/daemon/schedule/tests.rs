//! The scheduling policy on its own: instants are arguments, no tasks run.

use super::*;
use crate::store::DueItem;

const T0: i64 = 1_800_000_000_000;

fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(T0 + ms)
}

fn work(key: u32, expires_ms: i64) -> Work<u32> {
    Work {
        lane: 0,
        item: DueItem {
            key,
            expiry: Expiry::at_instant(at(expires_ms)),
        },
        answer_lost: false,
        failed_attempts: 0,
    }
}

fn config() -> DaemonConfig {
    DaemonConfig {
        max_batch: 25,
        batch_linger: Duration::from_millis(5),
        max_backlog_in_flight: 50,
        ..DaemonConfig::default()
    }
}

fn sent(next: Next<u32>) -> (Vec<u32>, bool) {
    match next {
        Next::Send { batch, backlog } => (batch.iter().map(|w| w.item.key).collect(), backlog),
        other => panic!("expected a request, got {other:?}"),
    }
}

#[test]
fn items_wait_for_their_expiry_then_linger_briefly_to_share_a_request() {
    let mut s = Schedule::new(&config(), 25);
    let mono = Instant::now();
    s.schedule(work(1, 100));
    s.promote_due(at(0), mono);
    match s.next(at(0), mono, true) {
        Next::Idle { wake_in, .. } => assert_eq!(wake_in, Some(Duration::from_millis(100))),
        other => panic!("{other:?}"),
    }
    s.promote_due(at(100), mono);
    match s.next(at(100), mono, true) {
        Next::Idle { wake_in, .. } => assert_eq!(wake_in, Some(Duration::from_millis(5))),
        other => panic!("lingers: {other:?}"),
    }
    s.schedule(work(2, 101));
    s.promote_due(at(102), mono + Duration::from_millis(2));
    let later = mono + Duration::from_millis(5);
    assert_eq!(sent(s.next(at(105), later, true)), (vec![1, 2], false));
}

#[test]
fn a_full_request_does_not_linger_and_due_items_go_before_the_backlog() {
    let mut s = Schedule::new(&config(), 25);
    let mono = Instant::now();
    for k in 0..10 {
        s.add_backlog(work(1000 + k, -60_000));
    }
    for k in 0..30 {
        s.schedule(work(k, 0));
    }
    s.promote_due(at(0), mono);
    assert!(!s.wants_backlog(true), "due items are waiting");
    let (first, backlog) = sent(s.next(at(0), mono, true));
    assert_eq!((first.len(), backlog), (25, false));
    // Five due items left: with backlog items waiting they do not linger (the backlog would go
    // first meanwhile); they go at once, then the backlog.
    let (rest, backlog) = sent(s.next(at(0), mono, true));
    assert_eq!((rest.len(), backlog), (5, false));
    let (old, backlog) = sent(s.next(at(5), mono + Duration::from_millis(5), true));
    assert_eq!((old.len(), backlog), (10, true));
}

#[test]
fn backlog_requests_in_flight_are_capped_until_one_settles() {
    let mut s = Schedule::new(&config(), 25);
    let mono = Instant::now();
    for k in 0..100 {
        s.add_backlog(work(k, -60_000));
    }
    assert_eq!(sent(s.next(at(0), mono, true)).0.len(), 25);
    assert_eq!(sent(s.next(at(0), mono, true)).0.len(), 25);
    assert!(matches!(s.next(at(0), mono, true), Next::Idle { .. }));
    assert!(!s.wants_backlog(true));
    s.settled(25, 25, mono);
    assert_eq!(sent(s.next(at(0), mono, true)).0.len(), 25);
}

#[test]
fn the_backlogs_cap_grows_with_the_stores_measured_rate_and_never_falls_below_its_floor() {
    let mut s = Schedule::new(&config(), 25);
    let mono = Instant::now();
    for k in 0..10_000 {
        s.add_backlog(work(k, -60_000));
    }
    // A serialized store, 1 000 items/s: 50 ms of it is the floor of 50 items.
    s.settled(0, 0, mono);
    for i in 1..=40u64 {
        s.settled(0, 25, mono + Duration::from_millis(i * 25));
    }
    assert_eq!(s.max_backlog, 50);
    // A parallel store, 40 000 items/s over the next second: 2 000 items may be in flight.
    let later = mono + Duration::from_millis(1_000);
    for i in 1..=1_600u64 {
        s.settled(0, 25, later + Duration::from_micros(i * 625));
    }
    assert_eq!(s.max_backlog, 2_000);
    let mut in_flight = 0;
    while let Next::Send { batch, .. } = s.next(at(0), later, true) {
        in_flight += batch.len();
    }
    assert_eq!(in_flight, 2_000);
}

#[test]
fn without_a_free_slot_nothing_is_sent() {
    let mut s = Schedule::new(&config(), 25);
    let mono = Instant::now();
    for k in 0..25 {
        s.schedule(work(k, 0));
    }
    s.promote_due(at(0), mono);
    assert!(matches!(s.next(at(0), mono, false), Next::Idle { .. }));
    assert_eq!(sent(s.next(at(0), mono, true)).0.len(), 25);
}

#[test]
fn the_rate_cap_holds_requests_back() {
    let mut c = config();
    c.max_deletes_per_second = Some(100.0);
    let mut s = Schedule::new(&c, 25);
    let mono = Instant::now();
    for k in 0..100 {
        s.add_backlog(work(k, -60_000));
    }
    // The bucket starts with one request's worth (25).
    assert_eq!(sent(s.next(at(0), mono, true)).0.len(), 25);
    match s.next(at(0), mono, true) {
        Next::Throttle(wait) => {
            assert!(wait > Duration::ZERO && wait <= Duration::from_millis(250))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(sent(s.next(at(250), mono, true)).0.len(), 25);
}

#[test]
fn a_store_without_batches_gets_one_item_per_request_and_no_linger() {
    let mut s = Schedule::new(&config(), 1);
    let mono = Instant::now();
    s.schedule(work(1, 0));
    s.schedule(work(2, 1));
    s.promote_due(at(1), mono);
    assert_eq!(sent(s.next(at(1), mono, true)).0, vec![1]);
    assert_eq!(sent(s.next(at(1), mono, true)).0, vec![2]);
}

#[test]
fn due_waiting_is_how_long_the_oldest_unsent_due_item_has_waited() {
    let mut s = Schedule::new(&config(), 25);
    let mono = Instant::now();
    assert_eq!(s.due_waiting(at(0)), Duration::ZERO);
    s.schedule(work(1, 100));
    s.schedule(work(2, 150));
    s.promote_due(at(90), mono);
    assert_eq!(s.due_waiting(at(90)), Duration::ZERO, "nothing due yet");
    s.promote_due(at(400), mono);
    assert_eq!(s.due_waiting(at(400)), Duration::from_millis(300));
    // No free slot: still waiting, and longer.
    assert!(matches!(s.next(at(500), mono, false), Next::Idle { .. }));
    assert_eq!(s.due_waiting(at(500)), Duration::from_millis(400));
    let after_linger = mono + Duration::from_millis(10);
    assert_eq!(sent(s.next(at(500), after_linger, true)).0, vec![1, 2]);
    assert_eq!(s.due_waiting(at(500)), Duration::ZERO, "all sent");
}

#[test]
fn a_retry_waits_out_its_backoff_then_goes_first_in_a_request_with_other_items() {
    let mut s = Schedule::new(&config(), 25);
    let mono = Instant::now();
    s.retry(work(1, -50), false, mono + Duration::from_millis(20));
    s.retry(work(1000, -60_000), true, mono + Duration::from_millis(20));
    for k in 2..26 {
        s.schedule(work(k, 0));
    }
    s.promote_due(at(0), mono);
    // 24 items due: they linger for a 25th; the retry's backoff bounds the wait.
    match s.next(at(0), mono, true) {
        Next::Idle { wake_in, .. } => assert_eq!(wake_in, Some(Duration::from_millis(5))),
        other => panic!("{other:?}"),
    }
    let (batch, _) = sent(s.next(at(5), mono + Duration::from_millis(5), true));
    assert_eq!(batch.len(), 24, "the retry is still backing off");
    match s.next(at(5), mono + Duration::from_millis(5), true) {
        Next::Idle { wake_in, .. } => assert_eq!(wake_in, Some(Duration::from_millis(15))),
        other => panic!("{other:?}"),
    }
    s.schedule(work(26, 20));
    let later = mono + Duration::from_millis(20);
    s.promote_due(at(20), later);
    let (batch, backlog) = sent(s.next(at(25), later + Duration::from_millis(5), true));
    assert_eq!((batch, backlog), (vec![1, 26], false), "oldest first");
    let (batch, backlog) = sent(s.next(at(25), later + Duration::from_millis(5), true));
    assert_eq!(
        (batch, backlog),
        (vec![1000], true),
        "a backlog retry rejoins the backlog"
    );
}

#[test]
fn many_items_due_at_one_instant_go_out_mixed_across_lanes() {
    let mut s = Schedule::new(&config(), 25);
    let mono = Instant::now();
    // A whole second's items, as three readers hand them over: lane after lane.
    for lane in 0..3u32 {
        for i in 0..30 {
            let mut w = work(lane * 100 + i, 1000);
            w.lane = lane as usize;
            s.schedule(w);
        }
    }
    s.promote_due(at(1000), mono);
    let (first, _) = sent(s.next(at(1000), mono, true));
    // In the readers' order the first request would hold 25 items of lane 0; shuffled, 20 or
    // more of one lane has a chance below one in a hundred million.
    for lane in 0..3 {
        let of_lane = first.iter().filter(|k| **k / 100 == lane).count();
        assert!(of_lane < 20, "lane {lane}: {of_lane} of 25");
    }
    let mut all = first;
    for step in 1..=10 {
        // Past any linger.
        let later = mono + Duration::from_millis(10 * step);
        if let Next::Send { batch, .. } = s.next(at(1000), later, true) {
            all.extend(batch.iter().map(|w| w.item.key));
        }
    }
    all.sort_unstable();
    let expected: Vec<u32> = (0..3)
        .flat_map(|l| (0..30).map(move |i| l * 100 + i))
        .collect();
    assert_eq!(all, expected, "every item goes, once");
}
