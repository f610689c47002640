//! Report analysis on synthetic event logs: percentiles, wrong deletions, left-behind items,
//! duplicates, backlog, throughput, and the Markdown/JSON/SVG outputs.

use std::collections::HashSet;

use precise_ttl_bench::{
    Expectation, Inputs, Planted, Removal, Report, WrongKind, analyze, write_plot,
};
use proptest::prelude::*;

const START: i64 = 1_700_000_000_000;

fn planted(key: &str, expect: Expectation) -> Planted {
    Planted {
        key: key.to_owned(),
        expect,
        shard: None,
        table_partition: None,
    }
}

fn expire(key: &str, ttl_ms: i64) -> Planted {
    planted(key, Expectation::Expire { ttl_ms })
}

fn backlog(key: &str, ttl_ms: i64) -> Planted {
    planted(key, Expectation::Backlog { ttl_ms })
}

fn survive(key: &str, why: &str) -> Planted {
    let why = why.to_owned();
    planted(key, Expectation::Survive { why })
}

fn removal(key: &str, seen_ms: i64) -> Removal {
    Removal {
        key: key.to_owned(),
        seen_ms,
    }
}

/// A removal of each key, seen this many ms after `START`.
fn removals_at(seen: &[(&str, i64)]) -> Vec<Removal> {
    seen.iter()
        .map(|&(key, after_ms)| removal(key, START + after_ms))
        .collect()
}

/// `Expire` items, each `(key, ttl_ms, lag_ms)`, and a removal of each `lag_ms` after its TTL.
fn expired_after(
    items: impl IntoIterator<Item = (String, i64, i64)>,
) -> (Vec<Planted>, Vec<Removal>) {
    items
        .into_iter()
        .map(|(key, ttl, lag)| (expire(&key, ttl), removal(&key, ttl + lag)))
        .unzip()
}

fn inputs(planted: Vec<Planted>, removals: Vec<Removal>) -> Inputs {
    Inputs {
        planted,
        removals,
        present_at_end: HashSet::new(),
        run_started_ms: START,
        run_ended_ms: START + 60_000,
        observer_error_ms: Some(12.5),
        capacity: None,
        hot_shard: None,
        raw_batch_per_s: None,
        app_writes: Vec::new(),
        app: None,
    }
}

/// 100 `Expire` items with lags 1..=100 ms, TTLs 10 ms apart from 10 s into the run.
fn hundred() -> Inputs {
    let (planted, mut removals) =
        expired_after((1..=100i64).map(|i| (format!("e{i:03}"), START + 10_000 + i * 10, i)));
    // Input order must not matter.
    removals.reverse();
    inputs(planted, removals)
}

#[test]
fn percentiles_are_exact_for_small_lags() {
    let r = analyze(&hundred());
    let l = r.lag.as_ref().expect("lag stats");
    assert_eq!(l.count, 100);
    assert_eq!(l.p50_ms, 50);
    assert_eq!(l.p90_ms, 90);
    assert_eq!(l.p99_ms, 99);
    assert_eq!(l.p999_ms, 100);
    assert_eq!(l.max_ms, 100);
    assert!((l.mean_ms - 50.5).abs() < 1e-9);
    assert_eq!(l.early, 0);
    assert!(r.wrong.is_empty());
    assert_eq!(r.counts.expected_deletions, 100);
    assert_eq!(r.counts.deleted, 100);
    assert_eq!(r.left_behind.total, 0);
    assert_eq!(r.lag_points.len(), 100);
    assert!(r.lag_points.windows(2).all(|w| w[0].t_s <= w[1].t_s));
    assert_eq!(r.lag_points[0].lag_ms, 1);
    assert!((r.lag_points[0].t_s - 10.011).abs() < 1e-9);
    let in_hist: u64 = r.lag_histogram.iter().map(|b| b.count).sum();
    assert_eq!(in_hist, 100);
}

#[test]
fn wrong_deletions_are_classified() {
    let planted = vec![
        expire("early", START + 5_000),
        expire("fine", START + 5_000),
        survive("keeper", "string-ttl"),
        survive("safe", "extended"),
    ];
    let removals = removals_at(&[
        ("early", 4_750),
        ("fine", 5_020),
        ("keeper", 6_000),
        ("ghost", 7_000),
    ]);
    let r = analyze(&inputs(planted, removals));
    let got: Vec<(&str, &str)> = r
        .wrong
        .iter()
        .map(|w| (w.key.as_str(), w.reason.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("early", "deleted before its TTL (by 250 ms)"),
            ("keeper", "must survive (string-ttl)"),
            ("ghost", "deleted but never planted"),
        ]
    );
    assert_eq!(r.wrong[0].kind, WrongKind::Early { by_ms: 250 });
    assert_eq!(
        r.wrong[1].kind,
        WrongKind::Survivor {
            why: "string-ttl".to_owned()
        }
    );
    assert_eq!(r.wrong[2].kind, WrongKind::Unknown);
    // The early one is in the lag stats as 0 and counted as early.
    let l = r.lag.as_ref().unwrap();
    assert_eq!((l.count, l.early, l.p50_ms, l.max_ms), (2, 1, 0, 20));
    assert_eq!(r.lag_points[0].lag_ms, -250);
    assert_eq!(r.counts.deleted, 2);
    assert_eq!(r.counts.removed_keys, 4);
    assert_eq!(r.throughput.deletions, 2);
}

#[test]
fn left_behind_and_scan_inconsistencies() {
    let mut planted = Vec::new();
    for i in 0..25 {
        planted.push(expire(&format!("left{i:02}"), START + 1_000));
    }
    planted.push(backlog("bl-left", START - 1_000));
    planted.push(expire("gone", START + 1_000));
    planted.push(expire("zombie", START + 1_000));
    planted.push(survive("kept", "no-ttl"));
    planted.push(survive("vanished", "negative-ttl"));
    let removals = removals_at(&[("gone", 1_100), ("zombie", 1_200)]);
    let mut inp = inputs(planted, removals);
    inp.present_at_end = ["left00", "left01", "zombie", "kept"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let r = analyze(&inp);
    let lb = &r.left_behind;
    assert_eq!(lb.total, 26);
    assert_eq!(lb.keys.len(), 20);
    assert_eq!(lb.keys[0], "bl-left");
    assert_eq!(lb.keys[1], "left00");
    assert_eq!(lb.keys[19], "left18");
    // left00, left01 and zombie are expected deletions still in the table.
    assert_eq!(lb.still_present, 3);
    assert_eq!(lb.removed_but_present, 1);
    assert_eq!(lb.survivors_missing, 1);
    assert_eq!(r.backlog.count, 1);
    assert_eq!(r.backlog.removed, 0);
    assert_eq!(r.backlog.time_to_clear_ms, None);
}

#[test]
fn duplicate_removals_are_counted_once() {
    let planted = vec![expire("a", START + 1_000), expire("b", START + 2_000)];
    let removals = removals_at(&[("a", 1_300), ("a", 1_010), ("b", 2_005), ("a", 1_500)]);
    let r = analyze(&inputs(planted, removals));
    assert_eq!(r.counts.removal_records, 4);
    assert_eq!(r.counts.removed_keys, 2);
    assert_eq!(r.counts.duplicate_removals, 2);
    // The earliest record is the deletion.
    let l = r.lag.as_ref().unwrap();
    assert_eq!((l.count, l.max_ms), (2, 10));
    assert_eq!(r.throughput.deletions, 2);
}

#[test]
fn backlog_clear_time_and_rate() {
    let planted = vec![
        backlog("b1", START - 60_000),
        backlog("b2", START - 50_000),
        backlog("b3", START - 40_000),
        expire("e", START + 100),
    ];
    let removals = removals_at(&[("b1", 500), ("b2", 1_500), ("b3", 2_000), ("e", 150)]);
    let r = analyze(&inputs(planted, removals));
    assert_eq!(r.backlog.count, 3);
    assert_eq!(r.backlog.removed, 3);
    assert_eq!(r.backlog.time_to_clear_ms, Some(2_000));
    assert!((r.backlog.per_s.unwrap() - 1.5).abs() < 1e-9);
    // Backlog lag is not precision: only the Expire item is in the lag stats.
    let l = r.lag.as_ref().unwrap();
    assert_eq!((l.count, l.max_ms), (1, 50));
    assert_eq!(r.lag_points.len(), 1);
    assert!(r.wrong.is_empty());
}

#[test]
fn deletions_per_second() {
    // 11 deletions from 0 s to 5 s after start: 11 / 5 s = 2.2/s.
    let (mut planted, mut removals) =
        expired_after((0..=10i64).map(|i| (format!("k{i}"), START + i * 500, 0)));
    planted.push(survive("s", "extended"));
    removals.push(removal("s", START + 9_000)); // wrong, not counted as throughput
    let mut inp = inputs(planted, removals);
    inp.run_ended_ms = START + 8_000;
    let r = analyze(&inp);
    assert_eq!(r.throughput.deletions, 11);
    assert_eq!(r.throughput.first_ms, Some(START));
    assert_eq!(r.throughput.last_ms, Some(START + 5_000));
    assert!((r.throughput.per_s.unwrap() - 2.2).abs() < 1e-9);
    assert_eq!(r.throughput.peak_per_s, 2);
    let series: Vec<(i64, u64)> = r
        .per_second
        .iter()
        .map(|s| (s.second, s.deletions))
        .collect();
    assert_eq!(
        series,
        [
            (0, 2),
            (1, 2),
            (2, 2),
            (3, 2),
            (4, 2),
            (5, 1),
            (6, 0),
            (7, 0)
        ]
    );
    assert_eq!(r.per_second[0].p99_lag_ms, Some(0));
    assert_eq!(r.per_second[6].p99_lag_ms, None);
}

#[test]
fn per_second_p99() {
    let r = analyze(&hundred());
    // Deletions seen 10.011 s .. 11.1 s after start.
    let s10 = r.per_second.iter().find(|s| s.second == 10).unwrap();
    let s11 = r.per_second.iter().find(|s| s.second == 11).unwrap();
    assert_eq!(s10.deletions + s11.deletions, 100);
    assert!(s10.p99_lag_ms.is_some() && s11.p99_lag_ms.is_some());
    assert_eq!(s11.p99_lag_ms, Some(100));
}

#[test]
fn empty_run_does_not_panic() {
    let r = analyze(&inputs(Vec::new(), Vec::new()));
    assert!(r.lag.is_none());
    assert!(r.lag_histogram.is_empty());
    assert_eq!(r.throughput.per_s, None);
    assert_eq!(r.backlog.time_to_clear_ms, None);
    assert_eq!(r.per_second.len(), 60);
    assert!(r.to_markdown().contains("n/a"));
    let path = temp_dir("empty").join("empty.svg");
    write_plot(&r, &path).unwrap();
    assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn markdown_has_the_key_numbers() {
    let mut inp = hundred();
    inp.planted.push(survive("keeper", "string-ttl"));
    inp.removals.push(removal("keeper", START + 12_000));
    inp.planted.push(expire("left", START + 1_000));
    let md = analyze(&inp).to_markdown();
    assert!(md.starts_with("| metric | value |"), "{md}");
    for needle in [
        "50 / 90 / 99 / 100 / 100 ms",
        "| wrong deletions | 1 |",
        "| left behind | 1 ",
        "must survive (string-ttl)",
        "`left`",
        "deletions/s",
        "backlog clear time",
        "12.5 ms",
    ] {
        assert!(md.contains(needle), "missing {needle:?} in\n{md}");
    }
}

#[test]
fn json_round_trips() {
    let r = analyze(&hundred());
    let json = r.to_json().unwrap();
    assert!(json.contains("\"p99_ms\": 99"));
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
}

#[test]
fn svg_is_written() {
    let mut inp = hundred();
    // An early deletion and a far outlier (beyond p99.9 of 2000 items), so every element is drawn.
    inp.planted.push(expire("early", START + 20_000));
    inp.removals.push(removal("early", START + 19_900));
    for i in 0..1900 {
        let key = format!("fast{i}");
        inp.planted.push(expire(&key, START + 30_000 + i));
        inp.removals
            .push(removal(&key, START + 30_000 + i + 1 + i % 50));
    }
    inp.planted.push(expire("slow", START + 20_000));
    inp.removals.push(removal("slow", START + 25_000));
    let r = analyze(&inp);
    assert!(r.lag_histogram.last().unwrap().overflow);
    let path = temp_dir("plot").join("lag.svg");
    write_plot(&r, &path).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("deletion lag"));
    assert!(svg.contains("seconds since sweeper start"));
    assert!(svg.contains(&format!("p99 = {} ms", r.lag.as_ref().unwrap().p99_ms)));
    std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
}

#[test]
fn plot_to_missing_directory_is_an_error() {
    let r = analyze(&hundred());
    let dir = temp_dir("missing");
    assert!(write_plot(&r, &dir.join("no/such/dir/lag.svg")).is_err());
    std::fs::remove_dir_all(dir).unwrap();
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "precise-ttl-bench-test-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

proptest! {
    #[test]
    fn accounting_is_consistent(
        lags in proptest::collection::vec(-2_000i64..20_000, 0..200),
        dups in 0usize..20,
    ) {
        let (planted, mut removals) = expired_after(
            lags.iter().enumerate().map(|(i, &lag)| (format!("k{i}"), START + (i as i64) * 37, lag)),
        );
        for i in 0..dups.min(lags.len()) {
            removals.push(removal(&format!("k{i}"), START + 999_999));
        }
        let r = analyze(&inputs(planted, removals));
        let n = lags.len() as u64;
        prop_assert_eq!(r.counts.deleted, n);
        prop_assert_eq!(r.counts.duplicate_removals, dups.min(lags.len()) as u64);
        prop_assert_eq!(r.per_second.iter().map(|s| s.deletions).sum::<u64>(), n);
        prop_assert_eq!(r.lag_histogram.iter().map(|b| b.count).sum::<u64>(), n);
        let early = lags.iter().filter(|l| **l < 0).count();
        prop_assert_eq!(r.wrong.len(), early);
        if let Some(l) = &r.lag {
            prop_assert!(l.p50_ms <= l.p90_ms && l.p90_ms <= l.p99_ms);
            prop_assert!(l.p99_ms <= l.p999_ms && l.p999_ms <= l.max_ms);
            prop_assert_eq!(l.max_ms, lags.iter().copied().max().unwrap_or(0).max(0) as u64);
            prop_assert_eq!(l.early, early as u64);
        }
    }

    #[test]
    fn behind_exactly_when_an_item_waited_over_a_second_and_its_parts_add_up(
        lags in proptest::collection::vec(0i64..3_000, 1..200),
        hot_every in 2usize..5,
    ) {
        let mut planted = Vec::new();
        let mut removals = Vec::new();
        for (i, lag) in lags.iter().enumerate() {
            let key = format!("k{i}");
            let ttl = START + (i as i64) * 37;
            let shard = if i % hot_every == 0 { 0 } else { 1 + (i % 3) as u16 };
            planted.push(Planted { shard: Some(shard), ..expire(&key, ttl) });
            removals.push(removal(&key, ttl + lag));
        }
        let r = analyze(&Inputs { hot_shard: Some(0), ..inputs(planted, removals) });
        let late = lags.iter().any(|l| *l > precise_ttl_bench::BEHIND_AFTER_MS);
        prop_assert_eq!(r.behind.is_some(), late);
        if let Some(b) = &r.behind {
            prop_assert!(b.deletions <= r.counts.deleted);
            prop_assert!(b.periods >= 1);
            prop_assert!(b.seconds * 1000.0 <= (b.to_ms - b.from_ms) as f64 + 1e-6);
        }
        let (hot, others) = (r.hot_shard.unwrap(), r.other_shards.unwrap());
        prop_assert_eq!(hot.items + others.items, lags.len() as u64);
        prop_assert_eq!(hot.max_ms.max(others.max_ms), r.lag.unwrap().max_ms);
    }
}

#[test]
fn percentiles_stay_right_for_lags_of_seconds() {
    // 100 lags of 1..=100 s: the histogram must grow past its initial 2 s bound.
    let (planted, removals) =
        expired_after((1..=100i64).map(|i| (format!("s{i:03}"), START + i, i * 1000)));
    let lag = analyze(&inputs(planted, removals)).lag.unwrap();
    let near = |got: u64, want: u64| got.abs_diff(want) <= want / 500 + 1;
    assert!(near(lag.p50_ms, 50_000), "{lag:?}");
    assert!(near(lag.p99_ms, 99_000), "{lag:?}");
    assert_eq!(lag.max_ms, 100_000);
    assert!((lag.mean_ms - 50_500.0).abs() < 1.0, "{lag:?}");
}

/// 4 shards; shard 0 gets half the items and they wait 2 s, the others 50 ms.
fn skewed(hot_shard: Option<u16>) -> Inputs {
    let mut planted = Vec::new();
    let mut removals = Vec::new();
    for i in 0..400i64 {
        let key = format!("s{i:03}");
        let ttl = START + 5_000 + i * 10;
        let shard = if i % 2 == 0 { 0 } else { 1 + (i % 3) as u16 };
        planted.push(Planted {
            shard: Some(shard),
            ..expire(&key, ttl)
        });
        removals.push(removal(&key, ttl + if shard == 0 { 2_000 } else { 50 }));
    }
    Inputs {
        hot_shard,
        raw_batch_per_s: Some(40.0),
        ..inputs(planted, removals)
    }
}

#[test]
fn a_hot_shards_lag_and_the_others_are_reported_apart() {
    let r = analyze(&skewed(Some(0)));
    let (hot, others) = (
        r.hot_shard.clone().unwrap(),
        r.other_shards.clone().unwrap(),
    );
    assert_eq!((hot.shard, hot.items, hot.deleted), (Some(0), 200, 200));
    assert_eq!((hot.p99_ms, hot.max_ms), (2_000, 2_000));
    assert_eq!((others.shard, others.items, others.max_ms), (None, 200, 50));
    assert!(hot.bound.is_none(), "no capacity, no bound");
    let md = r.to_markdown();
    assert!(md.contains("| hot shard: lag p50 / p99 / max | 2000 / 2000 / 2000 ms (shard 0, 200 of 200 items deleted) |"), "{md}");
    assert!(
        md.contains("| other shards: lag p50 / p99 / max | 50 / 50 / 50 ms"),
        "{md}"
    );
    let json: serde_json::Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
    assert_eq!(json["hot_shard"]["p99_ms"], 2_000);
    assert_eq!(json["other_shards"]["items"], 200);
    let uniform = analyze(&skewed(None));
    assert!(uniform.hot_shard.is_none() && uniform.other_shards.is_none());
    let json: serde_json::Value = serde_json::from_str(&uniform.to_json().unwrap()).unwrap();
    assert!(
        json.get("hot_shard").is_none(),
        "absent from a uniform run's JSON"
    );
}

#[test]
fn the_deletion_rate_while_behind_is_against_the_raw_rate() {
    // The hot items wait 2 s: behind from the first one's TTL + 1 s to the last one's deletion.
    let r = analyze(&skewed(Some(0)));
    let b = r.behind.clone().expect("items waited over 1 s");
    assert_eq!(b.periods, 1);
    assert_eq!(
        (b.from_ms, b.to_ms),
        (START + 6_000, START + 5_000 + 3_980 + 2_000)
    );
    // Every deletion from 6 s to 10.98 s: hot ones from 7 s, the others' all along.
    assert!(b.deletions > 300, "{b:?}");
    let rate = b.deletions_per_second.unwrap();
    assert!((rate - b.deletions as f64 / 4.98).abs() < 0.1, "{b:?}");
    assert_eq!(b.raw_batch_per_s, Some(40.0));
    assert_eq!(b.ratio_to_raw, Some((rate / 40.0 * 100.0).round() / 100.0));
    assert!(
        r.to_markdown()
            .contains("× this run's raw PartiQL batch rate (40/s)")
    );
    assert!(
        analyze(&hundred()).behind.is_none(),
        "lags of 100 ms: never behind"
    );
    let json: serde_json::Value =
        serde_json::from_str(&analyze(&hundred()).to_json().unwrap()).unwrap();
    assert!(json.get("behind").is_none());
}
